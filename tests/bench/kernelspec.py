"""The benchmarks' private Jupyter prefix: this checkout's release build installed as the
`dryml-rust` kernelspec in a temporary directory, found first, with history kept there too, and
another build beside it as `dryml-rust-baseline` (`install_baseline`); and
`run`, a timed cell that must succeed; `torch_env`, what a kernel without our set-up (evcxr_jupyter,
a plain program) needs to build and load tch; `TCH_DEP`, the `:dep` line that brings it."""
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
# The tch that dryml's torch feature builds against (libtorch 2.13.0 in the venv).
TCH_DEP = ':dep tch = "=0.26.0"'


def torch_env():
    """The environment with libtorch from the venv: torch-sys finds it through the venv's Python,
    a process that loads it through LD_LIBRARY_PATH (our kernel does both by itself)."""
    venv = ROOT / ".venv"
    lib = next(venv.glob("lib/python3*/site-packages/torch/lib"))
    env = dict(os.environ, LIBTORCH_USE_PYTORCH="1", PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
    env["LD_LIBRARY_PATH"] = ":".join(filter(None, [str(lib), os.environ.get("LD_LIBRARY_PATH")]))
    return env


@contextlib.contextmanager
def private_kernelspec():
    """Yields the prefix (a Path); removes it afterwards."""
    jdir = tempfile.mkdtemp(prefix="dryml-bench-")
    os.environ["JUPYTER_PATH"] = os.pathsep.join([f"{jdir}/share/jupyter", os.environ.get("JUPYTER_PATH", "")])
    os.environ.setdefault("DRYML_HISTORY_FILE", f"{jdir}/history.sqlite")
    subprocess.run([str(ROOT / "target/release/dryml-kernel"), "install", "--prefix", jdir], check=True,
                   stdout=subprocess.DEVNULL)
    try:
        yield Path(jdir)
    finally:
        shutil.rmtree(jdir, ignore_errors=True)


def install_baseline(binary, prefix):
    """The kernelspec `dryml-rust-baseline`: the one `binary` installs (so its cells link its own
    checkout's runtime), under another name."""
    own = Path(tempfile.mkdtemp(prefix="dryml-baseline-"))
    subprocess.run([str(binary), "install", "--prefix", str(own)], check=True, stdout=subprocess.DEVNULL)
    spec = prefix / "share" / "jupyter" / "kernels" / "dryml-rust-baseline"
    shutil.copytree(own / "share" / "jupyter" / "kernels" / "dryml-rust", spec)
    shutil.rmtree(own, ignore_errors=True)
    data = json.loads((spec / "kernel.json").read_text())
    data["display_name"] += " (baseline)"
    (spec / "kernel.json").write_text(json.dumps(data, indent=1))


def run(kc, code, timeout=600):
    """Runs a cell that must succeed; returns (seconds, its stream and error text)."""
    out = []

    def hook(m):
        if m["msg_type"] == "stream":
            out.append(m["content"]["text"])
        elif m["msg_type"] == "error":
            out.append("ERROR " + m["content"]["ename"] + ": " + m["content"]["evalue"])

    t0 = time.perf_counter()
    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
    dt = time.perf_counter() - t0
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"{code[:60]!r} failed: {reply['content'].get('evalue')} {''.join(out)}")
    return dt, "".join(out)
