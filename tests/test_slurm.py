"""dryml::slurm and `%%compute --on slurm` against a real single-node Slurm cluster
(tests/slurm/cluster.sh: Debian's slurm-wlm and munge, two stand-in GPUs split into eight shards):
requests become sbatch options; cells (their compiled library) go as jobs, followed, cancelled, and
ending in Slurm's own states mapped to the sandbox's errors; detached jobs are picked up by a new
kernel from their directories."""
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, TRACKED, displays, of_type, ok, running_kernel, stderr_of, stdout_of, value

CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the Slurm tests start slurmctld, slurmd and munged, which needs root")
    d = tmp_path_factory.mktemp("slurm")
    out = subprocess.run(["bash", str(CLUSTER), "start", str(d)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    conf = out.stdout.strip().splitlines()[-1].split("=", 1)[1]
    yield d, conf
    subprocess.run(["bash", str(CLUSTER), "stop", str(d)], check=False)


def kernel_env(cluster):
    d, conf = cluster
    return {"SLURM_CONF": conf, "DRYML_SLURM_DIR": str(d / "jobs"), "JPY_SESSION_NAME": "work/slurm tests.ipynb"}


@pytest.fixture(scope="module")
def kernel(cluster):
    d, conf = cluster
    with running_kernel(kernel_env(cluster)) as k:
        k.jobs = d
        k.conf = conf
        ok(k, """use dryml::__kernel::slurm::{self, JobOptions, JobState};
use dryml::compute::context::Requests;
fn wait_final(id: u64, secs: u64) -> slurm::Job {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let j = slurm::job(id).unwrap().expect("the controller knows the job");
        if j.state.is_final() || std::time::Instant::now() > until { return j; }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
fn script(path: &str, body: &str) -> std::path::PathBuf {
    std::fs::write(path, format!("#!/bin/bash\\n{body}\\n")).unwrap();
    std::path::PathBuf::from(path)
}""")
        yield k


def test_a_compute_cell_timed_out_by_slurm_is_submitted_first(kernel):
    # Slurm's shortest limit is a minute and it checks every 30 s: submitted first (detached),
    # checked last. It holds one of the machine's two CPUs meanwhile; the other tests ask for one.
    reply, msgs = kernel.execute("%%compute --on slurm --detach --timeout 1\nstd::thread::sleep(std::time::Duration::from_secs(300));", timeout=300)
    assert reply["status"] == "ok", reply
    kernel.timeout_job = int(re.search(r"submitted Slurm job (\d+)", stdout_of(msgs)).group(1))
    result = of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]
    assert f"%jobs wait {kernel.timeout_job}" in result, result
    script = (job_dir(kernel, kernel.timeout_job) / "job.sh").read_text()
    assert "#SBATCH --time=0-00:00:01\n" in script, script


def job_dir(kernel, job_id):
    for d in (kernel.jobs / "jobs").glob("*/*"):
        if (d / "slurm_id").exists() and (d / "slurm_id").read_text().strip() == str(job_id):
            return d
    raise AssertionError(f"no directory records job {job_id}")


def submitted(msgs):
    return int(re.search(r"submitted Slurm job (\d+)", stdout_of(msgs)).group(1))


def squeue_ids(kernel):
    # Every state, so a job that already ended still counts; the controller keeps ended jobs for MinJobAge (300 s).
    out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i"], capture_output=True, text=True, env={**os.environ, "SLURM_CONF": kernel.conf})
    return set(out.stdout.split())


def failed(kernel, code, timeout=300):
    reply, msgs = kernel.execute(code, timeout=timeout)
    assert reply["status"] == "error", (code, stdout_of(msgs))
    return reply, msgs


def test_a_job_runs_and_completes(kernel):
    got = value(kernel, f"""let id = slurm::submit(&script("{kernel.jobs}/ok.sh", "echo on $(hostname -s) with $SLURM_CPUS_PER_TASK cpus"),
    &["--output={kernel.jobs}/ok.out".into(), "--cpus-per-task=1".into()]).unwrap();
let j = wait_final(id, 60);
(j.state, j.exit_code, std::fs::read_to_string("{kernel.jobs}/ok.out").unwrap().trim().to_string())""")
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    assert got == f'(Completed, Some((0, 0)), "on {host} with 1 cpus")', got


def test_a_failing_job_reports_its_exit_code(kernel):
    got = value(kernel, f"""let j = wait_final(slurm::submit(&script("{kernel.jobs}/bad.sh", "exit 3"), &["--output=/dev/null".into()]).unwrap(), 60);
(j.state, j.reason, j.exit_code)""")
    assert got == '(Failed, "NonZeroExitCode", Some((3, 0)))', got


def test_gpu_shares_schedule_as_shards(kernel):
    got = value(kernel, f"""let opts = slurm::sbatch_options(&Requests::parse("torch gpu/0=0.5 tf gpu/1=0.25").unwrap(), &JobOptions::default()).unwrap();
let j = wait_final(slurm::submit(&script("{kernel.jobs}/g.sh", "true"), &[opts.clone(), vec!["--output=/dev/null".into()]].concat()).unwrap(), 60);
(opts, j.state)""")
    assert got == '(["--cpus-per-task=1", "--gres=shard:3"], Completed)', got
    # Slurm refuses whole GPUs and shards in one job: that is an error before anything is submitted.
    err = value(kernel, 'slurm::sbatch_options(&Requests::parse("tf num_gpus=1 torch gpu/0=0.5").unwrap(), &JobOptions::default()).unwrap_err().to_string()')
    assert "cannot be asked for in one Slurm job" in err, err


def test_cancel_a_running_and_a_pending_job(kernel):
    got = value(kernel, f"""let all = slurm::sbatch_options(&Requests::parse("tf num_gpus=2").unwrap(), &JobOptions::default()).unwrap();
let running = slurm::submit(&script("{kernel.jobs}/r.sh", "sleep 300"), &[all.clone(), vec!["--output=/dev/null".into()]].concat()).unwrap();
// Both GPUs are taken, so this one waits for resources.
let pending = slurm::submit(&script("{kernel.jobs}/p.sh", "true"), &[all, vec!["--output=/dev/null".into()]].concat()).unwrap();
while slurm::job(running).unwrap().unwrap().state != JobState::Running {{ std::thread::sleep(std::time::Duration::from_millis(100)); }}
// A job's reason is "None" until the scheduler's next pass has looked at it.
let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
let mut waiting = slurm::job(pending).unwrap().unwrap();
while waiting.reason == "None" && std::time::Instant::now() < until {{
    std::thread::sleep(std::time::Duration::from_millis(100));
    waiting = slurm::job(pending).unwrap().unwrap();
}}
slurm::cancel(pending).unwrap();
slurm::cancel(running).unwrap();
(waiting.state, waiting.reason, wait_final(pending, 30).state, wait_final(running, 30).state)""")
    # Waiting for the GPUs, or behind another job that waits for them (Slurm says Priority then).
    assert got in ('(Pending, "Resources", Cancelled, Cancelled)', '(Pending, "Priority", Cancelled, Cancelled)'), got


def test_bad_requests_and_a_missing_scheduler_are_clear_errors(kernel):
    got = value(kernel, """let bad = slurm::sbatch_options(&Requests::parse("default num_cpus=-1").unwrap(), &JobOptions::default()).unwrap_err().to_string();
let unknown = slurm::job(999_999).unwrap();
let refused = slurm::submit(&script(&format!("{}/n.sh", std::env::temp_dir().display()), "true"), &["--partition=nope".into()]).unwrap_err().to_string();
(bad, unknown, refused)""")
    assert "num_cpus=-1 (all that are free) has no Slurm equivalent" in got, got
    assert ", None, " in got, "a job the controller never knew is None"
    assert "invalid partition" in got.lower(), got
    path = value(kernel, 'std::env::var("PATH").unwrap()').strip('"')
    try:
        missing = value(kernel, '%env PATH=/nonexistent\nslurm::submit(std::path::Path::new("/bin/true"), &[]).unwrap_err().to_string()')
    finally:
        ok(kernel, f"%env PATH={path}")
    assert "`sbatch` was not found on PATH" in missing and "SLURM_CONF" in missing, missing


def test_a_cell_runs_on_a_node_with_variables_in_and_updates_out(kernel):
    ok(kernel, """fn twice(x: f64) -> f64 { 2.0 * x }
struct Scale { by: f64 }
impl Scale { fn apply(&self, x: f64) -> f64 { self.by * x } }
let mut weights: Vec<f64> = vec![1.0, 2.0];
let steps = 3u32;
let names: std::collections::BTreeMap<String, u32> = [("a".to_string(), 1)].into_iter().collect();""")
    msgs = ok(kernel, """%%compute --on slurm --update weights
let s = Scale { by: 10.0 };
for i in 0..steps { weights.push(s.apply(twice(i as f64))); }
println!("on {} with {} cpus, names {:?}", std::env::var("SLURMD_NODENAME").unwrap(), std::env::var("SLURM_CPUS_PER_TASK").unwrap(), names);
weights.len()""")
    out = stdout_of(msgs)
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    assert f"on {host} with 1 cpus, names {{\"a\": 1}}" in out, out
    assert re.search(r"dryml: Slurm job \d+ on \S+: queued [\d.]+ s, ran [\d.]+ s", out), out
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "5"
    assert value(kernel, "weights") == "[1.0, 2.0, 0.0, 20.0, 40.0]"
    # The state was shown in place: one display, then updates ending in COMPLETED.
    states = [d["text/plain"] for d in displays(msgs)] + [m["content"]["data"]["text/plain"] for m in of_type(msgs, "update_display_data")]
    assert states[-1].startswith(f"Slurm job {submitted(msgs)}: COMPLETED on {host}"), states
    d = job_dir(kernel, submitted(msgs))
    assert d.parent.name == "slurm_tests", "jobs are filed under the notebook's name"
    for f in ["job.sh", "program", "cell.so", "request.json", "inputs/weights.msgpack", "updates/weights.msgpack", "end.json", "result.json", "output.log"]:
        assert (d / f).exists(), f
    assert f"its directory is {d}" in out
    # The cell's own library goes, as a closure's from code does: nothing is built for the job.
    assert not (d / "crate").exists() and "job-lib" in (d / "program").read_text()
    assert "dryml: building" not in out, out
    req = json.loads((d / "request.json").read_text())
    assert req["library"] == "cell.so" and req["entry"] > 0 and req["body_line"] > 0, req
    assert "options" not in req, "the cell's options are merged into its sbatch arguments"
    assert sorted(v["name"] for v in req["inputs"]) == ["names", "steps", "weights"], req["inputs"]
    assert req["updates"] == [{"name": "weights", "type": "Vec<f64>"}]
    # The batch script runs the cell again by itself.
    end = json.loads((d / "end.json").read_text())
    assert end["exit_code"] == 0 and end["node"] == host, end


def test_output_streams_while_the_job_runs(kernel):
    reply, msgs = kernel.execute("""%%compute --on slurm
for i in 0..6 { println!("tick {i}"); std::thread::sleep(std::time::Duration::from_millis(500)); }""", timeout=300)
    assert reply["status"] == "ok", reply
    ticks = [(t, m["content"]["text"]) for t, m in msgs if m["msg_type"] == "stream" and "tick" in m["content"]["text"]]
    end = max(t for t, _ in msgs)
    assert ticks and "tick 0" in ticks[0][1], ticks
    assert end - ticks[0][0] > 1.5, f"tick 0 came {end - ticks[0][0]:.2f} s before the end: not streamed"
    running = [m["content"]["data"]["text/plain"] for _, m in msgs if m["msg_type"] == "update_display_data" and "RUNNING on" in m["content"]["data"]["text/plain"]]
    assert running, "the state display showed the job running"


def test_end_states_map_to_the_sandbox_errors(kernel):
    reply, msgs = failed(kernel, """%%compute --on slurm
let v: Vec<u32> = vec![];
println!("before");
let x = v[3];""")
    assert reply["ename"] == "SandboxPanicked", reply
    assert "index out of bounds: the len is 0 but the index is 3 at cell line 4, column " in reply["evalue"], reply["evalue"]
    reply, _ = failed(kernel, """%%compute --on slurm
let n: u32 = "x1".parse()?;
n""")
    assert (reply["ename"], reply["evalue"].split(": ", 1)[1]) == ("SandboxFailed", "the cell returned an error: ParseIntError { kind: InvalidDigit }"), reply
    reply, _ = failed(kernel, "%%compute --on slurm\nstd::process::exit(4);")
    assert reply["ename"] == "SandboxExited" and "exited with code 4" in reply["evalue"], reply
    # Slurm's own memory enforcement (jobacct_gather here; cgroups elsewhere end OUT_OF_MEMORY).
    reply, msgs = failed(kernel, """%%compute --on slurm --mem-limit 64M
let mut big = vec![0u8; 400 << 20];
for i in (0..big.len()).step_by(4096) { big[i] = 1; }
std::thread::sleep(std::time::Duration::from_secs(10));
big.len()""")
    assert reply["ename"] == "SandboxOutOfMemory", reply
    assert "going over its memory limit of 64.0 MiB (--mem)" in reply["evalue"], reply
    assert "#SBATCH --mem=64M" in (job_dir(kernel, submitted(msgs)) / "job.sh").read_text()
    assert value(kernel, "weights.len()") == "5", "variables survive failed jobs"


def test_a_job_never_runs_the_notebooks_destructors(kernel, tmp_path):
    # The node's copies of `held` and `upd` (read back from their bytes) are the notebook's
    # values: a job that panics, fails or finishes drops none of them. The request names no
    # framework: `default`'s.
    log = tmp_path / "drops"
    ok(kernel, TRACKED, timeout=600)
    ok(kernel, f'let held = Tracked("{log}".into(), 0);\nlet mut upd = Tracked("{log}".into(), 0);')
    touch = "let _ = &held;\nupd.1 += 1;\n"
    reply, _ = failed(kernel, f"%%compute --on slurm num_cpus=1 --update upd\n{touch}panic!(\"on the node\");", timeout=600)
    assert reply["ename"] == "SandboxPanicked" and "on the node at cell line 4" in reply["evalue"], reply
    reply, _ = failed(kernel, f"%%compute --on slurm --update upd\n{touch}let n: u32 = \"x\".parse()?;\nn")
    assert reply["ename"] == "SandboxFailed", reply
    assert not log.exists(), log.read_text()
    msgs = ok(kernel, f"%%compute --on slurm num_cpus=1 --update upd\n{touch}upd.1")
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "1"
    # Only the notebook dropped something: the value `upd` had before the update.
    notebook = value(kernel, "std::process::id()")
    assert log.read_text() == f"{notebook} 0\n", log.read_text()


def test_a_cancelled_job_is_named(kernel):
    msgs = ok(kernel, "%%compute --on slurm --detach\nstd::thread::sleep(std::time::Duration::from_secs(120));")
    job = submitted(msgs)
    ok(kernel, f"%jobs cancel {job}")
    reply, _ = failed(kernel, f"%jobs wait {job}")
    assert reply["ename"] == "SlurmJobCancelled", reply


def test_interrupt_cancels_a_running_and_a_pending_job(kernel):
    env = {**os.environ, "SLURM_CONF": kernel.conf}
    for pending in (False, True):
        blocker = None
        if pending:
            blocker = subprocess.run(["sbatch", "--parsable", "--gres=gpu:2", "--output=/dev/null", "--wrap", "sleep 300"],
                                     capture_output=True, text=True, env=env, check=True).stdout.strip()
        msg_id = kernel.send("execute", "%%compute --on slurm tf num_gpus=1\nprintln!(\"started\"); std::thread::sleep(std::time::Duration::from_secs(300));")
        # Pending for the GPUs (Resources), or behind another job that waits for them (Priority).
        want = "PENDING (" if pending else "RUNNING on"
        deadline = time.time() + 120
        while not any(want in (m["content"]["data"].get("text/plain", "")) for _, m in kernel.iopub.get(msg_id, [])
                      if m["msg_type"] in ("display_data", "update_display_data")):
            assert time.time() < deadline, f"never saw {want}"
            kernel.progress(msg_id)
            time.sleep(0.1)
        t0 = time.time()
        kernel.interrupt()
        reply, msgs = kernel.collect(msg_id, timeout=60)
        took = time.time() - t0
        if blocker:
            subprocess.run(["scancel", blocker], env=env)
        assert reply["ename"] == "KeyboardInterrupt" and "cancelled it (scancel)" in reply["evalue"], reply
        assert took < 5, f"the interrupt took {took:.1f} s"
        job = submitted(msgs)
        deadline = time.time() + 30
        while True:
            state = re.search(r"JobState=(\S+)", subprocess.run(["scontrol", "show", "job", str(job)], capture_output=True, text=True, env=env).stdout).group(1)
            if state not in ("RUNNING", "COMPLETING", "PENDING") or time.time() > deadline:
                break
            time.sleep(0.2)
        assert state == "CANCELLED", (pending, state)
    assert value(kernel, "weights.len()") == "5", "variables survive an interrupt"


def test_bad_input_submits_nothing(kernel):
    before = squeue_ids(kernel)
    dirs = set((kernel.jobs / "jobs").glob("*/*"))
    ok(kernel, "let shared = std::rc::Rc::new(5u8);")
    reply, _ = failed(kernel, "%%compute --on slurm\nprintln!(\"{}\", shared);")
    assert reply["ename"] == "SerializationError", reply
    assert "`shared` (std::rc::Rc<u8>): its type is neither a DRYML object nor serde's Serialize and Deserialize" in reply["evalue"], reply
    assert "nothing was submitted" in reply["evalue"]
    reply, _ = failed(kernel, "%%compute --on slurm\n\nlet s: String = 5;")
    assert reply["ename"] == "CompilationError" and "mismatched types" in reply["evalue"], reply
    assert any("--> cell line 3, column 17" in t for t in reply["traceback"]), reply["traceback"]
    reply, _ = failed(kernel, "%%compute --on slurm --partition nope\n1")
    assert reply["ename"] == "SlurmError" and "invalid partition" in reply["evalue"].lower(), reply
    reply, _ = failed(kernel, "%%compute --on slurm tf num_gpus=1 torch gpu/0=0.5\n1")
    assert reply["ename"] == "SlurmError" and "cannot be asked for in one Slurm job" in reply["evalue"], reply
    reply, _ = failed(kernel, "%%compute --on mars\n1")
    assert reply["ename"] == "MagicError" and "--on takes `local` or `slurm`" in reply["evalue"], reply
    # A controller that does not answer (a wrong port) and no Slurm tools at all.
    bad = kernel.jobs / "bad.conf"
    bad.write_text(re.sub(r"SlurmctldPort=\d+", "SlurmctldPort=1", Path(kernel.conf).read_text()))
    try:
        ok(kernel, f"%env SLURM_CONF={bad}")
        reply, _ = failed(kernel, "%%compute --on slurm\n1")
    finally:
        ok(kernel, f"%env SLURM_CONF={kernel.conf}")
    assert reply["ename"] == "SlurmError" and "Unable to contact slurm controller" in reply["evalue"], reply
    path = value(kernel, 'std::env::var("PATH").unwrap()').strip('"')
    try:
        ok(kernel, "%env PATH=/nonexistent")
        reply, _ = failed(kernel, "%%compute --on slurm\n1")
    finally:
        ok(kernel, f"%env PATH={path}")
    assert "`sbatch` was not found on PATH" in reply["evalue"], reply
    # An earlier test's job may leave the queue meanwhile; what matters is that no id is new.
    assert not squeue_ids(kernel) - before, "nothing was submitted"
    assert set((kernel.jobs / "jobs").glob("*/*")) == dirs, "no directory is left for what was not submitted"
    assert value(kernel, "weights.len()") == "5"


def test_slurm_settings(kernel):
    msgs = ok(kernel, "%slurm partition=debug time=2h mem=256M sbatch='--nice=5'")
    text = displays(msgs)[0]["text/plain"]
    assert "the cluster answers: debug*" in text and "0-02:00:00" in text and "256.0 MiB" in text and "--nice=5" in text, text
    msgs = ok(kernel, "%%compute --on slurm --timeout 90\n2 + 2")
    script = (job_dir(kernel, submitted(msgs)) / "job.sh").read_text()
    for line in ["--partition=debug", "--time=0-00:01:30", "--mem=256M", "--nice=5"]:
        assert f"#SBATCH {line}\n" in script, (line, script)
    # The settings live in the notebook's process: a cell's own code submits with them too.
    got = value(kernel, "let s = dryml::__kernel::slurm::JobOptions::from_env(); (s.partition, s.time, s.mem, s.sbatch)")
    assert got == '(Some("debug"), Some(7200.0), Some(268435456), ["--nice=5"])', got
    ok(kernel, "%slurm partition= time= mem= sbatch=")
    text = displays(ok(kernel, "%slurm"))[0]["text/plain"]
    assert "(Slurm's default)" in text and "--nice" not in text, text


def test_a_detached_job_is_fetched_by_a_new_kernel(kernel, cluster):
    with running_kernel(kernel_env(cluster)) as first:
        ok(first, "let mut table: Vec<u64> = vec![1, 2, 3];")
        msgs = ok(first, "%%compute --on slurm --detach --update table\nfor x in table.iter_mut() { *x *= 10; }\nstd::thread::sleep(std::time::Duration::from_secs(2));\nprintln!(\"done\");\ntable.iter().sum::<u64>()")
        job = submitted(msgs)
    with running_kernel(kernel_env(cluster)) as second:
        listing = displays(ok(second, "%jobs"))[0]["text/plain"]
        assert re.search(rf"\b{job}\b", listing) and "table.iter_mut()" in listing, listing
        msgs = ok(second, f"%jobs result {job} as t")
        assert "done" in stdout_of(msgs), stdout_of(msgs)
        assert value(second, "t") == "[10, 20, 30]"
        msgs = ok(second, f"%jobs wait {job}")
        assert "60" in [d.get("text/plain") for d in displays(msgs)], displays(msgs)
        reply, _ = failed(second, "%jobs result 999999")
        assert reply["ename"] == "KeyError", reply
    listing = displays(ok(kernel, "%jobs"))[0]["text/plain"]
    assert "COMPLETED" in listing and "SandboxPanicked" in listing and "SlurmJobCancelled" in listing, listing


def test_the_timed_out_cell_ends_as_sandbox_timed_out(kernel):
    job = kernel.timeout_job
    reply, _ = failed(kernel, f"%jobs wait {job}", timeout=200)
    assert reply["ename"] == "SandboxTimedOut" and f"Slurm stopped job {job} at its time limit (0-00:00:01)" in reply["evalue"], reply
    got = value(kernel, f"let j = slurm::job({job}).unwrap().unwrap(); (j.state, j.reason)")
    assert got == '(Timeout, "TimeLimit")', got


def test_a_training_requeued_by_slurm_resumes_from_its_checkpoint(cluster, tmp_path):
    # A kernel of its own: its first cell names candle and linfa, so dryml is built with them
    # (the module's kernel built dryml without frameworks).
    d, conf = cluster
    ckpt = tmp_path / "model.dryml"
    with running_kernel(kernel_env(cluster)) as k:
        ok(k, "use dryml::models::candle::CandleClassifier;\nlet _ = dryml::models::linfa::iris();", timeout=1200)
        # Two milliseconds an element: about 0.2 s an epoch, 6 s for all 30. A checkpoint after
        # every epoch; a run that finds one resumes from it.
        msgs = ok(k, f"""%%compute --on slurm --detach
use dryml::models::{{Model, TrainSpec}};
let path = "{ckpt}";
let data = dryml::models::linfa::iris().shuffle(150, 1).take(100).map(|e| {{ std::thread::sleep(std::time::Duration::from_millis(2)); e }});
let resumed = std::path::Path::new(path).exists();
let mut obj: Box<dyn dryml::Object> = if resumed {{
    dryml::load_object(path).unwrap()
}} else {{
    Box::new(CandleClassifier::new(dryml::serde_json::json!({{
        "layers": [{{"linear": 16}}, "relu", {{"linear": 3}}],
        "training": {{"epochs": 30, "batch_size": 16, "seed": 4}}
    }})))
}};
let m = obj.downcast_mut::<CandleClassifier>().unwrap();
let from = m.train_spec().epoch;
m.checkpoint_to(path);
let mut spec = m.train_spec();
m.train(&data, &mut spec).unwrap();
// An uninterrupted training of the same definition, for its weights.
let mut twin = CandleClassifier::new(dryml::Object::definition(&*m).args.clone());
twin.train(&dryml::models::linfa::iris().shuffle(150, 1).take(100), &mut TrainSpec::epochs(0)).unwrap();
let bits = |p: dryml::models::optim::Named| p.into_iter().map(|(n, _, v)| (n, v.into_iter().map(f32::to_bits).collect::<Vec<_>>())).collect::<Vec<_>>();
let same = bits(m.parameters().unwrap()) == bits(twin.parameters().unwrap());
format!("resumed {{resumed}} from epoch {{from}}: {{}} epochs, {{}} steps, same weights {{same}}", spec.epoch, spec.step)""", timeout=600)
        job = submitted(msgs)
        deadline = time.time() + 120
        while not ckpt.exists():
            assert time.time() < deadline, "the job saved no checkpoint"
            time.sleep(0.1)
        time.sleep(1)
        # Slurm holds the requeued job until its old credential expires (the test cluster's
        # cred_expire, 10 s: tests/slurm/cluster.sh), then starts it at a scheduling pass.
        subprocess.run(["scontrol", "requeue", str(job)], env={**os.environ, "SLURM_CONF": conf}, check=True)
        shown = [x.get("text/plain", "") for x in displays(ok(k, f"%jobs wait {job}", timeout=600))]
        # 100 elements in batches of 16: 7 steps an epoch, 210 in all, and the very weights of a
        # training without the requeue (AdamW's moments travel in the checkpoint).
        assert any(re.fullmatch(r'"resumed true from epoch [1-9]\d*: 30 epochs, 210 steps, same weights true"', x) for x in shown), shown


def test_a_node_failure_is_named(kernel):
    # Last: taking the node down fails (or requeues) whatever else runs on it.
    # A node that goes down under a job that may not be requeued.
    msgs = ok(kernel, "%%compute --on slurm --detach --sbatch=--no-requeue\nprintln!(\"up\"); std::thread::sleep(std::time::Duration::from_secs(120));")
    job = submitted(msgs)
    env = {**os.environ, "SLURM_CONF": kernel.conf}
    node = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    deadline = time.time() + 60
    while "up" not in (job_dir(kernel, job) / "output.log").read_text(errors="replace") if (job_dir(kernel, job) / "output.log").exists() else True:
        assert time.time() < deadline, "the job did not start"
        time.sleep(0.2)
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=dryml-test"], env=env, check=True)
    try:
        reply, _ = failed(kernel, f"%jobs wait {job}")
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env=env)
        deadline = time.time() + 30
        while subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env).stdout.strip() not in ("idle", "mix", "alloc"):
            assert time.time() < deadline, "the node did not come back"
            time.sleep(0.5)
    assert reply["ename"] == "SlurmNodeFail" and f"because {node} failed" in reply["evalue"], reply


