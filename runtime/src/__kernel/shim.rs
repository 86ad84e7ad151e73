//! The fixed shims the kernel's magics expand to: a cell's body goes into a macro here, which
//! the compiler checks in this crate's tests, and the kernel only fills in names and options.
//!
//! Each notebook variable a body names is shadowed in the sandbox or job by a bitwise copy it
//! owns (the fork has its own memory and ends without dropping them), so the body may move or
//! change them and the notebook's stay as they were; `--update` variables come back through
//! [`super::carry`]. The carrying is picked per variable by autoref dispatch, which needs the
//! concrete type where the code is expanded: hence macros and not generic functions. Paths are
//! written out in full, since a `use` in the expansion would shadow a notebook item of the same
//! name in the body (the carrying traits are imported as `_`, which names nothing).

use crate::compute::context::Requests;
use crate::compute::{cell::CellResult, cell::Shown, Compute, ComputeError};
use crate::objects::{Build, Object, ObjectDef};
use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// A `%%compute` line's options, as the kernel writes them: every field, so a field added here
/// and not by the kernel fails to compile in the kernel's own tests.
pub struct Spec {
    pub requests: &'static str,
    pub timeout: Option<f64>,
    pub mem_limit: Option<u64>,
    pub verbose: bool,
    pub use_existing: bool,
    pub dont_create: bool,
}

impl Spec {
    /// The compute these options ask for; the kernel checked the requests' grammar already.
    pub fn compute(&self) -> Compute {
        let reqs = Requests::parse(self.requests).expect("checked by the kernel");
        let mut c = Compute::new(&reqs).verbose(self.verbose).use_existing(self.use_existing);
        c = c.dont_create(self.dont_create);
        if let Some(t) = self.timeout {
            c = c.timeout(Duration::from_secs_f64(t));
        }
        if let Some(m) = self.mem_limit {
            c = c.mem_limit(m);
        }
        c
    }
}

/// A cell's value from a call that may fail: its `Debug` form, or the error ends the cell.
pub fn show<T: fmt::Debug>(r: Result<T, ComputeError>) -> Shown {
    match r {
        Ok(v) => Shown(format!("{v:?}")),
        Err(e) => failed(&e),
    }
}

/// A sandbox's or job's results: the value it showed, or the error ends the cell.
pub fn show_result(r: Result<CellResult, ComputeError>) -> Shown {
    match r {
        Ok(mut r) => r.shown(),
        Err(e) => failed(&e),
    }
}

/// Ends the cell as `e` (the variables stay): the cell shows nothing.
pub fn failed(e: &ComputeError) -> Shown {
    crate::compute::outcome::raise(e);
    Shown(String::new())
}

