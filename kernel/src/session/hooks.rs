//! The hooks our evcxr patch opens, each filled with the kernel's part: the build without cargo,
//! the display of a cell's value, what a stored type is built from, which variables a cell
//! loads and the borrows it makes again, and the analysis (kernel/patches/evcxr-0.22.0.patch
//! names each part).

use std::sync::Arc;

/// Fills `ctx`'s hooks before anything is built or analysed, `borrows` the notebook's kept
/// borrows. Returns what answers completion and hover beside a running cell, from the analysis.
pub(super) fn fill(
    ctx: &mut evcxr::EvalContext,
    borrows: Arc<super::borrows::Borrows>,
) -> Result<dryml_analysis::Beside, evcxr::Error> {
    ctx.set_cell_builder(Box::<super::builds::RustcAlone>::default());
    ctx.set_final_display(super::display::around(false));
    // The cell crate's metadata is pinned only where a type that changed is told.
    ctx.set_type_origins(Arc::<dryml_analysis::Origins>::default());
    ctx.set_build_env(dryml_builds::PIN_METADATA_ENV, "1");
    ctx.set_cell_loads(Arc::new(super::loads::NamedOnly(borrows)));
    let (analysis, beside) = super::beside::analysis(ctx.crate_directory())?;
    ctx.set_analysis(analysis);
    Ok(beside)
}
