"""Cell round-trip latency from a real jupyter_client: 20 small cells, median and first cell.

Runs DRYML Rust, and evcxr_jupyter side by side when its kernelspec ("rust") is installed,
and prints the ratio. `--baseline BIN` runs another build of dryml-kernel beside this one (an
earlier commit's, say), so a change can be judged in the same run.
`--turnaround` measures what issue 13 asks instead: the first cell after 10 s idle, the first
cell naming `dryml` and `tch` after a start, after a restart and with a cold (cleared) build cache,
the first naming `candle_core` after a start (the cache warmed as `kernelspec/setup.sh` does),
a trivial cell at 0, 100 and 300 variables, and a hot loop (in a cell and through a function).
`--restarts N` measures what issue 61 asks: a start and N-1 restarts, each followed after 10 s by
the first cell, a trivial cell (against evcxr_jupyter's), the first naming `dryml` and `tch`, and
a trivial cell with tch in the notebook, with where our kernel's time went in each
(`DRYML_CELL_TIMES`: evcxr's commands, the types, cargo or rustc alone, the load and run).
`--tch` measures what a heavy crate in the notebook costs each cell (issue 24): a trivial cell
in a kernel with `tch` loaded against the same cell in one without, and a tensor cell against
evcxr_jupyter's with the same `:dep tch` (built in its own target directory first).
Usage: .venv/bin/python tests/bench/bench_latency.py [--cells 20] [--idle S] [--baseline BIN]
       .venv/bin/python tests/bench/bench_latency.py --turnaround
       .venv/bin/python tests/bench/bench_latency.py --tch [--rounds 9]
       .venv/bin/python tests/bench/bench_latency.py --restarts 6 [--starts 5]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel

from kernelspec import TCH_DEP, install_baseline, private_kernelspec, torch_env
from phases import CellTimes, print_phases

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


DRYML_CELL = "(!dryml::interrupted())"
TCH_CELL = "tch::Tensor::from(2.0f64).double_value(&[])"
CANDLE_CELL = "candle_core::Tensor::new(&[1.0f32, 2.0], &candle_core::Device::Cpu).unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap()"
HOT = "(0..200_000_000u64).fold(0u64, |a, x| a ^ x.wrapping_mul(2654435761))"
HOT_FN = "fn hot(n: u64) -> u64 { (0..n).fold(0u64, |a, x| a ^ x.wrapping_mul(2654435761)) }"


class Started:
    """A kernel started (and waited for) by jupyter_client; `ready` is the seconds that took."""

    def __init__(self, kernel_name, env=None):
        from jupyter_client.manager import KernelManager
        self.label = kernel_name
        t = time.perf_counter()
        self.km = KernelManager(kernel_name=kernel_name)
        self.km.start_kernel(**({"env": {**os.environ, **env}} if env else {}))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=300)
        self.ready = time.perf_counter() - t

    def t(self, code):
        return timed(self.kc, code, self.label)

    def restart(self):
        t = time.perf_counter()
        self.km.restart_kernel(now=True)
        self.kc.wait_for_ready(timeout=300)
        return time.perf_counter() - t

    def stop(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def turnaround(idle, reps=5):
    """Issue 13's table: {row: {kernel: seconds}}. Cells of both kernels interleave."""
    specs = KernelSpecManager().find_kernel_specs()
    rows = {}
    put = lambda row, label, secs: rows.setdefault(row, {}).__setitem__(label, secs)
    kernels = [Started("dryml-rust")] + ([Started("rust")] if "rust" in specs else [])
    ours = kernels[0]
    try:
        for k in kernels:
            put("kernel ready (kernel_info answered)", k.label, k.ready)
        time.sleep(idle)
        for k in kernels:
            put(f"first cell, {idle:.0f} s after the start", k.label, k.t("1 + 1"))
        put("first cell naming dryml, after a start (cache warm)", ours.label, ours.t(DRYML_CELL))
        put("first cell naming tch, after a start (cache warm)", ours.label, ours.t(TCH_CELL))
        # Before the variables: evcxr's per-variable code would otherwise dominate its timings.
        for k in kernels:
            put("hot loop in a cell (compile and run)", k.label, k.t(HOT))
        for k in kernels:
            k.t(HOT_FN)
            put("hot loop through a function defined earlier", k.label, k.t("hot(200_000_000)"))
        for k in kernels:
            k.t("let warm = 1u64;")
        have = 0
        for n in (0, 100, 300):
            for k in kernels:
                if n > have:
                    k.t("\n".join(f"let v{i} = vec![{i}u64; 10];" for i in range(have, n)))
            have = n
            times = {k.label: [] for k in kernels}
            for _ in range(reps):
                for k in kernels:
                    times[k.label].append(k.t("warm + 1"))
            for label, ts in times.items():
                put(f"trivial cell (`warm + 1`), {n} variables, median of {reps}", label, statistics.median(ts))
        ours.restart()
        time.sleep(idle)
        put("first cell naming dryml, after a restart (cache warm)", ours.label, ours.t(DRYML_CELL))
        put("first cell naming tch, after a restart (cache warm)", ours.label, ours.t(TCH_CELL))
    finally:
        for k in kernels:
            k.stop()
    # A notebook of its own: one that names tch too gets a build of dryml with both features.
    fresh = Started("dryml-rust")
    try:
        time.sleep(idle)
        put("first cell naming candle_core, after a start (cache warm)", fresh.label, fresh.t(CANDLE_CELL))
    finally:
        fresh.stop()
    cold_dir = tempfile.mkdtemp(prefix="dryml-cold-cache-")
    cold = Started("dryml-rust", {"DRYML_BUILD_CACHE": f"{cold_dir}/cache"})
    try:
        time.sleep(idle)
        put(f"first cell naming dryml, cache cleared (cold), {idle:.0f} s after the start", cold.label, cold.t(DRYML_CELL))
        put("first cell naming tch, cache cleared (cold)", cold.label, cold.t(TCH_CELL))
    finally:
        cold.stop()
        shutil.rmtree(cold_dir, ignore_errors=True)
    return rows, [k.label for k in kernels]


