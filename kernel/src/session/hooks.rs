//! The hooks our evcxr patch opens, each filled with the kernel's part: the cell crate's name,
//! its rustc wrapper and builds without cargo, the display of a cell's value, what a stored type
//! is built from, which variables a cell loads and the borrows it makes again, and the analysis
//! (kernel/patches/README.md names each part).

use std::sync::Arc;

/// What the hooks share with the session: the notebook's kept borrows, its types' origins (and
/// what the last cell dropped), and the cell crate's builds.
#[derive(Clone, Default)]
pub(super) struct Shared {
    pub borrows: Arc<super::borrows::Borrows>,
    pub origins: Arc<dryml_analysis::Origins>,
    pub builds: super::builds::CellBuilds,
}

/// Fills `ctx`'s hooks before anything is built or analysed, for the cell crate `crate_name`
/// (whose builds ask `stop` whether an interrupt stops them).
/// Returns what answers completion and hover beside a running cell, and the kernel's hold on
/// the analysis.
pub(super) fn fill(
    ctx: &mut evcxr::EvalContext,
    crate_name: &str,
    shared: &Shared,
    stop: super::aside::Stop,
) -> Result<(dryml_analysis::Beside, Box<dyn dryml_analysis::Standby>), evcxr::Error> {
    ctx.set_crate_name(crate_name);
    for (key, value) in shared.builds.start(ctx.crate_directory(), crate_name, stop)? {
        ctx.set_build_env(key, &value);
    }
    ctx.set_cell_builder(Box::new(shared.builds.clone()));
    let hooks = ctx.hooks_mut();
    hooks.final_display = super::display::Tables::default().around();
    // The cell crate's metadata is pinned only where a type that changed is told.
    hooks.origins = Some(shared.origins.clone());
    hooks.loads = Some(Arc::new(super::loads::NamedOnly(shared.borrows.clone())));
    ctx.set_build_env(dryml_builds::PIN_METADATA_ENV, "1");
    let (analysis, beside, standby) = super::beside::analysis(ctx.crate_directory())?;
    ctx.set_analysis(analysis);
    Ok((beside, standby))
}
