"""Objects and the repo, measured: save and load throughput for small and large objects, and a
selector `get` over 100,000 stored objects (dryml-rust, `runtime/examples/bench_objects.rs`),
against DRYML's own Repo/Selector (PyPI `dryml`) on the same definitions.

Usage: .venv/bin/python tests/bench/bench_objects.py [--n 100000] [--dryml-n 10000]
Installs dryml==0.2.2 into the venv if it is missing. DRYML starts at 10,000 objects: at its
speed here 100,000 would take about six minutes to save alone.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

DRYML_SCRIPT = r"""
import json, os, statistics, sys, time
import dryml
from dryml import Object, Repo, Selector

n, d = int(sys.argv[1]), sys.argv[2]
LRS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
DATA = ["mnist", "cifar", "svhn", "imagenet", "coco", "voc", "celeba", "lsun", "stl", "kmnist"]
WIDTHS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]

class Small(Object):
    def __init__(self, lr=0.0, data=None, width=0, seed=0):
        pass

def args(i):
    return dict(lr=LRS[i % 10], data={"name": DATA[i // 10 % 10], "split": "train"}, width=WIDTHS[i // 100 % 10], seed=i)

t = time.perf_counter()
repo = Repo(directory=d, create=True)
for i in range(n):
    repo.add_object(Small(**args(i)))
repo.save()
save = time.perf_counter() - t
del repo
t = time.perf_counter()
repo = Repo(directory=d)
open_s = time.perf_counter() - t
assert len(repo) == n, len(repo)
gets = []
matched = 0
for _ in range(5):
    t = time.perf_counter()
    found = repo.get(Selector(Small, kwargs={"lr": 0.1, "data": {"name": "mnist"}, "width": 64}), verbose=False)
    gets.append(time.perf_counter() - t)
    matched = len(found) if isinstance(found, list) else 1
print(json.dumps({"n": n, "save_secs": save, "open_secs": open_s, "get_median_s": statistics.median(gets), "matched": matched}))
"""


def ensure_dryml():
    try:
        import dryml  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "dryml==0.2.2"], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dryml-n", type=int, default=10_000)
    args = ap.parse_args()
    ensure_dryml()
    work = Path(tempfile.mkdtemp(prefix="dryml-bench-objects-"))
    try:
        subprocess.run(["cargo", "build", "--release", "--locked", "-q", "--example", "bench_objects", "-p", "dryml"],
                       cwd=ROOT, check=True)
        exe = ROOT / "target" / "release" / "examples" / "bench_objects"
        ours_small = json.loads(subprocess.run([str(exe), str(args.dryml_n), str(work / "rs-small")],
                                               capture_output=True, text=True, check=True).stdout)
        ours = json.loads(subprocess.run([str(exe), str(args.n), str(work / "rs")],
                                         capture_output=True, text=True, check=True).stdout)
        theirs = json.loads(subprocess.run([sys.executable, "-c", DRYML_SCRIPT, str(args.dryml_n), str(work / "py")],
                                           capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("Object files (dryml-rust, release build, each save durable: write, fsync, rename)")
    print(f"  small objects: save {ours['small_save_per_s']:,.0f}/s, load {ours['small_load_per_s']:,.0f}/s")
    print(f"  64 MiB objects: save {ours['large_save_mib_s']:,.0f} MiB/s, load {ours['large_load_mib_s']:,.0f} MiB/s (median of 5)")
    print(f"\nRepo of {ours['n']:,} small objects (dryml-rust)")
    print(f"  add (batches of 10,000 with add_many): {ours['add_secs']:.2f} s; open (read the index): {ours['open_secs'] * 1000:.0f} ms")
    print(f"  selector lr=0.1 data.name=mnist width=64 ({ours['matched']} matches), median of 21: "
          f"find (index only) {ours['find_median_s'] * 1000:.2f} ms, get (loads them) {ours['get_median_s'] * 1000:.2f} ms")
    n = theirs["n"]
    print(f"\nSame {n:,} definitions, DRYML 0.2.2 against dryml-rust (ratio = DRYML / ours)")
    rows = [
        ("save the repo", theirs["save_secs"], ours_small["add_secs"]),
        ("open the repo", theirs["open_secs"], ours_small["open_secs"]),
        ("get with the selector (median)", theirs["get_median_s"], ours_small["get_median_s"]),
    ]
    for label, t_py, t_rs in rows:
        print(f"  {label:<32} DRYML {t_py * 1000:10.1f} ms   ours {t_rs * 1000:9.2f} ms   {t_py / t_rs:8.0f}x")
    print(f"  (matches: DRYML {theirs['matched']}, ours {ours_small['matched']})")


if __name__ == "__main__":
    main()