LINE = """:dep serde_json = "1"
use dryml::{Build, Meta, Object, ObjectDef, State, Repo, Selector};
use dryml::objects::ObjectError;
// A model whose weight lives "on the device" only between load_compute and save_compute.
#[derive(dryml::Object)]
struct Line { args: serde_json::Value, meta: Meta, w: f64, device: Option<f64>, loads: u32 }
impl Build for Line {
    type Args = serde_json::Value;
    fn build(args: serde_json::Value, meta: Meta) -> Self { Line { args, meta, w: 0.0, device: None, loads: 0 } }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> { s.put("w", &self.w)?; s.put("loads", &self.loads) }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> { self.w = s.get("w")?; self.loads = s.get("loads")?; Ok(()) }
    fn load_compute(&mut self) -> Result<(), ObjectError> { self.device = Some(self.w); self.loads += 1; Ok(()) }
    fn save_compute(&mut self) -> Result<(), ObjectError> { self.w = self.device.take().expect("loaded"); Ok(()) }
}
fn fit(m: &mut Line, steps: u32) -> f64 {
    let lr = m.args["lr"].as_f64().unwrap();
    let w = m.device.as_mut().expect("the sweep moved the model into compute");
    for _ in 0..steps { *w += lr * (3.0 - *w); }
    (3.0 - *w).abs()
}
let defs: Vec<ObjectDef> = (1..=8).map(|i| ObjectDef::new("Line", &serde_json::json!({"lr": 0.05 * i as f64})).unwrap()).collect();
let steps = 20u32;"""


