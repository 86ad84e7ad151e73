//! The kernel's side of `dryml`: what the kernel binary and the code it generates for magics
//! use. Hidden from the docs and not for cells: it changes with the kernel.

#![allow(missing_docs)]

mod shim;
#[cfg(test)]
mod tests;

pub use crate::__dryml_compute_cell as compute_cell;
pub use crate::__dryml_job_cell as job_cell;

/// How a notebook variable crosses into a sandbox or a job and back.
pub mod carry {
    pub use crate::compute::carry::*;
}

/// What a `%%compute` body and its notebook side exchange, and how a sandbox ends.
pub mod cell {
    pub use super::shim::{failed, show, show_result, sweep, Spec};
    pub use crate::compute::cell::{run_cell, where_to_run, Cell, CellError, CellResult, Shown};
    pub use crate::compute::ending::Keep;
    pub use crate::compute::outcome::{print_report, raise, record_here};
}

/// The machine's resource pool and devices.
pub mod pool {
    pub use crate::compute::devices::{short, Device, GpuInfo, Kind, Machine};
    pub use crate::compute::pool::{Claim, Pool};
}

/// A context applied to a process.
pub mod context {
    pub use crate::compute::apply::pin_threads;
}

/// Slurm's commands and job directories, the notebook following a job, the node's side.
pub mod slurm {
    pub use crate::compute::slurm::code::{run_library, ship_cell};
    pub use crate::compute::slurm::sbatch::*;
    /// Sweeps as job arrays.
    pub mod array {
        pub use crate::compute::slurm::array::{status, submit, task_main, wait};
    }
    /// A job's directory and the node's side of a `%%compute --on slurm` cell.
    pub mod job {
        pub use crate::compute::slurm::job::*;
    }
    /// The notebook following a job.
    pub mod follow {
        pub use crate::compute::slurm::follow::*;
    }
}

/// Where an experiment's networks write TensorBoard runs, kept in the kernel binary, which
/// exports it to every cell.
pub mod tensorboard {
    pub use crate::models::tensorboard::{ambient_into, set_ambient};
}

/// The child's registry of comms, which the kernel binary exports to every cell.
pub mod comm {
    pub use crate::widgets::hub::{deliver, register, unregister, Callback};
}

/// The table of batch sizes the kernel binary exports to every cell.
pub mod batch {
    pub use crate::batch::table::{table_get, table_record};
}

/// The lines a cell prints for the kernel.
pub mod display {
    pub use crate::display::wire::{json_string, raise_error, strip_tags, DATA_MIME};
}

/// Object files and definitions as the kernel's `%repo` reads them.
pub mod objects {
    pub use crate::objects::object::{
        from_bytes, from_record, read_definition, record, to_bytes, uuid_v4, FILE_VERSION,
    };
}

/// What a cell's `!` lines, `%%bash` and `%timeit` lines call.
pub mod shell {
    pub use crate::notebook::shell::{cell, line};
}

/// `%timeit`'s printing run.
pub mod timeit {
    pub use crate::notebook::timeit::line;
}
