"""Shared test machinery: install the freshly built kernel into a private Jupyter path, start
kernels (the one factory, `running_kernel`, and the fixtures built on it), and a client helper
that files every message under the request it answers and fails on any other."""
import itertools
import os
import queue
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from procs import analysis_pids_in, environ_of

ROOT = Path(__file__).resolve().parent.parent
KERNEL_BIN = Path(os.environ.get("DRYML_KERNEL_BIN", ROOT / "target" / "release" / "dryml-kernel"))
# The mime type of the kernel's machine-readable display data (dryml::__kernel::display::DATA_MIME).
DATA_MIME = "application/vnd.dryml+json"
# CPU-only figures on any machine: the kernel's NVML library does not exist.
NO_NVML = {"DRYML_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"}

_jupyter_dir = Path(tempfile.mkdtemp(prefix="dryml-jupyter-"))
# Every kernel started by the tests finds our kernelspec, and keeps history out of $HOME.
os.environ["JUPYTER_PATH"] = str(_jupyter_dir / "share" / "jupyter")
os.environ["DRYML_HISTORY_FILE"] = str(_jupyter_dir / "history.sqlite")
# Kernels that clients other than `Kernel` start (jupyter_kernel_test's, nbclient's) share this
# worker's analysis process too, not the user's, which the other worker's would share at once.
_shared_analysis = _jupyter_dir / "analysis"
_shared_analysis.mkdir(mode=0o700)
os.environ["DRYML_ANALYSIS_DIR"] = str(_shared_analysis)


def pytest_configure(config):
    config.addinivalue_line("markers", "timing: bounds a wait or an order; tests/run.sh runs these "
                            "alone, after the rest, and tests/flakes.py hunts their flakes")
    if not KERNEL_BIN.exists():
        raise pytest.UsageError(f"{KERNEL_BIN} is missing: build with `cargo build --release --locked` first")
    subprocess.run([str(KERNEL_BIN), "install", "--prefix", str(_jupyter_dir)], check=True,
                   stdout=subprocess.DEVNULL)


# The files that take longest, longest first (tests/README.md has their times): tests/run.sh's
# workers take whole files in collection order, so the long ones start at once and the short
# ones fill in beside them. Files not named here follow in their usual order.
LONGEST_FIRST = ["test_slurm.py", "test_models.py", "test_burn.py", "test_third_party.py", "test_kernel.py",
                 "test_turnaround.py", "test_never_down.py", "test_notebooks.py", "test_torch.py",
                 "test_soak.py", "test_experiments.py", "test_contexts.py"]


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # Stable: each file's tests keep their order.
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_unconfigure(config):
    if _holder is not None:
        _holder.stop()
    # Each miss of the shared analysis (a `let` it found no type for, then asked of rustc), each
    # load it tried again and each time it started again, for tests/run.sh to print: green runs
    # show them too.
    misses = os.environ.get("DRYML_TEST_MISSES")
    if misses:
        lines = [line for log in sorted(_shared_analysis.glob("*.log"))
                 for line in log.read_text(errors="replace").splitlines()
                 if any(m in line for m in ("no type found", "incomplete load", "starts again"))]
        with open(misses, "a") as out:
            out.writelines(line + "\n" for line in lines)
    shutil.rmtree(_jupyter_dir, ignore_errors=True)


def wait_for(predicate, timeout, what, interval=0.05):
    """Polls predicate until it returns something true, and returns that; TimeoutError naming
    `what` after timeout seconds."""
    deadline = time.time() + timeout
    while not (got := predicate()):
        if time.time() > deadline:
            raise TimeoutError(f"waited {timeout} s for {what}")
        time.sleep(interval)
    return got


