//! evcxr's own start-up files, loaded before a notebook's first cell as evcxr_jupyter loads
//! them when it starts: `init.evcxr` (commands such as `:dep`), `prelude.rs` (code, `use`s),
//! or their forms in `config.toml`, from evcxr's config directory (`EVCXR_CONFIG_DIR`, else
//! `~/.config/evcxr`). Users keep their habits there; evcxr reads and runs them itself.

use super::Session;
use crate::protocol::published::StreamName;
use std::path::PathBuf;

/// The files evcxr's `:load_config` reads.
const FILES: [&str; 3] = ["init.evcxr", "prelude.rs", "config.toml"];

/// evcxr's config directory, when it holds any of the files.
pub fn found() -> Option<PathBuf> {
    let dir = evcxr::config_dir()?;
    FILES.iter().any(|f| dir.join(f).is_file()).then_some(dir)
}

impl Session {
    /// Runs the files once, before the first user code. One that fails is said on the cell's
    /// stderr and the cell runs all the same (evcxr_jupyter would not start at all).
    pub(super) fn load_config(&mut self) {
        let Some(dir) = self.config.take() else { return };
        if let Err(e) = self.eval_hidden(":load_config --quiet") {
            let evalue = e.evalue.trim_end();
            self.state.stream(
                StreamName::Stderr,
                &format!("evcxr's start-up files in {} did not load: {}: {evalue}\n", dir.display(), e.ename),
            );
        }
    }
}
