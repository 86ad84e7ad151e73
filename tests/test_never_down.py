"""Never down (issue 14), end to end: input that used to kill the kernel gets an answer, and the
kernel, its variables and the next cell survive. Deep nesting first: `is_complete` (sent on every
Enter by consoles) and cells whose code the kernel or evcxr parses recursively. Last, nothing
left behind: a kernel whose server is killed goes, with its child (issue 39)."""
import os
import re
import signal
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import analysis_pids, of_type, ok, running_kernel, stderr_of, stdout_of, value, wait_for

DEEP = 5000


def nested(n):
    return "(" * n + "1" + ")" * n


def test_deep_nesting_in_is_complete_is_answered(kernel):
    ok(kernel, "let keep = 5u32;")
    r, _ = kernel.request("is_complete", "(" * 20000 + ")" * 20000, timeout=30)
    assert r["status"] == "complete", r
    r, _ = kernel.request("is_complete", "(" * 20000, timeout=30)
    assert r["status"] == "incomplete", r
    assert value(kernel, "keep + 1") == "6"


def test_deep_cells_fail_or_run_and_the_kernel_goes_on(kernel):
    ok(kernel, "let keep2 = 7u32;")
    # evcxr parses the cell, then rustc judges it (here rustc's own stack gives out).
    reply, _ = kernel.execute(f"let q = {nested(DEEP)};", timeout=300)
    assert reply["status"] in ("ok", "error"), reply
    # The experiment's re-binding scan refuses with one line and the cell still runs.
    reply, msgs = kernel.execute(f"%%experiment\nlet q2 = {nested(DEEP)};", timeout=300)
    assert f"nested {DEEP} levels deep, over the 256 the kernel analyses" in stderr_of(msgs), stderr_of(msgs)
    # `%%compute` needs the syntax to build its code: a clear error instead.
    reply, _ = kernel.execute(f"%%compute\nlet q3 = {nested(DEEP)};", timeout=300)
    assert reply["status"] == "error" and reply["ename"] == "MagicError", reply
    assert f"nested {DEEP} levels deep" in reply["evalue"], reply["evalue"]
    assert value(kernel, "keep2 + 1") == "8"


def test_a_bug_of_ours_costs_one_error_reply_not_the_kernel():
    # DRYML_TEST_PANIC_ON makes the engine panic on exactly this cell, as a bug of ours would.
    with running_kernel({"DRYML_TEST_PANIC_ON": "// panic here"}) as k:
        ok(k, "let keep3 = 9u8;")
        reply, msgs = k.execute("// panic here")
        assert reply["status"] == "error" and reply["ename"] == "InternalError", reply
        assert "DRYML_TEST_PANIC_ON matched the cell" in reply["evalue"] and "recovered" in reply["evalue"], reply
        assert [m for _, m in msgs if m["msg_type"] == "error"], "the error is published too"
        # The engine's lock was held when it panicked: the next requests still get it.
        assert value(k, "keep3 + 1") == "10"
        r, _ = k.request("complete", "keep", 4)
        assert "keep3" in r["matches"], r


def _rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS"))


def _shown_and_counted(text, prefix):
    """Lines starting with prefix in text, plus those the kernel's notes say it did not show."""
    shown = sum(1 for line in text.splitlines() if line.startswith(prefix))
    said = sum(int(m.group(1)) for m in re.finditer(r"\[dryml: (\d+) lines \([^)]*\) of \w+ not shown", text))
    return shown + said


@pytest.mark.timing
@pytest.mark.parametrize("stream", ["eprintln", "println"])
def test_an_output_flood_does_not_grow_the_kernel(kernel, stream):
    # Idle is after a cell ran: evcxr's first cell loads its analysis of std into the kernel.
    ok(kernel, "let keep4 = 11u32;")
    pid = kernel.km.provisioner.process.pid
    idle = _rss_mib(pid)
    peak, done = [idle], threading.Event()

    def sample():
        while not done.wait(0.05):
            peak[0] = max(peak[0], _rss_mib(pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    n = 3_000_000
    try:
        reply, msgs = kernel.execute(
            f'for i in 0..{n}u64 {{ {stream}!("step {{i}}: a warning a training loop prints per batch"); }}\n'
            'panic!("after the flood")', timeout=600)
    finally:
        done.set()
        sampler.join()
    assert peak[0] - idle <= 200, f"kernel RSS {idle} MiB idle, {peak[0]} MiB at peak"
    # A panic after the flood is still explained: the kernel keeps the last stderr lines.
    assert reply["status"] == "error" and reply["ename"] == "panic", reply
    assert "after the flood" in reply["evalue"], reply["evalue"]
    text = (stderr_of if stream == "eprintln" else stdout_of)(msgs)
    assert _shown_and_counted(text, "step ") == n
    assert f"step {n - 1}:" in text, "the newest lines are shown"
    # Coalesced: not a message per line.
    assert len([m for _, m in msgs if m["msg_type"] == "stream"]) < n / 100
    assert value(kernel, "keep4 + 1") == "12"


@pytest.mark.timing
def test_an_interrupt_ends_a_wait_for_input_and_keeps_the_variables(kernel):
    ok(kernel, "let keep5 = 13u32;")
    msg_id = kernel.send("execute", 'let name = dryml::input("name? ");', allow_stdin=True)
    first = kernel.input_request(msg_id)
    assert first["content"]["prompt"] == "name? "
    reply, _, took = kernel.interrupt_collect(msg_id, timeout=10)
    assert took < 2, "the cell ended within 2 s of the interrupt"
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    assert "variables are kept" in reply["evalue"], reply["evalue"]
    assert value(kernel, "keep5 + 1") == "14"
    # The next prompt gets its own answer, though the first prompt's arrives late, in between.
    msg_id = kernel.send("execute", 'let again = dryml::input("again? "); again', allow_stdin=True)
    second = kernel.input_request(msg_id)
    for request, answer in ((first, "late"), (second, "Ada")):
        kernel.kc.stdin_channel.send(kernel.kc.session.msg("input_reply", {"value": answer}, parent=request))
    reply, msgs = kernel.collect(msg_id, timeout=60)
    assert reply["status"] == "ok", reply
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == '"Ada"'


def _building(pid, crate):
    """Whether a rustc under process `pid` compiles `crate`."""
    children = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(p))
            except OSError:
                pass
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"rustc") and b"--crate-name" in args and \
                args[args.index(b"--crate-name") + 1] == crate.encode():
            return True
    return False


