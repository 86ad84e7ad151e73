//! What the kernel publishes on iopub, as types: each message's fields are written here once,
//! and a sender names a variant, so a misspelt field or state fails to compile rather than in a
//! client. What is the user's own (a cell's display bundle, a comm's data, lldb-dap's events)
//! stays JSON; a display the kernel makes itself is a [`Bundle`].

use super::ErrorContent;
use serde::Serialize;
use serde_json::Value;

/// The kernel's state in a `status` message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionState {
    Busy,
    Idle,
}

/// Which stream text goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamName {
    Stdout,
    Stderr,
}

impl StreamName {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamName::Stdout => "stdout",
            StreamName::Stderr => "stderr",
        }
    }
}

/// A display bundle the kernel makes itself (a magic's table, a report, a hover): its plain
/// text, and HTML, SVG or dryml's figures beside. [`Bundle::value`] is a display's `data`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Bundle {
    #[serde(rename = "text/plain")]
    pub plain: String,
    #[serde(rename = "text/html", skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    #[serde(rename = "image/svg+xml", skip_serializing_if = "Option::is_none")]
    pub svg: Option<String>,
    /// The figures as data, under `dryml::__kernel::display::DATA_MIME` (the protocol layer
    /// names no runtime: `magic/experiment/report/tests.rs` reads it by that name).
    #[serde(rename = "application/vnd.dryml+json", skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Bundle {
    pub fn text(plain: impl Into<String>) -> Bundle {
        Bundle { plain: plain.into(), ..Bundle::default() }
    }

    pub fn html(plain: impl Into<String>, html: impl Into<String>) -> Bundle {
        Bundle { html: Some(html.into()), ..Bundle::text(plain) }
    }

    /// With `data` as the figures.
    pub fn with_data(self, data: &impl Serialize) -> Bundle {
        Bundle { data: Some(serde_json::to_value(data).expect("figures serialise")), ..self }
    }

    pub fn value(&self) -> Value {
        serde_json::to_value(self).expect("a bundle serialises")
    }
}

impl From<Bundle> for Value {
    fn from(b: Bundle) -> Value {
        b.value()
    }
}

/// A display's `transient`: its id, where it has one (`update_display_data` replaces it).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Transient {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_id: Option<String>,
}

/// One iopub message's content; [`Published::msg_type`] is its type.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Published {
    Status {
        execution_state: ExecutionState,
    },
    Stream {
        name: StreamName,
        text: String,
    },
    ExecuteInput {
        code: String,
        execution_count: i64,
    },
    ExecuteResult {
        execution_count: i64,
        data: Value,
        metadata: Value,
    },
    DisplayData {
        data: Value,
        metadata: Value,
        transient: Transient,
    },
    UpdateDisplayData {
        data: Value,
        metadata: Value,
        transient: Transient,
    },
    ClearOutput {
        wait: bool,
    },
    Error(ErrorContent),
    CommOpen {
        comm_id: String,
        target_name: String,
        data: Value,
    },
    CommMsg {
        comm_id: String,
        data: Value,
    },
    CommClose {
        comm_id: String,
        data: Value,
    },
    /// A Debug Adapter Protocol event, as lldb-dap or the kernel wrote it.
    DebugEvent(Value),
}

impl Published {
    pub fn msg_type(&self) -> &'static str {
        match self {
            Published::Status { .. } => "status",
            Published::Stream { .. } => "stream",
            Published::ExecuteInput { .. } => "execute_input",
            Published::ExecuteResult { .. } => "execute_result",
            Published::DisplayData { .. } => "display_data",
            Published::UpdateDisplayData { .. } => "update_display_data",
            Published::ClearOutput { .. } => "clear_output",
            Published::Error(_) => "error",
            Published::CommOpen { .. } => "comm_open",
            Published::CommMsg { .. } => "comm_msg",
            Published::CommClose { .. } => "comm_close",
            Published::DebugEvent(_) => "debug_event",
        }
    }

    /// The message's content as it goes on the wire.
    pub fn content(&self) -> Value {
        serde_json::to_value(self).expect("iopub content serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bundle_has_only_the_types_it_was_given() {
        assert_eq!(Bundle::text("t").value(), json!({"text/plain": "t"}));
        let b = Bundle::html("t", "<b>t</b>").with_data(&[1, 2]).value();
        assert_eq!(b["text/html"], "<b>t</b>");
        // (magic/experiment/report/tests.rs reads it by dryml's name for it)
        assert_eq!(b["application/vnd.dryml+json"], json!([1, 2]));
    }

    #[test]
    fn each_message_has_the_fields_the_protocol_names() {
        let display = |id: Option<&str>| Published::DisplayData {
            data: json!({"text/plain": "1"}),
            metadata: json!({}),
            transient: Transient { display_id: id.map(str::to_string) },
        };
        let cases = [
            (Published::Status { execution_state: ExecutionState::Busy }, json!({"execution_state": "busy"})),
            (
                Published::Stream { name: StreamName::Stderr, text: "x\n".into() },
                json!({"name": "stderr", "text": "x\n"}),
            ),
            (display(None), json!({"data": {"text/plain": "1"}, "metadata": {}, "transient": {}})),
            (
                display(Some("bar")),
                json!({"data": {"text/plain": "1"}, "metadata": {}, "transient": {"display_id": "bar"}}),
            ),
            (Published::ClearOutput { wait: true }, json!({"wait": true})),
            (
                Published::Error(ErrorContent { ename: "E".into(), evalue: "v".into(), traceback: vec!["t".into()] }),
                json!({"ename": "E", "evalue": "v", "traceback": ["t"]}),
            ),
            (
                Published::CommOpen { comm_id: "c".into(), target_name: "t".into(), data: json!({"a": 1}) },
                json!({"comm_id": "c", "target_name": "t", "data": {"a": 1}}),
            ),
            (Published::DebugEvent(json!({"event": "stopped"})), json!({"event": "stopped"})),
        ];
        for (message, wire) in cases {
            assert_eq!(message.content(), wire, "{}", message.msg_type());
        }
    }
}