def test_a_sweep_runs_as_a_job_array_with_results_in_the_repo(kernel):
    ok(kernel, LINE, timeout=600)
    repo = kernel.jobs / "sweep-repo"
    msgs = ok(kernel, f"%%sweep defs --repo {repo} --on slurm\n|m: &mut Line| fit(m, steps)", timeout=600)
    report = of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]
    assert "Sweep of 8 definitions: 8 trained, 0 failed" in report, report
    job = submitted(msgs)
    assert "#SBATCH --array=0-7\n" in (job_dir(kernel, job) / "job.sh").read_text()
    progress = [m["content"]["data"]["text/plain"] for m in of_type(msgs, "update_display_data")]
    assert progress[-1] == f"Sweep {job} (8 tasks on Slurm): 8/8 done, 0 running, 0 pending, 0 failed", progress
    # Every trained object is in the repo with its metrics; selectors compare them.
    got = value(kernel, f"""{{ let repo = Repo::open("{repo}").unwrap();
let good = repo.find(&Selector::of("Line").filter(|_, m| m.metrics.as_ref().and_then(|v| v.as_f64()).is_some_and(|x| x < 0.01))).len();
let best = repo.get(&Selector::of("Line")).unwrap().into_iter().map(|o| o.downcast::<Line>().ok().unwrap()).map(|l| (l.loads, l.w > 2.9)).collect::<std::collections::BTreeSet<_>>();
(repo.len(), good, best) }}""")
    assert got == "(8, 4, {(1, false), (1, true)})", got
    table = displays(ok(kernel, f"%repo open {repo}\n%repo get Line lr=0.4"))[-1]["text/plain"]
    assert "metrics" in table and "0.000" in table, table


