"""The first cell that stores a value of a heavy crate's type (issue 75): a `tch::Tensor`, an
`ndarray` array after its `:dep`, a polars `DataFrame` after its `:dep`. Each in a kernel of its
own, after a start and after a restart, with `--idle` seconds (the user reading) before the first
cell; the `:dep` cell is run first and not counted (its build is cached after the first round).
Prints each cell's seconds, the kernel's phases for it (`DRYML_CELL_TIMES`), and evcxr_jupyter's
figure for the same cells where its kernelspec (`rust`) is installed.

    .venv/bin/python tests/bench/bench_first_let.py [--idle 10] [--rounds 2] [--without-evcxr]
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402

from bench_latency import Started  # noqa: E402
from kernelspec import TCH_DEP, torch_env  # noqa: E402
from phases import CellTimes  # noqa: E402

# (row, what evcxr_jupyter needs first, what both kernels run first (not counted), the cell).
# evcxr_jupyter builds every crate again in each kernel's own directory: polars (minutes on two
# cores, each start) is left out of its column.
CASES = [
    ("first stored tch::Tensor", TCH_DEP, "",
     "let t = tch::Tensor::ones([2, 2], (tch::Kind::Float, tch::Device::Cpu));"),
    ("first stored ndarray array, after its :dep", "", ':dep ndarray = "0.16"',
     "let a = ndarray::Array2::<f64>::zeros((2, 2));"),
    ("first stored polars DataFrame, after its :dep", "",
     ':dep polars = { version = "0.55", default-features = false }\nuse polars::prelude::*;',
     'let df = df!("a" => [1i64, 2, 3], "b" => [0.5f64, 1.5, 2.5]).unwrap();'),
]


def one_case(kernel_name, case, rounds, idle, times):
    """[(seconds, phases or None)] for the case's cell, after a start and each restart."""
    _, evcxr_first, first, cell = case
    env = torch_env() if kernel_name == "rust" and evcxr_first else None
    k = Started(kernel_name, env)
    got = []
    try:
        for r in range(rounds):
            if r:
                k.restart()
            time.sleep(idle)
            k.t("let warm = 1u64;")
            setup = "\n".join(c for c in (evcxr_first if kernel_name == "rust" else "", first) if c)
            if setup:
                k.t(setup)
            if times:
                times.last()
            secs = k.t(cell)
            got.append((secs, times.last() if times else None))
    finally:
        k.stop()
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=float, default=10.0, help="seconds before the first cell")
    ap.add_argument("--rounds", type=int, default=2, help="a start, then rounds - 1 restarts")
    ap.add_argument("--without-evcxr", action="store_true", help="ours alone (evcxr_jupyter's builds take minutes)")
    args = ap.parse_args()
    times = CellTimes()
    evcxr = not args.without_evcxr and "rust" in KernelSpecManager().find_kernel_specs()
    print(f"idle {args.idle:.0f} s before each first cell; {args.rounds} rounds (a start, then restarts)")
    print(f"{'cell':<48}{'when':<16}{'dryml-rust':>12}{'evcxr_jupyter':>15}")
    for case in CASES:
        ours = one_case("dryml-rust", case, args.rounds, args.idle, times)
        theirs = one_case("rust", case, args.rounds, args.idle, None) if evcxr and "polars" not in case[0] else []
        for r, (secs, phases) in enumerate(ours):
            when = "after a restart" if r else "after a start"
            other = f"{theirs[r][0]:>13.3f} s" if r < len(theirs) else f"{'-':>15}"
            print(f"{case[0]:<48}{when:<16}{secs:>10.3f} s{other}")
            print(f"    phases (ms): {json.dumps({k: round(v * 1000) for k, v in phases.items()})}")
        print(f"    median: {statistics.median(s for s, _ in ours):.3f} s")


if __name__ == "__main__":
    main()
