//! Which objects a query means: DRYML's selector over definitions (type, arguments as subsets,
//! a predicate, an id) and the `%repo` words that make one.

use crate::objects::{Meta, ObjectDef};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt;

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
    /// The registered type name; None: any.
    pub type_name: Option<String>,
    /// Positional arguments, matched element by element.
    pub args: Option<Vec<Value>>,
    /// Named arguments, matched as a nested subset.
    pub kwargs: Option<serde_json::Map<String, Value>>,
    /// The id.
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
    /// One named argument; `path` may be dotted for nested ones (`data.name`), and a number in
    /// it indexes a list (`layers.0.linear`).
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

    /// Whether a definition and identity match.
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
        (Value::Object(w), Value::Object(h)) => {
            w.iter().all(|(k, wv)| h.get(k).is_some_and(|hv| value_matches(wv, hv)))
        }
        (Value::Array(w), Value::Array(h)) => w.len() == h.len() && w.iter().zip(h).all(|(a, b)| value_matches(a, b)),
        // A dotted path's number reaches into a list (`layers.1.conv2d.channels`), as in a search.
        (Value::Object(w), Value::Array(h)) => w
            .iter()
            .all(|(k, wv)| k.parse::<usize>().ok().and_then(|i| h.get(i)).is_some_and(|hv| value_matches(wv, hv))),
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
