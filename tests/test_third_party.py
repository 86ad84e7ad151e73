"""Other people's evcxr notebooks, run unchanged through our kernel cell by cell: every cell that
evcxr_jupyter 0.22 runs, ours runs, with the same output (text, and the kinds of its rich
outputs: images, HTML). evcxr's results are `tests/third_party/evcxr-0.22.json`, recorded by
running the same notebooks through evcxr_jupyter (`notebooks.py --record`). With
DRYML_EVCXR_LIVE=1 and an evcxr_jupyter on PATH, it is run here instead of reading the record
(about 8 minutes more: evcxr builds each notebook's crates anew)."""
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "third_party"))
import notebooks as third_party  # noqa: E402

RECORDED = json.loads(third_party.RECORD.read_text())

NOTEBOOKS = third_party.notebooks()
TOUR = "evcxr_jupyter-0.22.0/samples/evcxr_jupyter_tour.ipynb"

# Cells whose output is not compared, only that they ran: (notebook, code cell index) -> why.
NOT_COMPARED = {
    # A thread counts while the cells run: the figure is the time between them.
    (TOUR, 10): "a clock's value",
    (TOUR, 11): "a clock's value",
    # evcxr writes the `?`'s error to stderr after the reply; whether it is read is a race.
    (TOUR, 19): "evcxr's late stderr",
}


# Where ours differs from evcxr's on purpose: (notebook, cell) -> (why, evcxr's text made what
# ours must show). evcxr loses `m`, a value of the notebook's own type, when the image cell adds
# its `:dep`s (its known bug; README, "nothing lost"); ours keeps it and says nothing.
LOST_M = "The type of the variable m was redefined, so was lost."
# showata pins ndarray 0.14: evcxr shows its arrays' Debug text, ours the same table as dryml's
# own arrays (issue 73: tables for any release a notebook pins).
NDARRAY = "showata-0.3.2/examples/sample_ndarray.ipynb"
ARRAY_DEBUG = re.compile(r"\[.*?\], shape=\[[\d, ]*\], strides=\[[-\d, ]*\], layout=\w+ \(0x[0-9a-f]+\), "
                         r"(const|dynamic) ndim=\d+", re.S)
AS_TABLE = ("ours shows the array as a table", lambda t: ARRAY_DEBUG.sub("<text/html>", t))
ADJUSTED = {
    (TOUR, 15): ("evcxr says it lost `m`; ours kept it", lambda t: t.replace(LOST_M, "").rstrip() + "\n"),
    **{(NDARRAY, i): AS_TABLE for i in (5, 6, 7)},
}


def run_through(kernel_name, path, tmp):
    path = third_party.copy(path, tmp / "nb")
    km, kc = third_party.start(kernel_name, path.parent, third_party.kernel_env())
    try:
        return third_party.run(kc, path)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def compare(key, ours, theirs):
    """Every cell evcxr ran, ours ran, with the same output."""
    assert [c["source_sha256"] for c in ours] == [c["source_sha256"] for c in theirs], "the notebook changed"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if b["status"] != "ok":
            continue
        assert a["status"] == "ok", (key, i, a["ename"], a["outputs"])
        # An empty cell: evcxr runs it (its `:timing` line shows), ours skips it.
        if (key, i) in NOT_COMPARED or b["blank"]:
            continue
        want, got = third_party.text_of(b), third_party.text_of(a)
        if (key, i) in ADJUSTED:
            want = ADJUSTED[key, i][1](want)
        assert got == want, (key, i)


@pytest.mark.parametrize("key,path,licence", NOTEBOOKS, ids=[Path(k).name for k, _, _ in NOTEBOOKS])
def test_a_third_party_notebook_runs_as_under_evcxr(key, path, licence, tmp_path, monkeypatch):
    assert RECORDED[key]["licence"] == licence
    theirs = RECORDED[key]["cells"]
    if os.environ.get("DRYML_EVCXR_LIVE") and shutil.which("evcxr_jupyter"):
        spec = third_party.evcxr_kernelspec(tmp_path / "spec")
        monkeypatch.setenv("JUPYTER_PATH", f"{tmp_path / 'spec' / 'share' / 'jupyter'}:{os.environ['JUPYTER_PATH']}")
        theirs = run_through(spec, path, tmp_path / "evcxr")
    assert sum(c["status"] == "ok" for c in theirs) >= len(theirs) // 2, "evcxr ran few of its cells"
    compare(key, run_through("dryml-rust", path, tmp_path / "ours"), theirs)
