"""End-to-end tests: the real dryml-kernel binary over real signed ZeroMQ messages."""
import glob
import os
import signal
import subprocess
import tempfile
import time

import pytest
from conftest import analysis_pids, analysis_pids_in, answered, displays, environ_of, of_type, ok, running_kernel, stderr_of, stdout_of, value, wait_for
from procs import analysis_servers_in

LOOP = 'println!("running"); loop { std::thread::sleep(std::time::Duration::from_millis(50)); }'


def started(k, code):
    """Sends code and returns its msg_id once it prints "running" (after its compile)."""
    msg_id = k.send("execute", code)
    wait_for(lambda: "running" in stdout_of(k.progress(msg_id)), 300, "the cell to start running")
    return msg_id


@pytest.mark.timing
def test_execute_output_order_and_reply(kernel):
    reply, msgs = kernel.execute('println!("hello"); 40 + 2')
    types = [m["msg_type"] for _, m in msgs]
    assert types[0] == "status" and msgs[0][1]["content"]["execution_state"] == "busy"
    assert types[1] == "execute_input"
    assert types[-1] == "status"
    assert types.index("stream") < types.index("execute_result")
    assert stdout_of(msgs) == "hello\n"
    result = of_type(msgs, "execute_result")[0]["content"]
    assert result["data"]["text/plain"] == "42"
    assert reply["status"] == "ok"
    assert reply["execution_count"] == result["execution_count"] == msgs[1][1]["content"]["execution_count"]


@pytest.mark.timing
def test_print_without_newline_streams_while_running(kernel):
    code = '''
print!("start");
std::thread::sleep(std::time::Duration::from_millis(1500));
for i in 0..3 { println!("tick {}", i); std::thread::sleep(std::time::Duration::from_millis(700)); }
print!("end")
'''
    reply, msgs = kernel.execute(code)
    assert reply["status"] == "ok"
    streams = [(t, m["content"]["text"]) for t, m in msgs if m["msg_type"] == "stream"]
    idle_at = msgs[-1][0]
    first = next(t for t, text in streams if "start" in text)
    # "start" has no newline yet shows up before the cell is done.
    assert idle_at - first > 2.5, streams
    ticks = [t for t, text in streams if "tick" in text]
    assert len(ticks) >= 2 and ticks[-1] - ticks[0] > 0.8, streams
    # A trailing print! with no newline still lands before idle.
    assert stdout_of(msgs) == "starttick 0\ntick 1\ntick 2\nend"


@pytest.mark.timing
def test_the_warm_up_leaves_no_variable_and_streams_from_the_first_cell():
    """The child's start-up code (the flusher, from a library built once per machine) streams
    the first cell's output, and the warm-up leaves no variable behind."""
    with running_kernel(own_analysis=True) as k:
        reply, msgs = k.execute(":vars")
        assert reply["status"] == "ok"
        listing = [m["content"]["data"]["text/plain"] for _, m in msgs if m["msg_type"] == "execute_result"]
        assert listing in ([], [""]), listing
        reply, msgs = k.execute('print!("no newline"); 7')
        assert stdout_of(msgs) == "no newline"


@pytest.mark.timing
def test_stderr_arrives_before_idle(kernel):
    """Every cell's stderr is published before its idle, a line `eprint!` left open included
    (the child marks the end of a cell's stderr; evcxr reads stderr on a thread of its own)."""
    for i in range(6):
        reply, msgs = kernel.execute(f'eprintln!("line {i}"); eprint!("open {i}");')
        assert reply["status"] == "ok"
        assert stderr_of(msgs) == f"line {i}\nopen {i}", [m["content"] for _, m in msgs]


def test_compile_error_has_ename_in_reply_and_iopub(kernel):
    reply, msgs = kernel.execute('let x: i32 = "not a number";')
    assert reply["status"] == "error"
    assert reply["ename"] == "CompilationError"
    assert "mismatched types" in reply["evalue"]
    err = of_type(msgs, "error")[0]["content"]
    assert err["ename"] == "CompilationError" and err["traceback"]
    # Front ends show the traceback: it names the error first, then the cell's own line.
    assert err["traceback"][0] == "CompilationError: [E0308] mismatched types"
    assert "--> cell line 1, column 14" in err["traceback"][1] and "src/lib.rs" not in err["traceback"][1]


