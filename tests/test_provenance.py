"""Provenance: an object a repo stores says how it was made (the folder's git state, the cells,
the cell crate's crates, the toolchain, the GPUs, the seed), `%repo show` prints it, and
`%repo diff` sets two runs side by side."""
import subprocess

from conftest import DATA_MIME, displays, ok, running_kernel, stdout_of, value

GIB = 1 << 30

TYPES = """use dryml::{Build, Meta, State};
use dryml::objects::ObjectError;
#[derive(dryml::Object)]
struct Run { args: serde_json::Value, meta: Meta }
impl Build for Run {
    type Args = serde_json::Value;
    fn build(args: serde_json::Value, meta: Meta) -> Self { Run { args, meta } }
    fn save_state(&self, _: &mut State) -> Result<(), ObjectError> { Ok(()) }
    fn load_state(&mut self, _: &State) -> Result<(), ObjectError> { Ok(()) }
}"""


def git(d, *args):
    return subprocess.run(["git", *args], cwd=d, check=True, capture_output=True, text=True).stdout.strip()


def dirty_checkout(work):
    """A git checkout in `work`: one commit on `main`, and `train.rs` changed since. Its HEAD."""
    git(work, "init", "-q", "-b", "main")
    (work / "train.rs").write_text("fn main() {}\n")
    git(work, "add", "train.rs")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git(work, "rev-parse", "HEAD")
    (work / "train.rs").write_text("fn main() { println!(\"changed\"); }\n")
    return head


def store(k, repo, id, lr):
    """A run with `lr` and seed 7, stored in `repo` as `id`."""
    code = (f'let mut repo = dryml::Repo::open("{repo}").unwrap();\n'
            f'repo.add(&Run::build(serde_json::json!({{"lr": {lr}, "seed": 7}}), Meta::with_id("{id}"))).unwrap()')
    assert value(k, code) == f'"{id}"'


def shown(k, id):
    d = displays(ok(k, f"%repo show {id}"))[0]
    return d["text/plain"], d[DATA_MIME]["provenance"]


def test_a_stored_object_says_how_it_was_made(fake_gpu_kernel, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    head = dirty_checkout(work)
    diff = subprocess.run("git diff HEAD --binary | git hash-object --stdin", shell=True, cwd=work,
                          check=True, capture_output=True, text=True).stdout.strip()
    repo = tmp_path / "repo"
    gpus = f"gpu 0 00000000:5E:00.0 GPU-aaaa1111 {80 * GIB} {80 * GIB} Fake H100\n"
    with fake_gpu_kernel(gpus) as k:
        ok(k, f"%cd {work}")
        ok(k, ':dep serde_json = "1"\n:dep hex = "=0.4.2"', timeout=1200)
        ok(k, TYPES, timeout=600)
        assert "Created repo" in stdout_of(ok(k, f"%repo open {repo} --create"))
        store(k, repo, "dirty-run", 0.1)
        text, p = shown(k, "dirty-run")
        assert p["git"] == {"commit": head, "branch": "main", "dirty": True, "diff": diff}, p
        assert p["crates"]["hex"] == "0.4.2" and "dryml" in p["crates"], p["crates"]
        assert p["rustc"].startswith("rustc 1.") and p["cargo"].startswith("cargo 1."), p
        assert p["gpus"] == [{"name": "Fake H100", "memory": 80 * GIB, "driver": "555.42.06"}], p
        assert p["seed"] == 7 and p["cells"]["count"] >= 4 and len(p["cells"]["sha256"]) == 64, p
        assert p["host"] and p["dryml"], p
        for line in (f"git.commit: {head}", "git.dirty: true", "crate hex: 0.4.2", "seed: 7",
                     "gpu 0: Fake H100 (80 GiB), driver 555.42.06"):
            assert f"  {line}\n" in text, (line, text)
        # Committed, the next run is clean; its cells are more.
        git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
        store(k, repo, "clean-run", 0.1)
        _, clean = shown(k, "clean-run")
        assert clean["git"]["dirty"] is False and clean["git"]["diff"] is None, clean["git"]
        assert clean["git"]["commit"] == git(work, "rev-parse", "HEAD") != head, clean["git"]
        assert clean["cells"]["count"] > p["cells"]["count"], (clean["cells"], p["cells"])


def test_repo_diff_shows_a_changed_dep_and_a_changed_argument(tmp_path):
    repo = tmp_path / "repo"
    for n, (hex_version, lr) in enumerate([("0.4.2", 0.1), ("0.4.3", 0.2)]):
        with running_kernel() as k:
            ok(k, f':dep serde_json = "1"\n:dep hex = "={hex_version}"', timeout=1200)
            ok(k, TYPES, timeout=600)
            ok(k, f"%repo open {repo}" + (" --create" if n == 0 else ""))
            store(k, repo, f"run-{n}", lr)
    with running_kernel() as k:
        ok(k, f"%repo open {repo}")
        d = displays(ok(k, "%repo diff run-0 run-1"))[0]
        differ = {r["name"]: (r["a"], r["b"]) for r in d[DATA_MIME]["differ"]}
        assert differ.get("args.lr") == ("0.1", "0.2"), differ
        assert differ.get("crate hex") == ("0.4.2", "0.4.3"), differ
        # The same seed, toolchain and host are not differences.
        assert "seed" not in differ and "rustc" not in differ and "host" not in differ, differ
        assert d[DATA_MIME]["same"] > 10, d[DATA_MIME]
        assert "args.lr" in d["text/plain"] and "crate hex" in d["text/plain"], d["text/plain"]
        reply, _ = k.execute("%repo diff run-0")
        assert reply["ename"] == "MagicError" and "diff takes two IDs" in reply["evalue"], reply
        reply, _ = k.execute("%repo diff run-0 nothing")
        assert reply["ename"] == "RepoError" and "no object with id `nothing`" in reply["evalue"], reply
