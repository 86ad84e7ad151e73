//! Jupyter wire format: frame layout, HMAC-SHA256 signing and constant-time verification.

use bytes::Bytes;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

const DELIMITER: &[u8] = b"<IDS|MSG>";
pub const PROTOCOL_VERSION: &str = "5.4";

/// Why an incoming message was dropped. Each is logged; none stops the kernel.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("no <IDS|MSG> delimiter among {0} frames")]
    NoDelimiter(usize),
    #[error("only {0} frames after the delimiter; need signature and four dicts")]
    TooFewFrames(usize),
    #[error("missing signature")]
    MissingSignature,
    #[error("bad signature")]
    BadSignature,
    #[error("frame `{frame}` is not valid JSON: {error}")]
    BadJson { frame: &'static str, error: String },
    #[error("header is missing `{0}`")]
    BadHeader(String),
}

/// Signs and verifies with the connection file's key; an empty key disables signing, as the spec allows.
#[derive(Clone)]
pub struct Signer {
    key: Option<Vec<u8>>,
}

impl Signer {
    pub fn new(key: &str) -> Self {
        Signer { key: (!key.is_empty()).then(|| key.as_bytes().to_vec()) }
    }

    fn mac(&self, key: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
        for p in parts {
            mac.update(p);
        }
        mac
    }

    pub fn sign(&self, parts: &[&[u8]]) -> String {
        match &self.key {
            None => String::new(),
            Some(key) => hex::encode(self.mac(key, parts).finalize().into_bytes()),
        }
    }

    /// Constant-time check of a hex signature against the four dict frames.
    pub fn verify(&self, signature: &[u8], parts: &[&[u8]]) -> Result<(), WireError> {
        let Some(key) = &self.key else { return Ok(()) };
        if signature.is_empty() {
            return Err(WireError::MissingSignature);
        }
        let raw = hex::decode(signature).map_err(|_| WireError::BadSignature)?;
        self.mac(key, parts).verify_slice(&raw).map_err(|_| WireError::BadSignature)
    }
}

/// A decoded message. Content stays as JSON: the kernel answers every message type, known or not.
#[derive(Debug, Clone)]
pub struct Message {
    pub identities: Vec<Bytes>,
    pub header: Value,
    pub parent_header: Value,
    pub metadata: Value,
    pub content: Value,
    pub buffers: Vec<Bytes>,
}

impl Message {
    pub fn msg_type(&self) -> &str {
        self.header["msg_type"].as_str().unwrap_or("")
    }

    pub fn msg_id(&self) -> &str {
        self.header["msg_id"].as_str().unwrap_or("")
    }

    pub fn session(&self) -> &str {
        self.header["session"].as_str().unwrap_or("")
    }

    /// Parses frames, verifying the signature before any JSON is read.
    pub fn decode(frames: Vec<Bytes>, signer: &Signer) -> Result<Message, WireError> {
        let n = frames.len();
        let delim = frames.iter().position(|f| f.as_ref() == DELIMITER).ok_or(WireError::NoDelimiter(n))?;
        let rest = &frames[delim + 1..];
        if rest.len() < 5 {
            return Err(WireError::TooFewFrames(rest.len()));
        }
        let dicts: Vec<&[u8]> = rest[1..5].iter().map(|b| b.as_ref()).collect();
        signer.verify(rest[0].as_ref(), &dicts)?;
        let parse = |i: usize, frame: &'static str| {
            serde_json::from_slice::<Value>(dicts[i]).map_err(|e| WireError::BadJson { frame, error: e.to_string() })
        };
        let header = parse(0, "header")?;
        for field in ["msg_id", "msg_type"] {
            if !header[field].is_string() {
                return Err(WireError::BadHeader(field.to_string()));
            }
        }
        let content = parse(3, "content")?;
        if !content.is_object() {
            return Err(WireError::BadJson { frame: "content", error: "not a JSON object".into() });
        }
        Ok(Message {
            identities: frames[..delim].to_vec(),
            header,
            parent_header: parse(1, "parent_header")?,
            metadata: parse(2, "metadata")?,
            content,
            buffers: rest[5..].to_vec(),
        })
    }

    /// A new message of `msg_type` in reply to (or caused by) `parent`.
    pub fn reply_to(parent: &Message, msg_type: &str, content: Value) -> Message {
        Message {
            identities: parent.identities.clone(),
            header: new_header(msg_type, parent.session()),
            parent_header: parent.header.clone(),
            metadata: json!({}),
            content,
            buffers: Vec::new(),
        }
    }

    pub fn encode(&self, signer: &Signer) -> Vec<Bytes> {
        let dicts: Vec<Vec<u8>> = [&self.header, &self.parent_header, &self.metadata, &self.content]
            .iter()
            .map(|v| serde_json::to_vec(v).expect("JSON values always serialize"))
            .collect();
        let refs: Vec<&[u8]> = dicts.iter().map(Vec::as_slice).collect();
        let sig = signer.sign(&refs);
        let mut frames: Vec<Bytes> = self.identities.clone();
        frames.push(Bytes::from_static(DELIMITER));
        frames.push(Bytes::from(sig));
        frames.extend(dicts.into_iter().map(Bytes::from));
        frames.extend(self.buffers.iter().cloned());
        frames
    }
}

