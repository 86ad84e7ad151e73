"""The cost of the debugger to a cell, as a user waits for it: a small cell (a new statement and
its value, so every cell builds) timed from its execute_request to its reply, with JupyterLab's
debugger off, then on (the panel's `initialize` and `attach` sent on control, as its bug icon
does: cells then build with debug info, unoptimised), then off again. Medians of --cells cells
each; the first cell after each switch (a build through cargo, the cell crate only) is reported
apart. Attached, it also times what JupyterLab asks after each cell: `inspectVariables`, whose
short values a hidden cell reads (once per cell; a second ask is answered from what it read).
One kernel, this checkout's release build. With --baseline BINARY (another checkout's
release build, one from before the debugger), the debugger-off cells are also run on its kernel,
cell by cell in turn with ours, so drift hits both alike.
Usage: .venv/bin/python tests/bench/bench_debugger.py [--cells 15] [--baseline BINARY]
"""
import argparse
import json
import statistics
import time

from jupyter_client.manager import KernelManager

from bench_latency import install_baseline
from kernelspec import private_kernelspec, run


def debug(kc, seq, command, arguments=None):
    msg = kc.session.msg("debug_request", {"seq": seq, "type": "request", "command": command, "arguments": arguments or {}})
    kc.control_channel.send(msg)
    while True:
        reply = kc.control_channel.get_msg(timeout=60)
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            break
    if not reply["content"].get("success"):
        raise SystemExit(f"{command}: {reply['content']}")
    return reply["content"]


def block(kc, label, start, n):
    first, _ = run(kc, f"let {label}_{start} = {start} * 3 + 1;\n{label}_{start}")
    times = [run(kc, f"let {label}_{i} = {i} * 3 + 1;\n{label}_{i}")[0] for i in range(start + 1, start + 1 + n)]
    return first, times


def started(name):
    km = KernelManager(kernel_name=name)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    run(kc, "let warm = 1;")
    return km, kc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=15)
    ap.add_argument("--baseline", help="another checkout's target/release/dryml-kernel")
    args = ap.parse_args()
    baseline = {}
    with private_kernelspec() as prefix:
        if args.baseline:
            install_baseline(args.baseline, prefix)
            bkm, bkc = started("dryml-rust-baseline")
        km, kc = started("dryml-rust")
        try:
            if args.baseline:
                ours, theirs = [], []
                for i in range(args.cells + 1):
                    code = f"let base_{i} = {i} * 3 + 1;\nbase_{i}"
                    # Each goes first every other cell: the one after pays for the other's
                    # work in the background (its analyzer, its build cache's upkeep).
                    for who in ((kc, ours), (bkc, theirs))[:: 1 if i % 2 == 0 else -1]:
                        who[1].append(run(who[0], code)[0])
                bkc.stop_channels()
                bkm.shutdown_kernel(now=True)
                baseline = {"off_s_ours": round(statistics.median(ours[1:]), 4), "off_s_baseline": round(statistics.median(theirs[1:]), 4),
                            "off_ours_over_baseline": round(statistics.median(ours[1:]) / statistics.median(theirs[1:]), 3)}
            _, off = block(kc, "off", 0, args.cells)
            debug(kc, 1, "initialize", {"clientID": "jupyterlab", "adapterID": "dryml-rust", "pathFormat": "path",
                                        "linesStartAt1": True, "columnsStartAt1": True})
            t0 = time.monotonic()
            debug(kc, 2, "attach")
            attach_s = time.monotonic() - t0
            first_on, on = block(kc, "on", 100, args.cells)
            values, again = [], []
            for i in range(300, 301 + args.cells):
                run(kc, f"let v_{i} = vec![{i}.5f32; 1000];\nv_{i}.len()")
                t0 = time.monotonic()
                shown = debug(kc, 4, "inspectVariables")["body"]["variables"]
                values.append(time.monotonic() - t0)
                t0 = time.monotonic()
                debug(kc, 5, "inspectVariables")
                again.append(time.monotonic() - t0)
                value = next(v["value"] for v in shown if v["name"] == f"v_{i}")
                assert value.startswith(f"[{i}.5, ") and value.endswith("(len 1000)"), value
            variables = len(shown)
            debug(kc, 3, "disconnect", {"restart": False, "terminateDebuggee": False})
            first_off, off_again = block(kc, "again", 200, args.cells)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    med = lambda v: round(statistics.median(v), 4)
    print(json.dumps({
        "cells": args.cells,
        "off_s": med(off),
        "on_s": med(on),
        "on_over_off": round(statistics.median(on) / statistics.median(off), 3),
        "off_again_s": med(off_again),
        "attach_s": round(attach_s, 3),
        "inspect_variables_s": med(values[1:]),
        "inspect_variables_again_s": med(again[1:]),
        "variables_shown": variables,
        "first_cell_on_s": round(first_on, 3),
        "first_cell_off_again_s": round(first_off, 3),
        **baseline,
    }))


if __name__ == "__main__":
    main()
