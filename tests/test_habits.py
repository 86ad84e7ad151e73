"""Notebooks as people write them (IPython's habits): `!` shell lines in order with the cell's
Rust, `%%bash`/`%%sh`, `%%writefile`, `%cd`/`%pwd`, `%load` and `%timeit`, through the real
kernel over the real protocol."""
import os
import re
import subprocess
import time

import pytest

from conftest import ROOT, ok, of_type, running_kernel, stderr_of, stdout_of, value, wait_for

DIGITS_DIR = ROOT / "target" / "data"
# IPython's line: "1.23 µs ± 0.04 µs per loop (mean ± std. dev. of 7 runs, 100,000 loops each)".
TIMEIT_LINE = re.compile(r"^[\d.e+]+ (ns|µs|ms|s) ± [\d.e+]+ (ns|µs|ms|s) per loop "
                         r"\(mean ± std\. dev\. of (\d+) runs?, ([\d,]+) loops? each\)$", re.M)


@pytest.fixture(scope="module")
def kernel():
    with running_kernel() as k:
        yield k


def test_shell_lines_run_in_order_with_the_rust_around_them(kernel):
    msgs = ok(kernel, 'let n = 41;\nprint!("before ");\n!echo shell {n + 1} "$HOME"\n'
                      'for i in 0..2 {\n    !echo loop {i}\n}\nprintln!("after");')
    assert stdout_of(msgs) == f"before shell 42 {os.environ['HOME']}\nloop 0\nloop 1\nafter\n"
    # A failing command says its status on stderr and the cell goes on (IPython's rule).
    reply, msgs = kernel.execute('!ls /no/such/dir\nprintln!("went on");\nn')
    assert reply["status"] == "ok", reply
    assert "!ls /no/such/dir: exit status 2" in stderr_of(msgs)
    assert stdout_of(msgs) == "went on\n"
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "41"


def test_a_bad_line_is_an_error_naming_it_and_nothing_runs(kernel):
    ok(kernel, "let mut kept = 1;")
    reply, _ = kernel.execute("kept += 1;\n!")
    assert reply["ename"] == "MagicError" and "(line 2, column 1)" in reply["evalue"], reply
    reply, _ = kernel.execute("kept += 1;\n%cd /tmp")
    assert reply["ename"] == "MagicError" and "`%cd` must come before the cell's code" in reply["evalue"]
    assert value(kernel, "kept") == "1"


@pytest.mark.timing
def test_an_interrupted_shell_line_ends_within_2s_with_its_processes(kernel, tmp_path):
    ok(kernel, "let survivor = 5;")
    marker = f"dryml-habits-{os.getpid()}"
    # `sleep` in the background too: the whole process group goes.
    msg_id = kernel.send("execute", f'println!("running");\n!(exec -a {marker} sleep 100) & exec -a {marker} sleep 101')
    wait_for(lambda: "running" in stdout_of(kernel.progress(msg_id)), 300, "the cell to start")
    wait_for(lambda: subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0, 30,
             "the command to start")
    reply, _, took = kernel.interrupt_collect(msg_id)
    assert took < 2.0, took
    assert reply["ename"] == "KeyboardInterrupt" and "kept" in reply["evalue"], reply
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1
    assert value(kernel, "survivor") == "5"


@pytest.mark.timing
def test_bash_cells_stream_and_interrupt(kernel):
    reply, msgs = kernel.execute("%%bash\necho one\nsleep 1\necho two >&2\necho three")
    assert reply["status"] == "ok"
    assert stdout_of(msgs) == "one\nthree\n" and stderr_of(msgs) == "two\n"
    arrived = {m["content"]["text"]: t for t, m in msgs if m["msg_type"] == "stream"}
    assert arrived["three\n"] - arrived["one\n"] > 0.8, arrived  # "one" came before the sleep
    msgs = ok(kernel, '%%sh\nfor w in a b; do printf "%s-" "$w"; done\n[ -z "$BASH_VERSION" ] && echo sh')
    assert stdout_of(msgs) == "a-b-sh\n"
    # A failing script: its status, or with --raise-error the cell's error.
    reply, msgs = kernel.execute("%%bash\nexit 3")
    assert reply["status"] == "ok" and "exit status 3" in stderr_of(msgs)
    reply, _ = kernel.execute("%%bash --raise-error\nfalse")
    assert reply["ename"] == "CalledProcessError" and "exit status 1" in reply["evalue"], reply
    msg_id = kernel.send("execute", "%%bash\necho running\nsleep 100")
    wait_for(lambda: "running" in stdout_of(kernel.progress(msg_id)), 300, "the script to start")
    reply, _, took = kernel.interrupt_collect(msg_id)
    assert took < 2.0 and reply["ename"] == "KeyboardInterrupt", (took, reply)