def test_a_local_sweep_trains_in_sandboxes(kernel):
    repo = kernel.jobs / "local-repo"
    msgs = ok(kernel, f"%%sweep defs --repo {repo}\n|m: &mut Line| fit(m, steps)", timeout=600)
    report = of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]
    assert "Sweep of 8 definitions: 8 trained, 0 failed" in report, report
    assert "on this machine: 8/8 done" in [m["content"]["data"]["text/plain"] for m in of_type(msgs, "update_display_data")][-1]
    # The same from code: Compute::sweep.
    got = value(kernel, f"""let r = dryml::Compute::new(&dryml::compute::context::Requests::parse("default").unwrap()).sweep(&defs[..2], "{repo}", |m: &mut Line| fit(m, 1)).unwrap();
(r.done(), Repo::open("{repo}").unwrap().len())""")
    assert got == "(2, 10)", got


def test_an_object_moves_through_compute_with_its_hooks(kernel):
    ok(kernel, 'let mut model: Line = *defs[0].build().unwrap().downcast::<Line>().ok().unwrap();')
    for on in ("", " --on slurm"):
        msgs = ok(kernel, f"%%compute --update model{on}\nlet loss = fit(&mut model, 5);\n(model.loads, loss < 3.0)", timeout=600)
        shown = of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]
        assert shown.endswith(", true)"), shown
    # Each run moved it into compute once, there; the notebook's copy is back off the "device".
    got = value(kernel, "(model.loads, model.device.is_none(), model.w > 0.0)")
    assert got == "(2, true, true)", got
    # A detached job's object comes back through `%jobs result` too.
    job = submitted(ok(kernel, "%%compute --on slurm --detach --update model\nfit(&mut model, 5)", timeout=600))
    ok(kernel, f"%jobs result {job} as fetched")
    got = value(kernel, "(fetched.loads, fetched.device.is_none(), fetched.w > model.w)")
    assert got == "(3, true, true)", got
    got = value(kernel, "let before = model.w; let r = dryml::Compute::new(&dryml::compute::context::Requests::parse(\"default\").unwrap()).run_object(&mut model, |m| fit(m, 5)).unwrap(); (model.loads, model.device.is_none(), model.w > before, r < 3.0)")
    assert got == "(3, true, true, true)", got


