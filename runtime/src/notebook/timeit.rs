//! `%timeit`: IPython's adaptive timing of a closure. The loop count grows 1, 10, 100, ...
//! until one run takes 0.2 s, then 7 runs of that many loops give the mean and standard
//! deviation per loop, printed as IPython prints them.
//!
//! ```
//! use dryml::timeit::{timeit, Options};
//! let v: Vec<u64> = (0..1000).collect();
//! let r = timeit(Options { number: Some(100), repeat: 3, ..Options::default() }, || v.iter().sum::<u64>());
//! assert_eq!((r.loops, r.all_runs.len()), (100, 3));
//! assert!(r.to_string().contains("per loop (mean ± std. dev. of 3 runs, 100 loops each)"));
//! ```

pub use std::hint::black_box;
use std::time::Instant;

/// What to time and how to print it (`%timeit`'s `-n`, `-r`, `-q`, `-p`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Loops per run; None: chosen so that a run takes at least 0.2 s.
    pub number: Option<u64>,
    /// Runs (7).
    pub repeat: u32,
    /// Print nothing.
    pub quiet: bool,
    /// Significant digits of the figures (3).
    pub precision: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options { number: None, repeat: 7, quiet: false, precision: 3 }
    }
}

/// A timing's figures, as IPython's `TimeitResult` holds them.
#[derive(Clone, PartialEq)]
pub struct TimeitResult {
    /// Loops in each run.
    pub loops: u64,
    /// Runs.
    pub repeat: u32,
    /// Each run's whole time, in seconds.
    pub all_runs: Vec<f64>,
    /// Digits the figures print with.
    pub precision: u32,
}

impl TimeitResult {
    /// Seconds per loop, of each run.
    pub fn timings(&self) -> Vec<f64> {
        self.all_runs.iter().map(|t| t / self.loops as f64).collect()
    }

    /// The mean time per loop, in seconds.
    pub fn average(&self) -> f64 {
        let t = self.timings();
        t.iter().sum::<f64>() / t.len().max(1) as f64
    }

    /// The (population) standard deviation of the time per loop, in seconds.
    pub fn stdev(&self) -> f64 {
        let (t, mean) = (self.timings(), self.average());
        (t.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / t.len().max(1) as f64).sqrt()
    }

    /// The fastest and the slowest run's time per loop.
    pub fn best(&self) -> f64 {
        self.timings().into_iter().fold(f64::INFINITY, f64::min)
    }

    /// The slowest run's time per loop.
    pub fn worst(&self) -> f64 {
        self.timings().into_iter().fold(0.0, f64::max)
    }
}

impl std::fmt::Display for TimeitResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.precision as usize;
        write!(
            f,
            "{} ± {} per loop (mean ± std. dev. of {} run{}, {} loop{} each)",
            format_time(self.average(), p),
            format_time(self.stdev(), p),
            self.repeat,
            if self.repeat == 1 { "" } else { "s" },
            crate::sys::units::grouped(self.loops.min(i64::MAX as u64) as i64),
            if self.loops == 1 { "" } else { "s" },
        )
    }
}

/// IPython's repr, which is what a cell shows as the value of `%timeit -o`.
impl std::fmt::Debug for TimeitResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<TimeitResult : {self}>")
    }
}

/// Times `f` as `%timeit` does. Each call's value goes through [`black_box`], and `f` is reached
/// through it each loop, so the optimiser can neither drop the work nor hoist it out.
pub fn timeit<R>(opts: Options, mut f: impl FnMut() -> R) -> TimeitResult {
    let loops = match opts.number {
        Some(n) => n,
        None => {
            let mut n = 1u64;
            // IPython's rule: 10^k loops for the first k whose run takes 0.2 s.
            while run(&mut f, n) < 0.2 && n < 1_000_000_000 {
                n *= 10;
            }
            n
        }
    };
    let all_runs = (0..opts.repeat.max(1)).map(|_| run(&mut f, loops)).collect();
    TimeitResult { loops, repeat: opts.repeat.max(1), all_runs, precision: opts.precision.max(1) }
}

