//! `dryml`: the crate DRYML Rust notebooks link (`use dryml::...` works with no set-up). It
//! brings DRYML, IPyExperiments and TOMA to Rust cells.
//!
//! The map, one module per part:
//!
//! - **Objects and repos** ([`objects`]): [`Object`]s that know their definition and save to one
//!   file each, [`Repo`]s of them indexed by definition, [`Selector`]s that query them.
//! - **Compute** ([`compute`]): [`Compute`] runs a closure in a sandbox (a forked child holding a
//!   context from the machine's pool, everything released when it ends), sweeps definitions
//!   into a repo, and sends the same work to Slurm ([`compute::slurm`]). Contexts and their
//!   request grammar are in [`compute::context`].
//! - **Data** ([`data`]): [`Dataset`](data::Dataset)s, lazy and re-iterable, plain, supervised or
//!   indexed, batched or not, with `ndarray` leaves; [`metrics`] that score any model's
//!   predictions on them.
//! - **Models** ([`models`]): models of any framework that take and give datasets, with the
//!   training cursor that lets a killed training resume.
//! - **Batching** ([`batch`]): TOMA's loops that retry with a smaller batch on out of memory
//!   and remember the size that worked.
//! - **Experiments** ([`experiment`]): what the last `%%experiment` measured, as a value.
//! - **Displays and plots** ([`display`], [`plot`]): outputs that redraw in place, input from the
//!   user, the interrupt, tables, and inline SVG plots.
//! - **Widgets** ([`widgets`]): Jupyter comms, sliders, dropdowns, buttons, a progress bar for
//!   any iterator and `interact`, whose values reach the notebook's code while cells run.
//!
//! The names a cell uses most are also at the root:
//!
//! ```
//! use dryml::compute::context::Requests;
//! use dryml::Compute;
//!
//! let reqs = Requests::parse("num_cpus=1").unwrap();
//! let answer = Compute::new(&reqs).run(|| 6 * 7).unwrap();
//! assert_eq!(answer, 42);
//! ```
#![warn(missing_docs)]

// The derive's expansion names `::dryml`, which must resolve inside this crate too (only the
// tests derive here, so a plain build finds it unused).
#[allow(unused_extern_crates)]
extern crate self as dryml;

pub mod batch;
pub mod compute;
pub mod data;
pub mod display;
pub mod experiment;
pub mod metrics;
pub mod models;
mod notebook;
pub mod objects;
pub mod plot;
pub mod track;
pub mod widgets;

// The bottom layer, a crate of its own that the kernel links too.
use dryml_sys as sys;

#[doc(hidden)]
pub mod __kernel;

pub use compute::set_context;
pub use compute::slurm::{Slurm, SlurmJob};
pub use compute::{Compute, ComputeError};
pub use display::{clear_output, html, input, interrupted, Html};
pub use notebook::{shell, timeit};
// The trait and its derive share the name, as serde's do: `use dryml::Object` brings both.
pub use dryml_derive::Object;
pub use objects::{load_object, load_object_as, save_object, Build, Meta, Object, ObjectDef, Repo, Selector, State};
// For `json!` in selectors and arguments without another dependency.
pub use serde_json;
