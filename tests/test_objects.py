"""Objects, the repo and `%repo`, end to end: types defined in notebook cells, object files and a
repo index on disk, queries from the kernel, and loading back into the notebook."""
import json

import pytest

from conftest import DATA_MIME, NO_NVML, displays, ok, running_kernel, stdout_of, value

TYPES = """use dryml::{Build, Meta, Object, State};
use dryml::objects::ObjectError;

#[derive(dryml::Object)]
struct Mlp { args: serde_json::Value, meta: Meta, weights: Vec<f32> }
impl Build for Mlp {
    type Args = serde_json::Value;
    fn build(args: serde_json::Value, meta: Meta) -> Self {
        let n = args["layers"].as_array().map(|l| l.iter().filter_map(|x| x.as_u64()).sum::<u64>()).unwrap_or(0);
        Mlp { weights: vec![0.0; n as usize], args, meta }
    }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> { s.put("weights", &self.weights) }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> { self.weights = s.get("weights")?; Ok(()) }
}

#[derive(dryml::Object)]
#[dryml(name = "data.Points")]
struct Points { args: (u32, String), meta: Meta }
impl Build for Points {
    type Args = (u32, String);
    fn build(args: (u32, String), meta: Meta) -> Self { Points { args, meta } }
}
dryml::objects::registered()"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    with running_kernel(NO_NVML) as k:
        k.dir = tmp_path_factory.mktemp("repo") / "models"
        ok(k, ":dep serde_json = \"1\"")
        # The notebook's types join dryml's own (its transforms) in the registry.
        registered = json.loads(value(k, TYPES, timeout=600))
        assert {"Mlp", "data.Points"} <= set(registered) and "Standardize" in registered, registered
        yield k


def table(msgs):
    return [d for d in displays(msgs) if DATA_MIME in d][0]


def test_save_load_and_build_copies(kernel):
    code = f"""
let mut m = Mlp::build(serde_json::json!({{"lr": 0.1, "layers": [2, 3], "data": {{"name": "mnist"}}}}), Meta::new());
m.weights[4] = 7.5;
dryml::save_object(&m, "{kernel.dir}.single.dry").unwrap();
let back = dryml::load_object("{kernel.dir}.single.dry").unwrap();
let copy = back.definition().build().unwrap();
(back.downcast_ref::<Mlp>().unwrap().weights.clone(), back.id() == m.meta().id, copy.id() != m.meta().id,
 copy.downcast_ref::<Mlp>().unwrap().weights.clone())"""
    assert value(kernel, code) == "([0.0, 0.0, 0.0, 0.0, 7.5], true, true, [0.0, 0.0, 0.0, 0.0, 0.0])"


def test_repo_magics(kernel):
    d = kernel.dir
    assert "Created repo" in stdout_of(ok(kernel, f"%repo open {d} --create"))
    code = f"""
let mut repo = dryml::Repo::open("{d}").unwrap();
for lr in [0.1, 0.2] {{
    for data in ["mnist", "cifar"] {{
        for _ in 0..3 {{
            let mut m = Mlp::build(serde_json::json!({{"lr": lr, "layers": [4], "data": {{"name": data}}}}), Meta::new());
            m.weights = vec![lr as f32; 4];
            repo.add(&m).unwrap();
        }}
    }}
}}
repo.add(&Points::build((2, "x".into()), Meta::with_id("points-2"))).unwrap();
repo.len()"""
    assert value(kernel, code) == "13"
    listing = table(ok(kernel, "%repo ls"))
    assert len(listing[DATA_MIME]["objects"]) == 13
    head = listing["text/plain"].splitlines()[2].split()
    assert head == ["id", "type", "arguments", "created", "size"], head
    found = table(ok(kernel, "%repo get Mlp lr=0.1 data.name=mnist"))[DATA_MIME]["objects"]
    assert len(found) == 3 and all(o["args"]["lr"] == 0.1 for o in found)
    assert len(table(ok(kernel, "%repo get data.Points 0=2"))[DATA_MIME]["objects"]) == 1
    assert len(table(ok(kernel, "%repo get * data.name=cifar"))[DATA_MIME]["objects"]) == 6
    shown = displays(ok(kernel, "%repo show points-2"))[0][DATA_MIME]
    assert shown["type"] == "data.Points" and shown["args"] == [2, "x"]
    target = found[0]["id"]
    out = stdout_of(ok(kernel, f"%repo load {target} as loaded"))
    assert "loaded = Mlp(" in out, out
    assert value(kernel, "loaded.downcast_ref::<Mlp>().unwrap().weights.clone()") == "[0.1, 0.1, 0.1, 0.1]"
    assert "Deleted points-2" in stdout_of(ok(kernel, "%repo rm points-2"))
    assert len(table(ok(kernel, "%repo ls"))[DATA_MIME]["objects"]) == 12
    # Selectors in code: named subset, nested, positional, predicate.
    got = value(kernel, """
