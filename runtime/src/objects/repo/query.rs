//! Reading a repo: the entries a selector matches, from the index alone, and their objects
//! loaded from their files.

use super::{Entry, Repo, RepoError, Selector};
use crate::objects::Object;

impl Repo {
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

    /// Loads the object with this id as a `T` (see [`ObjectDef::build_as`](crate::ObjectDef::build_as)).
    pub fn by_id_as<T: crate::objects::Build + Object>(&self, id: &str) -> Result<T, RepoError> {
        if !self.entries.contains_key(id) {
            return Err(RepoError::NoSuchId(id.to_string()));
        }
        Ok(crate::objects::load_object_as(self.file(id))?)
    }

    fn load(&self, id: &str) -> Result<Box<dyn Object>, RepoError> {
        Ok(crate::objects::load_object(self.file(id))?)
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
