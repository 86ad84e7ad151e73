"""Experiments and the cell logger, measured: what the logger adds to a cell, the CPU the
measurement burns, and how accurate the consumed and peak figures are, with IPyExperiments
(PyPI) on a Python kernel doing the same work side by side.

Usage: .venv/bin/python tests/bench/bench_experiments.py [--cells 50]
Installs ipyexperiments into the venv if it is missing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kernelspec import private_kernelspec

# The kernel's display data (dryml::__kernel::display::DATA_MIME).
DATA_MIME = "application/vnd.dryml+json"

ROOT = Path(__file__).resolve().parent.parent.parent
MIB = 1 << 20
SIZES_MIB = [1, 4, 16, 64, 256, 1024]


def ensure_ipyexperiments():
    try:
        import ipyexperiments  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "ipyexperiments==0.1.29"], check=True)


def start(kernel_name, env=None):
    from jupyter_client.manager import start_new_kernel
    extra = {"env": {**os.environ, **env}} if env else {}
    km, kc = start_new_kernel(kernel_name=kernel_name, startup_timeout=300, **extra)
    return km, kc


def run(kc, code, timeout=300):
    """Executes code; returns (seconds to idle, stdout text, display/result bundles)."""
    out, bundles = [], []

    def hook(m):
        t = m["msg_type"]
        if t == "stream":
            out.append(m["content"]["text"])
        elif t in ("display_data", "execute_result"):
            bundles.append(m["content"]["data"])
        elif t == "error":
            out.append("ERROR " + m["content"]["ename"] + ": " + m["content"]["evalue"])

    t0 = time.perf_counter()
    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
    dt = time.perf_counter() - t0
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"{code!r} failed: {reply['content'].get('evalue')} {''.join(out)}")
    return dt, "".join(out), bundles


def proc_cpu(pid):
    """User+system CPU seconds of a process and its children that were waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


def pid_of(km):
    return km.provisioner.process.pid


def children(pid):
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def median_ms(xs):
    return 1000 * statistics.median(xs)


# ---- DRYML Rust --------------------------------------------------------------------------------

def dryml_latency(n):
    """Two kernels, logger on in one and off in the other, cells interleaved."""
    on, off = start("dryml-rust"), start("dryml-rust")
    try:
        run(on[1], "%cell_logger on")
        run(on[1], "%cell_logger reset")
        t = {"compile on": [], "compile off": [], "command on": [], "command off": []}
        for i in range(n):
            code = f"let x{i} = vec![{i}u64; 1000]; x{i}.len()"
            t["compile on"].append(run(on[1], code)[0])
            t["compile off"].append(run(off[1], code)[0])
            # A cell evcxr answers without compiling: the logger's cost is all that differs.
            t["command on"].append(run(on[1], ":vars")[0])
            t["command off"].append(run(off[1], ":vars")[0])
        _, _, bundles = run(on[1], "%cell_logger data")
        measure_us = [c["measure_us"] for c in bundles[0][DATA_MIME]["cells"]]
        # CPU while a 2 s cell sleeps: the kernel and its child, logger on.
        k_pid = pid_of(on[0])
        child = children(k_pid)
        before = proc_cpu(k_pid) + sum(proc_cpu(c) for c in child)
        run(on[1], "std::thread::sleep(std::time::Duration::from_secs(2));")
        sleep_cpu = proc_cpu(k_pid) + sum(proc_cpu(c) for c in child) - before
        # CPU the kernel burns across n command cells, logger on against off.
        cpu = {}
        for label, (km, kc) in (("on", on), ("off", off)):
            c0 = proc_cpu(pid_of(km))
            for _ in range(n):
                run(kc, ":vars")
            cpu[label] = (proc_cpu(pid_of(km)) - c0) / n
        return t, measure_us, sleep_cpu, cpu
    finally:
        for km, kc in (on, off):
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def dryml_accuracy():
    km, kc = start("dryml-rust")
    rows = []
    try:
        run(kc, "%cell_logger on")
        for mib in SIZES_MIB:
            _, _, b = run(kc, f"%%experiment\nlet v = vec![1u8; {mib} << 20];")
            r = next(x[DATA_MIME] for x in b if x.get(DATA_MIME, {}).get("event") == "finish")
            cpu = r["devices"][0]
            rows.append((mib, cpu["consumed"], cpu["reclaimed"]))
        spikes = []
        for hold_ms in (5, 0):
            run(kc, "{ let w = vec![1u8; 256 << 20]; std::hint::black_box(&w);\n"
                    f"  std::thread::sleep(std::time::Duration::from_millis({hold_ms})); drop(w); }}")
            _, _, b = run(kc, "%cell_logger data")
            cell = b[0][DATA_MIME]["cells"][-1]
            tol = b[0][DATA_MIME]["peak_tolerance"]
            spikes.append((hold_ms, cell["cpu"]["peaked"], cell["cpu"]["consumed"]))
        return rows, spikes, tol
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# ---- IPyExperiments ----------------------------------------------------------------------------

