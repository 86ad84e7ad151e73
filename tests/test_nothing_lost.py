"""Nothing lost (issue 35), end to end: a redefined type's old value is dropped with a message,
never read as the new type (the process and its other variables live on); no dependency the
kernel adds (`dryml` first named by a cell or a `%%compute` cell, a framework feature) or the user
adds (`:dep`) drops a variable of the notebook's own types (a trained model in one too); and
`%%compute`/`%%sweep` errors and panics name the cell's lines, never generated code."""
from conftest import NO_NVML, NOTEBOOK_TYPES, READ_THEM, ok, running_kernel, stderr_of, value


def dropped(msgs):
    """The variables a cell said it dropped, in order."""
    return [line.split("`")[1] for line in stderr_of(msgs).splitlines() if "so `" in line and "` was dropped" in line]


def test_a_redefined_struct_is_dropped_with_a_message_not_read_as_the_new_type(kernel):
    ok(kernel, "let keep = 5u8;")
    ok(kernel, "struct G(u32);\nlet g = G(7);")
    pid = value(kernel, "std::process::id()")
    msgs = ok(kernel, "struct G(String);")
    assert ("`g` was a `G` as defined when it was made; `G` has been redefined, so `g` was dropped "
            "(its old value cannot be read as the new type). Run the cell that makes it again.") in stderr_of(msgs), stderr_of(msgs)
    reply, _ = kernel.execute("g.0.len()")
    assert reply["status"] == "error" and reply["ename"] == "CompilationError", reply
    assert "cannot find value `g`" in reply["evalue"] + "\n".join(reply["traceback"]), reply
    # The same process, and what it held of other types.
    assert value(kernel, "std::process::id()") == pid
    assert value(kernel, "keep") == "5"
    # A cell that redefines the type and reads the variable fails to build, and says why.
    ok(kernel, "struct H(u64);\nlet h = H(1);")
    reply, _ = kernel.execute("struct H(u8);\nh.0")
    assert reply["status"] == "error", reply
    text = "\n".join(reply["traceback"])
    assert "cannot find value `h`" in text and "`h` was a `H` as defined when it was made; `H` has been redefined" in text, text
    # That cell changed nothing: `h` is still the old `H`.
    assert value(kernel, "h.0") == "1"
    # Making it again in the redefining cell replaces it without a word.
    msgs = ok(kernel, "struct H(String);\nlet h = H(\"new\".to_string());")
    assert dropped(msgs) == [], stderr_of(msgs)
    assert value(kernel, "h.0.len()") == "3"


def test_generics_enums_reordered_fields_and_trait_objects_are_dropped_and_nothing_else(kernel):
    ok(kernel, """use std::collections::HashMap;
struct A { x: u32, y: String }
enum E { P(u32), Q(String) }
trait Tr { fn f(&self) -> u32; }
impl Tr for u32 { fn f(&self) -> u32 { *self } }
struct Unrelated(u16);
let va = vec![A { x: 1, y: "a".into() }];
let oa = Some(A { x: 2, y: "b".into() });
let mut ha: HashMap<String, A> = HashMap::new();
ha.insert("k".into(), A { x: 3, y: "c".into() });
let e = E::Q("q".into());
let t: Box<dyn Tr> = Box::new(5u32);
let u = Unrelated(6);""")
    # The same definition again, or a new `impl`, changes no layout: nothing goes.
    msgs = ok(kernel, "struct A { x: u32, y: String }")
    assert dropped(msgs) == [], stderr_of(msgs)
    msgs = ok(kernel, "impl A { fn sum(&self) -> u32 { self.x } }")
    assert dropped(msgs) == [], stderr_of(msgs)
    assert value(kernel, "va[0].sum() + oa.as_ref().unwrap().sum() + ha[\"k\"].sum()") == "6"
    # The same fields in another order.
    msgs = ok(kernel, "struct A { y: String, x: u32 }")
    assert dropped(msgs) == ["ha", "oa", "va"], stderr_of(msgs)
    assert "`va` was a `Vec<A>` as defined when it was made; `A` has been redefined" in stderr_of(msgs), stderr_of(msgs)
    msgs = ok(kernel, "enum E { Q(String), P(u32) }")
    assert dropped(msgs) == ["e"], stderr_of(msgs)
    msgs = ok(kernel, "trait Tr { fn f(&self) -> u64; }")
    assert dropped(msgs) == ["t"], stderr_of(msgs)
    assert value(kernel, "u.0") == "6"
    reply, _ = kernel.execute("va.len()")
    assert reply["status"] == "error" and "cannot find value `va`" in "\n".join(reply["traceback"]), reply


