"""Turnaround, end to end: the build cache that every kernel of a user shares (reuse across
kernels, kernels starting at once, a changed `runtime/` rebuilt rather than served stale,
`%cache`), and cells whose generated code loads only the variables they name (evcxr's patch)."""
import os
import re
import shutil
import stat
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import (NOTEBOOK_TYPES, READ_THEM, ROOT, answered, displays, of_type, ok, running_kernel, stderr_of, stdout_of,
                      value, wait_for)

DRYML_CELL = "(!dryml::interrupted())"


def rlibs(cache, crate="dryml"):
    """The builds of `crate` in a cache: {path: mtime_ns}."""
    return {p: p.stat().st_mtime_ns for p in Path(cache).glob(f"*/*/debug/deps/lib{crate}-*.rlib")}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A private build cache for this module, so `%cache clear` touches nobody else's."""
    return tmp_path_factory.mktemp("build-cache") / "cache"


def test_kernels_started_at_once_share_one_build(cache):
    env = {"DRYML_BUILD_CACHE": str(cache)}
    with running_kernel(env) as a, running_kernel(env) as b:
        # Both warm-ups build into the same empty cache at once; cargo's lock orders them.
        with ThreadPoolExecutor(2) as pool:
            got = list(pool.map(lambda k: value(k, DRYML_CELL), [a, b]))
        assert got == ["true", "true"]
    built = rlibs(cache)
    assert len(built) == 1, built
    # A later kernel links the same build: nothing of dryml is compiled again.
    with running_kernel(env) as c:
        assert value(c, DRYML_CELL) == "true"
        assert value(c, "dryml::interrupted()") == "false"
    assert rlibs(cache) == built


def cell_crates(cache):
    """The kernels' cell crates built in a cache (cargo's fingerprint directories)."""
    return {p.name.split("-")[0] for p in Path(cache).glob("*/*/debug/.fingerprint/ctx_*")}


def test_kernels_sharing_the_cache_never_run_each_others_cells(cache):
    env = {"DRYML_BUILD_CACHE": str(cache)}
    with running_kernel(env) as a, running_kernel(env) as b:
        # Each cell is written while the other kernel builds: with one crate name for both,
        # cargo found the other's build fresh and a kernel showed the other's result.
        with ThreadPoolExecutor(2) as pool:
            for i in range(6):
                got = list(pool.map(lambda kc: value(*kc), [(a, f"{i} * 10 + 1"), (b, f"{i} * 10 + 2")]))
                assert got == [str(i * 10 + 1), str(i * 10 + 2)], (i, got)
        assert len(cell_crates(cache)) >= 2
    # Both are gone: the next kernel to start removes what their cells built, in its warm-up
    # (once idle, so as not to slow its first cells).
    with running_kernel(env) as c:
        assert value(c, "7") == "7"
        wait_for(lambda: len(cell_crates(cache)) == 1, 60, f"the gone kernels' crates to be removed: {cell_crates(cache)}")
        # Their claims go last, after every file of their crates (the incremental state too).
        claims = lambda: list(Path(cache).glob("*/dryml-kernels/*.lock"))
        wait_for(lambda: len(claims()) == 1, 60, f"the gone kernels' claims to be removed: {claims()}")


def test_cache_magic_shows_collects_and_clears(cache):
    with running_kernel({"DRYML_BUILD_CACHE": str(cache)}) as k:
        shown = displays(ok(k, "%cache"))[0]["text/plain"]
        assert str(cache) in shown, shown
        assert "(this kernel)" in shown and "Largest here:" in shown, shown
        assert "evicted 0 B" in stdout_of(ok(k, "%cache gc"))
        reply, _ = k.execute("%cache everything")
        assert reply["status"] == "error" and "unknown subcommand `everything`" in reply["evalue"], reply
        ok(k, NOTEBOOK_TYPES)
        cleared = stdout_of(ok(k, "%cache clear"))
        assert cleared.startswith("cleared ") and "MiB" in cleared, cleared
        assert rlibs(cache) == {}
        # Cargo notices what is gone and builds it again; the kernel goes on, and the notebook's
        # own types keep their values through the cold build.
        msgs = ok(k, DRYML_CELL, timeout=900)
        assert "was dropped" not in stderr_of(msgs), stderr_of(msgs)
        assert value(k, READ_THEM) == '(18, "Two(3)")'
        assert len(rlibs(cache)) == 1


