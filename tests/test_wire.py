"""Hostile input on the real sockets: wrong signatures and garbage frames are dropped, never run."""
import hashlib
import hmac
import json
import tempfile
import uuid
from pathlib import Path

import zmq
from zmq.utils.monitor import recv_monitor_message

from conftest import running_kernel, wait_for


def frames_for(key: bytes, code: str, sign=True, wrong_key=None):
    header = json.dumps({"msg_id": uuid.uuid4().hex, "msg_type": "execute_request", "session": "s",
                         "username": "u", "date": "2026-01-01T00:00:00Z", "version": "5.4"}).encode()
    content = json.dumps({"code": code, "silent": False, "store_history": True, "user_expressions": {},
                          "allow_stdin": False, "stop_on_error": True}).encode()
    parts = [header, b"{}", b"{}", content]
    mac = hmac.new(wrong_key or key, digestmod=hashlib.sha256)
    for p in parts:
        mac.update(p)
    sig = mac.hexdigest().encode() if sign else b""
    return [b"<IDS|MSG>", sig] + parts


def test_bad_signatures_and_garbage_are_dropped():
    with running_kernel() as k:
        info = k.km.get_connection_info()
        key = info["key"] if isinstance(info["key"], bytes) else info["key"].encode()
        marker = Path(tempfile.mkdtemp()) / "must-not-exist"
        evil = f'std::fs::write({json.dumps(str(marker))}, "ran").unwrap();'
        ctx = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
        sock.connect(f"{info['transport']}://{info['ip']}:{info['shell_port']}")
        wait_for(lambda: monitor.poll(0) and recv_monitor_message(monitor)["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED,
                 10, "the ZMTP handshake with the shell socket")
        sock.disable_monitor()
        monitor.close(0)
        sock.send_multipart(frames_for(key, evil, wrong_key=b"not-the-key"))
        sock.send_multipart(frames_for(key, evil, sign=False))
        good = frames_for(key, evil)
        tampered = list(good)
        tampered[-1] = tampered[-1].replace(b"must-not-exist", b"must-not-exist2")
        sock.send_multipart(tampered)
        sock.send_multipart([b"garbage"])
        sock.send_multipart([b"<IDS|MSG>", b"x"])
        sock.send_multipart([b"\xff\xfe", b"<IDS|MSG>", b"", b"{", b"", b"", b""])
        # A correctly signed message whose header is not JSON.
        bad_json = [b"<IDS|MSG>", None, b"{not json", b"{}", b"{}", b"{}"]
        mac = hmac.new(key, digestmod=hashlib.sha256)
        for p in bad_json[2:]:
            mac.update(p)
        bad_json[1] = mac.hexdigest().encode()
        sock.send_multipart(bad_json)
        # The kernel still answers, on the same socket and through jupyter_client; a dropped
        # message that had run anyway would show up as a stray iopub message here.
        r, _ = k.request("kernel_info", timeout=20)
        assert r["status"] == "ok" and r["language_info"]["name"] == "rust"
        r, _ = k.execute("1 + 1")
        assert r["status"] == "ok"
        assert not marker.exists() and not marker.with_name("must-not-exist2").exists()
        assert sock.poll(500) == 0, "dropped messages must get no reply"
        sock.close(0)
        ctx.term()


def test_a_reply_follows_its_cells_output_onto_the_wire():
    """jupyter_console reads a cell's output until an `idle` (an interrupt's own ends that wait),
    then waits for the reply and drains iopub once, without waiting: what is not there then is
    not shown. So every iopub message a cell made must be on the wire before its reply."""
    from queue import Empty

    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="dryml-rust", startup_timeout=120)
    try:
        for _ in range(3):
            # 4 MB of output, then the error the reply announces.
            msg_id = kc.execute('for i in 0..60000 { println!("{i:>60}"); }\npanic!("the end");')
            reply = kc.get_shell_msg(timeout=300)
            assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "error"
            seen = []
            while True:
                try:
                    seen.append(kc.get_iopub_msg(timeout=0.02))
                except Empty:
                    break
            types = [m["msg_type"] for m in seen if m["parent_header"].get("msg_id") == msg_id]
            assert "error" in types, types[-5:]
            # The rest (its idle) may follow the reply: drain it for the next round.
            while not (types and types[-1] == "status"):
                m = kc.get_iopub_msg(timeout=30)
                if m["parent_header"].get("msg_id") == msg_id:
                    types.append(m["msg_type"])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