def test_compile_errors_name_the_cells_lines_below_its_magics(kernel):
    reply, _ = kernel.execute('%env A=1\n\nlet a = 1;\nlet y: String = a;\nlet z = undefined_thing + 1;')
    tb = "\n".join(reply["traceback"])
    assert "--> cell line 5, column 9\n" in tb and "5 | let z = undefined_thing + 1;" in tb, tb
    assert "--> cell line 4, column 17\n" in tb and "^ expected `String`, found integer" in tb, tb
    assert "help: try using a conversion method: `.to_string()`" in tb, tb


def test_panic_keeps_earlier_variables(kernel):
    kernel.execute("let kept = 41u64;")
    reply, msgs = kernel.execute('let lost = 1; panic!("boom {}", 7);')
    assert reply["status"] == "error"
    assert reply["ename"] == "panic"
    assert "boom 7" in reply["evalue"]
    reply, msgs = kernel.execute("kept + 1")
    assert reply["status"] == "ok"
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "42"


def test_backtraces_only_for_panics_that_end_the_cell():
    # The kernel's own RUST_BACKTRACE=0 (this machine's shell may set 1): backtraces not asked for.
    with running_kernel({"RUST_BACKTRACE": "0"}) as kernel:
        backtraces_only_for_panics_that_end_the_cell(kernel)


def backtraces_only_for_panics_that_end_the_cell(kernel):
    # A caught panic prints its message and place, as Python prints nothing for a caught
    # exception; no backtrace.
    msgs = ok(kernel, 'let caught = std::panic::catch_unwind(|| { panic!("caught {}", 1) }).is_err();')
    err = stderr_of(msgs)
    assert "panicked at" in err and "caught 1" in err, err
    assert "stack backtrace" not in err and "RUST_BACKTRACE" not in err, err
    # A panic that ends the cell carries its backtrace in the error, not in the stream.
    reply, msgs = kernel.execute('fn deep_panic() { panic!("uncaught") }\ndeep_panic();')
    assert reply["ename"] == "panic" and reply["evalue"] == "uncaught", reply
    tb = "\n".join(reply["traceback"])
    assert "stack backtrace:" in tb and "run_user_code" in tb, tb
    # From the panic to the cell's entry: neither the panic machinery nor evcxr's runtime.
    assert "panicking" not in tb and "evcxr::runtime" not in tb, tb
    assert "stack backtrace" not in stderr_of(msgs)
    # Asked for with RUST_BACKTRACE, every panic prints one, as in Rust.
    ok(kernel, "%env RUST_BACKTRACE=1")
    msgs = ok(kernel, 'let caught = std::panic::catch_unwind(|| { panic!("caught {}", 2) }).is_err();')
    assert "stack backtrace:" in stderr_of(msgs), stderr_of(msgs)
    ok(kernel, "%env --unset RUST_BACKTRACE")


@pytest.mark.timing
def test_abort_then_working_cell():
    with running_kernel() as k:
        k.execute("let before = 5;")
        reply, _ = k.execute("std::process::abort();")
        assert reply["status"] == "error"
        assert reply["ename"] == "ChildProcessDied"
        assert "SIGABRT" in reply["evalue"] and "before" in reply["evalue"]
        reply, msgs = k.execute("1 + 2")
        assert reply["status"] == "ok"
        assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "3"
        # Streaming still works in the new child.
        reply, msgs = k.execute('print!("again")')
        assert stdout_of(msgs) == "again"
        reply, _ = k.execute("unsafe { std::ptr::null_mut::<u64>().write_volatile(1) }")
        assert reply["ename"] == "ChildProcessDied" and "segmentation fault" in reply["evalue"]
        reply, _ = k.execute("7")
        assert reply["status"] == "ok"
        reply, _ = k.execute("fn deep(n: u64) -> u64 { let a = [n; 512]; std::hint::black_box(&a); "
                             "if n == 0 { 0 } else { a[3] + deep(n - 1) } }\ndeep(10_000_000)")
        assert reply["ename"] == "ChildProcessDied" and "stack overflow" in reply["evalue"], reply
        # Killed from outside, as the out-of-memory killer does.
        reply, _ = k.execute('std::process::Command::new("kill").args(["-9", &std::process::id().to_string()]).status().unwrap();')
        assert reply["ename"] == "ChildProcessDied" and "SIGKILL" in reply["evalue"], reply
        reply, msgs = k.execute("8")
        assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "8"


