"""Exports scikit-learn's 8×8 digits (1,797 real handwritten digits, shipped in its wheel, no
network) for the tests and notebooks: `digits.csv`, 64 pixel columns `p0`..`p63` (0 to 16)
and the class in `label`; `digits.npz`, numpy's archive of the images `x` (uint8, 1797×8×8)
and the classes `y` (int64); `digits_x.npy`, the images alone, as `np.save` writes them;
`digits.parquet`, the CSV's columns (pixels as uint8, the label
as int64) written by pyarrow; `digits-png/<class>/<n>.png`, each image as an 8-bit grey PNG
(levels 0 to 16 times 15). Each written to a temporary name and renamed, so a reader never
sees half.

    .venv/bin/python tests/data/digits.py target/data
"""
import csv
import os
import shutil
import struct
import sys
import zlib
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
    target = out / "digits_x.npy"
    if not target.exists():
        tmp = out / f".digits_x.{os.getpid()}.npy"
        np.save(tmp, d.images.astype(np.uint8))
        os.replace(tmp, target)
    target = out / "digits.parquet"
    if not target.exists():
        import pyarrow as pa
        import pyarrow.parquet as pq
        columns = {f"p{i}": pa.array(d.data[:, i].astype(np.uint8)) for i in range(64)}
        columns["label"] = pa.array(d.target.astype(np.int64))
        tmp = out / f".digits.{os.getpid()}.parquet"
        pq.write_table(pa.table(columns), tmp, row_group_size=500)
        os.replace(tmp, target)
    target = out / "digits-png"
    if not target.exists():
        tmp = out / f".digits-png.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        for n, (image, label) in enumerate(zip(d.images, d.target)):
            (tmp / str(label)).mkdir(parents=True, exist_ok=True)
            (tmp / str(label) / f"{n:04}.png").write_bytes(png((image * 15).astype(np.uint8)))
        os.replace(tmp, target)


def png(grey):
    """An 8-bit grey PNG of a 2-D uint8 array (no imaging library needed)."""
    h, w = grey.shape
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\0" + grey[r].tobytes() for r in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    main(sys.argv[1])
