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

use crate::fs::{write_atomic, Durability, Staged};
use crate::object::{self, from_record, record, Meta, Object, ObjectDef, ObjectError};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{Read, Seek, SeekFrom, Write};
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
    pub def: ObjectDef,
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
    NotARepo(PathBuf),
    Exists(PathBuf),
    Io(PathBuf, String),
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
            RepoError::NotARepo(p) => write!(f, "{} is not a dryml repo (no {MARKER} file; create one with Repo::create or %repo open DIR --create)", p.display()),
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
        let mut repo = Repo {
            dir: dir.to_path_buf(),
            entries: HashMap::new(),
            by_type: HashMap::new(),
            offset: 0,
            skipped: 0,
        };
        repo.reload()?;
        Ok(repo)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads what was appended to the index since the last read (by any process).
    pub fn reload(&mut self) -> Result<(), RepoError> {
        let path = self.dir.join(INDEX);
        let mut f = std::fs::File::open(&path).map_err(io(&path))?;
        f.seek(SeekFrom::Start(self.offset)).map_err(io(&path))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).map_err(io(&path))?;
        // A line still being written (no newline yet) is read next time.
        let complete = buf.iter().rposition(|b| *b == b'\n').map(|i| i + 1).unwrap_or(0);
        for line in buf[..complete].split(|b| *b == b'\n') {
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Value>(line).ok().and_then(|v| self.apply_record(&v)) {
                Some(()) => {}
                None => self.skipped += 1,
            }
        }
        self.offset += complete as u64;
        Ok(())
    }

    fn apply_record(&mut self, v: &Value) -> Option<()> {
        match v.get("op")?.as_str()? {
            "add" => {
                let (def, meta) = from_record(v.get("object")?).ok()?;
                // An id names a file: one that could reach outside the repo is never followed.
                check_id(&meta.id).ok()?;
                let size = v.get("size").and_then(Value::as_u64).unwrap_or(0);
                let id = meta.id.clone();
                if let Some(old) = self.entries.remove(&id) {
                    self.unlink_type(&old.def.type_name, &id);
                }
                self.by_type.entry(def.type_name.clone()).or_default().push(id.clone());
                self.entries.insert(id, Entry { def, meta, size });
            }
            "delete" => {
                let id = v.get("id")?.as_str()?;
                check_id(id).ok()?;
                if let Some(old) = self.entries.remove(id) {
                    self.unlink_type(&old.def.type_name, id);
                }
            }
            _ => return None,
        }
        Some(())
    }

    fn unlink_type(&mut self, type_name: &str, id: &str) {
        if let Some(ids) = self.by_type.get_mut(type_name) {
            ids.retain(|i| i != id);
        }
    }

    /// The index lock: held while object files are replaced and their records appended.
    fn lock(&self) -> Result<std::fs::File, RepoError> {
        let lock_path = self.dir.join(LOCK);
        let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(io(&lock_path))?;
        while unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io(&lock_path)(e));
            }
        }
        Ok(lock)
    }

    /// Appends records to the index, fsynced; the caller holds the lock (`_held`).
    fn append_locked(&self, _held: &std::fs::File, records: &[Value]) -> Result<(), RepoError> {
        let path = self.dir.join(INDEX);
        let mut f = std::fs::OpenOptions::new().read(true).append(true).open(&path).map_err(io(&path))?;
        let mut text = String::new();
        // A torn line left by a crash is ended first, so it cannot swallow this record.
        let len = f.metadata().map_err(io(&path))?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            f.seek(SeekFrom::Start(len - 1)).map_err(io(&path))?;
            f.read_exact(&mut last).map_err(io(&path))?;
            if last[0] != b'\n' {
                text.push('\n');
            }
        }
        for r in records {
            text.push_str(&r.to_string());
            text.push('\n');
        }
        f.write_all(text.as_bytes()).map_err(io(&path))?;
        f.sync_all().map_err(io(&path))
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
            let bytes = object::to_bytes(obj)?;
            let path = self.file(&id);
            // A batch is synced by the one `syncfs` below, not file by file.
            staged.push(Staged::new(&path, &bytes, single).map_err(io(&path))?);
            records.push(json!({"op": "add", "object": record(&obj.definition(), obj.meta()), "size": bytes.len()}));
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

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The index entries matching `sel`, oldest first, without reading any object file.
    pub fn find(&self, sel: &Selector) -> Vec<&Entry> {
        let mut out: Vec<&Entry> = match (&sel.id, &sel.type_name) {
            (Some(id), _) => self.entries.get(id).into_iter().collect(),
            (None, Some(t)) => self
                .by_type
                .get(t)
                .map(|ids| ids.iter().filter_map(|i| self.entries.get(i)).collect())
                .unwrap_or_default(),
            (None, None) => self.entries.values().collect(),
        };
        out.retain(|e| sel.matches(&e.def, &e.meta));
        out.sort_by(|a, b| a.meta.created.total_cmp(&b.meta.created).then_with(|| a.meta.id.cmp(&b.meta.id)));
        out
    }

    /// Every entry, oldest first.
    pub fn entries(&self) -> Vec<&Entry> {
        self.find(&Selector::any())
    }

    /// Loads the objects matching `sel`.
    pub fn get(&self, sel: &Selector) -> Result<Vec<Box<dyn Object>>, RepoError> {
        self.find(sel).into_iter().map(|e| self.load(&e.meta.id)).collect()
    }

    /// Loads the one object matching `sel`; an error when none or several match.
    pub fn get_one(&self, sel: &Selector) -> Result<Box<dyn Object>, RepoError> {
        let found = self.find(sel);
        if found.len() != 1 {
            return Err(RepoError::NotOne(found.len(), sel.to_string()));
        }
        self.load(&found[0].meta.id)
    }

    /// Loads the object with this id.
    pub fn by_id(&self, id: &str) -> Result<Box<dyn Object>, RepoError> {
        if !self.entries.contains_key(id) {
            return Err(RepoError::NoSuchId(id.to_string()));
        }
        self.load(id)
    }

    fn load(&self, id: &str) -> Result<Box<dyn Object>, RepoError> {
        Ok(object::load_object(self.file(id))?)
    }

    /// Calls `f` on each object matching `sel` (loaded one at a time) and returns what it
    /// returned. Changed objects are kept only if `f` saves them (with [`Repo::save`] on a
    /// second handle, or by returning them).
    pub fn apply<R>(&self, sel: &Selector, mut f: impl FnMut(&mut dyn Object) -> R) -> Result<Vec<R>, RepoError> {
        let mut out = Vec::new();
        for e in self.find(sel) {
            let mut obj = self.load(&e.meta.id)?;
            out.push(f(obj.as_mut()));
        }
        Ok(out)
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

/// A filter over definitions, with DRYML's semantics:
/// - by type: the registered name;
/// - by positional arguments: element by element, the selector's first N against the object's
///   first N;
/// - by named arguments: a subset match, nested (objects inside are matched as subsets too);
/// - by predicate: any function of the definition and identity;
/// - by id.
///
/// Values match when equal; numbers compare as numbers (`1` matches `1.0`); an object in the
/// selector matches an object holding at least its keys with matching values; arrays match
/// element by element with the same length.
#[derive(Default)]
pub struct Selector {
    pub type_name: Option<String>,
    pub args: Option<Vec<Value>>,
    pub kwargs: Option<serde_json::Map<String, Value>>,
    pub id: Option<String>,
    predicates: Vec<Box<dyn Fn(&ObjectDef, &Meta) -> bool>>,
}

impl Selector {
    /// Matches everything.
    pub fn any() -> Selector {
        Selector::default()
    }
    /// Objects of one registered type.
    pub fn of(type_name: &str) -> Selector {
        Selector { type_name: Some(type_name.to_string()), ..Selector::default() }
    }
    /// The object with this id.
    pub fn id(id: &str) -> Selector {
        Selector { id: Some(id.to_string()), ..Selector::default() }
    }
    /// Positional arguments, matched element by element from the first.
    pub fn args(mut self, args: Vec<Value>) -> Selector {
        self.args = Some(args);
        self
    }
    /// Named arguments, matched as a (nested) subset: pass a JSON object.
    pub fn kwargs(mut self, kwargs: Value) -> Selector {
        let map = match kwargs {
            Value::Object(m) => m,
            other => {
                let mut m = serde_json::Map::new();
                m.insert("value".into(), other);
                m
            }
        };
        self.kwargs.get_or_insert_with(Default::default).extend(map);
        self
    }
    /// One named argument; `path` may be dotted for nested ones (`data.name`).
    pub fn arg(self, path: &str, value: Value) -> Selector {
        let nested = path.rsplit('.').fold(value, |v, k| json!({ k: v }));
        self.kwargs(nested)
    }
    /// Any test on the definition and identity.
    pub fn filter(mut self, f: impl Fn(&ObjectDef, &Meta) -> bool + 'static) -> Selector {
        self.predicates.push(Box::new(f));
        self
    }

    /// `TYPE key=value ...` as `%repo get` takes it: values are JSON when they parse as JSON
    /// (numbers, `true`, `"quoted"`, `[..]`, `{..}`), otherwise plain strings; dotted keys
    /// reach nested arguments; `0=v`, `1=v` are positional.
    pub fn parse(words: &[&str]) -> Result<Selector, (String, usize)> {
        let Some((ty, rest)) = words.split_first() else {
            return Err(("expected a type name, as in `Mlp lr=0.1`".into(), 0));
        };
        if ty.contains('=') {
            return Err((format!("`{ty}`: the first word is the type name, as in `Mlp {ty}`"), 0));
        }
        let mut sel = if *ty == "*" { Selector::any() } else { Selector::of(ty) };
        let mut positional: BTreeMap<usize, Value> = BTreeMap::new();
        for (i, w) in rest.iter().enumerate() {
            let Some((k, v)) = w.split_once('=') else {
                return Err((format!("`{w}` is not key=value"), i + 1));
            };
            if k.is_empty() || k.split('.').any(str::is_empty) {
                return Err((format!("`{w}`: empty key"), i + 1));
            }
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
            match k.parse::<usize>() {
                Ok(n) => {
                    positional.insert(n, value);
                }
                Err(_) => sel = sel.arg(k, value),
            }
        }
        if !positional.is_empty() {
            let last = *positional.keys().last().unwrap();
            // Not `last + 1`: a word `18446744073709551615=v` would overflow it.
            if positional.len() - 1 != last {
                return Err((format!("positional arguments must be 0..{last} without gaps"), 1));
            }
            sel = sel.args(positional.into_values().collect());
        }
        Ok(sel)
    }

    pub fn matches(&self, def: &ObjectDef, meta: &Meta) -> bool {
        if self.type_name.as_ref().is_some_and(|t| *t != def.type_name) {
            return false;
        }
        if self.id.as_ref().is_some_and(|i| *i != meta.id) {
            return false;
        }
        if let Some(want) = &self.args {
            let have = def.positional();
            if want.len() > have.len() || !want.iter().zip(have).all(|(w, h)| value_matches(w, h)) {
                return false;
            }
        }
        if let Some(want) = &self.kwargs {
            let Some(have) = def.named() else { return false };
            if !want.iter().all(|(k, w)| have.get(k).is_some_and(|h| value_matches(w, h))) {
                return false;
            }
        }
        self.predicates.iter().all(|p| p(def, meta))
    }
}

/// Selector value `want` against argument value `have` (see [`Selector`]).
fn value_matches(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Object(w), Value::Object(h)) => w.iter().all(|(k, wv)| h.get(k).is_some_and(|hv| value_matches(wv, hv))),
        (Value::Array(w), Value::Array(h)) => w.len() == h.len() && w.iter().zip(h).all(|(a, b)| value_matches(a, b)),
        (a, b) => a == b,
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = vec![self.type_name.clone().unwrap_or_else(|| "any type".into())];
        if let Some(a) = &self.args {
            parts.push(format!("args {}", Value::Array(a.clone())));
        }
        if let Some(k) = &self.kwargs {
            parts.push(format!("kwargs {}", Value::Object(k.clone())));
        }
        if let Some(i) = &self.id {
            parts.push(format!("id {i}"));
        }
        if !self.predicates.is_empty() {
            parts.push(format!("{} predicate(s)", self.predicates.len()));
        }
        write!(f, "Selector({})", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::tests::{Cfg, Mlp, Named};
    use crate::object::Build;

    fn dir() -> PathBuf {
        std::env::temp_dir().join(format!("dryml-repo-{}-{}", std::process::id(), object::uuid_v4()))
    }

    fn named(lr: f64, data: &str) -> Named {
        Named::build(Cfg { lr, data: data.into() }, Meta::new())
    }

    #[test]
    fn add_get_delete_and_reload() {
        let d = dir();
        assert!(matches!(Repo::open(&d), Err(RepoError::NotARepo(_))));
        let mut repo = Repo::create(&d).unwrap();
        assert!(matches!(Repo::create(&d), Err(RepoError::Exists(_))));
        let def = ObjectDef::new("Mlp", &(0.1, vec![4usize])).unwrap();
        for _ in 0..5 {
            repo.add(def.build().unwrap().as_ref()).unwrap();
        }
        let def2 = ObjectDef::new("Mlp", &(0.2, vec![4usize])).unwrap();
        for _ in 0..5 {
            repo.add(def2.build().unwrap().as_ref()).unwrap();
        }
        let bulk: Vec<Named> = (0..3).map(|i| named(i as f64, "bulk")).collect();
        let ids = repo.add_many(bulk.iter().map(|n| n as &dyn Object)).unwrap();
        assert_eq!(ids.len(), 3);
        assert_eq!(repo.find(&Selector::any().arg("data", json!("bulk"))).len(), 3);
        for id in &ids {
            repo.delete(id).unwrap();
        }
        let bad = Named::build(Cfg { lr: 0.0, data: "x".into() }, Meta::with_id("../escape"));
        assert!(repo.add(&bad).unwrap_err().to_string().contains("cannot name a file"));
        repo.add(&named(0.1, "mnist")).unwrap();
        assert_eq!(repo.len(), 11);
        assert_eq!(repo.get(&Selector::of("Mlp").args(vec![json!(0.2)])).unwrap().len(), 5);
        let one = repo.get_one(&Selector::of("models.Named")).unwrap();
        assert_eq!(one.downcast_ref::<Named>().unwrap().cfg.data, "mnist");
        let e = repo.get_one(&Selector::of("Mlp")).err().unwrap().to_string();
        assert_eq!(e, "expected one object matching Selector(Mlp), found 10");
        // A second handle (another process, say) sees additions after reload.
        let mut other = Repo::open(&d).unwrap();
        let id = repo.add(&named(0.3, "cifar")).unwrap();
        assert_eq!(other.len(), 11);
        other.reload().unwrap();
        assert_eq!(other.len(), 12);
        other.delete(&id).unwrap();
        repo.reload().unwrap();
        assert_eq!(repo.len(), 11);
        assert!(matches!(repo.by_id(&id), Err(RepoError::NoSuchId(_))));
        assert!(!d.join("objects").join(format!("{id}.dry")).exists());
        // Saving again replaces, by id.
        let mut m = repo.get(&Selector::of("Mlp")).unwrap().remove(0);
        m.meta_mut().description = "retrained".into();
        let mid = m.meta().id.clone();
        repo.save(m.as_ref()).unwrap();
        assert_eq!(repo.len(), 11);
        assert_eq!(repo.by_id(&mid).unwrap().meta().description, "retrained");
        let sums = repo.apply(&Selector::of("Mlp").args(vec![json!(0.1)]), |o| o.downcast_ref::<Mlp>().is_some()).unwrap();
        assert_eq!(sums, vec![true; 5]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn selectors_follow_dryml() {
        let def = |ty: &str, args: Value| ObjectDef { type_name: ty.into(), args };
        let meta = Meta::with_id("abc");
        let mlp = def("Mlp", json!({"lr": 0.1, "layers": [64, 10], "data": {"name": "mnist", "split": "train"}}));
        let pos = def("Data", json!([2, "x", {"k": 1}]));
        // (selector, definition, matches)
        let table: Vec<(Selector, &ObjectDef, bool)> = vec![
            (Selector::of("Mlp"), &mlp, true),
            (Selector::of("Data"), &mlp, false),
            (Selector::any().arg("lr", json!(0.1)), &mlp, true),
            (Selector::of("Mlp").arg("lr", json!(0.2)), &mlp, false),
            (Selector::of("Mlp").arg("data.name", json!("mnist")), &mlp, true),
            (Selector::of("Mlp").kwargs(json!({"data": {"split": "test"}})), &mlp, false),
            (Selector::of("Mlp").arg("layers", json!([64, 10])), &mlp, true),
            (Selector::of("Mlp").arg("layers", json!([64])), &mlp, false),
            (Selector::of("Mlp").arg("missing", json!(1)), &mlp, false),
            (Selector::of("Data").args(vec![json!(2)]), &pos, true),
            (Selector::of("Data").args(vec![json!(2.0), json!("x")]), &pos, true),
            (Selector::of("Data").args(vec![json!(3)]), &pos, false),
            (Selector::of("Data").args(vec![json!(2), json!("x"), json!({"k": 1}), json!(4)]), &pos, false),
            (Selector::of("Data").args(vec![json!(2), json!("x"), json!({})]), &pos, true),
            (Selector::of("Data").kwargs(json!({"lr": 1})), &pos, false),
            (Selector::any().filter(|d, _| d.type_name.len() == 4), &pos, true),
            (Selector::any().filter(|d, _| d.type_name.len() == 3), &pos, false),
            (Selector::id("abc"), &pos, true),
            (Selector::id("abd"), &pos, false),
        ];
        for (i, (sel, d, want)) in table.iter().enumerate() {
            assert_eq!(sel.matches(d, &meta), *want, "row {i}: {sel} on {d}");
        }
        let sel = Selector::parse(&["Mlp", "lr=0.1", "data.name=mnist", "layers=[64,10]"]).unwrap();
        assert!(sel.matches(&mlp, &meta), "{sel}");
        let sel = Selector::parse(&["Data", "0=2", "1=x"]).unwrap();
        assert!(sel.matches(&pos, &meta), "{sel}");
        for (words, msg, at) in [
            (&["lr=0.1"][..], "the first word is the type name", 0),
            (&["Mlp", "lr"][..], "`lr` is not key=value", 1),
            (&["Mlp", "a..b=1"][..], "empty key", 1),
            (&["Data", "1=x"][..], "without gaps", 1),
            (&["Data", "18446744073709551615=x"][..], "without gaps", 1),
            (&[][..], "expected a type name", 0),
        ] {
            let (m, i) = Selector::parse(words).err().unwrap();
            assert!(m.contains(msg) && i == at, "{words:?}: {m} at {i}");
        }
    }

    #[test]
    fn a_writer_killed_mid_save_leaves_every_acknowledged_object_loadable() {
        let d = dir();
        Repo::create(&d).unwrap();
        let acks = d.join("acks");
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let mut repo = Repo::open(&d).unwrap();
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&acks).unwrap();
            for i in 0.. {
                let mut m = Mlp::build((i as f64, vec![64, 64]), Meta::new());
                m.weights.iter_mut().for_each(|w| *w = i as f32);
                let id = repo.add(&m).unwrap();
                // Acknowledged: add returned.
                writeln!(f, "{id}").unwrap();
            }
            unsafe { libc::_exit(0) };
        }
        let t0 = std::time::Instant::now();
        while std::fs::read_to_string(&acks).map(|t| t.lines().count()).unwrap_or(0) < 20 {
            assert!(t0.elapsed().as_secs() < 60, "the writer made no progress");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        let acked: Vec<String> = std::fs::read_to_string(&acks).unwrap().lines().map(str::to_string).collect();
        let repo = Repo::open(&d).unwrap();
        assert!(repo.len() >= acked.len(), "{} indexed, {} acknowledged", repo.len(), acked.len());
        for id in &acked {
            let m = repo.by_id(id).unwrap();
            let m = m.downcast_ref::<Mlp>().unwrap();
            assert!(m.weights.iter().all(|w| *w == m.args.0 as f32));
        }
        // Whatever else the index holds loads too; leftovers are only temporary files.
        for e in repo.entries() {
            repo.by_id(&e.meta.id).unwrap();
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn index_lines_naming_files_outside_the_repo_are_skipped() {
        let d = dir();
        let mut repo = Repo::create(&d).unwrap();
        let id = repo.add(&named(1.0, "kept")).unwrap();
        let line = std::fs::read_to_string(d.join(INDEX)).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(d.join(INDEX)).unwrap();
        for bad in ["../../escape", "/etc/passwd", ".hidden", ""] {
            f.write_all(line.replace(&format!("\"{id}\""), &format!("{:?}", bad)).as_bytes()).unwrap();
        }
        f.write_all(b"{\"op\":\"delete\",\"id\":\"../x\"}\n").unwrap();
        drop(f);
        let fresh = Repo::open(&d).unwrap();
        assert_eq!(fresh.skipped, 5);
        assert_eq!(fresh.entries().iter().map(|e| e.meta.id.as_str()).collect::<Vec<_>>(), [id.as_str()]);
        assert!(matches!(fresh.by_id("../../escape"), Err(RepoError::NoSuchId(_))));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn two_processes_adding_at_once_lose_nothing_and_torn_lines_are_skipped() {
        let d = dir();
        Repo::create(&d).unwrap();
        let mut kids = Vec::new();
        for k in 0..4 {
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let r = std::panic::catch_unwind(|| {
                    let mut repo = Repo::open(&d).unwrap();
                    for i in 0..25 {
                        repo.add(&named(k as f64, &format!("p{k}-{i}"))).unwrap();
                    }
                });
                unsafe { libc::_exit(if r.is_ok() { 0 } else { 1 }) };
            }
            kids.push(pid);
        }
        for pid in kids {
            let mut status = 0;
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(status, 0);
        }
        let mut repo = Repo::open(&d).unwrap();
        assert_eq!(repo.len(), 100);
        assert_eq!(repo.skipped, 0);
        // A crash mid-append leaves a torn line: readers skip it, the next writer ends it.
        let mut f = std::fs::OpenOptions::new().append(true).open(d.join(INDEX)).unwrap();
        f.write_all(br#"{"op":"add","object":{"type":"Nam"#).unwrap();
        drop(f);
        repo.add(&named(9.0, "after the crash")).unwrap();
        let fresh = Repo::open(&d).unwrap();
        assert_eq!(fresh.len(), 101);
        assert_eq!(fresh.skipped, 1);
        assert_eq!(fresh.find(&Selector::any().arg("data", json!("after the crash"))).len(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn files(d: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            std::fs::read_dir(d.join(OBJECTS)).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn a_failed_batch_adds_nothing_and_leaves_no_file() {
        let d = dir();
        let mut repo = Repo::create(&d).unwrap();
        let kept = repo.add(&named(1.0, "kept")).unwrap();
        let before = (files(&d), std::fs::read(d.join(INDEX)).unwrap());
        // Two objects with one id: refused before anything is written.
        let twins = [Named::build(Cfg { lr: 2.0, data: "a".into() }, Meta::with_id("twin")),
                     Named::build(Cfg { lr: 3.0, data: "b".into() }, Meta::with_id("twin"))];
        let e = repo.add_many(twins.iter().map(|o| o as &dyn Object)).unwrap_err();
        assert_eq!(e, RepoError::DuplicateId("twin".into()));
        assert!(e.to_string().contains("nothing was added"), "{e}");
        // A bad id after good objects: their staged files go too.
        let mixed = [named(4.0, "good"), Named::build(Cfg { lr: 5.0, data: "bad".into() }, Meta::with_id("../bad"))];
        assert!(repo.add_many(mixed.iter().map(|o| o as &dyn Object)).is_err());
        assert_eq!((files(&d), std::fs::read(d.join(INDEX)).unwrap()), before);
        assert_eq!(repo.len(), 1);
        repo.by_id(&kept).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_save_whose_index_append_fails_puts_the_old_file_back() {
        let d = dir();
        let mut repo = Repo::create(&d).unwrap();
        let id = repo.add(&Named::build(Cfg { lr: 1.0, data: "v1".into() }, Meta::with_id("m"))).unwrap();
        let new = Named::build(Cfg { lr: 2.0, data: "v2".into() }, Meta::with_id("m"));
        let fresh = Named::build(Cfg { lr: 3.0, data: "v3".into() }, Meta::with_id("n"));
        // The index cannot be appended to (a directory in its place; root ignores modes).
        std::fs::rename(d.join(INDEX), d.join("index.away")).unwrap();
        std::fs::create_dir(d.join(INDEX)).unwrap();
        assert!(matches!(repo.save(&new), Err(RepoError::Io(..))));
        assert!(matches!(repo.add_many([&new as &dyn Object, &fresh]), Err(RepoError::Io(..))));
        std::fs::remove_dir(d.join(INDEX)).unwrap();
        std::fs::rename(d.join("index.away"), d.join(INDEX)).unwrap();
        // The file is the one the index describes, and nothing else was left.
        assert_eq!(files(&d), [format!("{id}.dry")]);
        let fresh_repo = Repo::open(&d).unwrap();
        let entry = fresh_repo.entries()[0].clone();
        let obj = fresh_repo.by_id(&id).unwrap();
        assert_eq!(obj.definition(), entry.def);
        assert_eq!(obj.downcast_ref::<Named>().unwrap().cfg.data, "v1");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn processes_saving_one_id_at_once_leave_index_and_file_agreeing() {
        let d = dir();
        Repo::create(&d).unwrap();
        for round in 0..30 {
            // Both writers wait on one pipe, so their saves start together.
            let mut go = [0; 2];
            assert_eq!(unsafe { libc::pipe(go.as_mut_ptr()) }, 0);
            let mut kids = Vec::new();
            for k in 0..2 {
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    let r = std::panic::catch_unwind(|| {
                        let mut repo = Repo::open(&d).unwrap();
                        let o = Named::build(Cfg { lr: k as f64, data: format!("r{round}-p{k}") }, Meta::with_id("shared"));
                        let mut b = [0u8; 1];
                        unsafe { libc::close(go[1]) };
                        unsafe { libc::read(go[0], b.as_mut_ptr().cast(), 1) };
                        if round % 5 == 4 && k == 1 {
                            let _ = repo.delete("shared");
                        } else {
                            repo.save(&o).unwrap();
                        }
                    });
                    unsafe { libc::_exit(if r.is_ok() { 0 } else { 1 }) };
                }
                kids.push(pid);
            }
            unsafe {
                libc::close(go[0]);
                libc::close(go[1]);
            }
            for pid in kids {
                let mut status = 0;
                unsafe { libc::waitpid(pid, &mut status, 0) };
                assert_eq!(status, 0);
            }
            let repo = Repo::open(&d).unwrap();
            match repo.entries().first() {
                // Indexed: the file holds exactly what the index says.
                Some(e) => assert_eq!(repo.by_id("shared").unwrap().definition(), e.def, "round {round}"),
                // Deleted last: no file either.
                None => assert!(files(&d).is_empty(), "round {round}: {:?}", files(&d)),
            }
            assert!(files(&d).iter().all(|f| f == "shared.dry"), "{:?}", files(&d));
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
