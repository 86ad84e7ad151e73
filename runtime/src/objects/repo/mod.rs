//! DRYML's `Repo` and `Selector`: a directory of object files with an index of their
//! definitions, so "every `Mlp` with `lr = 0.1` trained on `mnist`" is answered without reading
//! any object's state.
//!
//! Layout: `<dir>/dryml-repo` (a format marker), `<dir>/objects/<id>.dry` (one file per object,
//! written durably: temporary file, fsync, rename), and `<dir>/index.jsonl`, an append-only log
//! of `add` and `delete` records. A write is one step under an exclusive `flock`: the object
//! files are renamed into place and their records appended and fsynced, or, when any part
//! fails, the old files are put back. So two processes adding at once lose nothing, the index
//! and the files never disagree for a writer, and an object is acknowledged only once its file
//! and its index record are on disk. The index is read into memory (by id and by type); a later
//! `reload` reads just what other processes appended since. A crash can leave at most a torn last
//! line, which readers skip and the next writer terminates.
//!
//! Why a log and not an embedded database: queries are filters over definitions (type, then
//! argument matching on JSON), which run in memory in milliseconds over 100,000 objects (see
//! the README's benchmark); a log needs no dependency compiled into every notebook, is
//! readable with `grep`, and its appends are atomic under the lock.

mod index;
mod query;
mod selector;

use crate::objects::{record, Meta, Object, ObjectDef, ObjectError, Provenance};
use crate::sys::fs::{write_atomic, Durability, Staged};
pub use selector::Selector;
use serde_json::json;
use std::collections::HashMap;
use std::fmt;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

const MARKER: &str = "dryml-repo";
const MARKER_TEXT: &str = "dryml-repo 1\n";
const INDEX: &str = "index.jsonl";
const LOCK: &str = "index.lock";
const OBJECTS: &str = "objects";

/// One object as the index knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The object's definition.
    pub def: ObjectDef,
    /// Its identity.
    pub meta: Meta,
    /// The object file's size in bytes.
    pub size: u64,
}

/// A directory of objects with an index of their definitions.
pub struct Repo {
    dir: PathBuf,
    entries: HashMap<String, Entry>,
    /// Ids per type, in the order they were added.
    by_type: HashMap<String, Vec<String>>,
    /// Bytes of the index already read.
    offset: u64,
    /// Index lines that did not parse (a torn tail from a crash, or damage).
    pub skipped: usize,
}

/// A repo problem: what, and which file.
#[derive(Debug, Clone, PartialEq)]
pub enum RepoError {
    /// The directory has no repo marker.
    NotARepo(PathBuf),
    /// `create` on a directory that already holds a repo.
    Exists(PathBuf),
    /// A file could not be read or written.
    Io(PathBuf, String),
    /// An object file failed to save or load.
    Object(ObjectError),
    /// No object has this id.
    NoSuchId(String),
    /// One batch held two objects with this id.
    DuplicateId(String),
    /// `get_one` found this many objects, not one.
    NotOne(usize, String),
}

impl fmt::Display for RepoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RepoError::NotARepo(p) => write!(
                f,
                "{} is not a dryml repo (no {MARKER} file; create one with Repo::create or %repo open DIR --create)",
                p.display()
            ),
            RepoError::Exists(p) => write!(f, "{} already holds a dryml repo; open it instead", p.display()),
            RepoError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            RepoError::Object(e) => write!(f, "{e}"),
            RepoError::NoSuchId(id) => write!(f, "no object with id `{id}` in this repo"),
            RepoError::DuplicateId(id) => {
                write!(f, "two objects in one add_many have the id `{id}`; nothing was added")
            }
            RepoError::NotOne(n, sel) => write!(f, "expected one object matching {sel}, found {n}"),
        }
    }
}

impl std::error::Error for RepoError {}

impl From<ObjectError> for RepoError {
    fn from(e: ObjectError) -> Self {
        RepoError::Object(e)
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> RepoError + '_ {
    move |e| RepoError::Io(path.to_path_buf(), e.to_string())
}

impl Repo {
    /// Makes a new repo in `dir` (created if missing; an existing repo there is an error).
    pub fn create(dir: impl AsRef<Path>) -> Result<Repo, RepoError> {
        let dir = dir.as_ref();
        if dir.join(MARKER).exists() {
            return Err(RepoError::Exists(dir.to_path_buf()));
        }
        std::fs::create_dir_all(dir.join(OBJECTS)).map_err(io(dir))?;
        let index = dir.join(INDEX);
        std::fs::OpenOptions::new().create(true).append(true).open(&index).map_err(io(&index))?;
        write_atomic(&dir.join(MARKER), MARKER_TEXT.as_bytes(), Durability::Fsync).map_err(io(dir))?;
        Repo::open(dir)
    }

    /// Opens the repo in `dir` and reads its index.
    pub fn open(dir: impl AsRef<Path>) -> Result<Repo, RepoError> {
        let dir = dir.as_ref();
        match std::fs::read_to_string(dir.join(MARKER)) {
            Ok(t) if t.starts_with("dryml-repo ") => {}
            _ => return Err(RepoError::NotARepo(dir.to_path_buf())),
        }
        let mut repo =
            Repo { dir: dir.to_path_buf(), entries: HashMap::new(), by_type: HashMap::new(), offset: 0, skipped: 0 };
        repo.reload()?;
        Ok(repo)
    }