def test_no_dependency_the_kernel_or_the_user_adds_drops_the_notebooks_own_types(tmp_path):
    # A path crate whose type's layout depends on a feature.
    shapes = tmp_path / "shapes"
    (shapes / "src").mkdir(parents=True)
    (shapes / "Cargo.toml").write_text('[package]\nname = "shapes"\nversion = "0.1.0"\nedition = "2021"\n[features]\nwide = []\n')
    (shapes / "src" / "lib.rs").write_text('#[cfg(not(feature = "wide"))]\npub struct P(pub u32);\n'
                                           '#[cfg(feature = "wide")]\npub struct P(pub String);\n')
    with running_kernel(NO_NVML) as k:
        ok(k, NOTEBOOK_TYPES)
        # `dryml` first named: the cell crate's dependencies change.
        msgs = ok(k, "dryml::interrupted()", timeout=900)
        assert dropped(msgs) == [] and "was dropped" not in stderr_of(msgs), stderr_of(msgs)
        assert value(k, READ_THEM) == '(18, "Two(3)")'
        # Code a magic generates.
        msgs = ok(k, "%%compute default\nlet _ = &g;", timeout=900)
        assert "was dropped" not in stderr_of(msgs), stderr_of(msgs)
        # A framework feature of dryml.
        msgs = ok(k, "use dryml::models::linfa::iris;\niris().count().unwrap()", timeout=1200)
        assert "was dropped" not in stderr_of(msgs), stderr_of(msgs)
        # A trained model, in a type of the notebook's own.
        ok(k, """use dryml::models::{eval, Model, TrainSpec};
struct Run { tree: dryml::models::linfa::DecisionTree, seed: u64 }
let mut tree = dryml::models::linfa::DecisionTree::new(dryml::serde_json::json!({"max_depth": 3}));
tree.train(&iris().shuffle(150, 3), &mut TrainSpec::epochs(1)).unwrap();
let run = Run { tree, seed: 3 };""", timeout=600)
        # A crate the user adds; the build cache collected.
        msgs = ok(k, ':dep regex = "1"\nregex::Regex::new("a+").unwrap().is_match("aa")', timeout=900)
        assert "was dropped" not in stderr_of(msgs), stderr_of(msgs)
        ok(k, "%cache gc")
        assert value(k, READ_THEM) == '(18, "Two(3)")'
        # A type holding a crate's type goes when that crate changes, and its message names the
        # crate; the notebook's other types stay.
        ok(k, f':dep shapes = {{ path = "{shapes}" }}\nstruct Holds(shapes::P);\nlet held = Holds(shapes::P(4));', timeout=600)
        msgs = ok(k, f':dep shapes = {{ path = "{shapes}", features = ["wide"] }}\nlet p = shapes::P("w".into());', timeout=600)
        assert dropped(msgs) == ["held"], stderr_of(msgs)
        assert "`held` was a `Holds` as defined when it was made; the dependency `shapes` changed" in stderr_of(msgs), stderr_of(msgs)
        assert value(k, READ_THEM) == '(18, "Two(3)")'
        got = value(k, "(run.seed, dryml::metrics::categorical_accuracy(&eval(&run.tree, &iris()).unwrap()).unwrap() > 0.9)")
        assert got == "(3, true)", got
        # As the first thing after a restart, from a magic's code.
        k.restart()
        ok(k, NOTEBOOK_TYPES)
        msgs = ok(k, "%%compute default\nlet _ = &g;", timeout=900)
        assert "was dropped" not in stderr_of(msgs), stderr_of(msgs)
        assert value(k, READ_THEM) == '(18, "Two(3)")'


def test_each_magic_that_first_names_dryml_keeps_the_notebooks_own_types(tmp_path):
    # Each trigger as the first thing after the notebook's types, in a fresh process: the code a
    # magic generates adds `dryml` to the cell crate as a cell naming it does.
    repo = tmp_path / "repo"
    with running_kernel(NO_NVML) as k:
        ok(k, f"%repo open {repo} --create")
        ok(k, f"""use dryml::objects::{{Build, Meta}};
let t = dryml::models::linfa::DecisionTree::build(dryml::serde_json::json!({{"max_depth": 2}}), Meta::with_id("tree-1"));
dryml::Repo::open("{repo}").unwrap().add(&t).unwrap();""", timeout=1200)
        triggers = [
            ["%context default num_cpus=0"],
            [f"%repo open {repo}", "%repo load tree-1 as loaded"],
            ["%cell_logger plot"],
            # A new profile: cargo's metadata for the cell crate hashes it, the pin does not.
            [":opt 1"],
            # (The cell making the definitions names the framework, so dryml is built once.)
            ['use dryml::models::linfa::DecisionTree;\n'
             'let defs = vec![dryml::ObjectDef::new("DecisionTree", &dryml::serde_json::json!({"max_depth": 2})).unwrap()];',
             f"%%sweep defs --repo {tmp_path / 'swept'}\n|m: &mut DecisionTree| 1.0"],
        ]
        for cells in triggers:
            k.restart()
            ok(k, NOTEBOOK_TYPES)
            for cell in cells:
                msgs = ok(k, cell, timeout=900)
                assert "was dropped" not in stderr_of(msgs), (cell, stderr_of(msgs))
            assert value(k, READ_THEM) == '(18, "Two(3)")', cells

