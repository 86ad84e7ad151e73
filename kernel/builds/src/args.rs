//! What the kernel changes in the cell crate's rustc arguments, in its rustc wrapper
//! (`wrapper.rs`): its `-C metadata` pinned where the kernel tells a type that changed, and debug
//! info while the debugger is on.

/// Set (to anything) in the builds' environment where the kernel tells a stored variable whose
/// type changed (evcxr's `TypeOrigins`): cargo's metadata hashes the cell crate's dependencies,
/// so a dependency added would change every notebook type's `TypeId` and drop its variables.
pub const PIN_METADATA_ENV: &str = "DRYML_PIN_METADATA";
/// `1`: the cell crate is built for the debugger (full debug info, unoptimised); `keep-opt`: at
/// the optimisation level the user chose. Dependencies are built as they were.
pub const DEBUG_CELLS_ENV: &str = "DRYML_DEBUG_CELLS";
/// The cell crate's name, in the builds' environment ([`crate::build_env`]).
pub(crate) const CRATE_NAME_ENV: &str = "DRYML_CELL_CRATE";

/// The pinned `-C metadata`.
const CELL_METADATA: &str = "metadata=dryml-notebook";

fn crate_name() -> String {
    std::env::var(CRATE_NAME_ENV).unwrap_or_else(|_| "ctx".to_owned())
}

/// Whether `args` (a rustc command's) build the cell crate, named as cargo passes on.
pub(crate) fn names_cell_crate(args: &[String]) -> bool {
    names(args, &crate_name())
}

fn names(args: &[String], crate_name: &str) -> bool {
    args.windows(2).any(|w| w[0] == "--crate-name" && w[1] == crate_name)
}

/// In the rustc wrapper: `args` (the wrapper's, rustc's path, then rustc's arguments) as the
/// kernel wants them, from the environment cargo passes on.
pub(crate) fn cell_args(args: &mut Vec<String>) {
    let pin = std::env::var_os(PIN_METADATA_ENV).is_some();
    adjust(args, &crate_name(), pin, std::env::var(DEBUG_CELLS_ENV).ok().as_deref());
}

fn adjust(args: &mut Vec<String>, crate_name: &str, pin: bool, debug: Option<&str>) {
    if !names(args, crate_name) {
        return;
    }
    if pin {
        for i in 0..args.len() {
            if args[i].starts_with("metadata=") && i > 0 && args[i - 1] == "-C" {
                args[i] = CELL_METADATA.to_owned();
            } else if args[i].starts_with("-Cmetadata=") {
                args[i] = format!("-C{CELL_METADATA}");
            }
        }
    }
    let debug_flags: &[&str] = match debug {
        Some("1") => &["-C", "debuginfo=2", "-C", "strip=none", "-C", "opt-level=0"],
        Some("keep-opt") => &["-C", "debuginfo=2", "-C", "strip=none"],
        _ => &[],
    };
    args.extend(debug_flags.iter().map(|f| f.to_string()));
}

#[cfg(test)]
mod tests {
    use super::adjust;

    fn args(text: &str) -> Vec<String> {
        text.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn the_cell_crates_metadata_is_pinned_and_debug_info_added_only_for_the_cell_crate() {
        let cell = "wrapper rustc --crate-name ctx_k1 -C metadata=ab12 -Cmetadata=cd34 src/lib.rs";
        let mut pinned = args(cell);
        adjust(&mut pinned, "ctx_k1", true, None);
        assert_eq!(
            pinned,
            args("wrapper rustc --crate-name ctx_k1 -C metadata=dryml-notebook -Cmetadata=dryml-notebook src/lib.rs")
        );
        let mut unpinned = args(cell);
        adjust(&mut unpinned, "ctx_k1", false, Some("0"));
        assert_eq!(unpinned, args(cell));
        let mut debug = args(cell);
        adjust(&mut debug, "ctx_k1", false, Some("1"));
        assert_eq!(debug[debug.len() - 6..], args("-C debuginfo=2 -C strip=none -C opt-level=0"));
        let mut keep_opt = args(cell);
        adjust(&mut keep_opt, "ctx_k1", false, Some("keep-opt"));
        assert_eq!(keep_opt[keep_opt.len() - 2..], args("-C strip=none"));
        // A dependency, or another kernel's cell crate, is built as cargo says.
        for other in
            ["wrapper rustc --crate-name serde -C metadata=ab12", "wrapper rustc --crate-name ctx_k2 -C metadata=ab12"]
        {
            let mut dep = args(other);
            adjust(&mut dep, "ctx_k1", true, Some("1"));
            assert_eq!(dep, args(other));
        }
    }
}