/// A `%%sweep` cell: `train` run on each definition in sandboxes of `requests`.
pub fn sweep<T, M, F>(requests: &'static str, defs: &[ObjectDef], repo: &str, train: F) -> Shown
where
    T: Object + Build,
    M: Serialize,
    F: Fn(&mut T) -> M + Sync,
{
    let reqs = Requests::parse(requests).expect("checked by the kernel");
    show(Compute::new(&reqs).sweep(defs, repo, train))
}

/// A `%%compute` cell: `compute_cell!(spec; [names the body uses] [--update names];
/// sandbox|here_or_sandbox show|quiet; { body })`, its value a [`Shown`]. `here_or_sandbox`
/// runs the body as a plain block when a context that fits is already held.
#[doc(hidden)]
#[macro_export]
macro_rules! __dryml_compute_cell {
    ($spec:expr; [$($v:ident)*] [$($u:ident)*]; sandbox $shows:ident; $body:block) => {{
        #[allow(unused_imports)]
        use $crate::__kernel::carry::prelude::*;
        let compute = ($spec).compute();
        $crate::__dryml_compute_cell!(@sandbox compute; [$($v)*] [$($u)*]; $shows; $body)
    }};
    ($spec:expr; [$($v:ident)*] [$($u:ident)*]; here_or_sandbox $shows:ident; $body:block) => {{
        #[allow(unused_imports)]
        use $crate::__kernel::carry::prelude::*;
        let compute = ($spec).compute();
        match $crate::__kernel::cell::where_to_run(&compute) {
            ::std::result::Result::Err(e) => $crate::__kernel::cell::failed(&e),
            ::std::result::Result::Ok(::std::option::Option::Some(context)) => {
                let t0 = ::std::time::Instant::now();
                #[allow(unused_variables)]
                let value = $body;
                $crate::__kernel::cell::record_here(context, t0.elapsed());
                $crate::__kernel::cell::print_report();
                $crate::__dryml_compute_cell!(@here $shows value)
            }
            ::std::result::Result::Ok(::std::option::Option::None) => {
                $crate::__dryml_compute_cell!(@sandbox compute; [$($v)*] [$($u)*]; $shows; $body)
            }
        }
    }};
    (@sandbox $compute:ident; [$($v:ident)*] [$($u:ident)*]; $shows:ident; $body:block) => {{
        // A body that always panics leaves the rest unreachable, which is no concern of the user.
        #[allow(unreachable_code, unused_variables)]
        let result = $crate::__kernel::cell::run_cell(
            &$compute,
            |out: &mut $crate::__kernel::cell::Cell| -> ::std::result::Result<(), $crate::__kernel::cell::CellError> {
                $(
                    #[allow(unused_mut, unused_variables)]
                    let mut $v = unsafe { ::std::ptr::read(&$v) };
                )*
                // Dropped first if the body leaves early: the sandbox ends before the copies drop.
                let _keep = $crate::__kernel::cell::Keep::new();
                // An object brought back goes into compute in the sandbox only.
                $( (&mut &mut $crate::__kernel::carry::Hook(&mut $u)).load_compute().map_err($crate::__kernel::cell::CellError::new)?; )*
                #[allow(unused_variables)]
                let value = $body;
                $(
                    (&mut &mut $crate::__kernel::carry::Hook(&mut $u)).save_compute().map_err($crate::__kernel::cell::CellError::new)?;
                    out.update_bytes(stringify!($u), (&&&$crate::__kernel::carry::Out(&$u)).encode());
                )*
                $crate::__dryml_compute_cell!(@send $shows out value);
                out.finish();
                ::std::result::Result::Ok(())
            },
        );
        $crate::__kernel::cell::print_report();
        // Errors end the cell through the kernel (not `?`), after it returns: nothing is lost.
        match result {
            ::std::result::Result::Ok(mut result) => {
                $crate::__dryml_compute_cell!(@take result [$($u)*]);
                result.shown()
            }
            ::std::result::Result::Err(e) => $crate::__kernel::cell::failed(&e),
        }
    }};
    // The `--update` values a sandbox or job sent back, put in the notebook's variables.
    (@take $result:ident [$($u:ident)*]) => {
        $(
            match $result
                .take_bytes(stringify!($u))
                .map_err(|e| e.message())
                .and_then(|b| (&&&$crate::__kernel::carry::In::of(&$u)).decode(&b))
            {
                ::std::result::Result::Ok(v) => $u = v,
                ::std::result::Result::Err(e) => $crate::__kernel::cell::raise(
                    &$crate::ComputeError::Failed(format!("--update {}: {e}", stringify!($u))),
                ),
            }
        )*
    };
    (@send show $out:ident $value:ident) => { $out.show(&$value); };
    (@send quiet $out:ident $value:ident) => {};
    (@here show $value:ident) => { $crate::__kernel::cell::Shown(format!("{:?}", $value)) };
    (@here quiet $value:ident) => { $crate::__kernel::cell::Shown(::std::string::String::new()) };
}

/// A `%%compute --on slurm` or `%%sweep --on slurm` cell: `job_cell!("request json";
/// [input: Type, ...] [--update names]; run DETACH show|quiet | sweep(defs, "repo", DETACH);
/// { body })`. The job's entry is a function of the cell that reads its inputs (it captures
/// nothing), so the cell's library, sent to the node, runs it there; the rest sends the
/// variables and submits. The body starts on the line after the macro's first.
#[doc(hidden)]
#[macro_export]
macro_rules! __dryml_job_cell {
    ($request:literal; [$($n:ident: $t:ty),*] [$($u:ident)*]; $($mode:ident $(($($args:tt)*))?)*; $body:block) => {{
        #[allow(unused_imports)]
        use $crate::__kernel::carry::prelude::*;
        #[allow(unused_mut, unused_variables, unused_braces, unused_imports, dead_code, unreachable_code)]
        extern "C" fn __dryml_job_entry() {
            #[allow(unused_imports)]
            use $crate::__kernel::carry::prelude::*;
            $crate::__kernel::slurm::job::main(|io: &mut $crate::__kernel::slurm::job::Io| -> ::std::result::Result<(), $crate::__kernel::cell::CellError> {
                $(
                    let mut $n: $t = (&&&$crate::__kernel::carry::In::<$t>::new())
                        .decode(&io.input_bytes(stringify!($n))?)
                        .map_err(|e| $crate::__kernel::cell::CellError::new(format!("`{}`: {e}", stringify!($n))))?;
                    let _keep = $crate::__kernel::cell::Keep::new();
                    // An object goes into compute before the body.
                    (&mut &mut $crate::__kernel::carry::Hook(&mut $n)).load_compute().map_err($crate::__kernel::cell::CellError::new)?;
                )*
                #[allow(unused_variables)]
                let value = $body;
                $crate::__dryml_job_cell!(@entry io value [$($u)*] $($mode)*);
                // Ends the job's process here, past the copies of the notebook's variables.
                io.finish()
            });
        }
        // `line!()` is the macro's first line in the library's source, which the job's panics name.
        match $crate::__kernel::slurm::ship_cell(__dryml_job_entry as extern "C" fn() as usize, line!() + 1, $request) {
            #[allow(unused_mut)]
            ::std::result::Result::Ok(mut job) => {
                $( job.input(stringify!($n), stringify!($t), (&&&$crate::__kernel::carry::Out(&$n)).encode()); )*
                $crate::__dryml_job_cell!(@submit job [$($u)*] $($mode $(($($args)*))?)*)
            }
            ::std::result::Result::Err(e) => $crate::__kernel::cell::failed(&e),
        }
    }};
    (@entry $io:ident $value:ident [$($u:ident)*] sweep) => {
        $crate::__kernel::slurm::array::task_main($value);
    };
    (@entry $io:ident $value:ident [$($u:ident)*] run $shows:ident) => {
        $(
            (&mut &mut $crate::__kernel::carry::Hook(&mut $u))
                .save_compute()
                .map_err($crate::__kernel::cell::CellError::new)?;
            $io.update_bytes(stringify!($u), (&&&$crate::__kernel::carry::Out(&$u)).encode())?;
        )*
        $crate::__dryml_job_cell!(@send $shows $io $value);
    };
    (@send show $io:ident $value:ident) => { $io.show(&$value); };
    (@send quiet $io:ident $value:ident) => {};
    (@submit $job:ident [] sweep($defs:expr, $repo:literal, $detach:literal)) => {
        $crate::__kernel::cell::show($crate::__kernel::slurm::array::submit($job, &$defs, $repo, $detach))
    };
    (@submit $job:ident [$($u:ident)*] run(detach) $shows:ident) => {
        $crate::__kernel::cell::show_result($job.run(true))
    };
    (@submit $job:ident [$($u:ident)*] run(wait) $shows:ident) => {
        match $job.run(false) {
            ::std::result::Result::Ok(mut result) => {
                $crate::__dryml_compute_cell!(@take result [$($u)*]);
                result.shown()
            }
            ::std::result::Result::Err(e) => $crate::__kernel::cell::failed(&e),
        }
    };
}
