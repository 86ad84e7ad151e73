//! Jupyter's messages as types, each read in one place: the connection file, and every request
//! the kernel answers, with ipykernel's defaults for what a client leaves out. A missing or
//! mistyped field is never an error here (ipykernel serves such requests); the signature was
//! checked before any of this is read. Our own types rather than jupyter-protocol's, whose
//! contents are strict where ipykernel is lenient (`silent` and `store_history` required).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The connection file Jupyter writes for a kernel.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectionInfo {
    pub ip: String,
    /// `tcp` or `ipc`.
    #[serde(default = "tcp")]
    pub transport: String,
    pub shell_port: u16,
    pub iopub_port: u16,
    pub stdin_port: u16,
    pub control_port: u16,
    pub hb_port: u16,
    /// The HMAC key; empty: messages are not signed.
    #[serde(default)]
    pub key: String,
    #[serde(default = "hmac_sha256")]
    pub signature_scheme: String,
}

fn tcp() -> String {
    "tcp".into()
}

fn hmac_sha256() -> String {
    "hmac-sha256".into()
}

/// A `history_request`.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryRequest {
    /// The last `n` cells (10 when not given).
    Tail { n: Option<i64>, output: bool },
    /// Lines `start..stop` of a session (0 or less: relative to this one).
    Range { session: i64, start: i64, stop: Option<i64>, output: bool },
    /// Cells whose source matches a glob, the last `n`; `unique`: each source once.
    Search { pattern: String, n: Option<i64>, unique: bool, output: bool },
}

/// One request, as its `msg_type` and content say.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Read by the worker with its execution count ([`super::ExecuteRequest`]).
    Execute,
    /// `cursor_pos` counts characters; the end of the code when absent.
    Complete {
        code: String,
        cursor_pos: usize,
    },
    Inspect {
        code: String,
        cursor_pos: usize,
        detail_level: u64,
    },
    KernelInfo,
    IsComplete {
        code: String,
    },
    History(HistoryRequest),
    /// A DAP request, passed to the debugger as it came.
    Debug(Value),
    CommInfo {
        target_name: Option<String>,
    },
    /// `comm_open`, `comm_msg` or `comm_close` from the frontend.
    Comm(CommRequest),
    Interrupt,
    Shutdown {
        restart: bool,
    },
    /// `usage_request`: no reply is owed.
    NoReply,
    Unknown(String),
}

impl Request {
    /// The request a message is; what it runs on is the worker's (`execute`, `complete`,
    /// `inspect`), the rest is answered at once.
    pub fn read(msg_type: &str, c: &Value) -> Request {
        let code = || c["code"].as_str().unwrap_or("").to_string();
        let cursor = |code: &str| c["cursor_pos"].as_u64().map_or(code.chars().count(), |p| p as usize);
        match msg_type {
            "execute_request" => Request::Execute,
            "complete_request" => {
                let code = code();
                Request::Complete { cursor_pos: cursor(&code), code }
            }
            "inspect_request" => {
                let code = code();
                Request::Inspect {
                    cursor_pos: cursor(&code),
                    code,
                    detail_level: c["detail_level"].as_u64().unwrap_or(0),
                }
            }
            "kernel_info_request" => Request::KernelInfo,
            "is_complete_request" => Request::IsComplete { code: code() },
            "history_request" => Request::History(HistoryRequest::from_content(c)),
            "debug_request" => Request::Debug(c.clone()),
            "comm_info_request" => Request::CommInfo { target_name: c["target_name"].as_str().map(str::to_string) },
            "comm_open" | "comm_msg" | "comm_close" => Request::Comm(CommRequest::from_content(msg_type, c)),
            "interrupt_request" => Request::Interrupt,
            "shutdown_request" => Request::Shutdown { restart: c["restart"].as_bool().unwrap_or(false) },
            "usage_request" => Request::NoReply,
            other => Request::Unknown(other.to_string()),
        }
    }

    /// Whether the worker runs it, in shell order, rather than the socket's task at once.
    pub fn is_work(&self) -> bool {
        matches!(self, Request::Execute | Request::Complete { .. } | Request::Inspect { .. })
    }
}

/// What a comm message does to its comm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommOp {
    /// Opens it, to the target that handles it.
    Open {
        target_name: String,
    },
    Msg,
    Close,
}

impl CommOp {
    /// The word the kernel and `dryml::widgets::comm` say it with.
    pub fn name(&self) -> &'static str {
        match self {
            CommOp::Open { .. } => "open",
            CommOp::Msg => "msg",
            CommOp::Close => "close",
        }
    }

    /// A `comm_open`'s target.
    pub fn target(&self) -> Option<&str> {
        match self {
            CommOp::Open { target_name } => Some(target_name),
            _ => None,
        }
    }
}

/// A comm message, from the frontend or from the notebook's process, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct CommRequest {
    pub op: CommOp,
    pub comm_id: String,
    pub data: Value,
    pub metadata: Value,
}