LIVE = set()  # kernels started and not yet stopped: checked for unread messages after every test
_logs = _jupyter_dir / "logs"
_logs.mkdir()
_kernels_started = itertools.count(1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report ends with the last lines each live kernel (and the idle one that
    holds the shared analysis process) and each analysis process logged: a flake seen once in CI
    says what the kernel saw."""
    report = (yield).get_result()
    if report.failed:
        kernels = [*LIVE, *([_holder] if _holder else [])]
        analyses = [_shared_analysis, *(Path(k.analysis_dir) for k in kernels if k.analysis_dir)]
        for log in [k.log_path for k in kernels] + [f for d in analyses for f in sorted(d.glob("*.log"))]:
            lines = log.read_text(errors="replace").splitlines()[-40:] if log.exists() else []
            report.sections.append((f"{log}, its last {len(lines)} lines", "\n".join(lines)))


class Kernel:
    """A started kernel and its client. Requests go out through `send` (or `execute`, `request`,
    `interrupt`), and `collect` returns one request's reply and iopub messages. Every message read
    is filed under the request it answers; one for a request this helper did not send fails the
    test at once, except what jupyter_client itself sent while starting or restarting the kernel
    (kernel_info from `wait_for_ready`, interrupt and shutdown of a restart) and the parentless
    `iopub_welcome` and `starting` status."""

    def __init__(self, env=None, wrap=None, log=None, own_analysis=False):
        """`wrap`: a command the kernel is started under (`unshare ...`), as a container would;
        `log`: a file its stderr (its log, at `DRYML_LOG`'s level) goes to; `own_analysis`: an
        analysis process of its own (see `shared_analysis_dir`)."""
        from jupyter_client.manager import KernelManager
        self.expected = {}      # msg_id -> channel its reply comes on (None: none comes to us)
        self.iopub = {}         # msg_id -> [(arrival time, msg)] of requests not yet collected
        self.replies = {}       # msg_id -> reply msg
        self.inputs = {}        # msg_id -> [input_request msg]
        self.jupyter_sent = set()
        self.km = KernelManager(kernel_name="dryml-rust")
        # A test that watches, kills or ends its analysis process, or needs it cold, has one of
        # its own, as has a kernel in a container (`wrap`); the others share the worker's, as a
        # user's kernels share theirs.
        self.analysis_dir = None  # removed at stop: a private one
        if "DRYML_ANALYSIS_DIR" in (env or {}):
            analysis = env["DRYML_ANALYSIS_DIR"]
        elif own_analysis or wrap:
            analysis = self.analysis_dir = tempfile.mkdtemp(prefix="dra-")
        else:
            analysis = shared_analysis_dir()
        env = {"DRYML_ANALYSIS_DIR": analysis, **(env or {})}
        # The kernelspec's own env (DRYML_RUNTIME_PATH) would win over what start_kernel gets.
        spec = self.km.kernel_spec
        spec.env = {**spec.env, **{k: v for k, v in env.items() if k in spec.env}}
        if wrap:
            self.km.kernel_spec.argv = list(wrap) + self.km.kernel_spec.argv
        # Every kernel logs to a file (its analysis process too, if this kernel started it): a
        # failed test shows the tails of the live kernels' logs (`pytest_runtest_makereport`).
        env = {"DRYML_LOG": "info,salsa=warn", **env}
        launch = {"env": {**os.environ, **env}}
        self.log_path = Path(log) if log else _logs / f"kernel-{next(_kernels_started)}.log"
        self.log = open(self.log_path, "w")
        launch["stderr"] = self.log
        self.km.start_kernel(**launch)
        self.kc = self.km.client()
        self.kc.start_channels()
        LIVE.add(self)
        try:
            self.jupyter_sent |= self._sent_during(lambda: self.kc.wait_for_ready(timeout=120))
        except BaseException:
            self.stop()
            raise

    def _sent_during(self, action):
        """The msg_ids of the requests jupyter_client sends (through the manager's session or the
        client's, a clone) while action runs."""
        sent = set()

        def recording(send):
            def recorded(*args, **kw):
                msg = send(*args, **kw)
                if msg:
                    sent.add(msg["header"]["msg_id"])
                return msg
            return recorded

        sessions = (self.km.session, self.kc.session)
        for s in sessions:
            s.send = recording(s.send)
        try:
            action()
        finally:
            for s in sessions:
                del s.send
        return sent

    # ---- sending -------------------------------------------------------------------------------

    def expect(self, msg_id, reply_channel="shell"):
        """Marks a request as this helper's: its messages are filed for `collect`. reply_channel
        None: its reply does not come to this client (or there is none)."""
        self.expected[msg_id] = reply_channel
        return msg_id

    def send(self, method, *args, **kw):
        """Sends a request with jupyter_client's `kc.<method>` (execute, complete, history,
        shutdown, ...) and returns its msg_id, to `collect` later."""
        return self.expect(getattr(self.kc, method)(*args, **kw), "control" if method == "shutdown" else "shell")

    def request(self, method, *args, timeout=120, **kw):
        """Sends a request and collects it: (reply content, [(arrival time, iopub msg)])."""
        return self.collect(self.send(method, *args, **kw), timeout)

    def debug(self, seq, command, arguments=None, timeout=120):
        """Sends a DAP request on control, as JupyterLab's debugger does; returns (reply content,
        [(arrival time, iopub msg)])."""
        msg = self.kc.session.msg("debug_request", {"seq": seq, "type": "request", "command": command, "arguments": arguments or {}})
        self.kc.control_channel.send(msg)
        return self.collect(self.expect(msg["header"]["msg_id"], "control"), timeout)

    def execute(self, code, timeout=120, stdin_answers=None, **kw):
        """Runs code; returns (reply content, [(arrival time, iopub msg)])."""
        msg_id = self.send("execute", code, allow_stdin=stdin_answers is not None, **kw)
        return self.collect(msg_id, timeout, stdin_answers)

    def interrupt(self):
        """Interrupts as Jupyter does (interrupt_mode "message": the manager sends interrupt_request
        on its own control socket) and returns once the kernel has handled it (its idle)."""
        (msg_id,) = self._sent_during(self.km.interrupt_kernel)
        self.collect(self.expect(msg_id, None))

    def interrupt_collect(self, msg_id, timeout=60):
        """Interrupts the running request and collects it: (reply, iopub msgs, seconds from the
        interrupt to its end)."""
        started = time.time()
        self.interrupt()
        reply, msgs = self.collect(msg_id, timeout)
        return reply, msgs, time.time() - started

    def input_request(self, msg_id, timeout=120):
        """Waits for the request's input_request and returns it, unanswered."""
        wait_for(lambda: (self._pump(0.1), self.inputs.get(msg_id))[1], timeout, "the input_request")
        return self.inputs.pop(msg_id)[0]

    def restart(self):
        """Restarts as Jupyter's Restart does and waits for the new process."""
        self.jupyter_sent |= self._sent_during(lambda: (self.km.restart_kernel(now=False),
                                                        self.kc.wait_for_ready(timeout=120)))

    # ---- receiving -----------------------------------------------------------------------------

    def _allowed(self, channel, m):
        """Messages that answer no request of ours, and legitimately so."""
        t, parent = m["msg_type"], m["parent_header"].get("msg_id")
        if parent in self.jupyter_sent:
            return (channel, t) in (("iopub", "status"), ("shell", "kernel_info_reply"))
        return not parent and channel == "iopub" and (
            t == "iopub_welcome" or (t == "status" and m["content"]["execution_state"] == "starting"))

    def _file(self, channel, m):
        parent = m["parent_header"].get("msg_id")
        if parent in self.expected:
            if channel == "iopub":
                self.iopub.setdefault(parent, []).append((time.time(), m))
                return
            if channel == "stdin":
                self.inputs.setdefault(parent, []).append(m)
                return
            if channel == self.expected[parent] and parent not in self.replies:
                self.replies[parent] = m
                return
        if not self._allowed(channel, m):
            raise AssertionError(f"stray {channel} message {m['msg_type']} for "
                                 f"{m['parent_header'].get('msg_type')} {parent}: {m['content']}")

    def _pump(self, wait):
        """Files every message that has arrived, waiting up to `wait` s for iopub."""
        for name in ("shell", "control", "stdin"):
            channel = getattr(self.kc, f"{name}_channel")
            while channel.msg_ready():
                self._file(name, channel.get_msg(timeout=0))
        try:
            self._file("iopub", self.kc.iopub_channel.get_msg(timeout=wait))
            while self.kc.iopub_channel.msg_ready():
                self._file("iopub", self.kc.iopub_channel.get_msg(timeout=0))
        except queue.Empty:
            pass

    def _done(self, msg_id):
        idle = any(m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                   for _, m in self.iopub.get(msg_id, []))
        return idle and (self.expected[msg_id] is None or msg_id in self.replies)

    def collect(self, msg_id, timeout=120, stdin_answers=None):
        """Waits for the request's idle and reply; returns (reply content or None,
        [(arrival time, iopub msg)]). stdin_answers answer its input requests in turn."""
        assert msg_id in self.expected, f"{msg_id} was not sent through this helper, or was collected"
        deadline = time.time() + timeout
        while not self._done(msg_id):
            if time.time() > deadline:
                got = [m["msg_type"] for _, m in self.iopub.get(msg_id, [])]
                raise TimeoutError(f"no idle and reply for {msg_id} within {timeout} s; got {got}")
            self._pump(0.1)
            for _ in self.inputs.pop(msg_id, []):
                assert stdin_answers, f"unexpected input_request for {msg_id}"
                self.kc.input(stdin_answers.pop(0))
        del self.expected[msg_id]
        reply = self.replies.pop(msg_id, None)
        return (reply["content"] if reply else None), self.iopub.pop(msg_id, [])

    def progress(self, msg_id):
        """The iopub messages so far of a request that is still running (fails if it ended)."""
        self._pump(0)
        msgs = self.iopub.get(msg_id, [])
        ended = [m for _, m in msgs if m["msg_type"] == "error"
                 or (m["msg_type"] == "status" and m["content"]["execution_state"] == "idle")]
        assert not ended, f"{msg_id} ended early: {[m['content'] for m in ended]}"
        return msgs

    def assert_drained(self, grace=0.2):
        """Fails if anything is left over (in the spirit of ark's DummyFrontend drop check): a
        request sent and never collected, or any message unread on iopub, shell, control or
        stdin within `grace` s. Everything found is consumed, so the next test starts clean."""
        left = [f"request {i} never collected" for i in self.expected]
        self.expected.clear()
        self.iopub.clear()
        self.replies.clear()
        self.inputs.clear()
        deadline = time.time() + grace
        while time.time() < deadline:
            for name in ("iopub", "shell", "control", "stdin"):
                channel = getattr(self.kc, f"{name}_channel")
                while channel.msg_ready():
                    m = channel.get_msg(timeout=0)
                    if not self._allowed(name, m):
                        left.append(f"unread {name} {m['msg_type']} for "
                                    f"{m['parent_header'].get('msg_type')}: {m['content']}")
            time.sleep(0.02)
        assert not left, left

    def stop(self):
        LIVE.discard(self)
        self.kc.stop_channels()
        if self.km.is_alive():
            self.km.shutdown_kernel(now=True)
        else:
            self.km.cleanup_resources()
        self.log.close()
        if self.analysis_dir:
            # Its process, if still ending, keeps its open files; nothing else reads them.
            shutil.rmtree(self.analysis_dir, ignore_errors=True)


_holder = None  # the idle kernel that keeps this worker's shared analysis process alive


def shared_analysis_dir():
    """The analysis directory this pytest worker's kernels share. The analysis process ends
    with its last kernel, so an idle kernel that never leaves it (DRYML_ANALYSIS_IDLE_S=0) holds
    it between tests: the standard library is loaded and primed once per worker, not once per
    kernel (5 s of a core each)."""
    global _holder
    if _holder is None:
        _holder = Kernel({"DRYML_ANALYSIS_DIR": str(_shared_analysis), "DRYML_ANALYSIS_IDLE_S": "0"})
        # Nothing is asked of it, so nothing needs checking after each test.
        LIVE.discard(_holder)
    return str(_shared_analysis)


@contextmanager
def running_kernel(env=None, wrap=None, log=None, own_analysis=False):
    """The one way the tests start a kernel (`env` adds to ours; `wrap`, a command it starts
    under; `log`, a file for its stderr; `own_analysis`, a private analysis process). Leaving
    the block normally checks that nothing was left unread; the kernel is stopped either way."""
    k = Kernel(env, wrap, log, own_analysis)
    try:
        yield k
        k.assert_drained()
    finally:
        k.stop()


@pytest.fixture(autouse=True)
def _nothing_left_unread():
    """After every test, the kernels still running (module fixtures) have nothing unread."""
    yield
    for k in list(LIVE):
        k.assert_drained()


@pytest.fixture(scope="module")
def kernel():
    """The module's kernel; a module that needs other environment overrides this fixture with
    its own `running_kernel(env)`."""
    with running_kernel() as k:
        yield k


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory):
    """The fake libnvidia-ml.so, compiled from tests/fake_nvml/fake_nvml.c."""
    out = tmp_path_factory.mktemp("fake-nvml") / "libnvidia-ml.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(out),
                    str(ROOT / "tests" / "fake_nvml" / "fake_nvml.c")], check=True)
    return out


