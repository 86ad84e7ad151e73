"""burn in notebooks, end to end: a cell naming `dryml::models::burn` gets dryml's burn feature
(built once per machine into the build cache); the digits MLP, a conv definition and a burn module
of the notebook's own learn scikit-learn's real digits and score the same reloaded; a sweep over a burn definition fills a
repo and shows in a comparison table beside tch; bad definitions are errors that name the layer.
A burn training killed in its sandbox resumes to the bit in `test_models.py`, as tch's does."""
from conftest import DATA_MIME, NO_NVML, displays, ok, running_kernel, of_type, value
import pytest

from test_models import DIGITS, DIGITS_SPLIT, TORCH_LIB


@pytest.fixture
def kernel():
    # A kernel each: the first cell naming a framework sets dryml's features for the notebook.
    with running_kernel(NO_NVML) as k:
        yield k


def test_burn_learns_real_digits_with_definitions_and_its_own_module_and_a_bad_one_is_named(kernel, tmp_path):
    assert DIGITS.exists(), "kernelspec/bootstrap.sh exports the digits with tests/data/digits.py"
    ok(kernel, f"""use dryml::models::{{eval, Model, TrainSpec}};
use dryml::models::burn::BurnClassifier;
{DIGITS_SPLIT}
let mlp = dryml::serde_json::json!({{
    "layers": [{{"linear": 64}}, "relu", {{"linear": 10}}],
    "optimizer": {{"type": "adam", "lr": 0.01}},
    "training": {{"epochs": 8, "batch_size": 32}}
}});
let cnn = dryml::serde_json::json!({{
    "layers": [{{"reshape": [1, 8, 8]}}, {{"conv2d": {{"channels": 8, "kernel": 3, "padding": 1}}}}, "relu", {{"max_pool": 2}},
               "flatten", {{"dropout": 0.1}}, {{"linear": 10}}],
    "optimizer": {{"type": "adam", "lr": 0.01}},
    "training": {{"epochs": 8, "batch_size": 32}}
}});""", timeout=2400)
    for name in ("mlp", "cnn"):
        got = value(kernel, f"""{{
let mut m = BurnClassifier::new({name}.clone());
m.train(&train, &mut TrainSpec::epochs(0)).unwrap();
let scored = eval(&m, &test).unwrap();
dryml::save_object(&m, "{tmp_path}/{name}.dryml").unwrap();
let back = dryml::load_object("{tmp_path}/{name}.dryml").unwrap();
let again = eval(back.downcast_ref::<BurnClassifier>().unwrap(), &test).unwrap();
let acc = dryml::metrics::categorical_accuracy(&scored).unwrap();
(acc >= 0.9, again.collect().unwrap() == scored.collect().unwrap(), m.placement().unwrap().to_string(), format!("{{acc:.3}}"))
}}""", timeout=600)
        assert got.startswith('(true, true, "cpu", '), (name, got)
    # A definition burn cannot build, and images that do not fit: named, and the kernel goes on.
    got = value(kernel, """let mut bad = BurnClassifier::new(dryml::serde_json::json!({"layers": [{"reshape": [1, 7, 7]}, "flatten", {"linear": 10}]}));
bad.train(&train, &mut TrainSpec::epochs(0)).unwrap_err().to_string()""")
    assert got == '"BurnClassifier: layer 0 ({\\"reshape\\":[1,7,7]}) makes images of [1, 7, 7] (49 values) from 64 features"', got
    got = value(kernel, """let mut norm = BurnClassifier::new(dryml::serde_json::json!({"layers": [{"linear": 16}, "batch_norm", {"linear": 10}]}));
norm.train(&train, &mut TrainSpec::epochs(0)).unwrap_err().to_string()""")
    assert got.startswith('"BurnClassifier: building a layer: \\"batch_norm\\" is not in dryml\'s burn yet'), got
    assert value(kernel, "train.count().unwrap()") == "1400"
    # A network of the user's own: a burn module derived in the notebook, trained by dryml, into
    # a repo and back by its name.
    ok(kernel, """use burn::module::Module;
use burn::nn::{conv::{Conv2d, Conv2dConfig}, Linear, LinearConfig, PaddingConfig2d};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::tensor::{activation::relu, Device, Tensor};
use dryml::models::burn::{BurnModel, BurnNet};
#[derive(Module, Debug)]
struct Cnn { conv: Conv2d, pool: MaxPool2d, out: Linear }
impl BurnNet for Cnn {
    const NAME: &'static str = "BurnCnn";
    fn build(device: &Device, args: &dryml::serde_json::Value) -> Result<Cnn, String> {
        let ch = args["channels"].as_u64().ok_or("`channels` must be a number")? as usize;
        let conv = Conv2dConfig::new([1, ch], [3, 3]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1)).init(device);
        let pool = MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init();
        Ok(Cnn { conv, pool, out: LinearConfig::new(ch * 16, 10).init(device) })
    }
    fn forward_t(&self, xs: Tensor<2>, _train: bool) -> Tensor<2> {
        let n = xs.dims()[0];
        self.out.forward(self.pool.forward(relu(self.conv.forward(xs.reshape([n, 1, 8, 8])))).flatten(1, 3))
    }
}
let mut own = BurnModel::<Cnn>::new(dryml::serde_json::json!({"channels": 8, "optimizer": {"lr": 0.01}, "training": {"epochs": 8, "batch_size": 32}}));
own.train(&train, &mut TrainSpec::epochs(0)).unwrap();
let acc = dryml::metrics::categorical_accuracy(&eval(&own, &test).unwrap()).unwrap();""", timeout=1200)
    got = value(kernel, f"""use dryml::Object;
let mut repo = dryml::Repo::create("{tmp_path / 'repo'}").unwrap();
let id = repo.add(&own).unwrap();
let back = repo.by_id_as::<BurnModel<Cnn>>(&id).unwrap();
let same = eval(&back, &test).unwrap().collect().unwrap() == eval(&own, &test).unwrap().collect().unwrap();
(acc >= 0.9, same, back.type_name(), back.train_spec().epoch, format!("{{acc:.3}}"))""")
    assert got.startswith('(true, true, "BurnCnn", 8, '), got


