"""The widget progress bar, measured: what `dryml::widgets::progress` costs a loop per step, in a
real kernel (the cell's own clock around 2·10⁷ steps, the bar's messages going out to a real
client), against the same loop bare; and, as the anchor, tqdm's cost per step over a bare Python
loop (`tqdm(range(n), mininterval=0.1)`, tqdm's default redraw rate, the one ours uses).

Usage: .venv/bin/python tests/bench/bench_widgets.py [--steps 20000000] [--reps 5]
The goal (issue 38): the bar costs at most 1 µs a step, amortised.
"""
import argparse
import io
import statistics
import time

from jupyter_client.manager import start_new_kernel
from tqdm import tqdm

CELL = """{{
    let n: u64 = {steps};
    let t = std::time::Instant::now();
    let mut s = 0u64;
    for i in 0..n {{ s = s.wrapping_add(std::hint::black_box(i)); }}
    let plain = t.elapsed().as_nanos();
    let t = std::time::Instant::now();
    let mut b = 0u64;
    for i in dryml::widgets::progress(0..n) {{ b = b.wrapping_add(std::hint::black_box(i)); }}
    let bar = t.elapsed().as_nanos();
    assert_eq!(s, b);
    println!("BENCH {{}} {{}}", plain, bar);
}}"""


def rust(steps, reps):
    km, kc = start_new_kernel(kernel_name="dryml-rust", startup_timeout=300)
    try:
        runs, comm_msgs = [], []
        for _ in range(reps + 1):
            out, msgs = [], []

            def hook(m):
                msgs.append(m["msg_type"])
                if m["msg_type"] == "stream":
                    out.append(m["content"]["text"])
            reply = kc.execute_interactive(CELL.format(steps=steps), timeout=600, output_hook=hook)
            assert reply["content"]["status"] == "ok", reply["content"]
            line = next(x for x in "".join(out).splitlines() if x.startswith("BENCH "))
            plain_ns, bar_ns = map(int, line.split()[1:3])
            runs.append({"plain_ns": plain_ns, "bar_ns": bar_ns})
            comm_msgs.append(msgs.count("comm_msg"))
        runs, comm_msgs = runs[1:], comm_msgs[1:]  # the first run builds the cell
        per = lambda k: statistics.median(r[k] for r in runs) / steps
        return per("plain_ns"), per("bar_ns"), statistics.median(comm_msgs)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def python(steps, reps):
    plain, bar = [], []
    for _ in range(reps):
        t = time.perf_counter()
        s = 0
        for i in range(steps):
            s += i
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        b = 0
        for i in tqdm(range(steps), mininterval=0.1, file=io.StringIO()):
            b += i
        bar.append(time.perf_counter() - t)
    return statistics.median(plain) / steps * 1e9, statistics.median(bar) / steps * 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20_000_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    plain, bar, msgs = rust(args.steps, args.reps)
    py_plain, py_bar = python(args.steps // 10, args.reps)
    ours, theirs = bar - plain, py_bar - py_plain
    print(f"{args.steps:,} steps, median of {args.reps}, ns per step:")
    print(f"  Rust loop, bare                        {plain:8.2f}")
    print(f"  Rust loop, dryml::widgets::progress    {bar:8.2f}   the bar's cost {ours:6.2f} ns/step"
          f"   ({msgs:.0f} comm_msgs a run)")
    print(f"  Python loop, bare (anchor)             {py_plain:8.2f}")
    print(f"  Python loop, tqdm (anchor)             {py_bar:8.2f}   tqdm's cost   {theirs:6.2f} ns/step")
    print(f"  ratio, our bar's cost to tqdm's        {ours / theirs:8.2f}")
    print(f"goal: at most 1 µs a step: {'met' if ours <= 1000 else 'NOT met'} ({ours:.2f} ns)")


if __name__ == "__main__":
    main()
