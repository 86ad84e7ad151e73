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
