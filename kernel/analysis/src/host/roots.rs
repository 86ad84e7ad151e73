//! A load applied to the host: its files, a source root per package root (set only where its
//! files changed), and the union of the crates' graphs.

use super::Host;
use crate::load;
use anyhow::Result;
use ra_ap_base_db::{CrateGraphBuilder, SourceRoot, SourceRootId};
use ra_ap_ide_db::FileId;
use ra_ap_vfs::VfsPath;

impl Host {
    pub(super) fn apply_load(&mut self, change: &mut ra_ap_hir::ChangeWithProcMacros, toml: &[u8]) -> Result<()> {
        let loaded = match self.ws.preloaded.take() {
            Some((read, loaded)) if read == toml => loaded,
            _ => load::load(self.ws.cargo_toml(), self.with_sysroot)?,
        };
        for (path, contents) in loaded.files {
            // The source set before the load stays (the disk's may be another's).
            if path != self.ws.lib_rs {
                self.vfs.set_file_contents(path.into(), contents);
            }
        }
        for (file, changed) in self.vfs.take_changes() {
            let text = match changed.change {
                ra_ap_vfs::Change::Create(bytes, _) | ra_ap_vfs::Change::Modify(bytes, _) => {
                    String::from_utf8(bytes).ok()
                }
                ra_ap_vfs::Change::Delete => None,
            };
            change.change_file(file, text);
        }
        for root in loaded.workspace.to_roots() {
            let key = (root.include, root.is_local);
            if !self.package_roots.contains(&key) {
                self.package_roots.push(key);
            }
        }
        self.set_roots();
        let vfs = &self.vfs;
        let (graph, _) = loaded
            .workspace
            .to_crate_graph(&mut |path| vfs.file_id(&path.to_path_buf().into()).map(|(id, _)| id), &Default::default());
        self.graphs.insert(self.ws.root.clone(), graph);
        change.set_crate_graph(self.union_graph());
        Ok(())
    }

    /// A source root per package root (the sysroot's and the registry's as libraries), set only
    /// where its files changed: setting one again, even unchanged, makes salsa redo all that
    /// depends on it (one root for every file made each load redo the standard library's
    /// analysis). Libraries are durable, so a cell's edit does not have them checked again.
    pub(super) fn set_roots(&mut self) {
        use ra_ap_base_db::salsa::{Durability, Setter};
        use ra_ap_base_db::SourceDatabase;
        let mut config = ra_ap_vfs::file_set::FileSetConfig::builder();
        for (include, _) in &self.package_roots {
            config.add_file_set(include.iter().cloned().map(VfsPath::from).collect());
        }
        // One set per package root, then one of the files in none of them.
        let sets = config.build().partition(&self.vfs);
        let db = self.analysis.raw_database_mut();
        let mut local = ra_ap_ide_db::FxHashSet::default();
        let mut library = ra_ap_ide_db::FxHashSet::default();
        for (index, set) in sets.into_iter().enumerate() {
            let is_local = self.package_roots.get(index).is_none_or(|(_, local)| *local);
            let id = SourceRootId(index as u32);
            let root = if is_local {
                local.insert(id);
                SourceRoot::new_local(set)
            } else {
                library.insert(id);
                SourceRoot::new_library(set)
            };
            let files: Vec<FileId> = root.iter().collect();
            if self.applied_roots.get(index) == Some(&files) {
                continue;
            }
            let durability = if is_local { Durability::LOW } else { Durability::MEDIUM };
            for &file in &files {
                db.set_file_source_root_with_durability(file, id, durability);
            }
            db.set_source_root_with_durability(id, root.into(), durability);
            if self.applied_roots.len() <= index {
                self.applied_roots.resize(index + 1, Vec::new());
            }
            self.applied_roots[index] = files;
        }
        if ra_ap_ide_db::LocalRoots::get(db).roots(db) != &local {
            ra_ap_ide_db::LocalRoots::get(db).set_roots(db).to(local);
        }
        if ra_ap_ide_db::LibraryRoots::get(db).roots(db) != &library {
            ra_ap_ide_db::LibraryRoots::get(db).set_roots(db).to(library);
        }
    }

    pub(super) fn union_graph(&self) -> CrateGraphBuilder {
        let mut union = CrateGraphBuilder::default();
        for graph in self.graphs.values() {
            union.extend(graph.clone(), &mut Default::default());
        }
        union
    }
}
