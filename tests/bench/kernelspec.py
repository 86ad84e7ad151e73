"""The benchmarks' private Jupyter prefix: this checkout's release build installed as the
`dryml-rust` kernelspec in a temporary directory, found first, with history kept there too; and
`run`, a timed cell that must succeed."""
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


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
