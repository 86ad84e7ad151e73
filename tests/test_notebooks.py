"""Executes every notebook in notebooks/ with nbclient; any error output fails the test."""
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_clean(path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="dryml-rust", timeout=600, startup_timeout=120).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    # Every code cell produced something (the tour's cells all print or return).
    assert all(c.outputs for c in nb.cells if c.cell_type == "code")
