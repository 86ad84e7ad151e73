//! The analysis process's answers as JSON, both ways: one line per request and per answer.

use anyhow::{Context, Result};
use evcxr::{Completion, Completions, TypeName, VariableInfo};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The environment variable that makes the embedder's binary serve analyses on this socket.
pub const SOCKET_ENV: &str = "DRYML_ANALYSIS_SOCKET";

/// Completion kinds as the queries name them (a `Completion`'s is static).
const KINDS: [&str; 5] = ["function", "class", "module", "instance", "keyword"];

pub(crate) fn variables_to_json(variables: &HashMap<String, VariableInfo>) -> Value {
    let each: Map<String, Value> = variables
        .iter()
        .map(|(name, info)| {
            let (type_name, closure, boxed) = match &info.type_name {
                TypeName::Named(t) => (Some(t.as_str()), false, false),
                TypeName::Boxed(t) => (Some(t.as_str()), false, true),
                TypeName::Closure => (None, true, false),
                TypeName::Unknown => (None, false, false),
            };
            let v = json!({"type": type_name, "closure": closure, "boxed": boxed, "mutable": info.is_mutable});
            (name.clone(), v)
        })
        .collect();
    json!({ "variables": each })
}

pub(crate) fn variables_from_json(answer: &Value) -> Result<HashMap<String, VariableInfo>> {
    let each = answer["variables"].as_object().context("no variables in the answer")?;
    Ok(each
        .iter()
        .map(|(name, v)| {
            let type_name = match (v["type"].as_str(), v["closure"].as_bool(), v["boxed"].as_bool()) {
                (Some(t), _, Some(true)) => TypeName::Boxed(t.to_owned()),
                (Some(t), _, _) => TypeName::Named(t.to_owned()),
                (None, Some(true), _) => TypeName::Closure,
                _ => TypeName::Unknown,
            };
            let is_mutable = v["mutable"].as_bool().unwrap_or(false);
            (name.clone(), VariableInfo { type_name, is_mutable })
        })
        .collect())
}

pub(crate) fn completions_to_json(c: &Completions) -> Value {
    let items: Vec<Value> =
        c.completions.iter().map(|c| json!({"code": c.code, "kind": c.kind, "label": c.label})).collect();
    json!({"completions": items, "start": c.start_offset, "end": c.end_offset})
}

pub(crate) fn completions_from_json(answer: &Value) -> Result<Completions> {
    let offset = |key: &str| {
        let n = answer[key].as_u64().context("no offsets in the answer")?;
        usize::try_from(n).context("an offset past memory")
    };
    let items = answer["completions"].as_array().context("no completions in the answer")?;
    let text = |c: &Value, key: &str| c[key].as_str().unwrap_or_default().to_owned();
    let completions = items
        .iter()
        .map(|c| Completion {
            code: text(c, "code"),
            kind: KINDS.into_iter().find(|k| c["kind"].as_str() == Some(k)).unwrap_or("instance"),
            label: text(c, "label"),
        })
        .collect();
    Ok(Completions { completions, start_offset: offset("start")?, end_offset: offset("end")? })
}

pub(crate) fn hover_to_json(hover: Option<(String, String)>) -> Value {
    match hover {
        Some((text, markdown)) => json!({"text": text, "markdown": markdown}),
        None => json!({}),
    }
}

pub(crate) fn hover_from_json(answer: &Value) -> Option<(String, String)> {
    let (text, markdown) = answer["text"].as_str().zip(answer["markdown"].as_str())?;
    Some((text.to_owned(), markdown.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_back_as_they_went() {
        let mut variables = HashMap::new();
        let named = TypeName::Named("Vec<u8>".into());
        variables.insert("v".to_owned(), VariableInfo { type_name: named, is_mutable: true });
        variables.insert("f".into(), VariableInfo { type_name: TypeName::Closure, is_mutable: false });
        let boxed = TypeName::Boxed("Box<dyn FnMut() -> u8>".into());
        variables.insert("g".into(), VariableInfo { type_name: boxed, is_mutable: true });
        variables.insert("u".into(), VariableInfo { type_name: TypeName::Unknown, is_mutable: false });
        let back = variables_from_json(&variables_to_json(&variables)).unwrap();
        for (name, info) in &variables {
            assert_eq!(back[name].type_name, info.type_name);
            assert_eq!(back[name].is_mutable, info.is_mutable);
        }
        let completion = Completion { code: "len()".into(), kind: "function", label: "len".into() };
        let c = Completions { completions: vec![completion], start_offset: 3, end_offset: 5 };
        let back = completions_from_json(&completions_to_json(&c)).unwrap();
        assert_eq!(back.completions, c.completions);
        assert_eq!((back.start_offset, back.end_offset), (3, 5));
        let hover = Some(("a".to_owned(), "*a*".to_owned()));
        assert_eq!(hover_from_json(&hover_to_json(hover.clone())), hover);
        assert_eq!(hover_from_json(&hover_to_json(None)), None);
    }
}
