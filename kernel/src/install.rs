//! `dryml-kernel install|uninstall`: writes or removes the `dryml-rust` kernelspec.

use anyhow::{Context, Result};
use std::path::PathBuf;

pub const KERNEL_NAME: &str = "dryml-rust";
const TEMPLATE: &str = include_str!("../../kernelspec/kernel.json");
const LOGO_32: &[u8] = include_bytes!("../../kernelspec/logo-32x32.png");
const LOGO_64: &[u8] = include_bytes!("../../kernelspec/logo-64x64.png");

/// Where the kernelspec goes, as `jupyter kernelspec install` spells it.
#[derive(clap::Args, Debug, Clone, Default)]
#[group(multiple = false)]
pub struct Place {
    /// The user's Jupyter data directory (the default).
    #[arg(long)]
    pub user: bool,
    /// The active Python environment ($VIRTUAL_ENV, else python3's sys.prefix).
    #[arg(long)]
    pub sys_prefix: bool,
    /// Under DIR/share/jupyter/kernels.
    #[arg(long, value_name = "DIR")]
    pub prefix: Option<PathBuf>,
}

fn kernels_dir(place: &Place) -> Result<PathBuf> {
    let base = if let Some(p) = &place.prefix {
        p.join("share/jupyter")
    } else if place.sys_prefix {
        let prefix = match std::env::var_os("VIRTUAL_ENV") {
            Some(v) => PathBuf::from(v),
            None => {
                let out = std::process::Command::new("python3")
                    .args(["-c", "import sys; print(sys.prefix)"])
                    .output()
                    .context("running python3 to find sys.prefix")?;
                PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
            }
        };
        prefix.join("share/jupyter")
    } else {
        match std::env::var_os("JUPYTER_DATA_DIR") {
            Some(d) => PathBuf::from(d),
            None => dirs::data_dir().context("no user data directory; use --prefix")?.join("jupyter"),
        }
    };
    Ok(base.join("kernels").join(KERNEL_NAME))
}

/// The kernel.json text for this binary.
pub fn kernel_json() -> Result<String> {
    let exe = std::env::current_exe()?.canonicalize()?;
    let runtime = crate::paths::runtime();
    let runtime = runtime.canonicalize().unwrap_or(runtime);
    let json_str = |p: &std::path::Path| serde_json::to_string(&p.to_string_lossy()).unwrap();
    // JupyterLab's bug icon is on for a kernelspec that says so: where lldb-dap is found.
    let debugger = crate::debug::adapter::find().is_some();
    Ok(TEMPLATE
        .replace("\"@KERNEL_BIN@\"", &json_str(&exe))
        .replace("\"@RUNTIME_PATH@\"", &json_str(&runtime))
        .replace("\"@DEBUGGER@\"", if debugger { "true" } else { "false" }))
}

pub fn install(place: &Place) -> Result<PathBuf> {
    let dir = kernels_dir(place)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Write then rename, so a half-written kernel.json is never seen.
    let write = |name: &str, data: &[u8]| -> Result<()> {
        let path = dir.join(name);
        dryml_sys::fs::write_atomic(&path, data, dryml_sys::fs::Durability::NoFsync)
            .with_context(|| format!("writing {}", path.display()))
    };
    write("kernel.json", kernel_json()?.as_bytes())?;
    write("logo-32x32.png", LOGO_32)?;
    write("logo-64x64.png", LOGO_64)?;
    Ok(dir)
}

pub fn uninstall(place: &Place) -> Result<PathBuf> {
    let dir = kernels_dir(place)?;
    if !dir.exists() {
        anyhow::bail!("no kernelspec {KERNEL_NAME} at {}", dir.display());
    }
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    #[test]
    fn template_is_valid_json() {
        let v: serde_json::Value = serde_json::from_str(&super::kernel_json().unwrap()).unwrap();
        assert_eq!(v["display_name"], "DRYML Rust");
        assert_eq!(v["language"], "rust");
        assert_eq!(v["argv"][1], "--connection-file");
    }
}