def restarts(reps, idle):
    """Issue 61's figures: a kernel started, then restarted `reps - 1` times; after each, `idle`
    seconds (the user reading), the first cell, a cell naming dryml, one naming tch, and trivial
    cells interleaved with evcxr_jupyter's (before and after tch). evcxr_jupyter's kernel runs
    only from our first cell to the last trivial one, so that the idle time and the first cell
    have the machine to themselves. {row: {label: [seconds]}}, and {row: [our kernel's phases,
    a dict a cell]}."""
    has_evcxr = "rust" in KernelSpecManager().find_kernel_specs()
    times = CellTimes()
    ours = Started("dryml-rust")
    evcxr = None
    got, parts = {}, {}

    def put(row, k, code):
        got.setdefault(row, {}).setdefault(k.label, []).append(k.t(code))
        if k is ours:
            parts.setdefault(row, []).append(times.last())

    try:
        for r in range(reps):
            when = "after a restart" if r else "after a start"
            if r:
                ours.restart()
            time.sleep(idle)
            put(f"first cell, {idle:.0f} s {when}", ours, "1 + 1")
            if has_evcxr:
                evcxr = Started("rust")
                evcxr.t("let warm = 1u64;")
            ours.t("let warm = 1u64;")
            for i in range(3):
                put("trivial cell (`warm + N`)", ours, f"warm + {i}")
                if evcxr:
                    put("trivial cell (`warm + N`)", evcxr, f"warm + {i}")
            put(f"first cell naming dryml, {when}", ours, DRYML_CELL)
            put(f"first cell naming tch, {when}", ours, TCH_CELL)
            for i in range(3):
                put("trivial cell (`warm + N`), tch in the notebook", ours, f"warm + {i + 3}")
                if evcxr:
                    put("trivial cell (`warm + N`), tch in the notebook", evcxr, f"warm + {i + 3}")
            if evcxr:
                evcxr.stop()
                evcxr = None
    finally:
        ours.stop()
        if evcxr:
            evcxr.stop()
        os.unlink(times.path)
    return got, parts


