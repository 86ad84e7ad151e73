//! The table of every magic: the registry's groups of rows (`rows.rs`, `habits.rs`), kept apart
//! from what a magic is (`registry.rs`), which the rows build on.

use crate::registry::MagicSpec;

/// Every magic the kernel knows, in groups of rows. `%lsmagic`, `%name?` and completion read
/// this table only.
pub static REGISTRY: Registry = Registry(&[crate::rows::ROWS, crate::habits::ROWS]);

/// The registry's groups of rows.
pub struct Registry(&'static [&'static [MagicSpec]]);

impl Registry {
    /// Every magic, in the order `%lsmagic` lists them.
    pub fn iter(&self) -> impl Iterator<Item = &'static MagicSpec> {
        self.0.iter().flat_map(|rows| rows.iter())
    }
}
