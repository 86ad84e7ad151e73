//! candle's CUDA backend for cells: where NVIDIA's driver runs and the set-up brought CUDA's
//! compiler into the venv (`kernelspec/cuda.sh`, which writes [`ENV_FILE`]), cells build dryml
//! with `candle-cuda` in that environment; elsewhere candle stays on the CPU.

use std::path::Path;

/// What `kernelspec/cuda.sh` leaves in the venv: `KEY=VALUE` lines for candle's CUDA build.
pub const ENV_FILE: &str = "share/dryml-rust/cuda.env";

/// Set by [`setup_env`] where cells build candle's CUDA backend.
const CANDLE_CUDA_ENV: &str = "DRYML_CANDLE_CUDA";

/// The build's variables from `venv`'s [`ENV_FILE`], where a `driver` runs and the file names a
/// CUDA_HOME whose nvcc is there.
pub fn build_env(venv: &Path, driver: bool) -> Option<Vec<(String, String)>> {
    if !driver {
        return None;
    }
    let text = std::fs::read_to_string(venv.join(ENV_FILE)).ok()?;
    let vars: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let home = vars.iter().find(|(k, _)| k == "CUDA_HOME")?;
    Path::new(&home.1).join("bin/nvcc").is_file().then_some(vars)
}

/// Whether cells build dryml's candle with CUDA.
pub fn for_candle() -> bool {
    std::env::var_os(CANDLE_CUDA_ENV).is_some()
}

/// Puts the build's variables into this process's environment, which evcxr's builds inherit
/// (settings the user made win). Called first in `main`, while single-threaded.
pub fn setup_env() {
    let Some(vars) = build_env(&crate::paths::venv(), nvidia_driver()) else { return };
    for (k, v) in vars {
        if std::env::var_os(&k).is_none() {
            std::env::set_var(k, v);
        }
    }
    std::env::set_var(CANDLE_CUDA_ENV, "1");
}

/// Whether NVIDIA's driver runs here (in a container too, where its device files are mounted).
pub fn nvidia_driver() -> bool {
    Path::new("/proc/driver/nvidia/version").exists() || Path::new("/dev/nvidiactl").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_builds_only_where_a_driver_runs_and_the_set_up_brought_nvcc() {
        let venv = std::env::temp_dir().join(format!("dryml-cuda-venv-{}", std::process::id()));
        let home = venv.join("lib/python3.11/site-packages/nvidia/cu13");
        std::fs::create_dir_all(venv.join("share/dryml-rust")).unwrap();
        std::fs::create_dir_all(home.join("bin")).unwrap();
        assert_eq!(build_env(&venv, true), None, "no cuda.env: the set-up did not run cuda.sh");
        let env = format!("CUDA_HOME={}\nCUDA_COMPUTE_CAP=90\n", home.display());
        std::fs::write(venv.join(ENV_FILE), env).unwrap();
        assert_eq!(build_env(&venv, true), None, "no nvcc under CUDA_HOME");
        std::fs::write(home.join("bin/nvcc"), b"").unwrap();
        let vars = build_env(&venv, true).unwrap();
        assert_eq!(vars[1], ("CUDA_COMPUTE_CAP".to_string(), "90".to_string()));
        assert_eq!(build_env(&venv, false), None, "no driver: candle stays on the CPU");
        std::fs::remove_dir_all(&venv).unwrap();
    }
}
