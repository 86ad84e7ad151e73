//! The stdin socket (a ROUTER): sends the outbox's `input_request`s and hands each verified
//! `input_reply` (the id of the `input_request` it answers, and its value) to the request
//! waiting in `Io::input`.

use super::outbox::InputReply;
use super::wire::{Message, Signer};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use zeromq::{SocketRecv, SocketSend, ZmqMessage};

/// How long an `input_request` waits for its frontend's stdin connection.
const ROUTE_WAIT: Duration = Duration::from_secs(3);

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
                send_routed(&mut sock, &m, &signer).await;
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

/// Sends `m` to the frontend it names. A ROUTER drops what it cannot route yet: a frontend that
/// sent its request the moment it connected may not be known on this socket yet (a loaded
/// machine, the protocol tests), so the send is tried again for a while.
async fn send_routed(sock: &mut zeromq::RouterSocket, m: &Message, signer: &Signer) {
    let started = tokio::time::Instant::now();
    loop {
        let Ok(z) = ZmqMessage::try_from(m.encode(signer)) else { return };
        match sock.send(z).await {
            Ok(()) => return,
            Err(e) if started.elapsed() >= ROUTE_WAIT => {
                tracing::warn!("stdin: {} not sent: {e}", m.msg_type());
                return;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}