def building(*markers):
    """Whether a process of this machine has every one of `markers` in its command line."""
    for p in Path("/proc").iterdir():
        try:
            cmdline = (p / "cmdline").read_bytes().decode(errors="replace") if p.name.isdigit() else ""
        except OSError:
            continue
        if all(m in cmdline for m in markers):
            return True
    return False


def test_a_kernel_does_not_wait_on_another_kernels_build(cache, tmp_path):
    # A path crate whose build script takes 40 s: cargo holds the shared build directory meanwhile.
    slow = tmp_path / "slow_dep"
    (slow / "src").mkdir(parents=True)
    (slow / "Cargo.toml").write_text('[package]\nname = "slow_dep"\nversion = "0.1.0"\nedition = "2021"\n')
    (slow / "build.rs").write_text("fn main() { std::thread::sleep(std::time::Duration::from_secs(40)); }\n")
    (slow / "src" / "lib.rs").write_text("pub fn answer() -> u32 { 42 }\n")
    quick = tmp_path / "quick_dep"
    (quick / "src").mkdir(parents=True)
    (quick / "Cargo.toml").write_text('[package]\nname = "quick_dep"\nversion = "0.1.0"\nedition = "2021"\n')
    (quick / "src" / "lib.rs").write_text("pub fn one() -> u32 { 1 }\n")
    env = {"DRYML_BUILD_CACHE": str(cache)}
    with running_kernel(env, log=tmp_path / "a.log") as a:
        assert value(a, DRYML_CELL, timeout=900) == "true"
        msg_id = a.send("execute", f':dep slow_dep = {{ path = "{slow}" }}\nslow_dep::answer()')
        wait_for(lambda: building("slow_dep-", "build-script-build"), 300, "the slow build script")
        started = time.time()
        with running_kernel(env, log=tmp_path / "b.log") as b:
            # A user's first seconds; then cells that need nothing new reply at their usual pace.
            time.sleep(8)
            took = []
            for code, want in [("let a = 5u32;\na + 1", "6"), ("a * 2", "10"), (DRYML_CELL, "true")]:
                t0 = time.time()
                assert value(b, code, timeout=120) == want
                took.append(time.time() - t0)
            assert time.time() - started < 35, ("the slow build ended before the second kernel's cells", took)
            print("the second kernel's cells, seconds:", [round(t, 2) for t in took])
            assert max(took) < 2.0, took
            # A cell that needs a crate of its own waits for the shared directory; an interrupt
            # still reaches it at once, and the notebook's variables stay.
            msg_id_b = b.send("execute", f':dep quick_dep = {{ path = "{quick}" }}\nlet q = quick_dep::one();')
            time.sleep(3)
            reply, _, stopped_in = b.interrupt_collect(msg_id_b)
            print("the interrupt of a waiting build took, seconds:", round(stopped_in, 2))
            assert time.time() - started < 38, "the slow build ended before the interrupt"
            assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
            assert stopped_in < 2.0, stopped_in
            assert value(b, "a + 1") == "6"
            # Once the shared directory is free, the same cell builds (nothing stale is linked).
            assert value(b, f':dep quick_dep = {{ path = "{quick}" }}\nquick_dep::one() + a', timeout=120) == "6"
        reply, msgs = a.collect(msg_id, timeout=300)
        assert reply["status"] == "ok", reply
        assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "42"
        # Once the shared directory is free again, the kernel goes on in it.
        assert value(a, "slow_dep::answer() + 1") == "43"