fn run<R>(f: &mut impl FnMut() -> R, loops: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..loops {
        black_box(black_box(&mut *f)());
    }
    start.elapsed().as_secs_f64()
}

/// A `%timeit` line: times, prints IPython's line (and its caching warning), gives the result.
#[doc(hidden)]
pub fn line<R>(opts: Options, f: impl FnMut() -> R) -> TimeitResult {
    let r = timeit(opts, f);
    if !opts.quiet {
        let (best, worst) = (r.best(), r.worst());
        if worst > 4.0 * best && best > 0.0 && worst > 1e-6 {
            println!(
                "The slowest run took {:.2} times longer than the fastest. This could mean that an intermediate result is being cached.",
                worst / best
            );
        }
        println!("{r}");
    }
    r
}

/// IPython's `_format_time`: `precision` significant digits in s, ms, µs or ns.
pub fn format_time(seconds: f64, precision: usize) -> String {
    if seconds >= 60.0 {
        let mut left = seconds;
        let mut parts = Vec::new();
        for (suffix, len) in [("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0)] {
            let v = (left / len).floor();
            if v > 0.0 {
                left %= len;
                parts.push(format!("{v}{suffix}"));
            }
            if left < 1.0 {
                break;
            }
        }
        return parts.join(" ");
    }
    let order = if seconds > 0.0 { (-(seconds.log10().floor() as i64).div_euclid(3)).min(3) as usize } else { 3 };
    let scaled = seconds * [1.0, 1e3, 1e6, 1e9][order];
    format!("{} {}", format_g(scaled, precision), ["s", "ms", "µs", "ns"][order])
}

/// printf's `%.*g`: `p` significant digits, trailing zeros dropped, exponent form outside
/// 1e-4 ..= 10^p.
fn format_g(x: f64, p: usize) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let p = p.max(1);
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: String| if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if exp < -4 || exp >= p as i32 {
        format!("{}e{}{:02}", strip(mantissa.to_string()), if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        strip(format!("{:.*}", (p as i32 - 1 - exp).max(0) as usize, x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_as_ipython_prints_them() {
        // Python: IPython.core.magics.execution._format_time(t) for each t.
        let table = [
            (1.234e-6, "1.23 µs"),
            (0.5, "500 ms"),
            (2.0, "2 s"),
            (4.2e-8, "42 ns"),
            (1.5e-10, "0.15 ns"),
            (0.0, "0 ns"),
            (999.7e-6, "1e+03 µs"),
            (61.5, "1min 1s"),
            (3725.0, "1h 2min 5s"),
        ];
        for (t, want) in table {
            assert_eq!(format_time(t, 3), want, "{t}");
        }
    }

    #[test]
    fn the_line_and_its_figures() {
        let r = TimeitResult {
            loops: 1000,
            repeat: 7,
            all_runs: vec![1.0e-3, 1.2e-3, 1.0e-3, 1.0e-3, 1.0e-3, 1.0e-3, 0.8e-3],
            precision: 3,
        };
        assert!((r.average() - 1.0e-6).abs() < 1e-15);
        // Each figure in its own unit, as IPython prints them.
        assert_eq!(r.to_string(), "1 µs ± 107 ns per loop (mean ± std. dev. of 7 runs, 1,000 loops each)");
        assert_eq!(format!("{r:?}"), format!("<TimeitResult : {r}>"));
        assert!((r.best() - 0.8e-6).abs() < 1e-15 && (r.worst() - 1.2e-6).abs() < 1e-15);
    }

    #[test]
    fn the_loop_count_fills_a_fifth_of_a_second() {
        let mut calls = 0u64;
        let r = timeit(Options { repeat: 1, ..Options::default() }, || {
            calls += 1;
            std::thread::sleep(std::time::Duration::from_millis(30))
        });
        // 1 loop: 30 ms, 10 loops: 300 ms ≥ 0.2 s, then one run of 10.
        assert_eq!((r.loops, calls), (10, 1 + 10 + 10));
    }
}