def test_a_sweep_over_a_burn_definition_fills_a_repo_compared_beside_tch(kernel, tmp_path):
    if not TORCH_LIB:
        pytest.fail("torch is missing from .venv: kernelspec/bootstrap.sh installs torch==2.13.0")
    repo = tmp_path / "runs"
    # burn and tch in one notebook: the cell crate resolves both (the kernel's patched manifests).
    ok(kernel, """use dryml::models::{eval, Model};
use dryml::models::{burn::BurnClassifier, tch::TchClassifier};
use dryml::metrics::{categorical_accuracy, Comparison};
let iris = dryml::models::linfa::iris().shuffle(150, 1);
let (train, test) = (iris.take(100), iris.skip(100));
let def = |kind: &str, lr: f64| dryml::ObjectDef::new(kind, &dryml::serde_json::json!({
    "layers": [{"linear": 16}, "relu", {"linear": 3}],
    "optimizer": {"type": "adam", "lr": lr},
    "training": {"epochs": 30, "batch_size": 16}
})).unwrap();
let burn_defs: Vec<dryml::ObjectDef> = [0.01, 0.03].iter().map(|&lr| def("BurnClassifier", lr)).collect();
let tch_defs: Vec<dryml::ObjectDef> = [0.01, 0.03].iter().map(|&lr| def("TchClassifier", lr)).collect();""",
       timeout=2400)
    for defs, kind in (("burn_defs", "BurnClassifier"), ("tch_defs", "TchClassifier")):
        msgs = ok(kernel, f"""%%sweep {defs} --repo {repo}
|m: &mut {kind}| {{
    let mut spec = m.train_spec();
    m.train(&train, &mut spec).unwrap();
    dryml::serde_json::json!({{"accuracy": categorical_accuracy(&eval(&*m, &test).unwrap()).unwrap()}})
}}""", timeout=1200)
        report = of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]
        assert "Sweep of 2 definitions: 2 trained, 0 failed" in report, report
    shown = displays(ok(kernel, f"%repo open {repo}\n%repo get BurnClassifier optimizer.lr=0.03"))
    found = [d for d in shown if DATA_MIME in d][-1][DATA_MIME]["objects"]
    assert len(found) == 1, found
    got = value(kernel, f"""{{
let r = dryml::Repo::open("{repo}").unwrap();
let c = Comparison::from_repo(&r, "accuracy", &[
    ("burn MLP", dryml::Selector::of("BurnClassifier")),
    ("tch MLP", dryml::Selector::of("TchClassifier")),
]).unwrap();
let sel = dryml::Selector::of("BurnClassifier").arg("optimizer.lr", dryml::serde_json::json!(0.03));
let obj = r.get(&sel).unwrap().remove(0);
let m = obj.downcast_ref::<BurnClassifier>().unwrap();
(format!("{{c}}").contains("burn MLP"), m.train_spec().epoch, categorical_accuracy(&eval(m, &test).unwrap()).unwrap() >= 0.9)
}}""")
    assert got == "(true, 30, true)", got
