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
    // libtorch's CUDA half costs a cell's process about 260 MiB once loaded: only where a GPU's
    // driver is (`load_cuda_beside_libtorch`, in the child, reads this).
    set_default(TORCH_CUDA_ENV, if crate::cuda::nvidia_driver() { "1" } else { "0" }.as_ref());
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

/// `1`: where a cell brings libtorch into evcxr's child, libtorch_cuda comes too, without which
/// libtorch has no CUDA backend.
pub const TORCH_CUDA_ENV: &str = "DRYML_TORCH_CUDA";

/// In evcxr's child, after each cell's library loads and before its code runs: once a cell has
/// brought libtorch in, and where the kernel asked ([`TORCH_CUDA_ENV`]), loads libtorch's CUDA
/// half beside it, for every later library to see. torch-sys links it but calls none of it, so
/// the linker's `--as-needed` leaves it out of the cell's library, and libtorch's CUDA backend
/// is what loading it registers.
pub fn load_cuda_beside_libtorch() {
    static LOADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if LOADED.load(std::sync::atomic::Ordering::Relaxed) || std::env::var(TORCH_CUDA_ENV).as_deref() != Ok("1") {
        return;
    }
    // RTLD_NOLOAD only asks whether the cell's library brought libtorch in.
    // SAFETY: a NUL-terminated name; a handle it returns is closed once, below.
    let cpu = unsafe { libc::dlopen(c"libtorch_cpu.so".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if cpu.is_null() {
        return;
    }
    // SAFETY: the handle of the dlopen above, which only counted a reference.
    unsafe { libc::dlclose(cpu) };
    LOADED.store(true, std::sync::atomic::Ordering::Relaxed);
    let Some(lib) = available().map(|dir| dir.join("libtorch_cuda.so")) else { return };
    let Ok(path) = std::ffi::CString::new(lib.as_os_str().as_encoded_bytes()) else { return };
    // Never closed: libtorch's dispatcher holds its kernels from now on.
    // SAFETY: a NUL-terminated path; loading runs the library's initialisers, as linking did.
    if unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }.is_null() {
        // SAFETY: dlerror's message, where there is one, is valid until the next dl call here.
        let why = unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        };
        eprintln!("dryml: libtorch's CUDA backend did not load ({}): {why}", lib.display());
    }
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
