"""Where a trivial cell's time goes, end to end: the kernel runs under `strace -f --seccomp-bpf`
(which stops only at the two traced calls, so the rest runs at full speed), and every process the
cell starts (cargo, rustc, the linker) is placed on one clock with the client's send and reply.

Phases of one `warm + 1` cell:
  kernel and evcxr   request sent -> first cargo started (our engine, evcxr's code generation
                     and its rust-analyzer type pass, writing the crate)
  failed attempts    builds that fail by design: evcxr first tries `(expr).evcxr_display()`
                     and falls back to Debug formatting when the type has no such method
  between builds     evcxr reading the errors and regenerating the crate
  cargo              (the final build) cargo started -> rustc started (start-up, resolving, fingerprints;
                     0 when the cell crate's rustc runs alone)
  rustc              rustc started -> linker started (parse, type check, codegen)
  link               linker started -> linker done
  rustc/cargo exit   linker done -> the build done
  load and reply     cargo done -> reply received (evcxr loads the library into the child,
                     runs it, the output comes back, our kernel replies)
`--startup` prints a start-up timeline instead: every process the kernel started (cargo, rustc,
the linker, the analyzer's `cargo metadata` and probes) from the kernel's start to the reply of a
first cell sent `--delay` s after it, on the same clock.
`--tch` brings `tch` into the notebook first (a tensor in a variable), as a model's notebook has
it, so the same cell shows what a heavy crate in the dependency list costs each cell.
Usage: .venv/bin/python tests/bench/profile_cell.py [--vars 0,100,300] [--reps 5] [--kernel rust] [--tch]
       .venv/bin/python tests/bench/profile_cell.py --startup [--delay 0] [--kernel rust]
"""
import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import start_new_kernel

from kernelspec import TCH_DEP, private_kernelspec, torch_env

LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(execve|exit_group)\((.*)$")
PHASES = ["kernel and evcxr, before the build", "failed attempts (evcxr's fallbacks)", "between builds",
          "cargo", "rustc", "link", "rustc/cargo exit", "load and reply"]


def events(trace):
    """[(t, pid, call, rest of the line)] from an strace -f -ttt log."""
    out = []
    for line in Path(trace).read_text().splitlines():
        m = LINE.match(line)
        if m and "= -1 " not in line:
            out.append((float(m[2]), int(m[1]), m[3], m[4]))
    return out


def phases(evs, sent, got):
    """The phase durations (PHASES) of the cell sent at `sent` and answered at `got`."""
    window = [e for e in evs if sent <= e[0] <= got]
    exits = {}
    for t, pid, call, rest in window:
        if call == "exit_group":
            exits.setdefault(pid, (t, rest.split(")")[0].strip()))
    cargos = [e for e in window if e[2] == "execve" and re.search(r'/cargo", \["[^"]*", "build"', e[3])]
    # The cell crate: `ctx`, or `ctx_<kernel token>` in the shared build cache.
    cell_rustc = lambda e: e[2] == "execve" and re.search(r'"--crate-name", "ctx(_k[0-9a-f]{12})?"', e[3])
    inside = lambda e: any(c[0] <= e[0] <= exits[c[1]][0] for c in cargos)
    # A build is a cargo build, or the cell crate's rustc run alone (evcxr's patch, once cargo
    # has recorded the command).
    builds = sorted(cargos + [e for e in window if cell_rustc(e) and not inside(e)])
    assert builds, "no build during the cell"
    failed = [b for b in builds if exits[b[1]][1] != "0"]
    final = [b for b in builds if b not in failed][-1]
    after = lambda t0, pred: next(e for e in window if e[0] > t0 and pred(e))
    rustc = final if cell_rustc(final) else after(final[0], cell_rustc)
    link = after(rustc[0], lambda e: e[2] == "execve" and re.search(r'^"[^"]*/(cc|gcc|clang|ld[^"/]*|rust-lld)"', e[3]))
    link_end, cargo_end = exits[link[1]][0], exits[final[1]][0]
    failed_time = sum(exits[b[1]][0] - b[0] for b in failed)
    between = (cargo_end - builds[0][0]) - failed_time - (cargo_end - final[0])
    return [builds[0][0] - sent, failed_time, between, rustc[0] - final[0], link[0] - rustc[0],
            link_end - link[0], cargo_end - link_end, got - cargo_end]


def describe(rest):
    """A process's command line, short: the program, cargo's subcommand, rustc's crate."""
    args = re.findall(r'"((?:[^"\\]|\\.)*)"', rest.split("], ")[0])
    if not args:
        return rest[:60]
    prog = Path(args[0]).name
    if prog == "cargo" and len(args) > 1:
        sub = next((a for a in args[1:] if not a.startswith("-") and not a.startswith("+")), "")
        return f"cargo {sub}"
    if prog == "rustc":
        crate = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--crate-name"), None)
        return f"rustc {crate}" if crate else "rustc " + " ".join(args[1:4])
    return " ".join([prog] + args[1:3])


def startup(trace, spec_name, delay):
    """The timeline of a start and one cell `delay` s after it."""
    from jupyter_client.manager import KernelManager
    t0 = time.time()
    km = KernelManager(kernel_name=spec_name)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=300)
    ready = time.time()
    time.sleep(max(0.0, delay - (ready - t0)))
    sent = time.time()
    reply = kc.execute_interactive("let a = 1u64; a + 1", timeout=300, output_hook=lambda m: None)
    got = time.time()
    assert reply["content"]["status"] == "ok", reply["content"]
    time.sleep(0.5)
    kc.stop_channels()
    km.shutdown_kernel(now=True)
    evs = events(trace)
    ends = {}
    for t, pid, call, _ in evs:
        if call == "exit_group":
            ends.setdefault(pid, t)
    print(f"{'start s':>8} {'end s':>7}  process")
    print(f"{ready - t0:8.2f} {'':>7}  kernel_info answered")
    print(f"{sent - t0:8.2f} {'':>7}  the cell sent")
    shown = set()
    for t, pid, call, rest in evs:
        if call != "execve" or t > got or pid in shown:
            continue
        shown.add(pid)
        name = describe(rest)
        if name.startswith(("strace", "dryml-kernel", "evcxr_jupyter")) and t - t0 < 0.5:
            continue
        end = ends.get(pid)
        print(f"{t - t0:8.2f} {'' if end is None else f'{end - t0:7.2f}'}  {name}")
    print(f"{got - t0:8.2f} {'':>7}  the cell's reply ({got - sent:.2f} s after it was sent)")