@pytest.mark.timing
def test_interrupt_by_message_stops_within_2s():
    with running_kernel() as k:
        k.execute("let survivor = 3;")
        msg_id = started(k, LOOP)
        t0 = time.time()
        k.interrupt()
        reply, msgs = k.collect(msg_id, timeout=30)
        assert time.time() - t0 < 2.0
        assert reply["ename"] == "KeyboardInterrupt"
        assert "survivor" in reply["evalue"]  # said plainly that it was lost
        reply, msgs = k.execute("2 * 3")
        assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "6"
        # By signal, as Jupyter does with interrupt_mode "signal".
        msg_id = started(k, LOOP)
        t0 = time.time()
        os.kill(k.km.provisioner.process.pid, signal.SIGINT)
        reply, _ = k.collect(msg_id, timeout=30)
        assert time.time() - t0 < 2.0 and reply["ename"] == "KeyboardInterrupt"
        reply, _ = k.execute("1")
        assert reply["status"] == "ok"


@pytest.mark.timing
def test_interrupt_cooperative_keeps_variables():
    with running_kernel() as k:
        k.execute("let survivor = 3;")
        # The first use of dryml compiles it: an interrupt then would only stop the build.
        msg_id = started(k, 'println!("running"); let mut n = 0u64; '
                            "while !dryml::interrupted() { n += 1; std::thread::sleep(std::time::Duration::from_millis(10)); }")
        t0 = time.time()
        k.interrupt()
        reply, _ = k.collect(msg_id, timeout=60)
        assert time.time() - t0 < 2.0
        assert reply["ename"] == "KeyboardInterrupt" and "kept" in reply["evalue"]
        reply, msgs = k.execute("survivor")
        assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "3"


@pytest.mark.timing
def test_stop_on_error_aborts_queued(kernel):
    first = kernel.send("execute", 'panic!("first")')
    second = kernel.send("execute", "1")
    r1, _ = kernel.collect(first)
    r2, _ = kernel.collect(second)
    assert r1["status"] == "error"
    assert r2["status"] == "aborted"
    # Without stop_on_error the next one runs.
    first = kernel.send("execute", 'panic!("again")', stop_on_error=False)
    second = kernel.send("execute", "2")
    kernel.collect(first)
    r2, _ = kernel.collect(second)
    assert r2["status"] == "ok"


def test_silent_and_user_expressions(kernel):
    reply, _ = kernel.execute("let ue = 10;")
    count = reply["execution_count"]
    reply, msgs = kernel.execute("ue", silent=True)
    assert reply["execution_count"] == count
    assert not of_type(msgs, "execute_result") and not of_type(msgs, "execute_input")
    reply, _ = kernel.execute("let ue2 = 1;", user_expressions={"double": "ue * 2", "bad": "nope_x"})
    assert reply["user_expressions"]["double"]["data"]["text/plain"] == "20"
    assert reply["user_expressions"]["bad"]["status"] == "error"


