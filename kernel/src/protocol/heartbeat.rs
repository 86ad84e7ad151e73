//! The heartbeat socket (a REP): echoes every ping, so clients can tell the kernel is alive.

use zeromq::{SocketRecv, SocketSend};

pub(crate) async fn task(mut sock: zeromq::RepSocket) {
    while let Ok(m) = sock.recv().await {
        if sock.send(m).await.is_err() {
            break;
        }
    }
}