impl CommRequest {
    /// A `comm_open`, `comm_msg` or `comm_close`'s content.
    fn from_content(msg_type: &str, c: &Value) -> CommRequest {
        let op = match msg_type {
            "comm_open" => CommOp::Open { target_name: c["target_name"].as_str().unwrap_or_default().to_string() },
            "comm_close" => CommOp::Close,
            _ => CommOp::Msg,
        };
        CommRequest::read(op, c)
    }

    /// The message whose `op` is `op` and whose other fields `c` holds.
    pub fn read(op: CommOp, c: &Value) -> CommRequest {
        CommRequest {
            op,
            comm_id: c["comm_id"].as_str().unwrap_or_default().to_string(),
            data: c.get("data").cloned().unwrap_or_else(|| serde_json::json!({})),
            metadata: c.get("metadata").cloned().unwrap_or_else(|| serde_json::json!({})),
        }
    }
}

impl HistoryRequest {
    /// A `history_request`'s content.
    pub fn from_content(c: &Value) -> HistoryRequest {
        let output = c["output"].as_bool().unwrap_or(false);
        let n = c["n"].as_i64();
        match c["hist_access_type"].as_str().unwrap_or("tail") {
            "range" => HistoryRequest::Range {
                session: c["session"].as_i64().unwrap_or(0),
                start: c["start"].as_i64().unwrap_or(0),
                stop: c["stop"].as_i64(),
                output,
            },
            "search" => HistoryRequest::Search {
                pattern: c["pattern"].as_str().unwrap_or("*").to_string(),
                n,
                unique: c["unique"].as_bool().unwrap_or(false),
                output,
            },
            _ => HistoryRequest::Tail { n, output },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_comm_message_says_what_it_does_to_its_comm() {
        let open = json!({"comm_id": "c", "target_name": "jupyter.widget", "data": {"state": {}}});
        let read = |kind: &str, c: &Value| match Request::read(kind, c) {
            Request::Comm(comm) => comm,
            other => panic!("{other:?}"),
        };
        let comm = read("comm_open", &open);
        assert_eq!(comm.op, CommOp::Open { target_name: "jupyter.widget".into() });
        assert_eq!((comm.op.name(), comm.op.target()), ("open", Some("jupyter.widget")));
        // A message without data or metadata has them empty; a close names no target.
        let close = read("comm_close", &json!({"comm_id": "c"}));
        assert_eq!((close.op.target(), close.data, close.metadata), (None, json!({}), json!({})));
        assert_eq!(read("comm_msg", &json!({"comm_id": "c"})).op, CommOp::Msg);
    }

    #[test]
    fn requests_read_with_ipykernels_defaults() {
        let code = json!({"code": "héllo", "cursor_pos": 2});
        assert_eq!(Request::read("complete_request", &code), Request::Complete { code: "héllo".into(), cursor_pos: 2 });
        // No cursor: the end of the code, in characters.
        assert_eq!(
            Request::read("inspect_request", &json!({"code": "héllo"})),
            Request::Inspect { code: "héllo".into(), cursor_pos: 5, detail_level: 0 }
        );
        // Mistyped fields read as absent.
        assert_eq!(Request::read("is_complete_request", &json!({"code": 3})), Request::IsComplete { code: "".into() });
        assert_eq!(Request::read("shutdown_request", &json!({})), Request::Shutdown { restart: false });
        assert_eq!(Request::read("usage_request", &json!({})), Request::NoReply);
        assert_eq!(Request::read("frobnicate", &json!({})), Request::Unknown("frobnicate".into()));
        assert!(Request::read("execute_request", &json!({})).is_work());
        assert!(!Request::read("kernel_info_request", &json!({})).is_work());
        assert_eq!(
            Request::read("history_request", &json!({"hist_access_type": "search", "pattern": "a*"})),
            Request::History(HistoryRequest::Search { pattern: "a*".into(), n: None, unique: false, output: false })
        );
        assert_eq!(
            Request::read("history_request", &json!({"hist_access_type": "range", "stop": 4, "output": true})),
            Request::History(HistoryRequest::Range { session: 0, start: 0, stop: Some(4), output: true })
        );
        assert_eq!(
            Request::read("history_request", &json!({})),
            Request::History(HistoryRequest::Tail { n: None, output: false })
        );
    }

    #[test]
    fn a_connection_file_reads_with_defaults() {
        let info: ConnectionInfo = serde_json::from_value(json!({
            "ip": "127.0.0.1", "shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5,
            "kernel_name": "dryml-rust"
        }))
        .unwrap();
        assert_eq!(
            (info.transport.as_str(), info.key.as_str(), info.signature_scheme.as_str()),
            ("tcp", "", "hmac-sha256")
        );
        let missing = serde_json::from_value::<ConnectionInfo>(json!({"ip": "127.0.0.1"})).unwrap_err();
        assert!(missing.to_string().contains("shell_port"), "{missing}");
    }
}