def test_magics(kernel):
    reply, msgs = kernel.execute("%lsmagic")
    text = of_type(msgs, "display_data")[0]["content"]["data"]["text/plain"]
    assert "%%time" in text and "%env" in text
    reply, msgs = kernel.execute("%%time\nlet mut s = 0u64;\n"
                                 "for i in 0..300_000_000u64 { s = s.wrapping_add(std::hint::black_box(i) * i); } s")
    assert reply["status"] == "ok"
    out = stdout_of(msgs)
    assert "CPU times: user" in out and "Wall time:" in out
    # The child's CPU time is measured, not the kernel's: a busy loop shows up.
    assert "user 0 ms" not in out, out
    types = [m["msg_type"] for _, m in msgs]
    assert types.index("stream") < types.index("execute_result")
    reply, msgs = kernel.execute("%env DRYML_TEST_VAR=hello world")
    assert reply["status"] == "error" and reply["ename"] == "MagicError"
    reply, msgs = kernel.execute("%env DRYML_TEST_VAR 'hello world'\nstd::env::var(\"DRYML_TEST_VAR\").unwrap()")
    assert reply["status"] == "ok", reply
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == '"hello world"'
    reply, msgs = kernel.execute("%env DRYML_TEST_VAR")
    assert stdout_of(msgs).strip() == "hello world"
    reply, msgs = kernel.execute("%env -u DRYML_TEST_VAR\nstd::env::var(\"DRYML_TEST_VAR\").is_err()")
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "true"


def test_bad_magic_changes_nothing(kernel):
    kernel.execute("let untouched = 9;")
    reply, msgs = kernel.execute("%lsmagik\nlet untouched = 10;")
    assert reply["status"] == "error" and reply["ename"] == "MagicError"
    assert "%lsmagic" in reply["evalue"] and "line 1, column 2" in reply["evalue"]
    reply, msgs = kernel.execute("untouched")
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "9"
    reply, _ = kernel.execute("%env?")
    assert reply["payload"][0]["source"] == "page"
    assert "Usage: %env" in reply["payload"][0]["data"]["text/plain"]


def test_evcxr_commands_still_work(kernel):
    kernel.execute("let listed_var = 1.5f64;")
    reply, msgs = kernel.execute(":vars")
    data = of_type(msgs, "execute_result")[0]["content"]["data"]
    assert "listed_var" in data["text/plain"] and "f64" in data["text/plain"]


def test_timing_shows_each_later_cells_time_as_evcxr_does(kernel):
    assert value(kernel, ":timing").strip() == "Timing: true"
    try:
        msgs = ok(kernel, "let timed = 20 + 1; timed * 2")
        # Below the value, as evcxr_jupyter shows it.
        kinds = [m["msg_type"] for _, m in msgs if m["msg_type"] in ("execute_result", "display_data")]
        assert kinds == ["execute_result", "display_data"], kinds
        assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "42"
        took = [d for d in displays(msgs) if d.get("text/plain", "").startswith("Took ")]
        assert len(took) == 1 and took[0]["text/plain"].endswith("ms"), displays(msgs)
        assert int(took[0]["text/plain"][5:-2]) >= 0 and "Took " in took[0]["text/html"]
    finally:
        assert value(kernel, ":timing").strip() == "Timing: false"
    assert not any("Took " in d.get("text/plain", "") for d in displays(ok(kernel, "timed + 1")))


def test_evcxrs_start_up_files_are_loaded_before_the_first_cell(tmp_path):
    lib = tmp_path / "mylib"
    (lib / "src").mkdir(parents=True)
    (lib / "Cargo.toml").write_text('[package]\nname = "mylib"\nversion = "0.1.0"\nedition = "2021"\n')
    (lib / "src" / "lib.rs").write_text("pub fn v() -> u32 { 7 }\n")
    conf = tmp_path / "evcxr-config"
    conf.mkdir()
    (conf / "init.evcxr").write_text(f':dep mylib = {{ path = "{lib}" }}\n')
    (conf / "prelude.rs").write_text('use std::collections::HashMap;\nlet greeting = String::from("hi");\n')
    env = {"EVCXR_CONFIG_DIR": str(conf), "DRYML_NO_WARM_UP": "1"}
    with running_kernel(env) as k:
        got = value(k, "(mylib::v(), HashMap::<u8, u8>::new().len(), greeting.clone())", timeout=600)
        assert got == '(7, 0, "hi")', got
    # A prelude that does not compile is said on the first cell, which runs all the same.
    (conf / "prelude.rs").write_text('let broken: u8 = "no";\n')
    with running_kernel(env) as k:
        reply, msgs = k.execute("40 + 2")
        assert reply["status"] == "ok" and of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "42"
        said = stderr_of(msgs)
        assert "start-up files in" in said and str(conf) in said and "mismatched types" in said, said
        assert value(k, "mylib::v()") == "7"


