//! The replies the kernel sends on shell and control, as types: each reply's `status` and
//! fields are written here once, and serialised where the outbox sends them. The debugger's
//! replies stay JSON (they carry lldb-dap's own messages; `debug/dap.rs` types the bridge's).

use super::ErrorContent;
use serde::Serialize;
use serde_json::Value;

/// A reply that is its content with `"status": "ok"`, or an error's fields with
/// `"status": "error"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Reply<T> {
    Ok(T),
    Error(ErrorContent),
}

/// A `complete_reply`'s content: the matches replace `cursor_start..cursor_end` (characters).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Completions {
    pub matches: Vec<String>,
    pub cursor_start: usize,
    pub cursor_end: usize,
    pub metadata: Value,
}

impl Completions {
    pub fn none() -> Completions {
        Completions { matches: Vec::new(), cursor_start: 0, cursor_end: 0, metadata: serde_json::json!({}) }
    }
}

/// A match's kind, for JupyterLab's completer (`_jupyter_types_experimental`).
#[derive(Debug, Serialize)]
pub struct Typed<'a> {
    pub text: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub start: usize,
    pub end: usize,
}

/// A `complete_reply`'s metadata: each match's kind, `null` where none is known.
#[derive(Debug, Serialize)]
pub struct CompletionTypes<'a> {
    #[serde(rename = "_jupyter_types_experimental")]
    pub types: Vec<Option<Typed<'a>>>,
}

/// A user expression's value: a display bundle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shown {
    pub data: Value,
    pub metadata: Value,
}

/// An `execute_reply`'s payload: the pager's text, or the next cell's input.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum Payload {
    Page { data: super::published::Bundle, start: u32 },
    SetNextInput { text: String, replace: bool },
}

impl Payload {
    pub fn value(&self) -> Value {
        serde_json::to_value(self).expect("a payload serialises")
    }
}

/// An `inspect_reply`'s content: a display bundle, where something was found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inspection {
    pub found: bool,
    pub data: Value,
    pub metadata: Value,
}

impl Inspection {
    pub fn found(data: super::published::Bundle) -> Inspection {
        Inspection { found: true, data: data.value(), metadata: Value::Object(Default::default()) }
    }

    pub fn none() -> Inspection {
        Inspection { found: false, data: serde_json::json!({}), metadata: serde_json::json!({}) }
    }
}

/// An `is_complete_reply`, whose `status` is the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum IsComplete {
    Complete,
    /// `indent`: what the next line starts with.
    Incomplete {
        indent: String,
    },
    Invalid,
    Unknown,
    /// The handler failed (a bug of ours): any reply may say so.
    Error(ErrorContent),
}

/// A `history_reply`'s content: `[session, line, input]` (or `[.., [input, output]]`) each.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    pub history: Value,
}

/// An `execute_reply`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum ExecuteReply {
    Ok {
        execution_count: i64,
        payload: Vec<Value>,
        user_expressions: Value,
    },
    Error {
        execution_count: i64,
        payload: Vec<Value>,
        user_expressions: Value,
        #[serde(flatten)]
        error: ErrorContent,
    },
    /// Not run: an earlier cell failed, or the kernel was asked to stop.
    Aborted {
        execution_count: i64,
    },
}

/// A `kernel_info_reply`'s content.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelInfo {
    pub protocol_version: &'static str,
    pub implementation: &'static str,
    pub implementation_version: &'static str,
    pub language_info: LanguageInfo,
    pub banner: String,
    pub help_links: Vec<HelpLink>,
    /// Protocol 5.5 says it in `supported_features`; older front ends read `debugger`.
    pub debugger: bool,
    pub supported_features: Vec<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LanguageInfo {
    pub name: &'static str,
    pub version: String,
    pub mimetype: &'static str,
    pub file_extension: &'static str,
    pub pygments_lexer: &'static str,
    pub codemirror_mode: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HelpLink {
    pub text: &'static str,
    pub url: &'static str,
}

/// A `comm_info_reply`'s content: each open comm's target, by id.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommInfo {
    pub comms: Value,
}

/// A `shutdown_reply`'s content.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shutdown {
    pub restart: bool,
}

/// A reply with nothing but its status (`interrupt_reply`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Done {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_reply_has_its_status_and_the_fields_the_protocol_names() {
        let error = ErrorContent::new("E", "v");
        let cases = [
            (
                serde_json::to_value(Reply::Ok(Completions::none())).unwrap(),
                json!({"status": "ok", "matches": [], "cursor_start": 0, "cursor_end": 0, "metadata": {}}),
            ),
            (
                serde_json::to_value(Reply::<Inspection>::Error(error.clone())).unwrap(),
                json!({"status": "error", "ename": "E", "evalue": "v", "traceback": ["E: v"]}),
            ),
            (
                serde_json::to_value(IsComplete::Incomplete { indent: "    ".into() }).unwrap(),
                json!({"status": "incomplete", "indent": "    "}),
            ),
            (serde_json::to_value(IsComplete::Invalid).unwrap(), json!({"status": "invalid"})),
            (
                serde_json::to_value(ExecuteReply::Error {
                    execution_count: 3,
                    payload: Vec::new(),
                    user_expressions: json!({}),
                    error,
                })
                .unwrap(),
                json!({"status": "error", "execution_count": 3, "payload": [], "user_expressions": {},
                       "ename": "E", "evalue": "v", "traceback": ["E: v"]}),
            ),
            (
                serde_json::to_value(ExecuteReply::Aborted { execution_count: 4 }).unwrap(),
                json!({"status": "aborted", "execution_count": 4}),
            ),
            (serde_json::to_value(Reply::Ok(Done {})).unwrap(), json!({"status": "ok"})),
        ];
        for (got, wire) in cases {
            assert_eq!(got, wire);
        }
    }
}
