"""The benchmarks' private Jupyter prefix: this checkout's release build installed as the
`dryml-rust` kernelspec in a temporary directory, found first, with history kept there too."""
import contextlib
import os
import shutil
import subprocess
import tempfile
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
