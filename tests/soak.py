"""Soak (issue 14): one kernel through a long notebook of ordinary and hostile cells, with the
kernel's RSS, open fds and threads sampled throughout.

    .venv/bin/python tests/soak.py --cells 2000 [--seed 1] [--out soak.json]

Cells mix output (stdout, stderr floods, displays and display updates), compile errors, panics,
interrupts at random moments (a running loop, a wait for input, a sandbox, a build), `%%compute`
sandboxes, experiments, objects written to a repo and read back, answered input, variables of
the notebook's own types, and dependencies added after them (path crates; linfa once). Between
cells, raw garbage, wrongly signed messages and an oversized frame header go to every socket.
Every request is collected through the tests' strict client (conftest.Kernel): a request without
its reply, or any message nobody asked for, ends the run. At the end every kept variable must
still hold its value and the repo must load in full. `tests/test_soak.py` runs a short soak in
the suite; the README has a full run's figures."""
import argparse
import collections
import json
import os
import random
import re
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import conftest  # noqa: E402
from conftest import Kernel, of_type, stderr_of, stdout_of  # noqa: E402
from procs import command_of, rss_mib  # noqa: E402

TYPES = """use dryml::{Build, Meta, Object, State};
use dryml::objects::ObjectError;
#[derive(dryml::Object)]
#[dryml(name = "soak.Run")]
struct SoakRun { args: (u64, String), meta: Meta, weights: Vec<f32> }
impl Build for SoakRun {
    type Args = (u64, String);
    fn build(args: (u64, String), meta: Meta) -> Self {
        SoakRun { weights: vec![args.0 as f32; 16], args, meta }
    }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> { s.put("weights", &self.weights) }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> { self.weights = s.get("weights")?; Ok(()) }
}"""

POLL_LOOP = "while !dryml::interrupted() { std::thread::sleep(std::time::Duration::from_millis(5)); }"


def proc_figures(pid):
    """(RSS MiB, open fds, threads) of the kernel's process, the RSS MiB of its analysis process
    (evcxr's rust-analyzer, 0 while none runs), and each process counted there: [pid, command,
    RSS MiB]."""
    threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads"):
                threads = int(line.split()[1])
    parts = [[p, command_of(p), rss_mib(p)] for p in conftest.analysis_pids(pid)]
    return rss_mib(pid), len(os.listdir(f"/proc/{pid}/fd")), threads, sum(p[2] for p in parts), parts


class Sampler(threading.Thread):
    def __init__(self, pid, every=0.5):
        super().__init__(daemon=True)
        self.pid, self.every, self.samples, self.stop = pid, every, [], threading.Event()
        self.t0 = time.time()
        self.peak_parts = (0, [])  # (kernel and analysis MiB, the analysis's parts) at the highest

    def run(self):
        while not self.stop.wait(self.every):
            try:
                *sample, parts = (round(time.time() - self.t0, 1), *proc_figures(self.pid))
                self.samples.append(tuple(sample))
                if sample[1] + sample[4] > self.peak_parts[0]:
                    self.peak_parts = (sample[1] + sample[4], parts)
            except OSError:
                return


