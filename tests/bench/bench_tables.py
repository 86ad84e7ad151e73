"""Tables, measured: what showing a cell's value of 10⁷ rows costs (`runtime/examples/bench_table.rs`:
an ndarray array of 10⁷ × 4, a Dataset of 10⁷ rows, an Arrow record batch and a polars DataFrame
of 10⁷ rows, the table made and written as HTML and text), against pyarrow's own text of the
same batch (`str(batch)`, which previews its head and tail too), Python polars' own HTML table of
the same frame (`_repr_html_()`, what ipykernel shows), and ndarray's `Debug` text, in one run.

Usage: .venv/bin/python tests/bench/bench_tables.py [--reps 15]
The goal (issue 38): under 50 ms for 10⁷ rows, output bounded whatever the size.
"""
import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

import polars as pl
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent.parent
ROWS = 10_000_000


def pyarrow_text(reps):
    batch = pa.RecordBatch.from_pydict({
        "id": pa.array(range(ROWS), type=pa.int32()),
        "score": pa.array([None if i % 7 == 3 else i / 2 for i in range(ROWS)], type=pa.float64()),
        "name": pa.array([f"row{i}" for i in range(ROWS)]),
    })
    times, size = [], 0
    for _ in range(reps):
        t = time.perf_counter()
        size = len(str(batch))
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), size


def polars_html(reps):
    frame = pl.DataFrame({
        "id": pl.Series(range(ROWS), dtype=pl.Int32),
        "score": [None if i % 7 == 3 else i / 2 for i in range(ROWS)],
        "name": [f"row{i}" for i in range(ROWS)],
    })
    times, size = [], 0
    for _ in range(reps):
        t = time.perf_counter()
        size = len(frame._repr_html_()) + len(repr(frame))
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    out = subprocess.run(
        ["cargo", "run", "--quiet", "--release", "--locked", "-p", "dryml", "--features", "parquet,polars",
         "--example", "bench_table", "--", str(args.reps)],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    rust = json.loads(out.strip().splitlines()[-1])
    py_ms, py_bytes = pyarrow_text(args.reps)
    pl_ms, pl_bytes = polars_html(args.reps)
    print(f"{ROWS:,} rows, median of {args.reps}:")
    print(f"  ndarray 10^7 x 4 table (HTML + text)   {rust['array_ms']:8.3f} ms  {rust['array_bytes']:6} bytes")
    print(f"  ndarray's Debug text (anchor)          {rust['array_debug_ms']:8.3f} ms  {rust['array_debug_bytes']:6} bytes"
          f"   ratio {rust['array_ms'] / rust['array_debug_ms']:.2f}")
    print(f"  Dataset table (first elements)         {rust['dataset_ms']:8.3f} ms  {rust['dataset_bytes']:6} bytes")
    print(f"  Arrow RecordBatch table                {rust['batch_ms']:8.3f} ms  {rust['batch_bytes']:6} bytes")
    print(f"  pyarrow str(batch) (anchor)            {py_ms:8.3f} ms  {py_bytes:6} bytes"
          f"   ratio {rust['batch_ms'] / py_ms:.2f}")
    print(f"  polars DataFrame table                 {rust['frame_ms']:8.3f} ms  {rust['frame_bytes']:6} bytes")
    print(f"  Python polars HTML + repr (anchor)     {pl_ms:8.3f} ms  {pl_bytes:6} bytes"
          f"   ratio {rust['frame_ms'] / pl_ms:.2f}")
    worst = max(rust["array_ms"], rust["dataset_ms"], rust["batch_ms"], rust["frame_ms"])
    print(f"goal: under 50 ms: {'met' if worst < 50 else 'NOT met'} (slowest {worst:.3f} ms)")


if __name__ == "__main__":
    main()