def print_restarts(got, parts):
    labels = ["dryml-rust"] + (["rust"] if any("rust" in by for by in got.values()) else [])
    names = {"dryml-rust": "dryml-rust", "rust": "evcxr_jupyter"}
    med = statistics.median
    print(f"\n{'what the user waits for (median, min-max, n)':<58}" + "".join(f"{names[l]:>26}" for l in labels))
    for row, by in got.items():
        cells = "".join(f"{med(by[l]):>9.3f} s ({min(by[l]):.2f}-{max(by[l]):.2f}, {len(by[l])})" if l in by
                        else f"{'-':>26}" for l in labels)
        ratio = f"   ratio {med(by['dryml-rust']) / med(by['rust']):.2f}" if "rust" in by else ""
        print(f"{row:<58}{cells}{ratio}")
    print_phases(parts)


TRIVIAL = "trivial cell (`3 + N`), after a work cell"
TRIVIAL_AGAIN = "trivial cell (`4 + N`), after a trivial cell"
WORK = "work cell (a tensor op; a Vec without tch)"


def heavy(rounds):
    """Per-cell cost with tch in the notebook: {row: {kernel: median seconds}}. Each round runs,
    in every kernel in turn, two trivial cells and then a cell that does some work (a tensor op
    where tch is loaded, the same arithmetic on a Vec where it is not), so every kernel's
    incremental state churns alike; literals change each round so no build is reused whole."""
    specs = KernelSpecManager().find_kernel_specs()
    plain, tch = Started("dryml-rust"), Started("dryml-rust")
    kernels = [plain, tch]
    tch.label = "dryml-rust + tch"
    if "rust" in specs:
        evcxr = Started("rust", torch_env())
        evcxr.label = "evcxr_jupyter + tch"
        kernels.append(evcxr)
    try:
        time.sleep(10)  # both warm-ups
        for k in kernels:
            k.t("let warm = 1u64;")
        plain.t("let v = vec![1.0f64; 4];")
        tch.t("let t = tch::Tensor::from_slice(&[1.0f64; 4]);")
        if len(kernels) > 2:
            t0 = time.perf_counter()
            evcxr.t(f"{TCH_DEP}\nlet t = tch::Tensor::from_slice(&[1.0f64; 4]);")
            print(f"evcxr_jupyter built tch in {time.perf_counter() - t0:.0f} s")
        time.sleep(10)  # the analyzers' reload of the bigger projects
        work = {plain.label: "v.iter().map(|x| x * {i}.0).sum::<f64>()",
                tch.label: "(&t * {i}.0).sum(tch::Kind::Double).double_value(&[])"}
        if len(kernels) > 2:
            work[evcxr.label] = work[tch.label]
        times = {}
        for i in range(2, rounds + 2):
            for k in kernels:
                times.setdefault((TRIVIAL, k.label), []).append(k.t(f"3 + {i}"))
                times.setdefault((TRIVIAL_AGAIN, k.label), []).append(k.t(f"4 + {i}"))
                times.setdefault((WORK, k.label), []).append(k.t(work[k.label].format(i=i)))
    finally:
        for k in kernels:
            k.stop()
    rows = {}
    for (row, label), ts in times.items():
        rows.setdefault(row, {})[label] = statistics.median(ts)
    return rows, [k.label for k in kernels]


