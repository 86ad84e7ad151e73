"""Other people's evcxr notebooks, run unchanged through a kernel cell by cell.

The notebooks are not copied into this repository: each comes from the crate that publishes it
on crates.io (the package registry, which this machine reaches), downloaded once per machine
into ~/.cache/dryml-rust/third-party and read under that crate's licence (named below).

Where a notebook fetches from the internet with a `!` line, the kernel finds `wget` and `curl`
stand-ins first on its PATH (`served/bin/`), which answer from `served/` instead.

`python tests/third_party/notebooks.py --record` runs them through evcxr_jupyter 0.22 (the
`evcxr_jupyter` binary, `cargo install evcxr_jupyter --version 0.22.0 --locked`) and writes what
each cell did to `evcxr-0.22.json`; `tests/test_third_party.py` holds our kernel to it.
"""
import argparse
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dryml-rust" / "third-party"
RECORD = HERE / "evcxr-0.22.json"

# (crate, version, the notebook's path in the crate, the crate's licence)
NOTEBOOKS = [
    ("evcxr_jupyter", "0.22.0", "samples/evcxr_jupyter_tour.ipynb", "MIT OR Apache-2.0"),
    ("showata", "0.3.2", "examples/sample_ndarray.ipynb", "Apache-2.0"),
    ("showata", "0.3.2", "examples/sample_file.ipynb", "Apache-2.0"),
    ("showata", "0.3.2", "examples/sample_nalgebra.ipynb", "Apache-2.0"),
]


def key(crate, version, path):
    return f"{crate}-{version}/{path}"


def fetch(crate, version):
    """The crate's unpacked source, downloaded from crates.io once per machine."""
    root = CACHE / f"{crate}-{version}"
    if not root.is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        url = f"https://static.crates.io/crates/{crate}/{crate}-{version}.crate"
        with urllib.request.urlopen(url, timeout=60) as r:
            data = r.read()
        tmp = Path(tempfile.mkdtemp(dir=CACHE))
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
            t.extractall(tmp, filter="data")
        try:
            (tmp / f"{crate}-{version}").rename(root)
        except OSError:
            # Another pytest worker, collecting at the same time, put its copy there first.
            if not root.is_dir():
                raise
        finally:
            shutil.rmtree(tmp)
    return root


def notebooks():
    """(key, the notebook's path, its licence) for each, fetched."""
    return [(key(c, v, p), fetch(c, v) / p, lic) for c, v, p, lic in NOTEBOOKS]


def kernel_env():
    """The stand-ins for the network first on PATH."""
    return {"PATH": f"{HERE / 'served' / 'bin'}:{os.environ['PATH']}",
            "DRYML_SERVED_DIR": str(HERE / "served")}


def text_of(cell):
    """What a cell showed, as a front end renders it, as text: its stdout and its values and
    displays in order, then its stderr (the two streams travel apart, in either kernel). Of a
    value or display, its richest form: the kinds of its rich types as markers (`<image/png>`),
    or its text/plain where it has nothing richer (the plain text beside HTML is not shown)."""
    out, err = [], []
    for o in cell["outputs"]:
        if o["type"] == "stream":
            (err if o.get("name") == "stderr" else out).append(o["text"])
        else:
            rich = sorted(k for k in o["data"] if k != "text/plain")
            out.append("".join(f"<{k}>" for k in rich) if rich else o["data"].get("text/plain", ""))
    return normal("".join(out)) + "\n--- stderr\n" + normal("".join(err))


def normal(text):
    """Text as compared: trailing spaces and blank lines dropped, `:timing`'s figure masked."""
    text = re.sub(r"Took \d+(\.\d+)?m?s", "Took <t>", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines() if line.strip())


def copy(path, to):
    """The notebook's folder copied to `to` (its cells read and write files beside it); the
    notebook's path there."""
    shutil.copytree(path.parent, to)
    return Path(to) / path.name


def bundle(msg):
    """A value or display as kept: its text/plain, and only the names of its other types (what is
    compared; the record then carries no image or page of the notebooks' own)."""
    data = msg["content"]["data"]
    return {"type": msg["msg_type"], "data": {k: (v if k == "text/plain" else "") for k, v in data.items()}}


def run(kc, path, timeout=900):
    """Runs each code cell of the notebook in order and returns, per code cell, {"source_sha256",
    "blank", "status", "ename", "outputs"}, its outputs as [{"type", "text" or "data"}]."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    out = []
    for c in cells:
        src = "".join(c["source"])
        msgs = []
        reply = kc.execute_interactive(src, timeout=timeout, output_hook=msgs.append, stop_on_error=False)
        content = reply["content"]
        outputs = [{"type": "stream", "name": m["content"]["name"], "text": m["content"]["text"]}
                   if m["msg_type"] == "stream" else bundle(m)
                   for m in msgs if m["msg_type"] in ("stream", "execute_result", "display_data")]
        # The cell's hash, not its code: the notebooks stay in their crates.
        out.append({"source_sha256": hashlib.sha256(src.encode()).hexdigest(), "blank": not src.strip(),
                    "status": content["status"], "ename": content.get("ename"), "outputs": outputs})
    return out


def start(kernel_name, cwd, env):
    from jupyter_client.manager import start_new_kernel
    return start_new_kernel(kernel_name=kernel_name, startup_timeout=300, cwd=str(cwd),
                            env={**os.environ, **env})


def evcxr_kernelspec(prefix):
    """A kernelspec named `evcxr-0.22` for the evcxr_jupyter on PATH, under `prefix`."""
    binary = shutil.which("evcxr_jupyter")
    if not binary:
        return None
    d = Path(prefix) / "share" / "jupyter" / "kernels" / "evcxr-0.22"
    d.mkdir(parents=True, exist_ok=True)
    (d / "kernel.json").write_text(json.dumps({
        "argv": [binary, "--control_file", "{connection_file}"],
        "display_name": "Rust (evcxr_jupyter 0.22)", "language": "rust", "interrupt_mode": "message"}))
    return "evcxr-0.22"


def record():
    prefix = tempfile.mkdtemp(prefix="evcxr-spec-")
    os.environ["JUPYTER_PATH"] = f"{prefix}/share/jupyter:" + os.environ.get("JUPYTER_PATH", "")
    name = evcxr_kernelspec(prefix)
    if not name:
        raise SystemExit("no evcxr_jupyter on PATH: cargo install evcxr_jupyter --version 0.22.0 --locked")
    results = {}
    for k, path, lic in notebooks():
        path = copy(path, tempfile.mkdtemp(prefix="evcxr-nb-") + "/nb")
        km, kc = start(name, path.parent, kernel_env())
        try:
            results[k] = {"licence": lic, "cells": run(kc, path)}
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        ok = sum(c["status"] == "ok" for c in results[k]["cells"])
        for i, c in enumerate(results[k]["cells"]):
            print(f"  {i} {c['status']:5} {text_of(c)[:100]!r}")
        print(f"{k}: {ok} of {len(results[k]['cells'])} cells ran")
    RECORD.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {RECORD}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", action="store_true", help="run them through evcxr_jupyter 0.22")
    if ap.parse_args().record:
        record()
