"""What a notebook costs in memory beside the values it holds: the resident memory (RSS) of the
kernel's own process (and, apart, of its analysis process and of the child where cells run) ten
seconds after five ordinary cells, plain, then naming `dryml`, then with a `tch` tensor, and after
the plain cells once the notebook has been quiet long enough for its analysis process to end
(`DRYML_ANALYSIS_IDLE_S`, shortened here); the kernel processes (each kernel, and the one
analysis process a user's kernels share) of 1, 2 and 4 notebooks of one user open at once; how
long a Tab in one notebook takes while another opens (the analysis process loading its crate); and
the launch-to-reply time of a cell sent the moment the kernel answers kernel_info (an untyped
`let` and a typed one); and a notebook's first Tabs (its analysis starts at the first), then
the first after a restart. Runs DRYML Rust and, when its kernelspec ("rust") is installed,
evcxr_jupyter on the same cells (with tch by its `:dep`). The goals are issue 39's (150 MiB
plain, 250 MiB with tch, 100 MiB per further notebook, a reply within 1 s of the launch) and
issue 75's (a notebook's whole memory at most 0.5x evcxr_jupyter's, a Tab after a restart
answered within 1 s).
Usage: .venv/bin/python tests/bench/bench_memory.py [--only rss|many|tab|tabs|first] [--reps 3]
"""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager

import bench_start
from bench_experiments import children, pid_of
from kernelspec import TCH_DEP, private_kernelspec, torch_env

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from procs import analysis_pids_in, rss_mib  # noqa: E402 (tests/, beside the bench)

PLAIN = [
    "let v: Vec<u64> = (0..1000).collect();",
    "struct Point { x: f64, y: f64 }\nlet p = Point { x: 1.0, y: 2.0 };",
    "let s: u64 = v.iter().sum(); s",
    "fn norm(p: &Point) -> f64 { (p.x * p.x + p.y * p.y).sqrt() }\nnorm(&p)",
    'format!("{} points, sum {}", v.len(), s)',
]
DRYML = "use dryml::models::linfa::iris;\niris().count().unwrap()"
TCH = "let t = tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0]);\nt.sum(tch::Kind::Float).double_value(&[])"
FIRST = {"untyped": "let a = vec![1u64, 2, 3];\na.len()", "typed": "let a: Vec<u64> = vec![1, 2, 3];\na.len()"}


class Kernel(bench_start.Kernel):
    """bench_start's kernel, with its process and its descendants' memory; a DRYML Rust kernel
    meets its analysis process in `analysis_dir` (one of its own unless given)."""

    def __init__(self, name, env=None, analysis_dir=None):
        self.analysis_dir = analysis_dir or tempfile.mkdtemp(prefix="dra-")
        super().__init__(name, {**(env or os.environ), "DRYML_ANALYSIS_DIR": self.analysis_dir})
        self.pid = pid_of(self.km)

    def run(self, code, timeout=1800):
        # evcxr_jupyter's first tch cell builds torch-sys: minutes.
        return super().run(code, timeout)

    def memory(self):
        """(the kernel's own RSS, its analysis process's, its descendants' but that), in MiB."""
        kids, todo = [], children(self.pid)
        while todo:
            kids.append(todo.pop())
            todo += children(kids[-1])
        analysis = analysis_pids_in(self.analysis_dir)
        return (rss_mib(self.pid), sum(rss_mib(p) for p in analysis),
                sum(rss_mib(p) for p in kids if p not in analysis))


def settled(k, wait):
    time.sleep(wait)
    return k.memory()


def rss_rows(name, evcxr, wait):
    """RSS after the plain cells, then after dryml's cell, then after tch's, then (DRYML Rust:
    its analysis starts at the first Tab) after a Tab (each settled)."""
    env = torch_env() if evcxr else None
    k = Kernel(name, env)
    try:
        for c in PLAIN:
            k.run(c)
        rows = [("plain cells", settled(k, wait))]
        if not evcxr:
            k.run(DRYML)
            rows.append(("then `use dryml::models::linfa::iris`", settled(k, wait)))
        if evcxr:
            k.run(TCH_DEP)
        k.run(TCH)
        rows.append(("then a tch tensor and a sum", settled(k, wait)))
        if not evcxr:
            tab(k)
            rows.append(("then a Tab (`v.`)", settled(k, wait)))
        return rows
    finally:
        k.close()