def test_a_changed_runtime_is_rebuilt_not_served_stale(tmp_path):
    # Two copies of the workspace (checkouts) whose runtime/ this test may edit.
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for ws in (tmp_path / "ws", tmp_path / "ws2"):
        for f in files:
            (ws / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, ws / f)
        with open(ws / "runtime" / "src" / "lib.rs", "a") as f:
            f.write("\npub fn turnaround_probe() -> u32 { 41 }\n")
    # No earlier copy of the sources stays built (session/source.rs keeps 4 by default).
    env = {"DRYML_BUILD_CACHE": str(tmp_path / "cache"), "DRYML_SOURCE_COPIES": "0"}
    at = lambda ws: {**env, "DRYML_RUNTIME_PATH": str(tmp_path / ws / "runtime")}
    with running_kernel(at("ws")) as k:
        assert value(k, "dryml::turnaround_probe()") == "41"
    built = rlibs(tmp_path / "cache")
    # Another checkout of the same sources builds nothing: cells build a copy named by content.
    with running_kernel(at("ws2")) as k:
        assert value(k, "dryml::turnaround_probe()") == "41"
    assert rlibs(tmp_path / "cache") == built, "a second checkout of the same sources built dryml again"
    lib = tmp_path / "ws" / "runtime" / "src" / "lib.rs"
    with running_kernel(at("ws")) as k:
        assert value(k, "dryml::turnaround_probe()") == "41"
        # Changed while a notebook uses it: the next cell naming dryml builds the new sources (a
        # kernel started after the change hashes them at its first cell, as the one above did).
        lib.write_text(lib.read_text().replace("{ 41 }", "{ 42 }"))
        assert value(k, "dryml::turnaround_probe()") == "42"
    assert len(rlibs(tmp_path / "cache")) == 1, "the one build was replaced, not added to"


def test_cells_build_with_rustc_alone_until_something_cargo_watches_changes(tmp_path):
    lib = tmp_path / "mylib"
    (lib / "src").mkdir(parents=True)
    (lib / "Cargo.toml").write_text('[package]\nname = "mylib"\nversion = "0.1.0"\nedition = "2021"\n')
    source = lib / "src" / "lib.rs"
    source.write_text("pub fn v() -> u32 { 1 }\n")
    evcxr_dir = tmp_path / "evcxr"
    # The rustc wrapper writes the cell crate's command each time cargo runs that rustc, and
    # only then (no warm-up: its `dryml` would change Cargo.toml meanwhile).
    record = evcxr_dir / ".dryml-rustc.json"
    env = {"EVCXR_TMPDIR": str(evcxr_dir), "DRYML_NO_WARM_UP": "1", "DRYML_BUILD_CACHE": str(tmp_path / "cache")}
    with running_kernel(env) as k:
        assert value(k, f':dep mylib = {{ path = "{lib}" }}\nmylib::v()', timeout=600) == "1"
        recorded = record.stat().st_mtime_ns
        assert '"--crate-name"' in record.read_text()
        for i in range(3):
            assert value(k, f"mylib::v() + {i}") == str(1 + i)
        assert record.stat().st_mtime_ns == recorded, "cargo ran for cells that changed only themselves"
        # A compile error from rustc alone reads as one from cargo, and the kernel goes on.
        reply, _ = k.execute('let s: String = 5;')
        assert reply["status"] == "error" and reply["ename"] == "CompilationError", reply
        assert "mismatched types" in reply["evalue"], reply["evalue"]
        # (Cargo would have removed the record first, and a failed build writes none.)
        assert record.stat().st_mtime_ns == recorded
        # An edit to a path dependency: cargo builds it, and the cell sees it.
        source.write_text("pub fn v() -> u32 { 2 }\n")
        assert value(k, "mylib::v() + 10") == "12"
        assert record.stat().st_mtime_ns != recorded
        recorded = record.stat().st_mtime_ns
        assert value(k, "mylib::v() + 20") == "22"
        assert record.stat().st_mtime_ns == recorded
        # So does a file added to it, and a library it links that is gone (the cache emptied).
        (lib / "src" / "extra.rs").write_text("pub fn w() -> u32 { 5 }\n")
        source.write_text("pub mod extra;\npub fn v() -> u32 { 3 }\n")
        assert value(k, "mylib::v() + mylib::extra::w()") == "8"
        ok(k, "%cache clear")
        assert value(k, "mylib::v() + 30") == "33"
        assert record.stat().st_mtime_ns != recorded


