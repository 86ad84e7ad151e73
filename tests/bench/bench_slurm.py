"""Slurm, measured on a real one-node cluster (tests/slurm/cluster.sh): a `%%compute --on slurm`
cell against the same cell run locally (`%%compute`, a plain cell) and the same work sent from
code (`Compute::on(Slurm).run`); both send the cell's compiled library. The Slurm cell's time is
split into Slurm's queue wait, the start, the body, the result's return and ours (the cell's
compile, writing the job, submitting, following). Then a 16-definition sweep as a job array
against the same definitions trained one after another in the notebook, and in local sandboxes.

Usage (as root, which the cluster needs): .venv/bin/python tests/bench/bench_slurm.py [--runs 5]
The kernel builds in a fresh, private build cache.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from kernelspec import private_kernelspec, run

ROOT = Path(__file__).resolve().parent.parent.parent

SETUP = """:dep serde_json = "1"
use dryml::{Build, Meta, Object, ObjectDef, State};
use dryml::objects::ObjectError;
#[derive(dryml::Object)]
struct Line { args: serde_json::Value, meta: Meta, w: f64 }
impl Build for Line {
    type Args = serde_json::Value;
    fn build(args: serde_json::Value, meta: Meta) -> Self { Line { args, meta, w: 0.0 } }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> { s.put("w", &self.w) }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> { self.w = s.get("w")?; Ok(()) }
}
// About two seconds of one core's work per definition.
fn fit(m: &mut Line) -> f64 {
    let lr = m.args["lr"].as_f64().unwrap();
    let t0 = std::time::Instant::now();
    while t0.elapsed().as_secs_f64() < 2.0 { for _ in 0..1000 { m.w += lr * (3.0 - m.w); } }
    (3.0 - m.w).abs()
}
let defs: Vec<ObjectDef> = (1..=16).map(|i| ObjectDef::new("Line", &serde_json::json!({"lr": 1e-6 * i as f64})).unwrap()).collect();
let mut w: Vec<f64> = vec![0.5; 1000];
let compute = dryml::Compute::new(&dryml::compute::context::Requests::parse("default").unwrap());"""

BODY = """let mut acc = 0u64;
for i in 0..2_000_000u64 {{ acc = acc.wrapping_add(i * i % 7); }}
for x in w.iter_mut() {{ *x += 1.0; }}
acc + {k}"""

# The same work from code: a closure of the cell, sent as the cell's library.
CODE = """let (w2, v) = compute.on(dryml::Slurm::new()).run(w.clone(), |mut w: Vec<f64>| {{
let mut acc = 0u64;
for i in 0..2_000_000u64 {{ acc = acc.wrapping_add(i * i % 7); }}
for x in w.iter_mut() {{ *x += 1.0; }}
(w, acc + {k})
}}).unwrap();
w = w2;
v"""


def num(pattern, text):
    m = re.search(pattern, text)
    if not m:
        raise RuntimeError(f"{pattern!r} not in {text!r}")
    return float(m.group(1))


def med(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the cluster's daemons need root")
    from jupyter_client.manager import start_new_kernel

    tmp = Path(tempfile.mkdtemp(prefix="dryml-bench-slurm-"))
    started = subprocess.run(["bash", str(ROOT / "tests/slurm/cluster.sh"), "start", str(tmp / "cluster")], capture_output=True, text=True)
    if started.returncode != 0:
        raise SystemExit(started.stdout + started.stderr)
    conf = started.stdout.strip().splitlines()[-1].split("=", 1)[1]
    env = {**os.environ, "SLURM_CONF": conf, "DRYML_SLURM_DIR": str(tmp / "jobs"), "DRYML_BUILD_CACHE": str(tmp / "cache")}
    try:
        with private_kernelspec():
            km, kc = start_new_kernel(kernel_name="dryml-rust", env=env)
            try:
                run(kc, SETUP)
                run(kc, "1")
                rows = {"plain": [], "local": [], "slurm": [], "code": []}
                splits, code_ours = [], []
                for r in range(args.runs):
                    # A different body each round: each cell compiles anew.
                    body = BODY.format(k=r)
                    rows["plain"].append(run(kc, body)[0])
                    rows["local"].append(run(kc, "%%compute --update w\n" + body)[0])
                    dt, out = run(kc, "%%compute --on slurm --update w\n" + body)
                    rows["slurm"].append(dt)
                    submit = num(r"submitted Slurm job \d+ in ([\d.]+) ms", out) / 1000
                    queued = num(r"queued ([\d.]+) s, ran", out)
                    ran = num(r"ran ([\d.]+) s \(body", out)
                    body_s = num(r"\(body ([\d.]+) s\)", out)
                    back = num(r"result back ([\d.]+) s after submission", out)
                    splits.append({
                        "wall": dt, "submit": submit, "queue wait": queued,
                        "start": max(ran - body_s, 0.0), "body": body_s,
                        "result return": max(back - queued - ran, 0.0),
                        "ours": dt - queued - body_s,
                    })
                    dt, out = run(kc, CODE.format(k=r))
                    rows["code"].append(dt)
                    code_ours.append(dt - num(r"queued ([\d.]+) s, ran", out) - num(r"\(body ([\d.]+) s\)", out))
                print(f"%%compute --on slurm against local, {args.runs} rounds, a 2M-step loop over a 1000-float --update variable")
                for k in ("plain", "local", "slurm", "code"):
                    print(f"  {k:6} cell: median {med(rows[k]):7.3f} s  (all: {', '.join(f'{x:.2f}' for x in rows[k])})")
                print(f"  code (Compute::on(Slurm).run): ours (wall - queue wait - body) median {med(code_ours):.3f} s, first {code_ours[0]:.3f} s")
                print("  split of the Slurm cell (ours = wall - queue wait - body; first round, and median of the later rounds):")
                for key in splits[0]:
                    later = [s[key] for s in splits[1:]] or [splits[0][key]]
                    print(f"    {key:18} first {splits[0][key]:7.3f} s   later median {med(later):7.3f} s")
                ours = med([s["ours"] for s in splits[1:]] or [splits[0]["ours"]])
                print(f"  ours over a local %%compute: {ours - med(rows['local']):+.3f} s; over a plain cell: {ours - med(rows['plain']):+.3f} s; over code: {ours - med(code_ours):+.3f} s")

                repo = tmp / "repo"
                dt_seq, _ = run(kc, f"""let mut repo_dir = std::path::PathBuf::from("{repo}-seq");
