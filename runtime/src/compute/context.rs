//! Resource requests, DRYML's `{'tf': {'gpu/0': 0.5}}`, in one grammar for cells and magics.
//!
//! The text form is what `%context` takes: framework names, each followed by its `key=value`
//! pairs, e.g. `tf gpu/0=0.5 torch num_gpus=0`. Keys are `num_cpus` and `num_gpus` (whole numbers,
//! -1 meaning all that remain fully free) and `cpu/<i>` and `gpu/<i>` (a fraction in (0, 1]).
//! Pairs before any framework name are `default`'s: `num_cpus=4` is `default num_cpus=4`.
//! Errors carry the index of the offending token so callers can point at it.
//!
//! A [`Context`] is what a process was given: each framework's devices and shares. It travels
//! in the `DRYML_CONTEXT` environment variable, so a process, its sandboxes and the kernel agree
//! on it; [`current`] reads it and [`context_check`] compares it with requirements, failing with
//! DRYML's errors.
//!
//! ```
//! use dryml::compute::context::{context_check, Requests};
//!
//! let reqs = Requests::parse("tf gpu/0=0.5 torch num_cpus=2").unwrap();
//! assert_eq!(reqs.get("torch").unwrap().num_cpus, Some(2));
//! // A bad token is named, with its place.
//! let e = Requests::parse("tf gpu/0=2").unwrap_err();
//! assert_eq!(e.token, Some(1));
//! // The same requests built in Rust, checked alike.
//! let built = Requests::build().framework("tf").gpu(0, 0.5).framework("torch").num_cpus(2).done().unwrap();
//! assert_eq!(built, reqs);
//! assert!(Requests::build().gpu(0, 2.0).done().is_err());
//! // Outside `%context` and sandboxes there is no context: DRYML's `NoContextError`.
//! assert!(context_check(&reqs).is_err());
//! ```

use crate::compute::devices::{short, Machine};
use std::collections::BTreeMap;
use std::fmt;

pub use crate::compute::devices::{Device, Kind};

mod builder;
mod requests;
pub use builder::RequestsBuilder;
pub use requests::{Request, RequestError, Requests, DEFAULT_FRAMEWORK};

/// The environment variable holding a process's context.
pub use crate::sys::protocol::CONTEXT_ENV;

/// What one process holds: per framework, devices and the share of each.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Context {
    /// Each framework and the devices it holds, with its share of each.
    pub frameworks: Vec<(String, Vec<(Device, f64)>)>,
}

/// DRYML's context errors, by the names DRYML gives them.
#[derive(Debug, Clone, PartialEq)]
pub enum ContextError {
    /// No context is set in this process.
    NoContext,
    /// The context does not satisfy the requirements (DRYML's message and the requirements).
    Incompatible {
        /// The requirements, as text.
        requirements: String,
        /// The context there is.
        context: String,
        /// What it lacks.
        why: String,
    },
    /// An existing context was to be used but does not fit.
    WrongContext {
        /// The requirements, as text.
        requirements: String,
        /// The context there is.
        context: String,
        /// What it lacks.
        why: String,
    },
    /// `set_context` when one is already set.
    AlreadyActive {
        /// The context already set.
        context: String,
    },
    /// The pool cannot meet the request.
    ResourcesUnavailable(String),
}

impl ContextError {
    /// DRYML's exception name.
    pub fn name(&self) -> &'static str {
        match self {
            ContextError::NoContext => "NoContextError",
            ContextError::Incompatible { .. } => "ContextIncompatibilityError",
            ContextError::WrongContext { .. } => "WrongContextError",
            ContextError::AlreadyActive { .. } => "ContextAlreadyActiveError",
            ContextError::ResourcesUnavailable(_) => "ResourcesUnavailableError",
        }
    }
}

impl ContextError {
    /// The message without the exception name (a cell error's `evalue`).
    pub fn message(&self) -> String {
        match self {
            ContextError::NoContext => {
                "no context is set in this process (set one with %context or dryml::set_context)".into()
            }
            ContextError::Incompatible { requirements, context, why } => {
                format!("Context doesn't satisfy requirements {requirements} ({why}; the context is {context})")
            }
            ContextError::WrongContext { requirements, context, why } => {
                format!("the existing context ({context}) doesn't satisfy requirements {requirements} ({why})")
            }
            ContextError::AlreadyActive { context } => format!(
                "this process already has a context ({context}); a context is set once per process \
                 (in a notebook, %context --restart REQS replaces it by restarting the process)"
            ),
            ContextError::ResourcesUnavailable(why) => why.clone(),
        }
    }
}

