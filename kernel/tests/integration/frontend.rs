//! A Jupyter frontend for tests, in the spirit of ark's `DummyFrontend`: real ZeroMQ sockets,
//! a real HMAC key, verbs that read like the protocol, and a check when it is dropped that no
//! message was left unread.

use dryml_kernel::protocol::{Message, Signer};
use serde_json::{json, Value};
use std::time::Duration;
use zeromq::{Socket, SocketRecv, SocketSend, ZmqMessage};

pub const KEY: &str = "a-real-hmac-key-for-tests";
const WAIT: Duration = Duration::from_secs(10);

/// The connection file a test kernel binds: ipc endpoints in a fresh directory, so parallel
/// tests never race for ports.
pub fn connection_info(dir: &std::path::Path) -> dryml_kernel::protocol::ConnectionInfo {
    serde_json::from_value(json!({
        "transport": "ipc",
        "ip": dir.join("k").to_string_lossy(),
        "shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5,
        "signature_scheme": "hmac-sha256",
        "key": KEY,
        "kernel_name": "toy",
    }))
    .expect("a valid connection file")
}

pub struct Frontend {
    rt: tokio::runtime::Runtime,
    pub shell: zeromq::DealerSocket,
    pub control: zeromq::DealerSocket,
    pub stdin: zeromq::DealerSocket,
    pub iopub: zeromq::SubSocket,
    pub hb: zeromq::ReqSocket,
    pub signer: Signer,
    session: String,
}

impl Frontend {
    /// Connects every socket and waits for iopub's welcome, so no published message is lost.
    pub fn connect(info: &dryml_kernel::protocol::ConnectionInfo) -> Frontend {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let ep = |port| dryml_kernel::protocol::endpoint(info, port);
        // Shell and stdin share one identity, as jupyter_client's do: the kernel routes an
        // input_request to the identity of the execute_request that asked for it.
        let options = || {
            let mut o = zeromq::SocketOptions::default();
            o.peer_identity(zeromq::util::PeerIdentity::try_from(b"test-frontend".to_vec()).unwrap());
            o
        };
        let (shell, control, stdin, iopub, hb) = rt.block_on(async {
            let mut shell = zeromq::DealerSocket::with_options(options());
            shell.connect(&ep(info.shell_port)).await.expect("shell");
            let mut control = zeromq::DealerSocket::new();
            control.connect(&ep(info.control_port)).await.expect("control");
            let mut stdin = zeromq::DealerSocket::with_options(options());
            stdin.connect(&ep(info.stdin_port)).await.expect("stdin");
            let mut iopub = zeromq::SubSocket::new();
            iopub.connect(&ep(info.iopub_port)).await.expect("iopub");
            iopub.subscribe("").await.expect("subscribe");
            let mut hb = zeromq::ReqSocket::new();
            hb.connect(&ep(info.hb_port)).await.expect("hb");
            (shell, control, stdin, iopub, hb)
        });
        let mut f =
            Frontend { rt, shell, control, stdin, iopub, hb, signer: Signer::new(KEY), session: "test-session".into() };
        let welcome = f.recv_iopub();
        assert_eq!(welcome.msg_type(), "iopub_welcome");
        assert_eq!(welcome.content["subscription"], "");
        f
    }

    /// A request message, signed by [`Frontend::frames`] when sent.
    pub fn request(&self, msg_type: &str, content: Value) -> Message {
        Message {
            identities: vec![],
            header: json!({
                "msg_id": uuid::Uuid::new_v4().to_string(), "msg_type": msg_type, "session": self.session,
                "username": "test", "date": "2026-11-22T00:00:00Z", "version": "5.4",
            }),
            parent_header: json!({}),
            metadata: json!({}),
            content,
            buffers: vec![],
        }
    }

    pub fn send_raw(&mut self, sock: Sock, frames: Vec<bytes::Bytes>) {
        let z = ZmqMessage::try_from(frames).expect("at least one frame");
        let s = match sock {
            Sock::Shell => &mut self.shell,
            Sock::Control => &mut self.control,
            Sock::Stdin => &mut self.stdin,
        };
        self.rt.block_on(s.send(z)).expect("send");
    }

    /// Sends `content` as `msg_type` on `sock`; returns the request's msg_id.
    pub fn send(&mut self, sock: Sock, msg_type: &str, content: Value) -> String {
        let m = self.request(msg_type, content);
        let id = m.header["msg_id"].as_str().unwrap().to_string();
        let frames = m.encode(&self.signer);
        self.send_raw(sock, frames);
        id
    }

    pub fn send_execute_request(&mut self, code: &str) -> String {
        self.send_execute_request_with(code, json!({}))
    }

    /// An execute request with `extra` fields over the defaults.
    pub fn send_execute_request_with(&mut self, code: &str, extra: Value) -> String {
        let mut content = json!({"code": code, "silent": false, "store_history": true,
            "user_expressions": {}, "allow_stdin": true, "stop_on_error": true});
        for (k, v) in extra.as_object().unwrap() {
            content[k] = v.clone();
        }
        self.send(Sock::Shell, "execute_request", content)
    }

    /// An input_reply with no parent header, as jupyter_client sends it.
    pub fn send_input_reply(&mut self, value: &str) {
        self.send(Sock::Stdin, "input_reply", json!({"value": value}));
    }

    /// An input_reply naming the input_request it answers, as JupyterLab sends it.
    pub fn send_input_reply_to(&mut self, request: &Message, value: &str) {
        let mut m = self.request("input_reply", json!({"value": value}));
        m.parent_header = request.header.clone();
        let frames = m.encode(&self.signer);
        self.send_raw(Sock::Stdin, frames);
    }

