"""What a user waits for right after a start: "Restart Kernel and Run All Cells" of evcxr_jupyter's
own tour, and one cell sent 0, 3, 6 or 12 s after the kernel started, against the same cell once
the kernel has settled. Runs DRYML Rust and, when its kernelspec ("rust") is installed,
evcxr_jupyter, one kernel at a time, alternating, with medians over `--reps` runs. `--baseline BIN`
runs another build of dryml-kernel (an earlier commit's, say) in the same rotation.

The tour is read from evcxr_jupyter's published crate in cargo's registry (`cargo install
evcxr_jupyter` or `cargo fetch` puts it there): its code cells that need no network and succeed
(the shell cell, the `:dep` cells, the ones that fail on purpose, `:vars` and `:help` left out).
Run All as JupyterLab does it: every cell is sent once the kernel answers kernel_info, each
after the previous one's reply.
With `--only delays` (and in the full run) it prints where our kernel's time went in those cells.
Usage: .venv/bin/python tests/bench/bench_start.py [--reps 3] [--delays 0,3,6,12] [--only tour|delays]
       [--baseline BIN]
"""
import argparse
import glob
import json
import os
import statistics
import time
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from kernelspec import install_baseline, private_kernelspec
from phases import CellTimes, print_phases

CELL = "let a = 1u64; a + 1"
SETTLED_CELL = "let b = 2u64; b + 1"


def tour_cells():
    found = sorted(glob.glob(os.path.expanduser("~/.cargo/registry/src/*/evcxr_jupyter-*/samples/evcxr_jupyter_tour.ipynb")))
    if not found:
        raise SystemExit("evcxr_jupyter's tour is not in cargo's registry: run `cargo fetch` in a crate "
                         "depending on evcxr_jupyter, or `cargo install evcxr_jupyter`")
    cells = []
    for c in json.loads(Path(found[-1]).read_text())["cells"]:
        src = "".join(c["source"]).strip()
        if c["cell_type"] != "code" or not src:
            continue
        # Network, shell, commands, and the cells that fail by design (the `?` on a Result
        # the tour does not import, a bad String argument, tokio without its `:dep`).
        if src.startswith(("!", ":")) or "tokio" in src or "stream" in src or 'format!("foo' in src:
            continue
        cells.append(src)
    return cells


class Kernel:
    """One kernel process, started when made; `ready` is the seconds until kernel_info answered."""

    def __init__(self, name, env=None):
        self.t0 = time.perf_counter()
        self.km = KernelManager(kernel_name=name)
        self.km.start_kernel(**({"env": env} if env else {}))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=300)
        self.ready = time.perf_counter() - self.t0

    def run(self, code, timeout=600):
        """Sends a cell, waits for its reply; returns when the reply came (perf_counter)."""
        reply = self.kc.execute_interactive(code, timeout=timeout, output_hook=lambda m: None)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"{code[:50]!r}: {reply['content'].get('ename')}: {reply['content'].get('evalue')}")
        return time.perf_counter()

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def run_all(name, cells):
    """Start to first reply and start to last reply of Run All on a fresh kernel."""
    k = Kernel(name)
    try:
        replies = [k.run(code) for code in cells]
        return {"ready": k.ready, "first": replies[0] - k.t0, "last": replies[-1] - k.t0}
    finally:
        k.close()


def delayed(name, delay, times):
    """One cell sent `delay` s after the start; then the settled cost of a like cell; and the
    phases of each as the kernel tells them (`times`, a `CellTimes`; none from evcxr_jupyter)."""
    k = Kernel(name)
    try:
        time.sleep(max(0.0, delay - (time.perf_counter() - k.t0)))
        sent = time.perf_counter()
        got = k.run(CELL)
        took, from_start, phases = got - sent, got - k.t0, times.last()
        time.sleep(15)
        sent = time.perf_counter()
        settled = k.run(SETTLED_CELL) - sent
        return {"cell": took, "from_start": from_start, "settled": settled, "phases": phases,
                "settled_phases": times.last()}
    finally:
        k.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--delays", default="0,3,6,12")
    ap.add_argument("--only", choices=["tour", "delays"])
    ap.add_argument("--baseline", type=Path, help="another dryml-kernel binary to run beside this build")
    args = ap.parse_args()
    with private_kernelspec() as jdir:
        kernels = [("dryml-rust", "dryml-rust")]
        if args.baseline:
            install_baseline(args.baseline, jdir)
            kernels.append(("baseline", "dryml-rust-baseline"))
        if "rust" in KernelSpecManager().find_kernel_specs():
            kernels.append(("evcxr_jupyter", "rust"))
        else:
            print("evcxr_jupyter not installed (no 'rust' kernelspec): dryml-rust alone")
        med = lambda xs: statistics.median(xs)
        if args.only != "delays":
            cells = tour_cells()
            print(f"Restart & Run All of evcxr_jupyter's tour ({len(cells)} cells), medians of {args.reps}:")
            got = {label: [] for label, _ in kernels}
            for _ in range(args.reps):
                for label, name in kernels:
                    got[label].append(run_all(name, cells))
            for label, runs in got.items():
                print(f"  {label:14} ready {med([r['ready'] for r in runs]):.2f} s, first reply "
                      f"{med([r['first'] for r in runs]):.2f} s, last reply {med([r['last'] for r in runs]):.2f} s  "
                      "(last: " + ", ".join(f"{r['last']:.2f}" for r in runs) + ")")
            ours = med([r["last"] for r in got["dryml-rust"]])
            for label, _ in kernels[1:]:
                print(f"  ratio dryml-rust / {label}, start to last reply: {ours / med([r['last'] for r in got[label]]):.2f}")
        if args.only != "tour":
            times, parts = CellTimes(), {}
            delays = [float(d) for d in args.delays.split(",")]
            print(f"`{CELL}` sent N s after the start, or once kernel_info is answered if later (then "
                  f"`{SETTLED_CELL}` 15 s later): its reply after it was sent, and after the start; medians of {args.reps}:")
            for d in delays:
                got = {label: [] for label, _ in kernels}
                for _ in range(args.reps):
                    for label, name in kernels:
                        got[label].append(delayed(name, d, times))
                line = []
                for label, runs in got.items():
                    line.append(f"{label} {med([r['cell'] for r in runs]):.2f} s, {med([r['from_start'] for r in runs]):.2f} s "
                                f"from the start (settled {med([r['settled'] for r in runs]):.2f} s)")
                ours = med([r["from_start"] for r in got["dryml-rust"]])
                ratio = "".join(f"  ratio from the start / {label} {ours / med([r['from_start'] for r in got[label]]):.2f}"
                                for label, _ in kernels[1:])
                print(f"  {d:>4.0f} s: " + ", ".join(line) + ratio)
                parts[f"dryml-rust, the cell sent {d:.0f} s after the start"] = [r["phases"] for r in got["dryml-rust"]]
                parts[f"dryml-rust, the settled cell ({d:.0f} s)"] = [r["settled_phases"] for r in got["dryml-rust"]]
            print_phases(parts)


if __name__ == "__main__":
    main()