def test_rich_html_and_displays(kernel):
    reply, msgs = kernel.execute('dryml::Html("<b>bold</b>".to_string())', timeout=240)
    assert reply["status"] == "ok", reply
    data = of_type(msgs, "execute_result")[0]["content"]["data"]
    assert data["text/html"] == "<b>bold</b>" and data["text/plain"] == "bold"
    reply, msgs = kernel.execute('dryml::display::display(&[("text/plain", "v1")], dryml::display::Update::InPlace("p")); dryml::display::display(&[("text/plain", "v2")], dryml::display::Update::Replace("p")); dryml::clear_output(false);')
    assert of_type(msgs, "display_data")[0]["content"]["transient"]["display_id"] == "p"
    assert of_type(msgs, "update_display_data")[0]["content"]["data"]["text/plain"] == "v2"
    assert of_type(msgs, "clear_output")


def test_stdin_input_request(kernel):
    reply, msgs = kernel.execute('let name = dryml::input("who? "); println!("hi {}", name);',
                                 stdin_answers=["ferris"])
    assert reply["status"] == "ok", reply
    assert "hi ferris" in stdout_of(msgs)


def test_is_complete_and_completion(kernel):
    cases = {"fn f() {": "incomplete", "let v = vec![1,": "incomplete", "}": "invalid", "let a = 1;": "complete"}
    for code, want in cases.items():
        r, _ = kernel.request("is_complete", code, timeout=10)
        assert r["status"] == want, (code, r)
    r, _ = kernel.request("complete", "%ls", 3, timeout=30)
    assert r["matches"] == ["%lsmagic"] and r["cursor_start"] == 0 and r["cursor_end"] == 3
    # Each match with its kind, which JupyterLab shows as an icon.
    assert r["metadata"]["_jupyter_types_experimental"] == [{"text": "%lsmagic", "type": "magic", "start": 0, "end": 3}]
    kernel.execute("let completion_target_value = 1;")
    code = "completion_tar"
    r, _ = kernel.request("complete", code, len(code), timeout=60)
    assert "completion_target_value" in r["matches"], r
    assert r["cursor_start"] == 0 and r["cursor_end"] == len(code)
    kinds = lambda r: {t["text"]: t["type"] for t in r["metadata"]["_jupyter_types_experimental"] if t}
    assert kinds(r)["completion_target_value"] == "instance", r
    code = "let listed = vec![1u8]; listed.le"
    r, _ = answered(kernel, "complete", code, len(code), until=lambda r: "len()" in r["matches"])
    assert len(r["metadata"]["_jupyter_types_experimental"]) == len(r["matches"]), r
    assert kinds(r).get("len()") == "function", r


def test_tab_and_shift_tab_are_answered_while_a_cell_runs(kernel, tmp_path):
    """A long training must not hold up Tab: completion and inspection are answered beside the
    running cell, from the notebook as it found it, and the kernel says it is busy again after."""
    ok(kernel, "let beside_values = vec![1u8, 2];")
    code = "beside_values.le"
    # The analysis loaded first: each request beside the cell adds a busy, counted below.
    answered(kernel, "complete", code, len(code), until=lambda r: "len()" in r["matches"])
    go = tmp_path / "go"
    running = started(kernel, f'println!("running"); while !std::path::Path::new("{go}").exists() '
                              '{ std::thread::sleep(std::time::Duration::from_millis(20)); }')
    r, msgs = kernel.request("complete", code, len(code), timeout=60)
    assert "len()" in r["matches"] and r["cursor_start"] == len("beside_values."), r
    assert [m["content"]["execution_state"] for m in of_type(msgs, "status")] == ["busy", "idle"]
    r, _ = kernel.request("inspect", "beside_values", 5, 0, timeout=60)
    assert r["found"] and r["data"] == {"text/plain": "beside_values: Vec<u8>"}, r
    r, _ = kernel.request("complete", "beside_va", 9, timeout=60)
    assert r["matches"] == ["beside_values"], r
    kernel.progress(running)  # both answered while the cell still runs
    go.write_text("")
    reply, msgs = kernel.collect(running, timeout=60)
    assert reply["status"] == "ok", reply
    states = [m["content"]["execution_state"] for m in of_type(msgs, "status")]
    # Its busy, said again after each answer beside it (JupyterLab reads every idle as the
    # kernel's), then its idle.
    assert states == ["busy"] * 4 + ["idle"], states
    # Between cells, completion is answered in shell order, on the newest state.
    ok(kernel, "let beside_later = 1;")
    r, _ = kernel.request("complete", "beside_la", 9, timeout=60)
    assert r["matches"] == ["beside_later"], r