def ipy_latency(n):
    on, off = start("python3"), start("python3")
    try:
        run(on[1], "from ipyexperiments import IPyExperimentsCPU\n"
                   "exp = IPyExperimentsCPU(exp_enable=False, cl_enable=True)")
        t = {"on": [], "off": [], "busy on": [], "busy off": []}
        busy = "s = 0\nfor i in range(2_000_000): s += i"
        for i in range(n):
            code = f"x{i} = [{i}] * 1000; len(x{i})"
            t["on"].append(run(on[1], code)[0])
            t["off"].append(run(off[1], code)[0])
            if i < 10:
                t["busy on"].append(run(on[1], busy)[0])
                t["busy off"].append(run(off[1], busy)[0])
        cpu = {}
        for label, (km, kc) in (("on", on), ("off", off)):
            c0 = proc_cpu(pid_of(km))
            run(kc, "import time; time.sleep(2)")
            cpu[label] = proc_cpu(pid_of(km)) - c0
        return t, cpu
    finally:
        for km, kc in (on, off):
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def ipy_accuracy():
    km, kc = start("python3")
    rows = []
    try:
        run(kc, "import json\nfrom ipyexperiments import IPyExperimentsCPU")
        for mib in SIZES_MIB:
            run(kc, "exp = IPyExperimentsCPU()")
            run(kc, f"v = b'\\x01' * ({mib} << 20)")
            _, out, _ = run(kc, "exp.finish()\nprint('JSON', json.dumps([exp.cpu_ram_cons, exp._reclaimed()[0]]))\ndel exp")
            cons, recl = json.loads(out.split("JSON", 1)[1].splitlines()[0])
            rows.append((mib, cons, recl))
        run(kc, "exp = IPyExperimentsCPU(exp_enable=False, cl_enable=True)")
        spikes = []
        for hold_ms, code in ((5, "import time\nw = b'\\x01' * (256 << 20)\ntime.sleep(0.005)\ndel w"),
                              (0, "len(b'\\x01' * (256 << 20))")):
            run(kc, code)
            _, out, _ = run(kc, "d = exp.cl.data.cpu\nprint('JSON', json.dumps([d.peaked_delta, d.used_delta]))")
            peak, cons = json.loads(out.split("JSON", 1)[1].splitlines()[0])
            spikes.append((hold_ms, peak, cons))
        return rows, spikes
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=50)
    args = ap.parse_args()
    n = args.cells
    ensure_ipyexperiments()
    with private_kernelspec():
        d_t, measure_us, d_sleep_cpu, d_cpu = dryml_latency(n)
        d_rows, d_spikes, tol = dryml_accuracy()
        p_t, p_cpu = ipy_latency(n)
        p_rows, p_spikes = ipy_accuracy()

    print(f"\n== Cell logger latency ({n} cells each, kernels interleaved) ==")
    for kind in ("compile", "command"):
        on, off = median_ms(d_t[f"{kind} on"]), median_ms(d_t[f"{kind} off"])
        print(f"dryml-rust {kind:<8} cell: on {on:8.2f} ms  off {off:8.2f} ms  added {on - off:+7.2f} ms  ratio {on / off:.3f}")
    on, off = median_ms(p_t["on"]), median_ms(p_t["off"])
    print(f"ipyexperiments  small cell: on {on:8.2f} ms  off {off:8.2f} ms  added {on - off:+7.2f} ms  ratio {on / off:.3f}")
    on, off = median_ms(p_t["busy on"]), median_ms(p_t["busy off"])
    print(f"ipyexperiments  busy cell : on {on:8.2f} ms  off {off:8.2f} ms  added {on - off:+7.2f} ms  ratio {on / off:.3f}"
          "  (2M-step Python loop, 10 cells)")
    print(f"dryml-rust measurement time per cell (two samples, kernel side): median {statistics.median(measure_us):.0f} µs")

    print("\n== CPU the measurement burns ==")
    print(f"dryml-rust kernel CPU per command cell: on {1000 * d_cpu['on']:.2f} ms  off {1000 * d_cpu['off']:.2f} ms")
    print(f"dryml-rust kernel+child CPU during a 2 s sleeping cell, logger on: {d_sleep_cpu:.3f} s")
    print(f"ipyexperiments kernel CPU during a 2 s sleeping cell: logger on {p_cpu['on']:.3f} s  off {p_cpu['off']:.3f} s")

    print("\n== Accuracy: %%experiment holding N MiB (consumed, reclaimed) ==")
    print(f"{'N MiB':>7} | {'dryml consumed':>15} {'err':>7} {'reclaimed':>10} | {'ipyexp consumed':>16} {'err':>7} {'reclaimed':>10}")
    for (mib, dc, dr), (_, pc, pr) in zip(d_rows, p_rows):
        true = mib * MIB
        print(f"{mib:>7} | {dc / MIB:>13.2f} M {100 * (dc - true) / true:>+6.2f}% {dr / MIB:>8.2f} M |"
              f" {pc / MIB:>14.2f} M {100 * (pc - true) / true:>+6.2f}% {pr / MIB:>8.2f} M")
    print("\n== A 256 MiB spike freed in the same cell: cell logger △Peaked, △Consumed ==")
    print(f"(VmHWM tolerance on this machine: {tol / 1024:.0f} KiB)")
    for (hold, dp, dc), (_, pp, pc) in zip(d_spikes, p_spikes):
        print(f"held {hold} ms: dryml-rust peaked {dp / MIB:8.2f} MiB consumed {dc / MIB:6.2f} MiB |"
              f" ipyexperiments peaked {pp / MIB:8.2f} MiB consumed {pc / MIB:6.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
