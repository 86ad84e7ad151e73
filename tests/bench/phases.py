"""Where a cell's time went, as the kernel tells it (`DRYML_CELL_TIMES`: evcxr's commands, the
types, cargo or rustc alone, the load and run), for the benchmarks that print it."""
import json
import os
import statistics
import tempfile
from pathlib import Path


class CellTimes:
    """The kernels' own account of each user cell (`DRYML_CELL_TIMES`, set for the kernels
    started after this): `last()` is the newest cell's {phase: seconds}."""

    def __init__(self):
        fd, self.path = tempfile.mkstemp(prefix="dryml-cell-times-", suffix=".jsonl")
        os.close(fd)
        os.environ["DRYML_CELL_TIMES"] = self.path
        self.seen = 0

    def last(self):
        lines = Path(self.path).read_text().splitlines()
        new, self.seen = lines[self.seen:], len(lines)
        return dict(json.loads(new[-1])["phases"]) if new else {}


def print_phases(parts):
    """`parts`: {row: [a cell's {phase: seconds}]}; the median of each phase per row."""
    print("\nwhere our kernel's time went (DRYML_CELL_TIMES; median of each phase, ms; n: cells with the phase)")
    for row, cells in parts.items():
        print(f"  {row}")
        for name in dict.fromkeys(name for c in cells for name in c):
            ts = [c[name] for c in cells if name in c]
            print(f"    {name:<52}{statistics.median(ts) * 1000:>8.0f}  (n {len(ts)})")