def test_nothing_is_built_before_the_kernels_settings(tmp_path):
    evcxr_dir, cache = tmp_path / "evcxr", tmp_path / "cache"
    env = {"EVCXR_TMPDIR": str(evcxr_dir), "DRYML_BUILD_CACHE": str(cache), "DRYML_NO_WARM_UP": "1"}
    with running_kernel(env) as k:
        assert value(k, "40 + 2") == "42"
        # evcxr's own start-up build (`42`, as crate `ctx`, outside the cache) ran before the
        # kernel could name the cell crate and point builds at the cache: cargo's probes and
        # the analyzer's load were then done twice.
        crates = {p.name.split("-")[0] for d in (evcxr_dir, cache) for p in d.rglob(".fingerprint/ctx*")}
        assert len(crates) == 1 and next(iter(crates)).startswith("ctx_"), crates
        assert cell_crates(cache) == crates


# A first cell's untyped `let`s, and the types the analyzer gives them (evcxr's patch, eleventh part).
FIRST_LETS = ('let a = vec![1u64, 2, 3];\nlet b = 5;\nlet c = 2.5;\nlet s = "hi";\nlet t = (1, \'x\');\n'
              'let o = Some(3u8);\nlet bx = Box::new(2.0f32);\nlet ss = ["x"; 2];\n'
              'struct P { x: i32 }\nlet p = vec![P { x: 2 }];\na.len()')
FIRST_TYPES = {"a": "Vec<u64>", "b": "i32", "c": "f64", "s": "&str", "t": "(i32, char)", "o": "Option<u8>",
               "bx": "Box<f32>", "ss": "[&str; 2]", "p": "Vec<P>"}


def test_a_first_cells_untyped_lets_take_rustcs_types_while_the_analyzer_loads(tmp_path):
    log = tmp_path / "kernel.log"
    with running_kernel({"DRYML_LOG": "warn,dryml_kernel::session=debug"}, log=log, own_analysis=True) as k:
        # The kernel's first request: the analyzer's load (seconds) has only begun.
        assert value(k, FIRST_LETS) == "3"
        assert "Types from rustc" in log.read_text(), "rustc named the types, no analyzer waited for"
        # A stored variable given a new type by a new `let`.
        assert value(k, "let b = b as i64 * 2;\nb") == "10"
        types = dict(line.split(": ", 1) for line in value(k, ":vars").splitlines())
        assert types == {**FIRST_TYPES, "b": "i64"}, types
        # Nothing of the probe shows: the user's own error, evcxr's messages (the analyzer may
        # have loaded by now or not).
        cells_with_their_own_errors(k)
        # A type rustc names by a path not in scope (`HashMap`) is the analyzer's, written out.
        assert value(k, "let m = std::collections::HashMap::<u8, u8>::new();\nm.len()") == "0"
        types = dict(line.split(": ", 1) for line in value(k, ":vars").splitlines())
        assert types == {**FIRST_TYPES, "b": "i64", "m": "std::collections::HashMap<u8, u8>"}, types
        # The analyzer has surely loaded: its check of a failed cell takes `s: &str` as stored.
        cells_with_their_own_errors(k)
        assert value(k, "a.len() as i64 + p.len() as i64 + m.len() as i64 + b") == "14"


