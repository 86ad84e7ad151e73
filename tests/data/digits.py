"""Exports scikit-learn's 8×8 digits (1,797 real handwritten digits, shipped in its wheel, no
network) for the tests and notebooks: `digits.csv`, 64 pixel columns `p0`..`p63` (0 to 16)
and the class in `label`; `digits.npz`, numpy's archive of the images `x` (uint8, 1797×8×8)
and the classes `y` (int64). Each written to a temporary file and renamed, so a reader never
sees half.

    .venv/bin/python tests/data/digits.py target/data
"""
import csv
import os
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits


def main(out_dir):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    d = load_digits()
    target = out / "digits.csv"
    if not target.exists():
        tmp = out / f".digits.csv.{os.getpid()}"
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow([f"p{i}" for i in range(64)] + ["label"])
            for x, y in zip(d.data, d.target):
                w.writerow([int(v) for v in x] + [int(y)])
        os.replace(tmp, target)
    target = out / "digits.npz"
    if not target.exists():
        tmp = out / f".digits.{os.getpid()}.npz"
        np.savez_compressed(tmp, x=d.images.astype(np.uint8), y=d.target.astype(np.int64))
        os.replace(tmp, target)


if __name__ == "__main__":
    main(sys.argv[1])
