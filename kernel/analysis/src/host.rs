//! The analysis of one or more notebooks' crates in one rust-analyzer host: what they share
//! (the sysroot, common dependencies) is loaded and worked out once.

mod roots;

use crate::load::Loaded;
use anyhow::{anyhow, bail, Context, Result};
use ra_ap_base_db::CrateGraphBuilder;
use ra_ap_ide::AnalysisHost;
use ra_ap_paths::AbsPathBuf;
use ra_ap_vfs::{FileId, Vfs, VfsPath};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The edition cells are parsed in, as evcxr writes them.
pub(crate) const EDITION: ra_ap_ide::Edition = ra_ap_ide::Edition::Edition2024;

/// The analysis of the crates in one host; queries act on the selected one, `ws`.
pub(crate) struct Host {
    pub(crate) with_sysroot: bool,
    pub(crate) analysis: AnalysisHost,
    vfs: Vfs,
    pub(crate) ws: Crate,
    /// The other crates, while `ws` is another's.
    parked: HashMap<AbsPathBuf, Crate>,
    /// Each loaded crate's graph; the host's is their union, in which equal crates (the
    /// sysroot's, a shared dependency's) are one, analysed once.
    graphs: BTreeMap<AbsPathBuf, CrateGraphBuilder>,
    /// Every package root loaded (its directories, whether local), in the order first seen: a
    /// root's index is its `SourceRootId` for as long as the host lives.
    package_roots: Vec<(Vec<AbsPathBuf>, bool)>,
    /// Each source root's files as last set in the host.
    applied_roots: Vec<Vec<FileId>>,
}

/// One notebook's crate as the host sees it.
pub(crate) struct Crate {
    pub(crate) root: AbsPathBuf,
    /// The Cargo.toml whose workspace is in the host; None before the first load.
    pub(crate) loaded_toml: Option<Vec<u8>>,
    lib_rs: AbsPathBuf,
    pub(crate) file: FileId,
    pub(crate) source: String,
    /// A load done outside the host's lock, with the Cargo.toml it read, for the next
    /// `set_source` to apply.
    pub(crate) preloaded: Option<(Vec<u8>, Loaded)>,
}

/// `path` as rust-analyzer's absolute path.
pub(crate) fn abs(path: &Path) -> Result<AbsPathBuf> {
    let text = path.to_str().with_context(|| format!("{path:?} is not UTF-8"))?;
    AbsPathBuf::try_from(text).map_err(|p| anyhow!("{p:?} is not absolute"))
}

impl Crate {
    fn new(vfs: &mut Vfs, root: &AbsPathBuf) -> Result<Crate> {
        let lib_rs = root.join("src/lib.rs");
        // cargo metadata, run by a load, wants the target's file on disk, which a load ahead of
        // the first build would not find.
        let src = root.join("src");
        std::fs::create_dir_all(&src).with_context(|| format!("creating {src}"))?;
        if std::fs::metadata(&lib_rs).is_err() {
            std::fs::write(&lib_rs, "").with_context(|| format!("writing {lib_rs}"))?;
        }
        let path = VfsPath::from(lib_rs.clone());
        vfs.set_file_contents(path.clone(), Some(Vec::new()));
        let (file, _) = vfs.file_id(&path).context("the file just set")?;
        Ok(Crate { root: root.clone(), loaded_toml: None, lib_rs, file, source: String::new(), preloaded: None })
    }

    pub(crate) fn cargo_toml(&self) -> AbsPathBuf {
        self.root.join("Cargo.toml")
    }
}

impl Host {
    pub(crate) fn new(root: &Path) -> Result<Host> {
        let mut vfs = Vfs::default();
        Ok(Host {
            with_sysroot: true,
            analysis: AnalysisHost::default(),
            ws: Crate::new(&mut vfs, &abs(root)?)?,
            vfs,
            parked: HashMap::new(),
            graphs: BTreeMap::new(),
            package_roots: Vec::new(),
            applied_roots: Vec::new(),
        })
    }