/// A message's header, as the kernel writes it.
#[derive(serde::Serialize)]
struct Header<'a> {
    msg_id: String,
    username: &'static str,
    session: &'a str,
    date: String,
    msg_type: &'a str,
    version: &'static str,
}

/// A new message's header; its date in ISO 8601 with the zone, as the protocol asks.
pub fn new_header(msg_type: &str, session: &str) -> Value {
    let header = Header {
        msg_id: uuid::Uuid::new_v4().to_string(),
        username: "kernel",
        session,
        date: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        msg_type,
        version: PROTOCOL_VERSION,
    };
    serde_json::to_value(header).expect("a header serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(signer: &Signer, content: &str) -> Vec<Bytes> {
        let header =
            r#"{"msg_id":"1","msg_type":"execute_request","session":"s","username":"u","date":"","version":"5.4"}"#;
        let parts: [&[u8]; 4] = [header.as_bytes(), b"{}", b"{}", content.as_bytes()];
        vec![
            Bytes::from_static(b"peer"),
            Bytes::from_static(DELIMITER),
            Bytes::from(signer.sign(&parts)),
            Bytes::from(header),
            Bytes::from_static(b"{}"),
            Bytes::from_static(b"{}"),
            Bytes::from(content.to_string()),
        ]
    }

    #[test]
    fn round_trip_and_identities() {
        let s = Signer::new("secret");
        let msg = Message::decode(frames(&s, r#"{"code":"1"}"#), &s).unwrap();
        assert_eq!(msg.msg_type(), "execute_request");
        assert_eq!(msg.identities, vec![Bytes::from_static(b"peer")]);
        let reply = Message::reply_to(&msg, "execute_reply", json!({"status":"ok"}));
        let again = Message::decode(reply.encode(&s), &s).unwrap();
        assert_eq!(again.content["status"], "ok");
        assert_eq!(again.parent_header["msg_id"], "1");
        assert_eq!(again.header["version"], "5.4");
    }

    #[test]
    fn known_signature_vector() {
        // HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog"), RFC-style vector.
        let s = Signer::new("key");
        assert_eq!(
            s.sign(&[b"The quick brown fox ", b"jumps over the lazy dog"]),
            "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
    }

    #[test]
    fn rejects_what_it_must() {
        let s = Signer::new("secret");
        let wrong = Signer::new("other");
        let good = frames(&s, r#"{"code":"1"}"#);
        assert_eq!(Message::decode(frames(&wrong, r#"{"code":"1"}"#), &s).unwrap_err(), WireError::BadSignature);
        let mut tampered = good.clone();
        tampered[6] = Bytes::from_static(br#"{"code":"2"}"#);
        assert_eq!(Message::decode(tampered, &s).unwrap_err(), WireError::BadSignature);
        let mut unsigned = good.clone();
        unsigned[2] = Bytes::new();
        assert_eq!(Message::decode(unsigned, &s).unwrap_err(), WireError::MissingSignature);
        let mut nonhex = good.clone();
        nonhex[2] = Bytes::from_static(b"zz");
        assert_eq!(Message::decode(nonhex, &s).unwrap_err(), WireError::BadSignature);
        assert_eq!(Message::decode(vec![Bytes::from_static(b"garbage")], &s).unwrap_err(), WireError::NoDelimiter(1));
        assert_eq!(Message::decode(good[..4].to_vec(), &s).unwrap_err(), WireError::TooFewFrames(2));
        // Correctly signed but not JSON: still dropped.
        assert!(matches!(
            Message::decode(frames(&s, "{not json"), &s).unwrap_err(),
            WireError::BadJson { frame: "content", .. }
        ));
    }

    #[test]
    fn empty_key_means_unsigned() {
        let s = Signer::new("");
        assert_eq!(s.sign(&[b"x"]), "");
        let msg = Message::decode(frames(&s, "{}"), &s).unwrap();
        assert_eq!(msg.content, json!({}));
    }
}