class Soak:
    def __init__(self, kernel, rng, repo_dir):
        self.k, self.rng, self.repo_dir = kernel, rng, repo_dir
        self.kept = {}                      # variable -> its text/plain value
        self.counts = collections.Counter()  # cell kind -> cells run
        self.added = 0                       # objects added to the repo
        self.framework_named = False         # a `new_dep` cell has added linfa
        self.interrupt_waits = []            # seconds from interrupt to the cell's reply
        self.n = 0

    # ---- running cells ---------------------------------------------------------------------

    def cell(self, kind, code, want="ok", timeout=600, stdin_answers=None):
        """Runs one cell; its reply must have status `want` (an ename for errors)."""
        reply, msgs = self.k.execute(code, timeout=timeout, stdin_answers=stdin_answers)
        self.check(kind, code, reply, want)
        return reply, msgs

    def check(self, kind, code, reply, want):
        self.counts[kind] += 1
        got = reply["status"] if reply["status"] != "error" else reply["ename"]
        wants = want if isinstance(want, tuple) else (want,)
        if got not in wants:
            tb = "\n".join(reply.get("traceback", []))[-2000:]
            raise AssertionError(f"{kind} cell gave {got} ({reply.get('evalue')}), wanted {want}:\n{code}\n{tb}")

    def interrupted(self, kind, code, wait, want=("KeyboardInterrupt",), stdin=False):
        """Sends code, interrupts it after `wait` s (or once it asks for input), and checks the
        cell ends within 2 s of the interrupt."""
        msg_id = self.k.send("execute", code, allow_stdin=stdin)
        if stdin:
            self.k.input_request(msg_id)
        time.sleep(wait)
        reply, _, took = self.k.interrupt_collect(msg_id)
        self.interrupt_waits.append(took)
        if took > 2:
            raise AssertionError(f"{kind}: the cell ended {took:.1f} s after the interrupt")
        self.check(kind, code, reply, want)

    def value(self, code):
        _, msgs = self.cell("check", code)
        return of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]

    # ---- the cell kinds --------------------------------------------------------------------

    def keep(self):
        name, v = f"keep_{self.n}", self.rng.randrange(1 << 40)
        self.cell("keep", f"let {name}: u64 = {v};")
        self.kept[name] = str(v)

    def own_type(self):
        # A type of the notebook's own and a variable of it, read back by `check_kept` and at
        # the end: no dependency added later (`new_dep`, `interrupt_build`) may drop it.
        v = self.rng.randrange(1 << 40)
        self.cell("own type", f"struct Own{self.n} {{ v: u64, tag: String }}\n"
                              f"let own_{self.n} = Own{self.n} {{ v: {v}, tag: \"t\".into() }};")
        self.kept[f"own_{self.n}.v"] = str(v)

    def new_dep(self):
        # A dependency the cell crate did not have: a path crate of its own each time, and in a
        # long soak once a framework feature of dryml (linfa, built cold in the soak's cache).
        if self.n > 300 and not self.framework_named:
            _, msgs = self.cell("new dep", "dryml::models::linfa::iris().count().unwrap()", timeout=1800)
            self.framework_named = True
        else:
            crate = self.repo_dir.parent / f"soakdep{self.n}"
            (crate / "src").mkdir(parents=True)
            (crate / "Cargo.toml").write_text(f'[package]\nname = "soakdep{self.n}"\nversion = "0.1.0"\nedition = "2021"\n')
            (crate / "src" / "lib.rs").write_text(f"pub const ID: u64 = {self.n};\n")
            _, msgs = self.cell("new dep", f':dep soakdep{self.n} = {{ path = "{crate}" }}\nsoakdep{self.n}::ID')
        # Only values of dryml's own types may go, when dryml is built again with a feature
        # (said, with the name); no variable the soak keeps, of the notebook's types or std's.
        text = stderr_of(msgs)
        kept = {k.split(".")[0] for k in self.kept}
        for name, ty in re.findall(r"`(\w+)` was a `(.*?)` as defined", text):
            assert "dryml::" in ty and name not in kept, text
        assert text.count("was dropped") == len(re.findall(r"`\w+` was a `", text)), text

    def check_kept(self):
        if self.kept:
            name = self.rng.choice(sorted(self.kept))
            got = self.value(name)
            assert got == self.kept[name], f"{name} = {got}, kept {self.kept[name]}"

    def prints(self):
        n = self.rng.randrange(1, 200)
        _, msgs = self.cell("stdout", f'for i in 0..{n} {{ println!("line {{i}}"); }}')
        assert f"line {n - 1}\n" in stdout_of(msgs)

    def flood(self):
        n = self.rng.choice([100_000, 300_000])
        stream = self.rng.choice(["eprintln", "println"])
        _, msgs = self.cell("flood", f'for i in 0..{n}u64 {{ {stream}!("flood {{i}} of a warning per batch"); }}')
        text = (stderr_of if stream == "eprintln" else stdout_of)(msgs)
        assert f"flood {n - 1} " in text, "the newest lines are shown"

    def displays(self):
        n = self.rng.randrange(2, 60)
        self.cell("display", f'dryml::display::html("<b>soak {self.n}</b>");\n'
                  f'for i in 0..{n} {{ dryml::display::display(&[("text/plain", &format!("{{i}}/{n}"))], '
                  f'if i == 0 {{ dryml::display::Update::InPlace("bar-{self.n}") }} else {{ dryml::display::Update::Replace("bar-{self.n}") }}); }}')

    def compile_error(self):
        self.cell("compile error", f'let bad_{self.n}: u32 = "soak";', want="CompilationError")

    def panics(self):
        _, _ = self.cell("panic", f'panic!("soak {self.n}");', want="panic")

    def interrupt_loop(self):
        self.interrupted("interrupt running", POLL_LOOP, self.rng.uniform(0.3, 1.5))

    def interrupt_input(self):
        self.interrupted("interrupt input", f'let s_{self.n} = dryml::input("soak? ");', self.rng.uniform(0, 0.5),
                         stdin=True)

    def answered_input(self):
        _, msgs = self.cell("input", 'let answer = dryml::input("soak? "); answer', stdin_answers=[f"a{self.n}"])
        assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == f'"a{self.n}"'

    def sandbox(self):
        n = self.rng.randrange(1, 100_000)
        _, msgs = self.cell("sandbox", f"%%compute\nlet total: u64 = (0..{n}u64).sum();\ntotal")
        assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == str(n * (n - 1) // 2)

    def interrupt_sandbox(self):
        code = ('let r = dryml::Compute::new(&dryml::compute::context::Requests::parse("default num_cpus=0").unwrap()).run('
                '|| std::thread::sleep(std::time::Duration::from_secs(30))); format!("{r:?}")')
        self.interrupted("interrupt sandbox", code, self.rng.uniform(0.5, 1.5))

    def interrupt_build(self):
        # A crate not built yet: each try builds a little more, so late tries may finish.
        code = ':dep regex = "1"\nlet re = regex::Regex::new("a+").unwrap(); re.is_match("aa")'
        self.interrupted("interrupt build", code, self.rng.uniform(0.5, 1.5), want=("KeyboardInterrupt", "ok"))

    def experiment(self):
        self.cell("experiment", f"%%experiment soak-{self.n}\nlet exp_{self.n} = vec![1u8; {self.rng.randrange(1, 64)} << 10];")

    def repo_add(self):
        self.cell("repo add", f'dryml::objects::Repo::open("{self.repo_dir}").unwrap()'
                  f'.add(&SoakRun::build(({self.n}, "run".into()), Meta::new())).unwrap();')
        self.added += 1

    def repo_query(self):
        got = self.value(f'dryml::objects::Repo::open("{self.repo_dir}").unwrap().len()')
        assert got == str(self.added), f"the repo holds {got}, {self.added} were added"

    # ---- hostile traffic -------------------------------------------------------------------

    def garbage(self, zctx):
        """Raw garbage, wrongly signed and truncated messages on every socket, and now and then
        a frame header claiming 2^60 bytes. None of it may get a reply or stop the kernel."""
        import zmq
        info = self.k.km.get_connection_info()
        ip = info["ip"]
        forged = [b"<IDS|MSG>", b"0" * 64, json.dumps({"msg_id": "x", "msg_type": "execute_request"}).encode(),
                  b"{}", b"{}", json.dumps({"code": "panic!()"}).encode()]
        junk = [[b"garbage"], [b"<IDS|MSG>"], [b"<IDS|MSG>", b"", b"not json", b"{}", b"{}", b"{}"], forged,
                [bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(1, 300)))]]
        for port in ("shell_port", "control_port", "stdin_port"):
            s = zctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 200)
            s.connect(f"tcp://{ip}:{info[port]}")
            for frames in self.rng.sample(junk, 3):
                s.send_multipart(frames)
            s.close()
        sub = zctx.socket(zmq.XSUB)
        sub.setsockopt(zmq.LINGER, 200)
        sub.connect(f"tcp://{ip}:{info['iopub_port']}")
        sub.send_multipart([b"\x05junk"])
        sub.send_multipart([b"\x00"])
        sub.close()
        hb = zctx.socket(zmq.REQ)
        hb.setsockopt(zmq.LINGER, 0)
        hb.setsockopt(zmq.RCVTIMEO, 5000)
        hb.connect(f"tcp://{ip}:{info['hb_port']}")
        hb.send(b"\xff" * 100)
        assert hb.recv() == b"\xff" * 100, "the heartbeat echoes"
        hb.close()
        if self.rng.random() < 0.2:
            greeting = b"\xff" + b"\x00" * 8 + b"\x7f\x03\x00NULL" + b"\x00" * 48
            port = info[self.rng.choice(["shell_port", "control_port", "stdin_port", "iopub_port"])]
            with socket.create_connection((ip, port)) as raw:
                raw.sendall(greeting + b"\x06" + struct.pack(">Q", 1 << 60))
                time.sleep(0.05)
        self.counts["garbage bursts"] += 1

    # ---- the run ---------------------------------------------------------------------------

    KINDS = [("keep", 14), ("check_kept", 6), ("prints", 14), ("flood", 1), ("displays", 7),
             ("compile_error", 7), ("panics", 5), ("interrupt_loop", 4), ("interrupt_input", 3),
             ("answered_input", 3), ("sandbox", 5), ("interrupt_sandbox", 2), ("interrupt_build", 0.4),
             ("experiment", 4), ("repo_add", 5), ("repo_query", 2), ("own_type", 4), ("new_dep", 1.5)]

    def run(self, cells, zctx, progress):
        self.cell("setup", TYPES)
        names, weights = zip(*self.KINDS)
        while self.n < cells:
            self.n += 1
            getattr(self, self.rng.choices(names, weights)[0])()
            if self.rng.random() < 0.05:
                self.garbage(zctx)
            if progress and self.n % 100 == 0:
                print(f"  {self.n} cells, {dict(self.counts)}", flush=True)
        # Every kept variable, in batches; then the repo, in full.
        names = sorted(self.kept)
        for i in range(0, len(names), 50):
            batch = names[i:i + 50]
            got = self.value(f"vec![{', '.join(batch)}]")
            assert got == f"[{', '.join(self.kept[n] for n in batch)}]", f"kept variables changed: {got}"
        loaded = self.value(f'{{ let r = dryml::objects::Repo::open("{self.repo_dir}").unwrap(); '
                            f'r.entries().iter().filter(|e| r.by_id(&e.meta.id).is_ok()).count() }}')
        assert loaded == str(self.added), f"{loaded} of {self.added} objects load"


