//! Finding libtorch for `tch` cells: the PyTorch wheel in the project's venv, so `tch` builds
//! with `LIBTORCH_USE_PYTORCH=1` and the child process loads the same `libtorch.so`.

use std::path::{Path, PathBuf};

/// `<venv>/lib/python3.X/site-packages/torch/lib`, when it holds `libtorch.so`.
pub fn lib_dir(venv: &Path) -> Option<PathBuf> {
    let lib = std::fs::read_dir(venv.join("lib")).ok()?;
    lib.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path().join("site-packages").join("torch").join("lib"))
        .find(|d| d.join("libtorch.so").is_file())
}

/// Where libtorch was found, if it was: set once by [`setup_env`].
pub fn available() -> Option<PathBuf> {
    std::env::var_os(LIB_ENV).map(PathBuf::from)
}

const LIB_ENV: &str = "DRYML_TORCH_LIB";

/// Prepares this process's environment, which evcxr's builds and child inherit: torch-sys
/// asks `python` (the venv's, through `VIRTUAL_ENV` and `PATH`) where libtorch is, and the child
/// finds `libtorch.so` on `LD_LIBRARY_PATH`. Called first in `main`, while single-threaded.
/// Settings the user made already win.
pub fn setup_env() {
    let venv = crate::paths::venv();
    let Some(lib) = lib_dir(&venv) else { return };
    let venv = venv.canonicalize().unwrap_or(venv);
    let lib = lib.canonicalize().unwrap_or(lib);
    let set_default = |k: &str, v: &std::ffi::OsStr| {
        if std::env::var_os(k).is_none() {
            std::env::set_var(k, v);
        }
    };
    set_default("LIBTORCH_USE_PYTORCH", "1".as_ref());
    // libtorch's CUDA half costs a cell's process about 260 MiB once loaded: linked only where
    // a GPU's driver is (the evcxr patch's rustc wrapper reads this).
    set_default(TORCH_CUDA_ENV, if nvidia_driver() { "1" } else { "0" }.as_ref());
    set_default("VIRTUAL_ENV", venv.as_os_str());
    let prepend = |k: &str, dir: &Path| {
        let mut parts = vec![dir.to_path_buf()];
        if let Some(old) = std::env::var_os(k) {
            parts.extend(std::env::split_paths(&old).filter(|p| p != dir));
        }
        if let Ok(joined) = std::env::join_paths(parts) {
            std::env::set_var(k, joined);
        }
    };
    prepend("PATH", &venv.join("bin"));
    prepend("LD_LIBRARY_PATH", &lib);
    std::env::set_var(LIB_ENV, &lib);
}

/// `1`: cells that link tch also link libtorch_cuda, without which libtorch has no CUDA backend.
pub const TORCH_CUDA_ENV: &str = "DRYML_TORCH_CUDA";

/// Whether NVIDIA's driver runs here (in a container too, where its device files are mounted).
fn nvidia_driver() -> bool {
    Path::new("/proc/driver/nvidia/version").exists() || Path::new("/dev/nvidiactl").exists()
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_torch_lib_in_a_venv_layout() {
        let d = std::env::temp_dir().join(format!("dryml-torch-venv-{}", std::process::id()));
        let lib = d.join("lib/python3.11/site-packages/torch/lib");
        std::fs::create_dir_all(&lib).unwrap();
        assert_eq!(super::lib_dir(&d), None, "no libtorch.so yet");
        std::fs::write(lib.join("libtorch.so"), b"").unwrap();
        assert_eq!(super::lib_dir(&d), Some(lib));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
