//! An object's file: a header (magic, version, lengths), its definition record, its state's
//! sections; written whole or not at all, read back without the type at the call site.

use super::*;
use crate::sys::fs::{write_atomic, Durability};

/// The definition record of a file and of a repo's index: `{"type", "args", "id", "created",
/// "description"}`, and `"metrics"` and `"provenance"` when there are. Written by hand: the crate avoids
/// serde's derive (and its compile time in every notebook).
pub fn record(def: &ObjectDef, meta: &Meta) -> Value {
    let mut r = json!({"type": def.type_name, "args": def.args, "id": meta.id, "created": meta.created, "description": meta.description});
    if let Some(m) = &meta.metrics {
        r["metrics"] = m.clone();
    }
    if let Some(p) = &meta.provenance {
        r["provenance"] = p.to_json();
    }
    r
}

/// Reads [`record`]'s form back.
pub fn from_record(v: &Value) -> Result<(ObjectDef, Meta), String> {
    let s = |k: &str| {
        v.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| format!("the record has no `{k}`"))
    };
    let def = ObjectDef { type_name: s("type")?, args: v.get("args").cloned().unwrap_or(Value::Null) };
    let meta = Meta {
        id: s("id")?,
        created: v.get("created").and_then(Value::as_f64).unwrap_or(0.0),
        description: v.get("description").and_then(Value::as_str).unwrap_or("").to_string(),
        metrics: v.get("metrics").cloned(),
        provenance: v.get("provenance").filter(|p| p.is_object()).map(crate::objects::Provenance::from_json),
    };
    Ok((def, meta))
}

/// The whole file for `obj`: header (magic, version, length, CRC-32), then the body: the
/// definition as JSON and the state sections.
pub fn to_bytes(obj: &dyn Object) -> Result<Vec<u8>, ObjectError> {
    to_bytes_as(obj, obj.meta())
}

/// [`to_bytes`] with `meta` in the object's own stead (a repo's, with the provenance it adds).
pub fn to_bytes_as(obj: &dyn Object, meta: &Meta) -> Result<Vec<u8>, ObjectError> {
    let mut state = State::default();
    obj.save_state(&mut state)?;
    let record = serde_json::to_vec(&record(&obj.definition(), meta))
        .map_err(|e| ObjectError::Format(format!("the definition does not serialize: {e}")))?;
    let mut body = Vec::with_capacity(record.len() + 64);
    body.extend_from_slice(&(record.len() as u64).to_le_bytes());
    body.extend_from_slice(&record);
    body.extend_from_slice(&(state.sections.len() as u32).to_le_bytes());
    for (name, bytes) in &state.sections {
        body.extend_from_slice(&(name.len() as u32).to_le_bytes());
        body.extend_from_slice(name.as_bytes());
        body.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        body.extend_from_slice(bytes);
    }
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FILE_VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Reads the header and body, checking magic, version, length and checksum; returns the
/// definition record and the sections.
fn parse(bytes: &[u8]) -> Result<(ObjectDef, Meta, State), ObjectError> {
    let bad = |m: String| ObjectError::Format(m);
    if bytes.len() < HEADER_LEN {
        if !MAGIC.starts_with(&bytes[..bytes.len().min(8)]) {
            return Err(bad("not a DRYML object file (bad magic)".into()));
        }
        return Err(bad(format!("truncated: {} bytes, shorter than the {HEADER_LEN}-byte header", bytes.len())));
    }
    if &bytes[..8] != MAGIC {
        return Err(bad("not a DRYML object file (bad magic)".into()));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version > FILE_VERSION {
        return Err(bad(format!(
            "written by a newer dryml (format version {version}; this build reads up to {FILE_VERSION})"
        )));
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap());
    let crc = u32::from_le_bytes(bytes[20..24].try_into().unwrap());
    let body = &bytes[HEADER_LEN..];
    if (body.len() as u64) < len {
        return Err(bad(format!("truncated: the header promises {len} bytes of body, the file has {}", body.len())));
    }
    if (body.len() as u64) > len {
        return Err(bad(format!("{} stray bytes after the body", body.len() as u64 - len)));
    }
    if crc32fast::hash(body) != crc {
        return Err(bad("corrupt: the checksum does not match the contents".into()));
    }
    let mut r = Reader { b: body, at: 0 };
    let rec_len = r.u64()? as usize;
    let rec: Value =
        serde_json::from_slice(r.take(rec_len)?).map_err(|e| bad(format!("corrupt definition record: {e}")))?;
    let (def, meta) = from_record(&rec).map_err(|e| bad(format!("corrupt definition record: {e}")))?;
    let n = r.u32()?;
    let mut state = State::default();
    for _ in 0..n {
        let nl = r.u32()? as usize;
        let name = String::from_utf8(r.take(nl)?.to_vec()).map_err(|_| bad("a section name is not UTF-8".into()))?;
        let bl = r.u64()? as usize;
        state.sections.push((name, r.take(bl)?.to_vec()));
    }
    Ok((def, meta, state))
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ObjectError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.b.len());
        let end = end.ok_or_else(|| ObjectError::Format("corrupt: a length runs past the end of the body".into()))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, ObjectError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, ObjectError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
}

/// The object a file's bytes describe, as a `T` (built without the registry), its state loaded.
pub fn from_bytes_as<T: Build + Object>(bytes: &[u8], path: Option<&Path>) -> Result<T, ObjectError> {
    let at = |e: ObjectError| match path {
        Some(p) => ObjectError::File(p.to_path_buf(), e.to_string()),
        None => e,
    };
    let (def, meta, state) = parse(bytes).map_err(at)?;
    let mut obj = build_as::<T>(&def, meta).map_err(at)?;
    Object::load_state(&mut obj, &state).map_err(at)?;
    Ok(obj)
}

/// Builds the object a file's bytes describe and loads its state. `path` names the file in
/// errors.
pub fn from_bytes(bytes: &[u8], path: Option<&Path>) -> Result<Box<dyn Object>, ObjectError> {
    let at = |e: ObjectError| match path {
        Some(p) => ObjectError::File(p.to_path_buf(), e.to_string()),
        None => e,
    };
    let (def, meta, state) = parse(bytes).map_err(at)?;
    let mut obj = build(&def, meta).map_err(at)?;
    obj.load_state(&state).map_err(at)?;
    Ok(obj)
}

/// The definition and identity in a file, without building the object (for indexes).
pub fn read_definition(bytes: &[u8]) -> Result<(ObjectDef, Meta), ObjectError> {
    parse(bytes).map(|(d, m, _)| (d, m))
}

/// Saves `obj` to `path`: written to a temporary file, synced, then renamed over `path`, so
/// the file is either the old one or the whole new one.
pub fn save_object(obj: &dyn Object, path: impl AsRef<Path>) -> Result<(), ObjectError> {
    let path = path.as_ref();
    let bytes = to_bytes(obj)?;
    write_atomic(path, &bytes, Durability::Fsync).map_err(|e| ObjectError::File(path.to_path_buf(), e.to_string()))
}

/// Loads the object saved in `path` as a `T` (see [`ObjectDef::build_as`]).
pub fn load_object_as<T: Build + Object>(path: impl AsRef<Path>) -> Result<T, ObjectError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| ObjectError::File(path.to_path_buf(), e.to_string()))?;
    from_bytes_as(&bytes, Some(path))
}

/// Loads the object saved in `path`, whatever its (registered) type.
pub fn load_object(path: impl AsRef<Path>) -> Result<Box<dyn Object>, ObjectError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| ObjectError::File(path.to_path_buf(), e.to_string()))?;
    from_bytes(&bytes, Some(path))
}
