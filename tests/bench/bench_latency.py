"""Cell round-trip latency from a real jupyter_client: 20 small cells, median and first cell.

Runs DRYML Rust, and evcxr_jupyter side by side when its kernelspec ("rust") is installed,
and prints the ratio. `--baseline BIN` runs another build of dryml-kernel beside this one (an
earlier commit's, say), so a change can be judged in the same run.
Usage: .venv/bin/python tests/bench/bench_latency.py [--cells 20] [--idle S] [--baseline BIN]
"""
import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel

from kernelspec import private_kernelspec

ROOT = Path(__file__).resolve().parent.parent.parent


def cells(n):
    out = []
    for i in range(n // 2):
        out.append(f"let x{i} = vec![{i}u64; 1000];")
        out.append(f"x{i}.iter().sum::<u64>()")
    return out


def start(kernel_name, setup=()):
    t0 = time.perf_counter()
    km, kc = start_new_kernel(kernel_name=kernel_name, startup_timeout=300)
    started = time.perf_counter() - t0
    for code in setup:
        kc.execute_interactive(code, timeout=300)
    return km, kc, started


def timed(kc, code, label):
    t = time.perf_counter()
    reply = kc.execute_interactive(code, timeout=300, output_hook=lambda m: None)
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"{label}: {code!r} failed: {reply['content']}")
    return time.perf_counter() - t


def run_all(rows, n, idle=0.0):
    """Starts every kernel, waits `idle` seconds (the user typing), then runs cell i on each kernel
    in turn, so machine noise hits all alike."""
    live = {label: start(name, setup) for label, name, setup in rows}
    time.sleep(idle)
    times = {label: [] for label in live}
    try:
        for code in cells(n):
            for label, (_, kc, _) in live.items():
                times[label].append(timed(kc, code, label))
    finally:
        for km, kc, _ in live.values():
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return {label: {"start": live[label][2], "first": t[0], "median": statistics.median(t[1:]),
                    "p90": sorted(t)[int(0.9 * len(t)) - 1]} for label, t in times.items()}


def install_baseline(binary, prefix):
    """The kernelspec `dryml-rust-baseline`: the one `binary` installs (so its cells link its own
    checkout's runtime), under another name."""
    own = Path(tempfile.mkdtemp(prefix="dryml-baseline-"))
    subprocess.run([str(binary), "install", "--prefix", str(own)], check=True, stdout=subprocess.DEVNULL)
    spec = prefix / "share" / "jupyter" / "kernels" / "dryml-rust-baseline"
    shutil.copytree(own / "share" / "jupyter" / "kernels" / "dryml-rust", spec)
    shutil.rmtree(own, ignore_errors=True)
    data = json.loads((spec / "kernel.json").read_text())
    data["display_name"] += " (baseline)"
    (spec / "kernel.json").write_text(json.dumps(data, indent=1))


def measure(args, jdir):
    """Runs the kernels on the prefix `jdir`: this build, the baseline, evcxr_jupyter if installed."""
    rows = [("dryml-rust", "dryml-rust", ())]
    if args.baseline:
        install_baseline(args.baseline, jdir)
        row = ("dryml-rust baseline", "dryml-rust-baseline", ())
        rows.insert(0, row) if args.baseline_first else rows.append(row)
    specs = KernelSpecManager().find_kernel_specs()
    if "rust" in specs:
        rows.append(("evcxr_jupyter", "rust", ()))
        rows.append(("evcxr_jupyter :opt 0", "rust", (":opt 0",)))
    else:
        print("evcxr_jupyter not installed (no 'rust' kernelspec): measuring dryml-rust alone")
    return run_all(rows, args.cells, args.idle)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=20)
    ap.add_argument("--idle", type=float, default=0.0,
                    help="seconds between starting the kernels and the first cell (the user typing)")
    ap.add_argument("--baseline", type=Path, help="another dryml-kernel binary to run beside this build")
    ap.add_argument("--baseline-first", action="store_true",
                    help="start the baseline first and give it each cell first (the first cell of the "
                         "kernel started first competes with the other's start-up)")
    args = ap.parse_args()
    with private_kernelspec() as jdir:
        results = measure(args, jdir)
    print(f"\n{'kernel':<22}{'start s':>9}{'first s':>9}{'median s':>10}{'p90 s':>8}")
    for label, r in results.items():
        print(f"{label:<22}{r['start']:>9.2f}{r['first']:>9.2f}{r['median']:>10.3f}{r['p90']:>8.3f}")
    if "dryml-rust baseline" in results:
        base, old = results["dryml-rust"], results["dryml-rust baseline"]
        print(f"ratio dryml-rust / baseline: median {base['median'] / old['median']:.2f}, "
              f"first cell {base['first'] / old['first']:.2f}, start {base['start'] / old['start']:.2f}")
    if "evcxr_jupyter" in results:
        base = results["dryml-rust"]
        for label in ("evcxr_jupyter", "evcxr_jupyter :opt 0"):
            other = results[label]
            print(f"ratio dryml-rust / {label}: median {base['median'] / other['median']:.2f}, "
                  f"first cell {base['first'] / other['first']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
