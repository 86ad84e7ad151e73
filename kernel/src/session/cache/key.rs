//! A generation's name: what its builds depend on that cargo does not track (the compiler,
//! libtorch), and the toolchain's own directories.

use std::path::{Path, PathBuf};

/// What a build's artifacts depend on that cargo does not track: the compiler (cargo does track
/// it, but a new toolchain makes every old artifact garbage, best evicted at once) and libtorch,
/// which torch-sys's build script links against without watching its version or location.
pub fn generation_key() -> String {
    let info = std::process::Command::new(rustc())
        .arg("-vV")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    key_for(&info, crate::torch::available().as_deref())
}

/// The key from `rustc -vV`'s output and the libtorch directory (`<torch>/lib`), if any.
pub(super) fn key_for(rustc_info: &str, torch_lib: Option<&Path>) -> String {
    let field = |name: &str| rustc_info.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
    let mut key = format!(
        "rustc-{}-{}",
        field("release:").unwrap_or_else(|| "unknown".into()),
        field("commit-hash:").map(|h| h.chars().take(9).collect::<String>()).unwrap_or_else(|| "unknown".into())
    );
    if let Some(lib) = torch_lib {
        let version = std::fs::read_to_string(lib.join("..").join("version.py"))
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| {
                    let v = l.strip_prefix("__version__")?.trim_start().strip_prefix('=')?.trim();
                    Some(v.trim_matches(|c| c == '\'' || c == '"').to_string())
                })
            })
            .unwrap_or_else(|| "unknown".into());
        key.push_str(&format!("-torch-{version}-{:08x}", fnv1a(lib.to_string_lossy().as_bytes()) as u32));
    }
    key.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect()
}

/// The rustc evcxr runs (`$RUSTC`, else the one on `PATH`).
pub(in crate::session) fn rustc() -> std::ffi::OsString {
    std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into())
}

/// The toolchain's directory of target libraries, where the `libstd-*.so` that cells link is.
pub fn std_lib_dir() -> Option<PathBuf> {
    let out = std::process::Command::new(rustc()).args(["--print", "target-libdir"]).output().ok()?;
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && dir.is_dir()).then_some(dir)
}

/// A stable hash (std's may change between Rust releases; this names directories).
pub(in crate::session) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}
