//! Compute on a Slurm cluster, from a cell's code: [`Compute::on`](crate::compute::Compute::on)
//! with a [`Slurm`] runs a closure as a job, submits one to follow later ([`SlurmJob`]), or
//! sweeps definitions as a job array, with the same requests, timeout and memory limit as a
//! local sandbox.
//!
//! The defaults come from `%slurm` (the `DRYML_SLURM_*` variables); a [`Slurm`] changes them for
//! its jobs. In a notebook, `%%compute --on slurm` and `%%sweep --on slurm` do the same for a
//! whole cell.
//!
//! ```no_run
//! use dryml::compute::context::Requests;
//! use dryml::compute::slurm::Slurm;
//! use dryml::Compute;
//!
//! let reqs = Requests::parse("num_cpus=2").unwrap();
//! // The closure may not capture: what it needs is its input.
//! let sum: u64 = Compute::new(&reqs).on(Slurm::new().partition("debug")).run(10u64, |n| (1..=n).sum()).unwrap();
//! assert_eq!(sum, 55);
//! ```

pub(crate) mod code;
// Modules marked `allow(missing_docs)` are the kernel's side (`__kernel` re-exports them).
#[allow(missing_docs)]
pub(crate) mod array;
#[allow(missing_docs)]
pub(crate) mod follow;
#[allow(missing_docs)]
pub(crate) mod job;
#[allow(missing_docs)]
pub(crate) mod sbatch;

pub use code::{OnSlurm, Slurm, SlurmJob};
pub(crate) use sbatch::*;