def soak(cells, seed=1, progress=False):
    """Runs the soak; returns its figures (raises on any failure)."""
    import zmq
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="dryml-soak-"))
    repo_dir = workdir / "repo"
    # A build cache of its own: the `:dep` builds that get interrupted start cold.
    # Its own analysis process: the soak counts it.
    k = Kernel({"DRYML_BUILD_CACHE": str(workdir / "cache"), **conftest.NO_NVML}, own_analysis=True)
    zctx = zmq.Context()
    try:
        pid = k.km.provisioner.process.pid
        reply, _ = k.execute(f'%repo open {repo_dir} --create', timeout=600)
        assert reply["status"] == "ok", reply
        # The baseline is a settled kernel: evcxr's analyzer (its own process) loads the standard
        # library (about 400 MiB) after the start, and, once a cell names `dryml`, dryml's
        # crates (ndarray, csv, serde: about 100 MiB more). Those loads are not growth.
        reply, _ = k.execute('let soak_settled = dryml::ObjectDef::new("Settled", &1).is_ok();', timeout=600)
        assert reply["status"] == "ok", reply
        start = proc_figures(pid)
        sampler = Sampler(pid)
        sampler.start()
        s = Soak(k, rng, repo_dir)
        t0 = time.time()
        s.run(cells, zctx, progress)
        took = time.time() - t0
        sampler.stop.set()
        sampler.join()
        end = proc_figures(pid)
        k.assert_drained()
        samples = sampler.samples or [(0, *end[:4])]
        return {
            "cells": s.n, "seconds": round(took), "kinds": dict(s.counts), "objects": s.added,
            "kept_variables": len(s.kept), "replies_missing": 0,
            "rss_mib": {"start": round(start[0]), "peak": round(max(x[1] for x in samples)), "end": round(end[0])},
            "fds": {"start": start[1], "peak": max(x[2] for x in samples), "end": end[1]},
            "threads": {"start": start[2], "peak": max(x[3] for x in samples), "end": end[2]},
            "analysis_rss_mib": {"start": round(start[3]), "peak": round(max(x[4] for x in samples)),
                                 "end": round(end[3])},
            "kernel_and_analysis_peak_mib": round(max(x[1] + x[4] for x in samples)),
            # What made up the analysis at that peak (more than one server would be a bug).
            "analysis_at_peak": [[p, command, round(mib)] for p, command, mib in sampler.peak_parts[1]],
            "interrupt_to_reply_s": {"max": round(max(s.interrupt_waits, default=0), 2),
                                     "median": round(sorted(s.interrupt_waits)[len(s.interrupt_waits) // 2], 2)
                                     if s.interrupt_waits else 0},
            "samples": samples,
        }
    finally:
        zctx.destroy(linger=0)
        k.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="write the figures and the samples here (JSON)")
    args = ap.parse_args()
    conftest.pytest_configure(None)
    try:
        figures = soak(args.cells, args.seed, progress=True)
    finally:
        conftest.pytest_unconfigure(None)
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1))
    del figures["samples"]
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