def test_a_kernel_killed_mid_sweep_loses_nothing(kernel, cluster):
    from conftest import Kernel
    import signal
    repo = kernel.jobs / "killed-repo"
    first = Kernel(kernel_env(cluster))
    try:
        ok(first, LINE, timeout=600)
        msg_id = first.send("execute", f"%%sweep defs --repo {repo} --on slurm\n|m: &mut Line| {{ std::thread::sleep(std::time::Duration::from_secs(2)); fit(m, steps) }}")
        deadline = time.time() + 300
        sweep_dirs = []
        while True:
            assert time.time() < deadline, "no task finished"
            first.progress(msg_id)
            sweep_dirs = [d for d in (kernel.jobs / "jobs").glob("*/*") if (d / "defs.json").exists() and str(repo) in (d / "defs.json").read_text()]
            if sweep_dirs and list((sweep_dirs[0] / "tasks").glob("*.done.json")):
                break
            time.sleep(0.2)
        os.kill(first.km.provisioner.pid, signal.SIGKILL)
    finally:
        first.expected.clear()
        first.stop()
    d = sweep_dirs[0]
    job = int((d / "slurm_id").read_text())
    assert len(list((d / "tasks").glob("*.done.json"))) < 8, "killed before the sweep ended"
    with running_kernel(kernel_env(cluster)) as second:
        listing = displays(ok(second, "%jobs"))[0]["text/plain"]
        assert re.search(rf"{job}\s+sweep: \d/8 done", listing), listing
        ok(second, LINE, timeout=600)
        msgs = ok(second, f"%jobs wait {job}", timeout=600)
        report = [d.get("text/plain", "") for d in displays(msgs) if "Sweep of" in d.get("text/plain", "")]
        assert report and "8 trained, 0 failed" in report[0], displays(msgs)
        assert value(second, f'Repo::open("{repo}").unwrap().len()') == "8"


