"""Exports scikit-learn's 8×8 digits (1,797 real handwritten digits, shipped in its wheel, no
network) for the tests and notebooks: `digits.csv`, 64 pixel columns `p0`..`p63` (0 to 16)
and the class in `label`. Written to a temporary file and renamed, so a reader never sees half.

    .venv/bin/python tests/data/digits.py target/data
"""
import csv
import os
import sys
from pathlib import Path

from sklearn.datasets import load_digits


def main(out_dir):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "digits.csv"
    if target.exists():
        return
    d = load_digits()
    tmp = out / f".digits.csv.{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([f"p{i}" for i in range(64)] + ["label"])
        for x, y in zip(d.data, d.target):
            w.writerow([int(v) for v in x] + [int(y)])
    os.replace(tmp, target)


if __name__ == "__main__":
    main(sys.argv[1])