def types_of(k):
    return dict(line.split(": ", 1) for line in value(k, ":vars").splitlines())


def test_the_analysis_process_killed_mid_cell_changes_nothing_but_speed(tmp_path):
    with running_kernel(own_analysis=True) as k:
        ok(k, "let before_kill = vec![1u8, 2];")
        r, _ = k.request("complete", "before_k", 8, timeout=120)
        assert r["matches"] == ["before_kill"], r
        # The server, not the `cargo metadata` its load may be running (a Tab no longer waits for it).
        [pid] = wait_for(lambda: analysis_servers_in(k.analysis_dir), 60, "the analysis process")
        go = tmp_path / "go"
        running = started(k, f'println!("running"); while !std::path::Path::new("{go}").exists() '
                             '{ std::thread::sleep(std::time::Duration::from_millis(20)); }')
        os.kill(pid, signal.SIGKILL)
        # Beside the running cell: a new analysis process loads and answers.
        r, _ = k.request("complete", "before_k", 8, timeout=120)
        assert r["matches"] == ["before_kill"], r
        go.write_text("")
        reply, _ = k.collect(running, timeout=60)
        assert reply["status"] == "ok", reply
        os.kill(wait_for(lambda: analysis_servers_in(k.analysis_dir), 60, "a new analysis process")[0],
                signal.SIGKILL)
        # Between cells: an untyped `let` and a Shift+Tab, as before the kills.
        assert value(k, "let after_kill = before_kill.len() * 2;\nafter_kill") == "4"
        assert types_of(k) == {"before_kill": "Vec<u8>", "after_kill": "usize"}
        r, _ = k.request("inspect", "before_kill", 5, 0, timeout=120)
        assert r["found"] and r["data"] == {"text/plain": "before_kill: Vec<u8>"}, r


def test_an_analysis_process_that_could_not_start_again_comes_back_unasked():
    # Seen in CI under load: after a kill, the one new start failed, and a notebook that asked
    # nothing more went without an analysis process for good.
    with running_kernel(own_analysis=True) as k:
        kernel_pid = k.km.provisioner.process.pid
        ok(k, "let kept = vec![1u8];")
        r, _ = k.request("complete", "kep", 3, timeout=120)
        assert r["matches"] == ["kept"], r
        [pid] = analysis_servers_in(k.analysis_dir)
        [sock] = glob.glob(os.path.join(k.analysis_dir, "*.sock"))
        os.kill(pid, signal.SIGKILL)
        # Where the socket was, a directory: the next process cannot listen, and ends.
        wait_for(lambda: not analysis_pids(kernel_pid), 30, "the killed process to go")
        os.unlink(sock)
        os.mkdir(sock)
        t0 = time.time()
        assert value(k, "let again = kept.len() + 1;\nagain") == "2", "types from rustc meanwhile"
        assert not analysis_pids(kernel_pid)
        os.rmdir(sock)
        # No request from here on: the kernel tries again by itself once its wait (30 s) is over.
        wait_for(lambda: analysis_pids(kernel_pid), 90, "an analysis process started again unasked")
        assert time.time() - t0 >= 25, "not before the wait is over: no storm of starts"
        r, _ = k.request("complete", "aga", 3, timeout=120)
        assert r["matches"] == ["again"], r


