"""Compute contexts and sandboxes, end to end: `%context` claims devices for the notebook's real
process, `%%compute` cells run in real forked sandboxes, and the pool is the kernel's real claim
files. GPUs come from the fake NVML library."""
import json
import re
import time

import pytest

from conftest import DATA_MIME, NO_NVML, TRACKED, displays, of_type, ok, running_kernel, stdout_of, value, wait_for

MIB = 1 << 20
GIB = 1 << 30


@pytest.fixture(scope="module")
def kernel():
    with running_kernel(NO_NVML) as k:
        yield k


def failed(kernel, code, ename, words=""):
    reply, msgs = kernel.execute(code, timeout=300)
    assert reply["status"] == "error", (code, stdout_of(msgs))
    assert reply["ename"] == ename, (reply["ename"], reply["evalue"])
    assert words in reply["evalue"], reply["evalue"]
    assert not reply["evalue"].startswith(ename), reply["evalue"]
    return reply, msgs


def pool(kernel):
    """The claims of the pool, from `%context`'s JSON."""
    msgs = ok(kernel, "%context")
    return [d[DATA_MIME] for d in displays(msgs)][0]


def test_context_check_fails_then_passes_after_context(kernel):
    failed(kernel, "%context check tf", "NoContextError", "no context is set")
    msgs = ok(kernel, 'let r = dryml::compute::context::context_check(&dryml::compute::context::Requests::parse("tf").unwrap());\nprintln!("{}", r.unwrap_err());')
    assert stdout_of(msgs).startswith("NoContextError: ")
    msgs = ok(kernel, '%context {"tf": {"num_cpus": 1}, "torch": {"num_cpus": 0}}')
    assert "Context set for the notebook's process" in stdout_of(msgs)
    ok(kernel, "%context check tf")
    ok(kernel, "%context check tf num_cpus=1 torch")
    failed(kernel, "%context check tf num_gpus=2", "ContextIncompatibilityError",
           "Context doesn't satisfy requirements {'tf': {'num_gpus': 2}}")
    assert value(kernel, "dryml::compute::context::current().unwrap().to_string()").startswith('"tf: cpu/')
    # The environment and the CPU affinity of the notebook's process follow the context.
    assert value(kernel, 'std::env::var("OMP_NUM_THREADS").unwrap()') == '"1"'
    assert value(kernel, 'std::env::var("CUDA_VISIBLE_DEVICES").unwrap()') == '""'
    allowed = value(kernel, 'std::fs::read_to_string("/proc/self/status").unwrap().lines().find(|l| l.starts_with("Cpus_allowed_list")).unwrap().to_string()')
    held = pool(kernel)["claims"]
    assert [c["device"] for c in held if c["holder"] == "notebook"] == ["cpu/0"], held
    assert allowed.endswith('\\t0"'), allowed
    # Once per process, as in DRYML.
    failed(kernel, "%context tf", "ContextAlreadyActiveError", "%context --restart")


