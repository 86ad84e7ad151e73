"""dryml::slurm against a real single-node Slurm cluster (tests/slurm/cluster.sh: Debian's
slurm-wlm and munge, two stand-in GPUs split into eight shards): requests become sbatch options,
jobs are submitted, watched through scontrol, cancelled, and end in Slurm's own states."""
import os
import subprocess

import pytest

from conftest import ROOT, ok, running_kernel, value

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


@pytest.fixture(scope="module")
def kernel(cluster):
    d, conf = cluster
    with running_kernel({"SLURM_CONF": conf}) as k:
        k.jobs = d
        ok(k, """use dryml::slurm::{self, JobState, Options};
use dryml::context::Requests;
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


def test_a_job_timed_out_by_slurm(kernel):
    # Slurm's shortest limit is a minute and it checks every 30 s: submitted first, checked last.
    # It holds one of the machine's two CPUs meanwhile; the other tests ask for one.
    args = "slurm::sbatch_options(&Requests::parse(\"default\").unwrap(), &Options { time: Some(std::time::Duration::from_secs(1)), ..Default::default() }).unwrap()"
    kernel.timeout_job = value(kernel, f"""let opts = {args};
let timeout_job = slurm::submit(&script("{kernel.jobs}/t.sh", "sleep 300"), &[opts.clone(), vec!["--output=/dev/null".into()]].concat()).unwrap();
(opts, timeout_job)""")
    assert '"--time=0-00:00:01"' in kernel.timeout_job


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
    got = value(kernel, f"""let opts = slurm::sbatch_options(&Requests::parse("torch gpu/0=0.5 tf gpu/1=0.25").unwrap(), &Options::default()).unwrap();
let j = wait_final(slurm::submit(&script("{kernel.jobs}/g.sh", "true"), &[opts.clone(), vec!["--output=/dev/null".into()]].concat()).unwrap(), 60);
(opts, j.state)""")
    assert got == '(["--cpus-per-task=1", "--gres=shard:3"], Completed)', got
    # Slurm refuses whole GPUs and shards in one job: that is an error before anything is submitted.
    err = value(kernel, 'slurm::sbatch_options(&Requests::parse("tf num_gpus=1 torch gpu/0=0.5").unwrap(), &Options::default()).unwrap_err().to_string()')
    assert "cannot be asked for in one Slurm job" in err, err


def test_cancel_a_running_and_a_pending_job(kernel):
    got = value(kernel, f"""let all = slurm::sbatch_options(&Requests::parse("tf num_gpus=2").unwrap(), &Options::default()).unwrap();
let running = slurm::submit(&script("{kernel.jobs}/r.sh", "sleep 300"), &[all.clone(), vec!["--output=/dev/null".into()]].concat()).unwrap();
// Both GPUs are taken, so this one waits for resources.
let pending = slurm::submit(&script("{kernel.jobs}/p.sh", "true"), &[all, vec!["--output=/dev/null".into()]].concat()).unwrap();
while slurm::job(running).unwrap().unwrap().state != JobState::Running {{ std::thread::sleep(std::time::Duration::from_millis(100)); }}
let waiting = slurm::job(pending).unwrap().unwrap();
slurm::cancel(pending).unwrap();
slurm::cancel(running).unwrap();
(waiting.state, waiting.reason, wait_final(pending, 30).state, wait_final(running, 30).state)""")
    assert got == '(Pending, "Resources", Cancelled, Cancelled)', got


def test_bad_requests_and_a_missing_scheduler_are_clear_errors(kernel):
    got = value(kernel, """let bad = slurm::sbatch_options(&Requests::parse("default num_cpus=-1").unwrap(), &Options::default()).unwrap_err().to_string();
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


def test_the_timed_out_job_ends_as_timeout(kernel):
    got = value(kernel, "let j = wait_final(timeout_job, 150); (j.state, j.reason)", timeout=200)
    assert got == '(Timeout, "TimeLimit")', got
