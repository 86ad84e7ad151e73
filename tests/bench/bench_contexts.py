"""Sandboxed compute, measured: the round trip of `Compute::run` (fork, apply the context, run,
return 1 MB) against calling the closure directly, a `%%compute` cell against a plain cell, and
DRYML's own `compute_context` (PyPI `dryml`) doing the same jobs on this machine, as ratios.

Usage: .venv/bin/python tests/bench/bench_contexts.py [--calls 50] [--cells 10]
Installs dryml==0.2.2 into the venv if it is missing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kernelspec import private_kernelspec, run

ROOT = Path(__file__).resolve().parent.parent.parent

DRYML_SCRIPT = r"""
import json, sys, time
import dryml
from dryml.context import compute_context

calls = int(sys.argv[1])

def trivial():
    return sum(range(1000))

def megabyte():
    return bytes(1 << 20)

def timed(f, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return out

results = {}
for name, f in [("trivial", trivial), ("1mb", megabyte)]:
    wrapped = compute_context(ctx_context_reqs={"default": {}}, ctx_use_existing_context=False)(f)
    assert f() == wrapped()
    results[name] = {"direct": timed(f, calls), "sandbox": timed(wrapped, calls)}
print(json.dumps(results))
"""

RUST_CELL = r"""
{
use std::time::Instant;
let reqs = dryml::compute::context::Requests::parse("default").unwrap();
let calls = CALLS;
let megabyte = || vec![7u8; 1 << 20];
let trivial = || (0..1000u64).sum::<u64>();
let mut out = std::collections::BTreeMap::new();
for (name, job) in [("trivial", 0), ("1mb", 1)] {
    let (mut direct, mut sandbox) = (Vec::new(), Vec::new());
    for _ in 0..calls {
        let t0 = Instant::now();
        if job == 0 { std::hint::black_box(trivial()); } else { std::hint::black_box(megabyte()); }
        direct.push(t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        if job == 0 {
            assert_eq!(dryml::Compute::new(&reqs).run(trivial).unwrap(), 499500);
        } else {
            assert_eq!(dryml::Compute::new(&reqs).run(megabyte).unwrap().len(), 1 << 20);
        }
        sandbox.push(t0.elapsed().as_secs_f64());
    }
    out.insert(name, (direct, sandbox));
}
let json: Vec<String> = out.iter().map(|(k, (d, s))| format!("\"{k}\": {{\"direct\": {:?}, \"sandbox\": {:?}}}", d, s)).collect();
println!("BENCH {{{}}}", json.join(", "));
}
"""


def ensure_dryml():
    try:
        import dryml  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "dryml==0.2.2"], check=True)


def med(xs):
    return statistics.median(xs)


def ms(x):
    return f"{x * 1000:9.3f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--cells", type=int, default=10)
    args = ap.parse_args()
    ensure_dryml()
    from jupyter_client.manager import start_new_kernel

    # DRYML's compute_context, in its own Python process as a user would run it.
    proc = subprocess.run([sys.executable, "-c", DRYML_SCRIPT, str(max(5, args.calls // 5))],
                          capture_output=True, text=True, check=True)
    py = json.loads(proc.stdout.strip().splitlines()[-1])

    with private_kernelspec():
        return measure(args, py, start_new_kernel)


def measure(args, py, start_new_kernel):
    """The Rust side, on this build's private kernelspec, printed beside DRYML's figures `py`."""
    km, kc = start_new_kernel(kernel_name="dryml-rust", startup_timeout=300,
                              env={**os.environ, "DRYML_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"})
    try:
        run(kc, "dryml::compute::context::current().is_none()")  # builds the dryml crate once
        _, out = run(kc, RUST_CELL.replace("CALLS", str(args.calls)))
        rs = json.loads(out.split("BENCH ", 1)[1])
        # A %%compute cell against a plain cell: each compiles and runs; both warm up first.
        plain_code, compute_code = "let x = (0..1000u64).sum::<u64>(); x", "%%compute\n(0..1000u64).sum::<u64>()"
        run(kc, plain_code)
        run(kc, compute_code)
        plain, compute = [], []
        for _ in range(args.cells):
            plain.append(run(kc, plain_code)[0])
            compute.append(run(kc, compute_code)[0])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)

    print(f"Sandboxed compute, median of {args.calls} calls (Rust) and {max(5, args.calls // 5)} calls (DRYML 0.2.2, Python)")
    print(f"{'job':<10}{'Compute::run':>18}{'closure directly':>20}{'DRYML compute_context':>24}{'DRYML / ours':>14}")
    for job in ("trivial", "1mb"):
        ours = med(rs[job]["sandbox"])
        direct = med(rs[job]["direct"])
        theirs = med(py[job]["sandbox"])
        print(f"{job:<10}{ms(ours):>18}{ms(direct):>20}{ms(theirs):>24}{theirs / ours:>13.1f}x")
    print(f"round-trip overhead of Compute::run returning 1 MB: {ms(med(rs['1mb']['sandbox']) - med(rs['1mb']['direct'])).strip()}")
    print(f"\nCells through Jupyter, median of {args.cells}: plain {ms(med(plain)).strip()}, "
          f"%%compute {ms(med(compute)).strip()}, ratio {med(compute) / med(plain):.2f}x "
          f"(+{ms(med(compute) - med(plain)).strip()})")


if __name__ == "__main__":
    main()