def with_tch(kc, kernel):
    """Brings tch into a notebook as a user would: our kernel adds it when a cell names it;
    evcxr_jupyter needs the `:dep` line (and libtorch from `torch_env`, given at its start)."""
    dep = "" if kernel.startswith("dryml") else f"{TCH_DEP}\n"
    reply = kc.execute_interactive(dep + "let t = tch::Tensor::from(1.0f64);", timeout=900, output_hook=lambda m: None)
    assert reply["content"]["status"] == "ok", reply["content"]
    time.sleep(5)  # the analyzer's reload of the bigger project


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vars", default="0,100,300")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--kernel", default="dryml-rust", help="a kernelspec name (`rust`: evcxr_jupyter)")
    ap.add_argument("--startup", action="store_true", help="the start-up timeline")
    ap.add_argument("--tch", action="store_true", help="with tch in the notebook (`:dep tch` for evcxr_jupyter)")
    ap.add_argument("--delay", type=float, default=0.0, help="with --startup: when the cell is sent")
    args = ap.parse_args()
    if not shutil.which("strace"):
        sys.exit("strace is needed (apt-get install strace)")
    trace = Path(tempfile.mkdtemp(prefix="dryml-profile-")) / "trace"
    with private_kernelspec() as jdir:
        from jupyter_client.kernelspec import KernelSpecManager
        src = Path(KernelSpecManager().get_kernel_spec(args.kernel).resource_dir)
        spec_dir = jdir / "share" / "jupyter" / "kernels" / "profiled"
        shutil.copytree(src, spec_dir)
        spec = spec_dir / "kernel.json"
        data = json.loads(spec.read_text())
        data["argv"] = ["strace", "-f", "--seccomp-bpf", "-ttt", "-qq", "-e", "trace=execve,exit_group",
                        "-s", "200", "-o", str(trace)] + data["argv"]
        spec.write_text(json.dumps(data))
        if args.startup:
            startup(trace, "profiled", args.delay)
            shutil.rmtree(trace.parent, ignore_errors=True)
            return 0
        km, kc = start_new_kernel(kernel_name="profiled", startup_timeout=300,
                                  **({"env": torch_env()} if args.tch else {}))
        try:
            time.sleep(10)  # the warm-up
            kc.execute_interactive("let warm = 1u64;", timeout=300)
            if args.tch:
                with_tch(kc, args.kernel)
            have, rows = 0, {}
            for n in [int(v) for v in args.vars.split(",")]:
                if n > have:
                    kc.execute_interactive("\n".join(f"let v{i} = vec![{i}u64; 10];" for i in range(have, n)), timeout=300)
                have = n
                runs = []
                for _ in range(args.reps):
                    sent = time.time()
                    reply = kc.execute_interactive("warm + 1", timeout=300, output_hook=lambda m: None)
                    got = time.time()
                    assert reply["content"]["status"] == "ok", reply["content"]
                    time.sleep(0.3)  # let strace write the log
                    try:
                        runs.append(phases(events(trace), sent, got))
                    except (StopIteration, AssertionError, KeyError):
                        # The trace did not have the expected shape: show what it had.
                        for e in events(trace):
                            if sent <= e[0] <= got:
                                print(e[0], e[1], e[2], e[3][:150])
                        raise
                rows[n] = [statistics.median(r[i] for r in runs) for i in range(len(PHASES))]
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    print(f"\n{args.kernel}{' with tch' if args.tch else ''}: median of {args.reps} `warm + 1` cells, ms")
    print(f"{'phase':<40}" + "".join(f"{f'{n} vars':>10}" for n in rows))
    for i, p in enumerate(PHASES):
        print(f"{p:<40}" + "".join(f"{rows[n][i] * 1000:>10.0f}" for n in rows))
    print(f"{'total':<40}" + "".join(f"{sum(rows[n]) * 1000:>10.0f}" for n in rows))
    shutil.rmtree(trace.parent, ignore_errors=True)
    return 0



if __name__ == "__main__":
    sys.exit(main())