def test_restart_replaces_the_context_and_warns(kernel):
    ok(kernel, "let keepme = 1;")
    reply, msgs = kernel.execute("%context --restart default num_cpus=0", timeout=300)
    assert reply["status"] == "ok", reply
    warn = "".join(m["content"]["text"] for _, m in msgs if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")
    assert "variables are lost" in warn and "keepme" in warn, warn
    assert value(kernel, "dryml::compute::context::current().unwrap().to_string()") == '"default: no devices"'
    # The old process's claim went with it.
    assert pool(kernel)["claims"] == []
    # Its variables are gone from evcxr's record too: a cell naming one is a compile error, not
    # a new child aborting on a variable "gone missing".
    reply, _ = kernel.execute("keepme + 1")
    assert (reply["ename"], reply["evalue"]) == ("CompilationError", "[E0425] cannot find value `keepme` in this scope"), reply
    assert value(kernel, "2 + 2") == "4"


def test_update_round_trip_and_the_notebook_is_untouched(kernel):
    ok(kernel, "let mut model = vec![1.0f64, 2.0];\nlet mut steps = 0u32;\nlet data = vec![3u8; 1000];\nlet name = String::from(\"mlp\");")
    msgs = ok(kernel, "%%compute --update model,steps\n"
                      "model.push(data.len() as f64);\nsteps += 5;\n"
                      "let name = name + \"-changed\";\n"
                      "println!(\"sandbox {} vs {}\", std::process::id(), name);\nmodel.len()")
    out = stdout_of(msgs)
    assert "-changed" in out and "[%%compute] sandbox pid" in out and "all released" in out, out
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "3"
    assert value(kernel, "(model.clone(), steps, name.clone())") == '([1.0, 2.0, 1000.0], 5, "mlp")'
    # A body that moves a notebook variable moves the sandbox's copy only.
    assert value(kernel, "%%compute\nlet owned = data; owned.len()") == "1000"
    assert value(kernel, "data.len()") == "1000"
    # The sandbox is another process.
    assert value(kernel, "%%compute\nstd::process::id()") != value(kernel, "std::process::id()")


@pytest.mark.timing
def test_failing_sandboxes_release_claims_and_keep_variables(kernel):
    ok(kernel, "let survivor = vec![7u8; 3];\nlet mut counter = 1u32;")
    cases = [
        ("%%compute --update counter\ncounter += 1;\npanic!(\"bad batch {}\", 3);", "SandboxPanicked", "bad batch 3"),
        ("%%compute --update counter --timeout 0.5\ncounter += 1;\nstd::thread::sleep(std::time::Duration::from_secs(60));",
         "SandboxTimedOut", "after the 0.5 s timeout"),
        ("%%compute --update counter --mem-limit 64M\ncounter += 1;\nlet mut v: Vec<Vec<u8>> = Vec::new();\n"
         "loop { v.push(vec![1u8; 8 << 20]); }", "SandboxOutOfMemory", "memory limit of 64.0 MiB"),
        ("%%compute --update counter\ncounter += 1;\nstd::process::exit(3)", "SandboxExited", "exited with code 3"),
        ("%%compute --update counter\ncounter += 1;\nstd::process::abort()", "SandboxKilled", "SIGABRT"),
        ("%%compute --update counter\ncounter += 1;\nlet n: u32 = \"x\".parse()?;\nn", "SandboxFailed", "the cell returned an error: ParseIntError"),
    ]
    for code, ename, words in cases:
        t0 = time.time()
        failed(kernel, code, ename, words)
        assert time.time() - t0 < 60, code
        assert pool(kernel)["claims"] == [], code
        assert value(kernel, "(survivor.clone(), counter)") == "([7, 7, 7], 1)", code


def test_a_sandbox_never_runs_the_notebooks_destructors(kernel, tmp_path):
    log = tmp_path / "drops"
    ok(kernel, TRACKED, timeout=600)
    ok(kernel, f'let held = Tracked("{log}".into(), 0);\nlet mut upd = Tracked("{log}".into(), 0);')
    # Every way a sandbox ends, with the notebook's variables copied in (`held`) and updated
    # (`upd`): none of them drops a copy.
    touch = "let _ = &held;\nupd.1 += 1;\n"
    cases = [
        (f"%%compute --update upd\n{touch}panic!(\"boom\");", "SandboxPanicked", "boom"),
        (f"%%compute --update upd\n{touch}let n: u32 = \"x\".parse()?;\nn", "SandboxFailed", "ParseIntError"),
        (f"%%compute --update upd\n{touch}std::process::exit(3)", "SandboxExited", "code 3"),
        (f"%%compute --update upd --timeout 0.5\n{touch}std::thread::sleep(std::time::Duration::from_secs(60));", "SandboxTimedOut", "0.5 s"),
        (f"%%compute --update upd --mem-limit 64M\n{touch}let mut v: Vec<Vec<u8>> = Vec::new();\nloop {{ v.push(vec![1u8; 8 << 20]); }}",
         "SandboxOutOfMemory", "64.0 MiB"),
        # The body moved the copies before it panicked.
        (f"%%compute --update upd\n{touch}let moved = (held, upd);\npanic!(\"after moving {{}}\", moved.1.1);", "SandboxPanicked", "after moving 1"),
        # An unwind that is no panic (batching's interrupt, rayon's re-raise).
        (f"%%compute --update upd\n{touch}std::panic::resume_unwind(Box::new(7u8));", "SandboxPanicked", "unwound without a panic"),
        # From code: a borrowing closure, and run_updating.
        ('let r = dryml::compute::context::Requests::parse("num_cpus=0").unwrap();\n'
         'let e = dryml::Compute::new(&r).run(|| -> u32 { let _ = &held; panic!("in code") }).unwrap_err();\n'
         'let f = dryml::Compute::new(&r).run_updating(&mut upd, |u| -> u32 { u.1 += 1; panic!("updating") }).unwrap_err();\n'
         'dryml::__kernel::cell::raise(&dryml::ComputeError::Failed(format!("{e} / {f}")));', "SandboxFailed", "in code"),
    ]
    for code, ename, words in cases:
        failed(kernel, code, ename, words)
        assert not log.exists(), (code, log.read_text())
    # Interrupted while it runs.
    msg_id = kernel.send("execute", f'%%compute --update upd\n{touch}println!("running");\nloop {{ std::thread::sleep(std::time::Duration::from_millis(5)); }}')
    wait_for(lambda: "running" in stdout_of(kernel.progress(msg_id)), 300, "the sandbox to start")
    kernel.interrupt()
    reply, msgs = kernel.collect(msg_id, timeout=60)
    assert reply["ename"] == "KeyboardInterrupt", reply
    assert not log.exists(), log.read_text()
    # A sandbox that returns: the updated value comes back, and only the notebook drops the
    # value it replaced, once; the notebook's variables are as they were.
    notebook = value(kernel, "std::process::id()")
    ok(kernel, f"%%compute --update upd\n{touch}")
    assert log.read_text() == f"{notebook} 0\n", log.read_text()
    assert value(kernel, "(held.1, upd.1)") == "(0, 1)"
    ok(kernel, "drop(held);")
    assert log.read_text() == f"{notebook} 0\n{notebook} 0\n", log.read_text()


@pytest.mark.timing
def test_interrupt_stops_the_sandbox(kernel):
    ok(kernel, "let before_interrupt = 42;")
    msg_id = kernel.send("execute", '%%compute\nprintln!("running");\nloop { std::thread::sleep(std::time::Duration::from_millis(5)); }')
    wait_for(lambda: "running" in stdout_of(kernel.progress(msg_id)), 300, "the sandbox to start")
    kernel.interrupt()
    reply, msgs = kernel.collect(msg_id, timeout=60)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    assert value(kernel, "before_interrupt") == "42"
    assert pool(kernel)["claims"] == []


def test_overcommitted_pool_is_refused(kernel):
    ok(kernel, "%context --restart tf num_cpus=-1")
    held = pool(kernel)["claims"]
    assert all(c["holder"] == "notebook" for c in held) and len(held) >= 1, held
    failed(kernel, "%%compute torch num_cpus=1\n1", "ResourcesUnavailableError",
           "torch: num_cpus=1 cannot be met: 0 of the pool's")
    failed(kernel, "%%compute torch cpu/0=0.5\n1", "ResourcesUnavailableError", "is held by the notebook")
    # --use-existing runs in the notebook's own process when its context fits...
    out = stdout_of(ok(kernel, "%%compute --use-existing tf\nstd::process::id()"))
    assert "ran in this process's own context" in out
    # ...and fails with WrongContextError when it does not.
    failed(kernel, "%%compute --use-existing torch\n1", "WrongContextError", "has no `torch` framework")
    failed(kernel, "%%compute --dont-create tf num_gpus=1\n1", "WrongContextError", "num_gpus=1")
    ok(kernel, "%context --restart default num_cpus=0")
    failed(kernel, "%%compute --dont-create jax\n1", "WrongContextError")


def test_bad_requests_point_at_the_token(kernel):
    reply, _ = kernel.execute("%context tf gpu/0=1.5")
    assert reply["status"] == "error" and "gpu/0 must be a fraction in (0, 1], got 1.5" in reply["evalue"]
    assert any(line.endswith("^") for line in reply["traceback"]), reply["traceback"]
    # A device the machine lacks is caught before anything runs, with a caret under it.
    for code in ("%context check tf gpu/3=0.5", "%context tf cpu/99=1", "%%compute tf gpu/3=0.5\n1"):
        reply, _ = kernel.execute(code)
        assert reply["status"] == "error" and reply["ename"] == "MagicError", reply
        assert "does not exist (this machine has" in reply["evalue"], reply["evalue"]
        caret = reply["traceback"][0].splitlines()
        assert caret[1].index("^") == caret[0].index("/3=" if "/3=" in code else "/99=") - 3, caret
    reply, _ = kernel.execute('%context {"tf": {"gpu/0": "half"}}')
    assert reply["status"] == "error" and '"tf"."gpu/0": expected a number' in reply["evalue"], reply
    failed(kernel, "%%compute --update nope\n1", "MagicError", "no variable `nope`")


def test_runtime_compute_api(kernel):
    code = """
let big: Vec<u8> = vec![1; 1 << 20];
let r = dryml::Compute::new(&dryml::compute::context::Requests::parse("default").unwrap()).run(move || {
    (big.len(), std::process::id(), dryml::compute::context::current().unwrap().to_string())
}).unwrap();
let mut opt = vec![0.5f32];
let loss = dryml::Compute::new(&dryml::compute::context::Requests::parse("default num_cpus=0").unwrap())
    .run_updating(&mut opt, |o| { o.push(1.5); o.iter().sum::<f32>() }).unwrap();
let e = dryml::Compute::new(&dryml::compute::context::Requests::parse("default num_cpus=0").unwrap()).run(|| -> u8 { panic!("inner") }).unwrap_err();
format!("{} {} {} {:?} {} | {}", r.0, r.1 != std::process::id(), r.2.starts_with("default: cpu/"), opt, loss, e)
"""
    text = value(kernel, code)
    assert text.startswith('"1048576 true true [0.5, 1.5] 2 | SandboxPanicked: the sandbox panicked: inner (at '), text


@pytest.mark.timing
def test_sandbox_memory_is_released_as_experiments_see_it(kernel):
    ok(kernel, "%experiment start sandboxed")
    out = stdout_of(ok(kernel, "%%compute\nlet v = vec![1u8; 300 << 20];\nv.len()"))
    ok(kernel, "let small = 1u8;")
    msgs = ok(kernel, "%experiment finish")
    finish = [d[DATA_MIME] for d in displays(msgs) if d.get(DATA_MIME, {}).get("event") == "finish"][0]
    cpu = next(d for d in finish["devices"] if d["device"] == "cpu")
    # The sandbox's 300 MiB never stayed in the notebook's process.
    assert cpu["consumed"] < 32 * MIB, cpu
    # The report line says what the sandbox itself allocated.
    m = re.search(r"peak memory [\d.]+ \w+ \(([\d.]+) MiB allocated in the sandbox\)", out)
    assert m and float(m.group(1)) >= 290, out


@pytest.fixture(scope="module")
def gpu_kernel(fake_gpu_kernel):
    """Two fake GPUs, listed by NVML out of PCI order; the pool sees them."""
    with fake_gpu_kernel(f"gpu 0 00000000:5E:00.0 GPU-bbbb2222 {80 * GIB} {80 * GIB} Fake H100 B\n"
                         f"gpu 1 00000000:1A:00.0 GPU-aaaa1111 {40 * GIB} {40 * GIB} Fake A100 A\n") as k:
        yield k


def test_gpu_pool_through_nvml(gpu_kernel):
    k = gpu_kernel
    table = displays(ok(k, "%context"))[0]["text/plain"]
    # gpu/N counts in PCI bus order: the A100 on bus 1A is gpu/0.
    assert "gpu/0   Fake A100 A (0000:1a:00.0)" in table and "gpu/1   Fake H100 B (0000:5e:00.0)" in table, table
    failed(k, "%context tf gpu/2=0.5", "MagicError", "tf: gpu/2 does not exist (this machine has 2 gpus")
    msgs = ok(k, "%context tf gpu/1=0.5 num_cpus=0")
    assert "CUDA_VISIBLE_DEVICES=GPU-bbbb2222" in stdout_of(msgs)
    assert value(k, 'std::env::var("CUDA_VISIBLE_DEVICES").unwrap()') == '"GPU-bbbb2222"'
    # The other half of gpu/1 is free; three quarters are not.
    failed(k, "%%compute torch gpu/1=0.75 num_cpus=0\n1", "ResourcesUnavailableError",
           "torch: gpu/1=0.75 cannot be met: 0.5 of gpu/1 is free; it is held by the notebook")
    got = value(k, "%%compute torch gpu/1=0.5 num_gpus=1 num_cpus=0\n"
                   "let c = dryml::compute::context::current().unwrap();\n"
                   "(std::env::var(\"CUDA_VISIBLE_DEVICES\").unwrap(), c.to_string(), c.cuda_device(0), c.gpu_share(\"torch\", 1))")
    assert got == '("GPU-aaaa1111,GPU-bbbb2222", "torch: gpu/1=0.5, gpu/0", Some(0), Some(0.5))', got
    failed(k, "%%compute torch num_gpus=2 num_cpus=0\n1", "ResourcesUnavailableError", "1 of the pool's 2 GPUs is fully free")


def test_sandbox_gpu_memory_is_seen_then_released(gpu_kernel):
    """A sandbox 'allocates' 6 GiB on gpu/0 (the fake NVML reports its pid); the notebook's
    experiment sees the peak, and nothing stays consumed once the sandbox is gone."""
    k = gpu_kernel
    ok(k, "%context --restart default num_cpus=0")
    ok(k, "%experiment start gpu-sandbox")
    script = str(k.script)
    out = stdout_of(ok(k, "%%compute default num_gpus=1 num_cpus=0\n"
                          f"{{ use std::io::Write; let mut f = std::fs::OpenOptions::new().append(true).open({json.dumps(script)}).unwrap();\n"
                          f"writeln!(f, \"proc 1 {{}} {6 * GIB}\", std::process::id()).unwrap(); }}\n"
                          "std::thread::sleep(std::time::Duration::from_millis(300));"))
    assert "held default: gpu/0" in out, out
    msgs = ok(k, "%experiment finish")
    finish = [d[DATA_MIME] for d in displays(msgs) if d.get(DATA_MIME, {}).get("event") == "finish"][0]
    gpu0 = next(d for d in finish["devices"] if d["device"] == "gpu/0")
    assert gpu0["consumed"] == 0 and gpu0["peaked"] >= 6 * GIB, gpu0
