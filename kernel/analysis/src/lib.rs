//! A notebook's Rust analysis behind evcxr's seam ([`evcxr::Analysis`]): the types of a cell's
//! `let`s, completion and hover, on the rust-analyzer crates. [`Local`] analyses in the kernel's
//! own process; [`Client`] in a process that the user's kernels share ([`serve`]), which keeps
//! the analysis's hundreds of MiB out of each kernel and holds what their crates share once.
//! A [`Client`]'s process starts at the notebook's first need of it (a Tab, a hover, a type
//! rustc cannot give); from then a load runs on a thread of its own from the moment a cell's
//! Cargo.toml is written, then primes the first inference (the standard library's names and
//! each dependency's), so a cell waits for neither. Until then a `let` whose type is not written
//! is left to rustc ([`lets`], [`probe`]). [`Beside`] answers completion and hover while a cell
//! runs.

mod beside;
mod client;
mod host;
mod lets;
mod load;
mod local;
mod names;
mod origins;
mod probe;
mod queries;
mod server;
mod wire;

pub use beside::{Beside, Shared};
pub use client::Client;
pub use load::rustc_wrapper_hook;
pub use local::Local;
pub use origins::{explain_dropped, Origins};
pub use server::serve;
pub use wire::SOCKET_ENV;

/// The analysis as the kernel sees it between cells (a clone of what evcxr asks).
pub trait Standby: Send {
    /// Whether a load started ahead of need is still at work (the warm-up waits for it).
    fn busy(&self) -> bool;
    /// Whether a request now would be answered without waiting for a load; where it would
    /// wait, the analysis is wanted from now on and its load begins.
    fn ready(&mut self) -> bool;
    /// Gives back what was loaded until the next cell needs it; false where nothing was.
    fn release(&mut self) -> anyhow::Result<bool>;
}