    /// The host locked with `root`'s crate selected: added where `add` (a connected kernel's
    /// request), else an error where it is not there (its notebook left); never another's.
    pub(crate) fn locked<'a>(host: &'a Mutex<Host>, root: &AbsPathBuf, add: bool) -> Result<MutexGuard<'a, Host>> {
        let mut locked = host.lock().unwrap_or_else(PoisonError::into_inner);
        locked.select(root, add)?;
        Ok(locked)
    }

    pub(crate) fn select(&mut self, root: &AbsPathBuf, add: bool) -> Result<()> {
        if self.ws.root == *root {
            return Ok(());
        }
        let ws = match self.parked.remove(root) {
            Some(ws) => ws,
            None if add => Crate::new(&mut self.vfs, root)?,
            None => bail!("{root} is not analysed here (its notebook left)"),
        };
        let old = std::mem::replace(&mut self.ws, ws);
        self.parked.insert(old.root.clone(), old);
        Ok(())
    }

    /// Forgets `root`'s crate (its notebook is gone): its file leaves the host and its crates
    /// the graph, unless another's are the same.
    pub(crate) fn remove(&mut self, root: &AbsPathBuf) {
        let gone = match self.parked.remove(root) {
            Some(ws) => ws,
            None if self.ws.root == *root => {
                let Some(other) = self.parked.keys().next().cloned() else {
                    // The last one stays selected, unloaded, for whoever comes next.
                    self.ws.loaded_toml = None;
                    self.graphs.clear();
                    return;
                };
                let next = self.parked.remove(&other).expect("a parked crate");
                std::mem::replace(&mut self.ws, next)
            }
            None => return,
        };
        let mut change = ra_ap_hir::ChangeWithProcMacros::default();
        // A crate that left before any load has a file in no source root, which salsa's change
        // panics on (ci24: the shared process's client thread, then types lost).
        if self.applied_roots.iter().any(|files| files.contains(&gone.file)) {
            change.change_file(gone.file, None);
        }
        if self.graphs.remove(root).is_some() {
            change.set_crate_graph(self.union_graph());
        }
        self.analysis.apply_change(change);
    }

    /// Whether the selected crate is the only one here.
    pub(crate) fn alone(&self) -> bool {
        self.parked.is_empty() && self.graphs.keys().all(|root| *root == self.ws.root)
    }

    /// Empties the host, the selected crate's file kept, as if new: each crate loads again at
    /// its next request.
    pub(crate) fn start_again(&mut self) -> Result<()> {
        let mut fresh = Host::new(self.ws.root.as_ref())?;
        fresh.with_sysroot = self.with_sysroot;
        *self = fresh;
        Ok(())
    }

    /// Drops what only earlier revisions use (results replaced since, interned types nothing
    /// names): salsa frees them at the next revision, which a quiet process may not see for
    /// hours. The next analysis checks its inputs again.
    pub(crate) fn collect_garbage(&mut self) {
        self.analysis.trigger_garbage_collection();
    }

    /// Sets the selected crate's `lib.rs`, and loads its workspace where its Cargo.toml is new
    /// or changed. `write` false keeps the source off the disk (the priming source, or a Tab's
    /// while a build may be reading the crate's files).
    pub(crate) fn set_source(&mut self, source: String, write: bool) -> Result<()> {
        if write {
            std::fs::write(&self.ws.lib_rs, &source).with_context(|| format!("writing {}", self.ws.lib_rs))?;
        }
        self.vfs.set_file_contents(self.ws.lib_rs.clone().into(), Some(source.clone().into()));
        let mut change = ra_ap_hir::ChangeWithProcMacros::default();
        change.change_file(self.ws.file, Some(source.clone()));
        self.ws.source = source;
        let path = self.ws.cargo_toml();
        let toml = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
        if self.ws.loaded_toml.as_ref() != Some(&toml) {
            self.apply_load(&mut change, &toml)?;
            self.ws.loaded_toml = Some(toml);
        }
        self.analysis.apply_change(change);
        Ok(())
    }

    /// The selected crate's state, for the log line of a variable whose type was not found.
    pub(crate) fn describe(&self) -> String {
        let on_disk = std::fs::read(self.ws.cargo_toml()).ok();
        let toml = match (&self.ws.loaded_toml, on_disk) {
            (None, _) => "not loaded",
            (Some(loaded), Some(disk)) if *loaded == disk => "loaded as on disk",
            _ => "loaded, changed on disk since",
        };
        let graph = if self.graphs.contains_key(&self.ws.root) { "in the union" } else { "missing" };
        let union = self.union_graph();
        let crates = union.iter().count();
        let shared = shared_roots(&union);
        format!(
            "{}: Cargo.toml {toml}, its graph {graph}, {} graphs ({crates} crates, {} of a root \
             file another has too{}), {} parked, {} package roots",
            self.ws.root,
            self.graphs.len(),
            shared.len(),
            if shared.is_empty() { String::new() } else { format!(": {}", shared.join("; ")) },
            self.parked.len(),
            self.package_roots.len(),
        )
    }
}

/// Each crate of `union` whose root file an earlier one has too, named, with what sets them
/// apart.
fn shared_roots(union: &CrateGraphBuilder) -> Vec<String> {
    let mut first: HashMap<FileId, ra_ap_base_db::CrateBuilderId> = HashMap::new();
    let mut shared = Vec::new();
    for id in union.iter() {
        let this = &union[id];
        let Some(&earlier) = first.get(&this.basic.root_file_id) else {
            first.insert(this.basic.root_file_id, id);
            continue;
        };
        let other = &union[earlier];
        let name = this.extra.display_name.as_ref().map_or("?".to_string(), |n| n.to_string());
        let mut apart = Vec::new();
        if this.cfg_options != other.cfg_options {
            apart.push(format!("cfg {:?} / {:?}", other.cfg_options, this.cfg_options));
        }
        if this.env != other.env {
            apart.push("env".to_string());
        }
        if this.extra != other.extra {
            apart.push("extra".to_string());
        }
        let deps = |c: &ra_ap_base_db::CrateBuilder| {
            c.basic.dependencies.iter().map(|d| d.name.to_string()).collect::<Vec<_>>()
        };
        if deps(this) != deps(other) {
            apart.push(format!("deps {:?} / {:?}", deps(other), deps(this)));
        } else if this.basic.dependencies != other.basic.dependencies {
            apart.push("deps' crates".to_string());
        }
        if this.basic.origin != other.basic.origin || this.basic.proc_macro_cwd != other.basic.proc_macro_cwd {
            apart.push("origin".to_string());
        }
        if apart.is_empty() {
            apart.push("workspace data".to_string());
        }
        shared.push(format!("{name} ({})", apart.join(", ")));
    }
    shared
}