let mut seq = dryml::Repo::create(&repo_dir).unwrap();
for d in &defs {{ let mut m = d.build().unwrap(); fit(m.downcast_mut::<Line>().unwrap()); seq.add(&*m).unwrap(); }}""")
                dt_local, out_local = run(kc, f"%%sweep defs --repo {repo}-local\n|m: &mut Line| fit(m)")
                dt_slurm, _ = run(kc, f"%%sweep defs --repo {repo}-slurm --on slurm\n|m: &mut Line| fit(m)")
                # The anchor: Slurm alone running an array of the same shape (2 s of sleep per task).
                t0 = time.perf_counter()
                job = subprocess.run(["sbatch", "--parsable", "--array=0-15", "--output=/dev/null", "--wrap", "sleep 2"],
                                     capture_output=True, text=True, env=env, check=True).stdout.strip()
                while subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True, env=env).stdout.strip():
                    time.sleep(0.1)
                dt_bare = time.perf_counter() - t0
                print("16-definition sweep, about 2 s of one core's work each, on 2 cores:")
                print(f"  one after another in the notebook:     {dt_seq:7.2f} s")
                print(f"  local sandboxes (%%sweep):             {dt_local:7.2f} s   {dt_seq / dt_local:.2f}x faster")
                print(f"  Slurm job array (%%sweep --on slurm):  {dt_slurm:7.2f} s   {dt_seq / dt_slurm:.2f}x faster")
                print(f"  anchor, Slurm alone (sbatch --array of 16 `sleep 2`): {dt_bare:7.2f} s; the sweep's time over it {dt_slurm - dt_bare:+.2f} s")
            finally:
                kc.stop_channels()
                km.shutdown_kernel(now=True)
    finally:
        subprocess.run(["bash", str(ROOT / "tests/slurm/cluster.sh"), "stop", str(tmp / "cluster")], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
