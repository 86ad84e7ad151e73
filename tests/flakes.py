"""The flake hunt: runs chosen end-to-end and browser tests N times, alone and under CPU load (two
busy processes beside them, as on a loaded 2-core machine), and prints each test's failure count.

    .venv/bin/python tests/flakes.py                      # the `timing` tests and the browser, 20 runs
    .venv/bin/python tests/flakes.py --runs 5 tests/test_kernel.py::test_interrupt_keeps_kernel
    .venv/bin/python tests/flakes.py --runs 20 --modes loaded --browser browser/debugger.test.mjs

Each run is one pytest session (one junit report) and one `node --test` per browser file, so a
test that leans on an earlier one's state fails here as it would in the suite. The table goes to
stdout and to target/test-artifacts/flakes/table.md; the log of every failed run is kept beside
it. Needs a release build (DRYML_KERNEL_BIN) and the venv; `bash tests/run.sh` once sets up both.
"""
import argparse
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "target" / "test-artifacts" / "flakes"

# The end-to-end tests that wait on time or ordering (interrupts and their grace periods, output
# that must arrive before idle, redraws and their throttle, the warm-up, the soak's figures) carry
# the `timing` mark; and the browser suite (the debugger's events among them).
TIMED = ["-m", "timing", "tests"]
BROWSER = ["browser/debugger.test.mjs", "browser/notebook.test.mjs"]


def busy(n):
    """n processes that spin a core each until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def cases(report):
    """(test id, passed) for every test case of a junit report (pytest's or node's)."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError):
        return []
    out = []
    for case in root.iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        test = f"{cls.replace('.', '/')}.py::{name}" if cls.startswith("tests.") else f"{cls}::{name}".strip(":")
        failed = any(c.tag in ("failure", "error") for c in case)
        if any(c.tag == "skipped" for c in case):
            continue
        out.append((test, not failed))
    return out


def run_pytest(tests, tag, timeout):
    report = OUT / f"{tag}.pytest.xml"
    log = OUT / f"{tag}.pytest.log"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=900",
           f"--junitxml={report}", *tests]
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    got = cases(report)
    if rc not in (0, 5) and not any(not ok for _, ok in got):
        got.append(("pytest session " + " ".join(tests), False))  # collection error, crash, timeout
    return got, log


def run_browser(file, tag, timeout):
    report = OUT / f"{tag}.{Path(file).stem}.xml"
    log = OUT / f"{tag}.{Path(file).stem}.log"
    cmd = ["node", "--test", "--test-concurrency=1", "--test-reporter=junit",
           f"--test-reporter-destination={report}", "--test-reporter=spec", "--test-reporter-destination=stdout", file]
    env = {**os.environ, "DRYML_ARTIFACTS": str(OUT / f"{tag}.{Path(file).stem}.shots")}
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, cwd=ROOT / "tests", env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    # Node names a case by its own title (its describe is the suite around it).
    got = [(f"tests/{file}::{name.split('::')[-1]}", ok) for name, ok in cases(report)]
    if rc != 0 and not any(not ok for _, ok in got):
        got.append((f"tests/{file}", False))
    return got, log


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tests", nargs="*", help="pytest node ids or files (default: the timed set)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--modes", default="alone,loaded", help="alone, loaded, or alone,loaded (the default)")
    ap.add_argument("--browser", action="append", help="a browser test file under tests/ (repeatable)")
    ap.add_argument("--no-browser", action="store_true", help="only the pytest tests")
    ap.add_argument("--load", type=int, default=2, help="busy processes in the loaded mode")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds one session may take")
    ap.add_argument("--budget", type=int, help="seconds in all: no run starts that would likely end past it "
                    "(the table counts the runs done)")
    args = ap.parse_args()
    tests = args.tests or ([] if args.browser else TIMED)
    browser = [] if args.no_browser else (args.browser or ([] if args.tests else BROWSER))
    modes = [m for m in args.modes.split(",") if m]
    if bad := [m for m in modes if m not in ("alone", "loaded")]:
        ap.error(f"--modes: unknown mode {bad[0]!r} (alone, loaded)")
    os.environ.setdefault("DRYML_KERNEL_BIN", str(ROOT / "target" / "release" / "dryml-kernel"))
    os.environ.setdefault("VENV", str(ROOT / ".venv"))
    OUT.mkdir(parents=True, exist_ok=True)

    fails = defaultdict(lambda: defaultdict(int))   # test -> mode -> failures
    runs = defaultdict(lambda: defaultdict(int))    # test -> mode -> runs
    kept = []
    started = time.time()
    done = 0
    for i in range(1, args.runs + 1):
        spent = time.time() - started
        if args.budget and done and spent + spent / done > args.budget:
            print(f"stopping after {done} runs: another would end past the {args.budget} s budget", flush=True)
            break
        for mode in modes:
            load = busy(args.load) if mode == "loaded" else []
            try:
                sessions = ([lambda tag: run_pytest(tests, tag, args.timeout)] if tests else []) + \
                    [lambda tag, f=f: run_browser(f, tag, args.timeout) for f in browser]
                for session in sessions:
                    tag = f"run{i:02d}.{mode}"
                    got, log = session(tag)
                    for test, ok in got:
                        runs[test][mode] += 1
                        fails[test][mode] += not ok
                    bad = [t for t, ok in got if not ok]
                    if bad:
                        kept.append(log)
                        print(f"run {i} {mode}: FAILED {', '.join(bad)} (log: {log.relative_to(ROOT)})", flush=True)
                    else:
                        log.unlink(missing_ok=True)
            finally:
                for p in load:
                    p.kill()
                    p.wait()
        done = i
        print(f"run {i}/{args.runs} done, {time.time() - started:.0f} s", flush=True)

    header = "| test | " + " | ".join(f"{m}: failed/runs" for m in modes) + " |"
    lines = [header, "|" + " --- |" * (len(modes) + 1)]
    for test in sorted(runs):
        lines.append(f"| `{test}` | " + " | ".join(f"{fails[test][m]}/{runs[test][m]}" for m in modes) + " |")
    total = sum(sum(f.values()) for f in fails.values())
    summary = f"{len(runs)} tests, {done} runs per mode ({', '.join(modes)}, load: {args.load} busy processes), " \
              f"{total} failures, {time.time() - started:.0f} s"
    table = "\n".join(lines + ["", summary])
    (OUT / "table.md").write_text(table + "\n")
    print(table)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
