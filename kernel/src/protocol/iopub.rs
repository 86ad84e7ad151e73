//! The iopub socket (an XPUB): publishes what the outbox sends, and greets each new
//! subscriber with `iopub_welcome` (JEP 65) so clients know their subscription is live.

use super::flow::Queued;
use super::shell::send_encoded;
use super::wire::{new_header, Message, Signer};
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;
use zeromq::SocketRecv;

pub(crate) async fn task(mut sock: zeromq::XPubSocket, mut rx: UnboundedReceiver<Queued>, signer: Signer) {
    loop {
        tokio::select! {
            m = rx.recv() => {
                let Some(q) = m else { return };
                send_encoded(&mut sock, &q.msg, &signer).await;
            }
            sub = sock.recv() => {
                // A subscription frame is 1 then the topic; 0 is an unsubscription.
                let Ok(sub) = sub else { continue };
                let frame = sub.get(0).cloned().unwrap_or_default();
                if frame.first() == Some(&1) {
                    let topic = String::from_utf8_lossy(&frame[1..]).into_owned();
                    send_encoded(&mut sock, &welcome(&topic), &signer).await;
                }
            }
        }
    }
}

/// The content of an `iopub_welcome` (JEP 65).
#[derive(serde::Serialize)]
struct Subscription<'a> {
    subscription: &'a str,
}

fn welcome(topic: &str) -> Message {
    Message {
        identities: vec![bytes::Bytes::from("iopub_welcome")],
        header: new_header("iopub_welcome", ""),
        parent_header: json!({}),
        metadata: json!({}),
        content: serde_json::to_value(Subscription { subscription: topic }).expect("a welcome serialises"),
        buffers: vec![],
    }
}