def test_cd_writefile_and_relative_paths(kernel, tmp_path):
    msgs = ok(kernel, f"%cd {tmp_path}")
    assert stdout_of(msgs) == f"{tmp_path}\n"
    assert stdout_of(ok(kernel, "%pwd")) == f"{tmp_path}\n"
    msgs = ok(kernel, "%%writefile config.toml\n[train]\nlr = 0.1\n")
    assert stdout_of(msgs) == "Writing config.toml\n"
    assert (tmp_path / "config.toml").read_text() == "[train]\nlr = 0.1\n"
    assert oct((tmp_path / "config.toml").stat().st_mode & 0o777) == oct(0o644)
    msgs = ok(kernel, "%%writefile -a config.toml\nepochs = 3\n")
    assert stdout_of(msgs) == "Appending to config.toml\n"
    assert value(kernel, 'std::fs::read_to_string("config.toml").unwrap()') == \
        '"[train]\\nlr = 0.1\\nepochs = 3\\n"'
    # `!` lines and code see the same directory; no temporary file is left beside the file.
    assert stdout_of(ok(kernel, "!ls -A")) == "config.toml\n"
    # A relative Dataset path, after `%cd` to the digits.
    ok(kernel, f"%cd {DIGITS_DIR}")
    assert value(kernel, 'dryml::data::Dataset::from_csv_xy("digits.csv", "label", '
                         '&dryml::data::CsvOptions::default()).unwrap().len()') == "Known(1797)"
    msgs = ok(kernel, "%cd -")
    assert stdout_of(msgs) == f"{tmp_path}\n"


def test_bad_cd_and_unwritable_writefile_name_the_path(kernel, tmp_path):
    ok(kernel, f"%cd {tmp_path}\nlet before = 9;")
    reply, _ = kernel.execute("%cd no/such/dir")
    assert reply["ename"] == "FileNotFoundError" and f"{tmp_path}/no/such/dir" in reply["evalue"], reply
    (tmp_path / "a-file").write_text("x")
    reply, _ = kernel.execute("%cd a-file")
    assert reply["ename"] == "NotADirectoryError" and "a-file is not a directory" in reply["evalue"]
    reply, _ = kernel.execute("%%writefile /proc/dryml-no/such.txt\nhello")
    assert reply["ename"] == "OSError" and "/proc/dryml-no/such.txt" in reply["evalue"], reply
    # Nothing moved: the directory, the variables.
    assert stdout_of(ok(kernel, "%pwd")) == f"{tmp_path}\n"
    assert value(kernel, "before") == "9"


def test_the_working_directory_outlives_a_restarted_process(tmp_path):
    with running_kernel() as k:
        ok(k, f"%cd {tmp_path}")
        reply, _ = k.execute("std::process::abort();")
        assert reply["ename"] == "ChildProcessDied", reply
        assert value(k, 'std::env::current_dir().unwrap().display().to_string()') == repr(str(tmp_path)).replace("'", '"')


def test_load_puts_the_file_in_the_cell(kernel, tmp_path):
    (tmp_path / "snippet.rs").write_text("let loaded = 1 + 1;\n")
    ok(kernel, f"%cd {tmp_path}")
    reply, _ = kernel.execute("%load snippet.rs")
    assert reply["payload"] == [{"source": "set_next_input", "replace": True,
                                 "text": "// %load snippet.rs\nlet loaded = 1 + 1;\n"}], reply


def test_timeit_prints_ipythons_line_and_gives_a_value(kernel):
    ok(kernel, "fn work(n: u64) -> u64 { (0..n).map(|i| i * i).sum() }\nlet n = 1000u64;")
    out = stdout_of(ok(kernel, "%timeit work(n)"))
    m = TIMEIT_LINE.search(out)
    assert m and m.group(3) == "7", out
    # -n, -r; -o keeps the result, with its figures.
    out = stdout_of(ok(kernel, "let r = %timeit -o -n 2000 -r 3 work(n);"))
    m = TIMEIT_LINE.search(out)
    assert m and (m.group(3), m.group(4)) == ("3", "2,000"), out
    assert value(kernel, "(r.loops, r.repeat, r.all_runs.len(), r.average() > 0.0)") == "(2000, 3, 3, true)"
    assert value(kernel, "%timeit -o -q -n 10 -r 1 work(n)").startswith("<TimeitResult : ")
    # A %%timeit cell: its `let` stays inside the timed closure.
    out = stdout_of(ok(kernel, "%%timeit -n 100 -r 2\nlet v: Vec<u64> = (0..n).collect();\nv.len()"))
    m = TIMEIT_LINE.search(out)
    assert m and (m.group(3), m.group(4)) == ("2", "100"), out
    reply, _ = kernel.execute("%timeit -n many work(n)")
    assert reply["ename"] == "MagicError" and "-n (loops per run) takes a whole number" in reply["evalue"]


def test_shell_lines_in_a_sandbox_run_there(kernel):
    pid = value(kernel, "std::process::id()")
    msgs = ok(kernel, "%%compute\n!echo parent $PPID")
    sandbox = stdout_of(msgs).split("parent ")[1].split()[0]
    assert sandbox != pid, (pid, stdout_of(msgs))


def test_the_new_magics_are_listed_with_help(kernel):
    out = "".join(d["text/plain"] for d in (m["content"]["data"] for m in of_type(
        kernel.execute("%lsmagic")[1], "display_data")))
    for name in ("%cd", "%pwd", "%load", "%timeit", "%%bash", "%%sh", "%%writefile", "%%timeit"):
        assert name in out, name
    reply, _ = kernel.execute("%%writefile?")
    assert "Usage: %%writefile [-a] PATH" in reply["payload"][0]["data"]["text/plain"]
    reply, _ = kernel.request("complete", "%%wr", 4)
    assert reply["matches"] == ["%%writefile"], reply