def test_a_type_the_analysis_cannot_see_is_rustcs(tmp_path):
    # A crate whose items come from its build script's output, which the analysis never runs:
    # it finds no type for a `let` of one, where the shared analysis once lost types (ci40).
    made = tmp_path / "made"
    (made / "src").mkdir(parents=True)
    (made / "Cargo.toml").write_text('[package]\nname = "made"\nversion = "0.1.0"\nedition = "2021"\n')
    (made / "build.rs").write_text(
        'fn main() {\n    let out = std::env::var("OUT_DIR").unwrap();\n'
        '    std::fs::write(format!("{out}/made.rs"), "pub struct Made(pub u32);\\n'
        'pub fn made() -> Made { Made(7) }\\n'
        'pub mod inner { pub struct Hidden; }\\npub fn hidden() -> inner::Hidden { inner::Hidden }\\n").unwrap();\n}\n')
    (made / "src" / "lib.rs").write_text('include!(concat!(env!("OUT_DIR"), "/made.rs"));\n')
    log = tmp_path / "kernel.log"
    with running_kernel({"DRYML_LOG": "warn,dryml_kernel::session=debug"}, log=log, own_analysis=True) as k:
        ok(k, f':dep made = {{ path = "{made}" }}', timeout=600)
        missed = lambda: "no type found for [\"m\"]" in "".join(
            p.read_text() for p in Path(k.analysis_dir).glob("analysis-*.log"))
        # A Tab on a method starts the analysis; it is pressed again until the analysis has loaded.
        r, _ = answered(k, "complete", "String::ne", 10, until=lambda r: "new()" in r["matches"], timeout=600)
        assert "new()" in r["matches"], r
        # Until the analysis has loaded, rustc is asked anyway; then the analysis misses.
        for _ in range(120):
            assert value(k, "use made::Made;\nlet m = made::made();\nm.0") == "7"
            if missed():
                break
            time.sleep(0.5)
        assert missed(), "the analysis never answered"
        assert "Types from rustc" in log.read_text()
        assert value(k, "m.0 + 1") == "8"
        assert dict(line.split(": ", 1) for line in value(k, ":vars").splitlines())["m"] == "Made"
        # A type rustc names that the cell cannot: evcxr's message, and the notebook goes on.
        reply, _ = k.execute("let n = made::hidden();")
        shown = reply["evalue"] + "\n".join(reply["traceback"])
        assert reply["status"] == "error" and "determine type of variable `n`" in shown, shown
        assert "EvcxrTypeProbe" not in shown, shown
        assert value(k, "m.0") == "7"


def test_a_first_stored_value_of_a_crates_type_takes_rustcs_type_by_a_path_the_cell_can_write(tmp_path):
    # rustc writes `Tensor` and `ArrayBase<OwnedRepr<f64>, ...>`; the cell sees neither name.
    log = tmp_path / "kernel.log"
    with running_kernel({"DRYML_LOG": "warn,dryml_kernel::session=debug"}, log=log, own_analysis=True) as k:
        assert value(k, "let t = tch::Tensor::ones([2, 3], (tch::Kind::Float, tch::Device::Cpu));\nt.numel()") == "6"
        # The crate was new to the analysis: rustc's type, with no wait for the analysis.
        assert "Types from rustc" in log.read_text() and "Types from the analyzer" not in log.read_text()
        ok(k, ':dep ndarray = "0.16"', timeout=600)
        assert value(k, "let a = ndarray::Array2::<f64>::zeros((2, 2));\na.len()") == "4"
        types = dict(line.split(": ", 1) for line in value(k, ":vars").splitlines())
        assert types["t"] == "tch::Tensor", types
        assert "ArrayBase<" in types["a"], types
        assert value(k, "t.sum(tch::Kind::Double).double_value(&[]) + a.sum()") == "6.0"


