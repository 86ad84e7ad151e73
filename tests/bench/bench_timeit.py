"""`%timeit` against criterion: one function of about 1 µs, timed in a real kernel by `%timeit -o`
and, in the same process and the same build of the function, by criterion 0.5 (its mean per
iteration, from its estimates file). Each round times both, alternating which goes first;
the figures are the medians of the rounds and their ratio. Also: what `%timeit` of that
function costs the user from the cell's request to its reply (the build is in it).

Usage: .venv/bin/python tests/bench/bench_timeit.py [--rounds 5]
The goal (issue 73): `%timeit` agrees with criterion within 10 %.
"""
import argparse
import json
import re
import statistics
import tempfile
import time

from jupyter_client.manager import start_new_kernel

# A chain of xorshift steps: nothing to vectorise or fold, about 1 µs for 700 steps here.
SETUP = """:dep criterion = { version = "0.5", default-features = false }
fn work(seed: u64, steps: u32) -> u64 {
    let mut x = seed;
    for _ in 0..steps { x ^= x << 13; x ^= x >> 7; x ^= x << 17; }
    x
}
let seed = 0x9E37_79B9_7F4A_7C15u64;
let steps = STEPS;
"""

CRITERION = """{{
    let mut c = criterion::Criterion::default().output_directory(std::path::Path::new("{dir}"))
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2)).without_plots();
    c.bench_function("work", |b| b.iter(|| work(std::hint::black_box(seed), std::hint::black_box(steps))));
}}"""

TIMEIT = "%timeit -o -p 6 work(seed, steps)"  # six digits: the printed figure is the mean
LINE = re.compile(r"^([\d.]+) (ns|µs|ms|s) ± ([\d.]+) (ns|µs|ms|s) per loop", re.M)
UNIT = {"ns": 1.0, "µs": 1e3, "ms": 1e6, "s": 1e9}


def run(kc, code, timeout=900):
    out = []

    def hook(m):
        if m["msg_type"] == "stream":
            out.append(m["content"]["text"])
    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
    assert reply["content"]["status"] == "ok", (code, reply["content"])
    return "".join(out)


def timeit_ns(kc):
    t = time.perf_counter()
    out = run(kc, TIMEIT)
    waited = time.perf_counter() - t
    m = LINE.search(out)
    assert m, out
    return float(m.group(1)) * UNIT[m.group(2)], waited


def criterion_ns(kc, dir):
    run(kc, CRITERION.format(dir=dir))
    with open(f"{dir}/work/new/estimates.json") as f:
        return json.load(f)["mean"]["point_estimate"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=700)
    args = ap.parse_args()
    km, kc = start_new_kernel(kernel_name="dryml-rust", startup_timeout=300)
    try:
        t = time.perf_counter()
        run(kc, SETUP.replace("STEPS", f"{args.steps}u32"))
        print(f"set-up (criterion built into the cell crate): {time.perf_counter() - t:.1f} s")
        dir = tempfile.mkdtemp(prefix="dryml-criterion-")
        criterion_ns(kc, dir)  # its cell built once
        ours, theirs, waits = [], [], []
        for r in range(args.rounds):
            pair = [("t", lambda: timeit_ns(kc)), ("c", lambda: criterion_ns(kc, dir))]
            for name, f in (pair if r % 2 == 0 else pair[::-1]):
                if name == "t":
                    ns, waited = f()
                    ours.append(ns)
                    waits.append(waited)
                else:
                    theirs.append(f())
            print(f"round {r + 1}: %timeit {ours[-1]:.1f} ns, criterion {theirs[-1]:.1f} ns")
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"%timeit (median of {args.rounds}): {a:.1f} ns per call")
        print(f"criterion (median of {args.rounds}): {b:.1f} ns per call")
        print(f"ratio %timeit / criterion: {a / b:.3f} (off by {abs(a / b - 1) * 100:.1f} %)")
        print(f"a %timeit cell, request to reply: {statistics.median(waits):.2f} s (median)")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