def whole(row):
    """A notebook's whole memory: its kernel, its analysis process, its child."""
    return sum(row)


def quiet_row(wait, idle=5):
    """RSS after the plain cells once the notebook was quiet for `idle` s (its analysis ended)."""
    k = Kernel("dryml-rust", {**os.environ, "DRYML_ANALYSIS_IDLE_S": str(idle)})
    try:
        for c in PLAIN:
            k.run(c)
        return (f"plain cells, then {idle} s quiet", settled(k, max(wait, idle + 5)))
    finally:
        k.close()


def tab_row(wait):
    """RSS after the plain cells and a Tab (its analysis started, loaded and trimmed)."""
    k = Kernel("dryml-rust")
    try:
        for c in PLAIN:
            k.run(c)
        tab(k)
        return ("plain cells, then a Tab (`v.`)", settled(k, wait))
    finally:
        k.close()


def many(name, n, wait, apart):
    """The kernel processes' RSS with n notebooks open, each after the plain cells, opened one
    after another (`apart`: each once the one before was settled; else at once), and then after
    one more cell in each (the notebooks in use)."""
    ks, shared = [], tempfile.mkdtemp(prefix="dra-")

    def total():
        time.sleep(wait)
        # The user's one analysis process, counted once.
        return sum(k.memory()[0] for k in ks) + sum(rss_mib(p) for p in analysis_pids_in(shared))
    try:
        for i in range(n):
            if apart and i:
                time.sleep(wait)
            ks.append(Kernel(name, analysis_dir=shared))
            for c in PLAIN:
                ks[-1].run(c)
        opened = total()
        for k in ks:
            k.run("let w = v.len() + 1;")
        return opened, total()
    finally:
        for k in ks:
            k.close()


def tab_while_another_opens(name, wait):
    """Seconds each Tab took in a settled notebook (every 50 ms, its median and its longest)
    while a second notebook of the user opened and named `dryml`: the analysis process loaded
    the second's crate twice meanwhile."""
    shared = tempfile.mkdtemp(prefix="dra-")
    a = Kernel(name, analysis_dir=shared)
    try:
        for c in PLAIN:
            a.run(c)
        tab(a)
        time.sleep(wait)
        opened = threading.Event()

        def open_another():
            b = None
            try:
                b = Kernel(name, analysis_dir=shared)
                for c in PLAIN[:2] + ["let d = dryml::ObjectDef::new(\"Tab\", &1).is_ok();"]:
                    b.run(c)
                time.sleep(2)
            finally:
                opened.set()
                if b:
                    b.close()
        threading.Thread(target=open_another, daemon=True).start()
        took = []
        while not opened.is_set():
            took.append(tab(a)[0])
            time.sleep(0.05)
        return statistics.median(took), max(took), len(took)
    finally:
        a.close()


def tab(k, code="v."):
    """Seconds a completion at the end of `code` took, and its number of matches."""
    t = time.perf_counter()
    k.kc.complete(code, len(code))
    reply = k.kc.get_shell_msg(timeout=120)
    return time.perf_counter() - t, len(reply["content"].get("matches", []))


def first_tabs(name, wait, code="let q = vec![1u8, 2];\nq."):
    """Seconds the first Tabs of a notebook took: in a new kernel `wait` s after the plain cells,
    one on a variable's name (`v`), then one on a method (`q.`, its methods listed), then that
    Tab pressed again each half second until it lists methods (seconds from the first), then the
    same method Tab `wait` s after a restart (and its number of matches each time)."""
    k = Kernel(name)
    try:
        for c in PLAIN:
            k.run(c)
        time.sleep(wait)
        rows = [("first Tab, a name (`v`)", *tab(k, "v"))]
        t0 = time.perf_counter()
        rows.append(("then a method (`q.`)", *tab(k, code)))
        matches, tries = rows[-1][2], 1
        while not matches and tries < 120:
            time.sleep(0.5)
            matches, tries = tab(k, code)[1], tries + 1
        rows.append((f"Tab again until listed ({tries} Tabs)", time.perf_counter() - t0, matches))
        k.km.restart_kernel(now=False)
        k.kc.wait_for_ready(timeout=120)
        time.sleep(wait)
        rows.append(("after a restart, a method (`q.`)", *tab(k, code)))
        return rows
    finally:
        k.close()