def test_a_first_cell_with_its_own_uses_takes_rustcs_type_by_the_path_rustc_suggests(tmp_path):
    # rustc suggests `use std::thread::JoinHandle;` beside the cell's own `use` lines: evcxr took
    # that help for the error, and the cell failed with "consider importing this struct".
    log = tmp_path / "kernel.log"
    with running_kernel({"DRYML_LOG": "warn,dryml_kernel::session=debug"}, log=log, own_analysis=True) as k:
        code = ("use std::sync::atomic::{AtomicBool, Ordering};\nuse std::sync::Arc;\n"
                "let stop = Arc::new(AtomicBool::new(false));\n"
                "let worker = { let stop = stop.clone(); std::thread::spawn(move || stop.load(Ordering::SeqCst)) };")
        ok(k, code)
        assert "Types from rustc" in log.read_text() and "Types from the analyzer" not in log.read_text()
        types = dict(line.split(": ", 1) for line in value(k, ":vars").splitlines())
        assert types == {"stop": "Arc<AtomicBool>", "worker": "std::thread::JoinHandle<bool>"}, types
        assert value(k, "worker.join().unwrap()") == "false"


def cells_with_their_own_errors(k):
    for code, says in [('let z = 1;\nlet w: u8 = "no";', "expected `u8`, found `&str`"),
                       ("let f = |x: i32| move |y: i32| x + y;", "is a closure, which cannot be persisted"),
                       ('let q = "5".parse().unwrap();', "type annotations needed")]:
        reply, _ = k.execute(code)
        shown = reply["evalue"] + "\n".join(reply["traceback"])
        assert reply["status"] == "error" and says in shown and "EvcxrTypeProbe" not in shown, (code, shown)


def pinned(lock_text, name):
    """The versions of package `name` a Cargo.lock pins."""
    return set(re.findall(rf'\[\[package\]\]\nname = "{re.escape(name)}"\nversion = "([^"]+)"', lock_text))


def test_a_notebook_needs_no_network_for_dryml_or_a_locked_dep(tmp_path):
    # No registry to reach: any update of its index fails at once. Each resolution used to update
    # it (0.5 s), so dryml's first cell needed a network.
    evcxr_dir = tmp_path / "evcxr"
    env = {"CARGO_HTTP_PROXY": "http://127.0.0.1:9", "CARGO_NET_RETRY": "0", "EVCXR_TMPDIR": str(evcxr_dir)}
    with running_kernel(env) as k:
        assert value(k, DRYML_CELL) == "true"
        # A user's `:dep` that the workspace's lock has resolves from it too, after dryml: its
        # validation no longer replaces the crate's lock with its own (evcxr's patch).
        assert value(k, ':dep serde_json = "1"\nserde_json::json!({"a": [1, 2]})["a"][1].as_i64().unwrap()') == "2"
        assert value(k, "dryml::interrupted()") == "false"
        ours, cells = (ROOT / "Cargo.lock").read_text(), (evcxr_dir / "Cargo.lock").read_text()
        for name in ("ndarray", "serde_json", "csv", "rmp-serde"):
            assert pinned(cells, name) and pinned(cells, name) <= pinned(ours, name), (name, pinned(cells, name))
        # One it lacks needs the registry: a clear error, and the notebook goes on.
        reply, _ = k.execute(':dep smallbitvec = "2"\n1')
        shown = reply.get("evalue", "") + "\n".join(reply.get("traceback", []))
        assert reply["status"] == "error" and "smallbitvec" in shown, shown
        assert value(k, "dryml::interrupted()") == "false"