CODE_JOB = "dryml::Compute::new(&Requests::parse(\"default\").unwrap()).on(dryml::Slurm::new())"


def test_a_closure_from_code_runs_on_a_node(kernel):
    # The cell's library travels; the input goes in, the value comes back, the output streams.
    msgs = ok(kernel, """let data: Vec<f64> = (1..=100).map(f64::from).collect();
let (total, node) = dryml::Compute::new(&Requests::parse("default num_cpus=2").unwrap()).on(dryml::Slurm::new()).run(data, |d: Vec<f64>| {
    println!("summing {} with {} CPUs", d.len(), std::env::var("SLURM_CPUS_PER_TASK").unwrap_or_default());
    (d.iter().sum::<f64>(), std::env::var("SLURMD_NODENAME").unwrap_or_default())
}).unwrap();
(total, node.is_empty())""", timeout=600)
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "(5050.0, false)"
    assert "summing 100 with 2 CPUs" in stdout_of(msgs), stdout_of(msgs)
    d = job_dir(kernel, submitted(msgs))
    req = json.loads((d / "request.json").read_text())
    assert req["from"] == "code" and req["kind"] == "closure" and "--cpus-per-task=2" in req["sbatch"], req
    assert (d / "cell.so").is_file() and "job-lib" in (d / "program").read_text()
    assert json.loads((d / "end.json").read_text())["exit_code"] == 0