def test_a_quiet_notebook_ends_its_analysis_process_and_the_next_cell_brings_it_back():
    with running_kernel({"DRYML_ANALYSIS_IDLE_S": "2"}, own_analysis=True) as k:
        kernel_pid = k.km.provisioner.process.pid
        ok(k, "let kept = vec![1u8];")
        r, _ = k.request("complete", "kep", 3, timeout=120)
        assert r["matches"] == ["kept"], r
        assert analysis_pids(kernel_pid), "the analysis process runs while the notebook is used"
        wait_for(lambda: not analysis_pids(kernel_pid), 60, "the quiet notebook's analysis process to end")
        # The next cell's untyped `let` is typed by rustc while a new analysis process loads.
        assert value(k, "let again = kept.len() + 1;\nagain") == "2"
        assert analysis_pids(kernel_pid), "the cell started the analysis process again"
        r, _ = k.request("complete", "aga", 3, timeout=120)
        assert r["matches"] == ["again"], r
        assert types_of(k) == {"kept": "Vec<u8>", "again": "usize"}


def test_an_analysis_process_whose_socket_is_gone_ends_and_the_next_request_starts_one():
    # Found on a user's machine: a process listening on a socket file that was gone still held
    # the socket's lock, so every kernel of that build waited for a start that could not happen.
    with tempfile.TemporaryDirectory(prefix="dra-", ignore_cleanup_errors=True) as shared_dir:
        with running_kernel({"DRYML_ANALYSIS_DIR": shared_dir}) as k:
            ok(k, "let kept = vec![1u8];")
            r, _ = k.request("complete", "kep", 3, timeout=120)
            assert r["matches"] == ["kept"], r
            [pid] = analysis_servers_in(shared_dir)
            [sock] = [p for p in os.listdir(shared_dir) if p.endswith(".sock")]
            os.unlink(os.path.join(shared_dir, sock))
            wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 30, "the unreachable analysis process to end")
            # The next request starts another, which answers; the notebook lost nothing.
            r, _ = k.request("complete", "kep", 3, timeout=120)
            assert r["matches"] == ["kept"], r
            [again] = analysis_servers_in(shared_dir)
            assert again != pid and os.path.exists(os.path.join(shared_dir, sock))
            assert value(k, "let more = kept.len() + 1;\nmore") == "2"
            assert types_of(k) == {"kept": "Vec<u8>", "more": "usize"}


def test_a_users_kernels_share_one_analysis_process_that_ends_with_the_last():
    with tempfile.TemporaryDirectory(prefix="dra-", ignore_cleanup_errors=True) as shared_dir:
        shared = {"DRYML_ANALYSIS_DIR": shared_dir}
        with running_kernel(shared) as a, running_kernel(shared) as b:
            ok(a, "let only_in_a = vec![1u8];")
            ok(b, "struct OnlyInB { n: u32 }\nlet only_in_b = OnlyInB { n: 3 };")
            for k, name in [(a, "only_in_a"), (b, "only_in_b"), (a, "only_in_a")]:
                r, _ = k.request("complete", "only_in_", 8, timeout=120)
                assert r["matches"] == [name], r
            # The servers, not the `cargo metadata` a load may be running beside one.
            [pid] = analysis_servers_in(shared["DRYML_ANALYSIS_DIR"])
            for k in (a, b):
                assert analysis_servers_in(environ_of(k.km.provisioner.process.pid)["DRYML_ANALYSIS_DIR"]) == [pid]
            assert types_of(a) == {"only_in_a": "Vec<u8>"}
            assert types_of(b) == {"only_in_b": "OnlyInB"}
            # One kernel killed: the process goes on for the other, which sees only its own crate.
            a_pid = a.km.provisioner.process.pid
            os.kill(a_pid, signal.SIGKILL)
            wait_for(lambda: not a.km.is_alive(), 30, "the killed kernel to end")
            assert value(b, "let untyped_b = only_in_b.n + 1;\nuntyped_b") == "4"
            assert types_of(b) == {"only_in_b": "OnlyInB", "untyped_b": "u32"}
            r, _ = b.request("complete", "only_in_", 8, timeout=120)
            assert r["matches"] == ["only_in_b"], r
            r, _ = b.request("inspect", "only_in_b", 5, 0, timeout=120)
            assert r["found"] and r["data"] == {"text/plain": "only_in_b: OnlyInB"}, r
            assert analysis_servers_in(shared["DRYML_ANALYSIS_DIR"]) == [pid]
            # A kernel whose environment picks another toolchain (here the same one, named) gets
            # a process of its own: the process runs cargo and rustc with its starter's.
            toolchain = subprocess.run(["rustup", "show", "active-toolchain"], capture_output=True, text=True,
                                       check=True).stdout.split()[0]
            with running_kernel({**shared, "RUSTUP_TOOLCHAIN": toolchain}) as c:
                ok(c, "let only_in_c = 5u16;")
                r, _ = c.request("complete", "only_in_", 8, timeout=120)
                assert r["matches"] == ["only_in_c"], r
                both = analysis_pids_in(shared["DRYML_ANALYSIS_DIR"])
                sockets = {environ_of(p).get("DRYML_ANALYSIS_SOCKET") for p in both}
                assert len(sockets) == 2 and pid in both, sockets
        wait_for(lambda: not analysis_pids_in(shared["DRYML_ANALYSIS_DIR"]), 30, "the analysis process to end with the last kernel")


