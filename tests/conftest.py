"""Shared fixtures: install the freshly built kernel into a private Jupyter path and start it."""
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL_BIN = Path(os.environ.get("DRYML_KERNEL_BIN", ROOT / "target" / "release" / "dryml-kernel"))

_jupyter_dir = Path(tempfile.mkdtemp(prefix="dryml-jupyter-"))
# Every kernel started by the tests finds our kernelspec, and keeps history out of $HOME.
os.environ["JUPYTER_PATH"] = str(_jupyter_dir / "share" / "jupyter")
os.environ["DRYML_HISTORY_FILE"] = str(_jupyter_dir / "history.sqlite")


def pytest_configure(config):
    if not KERNEL_BIN.exists():
        raise pytest.UsageError(f"{KERNEL_BIN} is missing: build with `cargo build --release --locked` first")
    subprocess.run([str(KERNEL_BIN), "install", "--prefix", str(_jupyter_dir)], check=True,
                   stdout=subprocess.DEVNULL)


def pytest_unconfigure(config):
    shutil.rmtree(_jupyter_dir, ignore_errors=True)


class Kernel:
    """A started kernel with small helpers that collect iopub traffic per request."""

    def __init__(self, env=None):
        from jupyter_client.manager import start_new_kernel
        extra = {"env": {**os.environ, **env}} if env else {}
        self.km, self.kc = start_new_kernel(kernel_name="dryml-rust", startup_timeout=120, **extra)

    def execute(self, code, timeout=120, stdin_answers=None, **kw):
        """Runs code; returns (reply content, [(arrival time, iopub msg)])."""
        msg_id = self.kc.execute(code, allow_stdin=stdin_answers is not None, **kw)
        return self.collect(msg_id, timeout, stdin_answers)

    def collect(self, msg_id, timeout=120, stdin_answers=None):
        deadline = time.time() + timeout
        msgs = []
        while True:
            if stdin_answers:
                try:
                    req = self.kc.get_stdin_msg(timeout=0.05)
                    if req["header"]["msg_type"] == "input_request":
                        self.kc.input(stdin_answers.pop(0))
                except Exception:
                    pass
            try:
                m = self.kc.get_iopub_msg(timeout=0.1)
            except Exception:
                if time.time() > deadline:
                    raise TimeoutError(f"no idle for {msg_id} within {timeout}s; got {[x[1]['msg_type'] for x in msgs]}")
                continue
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            msgs.append((time.time(), m))
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                break
        # Skip stale replies: under load, start-up's wait_for_ready may send kernel_info twice.
        while True:
            reply = self.kc.get_shell_msg(timeout=max(1, deadline - time.time()))
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"], msgs
            assert reply["msg_type"] == "kernel_info_reply", reply["msg_type"]

    def stop(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def stdout_of(msgs):
    return "".join(m["content"]["text"] for _, m in msgs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


def stderr_of(msgs):
    return "".join(m["content"]["text"] for _, m in msgs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")


def ok(kernel, code, timeout=300):
    """Runs code that must succeed; returns its iopub messages."""
    reply, msgs = kernel.execute(code, timeout=timeout)
    assert reply["status"] == "ok", (code, reply.get("ename"), reply.get("evalue"), stdout_of(msgs))
    return msgs


def value(kernel, code, timeout=300):
    """The text/plain result of code that must succeed."""
    msgs = ok(kernel, code, timeout)
    return of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]


def of_type(msgs, t):
    return [m for _, m in msgs if m["msg_type"] == t]


def displays(msgs):
    """The data bundles of a request's display_data messages, in order."""
    return [m["content"]["data"] for m in of_type(msgs, "display_data")]


def json_events(msgs, event=None):
    """The application/json payloads of displays, optionally only one event kind."""
    out = [d["application/json"] for d in displays(msgs) if "application/json" in d]
    return [j for j in out if event is None or (isinstance(j, dict) and j.get("event") == event)]


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory):
    """The fake libnvidia-ml.so, compiled from tests/fake_nvml/fake_nvml.c."""
    out = tmp_path_factory.mktemp("fake-nvml") / "libnvidia-ml.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(out),
                    str(ROOT / "tests" / "fake_nvml" / "fake_nvml.c")], check=True)
    return out


@pytest.fixture(scope="module")
def kernel():
    k = Kernel()
    yield k
    k.stop()