def test_the_debugger_switching_build_flags_keeps_the_notebooks_own_types():
    # JupyterLab's bug icon: cells are built for the debugger (no optimisation, full debug
    # information) from the next cell on, and as before once it is turned off.
    with running_kernel(NO_NVML) as k:
        ok(k, NOTEBOOK_TYPES)
        reply, _ = k.debug(1, "initialize", {"clientID": "jupyterlab", "adapterID": "dryml-rust", "pathFormat": "path",
                                             "linesStartAt1": True, "columnsStartAt1": True})
        assert reply["success"], reply
        reply, _ = k.debug(2, "attach")
        assert reply["success"], reply
        msgs = ok(k, "let on = 1u32;")
        assert "was dropped" not in stderr_of(msgs), stderr_of(msgs)
        assert value(k, READ_THEM) == '(18, "Two(3)")'
        reply, _ = k.debug(3, "disconnect", {"restart": False, "terminateDebuggee": False})
        assert reply["success"], reply
        msgs = ok(k, "let off = 2u32;")
        assert "was dropped" not in stderr_of(msgs), stderr_of(msgs)
        assert value(k, READ_THEM + ".0 + on + off") == "21"


def traceback_of(reply):
    return "\n".join(reply.get("traceback", []))


def test_compute_and_sweep_errors_name_the_cells_lines_never_generated_code(kernel):
    from soak import TYPES
    ok(kernel, "let a = 5u32;")
    for magic in ("%%compute default", "%%compute default --update a", "%%compute --use-existing"):
        reply, _ = kernel.execute(f"{magic}\nlet x = 1;\nlet y: String = x;")
        tb = traceback_of(reply)
        assert reply["ename"] == "CompilationError" and "--> cell line 3, column 17" in tb, (magic, tb)
        assert "3 | let y: String = x;" in tb and "src/lib.rs" not in tb and "ptr::read" not in tb, (magic, tb)
        assert tb.count("--> cell line 3, column 17") == 1, (magic, tb)
    # An `--update` variable given another type: the cell's line, not the kernel's copy of it.
    reply, _ = kernel.execute("%%compute default --update a\na = \"s\".to_string();")
    tb = traceback_of(reply)
    assert "--> cell line 2, column 5" in tb and "expected `u32`, found `String`" in tb and "ptr::read" not in tb, tb
    # A link error is about no code: what the linker said is kept.
    reply, _ = kernel.execute('%%compute default\n#[link(name = "dryml_no_such_lib")]\nunsafe extern "C" { fn dryml_nowhere(); }\nunsafe { dryml_nowhere() };')
    tb = traceback_of(reply)
    said = ("unable to find library -ldryml_no_such_lib", "cannot find -ldryml_no_such_lib")  # lld's, GNU ld's
    assert "linking with `cc` failed" in tb and any(w in tb for w in said) and "the kernel wraps" not in tb, tb
    ok(kernel, TYPES)
    ok(kernel, 'let defs = vec![dryml::ObjectDef::new("soak.Run", &(1u64, "a".to_string())).unwrap()];')
    reply, _ = kernel.execute("%%sweep defs --repo /nonexistent\n|m: &mut SoakRun| {\n    let y: String = m.args.0;\n    0.0\n}")
    tb = traceback_of(reply)
    assert "--> cell line 3, column 21" in tb and "src/lib.rs" not in tb, tb
    # Panics, here and in a sandbox, at the cell's lines.
    reply, msgs = kernel.execute("let v: Vec<u32> = vec![];\nlet b = v[2];")
    assert reply["ename"] == "panic" and "panicked at cell line 2, column " in traceback_of(reply), reply
    assert "panicked at cell line 2, column " in stderr_of(msgs) and "src/lib.rs" not in stderr_of(msgs), stderr_of(msgs)
    reply, _ = kernel.execute("%%compute default\nlet v: Vec<u32> = vec![];\nlet n = 1;\nv[3]")
    assert reply["ename"] == "SandboxPanicked", reply
    assert reply["evalue"].endswith("index out of bounds: the len is 0 but the index is 3 (at cell line 4)"), reply["evalue"]
    assert value(kernel, "a") == "5"