def test_inspection_at_detail_level_1_adds_a_variables_type_documentation(kernel):
    ok(kernel, "let inspected = vec![1u8, 2];")
    code = "inspected"
    brief, _ = kernel.request("inspect", code, len(code), 0, timeout=60)
    assert brief["found"] and brief["data"] == {"text/plain": "inspected: Vec<u8>"}, brief
    full, _ = answered(kernel, "inspect", code, len(code), 1, until=lambda r: "\n\n" in r["data"].get("text/plain", ""))
    plain = full["data"]["text/plain"]
    assert full["found"] and plain.startswith("inspected: Vec<u8>\n\n"), full
    assert "contiguous growable array type" in plain, plain
    assert full["data"]["text/html"].startswith("<pre>inspected: Vec&lt;u8&gt;</pre>"), full


def test_kernel_info(kernel):
    r, _ = kernel.request("kernel_info", timeout=10)
    li = r["language_info"]
    assert li["name"] == "rust" and li["mimetype"] == "text/rust" and li["file_extension"] == ".rs"
    assert li["pygments_lexer"] == "rust" and li["codemirror_mode"] == "rust"
    assert r["protocol_version"] == "5.4" and r["help_links"]


def test_history_persists_across_restart():
    with running_kernel() as k:
        marker = f"let history_marker_{os.getpid()} = 1;"
        k.execute(marker)
        k.restart()
        r, _ = k.request("history", hist_access_type="tail", n=50, timeout=10)
        assert any(h[2] == marker for h in r["history"]), r
        r, _ = k.request("history", hist_access_type="search", pattern=f"*history_marker_{os.getpid()}*", timeout=10)
        assert len(r["history"]) == 1


def test_shutdown_ends_process():
    with running_kernel() as k:
        # jupyter_client sends it on the control channel, where the reply comes.
        r, msgs = k.request("shutdown", timeout=10)
        assert r["status"] == "ok" and r["restart"] is False
        assert [m["content"]["execution_state"] for m in of_type(msgs, "status")] == ["busy", "idle"]
        wait_for(lambda: not k.km.is_alive(), 10, "the kernel process to end")


def test_comms_answer_without_errors(kernel):
    r, _ = kernel.request("comm_info", timeout=10)
    assert r["status"] == "ok" and r["comms"] == {}
    msg = kernel.kc.session.msg("comm_open", {"comm_id": "c1", "target_name": "nothing_here", "data": {}})
    kernel.kc.shell_channel.send(msg)
    # comm_open has no reply: the kernel answers on iopub with comm_close, then idle.
    _, msgs = kernel.collect(kernel.expect(msg["header"]["msg_id"], None), timeout=10)
    assert [m["content"]["comm_id"] for m in of_type(msgs, "comm_close")] == ["c1"], msgs
    reply, _ = kernel.execute("5")
    assert reply["status"] == "ok"


def test_a_cell_whose_value_is_unit_shows_no_result(kernel):
    _, msgs = kernel.execute("for _ in 0..2 {}")
    assert of_type(msgs, "execute_result") == [], "no `()` output, as Python shows nothing for None"
    assert value(kernel, "let u = (); format!(\"{u:?}\")") == '"()"'