use dryml::Selector;
let a = repo.get(&Selector::of("Mlp").arg("data.name", serde_json::json!("cifar"))).unwrap().len();
let b = repo.find(&Selector::of("Mlp").filter(|d, _| d.args["lr"].as_f64() == Some(0.2))).len();
repo.reload().unwrap();
(a, b, repo.len())""")
    assert got == "(6, 6, 12)"


def test_bad_queries_are_clear_and_change_nothing(kernel):
    before = len(table(ok(kernel, "%repo ls"))[DATA_MIME]["objects"])
    for code, ename, words in [
        ("%repo get Mlp lr", "MagicError", "`lr` is not key=value"),
        ("%repo show no-such-id", "RepoError", "no object with id `no-such-id`"),
        ("%repo rm no-such-id", "RepoError", "no object with id `no-such-id`"),
        ("%repo load no-such-id as x", "RepoError", "no object with id"),
        ("%repo frobnicate", "MagicError", "unknown subcommand"),
        ("%repo open /nonexistent/place", "RepoError", "is not a dryml repo"),
    ]:
        reply, _ = kernel.execute(code)
        assert reply["status"] == "error" and reply["ename"] == ename, (code, reply)
        assert words in reply["evalue"], (code, reply["evalue"])
    assert len(table(ok(kernel, "%repo ls"))[DATA_MIME]["objects"]) == before
    assert value(kernel, "repo.len()") == str(before)


def test_broken_files_name_the_file_and_the_problem(kernel):
    path = f"{kernel.dir}.single.dry"
    data = open(path, "rb").read()
    cases = [
        (data[:-5], "truncated"),
        (data[:8] + (9).to_bytes(4, "little") + data[12:], "written by a newer dryml (format version 9"),
        (data[:-1] + bytes([data[-1] ^ 1]), "corrupt: the checksum does not match"),
    ]
    for i, (bytes_, words) in enumerate(cases):
        bad = f"{kernel.dir}.bad{i}.dry"
        open(bad, "wb").write(bytes_)
        msg = value(kernel, f'dryml::load_object("{bad}").unwrap_err().to_string()')
        assert json.loads(msg).startswith(bad) and words in msg, msg
    # A type this process never defined: the file names it, nothing from the file runs.
    code = f"""
let mut raw = std::fs::read("{path}").unwrap();
let at = raw.windows(5).position(|w| w == b"\\"Mlp\\"").unwrap();
raw[at + 1] = b'Q';
// Keep the checksum honest so the type check is what fails.
let body = raw[24..].to_vec();
let mut h = 0xffff_ffffu32;
for b in &body {{ h ^= *b as u32; for _ in 0..8 {{ h = if h & 1 == 1 {{ (h >> 1) ^ 0xedb8_8320 }} else {{ h >> 1 }}; }} }}
raw[20..24].copy_from_slice(&(!h).to_le_bytes());
std::fs::write("{kernel.dir}.alien.dry", &raw).unwrap();
dryml::load_object("{kernel.dir}.alien.dry").unwrap_err().to_string()"""
    msg = value(kernel, code)
    assert "unknown type `Qlp`" in msg and "registered: ArgMax, Mlp, Standardize, data.Points" in msg, msg


def test_index_lines_naming_files_outside_the_repo_are_skipped_and_reported(kernel):
    d = f"{kernel.dir}-hostile"
    ok(kernel, f"%repo open {d} --create")
    mid = value(kernel, f'{{ let mut r = dryml::Repo::open("{d}").unwrap(); '
                        f'r.add(&Mlp::build(serde_json::json!({{"layers": [1]}}), Meta::new())).unwrap() }}').strip('"')
    index = f"{d}/index.jsonl"
    line = open(index).read()
    with open(index, "a") as f:
        for bad in ["../../outside", "/etc/hostname"]:
            f.write(line.replace(f'"{mid}"', json.dumps(bad)))
    reply, msgs = kernel.execute(f"%repo open {d}")
    assert reply["status"] == "ok", reply
    warned = "".join(m["content"]["text"] for _, m in msgs if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")
    assert "2 line(s) of" in warned and "naming a file outside the repo" in warned, warned
    assert [o["id"] for o in table(ok(kernel, "%repo ls"))[DATA_MIME]["objects"]] == [mid]
    for bad in ["../../outside", "/etc/hostname"]:
        reply, _ = kernel.execute(f"%repo rm {bad}")
        assert reply["status"] == "error" and "no object with id" in reply["evalue"], reply
    # Told once, not on every command.
    reply, msgs = kernel.execute("%repo ls")
    assert not [m for _, m in msgs if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"]
