"""The clients people run notebooks with besides JupyterLab, each the real tool from PyPI driving
the real kernel: papermill (a notebook run with parameters), jupytext (a notebook paired with a
Rust script), jupyter console (in a terminal, tmux's)."""
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from procs import command_of, environ_of

BIN = Path(sys.executable).parent
PARAMETERS = """let lr: f64 = 0.1; // the learning rate
let epochs: usize = 10;
let name: String = String::from("base");
let sizes: Vec<u32> = vec![1];
let seed: Option<u64> = None;"""


def notebook(path, *cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dryml-rust", "display_name": "DRYML Rust", "language": "rust"}
    nb.metadata["language_info"] = {"name": "rust"}
    for source, tags in cells:
        nb.cells.append(nbformat.v4.new_code_cell(source, metadata={"tags": tags}))
    nbformat.write(nb, path)


def tool(name, *args, cwd):
    """The venv's command `name` run in `cwd`, its kernels without the warm-up."""
    return subprocess.run([str(BIN / name), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "DRYML_NO_WARM_UP": "1"})


def papermill(*args, cwd):
    return tool("papermill", *args, cwd=cwd)


def stdout_of(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def test_papermill_runs_a_notebook_with_parameters_typed_as_its_parameters_cell(tmp_path):
    src, out = tmp_path / "train.ipynb", tmp_path / "out.ipynb"
    use = 'println!("{} {} {} {:?} {:?}", lr * 2.0, epochs + 1, name, sizes, seed.map(|s| s + 1));'
    notebook(src, (PARAMETERS, ["parameters"]), (use, []))

    # The integer 1 for an f64, a list, a string, an Option, and one the notebook does not declare.
    run = papermill(src, out, "-k", "dryml-rust", "-p", "lr", "1", "-p", "epochs", "3", "-p", "name", "tuned",
                    "-y", "sizes: [8, 16]\nseed: 7\nextra: 2.5", "--log-output", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    nb = nbformat.read(out, as_version=4)
    injected = nb.cells[1]
    assert "injected-parameters" in injected.metadata.tags
    assert injected.source.splitlines()[0] == "%%parameters"
    assert "lr = 1" in injected.source and "sizes = [8, 16]" in injected.source
    assert not [o for o in injected.outputs if o.output_type == "error"], injected.outputs
    assert stdout_of(nb.cells[2]) == "2 4 tuned [8, 16] Some(8)\n"

    # The values as the kernel typed them: the parameters cell's declarations, not the literals.
    check = tmp_path / "check.ipynb"
    notebook(check, (PARAMETERS, ["parameters"]),
             ('let t: (f64, usize, u32, i64) = (lr, epochs, sizes[1], extra as i64); println!("{t:?}");', []))
    run = papermill(check, tmp_path / "check-out.ipynb", "-k", "dryml-rust", "-p", "lr", "1", "-y",
                    "sizes: [8, 16]\nextra: 2", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert stdout_of(nbformat.read(tmp_path / "check-out.ipynb", as_version=4).cells[2]) == "(1.0, 10, 16, 2)\n"


def test_a_parameter_that_does_not_fit_its_declared_type_fails_naming_it(tmp_path):
    src, out = tmp_path / "train.ipynb", tmp_path / "out.ipynb"
    notebook(src, (PARAMETERS, ["parameters"]), ("epochs", []))
    run = papermill(src, out, "-k", "dryml-rust", "-p", "epochs", "2.5", cwd=tmp_path)
    assert run.returncode != 0
    # papermill puts a cell of its own above the notebook's when one fails.
    injected = [c for c in nbformat.read(out, as_version=4).cells if "injected-parameters" in c.metadata.get("tags", [])]
    error = [o for o in injected[0].outputs if o.output_type == "error"]
    assert error and error[0].ename == "ParameterError", error
    assert "parameter `epochs` (line 3) is `usize`: 2.5 is not an integer" in error[0].evalue


def test_papermill_lists_a_notebooks_parameters_with_their_rust_types(tmp_path):
    src = tmp_path / "train.ipynb"
    notebook(src, (PARAMETERS, ["parameters"]))
    run = papermill("--help-notebook", src, "-k", "dryml-rust", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = {line.split(":")[0].strip(): line for line in run.stdout.splitlines() if line.startswith("  ")}
    assert "f64" in lines["lr"] and "0.1" in lines["lr"] and "the learning rate" in lines["lr"], run.stdout
    assert "Vec<u32>" in lines["sizes"], run.stdout


def jupytext(*args, cwd):
    run = tool("jupytext", *args, cwd=cwd)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def test_jupytext_pairs_a_notebook_with_a_rust_script_whose_edits_run(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dryml-rust", "display_name": "DRYML Rust", "language": "rust"}
    nb.cells += [nbformat.v4.new_markdown_cell("# Training\nA *note*."),
                 nbformat.v4.new_code_cell(':dep serde_json = "1"\nlet x: i32 = 20;'),
                 nbformat.v4.new_code_cell("%%time\nx + 1"),
                 nbformat.v4.new_code_cell('println!("{}", serde_json::json!({"twice": x * 2}));')]
    nbformat.write(nb, tmp_path / "nb.ipynb")
    jupytext("--set-formats", "ipynb,rs:percent", "nb.ipynb", cwd=tmp_path)
    script = (tmp_path / "nb.rs").read_text()
    # Percent cells, Markdown as comments, evcxr's `:dep` commented out (jupytext knows evcxr's
    # commands); our `%` magics it does not know, so they stay as written.
    body = script.split("// ---\n")[-1]
    assert body.count("// %%\n") == 3 and "// %% [markdown]\n// # Training\n" in body, script
    assert '// :dep serde_json = "1"\nlet x: i32 = 20;' in body and "\n%%time\nx + 1\n" in body, script

    # The script edited, as in an editor; the pair synced and run.
    (tmp_path / "nb.rs").write_text(script.replace("let x: i32 = 20;", "let x: i32 = 40;"))
    jupytext("--sync", "--execute", "nb.rs", cwd=tmp_path)
    cells = nbformat.read(tmp_path / "nb.ipynb", as_version=4).cells
    assert cells[1].source == ':dep serde_json = "1"\nlet x: i32 = 40;'
    assert [o["data"]["text/plain"] for o in cells[2].outputs if o.output_type == "execute_result"] == ["41"]
    assert stdout_of(cells[3]) == '{"twice":80}\n'
    assert not [o for c in cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]

    # And back: the notebook, written as a script again, is the edited script.
    jupytext("--to", "rs:percent", "-o", "again.rs", "nb.ipynb", cwd=tmp_path)
    assert (tmp_path / "again.rs").read_text().split("// ---\n")[-1] == body.replace("= 20;", "= 40;")


class Terminal:
    """A program in a tmux pane of its own tmux server, typed at and read as a user would."""

    def __init__(self, command, env):
        self.tmux = ["tmux", "-L", f"dryml-{uuid.uuid4().hex[:8]}"]
        subprocess.run([*self.tmux, "new-session", "-d", "-x", "160", "-y", "50", command], check=True,
                       env=env)

    def type(self, text):
        # tmux reads an argument ending in `;` as the end of a command: escaped, it is typed.
        subprocess.run([*self.tmux, "send-keys", "-l", text[:-1] + "\\;" if text.endswith(";") else text],
                       check=True)

    def keys(self, *keys):
        subprocess.run([*self.tmux, "send-keys", *keys], check=True)

    def screen(self):
        return subprocess.run([*self.tmux, "capture-pane", "-p", "-S", "-200"], capture_output=True,
                              text=True).stdout

    def wait_for(self, pattern, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if re.search(pattern, self.screen()):
                return
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} on the terminal within {timeout}s:\n{self.screen()}")

    def close(self):
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


def kernels_marked(marker):
    """The kernel processes whose environment holds `marker` (one test's)."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and "--connection-file" in command_of(int(p))
            and environ_of(int(p)).get("DRYML_TEST_TERMINAL") == marker]


def test_jupyter_console_runs_cells_magics_tab_and_ctrl_c(tmp_path):
    marker = uuid.uuid4().hex
    env = {**os.environ, "DRYML_NO_WARM_UP": "1", "DRYML_TEST_TERMINAL": marker}
    term = Terminal(f"{BIN / 'jupyter'} console --kernel dryml-rust", env)
    try:
        term.wait_for(r"In \[1\]:")
        term.type("let v = vec![1, 2, 3];")
        term.keys("Enter")
        term.wait_for(r"In \[2\]:")
        # A notebook's first method Tab begins the analysis's load (about 5 s where no other
        # notebook has it) and is answered within a second with what the notebook has: jupyter
        # console gives up on a completion at 5 s, with an exception on the terminal.
        term.type("v.le")
        term.keys("Tab")
        time.sleep(6)
        assert "Unhandled exception" not in term.screen(), term.screen()
        term.keys("Escape")
        term.keys("C-u")
        term.type("%env DRYML_CONSOLE=yes")
        term.keys("Enter")
        term.wait_for(r"env: DRYML_CONSOLE=yes\s+In \[3\]:")

        # Tab, again until loaded: the kernel's completions of a stored variable's methods, in
        # the console's menu.
        deadline = time.time() + 120
        while True:
            term.type("v.le")
            term.keys("Tab")
            try:
                term.wait_for(r"\blen\(\)", timeout=3)
                break
            except AssertionError:
                if time.time() > deadline:
                    raise
            finally:
                term.keys("Escape")
                term.keys("C-u")
        assert "Unhandled exception" not in term.screen(), term.screen()

        # Ctrl-C: the console asks the kernel to interrupt; a loop that checks stops, `v` is kept.
        term.type('println!("looping"); while !dryml::interrupted() { '
                  "std::thread::sleep(std::time::Duration::from_millis(10)); }")
        term.keys("Enter")
        term.wait_for(r"(?m)^looping\s*$", timeout=600)  # the output, not the typed line
        term.keys("C-c")
        term.wait_for(r"KeyboardInterrupt.*kept")
        term.type("v.len() * 10")
        term.keys("Enter")
        term.wait_for(r"Out\[\d+\]: 30")

        # The window closed: the console goes without a shutdown request, and its kernel follows
        # (its stderr was the closed terminal, whose writes fail).
        kernels = kernels_marked(marker)
        assert len(kernels) == 1, kernels
        term.close()
        deadline = time.time() + 15
        while kernels_marked(marker) and time.time() < deadline:
            time.sleep(0.2)
        assert not kernels_marked(marker), "the kernel outlived its closed console"
    finally:
        term.close()
        for pid in kernels_marked(marker):
            os.kill(pid, 9)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
