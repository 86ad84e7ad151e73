//! The analysis process's wire, both ways: one JSON line per request and per answer, as serde
//! types (the first line a kernel sends is its crate's root; an answer may be an error).

use anyhow::{anyhow, Result};
use evcxr::{Completion, Completions, TypeName, VariableInfo};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;

/// The environment variable that makes the embedder's binary serve analyses on this socket.
pub const SOCKET_ENV: &str = "DRYML_ANALYSIS_SOCKET";

/// Completion kinds as the queries name them (a `Completion`'s is static).
const KINDS: [&str; 5] = ["function", "class", "module", "instance", "keyword"];

/// A kernel's first line: the crate it works in.
#[derive(Serialize, Deserialize)]
pub(crate) struct Hello {
    pub root: PathBuf,
}

/// A kernel's request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub(crate) enum Request {
    Busy,
    Ready,
    Prefetch,
    Variables { source: String, function: String },
    Completions { source: String, position: usize, write: bool },
    Hover { source: String, at: u32, write: bool },
}

/// An answer that failed.
#[derive(Serialize, Deserialize)]
pub(crate) struct Failed {
    pub error: String,
}

/// Whether the process loads a workspace.
#[derive(Serialize, Deserialize)]
pub(crate) struct Busy {
    pub busy: bool,
}

/// Whether an inference would not wait for a load.
#[derive(Serialize, Deserialize)]
pub(crate) struct Ready {
    pub ready: bool,
}

/// What a request that answers nothing answers.
#[derive(Serialize, Deserialize)]
pub(crate) struct Done {}

#[derive(Serialize, Deserialize)]
struct Variable {
    #[serde(rename = "type")]
    ty: Option<String>,
    closure: bool,
    boxed: bool,
    mutable: bool,
}

/// The variables of a cell's function.
#[derive(Serialize, Deserialize)]
pub(crate) struct Variables {
    variables: HashMap<String, Variable>,
}

#[derive(Serialize, Deserialize)]
struct Item {
    code: String,
    kind: String,
    label: String,
}

/// The completions at a position, and the span they replace.
#[derive(Serialize, Deserialize)]
pub(crate) struct Completed {
    completions: Vec<Item>,
    start: usize,
    end: usize,
}

/// A hover's text and markdown, where there is one.
#[derive(Default, Serialize, Deserialize)]
pub(crate) struct Hover {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    markdown: Option<String>,
}

/// A message as its line's JSON (the types here always serialise).
pub(crate) fn to_value(message: &impl Serialize) -> Value {
    serde_json::to_value(message).expect("an analysis message serialises")
}

/// An answer as `T`, or the error it carries.
pub(crate) fn answer<T: serde::de::DeserializeOwned>(answer: Value) -> Result<T> {
    if let Ok(Failed { error }) = Failed::deserialize(&answer) {
        return Err(anyhow!("{error}"));
    }
    serde_json::from_value(answer).map_err(|e| anyhow!("an answer the kernel cannot read: {e}"))
}

impl From<&HashMap<String, VariableInfo>> for Variables {
    fn from(variables: &HashMap<String, VariableInfo>) -> Variables {
        let each = variables.iter().map(|(name, info)| {
            let (ty, closure, boxed) = match &info.type_name {
                TypeName::Named(t) => (Some(t.clone()), false, false),
                TypeName::Boxed(t) => (Some(t.clone()), false, true),
                TypeName::Closure => (None, true, false),
                TypeName::Unknown => (None, false, false),
            };
            (name.clone(), Variable { ty, closure, boxed, mutable: info.is_mutable })
        });
        Variables { variables: each.collect() }
    }
}

impl From<Variables> for HashMap<String, VariableInfo> {
    fn from(v: Variables) -> HashMap<String, VariableInfo> {
        let each = v.variables.into_iter().map(|(name, v)| {
            let type_name = match (v.ty, v.closure, v.boxed) {
                (Some(t), _, true) => TypeName::Boxed(t),
                (Some(t), _, false) => TypeName::Named(t),
                (None, true, _) => TypeName::Closure,
                (None, false, _) => TypeName::Unknown,
            };
            (name, VariableInfo { type_name, is_mutable: v.mutable })
        });
        each.collect()
    }
}

impl From<&Completions> for Completed {
    fn from(c: &Completions) -> Completed {
        let item = |c: &Completion| Item { code: c.code.clone(), kind: c.kind.to_string(), label: c.label.clone() };
        Completed { completions: c.completions.iter().map(item).collect(), start: c.start_offset, end: c.end_offset }
    }
}

impl From<Completed> for Completions {
    fn from(c: Completed) -> Completions {
        let completion = |c: Item| Completion {
            kind: KINDS.into_iter().find(|k| *k == c.kind).unwrap_or("instance"),
            code: c.code,
            label: c.label,
        };
        Completions {
            completions: c.completions.into_iter().map(completion).collect(),
            start_offset: c.start,
            end_offset: c.end,
        }
    }
}

impl From<Option<(String, String)>> for Hover {
    fn from(hover: Option<(String, String)>) -> Hover {
        let (text, markdown) = hover.unzip();
        Hover { text, markdown }
    }
}

impl From<Hover> for Option<(String, String)> {
    fn from(h: Hover) -> Option<(String, String)> {
        h.text.zip(h.markdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Through the wire and back, as the server writes it and the client reads it.
    fn back<T: Serialize, U: serde::de::DeserializeOwned>(t: T) -> U {
        answer(serde_json::from_str(&to_value(&t).to_string()).unwrap()).unwrap()
    }

    #[test]
    fn answers_come_back_as_they_went() {
        let mut variables = HashMap::new();
        let named = TypeName::Named("Vec<u8>".into());
        variables.insert("v".to_owned(), VariableInfo { type_name: named, is_mutable: true });
        variables.insert("f".into(), VariableInfo { type_name: TypeName::Closure, is_mutable: false });
        let boxed = TypeName::Boxed("Box<dyn FnMut() -> u8>".into());
        variables.insert("g".into(), VariableInfo { type_name: boxed, is_mutable: true });
        variables.insert("u".into(), VariableInfo { type_name: TypeName::Unknown, is_mutable: false });
        let back_v: HashMap<String, VariableInfo> = back::<_, Variables>(Variables::from(&variables)).into();
        for (name, info) in &variables {
            assert_eq!(back_v[name].type_name, info.type_name);
            assert_eq!(back_v[name].is_mutable, info.is_mutable);
        }
        let completion = Completion { code: "len()".into(), kind: "function", label: "len".into() };
        let c = Completions { completions: vec![completion], start_offset: 3, end_offset: 5 };
        let back_c: Completions = back::<_, Completed>(Completed::from(&c)).into();
        assert_eq!(back_c.completions, c.completions);
        assert_eq!((back_c.start_offset, back_c.end_offset), (3, 5));
        let hover = Some(("a".to_owned(), "*a*".to_owned()));
        assert_eq!(Option::<(String, String)>::from(back::<_, Hover>(Hover::from(hover.clone()))), hover);
        assert_eq!(Option::<(String, String)>::from(back::<_, Hover>(Hover::from(None))), None);
        // A request's line names its op; an error answers any request.
        let r = to_value(&Request::Hover { source: "x".into(), at: 1, write: false });
        assert_eq!(r["op"], "hover");
        let failed = answer::<Busy>(to_value(&Failed { error: "no crate".into() }));
        assert_eq!(failed.err().map(|e| e.to_string()), Some("no crate".to_string()));
        assert!(serde_json::from_str::<Request>(r#"{"op": "nothing"}"#).is_err());
    }
}