impl fmt::Display for ContextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name(), self.message())
    }
}

impl std::error::Error for ContextError {}

impl Context {
    /// The devices of one framework.
    pub fn get(&self, framework: &str) -> Option<&[(Device, f64)]> {
        self.frameworks.iter().find(|(f, _)| f == framework).map(|(_, d)| d.as_slice())
    }

    /// Every device any framework holds, with the summed share.
    pub fn devices(&self) -> BTreeMap<Device, f64> {
        let mut out = BTreeMap::new();
        for (_, ds) in &self.frameworks {
            for &(d, s) in ds {
                *out.entry(d).or_insert(0.0) += s;
            }
        }
        out
    }

    /// Why the context does not satisfy `reqs`, if it does not. Keys not given ask for nothing;
    /// `num_*` counts the devices held (of any share); `-1` asks for nothing beyond the framework.
    pub fn unmet(&self, reqs: &Requests) -> Option<String> {
        for (fw, r) in &reqs.frameworks {
            let Some(held) = self.get(fw) else {
                return Some(format!("it has no `{fw}` framework"));
            };
            for (kind, specific, num, key) in
                [(Kind::Cpu, &r.cpus, r.num_cpus, "num_cpus"), (Kind::Gpu, &r.gpus, r.num_gpus, "num_gpus")]
            {
                let count = held.iter().filter(|(d, _)| d.kind == kind).count();
                if let Some(n) = num.filter(|n| *n > 0) {
                    if (count as i64) < n {
                        return Some(format!("{fw} asks for {key}={n}, it holds {count}"));
                    }
                }
                for (&i, &share) in specific {
                    let d = Device { kind, index: i };
                    let have: f64 = held.iter().filter(|(x, _)| *x == d).map(|(_, s)| s).sum();
                    if have + 1e-9 < share {
                        return Some(format!("{fw} asks for {d}={share}, it holds {}", short(have)));
                    }
                }
            }
        }
        None
    }

    /// The compact form carried in `DRYML_CONTEXT`: `tf=gpu/0:0.5,cpu/1:1;torch=`.
    pub fn encode(&self) -> String {
        let fws: Vec<String> = self
            .frameworks
            .iter()
            .map(|(fw, ds)| {
                let items: Vec<String> = ds.iter().map(|(d, s)| format!("{d}:{s}")).collect();
                format!("{fw}={}", items.join(","))
            })
            .collect();
        fws.join(";")
    }

    /// Reads [`Context::encode`]'s text back.
    pub fn decode(text: &str) -> Result<Context, String> {
        let mut ctx = Context::default();
        for part in text.split(';').filter(|p| !p.is_empty()) {
            let (fw, items) = part.split_once('=').ok_or_else(|| format!("bad context part `{part}`"))?;
            let mut ds = Vec::new();
            for item in items.split(',').filter(|i| !i.is_empty()) {
                let (d, s) = item.split_once(':').ok_or_else(|| format!("bad context item `{item}`"))?;
                let share: f64 = s.parse().map_err(|_| format!("bad share in `{item}`"))?;
                ds.push((d.parse()?, share));
            }
            ctx.frameworks.push((fw.to_string(), ds));
        }
        Ok(ctx)
    }

