//! The cell crate's build as rustc alone. Cargo's part of a cell's build (the dependency graph
//! resolved and every unit's fingerprint checked: 20 ms of a trivial cell with `dryml`, 50 ms
//! with `tch`'s 164 units) ends in the same rustc command each time only the cell's source has
//! changed. The kernel's binary, as cargo's rustc wrapper for the cell crate ([`wrapper_hook`]),
//! records that command while cargo runs it; the next build ([`Builds`]) runs it directly if nothing cargo looks at has changed since ([`DirectRustc`]): how the
//! kernel would call cargo, the crate's Cargo.toml and cargo config, the libraries the command
//! links, and every file of every path dependency (`dryml`, a user's `:dep x = { path = .. }`).
//! Anything else, another build holding the build directory, or a rustc that cannot use a
//! dependency it was given, goes back to cargo, which records the command again.
//!
//! evcxr (patched) calls [`Builds`] through its `CellBuilder` hook; nothing here names evcxr. The
//! wrapper also pins the cell crate's metadata and builds it for the debugger (`args.rs`).

mod args;
mod direct;
mod record;
mod wrapper;

pub use args::{DEBUG_CELLS_ENV, PIN_METADATA_ENV};
pub use direct::{copy as copy_command, Builds, DirectRustc, Outcome};
pub use record::Recorded;
pub use wrapper::{build_env, wrapper_hook, RECORD_ENV};
