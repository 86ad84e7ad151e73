//! The stdin socket (a ROUTER): sends the outbox's `input_request`s and hands each verified
//! `input_reply` (the id of the `input_request` it answers, and its value) to the request
//! waiting in `Io::input`.

use super::outbox::InputReply;
use super::shell::send_encoded;
use super::wire::{Message, Signer};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use zeromq::SocketRecv;

pub(crate) async fn task(
    mut sock: zeromq::RouterSocket,
    mut rx: UnboundedReceiver<Message>,
    replies: crossbeam_channel::Sender<InputReply>,
    signer: Signer,
) {
    loop {
        tokio::select! {
            m = rx.recv() => {
                let Some(m) = m else { return };
                send_encoded(&mut sock, &m, &signer).await;
            }
            r = sock.recv() => {
                let Ok(r) = r else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                match Message::decode(r.into_vec(), &signer) {
                    Ok(m) if m.msg_type() == "input_reply" => {
                        let value = m.content["value"].as_str().unwrap_or("").to_string();
                        let answers = m.parent_header["msg_id"].as_str().map(str::to_string);
                        let _ = replies.send(InputReply { answers, value });
                    }
                    Ok(m) => tracing::warn!("stdin: ignored {}", m.msg_type()),
                    Err(e) => tracing::warn!("stdin: dropped a message: {e}"),
                }
            }
        }
    }
}