@pytest.fixture(scope="module")
def fake_gpu_kernel(fake_nvml_lib, tmp_path_factory):
    """`with fake_gpu_kernel(gpus) as k:` a kernel whose NVML is the fake library answering from
    `k.script` in a fresh directory `k.dir`. The `gpus` lines are written first: the kernel reads
    its GPUs once, at start; tests append `proc` lines later."""
    @contextmanager
    def start(gpus, wrap=None):
        d = tmp_path_factory.mktemp("gpu")
        script = d / "script"
        script.write_text(gpus)
        with running_kernel({"DRYML_NVML_LIB": str(fake_nvml_lib), "FAKE_NVML_SCRIPT": str(script)}, wrap) as k:
            k.dir, k.script = d, script
            yield k
    return start


def analysis_pids(kernel_pid):
    """The analysis processes serving the kernel (evcxr patch: started with
    DRYML_ANALYSIS_SOCKET in the kernel's DRYML_ANALYSIS_DIR, the user's shared one by default)."""
    return analysis_pids_in(environ_of(kernel_pid).get("DRYML_ANALYSIS_DIR")
                            or f"{tempfile.gettempdir()}/dryml-kernel-{os.getuid()}")


def stdout_of(msgs):
    return "".join(m["content"]["text"] for _, m in msgs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


def stderr_of(msgs):
    return "".join(m["content"]["text"] for _, m in msgs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")


def ok(kernel, code, timeout=300):
    """Runs code that must succeed; returns its iopub messages."""
    reply, msgs = kernel.execute(code, timeout=timeout)
    assert reply["status"] == "ok", (code, reply.get("ename"), reply.get("evalue"), stdout_of(msgs),
                                     "\n".join(reply.get("traceback", []))[-3000:])
    return msgs


def value(kernel, code, timeout=300):
    """The text/plain result of code that must succeed."""
    msgs = ok(kernel, code, timeout)
    return of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]


def answered(kernel, method, *args, until, timeout=120):
    """A Tab or Shift+Tab (`method` complete or inspect) pressed again until `until(reply)`, as a
    user presses it while the notebook's analysis loads: a request waits for that load less than
    a second, then answers with what the notebook has. Returns the last (reply, msgs)."""
    deadline = time.time() + timeout
    while True:
        r, msgs = kernel.request(method, *args, timeout=60)
        if until(r) or time.time() > deadline:
            return r, msgs
        time.sleep(0.5)


def of_type(msgs, t):
    return [m for _, m in msgs if m["msg_type"] == t]


def displays(msgs):
    """The data bundles of a request's display_data messages, in order."""
    return [m["content"]["data"] for m in of_type(msgs, "display_data")]


def json_events(msgs, event=None):
    """The machine-readable payloads (DATA_MIME) of displays, optionally only one event kind."""
    out = [d[DATA_MIME] for d in displays(msgs) if DATA_MIME in d]
    return [j for j in out if event is None or (isinstance(j, dict) and j.get("event") == event)]


# A value whose destructor acts on the world (as a TempDir, a database handle or a BufWriter
# does): it appends "PID N" to its file. Serde, so it can be an --update variable too.
TRACKED = """:dep serde = { version = "1", features = ["derive"] }
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Tracked(pub String, pub u32);
impl Drop for Tracked {
    fn drop(&mut self) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&self.0).unwrap();
        writeln!(f, "{} {}", std::process::id(), self.1).unwrap();
    }
}"""


# Values of the notebook's own types (struct, enum, generic, Vec), and a cell reading them all:
# no build the kernel or the user starts may drop them (issue 35).
NOTEBOOK_TYPES = """struct G(u32);
#[derive(Debug)]
enum K { One, Two(u8) }
struct W<T>(T);
let g = G(7);
let k = K::Two(3);
let gs = vec![G(1), G(2)];
let w = W(G(9));"""

READ_THEM = "(g.0 + gs[1].0 + (w.0).0, format!(\"{:?}\", k))"
