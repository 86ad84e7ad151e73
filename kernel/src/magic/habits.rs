//! IPython's notebook habits: `%cd`, `%pwd`, `%load`, `%%bash`/`%%sh` and `%%writefile`.
//! Paths are the child's (its working directory), never the kernel's. `!` lines and
//! `%timeit` are Rust by the time they get here (`dryml_magics::body`).

use super::cell::{Cell, CellMagic};
use super::Host;
use crate::protocol::ErrorContent;
use dryml_magics::Shell;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The directory before the last `%cd`, for `%cd -`.
#[derive(Default)]
pub struct Directories {
    previous: Option<PathBuf>,
}

impl Directories {
    /// `%cd [DIR | -]`: checked here, so a bad one is an error naming it and nothing changes.
    pub fn cd(&mut self, host: &mut Host<'_>, dir: Option<&str>) -> Result<(), ErrorContent> {
        let here = host.session.child_cwd();
        let target = match dir {
            None => dirs::home_dir().ok_or_else(|| ErrorContent::new("OSError", "%cd: no home directory is known"))?,
            Some("-") => {
                self.previous.clone().ok_or_else(|| ErrorContent::new("OSError", "%cd -: no %cd came before"))?
            }
            Some(d) => resolve(&here, &expand_home(d)),
        };
        let target = std::fs::canonicalize(&target)
            .map_err(|e| ErrorContent::new("FileNotFoundError", format!("%cd: {}: {e}", target.display())))?;
        if !target.is_dir() {
            return Err(ErrorContent::new(
                "NotADirectoryError",
                format!("%cd: {} is not a directory", target.display()),
            ));
        }
        host.session.set_cwd(&target)?;
        self.previous = Some(here);
        host.print(&format!("{}\n", target.display()));
        Ok(())
    }
}

/// `%pwd`: the cells' working directory.
pub fn pwd(host: &Host<'_>) {
    host.print(&format!("{}\n", host.session.child_cwd().display()));
}

/// `%load PATH`: the file's text replaces the cell's input (a `set_next_input` payload, as
/// IPython's; clients that ignore payloads leave the cell as it was).
pub fn load(host: &mut Host<'_>, path: &str, payload: &mut Vec<Value>) -> Result<(), ErrorContent> {
    let file = resolve(&host.session.child_cwd(), &expand_home(path));
    let text = std::fs::read_to_string(&file)
        .map_err(|e| ErrorContent::new("OSError", format!("%load: cannot read {}: {e}", file.display())))?;
    let text = format!("// %load {path}\n{text}");
    payload.push(crate::protocol::replies::Payload::SetNextInput { text, replace: true }.value());
    Ok(())
}

fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), dirs::home_dir()) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if p == "~" => dirs::home_dir().unwrap_or_else(|| PathBuf::from(p)),
        _ => PathBuf::from(p),
    }
}

fn resolve(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

/// `%%bash`, `%%sh`: the body runs as a script in the child, as `!` lines do, so the working
/// directory, the environment and interrupt are the same.
pub struct ScriptCell {
    pub shell: Shell,
    pub raise_error: bool,
}

impl CellMagic for ScriptCell {
    fn code(&mut self, host: &mut Host<'_>, cell: &Cell<'_>) -> Result<String, ErrorContent> {
        // Generated code: a compile error (none is expected) keeps rustc's rendering.
        host.session.set_cell_lines(None);
        Ok(script_code(self.shell, cell.body(), self.raise_error))
    }
}

/// The code that runs `text` as a `shell` script in the child.
pub fn script_code(shell: Shell, text: &str, raise_error: bool) -> String {
    format!("dryml::__kernel::shell::cell({:?}, {text:?}, {raise_error});", shell.program())
}

/// `%%writefile [-a] PATH`: the body is the file's text, written whole or not at all.
pub struct WriteFileCell<'a> {
    pub append: bool,
    pub path: &'a str,
}

impl CellMagic for WriteFileCell<'_> {
    fn own_body(&mut self, host: &mut Host<'_>, cell: &Cell<'_>) -> Option<Result<(), ErrorContent>> {
        Some(self.write(host, cell.body()))
    }
}

impl WriteFileCell<'_> {
    fn write(&self, host: &mut Host<'_>, body: &str) -> Result<(), ErrorContent> {
        let file = resolve(&host.session.child_cwd(), &expand_home(self.path));
        let existed = file.exists();
        let fail = |what: &str, e: std::io::Error| {
            ErrorContent::new("OSError", format!("%%writefile: cannot {what} {}: {e}", file.display()))
        };
        let mut text =
            if self.append && existed { std::fs::read(&file).map_err(|e| fail("read", e))? } else { Vec::new() };
        text.extend_from_slice(body.as_bytes());
        // A file being replaced keeps its permissions; a new one gets the umask's.
        let mode = std::fs::metadata(&file).map(|m| m.permissions()).ok();
        dryml_sys::fs::write_atomic(&file, &text, dryml_sys::fs::Durability::Fsync).map_err(|e| fail("write", e))?;
        if let Some(mode) = mode {
            std::fs::set_permissions(&file, mode).map_err(|e| fail("keep the permissions of", e))?;
        }
        let verb = match (self.append, existed) {
            (true, true) => "Appending to",
            (_, true) => "Overwriting",
            _ => "Writing",
        };
        host.print(&format!("{verb} {}\n", self.path));
        Ok(())
    }
}
