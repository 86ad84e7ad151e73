"""Hostile input on the real sockets: wrong signatures and garbage frames are dropped, never run."""
import hashlib
import hmac
import json
import os
import tempfile
import time
import uuid
from pathlib import Path

import zmq

from conftest import Kernel


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
    k = Kernel()
    try:
        info = k.km.get_connection_info()
        key = info["key"] if isinstance(info["key"], bytes) else info["key"].encode()
        marker = Path(tempfile.mkdtemp()) / "must-not-exist"
        evil = f'std::fs::write({json.dumps(str(marker))}, "ran").unwrap();'
        ctx = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.connect(f"{info['transport']}://{info['ip']}:{info['shell_port']}")
        time.sleep(0.3)
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
        # The kernel still answers, on the same socket and through jupyter_client.
        k.kc.kernel_info()
        reply = k.kc.get_shell_msg(timeout=20)
        assert reply["msg_type"] == "kernel_info_reply"
        r, _ = k.execute("1 + 1")
        assert r["status"] == "ok"
        assert not marker.exists() and not marker.with_name("must-not-exist2").exists()
        assert sock.poll(500) == 0, "dropped messages must get no reply"
        sock.close(0)
        ctx.term()
    finally:
        k.stop()