def test_code_jobs_detach_fail_and_refuse_clearly(kernel, cluster):
    before = len(list((kernel.jobs / "jobs").rglob("request.json")))
    # A closure that captures cannot travel: the compiler says so, and nothing is submitted.
    reply, _ = failed(kernel, f"let k = 3u8;\n{CODE_JOB}.run(1u8, move |x: u8| x + k).unwrap()")
    assert "the closure captures variables" in reply["evalue"] + "\n".join(reply["traceback"]), reply
    # A request Slurm has no word for is refused before anything is written.
    got = value(kernel, "dryml::Compute::new(&Requests::parse(\"default num_cpus=-1\").unwrap()).on(dryml::Slurm::new()).run(1u8, |x: u8| x).unwrap_err().to_string()")
    assert "SlurmError" in got and "num_cpus=-1" in got, got
    assert len(list((kernel.jobs / "jobs").rglob("request.json"))) == before
    # A panic on the node is the sandbox's panic, with its message.
    got = value(kernel, f"{CODE_JOB}.run(3u8, |x: u8| -> u8 {{ if x > 2 {{ panic!(\"too big: {{x}}\") }} x }}).unwrap_err().to_string()", timeout=600)
    assert got.startswith('"SandboxPanicked: Slurm job') and "too big: 3" in got, got
    # Detached, with a memory limit and sbatch options of its own; fetched by a new kernel.
    job = value(kernel, f"""let h = dryml::Compute::new(&Requests::parse("default").unwrap()).mem_limit(300 << 20).on(dryml::Slurm::new().sbatch("--nice=3")).submit(10u64, |n: u64| (1..=n).product::<u64>()).unwrap();
h.id()""")
    script = (job_dir(kernel, int(job)) / "job.sh").read_text()
    assert "#SBATCH --mem=300M\n" in script and "#SBATCH --nice=3\n" in script, script
    with running_kernel(kernel_env(cluster)) as second:
        assert value(second, f"dryml::SlurmJob::<u64>::attach({job}).unwrap().wait().unwrap()", timeout=600) == "3628800"
        listing = displays(ok(second, "%jobs"))[0]["text/plain"]
        assert re.search(rf"\b{job}\b.*COMPLETED.*fn\(u64\) -> u64", listing), listing
        reply, _ = failed(second, f"%jobs result {job} as v")
        assert "submitted from code" in reply["evalue"] and f"attach({job})" in reply["evalue"], reply
    assert value(kernel, "h.wait().unwrap()", timeout=600) == "3628800"


