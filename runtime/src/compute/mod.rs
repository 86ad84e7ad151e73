//! Compute: contexts (what a process may use), sandboxes (a closure run in a forked child that
//! holds a context and gives everything back when it ends), sweeps (many definitions trained in
//! parallel into a repo) and Slurm (the same, as jobs on a cluster).
//!
//! [`Compute`] is the one entry point: its builder methods set the options of DRYML's
//! `compute_context` (timeout, memory limit, `use_existing`, `dont_create`), its `run` methods
//! run a closure ([`Compute::run`]), a closure that updates an object ([`Compute::run_updating`],
//! [`Compute::run_object`]) or a sweep ([`Compute::sweep`]), and [`Compute::on`] sends the same
//! work to Slurm. `%%compute` and `%%sweep` cells are built on the same calls.
//!
//! ```
//! use dryml::compute::context::Requests;
//! use dryml::Compute;
//!
//! let reqs = Requests::parse("default num_cpus=1").unwrap();
//! let big: Vec<u64> = (0..1_000).collect();
//! // The sandbox is a fork: it sees `big` without a copy, and only the sum comes back.
//! let sum = Compute::new(&reqs).run(|| big.iter().sum::<u64>()).unwrap();
//! assert_eq!(sum, 499_500);
//! // Its context was released when it ended.
//! assert!(dryml::compute::last_report().unwrap().pid.is_some());
//! ```

// Modules marked `allow(missing_docs)` are the kernel's side (`__kernel` re-exports them).
#[allow(missing_docs)]
pub(crate) mod apply;
#[allow(missing_docs)]
pub(crate) mod carry;
#[allow(missing_docs)]
pub(crate) mod cell;
pub mod context;
pub(crate) mod devices;
pub(crate) mod ending;
pub(crate) mod outcome;
#[allow(missing_docs)]
pub(crate) mod pool;
pub(crate) mod sandbox;
pub mod slurm;
pub mod sweep;

pub use outcome::{last_report, ComputeError, SandboxReport};
pub use pool::set_context;
pub use sandbox::Compute;