def test_without_a_usable_cache_kernels_build_alone(tmp_path):
    with running_kernel({"DRYML_BUILD_CACHE": "off"}) as k:
        assert "The build cache is off" in stdout_of(ok(k, "%cache"))
        assert value(k, DRYML_CELL) == "true"
    shared = tmp_path / "world-writable"
    shared.mkdir()
    shared.chmod(0o777)
    with running_kernel({"DRYML_BUILD_CACHE": str(shared)}) as k:
        reply, _ = k.execute("%cache")
        assert reply["status"] == "error" and reply["ename"] == "BuildCacheError", reply
        assert "refusing" in reply["evalue"] and str(shared) in reply["evalue"], reply["evalue"]
        assert value(k, "40 + 2") == "42"
    assert not any(shared.iterdir()), "nothing was built in a directory others may write"
    assert stat.S_IMODE(shared.stat().st_mode) == 0o777


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """A kernel holding 40 variables, whose evcxr directory the tests read."""
    evcxr_dir = tmp_path_factory.mktemp("evcxr")
    with running_kernel({"EVCXR_TMPDIR": str(evcxr_dir)}) as k:
        ok(k, "\n".join(f"let mut v{i} = vec![{i}u64; 3];" for i in range(40)))
        k.generated = lambda: (evcxr_dir / "src" / "lib.rs").read_text()
        yield k


def test_a_cell_loads_only_the_variables_it_names(many):
    assert value(many, "v3.len() + v17.len()") == "6"
    calls = lambda f: many.generated().count(f"evcxr_variable_store.{f}::<")
    assert (calls("check_variable"), calls("take_variable"), calls("put_variable")) == (2, 2, 2), many.generated()
    assert value(many, "1 + 1") == "2"
    assert (calls("check_variable"), calls("take_variable"), calls("put_variable")) == (0, 0, 0)


def test_variables_named_anywhere_in_a_cell_count_and_all_survive(many):
    # Named only inside a format string.
    assert stdout_of(ok(many, 'println!("{v5:?}");')) == "[5, 5, 5]\n"
    ok(many, "v6.push(60);")
    assert value(many, "v6.len()") == "4"
    # A panic keeps the variables the cell loaded (evcxr's catch_unwind) and leaves the rest.
    reply, msgs = many.execute('v7.push(70); panic!("boom {}", v7.len());')
    assert reply["status"] == "error" and "boom 4" in stderr_of(msgs) + reply["evalue"], reply
    assert value(many, "v7.last().copied()") == "Some(70)"
    msgs = ok(many, ":vars")
    listed = stdout_of(msgs) + "".join(m["content"]["data"].get("text/plain", "") for m in of_type(msgs, "execute_result"))
    assert all(f"v{i}:" in listed for i in range(40)), listed
    assert value(many, "(0..1).map(|_| v39[0] + v0[0]).sum::<u64>()") == "39"


def test_a_final_expression_is_shown_after_one_build(many):
    assert value(many, "v9.iter().sum::<u64>()") == "27"
    # The one-build display compiled and ran; evcxr's fallbacks were not needed.
    assert "EvcxrDisplayOrDebug" in many.generated()
    ok(many, '#[derive(Debug)] struct Shown(u8);\n'
             'impl Shown { fn evcxr_display(&self) { println!("EVCXR_BEGIN_CONTENT text/html\\n<b>{}</b>\\nEVCXR_END_CONTENT", self.0); } }')
    # A type's own evcxr_display wins over Debug, by value and through a reference.
    for expr in ("Shown(7)", "&Shown(7)"):
        reply, msgs = many.execute(expr)
        bundles = [m["content"]["data"] for m in of_type(msgs, "execute_result")]
        assert reply["status"] == "ok" and bundles and bundles[0].get("text/html") == "<b>7</b>", (expr, bundles)
    # Neither: evcxr's fallbacks run and the error is the one they give.
    ok(many, "struct Opaque;")
    reply, _ = many.execute("Opaque")
    assert reply["status"] == "error" and reply["ename"] == "CompilationError", reply
    assert "doesn't implement `Debug`" in reply["evalue"], reply["evalue"]