def test_a_sweep_from_code_runs_as_a_job_array(kernel):
    msgs = ok(kernel, ":vars")
    if "defs:" not in stdout_of(msgs) + "".join(m["content"]["data"].get("text/plain", "") for m in of_type(msgs, "execute_result")):
        ok(kernel, LINE, timeout=600)
    repo = kernel.jobs / "code-sweep-repo"
    got = value(kernel, f"""let r = {CODE_JOB}.sweep(&defs, "{repo}", |m: &mut Line| fit(m, 20)).unwrap();
(r.done(), r.failed(), r.job.is_some(), Repo::open("{repo}").unwrap().len())""", timeout=600)
    assert got == "(8, 0, true, 8)", got


def test_a_sweep_task_never_runs_the_notebooks_destructors(kernel, tmp_path):
    # A sweep task's closure borrows the notebook's `held` and panics on the node.
    log = tmp_path / "drops"
    ok(kernel, TRACKED, timeout=600)
    ok(kernel, f'let swept: Tracked = Tracked("{log}".into(), 0);\nlet one_def = defs[..1].to_vec();')
    repo = kernel.jobs / "drops-repo"
    msgs = ok(kernel, f'%%sweep one_def --repo {repo} --on slurm\n|m: &mut Line| -> f64 {{ let _ = &swept; panic!("task {{}}", m.w) }}', timeout=600)
    report = of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]
    assert "0 trained, 1 failed" in report and "panicked: task 0" in report, report
    assert not log.exists(), log.read_text()