def first_reply(name, code):
    """Seconds from the launch to the reply of a cell sent as kernel_info answers."""
    k = Kernel(name)
    try:
        return k.run(code) - k.t0, k.ready
    finally:
        k.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["rss", "many", "tab", "tabs", "first"])
    ap.add_argument("--reps", type=int, default=3, help="runs of each launch-to-reply time (medians)")
    ap.add_argument("--wait", type=float, default=10.0, help="seconds to let a kernel settle before reading")
    args = ap.parse_args()
    with private_kernelspec():
        kernels = [("dryml-rust", "dryml-rust", False)]
        if "rust" in KernelSpecManager().find_kernel_specs():
            kernels.append(("evcxr_jupyter", "rust", True))
        else:
            print("evcxr_jupyter not installed (no 'rust' kernelspec): dryml-rust alone")
        if args.only in (None, "rss"):
            print(f"RSS {args.wait:.0f} s after the cells (MiB): the kernel's own process, its analysis process,"
                  " and its child(ren)")
            wholes = {}
            for label, name, evcxr in kernels:
                rows = rss_rows(name, evcxr, args.wait) + ([] if evcxr else [tab_row(args.wait), quiet_row(args.wait)])
                for what, (own, analysis, child) in rows:
                    print(f"  {label:14} {what:40} kernel {own:6.0f}   analysis {analysis:6.0f}"
                          f"   child {child:6.0f}   whole {own + analysis + child:6.0f}")
                wholes[label] = {"plain": whole(rows[0][1]), "tch": whole(next(r for w, r in rows if "tch" in w))}
            if len(wholes) == 2:
                ours, theirs = wholes["dryml-rust"], wholes["evcxr_jupyter"]
                print("  a notebook's whole memory beside evcxr_jupyter's (goal 0.5x): "
                      + ", ".join(f"{k} {ours[k] / theirs[k]:.2f}x" for k in ("plain", "tch")))
        if args.only in (None, "many"):
            print("Kernel processes (each kernel, and the analysis process they share) of n notebooks of one user, after the"
                  " plain cells in each (MiB)")
            for label, name, _ in kernels:
                for apart in (True, False):
                    one = None
                    for n in (1, 2, 4):
                        got = many(name, n, args.wait, apart)
                        one = one or got
                        for what, total, first in zip(("opened", "in use"), got, one):
                            extra = (total - first) / (n - 1) if n > 1 else 0
                            print(f"  {label:14} {n} notebooks {'one by one' if apart else 'at once':10} {what:6}:"
                                  f" {total:6.0f} in all, {extra:5.0f} per notebook after the first")
        if args.only in (None, "tab"):
            print("A Tab in a settled notebook while another notebook of the user opens (seconds)")
            for label, name, _ in kernels:
                median, longest, n = tab_while_another_opens(name, args.wait)
                print(f"  {label:14} median {median:5.3f}   longest {longest:5.3f}   ({n} Tabs)")
        if args.only in (None, "tabs"):
            print(f"A notebook's first Tabs, {args.wait:.0f} s after its cells and after a restart (seconds)")
            for label, name, _ in kernels:
                for what, took, matches in first_tabs(name, args.wait):
                    print(f"  {label:14} {what:34} {took:6.3f} s   {matches:3} matches")
        if args.only in (None, "first"):
            print(f"A cell sent as kernel_info answers: launch to its reply (medians of {args.reps})")
            for label, name, _ in kernels:
                for kind, code in FIRST.items():
                    got = [first_reply(name, code) for _ in range(args.reps)]
                    print(f"  {label:14} {kind:8} {statistics.median(g[0] for g in got):5.2f} s "
                          f"(kernel_info at {statistics.median(g[1] for g in got):4.2f} s)")


if __name__ == "__main__":
    main()