def print_heavy(rows, labels, rounds):
    print(f"\nmedians of {rounds} rounds, s")
    print(f"{'cell':<46}" + "".join(f"{l:>22}" for l in labels))
    for row, by in rows.items():
        print(f"{row:<46}" + "".join(f"{by[l]:>22.3f}" for l in labels))
    triv, again, work = rows[TRIVIAL], rows[TRIVIAL_AGAIN], rows[WORK]
    print(f"trivial cell, with tch / without: {triv['dryml-rust + tch'] / triv['dryml-rust']:.2f} after a work cell, "
          f"{again['dryml-rust + tch'] / again['dryml-rust']:.2f} after a trivial cell")
    if "evcxr_jupyter + tch" in labels:
        print(f"tensor cell, dryml-rust / evcxr_jupyter: {work['dryml-rust + tch'] / work['evcxr_jupyter + tch']:.2f}; "
              f"trivial cell with tch, dryml-rust / evcxr_jupyter: {triv['dryml-rust + tch'] / triv['evcxr_jupyter + tch']:.2f}")


def print_turnaround(rows, labels):
    names = {"dryml-rust": "dryml-rust", "rust": "evcxr_jupyter"}
    print(f"\n{'what the user waits for':<72}" + "".join(f"{names[l]:>16}" for l in labels))
    for row, by in rows.items():
        cells = "".join(f"{by[l]:>14.2f} s" if l in by else f"{'-':>16}" for l in labels)
        print(f"{row:<72}{cells}")
    triv = {n: rows[f"trivial cell (`warm + 1`), {n} variables, median of 5"] for n in (0, 100, 300)}
    for l in labels:
        print(f"{names[l]}: 100 variables / none {triv[100][l] / triv[0][l]:.2f}, 300 / none {triv[300][l] / triv[0][l]:.2f}")
    if "rust" in labels:
        print(f"dryml-rust / evcxr_jupyter, trivial cell: none {triv[0]['dryml-rust'] / triv[0]['rust']:.2f}, "
              f"100 variables {triv[100]['dryml-rust'] / triv[100]['rust']:.2f}, "
              f"300 variables {triv[300]['dryml-rust'] / triv[300]['rust']:.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=20)
    ap.add_argument("--idle", type=float, default=0.0,
                    help="seconds between starting the kernels and the first cell (the user typing)")
    ap.add_argument("--turnaround", action="store_true", help="issue 13's table instead (about 4 minutes)")
    ap.add_argument("--tch", action="store_true", help="what tch in the notebook costs each cell (issue 24)")
    ap.add_argument("--rounds", type=int, default=9, help="with --tch: rounds of cells")
    ap.add_argument("--restarts", type=int, metavar="N",
                    help="issue 61's figures: a start and N-1 restarts, each followed by the first cells")
    ap.add_argument("--starts", type=int, default=1, metavar="S",
                    help="with --restarts: S kernels in turn, each started and restarted N-1 times "
                         "(S figures for the first cells after a start)")
    ap.add_argument("--baseline", type=Path, help="another dryml-kernel binary to run beside this build")
    ap.add_argument("--baseline-first", action="store_true",
                    help="start the baseline first and give it each cell first (the first cell of the "
                         "kernel started first competes with the other's start-up)")
    args = ap.parse_args()
    if args.tch:
        with private_kernelspec():
            print_heavy(*heavy(args.rounds), args.rounds)
        return 0
    if args.restarts:
        got, parts = {}, {}
        with private_kernelspec():
            for _ in range(args.starts):
                g, p = restarts(args.restarts, args.idle or 10.0)
                for row, by in g.items():
                    for label, seconds in by.items():
                        got.setdefault(row, {}).setdefault(label, []).extend(seconds)
                for row, cells in p.items():
                    parts.setdefault(row, []).extend(cells)
        print_restarts(got, parts)
        return 0
    if args.turnaround:
        with private_kernelspec():
            print_turnaround(*turnaround(args.idle or 10.0))
        return 0
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