def _interrupt_after(kernel, code, delay):
    """Runs code, interrupts it `delay` s in; returns (reply, seconds from interrupt to reply)."""
    msg_id = kernel.send("execute", code)
    time.sleep(delay)
    reply, _, took = kernel.interrupt_collect(msg_id, timeout=120)
    return reply, took


# A cell that adds a dependency (`:dep`, or the first `dryml` cell) makes evcxr's rust-analyzer
# reload the project inside the kernel's own process before the build; that work cannot be
# killed, and on 2 cores it has taken 2.0-3.8 s after an interrupt (the build itself stops at once).
# Measured on 2026-11-23 with the kernel of that day's main as with its successor; deferring that
# analysis is issue 24's.
AFTER_DEP_INTERRUPT_S = 5


@pytest.mark.timing
def test_an_interrupt_stops_a_build_and_keeps_the_variables():
    # Without the machine's build cache the first `dryml` cell builds the crate (~10 s).
    with running_kernel({"DRYML_BUILD_CACHE": "off"}) as k:
        ok(k, "let keep6 = 15u32;")
        reply, took = _interrupt_after(k, "let b = dryml::batch::Batcher::new(4);", 2)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        assert took < AFTER_DEP_INTERRUPT_S, f"the build stopped {took:.1f} s after the interrupt"
        assert value(k, "keep6 + 1") == "16"
        # A `:dep` line's build too.
        reply, took = _interrupt_after(k, ':dep regex = "1"\nlet r = regex::Regex::new("a+").unwrap();', 2)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        assert took < AFTER_DEP_INTERRUPT_S, f"the build stopped {took:.1f} s after the interrupt"
        assert value(k, "keep6 + 2") == "17"
        # Early, before cargo has started (evcxr is still reading the cell): the build that
        # follows is stopped as it starts, and the child, idle meanwhile, is not killed.
        for delay in (0.05, 0.3):
            reply, took = _interrupt_after(k, ':dep itoa = "=1.0.18"\nlet s: String = itoa::Buffer::new().format(7).to_string();', delay)
            assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
            assert took < AFTER_DEP_INTERRUPT_S, f"the cell ended {took:.1f} s after the interrupt"
            assert "variables are kept" in reply["evalue"], reply["evalue"]
        assert value(k, "keep6 + 3") == "18"
        # No SIGINT reached the idle child, so no interrupt flag outlives those cells.
        assert value(k, "dryml::interrupted()") == "false"
        # A cell whose own compile never ends, built by rustc alone (nothing cargo watches has
        # changed since the last cell): that rustc is the build the interrupt kills.
        slow = ("#[allow(long_running_const_eval)]\nconst SLOW: u64 = { let mut i = 0u64; let mut s = 0u64; "
                "while i < u64::MAX { s = s.wrapping_add(i); i += 1; } s };\nSLOW")
        reply, took = _interrupt_after(k, slow, 2)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        assert took < 2, f"the build stopped {took:.1f} s after the interrupt"
        assert value(k, "keep6 + 4") == "19"