    /// The repo's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, id: &str) -> PathBuf {
        self.dir.join(OBJECTS).join(format!("{id}.dry"))
    }

    /// Saves `obj` into the repo (replacing the object with its id, if any) and indexes it.
    /// Returns once both are on disk.
    pub fn add(&mut self, obj: &dyn Object) -> Result<String, RepoError> {
        let mut ids = self.add_many([obj])?;
        Ok(ids.remove(0))
    }

    /// Adds many objects with one sync: every file is written and synced (one `syncfs` for a
    /// batch), then, under the index lock, renamed into place and recorded with one append.
    /// Returns the ids once everything is on disk. If any step fails, no object is added: the
    /// files it replaced are put back and no temporary file is left.
    pub fn add_many<'a>(&mut self, objs: impl IntoIterator<Item = &'a dyn Object>) -> Result<Vec<String>, RepoError> {
        let objs: Vec<&dyn Object> = objs.into_iter().collect();
        let mut staged = Vec::new();
        let mut records = Vec::new();
        let mut ids: Vec<String> = Vec::new();
        let single = objs.len() == 1;
        for obj in objs {
            let id = obj.meta().id.clone();
            check_id(&id)?;
            if ids.contains(&id) {
                return Err(RepoError::DuplicateId(id));
            }
            let def = obj.definition();
            // How it was made, where the object does not say already: this cell run's.
            let meta = Meta { provenance: Some(Provenance::of(obj)), ..obj.meta().clone() };
            let bytes = crate::objects::object::to_bytes_as(obj, &meta)?;
            let path = self.file(&id);
            // A batch is synced by the one `syncfs` below, not file by file.
            staged.push(Staged::new(&path, &bytes, single).map_err(io(&path))?);
            records.push(json!({"op": "add", "object": record(&def, &meta), "size": bytes.len()}));
            ids.push(id);
        }
        let objects = self.dir.join(OBJECTS);
        let dir = std::fs::File::open(&objects).map_err(io(&objects))?;
        if !single && unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
            return Err(io(&objects)(std::io::Error::last_os_error()));
        }
        let lock = self.lock()?;
        let mut swapped: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
        let done = self.swap_in(staged, &mut swapped).and_then(|()| {
            dir.sync_all().map_err(io(&objects))?;
            self.append_locked(&lock, &records)
        });
        for (target, old) in swapped.into_iter().rev() {
            match (&done, old) {
                (Ok(()), Some(old)) => drop(std::fs::remove_file(old)),
                (Ok(()), None) => {}
                // Undone: the file that was there comes back, or the new one goes.
                (Err(_), Some(old)) => drop(std::fs::rename(old, &target)),
                (Err(_), None) => drop(std::fs::remove_file(&target)),
            }
        }
        if done.is_err() {
            let _ = dir.sync_all();
        }
        drop(lock);
        done?;
        self.reload()?;
        Ok(ids)
    }

    /// Renames staged files over their targets, keeping each replaced file as a hard link
    /// (`swapped`: target, kept old file) until the write is acknowledged or undone.
    fn swap_in(&self, staged: Vec<Staged>, swapped: &mut Vec<(PathBuf, Option<PathBuf>)>) -> Result<(), RepoError> {
        for (n, s) in staged.into_iter().enumerate() {
            let target = s.target().to_path_buf();
            let old = target.with_extension(format!("dry.old-{}-{n}", std::process::id()));
            let _ = std::fs::remove_file(&old);
            let kept = match std::fs::hard_link(&target, &old) {
                Ok(()) => Some(old),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(io(&target)(e)),
            };
            swapped.push((target.clone(), kept));
            s.commit().map_err(io(&target))?;
        }
        Ok(())
    }

    /// Saves an object again after it changed (the same as [`Repo::add`]).
    pub fn save(&mut self, obj: &dyn Object) -> Result<(), RepoError> {
        self.add(obj).map(|_| ())
    }

    /// Removes an object: its index record first, then its file, both under the index lock
    /// (a re-add racing the delete comes wholly before or after it).
    pub fn delete(&mut self, id: &str) -> Result<(), RepoError> {
        if !self.entries.contains_key(id) {
            return Err(RepoError::NoSuchId(id.to_string()));
        }
        let lock = self.lock()?;
        self.append_locked(&lock, &[json!({"op": "delete", "id": id})])?;
        let path = self.file(id);
        let removed = match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&path)(e)),
            _ => Ok(()),
        };
        drop(lock);
        self.reload()?;
        removed
    }

    /// How many objects it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Ids name files: not empty, no leading `.`, no path separators.
fn check_id(id: &str) -> Result<(), RepoError> {
    if id.is_empty() || id.contains(['/', '\\', '\0']) || id.starts_with('.') {
        return Err(RepoError::Object(ObjectError::Format(format!(
            "`{id}` cannot name a file: ids must not be empty, start with `.`, or hold `/`"
        ))));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
