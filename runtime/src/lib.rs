//! `dryml`: the crate DRYML Rust notebooks link (`use dryml::...` works with no set-up).
//!
//! It carries what the kernel offers to cells (rich displays that update in place,
//! `clear_output`, line input from the notebook, the interrupt flag, the figures of the last
//! experiment) and DRYML's model management: objects that save and load by definition
//! ([`object`]), repos of them indexed by definition ([`repo`]), compute contexts over a shared
//! pool of CPUs and GPUs ([`context`], [`pool`]), sandboxes that run a closure in a forked
//! child under a context ([`compute`]), batching loops that shrink on out of memory
//! ([`batch`]), and plots that redraw in place ([`plot`]). [`fs`] and [`procfs`] are the file and `/proc` helpers the kernel shares.

// The derive's expansion names `::dryml`, which must resolve inside this crate too (only the
// tests derive here, so a plain build finds it unused).
#[allow(unused_extern_crates)]
extern crate self as dryml;

pub mod batch;
pub mod carry;
pub mod cluster;
pub mod compute;
pub mod context;
pub mod devices;
pub mod ending;
pub mod display;
pub mod experiment;
pub mod fs;
pub mod interrupt;
pub mod object;
pub mod plot;
pub mod pool;
pub mod procfs;
pub mod protocol;
pub mod repo;
pub mod slurm;
pub mod sweep;
pub mod units;

pub use display::{clear_output, html, Html};
pub use compute::{compute, Compute, ComputeError};
pub use cluster::{Slurm, SlurmJob};
// DRYML spells it `dryml.context.set_context`; it claims from the pool, so it lives there.
pub use pool::set_context;
// The trait and its derive share the name, as serde's do: `use dryml::Object` brings both.
pub use dryml_derive::Object;
pub use object::{load_object, save_object, Build, Meta, Object, ObjectDef, State};
pub use repo::{Repo, Selector};
pub use sweep::sweep;
// For `json!` in selectors and arguments without another dependency.
pub use serde_json;
pub use interrupt::interrupted;

/// Memory limits for the process (TOMA's `cpu_memory`).
pub mod memory {
    pub use crate::batch::set_cpu_memory_limit;
}

/// Reads a line typed by the notebook user (Jupyter's `input_request`).
///
/// Outside the kernel this reads standard input.
///
/// # Panics
/// When the user interrupts the cell before or while it waits: the kernel then stops waiting for
/// the answer, and the cell ends as interrupted with the notebook's variables kept.
pub fn input(prompt: &str) -> String {
    use std::io::{BufRead, Write};
    let stop = || {
        if interrupted() {
            panic!("interrupted while waiting for input to {prompt:?}");
        }
    };
    stop();
    if std::env::var_os("EVCXR_IS_RUNTIME").is_some() {
        // evcxr's input protocol: a request line on stdout, the answer on stdin.
        println!("EVCXR_INPUT_REQUEST:{prompt}");
    } else {
        print!("{prompt}");
    }
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    stop();
    line.trim_end_matches(['\n', '\r']).to_string()
}
