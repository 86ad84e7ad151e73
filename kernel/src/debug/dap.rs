//! The DAP messages the bridge reads or makes itself, as serde types: the panel's arguments
//! (missing ones default, as ipykernel reads them), the bodies answered here, the events told
//! to the panel, and the requests sent to lldb-dap. lldb-dap's answers pass through as JSON, so
//! the fields of its own reach the panel; a breakpoint keeps the fields it does not name.
//!
//! Crates looked at: `dap` (dap-rs, an alpha, a server framework whose types drop fields they
//! do not know), `debug_types` and `dap-types` (generated from the schema, no Jupyter requests,
//! unknown fields dropped as well). A proxy must keep them, so these few types are ours.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A request's envelope, from the panel; its `arguments` are read by command.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Request {
    pub seq: Value,
    pub command: String,
    pub arguments: Value,
}

impl Request {
    /// The request in `raw`; a malformed one is an empty request (answered "not supported").
    pub fn of(raw: &Value) -> Request {
        Request::deserialize(raw).unwrap_or_default()
    }

    /// The arguments as `A`; `what` says in the error which argument is wrong.
    pub fn args<A: serde::de::DeserializeOwned>(&self, what: &str) -> Result<A, String> {
        A::deserialize(&self.arguments).map_err(|e| format!("{}: {what} ({e})", self.command))
    }
}

/// A request to lldb-dap.
#[derive(Serialize)]
pub struct Outgoing<'a> {
    pub seq: i64,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub command: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<&'a Value>,
}

/// A source file, by its path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub name: Option<String>,
}

impl Source {
    pub fn at(path: &str) -> Source {
        Source { path: path.to_string(), name: None }
    }
}

/// A breakpoint as the panel sets it: its line, and its condition, hit count or log message
/// among the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceBreakpoint {
    pub line: u64,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// `setBreakpoints`' arguments (from the panel, and to lldb-dap).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct SetBreakpoints {
    pub source: Source,
    #[serde(default)]
    pub breakpoints: Vec<SourceBreakpoint>,
}

/// A breakpoint as answered: verified or not, where, and why not.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Breakpoint {
    #[serde(default)]
    pub verified: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// lldb-dap's own (`id`, `column`, ...).
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl Breakpoint {
    /// One not set, at `line` of `path`, with why where known.
    pub fn unset(path: &str, line: u64, message: Option<&str>) -> Breakpoint {
        let source = Some(Source::at(path));
        Breakpoint { line: Some(line), source, message: message.map(str::to_string), ..Breakpoint::default() }
    }
}

/// `setBreakpoints`' body.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Breakpoints {
    #[serde(default)]
    pub breakpoints: Vec<Breakpoint>,
}

/// A source's breakpoints as `debugInfo` lists them.
#[derive(Serialize)]
pub struct SourceBreakpoints<'a> {
    pub source: &'a str,
    pub breakpoints: &'a [SourceBreakpoint],
}

/// `debugInfo`'s body: how the panel names cells, and the session's state.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DebugInfo<'a> {
    pub is_started: bool,
    pub hash_method: &'static str,
    pub hash_seed: u32,
    pub tmp_file_prefix: String,
    pub tmp_file_suffix: &'static str,
    pub breakpoints: Vec<SourceBreakpoints<'a>>,
    pub stopped_threads: Vec<i64>,
    pub rich_rendering: bool,
    pub exception_paths: [&'static str; 0],
    pub copy_to_globals: bool,
}

/// `dumpCell`'s arguments.
#[derive(Deserialize)]
pub struct DumpCell {
    pub code: String,
}

/// `dumpCell`'s body.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dumped {
    pub source_path: String,
}

/// `source`'s arguments.
#[derive(Deserialize)]
pub struct SourceArgs {
    pub source: Source,
}

/// `source`'s body.
#[derive(Serialize)]
pub struct Content {
    pub content: String,
}

/// A variable the panel lists.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Variable<'a> {
    pub name: &'a str,
    #[serde(rename = "type")]
    pub ty: &'a str,
    pub value: &'a str,
    pub variables_reference: i64,
}

/// `inspectVariables`' body.
#[derive(Serialize)]
pub struct Variables<'a> {
    pub variables: Vec<Variable<'a>>,
}

/// `modules`' body.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Modules {
    pub modules: [(); 0],
    pub total_modules: u32,
}

/// A step's or a continue's arguments.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Resume {
    pub thread_id: Option<i64>,
}

/// `attach`'s arguments to lldb-dap.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attach<'a> {
    pub pid: u32,
    pub init_commands: Vec<String>,
    pub post_run_commands: &'a [&'a str],
}

/// `disconnect`'s arguments to lldb-dap.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disconnect {
    pub terminate_debuggee: bool,
}

/// An event for the panel (its `type` and `seq` added by [`Event::to_value`]).
#[derive(Serialize)]
#[serde(tag = "event", content = "body", rename_all = "camelCase")]
pub enum Event {
    #[serde(rename_all = "camelCase")]
    Continued {
        thread_id: Option<i64>,
        all_threads_continued: bool,
    },
    #[serde(rename_all = "camelCase")]
    Stopped {
        reason: &'static str,
        thread_id: Option<i64>,
        all_threads_stopped: bool,
        description: String,
    },
    Output {
        category: &'static str,
        output: String,
    },
    Breakpoint {
        reason: &'static str,
        breakpoint: Breakpoint,
    },
    Terminated {},
}

/// An event with its envelope.
#[derive(Serialize)]
struct Envelope<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    seq: i64,
    #[serde(flatten)]
    event: &'a Event,
}

impl Event {
    pub fn to_value(&self) -> Value {
        value(&Envelope { kind: "event", seq: 0, event: self })
    }
}

/// A message as JSON (the types here always serialise).
pub fn value(v: &impl Serialize) -> Value {
    serde_json::to_value(v).expect("a DAP message serialises")
}

/// An empty body or arguments.
pub fn empty() -> Value {
    Value::Object(Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_breakpoints_are_the_panels_json() {
        let e = Event::Continued { thread_id: Some(3), all_threads_continued: true }.to_value();
        let want = r#"{"body":{"allThreadsContinued":true,"threadId":3},"event":"continued","seq":0,"type":"event"}"#;
        assert_eq!(e.to_string(), want);
        assert_eq!(Event::Terminated {}.to_value()["body"], empty());
        // A panel's breakpoint keeps its condition; lldb-dap's answer keeps its id.
        let set: SetBreakpoints =
            serde_json::from_str(r#"{"source":{"path":"/c.rs"},"breakpoints":[{"line":2,"condition":"x>1"}]}"#)
                .unwrap();
        assert_eq!(value(&set.breakpoints[0]).to_string(), r#"{"condition":"x>1","line":2}"#);
        let b: Breakpoint = serde_json::from_str(r#"{"id":7,"verified":true,"line":40}"#).unwrap();
        assert_eq!(value(&b).to_string(), r#"{"id":7,"line":40,"verified":true}"#);
        // Missing arguments default, as ipykernel reads them; a wrong one says which.
        let r = Request::of(&serde_json::json!({"seq": 4, "command": "setBreakpoints"}));
        assert!(r.args::<SetBreakpoints>("x").is_err());
        let r = Request::of(&serde_json::json!({"command": "next", "arguments": {}}));
        assert_eq!(r.args::<Resume>("x").unwrap().thread_id, None);
    }
}
