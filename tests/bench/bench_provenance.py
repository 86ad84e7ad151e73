"""What recording provenance costs a user (issue 74's bound: 5 ms a cell).

1. A trivial cell's round trip in a kernel that writes its part of the provenance before every
   cell, against one started with DRYML_NO_PROVENANCE=1; the two interleaved, cell by cell.
2. What a cell that stores objects pays once: `dryml::objects::Provenance::here()` (git, host,
   the kernel's part) timed inside cells run in a dirty git folder, each the first in its cell,
   against `repo.add` of one small object with it and of one that brings its own.
Usage: .venv/bin/python tests/bench/bench_provenance.py [--cells 40]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import start_new_kernel

from kernelspec import private_kernelspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from test_provenance import TYPES  # noqa: E402  (the test's object type)


def run(kc, code, timeout=600):
    out = []

    def hook(m):
        if m["msg_type"] == "execute_result":
            out.append(m["content"]["data"]["text/plain"])

    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"{code!r} failed: {reply['content']}")
    return out[0] if out else None


def timed(kc, code):
    t = time.perf_counter()
    run(kc, code)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=40)
    n = ap.parse_args().cells
    with private_kernelspec():
        on = start_new_kernel(kernel_name="dryml-rust", startup_timeout=300)
        off = start_new_kernel(kernel_name="dryml-rust", startup_timeout=300,
                               env={**os.environ, "DRYML_NO_PROVENANCE": "1"})
        kernels = {"provenance": on, "DRYML_NO_PROVENANCE": off}
        try:
            for _, kc in kernels.values():
                run(kc, "let warm = 1;")
            times = {label: [] for label in kernels}
            for i in range(n):
                for label, (_, kc) in kernels.items():
                    times[label].append(timed(kc, f"let x{i} = {i}u64 + 1;"))
            med = {label: statistics.median(t) * 1e3 for label, t in times.items()}
            print(f"1. a trivial cell, median of {n} (ms)")
            for label, m in med.items():
                print(f"   {label:22} {m:7.1f}")
            print(f"   provenance adds        {med['provenance'] - med['DRYML_NO_PROVENANCE']:+7.1f} ms "
                  f"(ratio {med['provenance'] / med['DRYML_NO_PROVENANCE']:.3f})")

            kc = on[1]
            work = Path(tempfile.mkdtemp(prefix="dryml-prov-bench-"))
            subprocess.run("git init -q -b main && echo a > f && git add f && "
                           "git -c user.name=b -c user.email=b@b commit -qm one && echo b > f",
                           shell=True, cwd=work, check=True)
            run(kc, f"%cd {work}")
            run(kc, ':dep serde_json = "1"')
            run(kc, TYPES)
            run(kc, f'let mut repo = dryml::Repo::create("{work}/repo").unwrap();')
            here, with_p, without = [], [], []
            for i in range(10):
                here.append(float(run(kc, "let t = std::time::Instant::now(); "
                                          "let _p = dryml::objects::Provenance::here(); "
                                          "t.elapsed().as_secs_f64() * 1e3")))
                with_p.append(float(run(kc, "let t = std::time::Instant::now(); "
                                            f"repo.add(&Run::build(serde_json::json!({{\"i\": {i}}}), Meta::new())).unwrap(); "
                                            "t.elapsed().as_secs_f64() * 1e3")))
                without.append(float(run(kc, "let t = std::time::Instant::now(); "
                                             "let mut m = Meta::new(); m.provenance = Some(Default::default()); "
                                             f"repo.add(&Run::build(serde_json::json!({{\"i\": {i}}}), m)).unwrap(); "
                                             "t.elapsed().as_secs_f64() * 1e3")))
            print("2. a cell that stores objects, in a dirty git folder, median of 10 (ms)")
            print(f"   Provenance::here(), first in its cell   {statistics.median(here):7.2f}")
            print(f"   repo.add, provenance recorded           {statistics.median(with_p):7.2f}")
            print(f"   repo.add, the object brings its own     {statistics.median(without):7.2f}")
        finally:
            for km, kc in kernels.values():
                kc.stop_channels()
                km.shutdown_kernel(now=True)


if __name__ == "__main__":
    sys.exit(main())
