"""A notebook's "Restart Kernel and Run All Cells", timed as a user waits for it: from the kernel's
start to the last cell's reply, on this checkout's release kernel, with the slowest cells named.
Any error fails the run. Medians over `--reps` runs, each on a new kernel.
Usage: .venv/bin/python tests/bench/bench_notebook.py [notebooks/compare.ipynb] [--reps 3]
"""
import argparse
import json
import statistics
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from kernelspec import ROOT, private_kernelspec


def run_all(path):
    nb = nbformat.read(path, as_version=4)
    cells = {}
    t0 = time.monotonic()

    async def started(cell, cell_index, **_):
        cells[cell_index] = time.monotonic()

    async def done(cell, cell_index, **_):
        cells[cell_index] = time.monotonic() - cells[cell_index]

    client = NotebookClient(nb, kernel_name="dryml-rust", timeout=600, startup_timeout=120,
                            on_cell_execute=started, on_cell_executed=done)
    client.execute()
    wall = time.monotonic() - t0
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        raise SystemExit(f"{path}: {errors[0].get('ename')}: {errors[0].get('evalue')}")
    return wall, cells, nb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("notebook", nargs="?", default=str(ROOT / "notebooks" / "compare.ipynb"))
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    walls, per_cell = [], {}
    with private_kernelspec():
        for _ in range(args.reps):
            wall, cells, nb = run_all(args.notebook)
            walls.append(wall)
            for i, s in cells.items():
                per_cell.setdefault(i, []).append(s)
    med = {i: statistics.median(v) for i, v in per_cell.items()}
    slowest = sorted(med, key=med.get, reverse=True)[:3]
    first_line = lambda i: "".join(nb.cells[i].source).strip().splitlines()[0][:60]
    print(json.dumps({
        "notebook": Path(args.notebook).name,
        "reps": args.reps,
        "run_all_s": [round(w, 2) for w in walls],
        "median_s": round(statistics.median(walls), 2),
        "slowest_cells": [{"cell": i, "starts": first_line(i), "median_s": round(med[i], 2)} for i in slowest],
    }))


if __name__ == "__main__":
    main()
