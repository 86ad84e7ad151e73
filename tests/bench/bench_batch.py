"""Adaptive batching, measured on TOMA's own benchmark shape: fill a (128, 256, 256) CPU tensor
with ones in chunks of 32. Ours (`runtime/examples/bench_batch.rs`): a plain tch loop against
`dryml::batch::{batch, range, chunked}`, as ratios to the plain loop. TOMA (PyPI `toma`, in the
venv next to torch 2.13): its own tests/test_benchmark.py variants, as ratios to its plain loop.
Each side interleaves its variants round by round, so drift hits all of them alike.

Usage: .venv/bin/python tests/bench/bench_batch.py [--rounds 500] [--toma-rounds 100]
Installs toma into the venv if it is missing.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

from kernelspec import torch_env

ROOT = Path(__file__).resolve().parent.parent.parent

TOMA_SCRIPT = r"""
import json, statistics, sys, time, warnings
warnings.simplefilter("ignore")
import torch
from toma import toma, explicit, simple, NoBatchsizeCache

rounds = int(sys.argv[1])

def func(tensor, start, end):
    tensor[:] = 1.0

def native(tensor):
    end, current, batch = tensor.shape[0], 0, 32
    while current < end:
        current_end = min(current + batch, end)
        func(tensor.narrow(0, current, current_end - current), current, current_end)
        current = current_end

@toma.chunked(initial_step=32)
def with_toma(tensor, start, end):
    tensor[:] = 1.0

@toma.chunked(initial_step=32, cache_type=NoBatchsizeCache)
def with_toma_no_cache(tensor, start, end):
    tensor[:] = 1.0

variants = {
    "native": native,
    "toma.chunked": with_toma,
    "toma.chunked (no cache)": with_toma_no_cache,
    "explicit.chunked": lambda t: explicit.chunked(func, t, 32),
    "simple.chunked": lambda t: simple.chunked(func, t, 32),
}
tensor = torch.zeros((128, 256, 256))
names = list(variants)
for _ in range(5):
    for f in variants.values():
        f(tensor)
times = {n: [] for n in names}
for r in range(rounds):
    for k in range(len(names)):
        n = names[(r + k) % len(names)]
        t0 = time.perf_counter()
        variants[n](tensor)
        times[n].append(time.perf_counter() - t0)
assert float(tensor.sum()) == 128 * 256 * 256
print(json.dumps({"rounds": rounds, "threads": torch.get_num_threads(), "torch": torch.__version__,
                  **{n: {"min": min(v), "median": statistics.median(v)} for n, v in times.items()}}))
"""


def ensure_toma():
    try:
        import toma  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "toma"], check=True)


def table(title, d, anchor):
    print(title)
    base = d[anchor]["median"]
    for name, v in d.items():
        if isinstance(v, dict) and "median" in v:
            print(f"  {name:<26} median {v['median'] * 1e3:8.3f} ms   min {v['min'] * 1e3:8.3f} ms   "
                  f"{v['median'] / base:6.3f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--toma-rounds", type=int, default=100)
    args = ap.parse_args()
    ensure_toma()
    env = torch_env()
    subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "dryml", "--features", "torch",
                    "--example", "bench_batch"], cwd=ROOT, env=env, check=True)
    exe = ROOT / "target" / "release" / "examples" / "bench_batch"
    ours = json.loads(subprocess.run([str(exe), str(args.rounds)], env=env, capture_output=True, text=True,
                                     check=True).stdout)
    theirs = json.loads(subprocess.run([sys.executable, "-c", TOMA_SCRIPT, str(args.toma_rounds)],
                                       capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
    table(f"dryml-rust, tch 0.26 (libtorch 2.13), {ours['threads']} threads, {ours['rounds']} interleaved rounds "
          "(ratio to the plain loop)", ours, "native")
    table(f"\nTOMA {theirs['torch'] and 'on torch ' + theirs['torch']}, {theirs['threads']} threads, "
          f"{theirs['rounds']} interleaved rounds (ratio to its plain loop)", theirs, "native")
    worst = max(v["median"] / ours["native"]["median"] for v in ours.values() if isinstance(v, dict) and "median" in v)
    print(f"\nOurs, worst variant: {(worst - 1) * 100:+.1f}% over the plain loop (goal: within 5%). "
          f"TOMA's toma.chunked: {theirs['toma.chunked']['median'] / theirs['native']['median']:.1f}x its plain loop.")
    e = ours["empty_ns"]
    print(f"Fixed cost per call, closure doing nothing: batch {e['batch']:.0f} ns, range (4 steps) {e['range']:.0f} ns "
          f"(a plain 4-step loop: {e['native']:.0f} ns).")
    print(f"Plain loops: tch {ours['native']['median'] * 1e3:.3f} ms, PyTorch {theirs['native']['median'] * 1e3:.3f} ms.")


if __name__ == "__main__":
    main()