    fn recv_on(&mut self, sock: Recv, wait: Duration) -> Option<Message> {
        let fut = async {
            match sock {
                Recv::Shell => self.shell.recv().await,
                Recv::Control => self.control.recv().await,
                Recv::Stdin => self.stdin.recv().await,
                Recv::Iopub => self.iopub.recv().await,
            }
        };
        let z = self.rt.block_on(async { tokio::time::timeout(wait, fut).await }).ok()?.expect("socket error");
        Some(Message::decode(z.into_vec(), &self.signer).expect("the kernel signs what it sends"))
    }

    fn expect(&mut self, sock: Recv) -> Message {
        self.recv_on(sock, WAIT).unwrap_or_else(|| panic!("nothing on {sock:?} within {WAIT:?}"))
    }

    pub fn recv_iopub(&mut self) -> Message {
        self.expect(Recv::Iopub)
    }

    /// The next iopub message within `wait` (a real kernel's first cell builds for a while).
    pub fn recv_iopub_within(&mut self, wait: Duration) -> Message {
        self.recv_on(Recv::Iopub, wait).unwrap_or_else(|| panic!("nothing on iopub within {wait:?}"))
    }

    pub fn recv_shell(&mut self) -> Message {
        self.expect(Recv::Shell)
    }

    pub fn recv_control(&mut self) -> Message {
        self.expect(Recv::Control)
    }

    pub fn recv_stdin(&mut self) -> Message {
        self.expect(Recv::Stdin)
    }

    /// The next iopub message, which must be `msg_type` caused by request `parent`.
    pub fn recv_iopub_of(&mut self, parent: &str, msg_type: &str) -> Message {
        let m = self.recv_iopub();
        assert_eq!((m.msg_type(), parent_id(&m)), (msg_type, parent), "iopub: {:?}", m.content);
        m
    }

    /// iopub messages for several requests at once, each request's in order, until every one
    /// has gone idle: requests served on different threads interleave, each stays in order.
    /// Returns each request's message types; anything for another request fails.
    pub fn recv_iopub_until_idle(&mut self, parents: &[&str]) -> Vec<Vec<(String, Value)>> {
        let mut seen: Vec<Vec<(String, Value)>> = vec![Vec::new(); parents.len()];
        let idle =
            |v: &Vec<(String, Value)>| v.last().is_some_and(|(t, c)| t == "status" && c["execution_state"] == "idle");
        while !seen.iter().all(idle) {
            let m = self.recv_iopub();
            let i = parents
                .iter()
                .position(|p| *p == parent_id(&m))
                .unwrap_or_else(|| panic!("iopub: {} for an unexpected request: {:?}", m.msg_type(), m.content));
            seen[i].push((m.msg_type().to_string(), m.content.clone()));
        }
        seen
    }

    pub fn recv_iopub_busy(&mut self, parent: &str) {
        let m = self.recv_iopub_of(parent, "status");
        assert_eq!(m.content["execution_state"], "busy");
    }

    pub fn recv_iopub_idle(&mut self, parent: &str) {
        let m = self.recv_iopub_of(parent, "status");
        assert_eq!(m.content["execution_state"], "idle");
    }

    pub fn recv_iopub_execute_input(&mut self, parent: &str) -> Message {
        self.recv_iopub_of(parent, "execute_input")
    }

    pub fn recv_iopub_stream(&mut self, parent: &str) -> String {
        let m = self.recv_iopub_of(parent, "stream");
        m.content["text"].as_str().unwrap().to_string()
    }

    /// The next shell reply, which must answer request `parent`.
    pub fn recv_shell_reply(&mut self, parent: &str, msg_type: &str) -> Value {
        let m = self.recv_shell();
        assert_eq!((m.msg_type(), parent_id(&m)), (msg_type, parent), "shell: {:?}", m.content);
        m.content
    }

    pub fn recv_shell_execute_reply(&mut self, parent: &str) -> Value {
        self.recv_shell_reply(parent, "execute_reply")
    }

    pub fn recv_control_reply(&mut self, parent: &str, msg_type: &str) -> Value {
        let m = self.recv_control();
        assert_eq!((m.msg_type(), parent_id(&m)), (msg_type, parent), "control: {:?}", m.content);
        m.content
    }

    /// A heartbeat ping and its echo.
    pub fn ping(&mut self, payload: &str) -> Vec<u8> {
        let hb = &mut self.hb;
        self.rt.block_on(async {
            hb.send(ZmqMessage::from(payload.to_string())).await.expect("hb send");
            let z = tokio::time::timeout(WAIT, hb.recv()).await.expect("hb echo in time").expect("hb recv");
            z.get(0).unwrap().to_vec()
        })
    }

    /// Fails if any socket holds a message nobody read.
    pub fn assert_drained(&mut self) {
        for sock in [Recv::Shell, Recv::Control, Recv::Stdin, Recv::Iopub] {
            if let Some(m) = self.recv_on(sock, Duration::from_millis(100)) {
                panic!("unread on {sock:?}: {} {:?}", m.msg_type(), m.content);
            }
        }
    }
}

impl Drop for Frontend {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.assert_drained();
        }
    }
}

pub fn parent_id(m: &Message) -> &str {
    m.parent_header["msg_id"].as_str().unwrap_or("")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sock {
    Shell,
    Control,
    Stdin,
}

#[derive(Clone, Copy, Debug)]
enum Recv {
    Shell,
    Control,
    Stdin,
    Iopub,
}