@pytest.mark.timing
def test_a_cell_sent_during_the_warm_up_runs_at_once_and_an_interrupt_stops_the_warm_up(tmp_path):
    # A cold build cache: the warm-up (once the kernel is idle) builds `dryml` for many seconds.
    cache = tmp_path / "cache"
    with running_kernel({"DRYML_BUILD_CACHE": str(cache)}, own_analysis=True) as k:
        pid = k.km.provisioner.process.pid
        wait_for(lambda: _building(pid, "dryml"), 180, "the warm-up's dryml build")
        # The cell does not wait for that build: it is killed, and the cell runs now.
        reply, msgs = k.execute("let w: u8 = 1; w + 1", timeout=60)
        assert reply["status"] == "ok", reply
        assert not list(cache.glob("*/*/debug/deps/libdryml-*.rlib")), "the cell waited for the warm-up's build"
        # Idle again, the warm-up goes on; an interrupt now stops it for good.
        wait_for(lambda: _building(pid, "dryml"), 180, "the warm-up's dryml build, resumed")
        k.interrupt()
        wait_for(lambda: not _building(pid, "dryml"), 5, "the warm-up's build to be killed")
        time.sleep(3)
        assert not _building(pid, "dryml"), "the warm-up resumed after an interrupt"
        assert value(k, "w + 2") == "3"
        # The cache a killed build left behind still builds: dryml's first cell adds it now.
        assert value(k, "dryml::interrupted()") == "false"


@pytest.mark.timing
def test_sandboxes_fork_cleanly_while_another_thread_prints(kernel):
    # A fork copies only the forking thread: a lock another thread held at that moment (stdout's,
    # stderr's) stayed locked in the sandbox, whose first print then hung (3 in 60 before).
    code = """
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
let stop = Arc::new(AtomicBool::new(false));
let printer = { let stop = stop.clone(); std::thread::spawn(move || while !stop.load(Ordering::SeqCst) {
    println!("tick"); eprintln!("tock"); std::thread::sleep(std::time::Duration::from_micros(200)); }) };
let reqs = dryml::compute::context::Requests::parse("default num_cpus=0").unwrap();
let mut outcomes = std::collections::BTreeMap::new();
for i in 0..60u32 {
    let r = dryml::Compute::new(&reqs).timeout(std::time::Duration::from_secs(5))
        .run(move || { println!("sandbox {i}"); eprintln!("sandbox {i}"); i + 1 });
    *outcomes.entry(match r { Ok(v) if v == i + 1 => "ok".to_string(), other => format!("{other:?}") }).or_insert(0) += 1;
}
stop.store(true, Ordering::SeqCst);
printer.join().unwrap();
format!("{outcomes:?}")
"""
    reply, msgs = kernel.execute(code, timeout=600)
    assert reply["status"] == "ok", reply
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == '"{\\"ok\\": 60}"'
    assert "sandbox 59" in stdout_of(msgs)


def test_a_scratch_directory_another_user_made_is_not_used(tmp_path):
    # In a shared /tmp, whoever makes <tmp>/dryml-kernel-<uid> first would choose what the
    # kernel's child loads and where its output goes.
    if os.getuid() != 0:
        pytest.skip("making a directory owned by another user needs root")
    hostile = tmp_path / f"dryml-kernel-{os.getuid()}"
    hostile.mkdir(mode=0o777)
    os.chown(hostile, 65534, 65534)
    with running_kernel({"TMPDIR": str(tmp_path)}) as k:
        assert value(k, "1 + 1") == "2"
        own = tmp_path / f"dryml-kernel-{os.getuid()}-{k.km.provisioner.process.pid}"
        assert own.is_dir() and stat.S_IMODE(own.stat().st_mode) == 0o700
        assert list(hostile.iterdir()) == [], "nothing was written into the other user's directory"


SERVER = """
import sys, time
from jupyter_client.manager import KernelManager
km = KernelManager(kernel_name="dryml-rust")
km.start_kernel()
kc = km.client()
kc.start_channels()
kc.wait_for_ready(timeout=120)
out = []
kc.execute_interactive("println!(\\"{}\\", std::process::id());", timeout=300,
                       output_hook=lambda m: out.append(m["content"].get("text", "")))
# A Tab: the notebook's analysis process starts (a notebook that never asks has none).
kc.complete("std::", 5)
kc.get_shell_msg(timeout=120)
print(km.provisioner.process.pid, "".join(out).strip(), flush=True)
time.sleep(3600)
"""


def test_a_kernel_whose_server_is_killed_exits_with_its_child():
    # A real client process (jupyter_client, as a server launches kernels: JPY_PARENT_PID set,
    # a session of their own) starts the kernel and runs a cell, then dies by SIGKILL with no
    # shutdown request. The kernel and the child its cells ran in must not outlive it.
    # An analysis process of its own, which must end too.
    analysis = tempfile.mkdtemp(prefix="dra-")
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "DRYML_ANALYSIS_DIR": analysis})
    pids = []
    try:
        line = server.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2, f"the server printed {line!r}"

        def alive(pid):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except FileNotFoundError:
                return False

        assert all(alive(p) for p in pids), "the kernel and its child run while their server does"
        pids += wait_for(lambda: analysis_pids(pids[0]), 60, "the kernel's analysis process")
        server.send_signal(signal.SIGKILL)
        server.wait()
        t0 = time.time()
        wait_for(lambda: not any(alive(p) for p in pids), 10,
                 "the kernel, its child and its analysis process to exit after their server's SIGKILL")
        print(f"kernel, child and analysis process gone {time.time() - t0:.1f} s after the server's SIGKILL")
    finally:
        server.kill()
        for p in pids:
            try:
                os.kill(p, 9)
            except ProcessLookupError:
                pass
        shutil.rmtree(analysis, ignore_errors=True)