    /// The environment a process of this context gets: the context itself, the GPUs CUDA may
    /// see (in PCI bus order, as the kernel starts the child with `CUDA_DEVICE_ORDER=PCI_BUS_ID`),
    /// and thread counts for OpenMP, MKL, rayon and TensorFlow.
    pub fn env(&self, machine: &Machine) -> Vec<(String, String)> {
        let devices = self.devices();
        let gpus: Vec<String> = devices
            .keys()
            .filter(|d| d.kind == Kind::Gpu)
            .filter_map(|d| machine.gpu(d.index).map(|g| g.cuda_id.clone()))
            .collect();
        let mut env =
            vec![(CONTEXT_ENV.to_string(), self.encode()), ("CUDA_VISIBLE_DEVICES".to_string(), gpus.join(","))];
        if let Some(threads) = self.threads() {
            let threads = threads.to_string();
            for name in ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"] {
                env.push((name.to_string(), threads.clone()));
            }
        }
        if self.get("tf").is_some() {
            // TensorFlow otherwise maps all of a GPU's memory at start-up.
            env.push(("TF_FORCE_GPU_ALLOW_GROWTH".to_string(), "true".to_string()));
        }
        if let Some(fraction) = self.torch_memory_fraction() {
            let user = std::env::var(TORCH_ALLOC_ENV).ok();
            env.push((TORCH_ALLOC_ENV.to_string(), torch_alloc_conf(user.as_deref(), fraction)));
        }
        env
    }

    /// The part of each GPU's memory libtorch's caching allocator may take: the smallest share
    /// of a GPU held by torch (or, where torch is not named, by `default`), when below one.
    /// libtorch caps every device of a process alike, hence the smallest.
    pub fn torch_memory_fraction(&self) -> Option<f64> {
        let held = self.get("torch").or_else(|| self.get(DEFAULT_FRAMEWORK))?;
        let smallest = held.iter().filter(|(d, _)| d.kind == Kind::Gpu).map(|(_, s)| *s).reduce(f64::min)?;
        (smallest < 1.0).then_some(smallest)
    }

    /// The thread count for compute libraries: the CPU shares held, rounded up; None when the
    /// context holds no CPU.
    pub fn threads(&self) -> Option<usize> {
        let share: f64 = self.devices().iter().filter(|(d, _)| d.kind == Kind::Cpu).map(|(_, s)| s).sum();
        (share > 0.0).then(|| (share.ceil() as usize).max(1))
    }

    /// The logical CPUs to pin to: every CPU held, of any share. Empty means no pinning.
    pub fn cpu_set(&self) -> Vec<u32> {
        self.devices().keys().filter(|d| d.kind == Kind::Cpu).map(|d| d.index).collect()
    }

    /// The CUDA device number `gpu/<index>` has inside a process of this context.
    pub fn cuda_device(&self, gpu: u32) -> Option<usize> {
        self.devices().keys().filter(|d| d.kind == Kind::Gpu).position(|d| d.index == gpu)
    }

    /// The share of `gpu/<index>` a framework may use: for the framework's own memory limit,
    /// since no framework lets another process enforce one.
    pub fn gpu_share(&self, framework: &str, gpu: u32) -> Option<f64> {
        self.get(framework)?.iter().find(|(d, _)| *d == Device::gpu(gpu)).map(|(_, s)| *s)
    }
}

/// libtorch's allocator settings, read when CUDA starts in a process.
const TORCH_ALLOC_ENV: &str = "PYTORCH_CUDA_ALLOC_CONF";

/// `PYTORCH_CUDA_ALLOC_CONF` capping each GPU at `fraction` of its memory (libtorch 2.13's
/// `per_process_memory_fraction`), keeping the user's other settings.
fn torch_alloc_conf(user: Option<&str>, fraction: f64) -> String {
    let mut parts: Vec<String> = user
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.starts_with("per_process_memory_fraction"))
        .map(str::to_string)
        .collect();
    parts.push(format!("per_process_memory_fraction:{fraction}"));
    parts.join(",")
}

/// The table form: `tf: cpu/0, gpu/1=0.5; torch: cpu/1`.
impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.frameworks.is_empty() {
            return f.write_str("(empty)");
        }
        for (k, (fw, ds)) in self.frameworks.iter().enumerate() {
            if k > 0 {
                f.write_str("; ")?;
            }
            let items: Vec<String> =
                ds.iter().map(|(d, s)| if *s >= 1.0 { d.to_string() } else { format!("{d}={}", short(*s)) }).collect();
            if items.is_empty() {
                write!(f, "{fw}: no devices")?;
            } else {
                write!(f, "{fw}: {}", items.join(", "))?;
            }
        }
        Ok(())
    }
}

/// This process's context, if one was set (by `%context`, [`crate::set_context`], or a sandbox).
pub fn current() -> Option<Context> {
    let text = std::env::var(CONTEXT_ENV).ok()?;
    Context::decode(&text).ok()
}

/// DRYML's `context_check`: fails unless this process's context satisfies `reqs`.
pub fn context_check(reqs: &Requests) -> Result<(), ContextError> {
    let ctx = current().ok_or(ContextError::NoContext)?;
    match ctx.unmet(reqs) {
        None => Ok(()),
        Some(why) => Err(ContextError::Incompatible { requirements: reqs.to_string(), context: ctx.to_string(), why }),
    }
}

#[cfg(test)]
mod tests;
