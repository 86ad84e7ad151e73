"""Models in notebooks, end to end: a cell naming `linfa` (or `dryml::models::linfa`) gets
dryml's linfa feature and the datasets linfa ships; a tch classifier built from components is
swept over a nested parameter in sandboxes, and `%repo get` finds it by that nested key; a cell
naming candle trains the same definition with candle; CNNs (defined, and the user's own) on
scikit-learn's real digits; a regression on diabetes; the digits read from numpy's files,
folders of PNG images and Parquet, and bad files named."""
import numpy as np
import pytest

from conftest import DATA_MIME, NO_NVML, ROOT, displays, of_type, ok, running_kernel, stderr_of, stdout_of, value
from data.digits import png

TORCH_LIB = sorted((ROOT / ".venv" / "lib").glob("python3*/site-packages/torch/lib/libtorch.so"))


@pytest.fixture
def kernel():
    # A kernel each: a notebook's first cell that names a framework sets dryml's features, and
    # values of an earlier build of dryml are not the same types as a later one's.
    if not TORCH_LIB:
        pytest.fail("torch is missing from .venv: kernelspec/bootstrap.sh installs torch==2.13.0")
    with running_kernel(NO_NVML) as k:
        yield k


def test_a_cell_naming_linfa_gets_its_models_and_real_data(kernel):
    # The first such cell builds dryml's linfa feature (and linfa): a while on a cold cache.
    got = value(kernel, """use dryml::models::{eval, Model, TrainSpec};
let iris = dryml::models::linfa::iris().shuffle(150, 3);
let (train, test) = (iris.take(100), iris.skip(100));
let mut tree = dryml::models::linfa::DecisionTree::new(dryml::serde_json::json!({"max_depth": 4}));
let mut spec = TrainSpec::epochs(1);
tree.train(&train, &mut spec).unwrap();
let acc = dryml::metrics::categorical_accuracy(&eval(&tree, &test).unwrap()).unwrap();
(acc >= 0.85, spec.step, format!("{:?}", train.batch(32, false).unwrap()))""", timeout=1200)
    assert got.startswith('(true, 100, "Dataset of 4 '), got
    assert "(supervised, batches of 32)" in got, got


def test_a_sweep_over_a_nested_parameter_is_found_by_its_nested_key(kernel, tmp_path):
    repo = tmp_path / "runs"
    ok(kernel, """use dryml::models::{eval, Model};
use dryml::models::tch::TchClassifier;
let iris = dryml::models::linfa::iris().shuffle(150, 1);
let (train, test) = (iris.take(100), iris.skip(100));
let defs: Vec<dryml::ObjectDef> = [0.01, 0.03].iter().map(|lr| dryml::ObjectDef::new("TchClassifier", &dryml::serde_json::json!({
    "layers": [{"linear": 16}, "relu", {"linear": 3}],
    "optimizer": {"type": "adam", "lr": lr},
    "training": {"epochs": 30, "batch_size": 16}
})).unwrap()).collect();""", timeout=1200)
    msgs = ok(kernel, f"""%%sweep defs --repo {repo}
|m: &mut TchClassifier| {{
    let mut spec = m.train_spec();
    m.train(&train, &mut spec).unwrap();
    dryml::metrics::categorical_accuracy(&eval(&*m, &test).unwrap()).unwrap()
}}""", timeout=1200)
    report = of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]
    assert "Sweep of 2 definitions: 2 trained, 0 failed" in report, report
    shown = displays(ok(kernel, f"%repo open {repo}\n%repo get TchClassifier optimizer.lr=0.03"))
    found = [d for d in shown if DATA_MIME in d][-1][DATA_MIME]["objects"]
    assert len(found) == 1, found
    # The trained network comes back from the repo and scores as it did in its sandbox.
    # In a block: evcxr cannot keep a variable that borrows another.
    got = value(kernel, f"""{{
let r = dryml::Repo::open("{repo}").unwrap();
let sel = dryml::Selector::of("TchClassifier").arg("optimizer.lr", dryml::serde_json::json!(0.03));
let obj = r.get(&sel).unwrap().remove(0);
let m = obj.downcast_ref::<TchClassifier>().unwrap();
(m.train_spec().epoch, dryml::metrics::categorical_accuracy(&eval(m, &test).unwrap()).unwrap() >= 0.9)
}}""")
    assert got == "(30, true)", got


def test_a_cell_naming_candle_trains_the_same_definition_in_pure_rust(kernel):
    # Naming both frameworks in the notebook's first cell gives dryml both features at once.
    got = value(kernel, """use dryml::models::{eval, Model, TrainSpec};
use dryml::models::candle::CandleClassifier;
let iris = dryml::models::linfa::iris().shuffle(150, 1);
let (train, test) = (iris.take(100), iris.skip(100));
let mut net = CandleClassifier::new(dryml::serde_json::json!({
    "layers": [{"linear": 16}, "relu", {"linear": 3}],
    "optimizer": {"type": "adam", "lr": 0.02},
    "training": {"epochs": 40, "batch_size": 16}
}));
let mut spec = TrainSpec::epochs(0);
net.train(&train, &mut spec).unwrap();
(dryml::metrics::categorical_accuracy(&eval(&net, &test).unwrap()).unwrap() >= 0.9, spec.step)""", timeout=1800)
    assert got == "(true, 280)", got
    # A training shows its loss curves as it goes: drawn once, then redrawn in place each epoch.
    msgs = ok(kernel, """let mut live = dryml::models::callbacks::LiveLoss::new("iris loss");
let mut again = CandleClassifier::new(dryml::serde_json::json!({
    "layers": [{"linear": 16}, "relu", {"linear": 3}],
    "training": {"epochs": 5, "validation_split": 0.2}
}));
again.train_with(&train, &mut TrainSpec::epochs(0), &mut [&mut live]).unwrap();
println!("heard {}", live.history.epochs.len());""", timeout=600)
    drawn, redrawn = of_type(msgs, "display_data"), of_type(msgs, "update_display_data")
    assert (len(drawn), len(redrawn)) == (1, 4), (len(drawn), len(redrawn))
    ids = {m["content"]["transient"]["display_id"] for m in drawn + redrawn}
    assert len(ids) == 1, ids
    assert "validation" in redrawn[-1]["content"]["data"]["image/svg+xml"]
    assert "heard 5" in "".join(m["content"]["text"] for m in of_type(msgs, "stream"))


@pytest.mark.parametrize("framework, kind, optimizer", [("tch", "TchClassifier", "adam"),
                                                      ("burn", "BurnClassifier", "adamw")])
def test_a_training_whose_sandbox_is_killed_resumes_to_the_same_bits(kernel, tmp_path, framework, kind, optimizer):
    # The sandbox checkpoints after every epoch; its timeout SIGKILLs it mid-training.
    ckpt = tmp_path / "model.dryml"
    ok(kernel, f"""use dryml::models::{{Model, TrainSpec}};
use dryml::models::{framework}::{kind} as Net;
let train = dryml::models::linfa::iris().shuffle(150, 1).take(100);
// Two milliseconds per element: about 0.2 s an epoch, 6 s for all 30.
let slow = train.map(|e| {{ std::thread::sleep(std::time::Duration::from_millis(2)); e }});
let args = dryml::serde_json::json!({{
    "layers": [{{"linear": 16}}, "relu", {{"linear": 3}}],
    "optimizer": {{"type": "{optimizer}", "lr": 0.02}},
    "training": {{"epochs": 30, "batch_size": 16, "seed": 4}}
}});""", timeout=2400)
    reply, _ = kernel.execute(f"""%%compute --timeout 1.5
let mut m = Net::new(args.clone());
m.checkpoint_to("{ckpt}");
m.train(&slow, &mut TrainSpec::epochs(0)).unwrap();""", timeout=300)
    assert (reply["status"], reply["ename"]) == ("error", "SandboxTimedOut"), reply
    got = value(kernel, f"""{{
let mut obj = dryml::load_object("{ckpt}").unwrap();
let m = obj.downcast_mut::<Net>().unwrap();
let mut spec = m.train_spec();
let killed_at = spec.epoch;
m.train(&train, &mut spec).unwrap();
let mut whole = TrainSpec::epochs(0);
let mut twin = Net::new(args.clone());
twin.train(&train, &mut whole).unwrap();
let bits = |p: dryml::models::optim::Named| p.into_iter().map(|(n, _, v)| (n, v.into_iter().map(f32::to_bits).collect::<Vec<_>>())).collect::<Vec<_>>();
(killed_at > 0 && killed_at < 30, spec == whole, spec.step, bits(m.parameters().unwrap()) == bits(twin.parameters().unwrap()), m.placement().unwrap().to_string())
}}""")
    # 100 flowers in batches of 16: 7 steps an epoch; the weights of the uninterrupted training,
    # bit for bit (the optimiser's moments travel in the checkpoint).
    assert got == '(true, true, 210, true, "cpu")', got


def test_a_framework_named_after_dryml_is_built_is_told(kernel):
    first = ok(kernel, "let n = dryml::data::Dataset::from_vec(vec![1u8, 2]).count().unwrap();\nn", timeout=1200)
    assert "built again" not in stderr_of(first)
    msgs = ok(kernel, "let iris = dryml::models::linfa::iris();\niris.count().unwrap()", timeout=1200)
    err = stderr_of(msgs)
    assert err.startswith("dryml: this cell adds the framework linfa, so dryml is built again with it."), err
    assert "150" in of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]


DIGITS = ROOT / "target" / "data" / "digits.csv"
# scikit-learn's 1,797 digits as pixels in [0, 1]: 1,400 to train on, 397 held out.
DIGITS_SPLIT = f"""use dryml::data::{{CsvOptions, Dataset, Xy}};
let digits = Dataset::from_csv_xy("{DIGITS}", "label", &CsvOptions::default()).unwrap()
    .map(|e| Xy {{ x: e.x.mapv(|v| v as f32 / 16.0), y: e.y as usize }}).shuffle(1797, 5);
let (train, test) = (digits.take(1400), digits.skip(1400));"""


def test_a_cnn_definition_learns_real_digits_in_tch_and_candle_and_a_bad_one_is_named(kernel, tmp_path):
    # scikit-learn's 1,797 handwritten 8×8 digits (kernelspec/bootstrap.sh exports them).
    assert DIGITS.exists(), "kernelspec/bootstrap.sh exports the digits with tests/data/digits.py"
    ok(kernel, f"""use dryml::models::{{eval, Model, TrainSpec}};
use dryml::models::{{tch::TchClassifier, candle::CandleClassifier}};
{DIGITS_SPLIT}
let cnn = dryml::serde_json::json!({{
    "layers": [{{"reshape": [1, 8, 8]}}, {{"conv2d": {{"channels": 8, "kernel": 3, "padding": 1}}}}, "relu", {{"max_pool": 2}},
               "flatten", {{"dropout": 0.1}}, {{"linear": 10}}],
    "optimizer": {{"type": "adam", "lr": 0.01}},
    "training": {{"epochs": 8, "batch_size": 32}}
}});""", timeout=1200)
    for name in ("TchClassifier", "CandleClassifier"):
        got = value(kernel, f"""{{
let mut m = {name}::new(cnn.clone());
m.train(&train, &mut TrainSpec::epochs(0)).unwrap();
let scored = eval(&m, &test).unwrap();
dryml::save_object(&m, "{tmp_path}/{name}.dryml").unwrap();
let back = dryml::load_object("{tmp_path}/{name}.dryml").unwrap();
let again = eval(back.downcast_ref::<{name}>().unwrap(), &test).unwrap();
let acc = dryml::metrics::categorical_accuracy(&scored).unwrap();
(acc >= 0.9, again.collect().unwrap() == scored.collect().unwrap(), m.placement().unwrap().to_string(), format!("{{acc:.3}}"))
}}""", timeout=600)
        assert got.startswith('(true, true, "cpu", '), (name, got)
    # Images that do not fit the definition: the layer is named, and the kernel goes on.
    got = value(kernel, """let mut bad = TchClassifier::new(dryml::serde_json::json!({"layers": [{"reshape": [1, 7, 7]}, "flatten", {"linear": 10}]}));
bad.train(&train, &mut TrainSpec::epochs(0)).unwrap_err().to_string()""")
    assert got == '"TchClassifier: layer 0 ({\\"reshape\\":[1,7,7]}) makes images of [1, 7, 7] (49 values) from 64 features"', got
    assert value(kernel, "train.count().unwrap()") == "1400"


def test_a_users_own_tch_cnn_trains_through_dryml_on_real_digits(kernel, tmp_path):
    # The user writes only the network; dryml gives it the training, the checkpoint and resume,
    # the repo, and its arguments as its definition.
    assert DIGITS.exists(), "kernelspec/bootstrap.sh exports the digits with tests/data/digits.py"
    ok(kernel, f"""use dryml::models::{{eval, Model, TrainSpec}};
use dryml::models::tch::{{TchModel, TchNet}};
use tch::{{nn, Tensor}};
struct Cnn {{ conv: nn::Conv2D, out: nn::Linear }}
impl TchNet for Cnn {{
    const NAME: &'static str = "Cnn";
    fn build(p: &nn::Path, args: &dryml::serde_json::Value) -> Result<Cnn, String> {{
        let ch = args["channels"].as_i64().ok_or("`channels` must be a number")?;
        let conv = nn::conv2d(p / "conv", 1, ch, 3, nn::ConvConfig {{ padding: 1, ..Default::default() }});
        Ok(Cnn {{ conv, out: nn::linear(p / "out", ch * 16, 10, Default::default()) }})
    }}
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {{
        xs.view([-1, 1, 8, 8]).apply(&self.conv).relu().max_pool2d_default(2).flatten(1, -1).apply(&self.out)
    }}
}}
{DIGITS_SPLIT}
let mut cnn = TchModel::<Cnn>::new(dryml::serde_json::json!({{"channels": 8, "optimizer": {{"lr": 0.01}}, "training": {{"epochs": 8, "batch_size": 32}}}}));
cnn.train(&train, &mut TrainSpec::epochs(0)).unwrap();
let acc = dryml::metrics::categorical_accuracy(&eval(&cnn, &test).unwrap()).unwrap();""", timeout=1200)
    got = value(kernel, "(acc >= 0.9, cnn.train_spec().epoch, cnn.placement().unwrap().to_string(), format!(\"{acc:.3}\"))")
    assert got.startswith('(true, 8, "cpu", '), got
    # Into a repo and back as its type: the same predictions; a selector reaches its own argument.
    got = value(kernel, f"""use dryml::Object;
let mut repo = dryml::Repo::create("{tmp_path / 'repo'}").unwrap();
let id = repo.add(&cnn).unwrap();
let back = repo.by_id_as::<TchModel<Cnn>>(&id).unwrap();
let same = eval(&back, &test).unwrap().collect().unwrap() == eval(&cnn, &test).unwrap().collect().unwrap();
(same, repo.find(&dryml::Selector::of("Cnn").arg("channels", 8.into())).len(), back.type_name(), back.train_spec().epoch)""")
    assert got == '(true, 1, "Cnn", 8)', got
    # A sweep over its own argument, in sandboxes: each definition built as the closure's type.
    ok(kernel, """let defs: Vec<dryml::ObjectDef> = [4, 8].iter().map(|c| dryml::ObjectDef::new("Cnn", &dryml::serde_json::json!({
    "channels": c, "optimizer": {"lr": 0.01}, "training": {"epochs": 3, "batch_size": 32}})).unwrap()).collect();""")
    msgs = ok(kernel, f"""%%sweep defs --repo {tmp_path / 'swept'}
|m: &mut TchModel<Cnn>| {{
    m.train(&train, &mut TrainSpec::epochs(0)).unwrap();
    dryml::metrics::categorical_accuracy(&eval(&*m, &test).unwrap()).unwrap()
}}""", timeout=600)
    report = of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]
    assert "Sweep of 2 definitions: 2 trained, 0 failed" in report, report


def test_a_users_own_candle_cnn_trains_through_dryml_on_real_digits(kernel, tmp_path):
    assert DIGITS.exists(), "kernelspec/bootstrap.sh exports the digits with tests/data/digits.py"
    ok(kernel, f"""use dryml::models::{{eval, Model, TrainSpec}};
use dryml::models::candle::{{CandleModel, CandleNet}};
use candle_core::{{Module, Tensor}};
struct Cnn {{ conv: candle_nn::Conv2d, out: candle_nn::Linear }}
impl CandleNet for Cnn {{
    const NAME: &'static str = "CandleCnn";
    fn build(vb: candle_nn::VarBuilder, args: &dryml::serde_json::Value) -> Result<Cnn, String> {{
        let ch = args["channels"].as_u64().ok_or("`channels` must be a number")? as usize;
        let cfg = candle_nn::Conv2dConfig {{ padding: 1, ..Default::default() }};
        let conv = candle_nn::conv2d(1, ch, 3, cfg, vb.pp("conv")).map_err(|e| e.to_string())?;
        Ok(Cnn {{ conv, out: candle_nn::linear(ch * 16, 10, vb.pp("out")).map_err(|e| e.to_string())? }})
    }}
    fn forward_t(&self, xs: &Tensor, _train: bool) -> candle_core::Result<Tensor> {{
        let n = xs.dim(0)?;
        self.out.forward(&self.conv.forward(&xs.reshape((n, 1, 8, 8))?)?.relu()?.max_pool2d(2)?.flatten_from(1)?)
    }}
}}
{DIGITS_SPLIT}
let mut cnn = CandleModel::<Cnn>::new(dryml::serde_json::json!({{"channels": 8, "optimizer": {{"lr": 0.01}}, "training": {{"epochs": 8, "batch_size": 32}}}}));
cnn.train(&train, &mut TrainSpec::epochs(0)).unwrap();
let acc = dryml::metrics::categorical_accuracy(&eval(&cnn, &test).unwrap()).unwrap();""", timeout=1200)
    got = value(kernel, f"""dryml::save_object(&cnn, "{tmp_path}/cnn.dryml").unwrap();
let back = dryml::objects::load_object_as::<CandleModel<Cnn>>("{tmp_path}/cnn.dryml").unwrap();
(acc >= 0.9, eval(&back, &test).unwrap().collect().unwrap() == eval(&cnn, &test).unwrap().collect().unwrap(), format!("{{acc:.3}}"))""")
    assert got.startswith("(true, true, "), got


def test_a_users_own_network_takes_an_image_and_a_row_as_two_inputs(kernel, tmp_path):
    # A network of two inputs: each digit as a 1×8×8 image through a convolution, and its eight
    # row sums through a layer, joined. dryml batches the pair into a pair of tensors.
    assert DIGITS.exists(), "kernelspec/bootstrap.sh exports the digits with tests/data/digits.py"
    ok(kernel, f"""use dryml::models::{{eval, Model, TrainSpec}};
use dryml::models::tch::{{TchModel, TchNet}};
use dryml::data::ndarray::{{Array1, Array3, Axis}};
use tch::{{nn, Tensor}};
struct Both {{ conv: nn::Conv2D, row: nn::Linear, out: nn::Linear }}
impl TchNet<(Array3<f32>, Array1<f32>)> for Both {{
    const NAME: &'static str = "Both";
    fn build(p: &nn::Path, _: &dryml::serde_json::Value) -> Result<Both, String> {{
        let conv = nn::conv2d(p / "conv", 1, 8, 3, nn::ConvConfig {{ padding: 1, ..Default::default() }});
        Ok(Both {{ conv, row: nn::linear(p / "row", 8, 16, Default::default()), out: nn::linear(p / "out", 8 * 16 + 16, 10, Default::default()) }})
    }}
    fn forward_t(&self, (images, sums): &(Tensor, Tensor), _train: bool) -> Tensor {{
        let seen = images.apply(&self.conv).relu().max_pool2d_default(2).flatten(1, -1);
        Tensor::cat(&[seen, sums.apply(&self.row).relu()], 1).apply(&self.out)
    }}
}}
fn both(x: Array1<f32>) -> (Array3<f32>, Array1<f32>) {{
    let image = x.into_shape_with_order((1, 8, 8)).unwrap();
    let sums = image.sum_axis(Axis(2)).index_axis(Axis(0), 0).to_owned();
    (image, sums)
}}
{DIGITS_SPLIT}
let (train2, test2) = (train.apply_x(both), test.apply_x(both));
let mut two = TchModel::<Both, usize, (Array3<f32>, Array1<f32>)>::new(dryml::serde_json::json!({{"optimizer": {{"lr": 0.01}}, "training": {{"epochs": 8, "batch_size": 32}}}}));
two.train(&train2, &mut TrainSpec::epochs(0)).unwrap();
let acc2 = dryml::metrics::categorical_accuracy(&eval(&two, &test2).unwrap()).unwrap();""", timeout=1200)
    got = value(kernel, f"""dryml::save_object(&two, "{tmp_path}/two.dryml").unwrap();
let back2 = dryml::objects::load_object_as::<TchModel<Both, usize, (Array3<f32>, Array1<f32>)>>("{tmp_path}/two.dryml").unwrap();
(acc2 >= 0.9, eval(&back2, &test2).unwrap().collect().unwrap() == eval(&two, &test2).unwrap().collect().unwrap(), format!("{{acc2:.3}}"))""")
    assert got.startswith("(true, true, "), got
    # Rows where the pair is wanted: a compile error in the cell, not a wrong training.
    reply, _ = kernel.execute("two.predict(&Array1::<f32>::zeros(64))")
    assert reply["status"] == "error" and reply["ename"] == "CompilationError", reply
    assert value(kernel, "test2.count().unwrap()") == "397"


def test_numpys_files_are_datasets_and_a_bad_one_is_named(kernel, tmp_path):
    # The digits as numpy's archive (uint8 images, int64 classes): a cell naming
    # dryml::data::numpy gets dryml's numpy feature.
    npz = DIGITS.with_suffix(".npz")
    assert npz.exists(), "kernelspec/bootstrap.sh exports the digits with tests/data/digits.py"
    got = value(kernel, f"""use dryml::models::{{eval, Model, TrainSpec}};
use dryml::models::candle::CandleClassifier;
let digits = dryml::data::numpy::xy("{npz}", "x", "y").unwrap().apply_x(|x| x / 16.0).shuffle(1797, 5);
let (train, test) = (digits.take(1400), digits.skip(1400));
let mut cnn = CandleClassifier::new(dryml::serde_json::json!({{
    "layers": [{{"reshape": [1, 8, 8]}}, {{"conv2d": {{"channels": 8, "kernel": 3, "padding": 1}}}}, "relu", {{"max_pool": 2}}, "flatten", {{"linear": 10}}],
    "optimizer": {{"lr": 0.01}}, "training": {{"epochs": 6, "batch_size": 32}}
}}));
cnn.train(&train, &mut TrainSpec::epochs(0)).unwrap();
let acc = dryml::metrics::categorical_accuracy(&eval(&cnn, &test).unwrap()).unwrap();
(digits.count().unwrap(), acc >= 0.9, format!("{{acc:.3}}"))""", timeout=1200)
    assert got.startswith("(1797, true, "), got
    # A file cut short: the file is named, the cell fails, the kernel and its variables live on.
    cut = tmp_path / "cut.npz"
    cut.write_bytes(npz.read_bytes()[:1000])
    got = value(kernel, f'dryml::data::numpy::xy("{cut}", "x", "y").map(|_| ()).unwrap_err().to_string()')
    assert f"{cut}" in got and "not a .npz archive" in got, got
    assert value(kernel, "train.count().unwrap()") == "1400"
    # The images alone as a `.npy`, read where it lies (as a file beyond memory is): the same
    # rows as read whole; a cut one is named with what its header promised.
    npy = DIGITS.parent / "digits_x.npy"
    got = value(kernel, f"""let lies = dryml::data::numpy::rows_on_disk("{npy}").unwrap();
let whole = dryml::data::numpy::rows("{npy}").unwrap();
(lies.count().unwrap(), lies.shuffle(1797, 2).batch(64, false).unwrap().collect().unwrap() == whole.shuffle(1797, 2).batch(64, false).unwrap().collect().unwrap())""")
    assert got == "(1797, true)", got
    cut = tmp_path / "cut.npy"
    cut.write_bytes(npy.read_bytes()[:5000])
    got = value(kernel, f'dryml::data::numpy::rows_on_disk("{cut}").map(|_| ()).unwrap_err().to_string()')
    assert got == f'"{cut}: the file is cut: its header promises 115008 bytes of values (shape [1797, 8, 8]) and it holds 4872"', got
    assert value(kernel, "train.count().unwrap()") == "1400"


def test_a_regression_network_learns_diabetes_to_a_stated_error(kernel, tmp_path):
    # linfa's diabetes: 442 patients, the disease's progression a year on (mean 152, spread 77).
    # Features and targets brought to a spread of about 1; the error is read back in the
    # disease's units. The mean's own error on these 100 held out is about 6,150.
    ok(kernel, """use dryml::models::{eval, Model, TrainSpec};
use dryml::models::{tch::TchRegressor, candle::CandleRegressor};
use dryml::data::Xy;
let data = dryml::models::linfa::diabetes().apply(|x, y| (x * 21.0, (y - 152.0) / 77.0)).shuffle(442, 1);
let (train, test) = (data.take(342), data.skip(342));
let def = dryml::serde_json::json!({"layers": [{"linear": 16}, "relu", {"linear": 1}], "optimizer": {"lr": 0.01},
                                    "training": {"epochs": 30, "batch_size": 32}});
fn in_units(scored: &dryml::data::Dataset<Xy<dryml::data::ndarray::Array1<f32>, f32>>) -> f64 {
    dryml::metrics::mean_squared_error(&scored.map(|e| Xy { x: e.x * 77.0, y: e.y * 77.0 })).unwrap()
}""", timeout=1200)
    for name in ("TchRegressor", "CandleRegressor"):
        got = value(kernel, f"""{{
let mut m = {name}::new(def.clone());
m.train(&train, &mut TrainSpec::epochs(0)).unwrap();
dryml::save_object(&m, "{tmp_path}/{name}.dryml").unwrap();
let back = dryml::load_object("{tmp_path}/{name}.dryml").unwrap();
let back = back.downcast_ref::<{name}>().unwrap();
let mse = in_units(&eval(&m, &test).unwrap());
(mse <= 4200.0, in_units(&eval(back, &test).unwrap()) == mse, format!("{{mse:.0}}"))
}}""", timeout=600)
        assert got.startswith("(true, true, "), (name, got)
    # Values given a classifier's loss: the model says what to change, and the kernel goes on.
    got = value(kernel, """TchRegressor::new(dryml::serde_json::json!({"layers": [{"linear": 1}], "loss": "cross_entropy"}))
    .train(&train, &mut TrainSpec::epochs(0)).unwrap_err().to_string()""")
    assert got.startswith('"TchRegressor: the targets are values, and cross-entropy scores classes'), got
    assert value(kernel, "train.count().unwrap()") == "342"


def test_image_folders_and_parquet_files_are_datasets_and_bad_ones_are_named(kernel, tmp_path):
    # The digits as folders of PNG files by class, and as a Parquet file (kernelspec/bootstrap.sh
    # exports both); a cell naming dryml::data::{images, parquet} gets dryml's two features (both
    # in the first cell: a feature added later builds dryml again, and its earlier values go).
    pngs, table = DIGITS.parent / "digits-png", DIGITS.with_suffix(".parquet")
    assert pngs.is_dir() and table.exists(), "kernelspec/bootstrap.sh exports the digits with tests/data/digits.py"
    got = value(kernel, f"""use dryml::models::{{eval, Model, TrainSpec}};
use dryml::models::candle::CandleClassifier;
use dryml::data::images::{{folder, ImageOptions}};
use dryml::data::parquet;
let digits = folder("{pngs}", &ImageOptions::default()).unwrap();
let [c, h, w] = digits.shape();
let mixed = digits.data.shuffle(1797, 5);
let (train, test) = (mixed.take(1400), mixed.skip(1400));
let mut cnn = CandleClassifier::new(dryml::serde_json::json!({{
    "layers": [{{"reshape": [c, h, w]}}, {{"conv2d": {{"channels": 8, "kernel": 3, "padding": 1}}}}, "relu", {{"max_pool": 2}}, "flatten", {{"linear": 10}}],
    "optimizer": {{"lr": 0.01}}, "training": {{"epochs": 6, "batch_size": 32}}
}}));
cnn.train(&train, &mut TrainSpec::epochs(0)).unwrap();
let acc = dryml::metrics::categorical_accuracy(&eval(&cnn, &test).unwrap()).unwrap();
(digits.classes.join(""), [c, h, w], acc >= 0.9, format!("{{acc:.3}}"))""", timeout=1200)
    assert got.startswith('("0123456789", [1, 8, 8], true, '), got
    got = value(kernel, f"""let rows = parquet::xy::<usize>("{table}", &[], "label").unwrap().apply_x(|x| x / 16.0).shuffle(1797, 5);
let mut mlp = CandleClassifier::new(dryml::serde_json::json!({{"layers": [{{"linear": 32}}, "relu", {{"linear": 10}}], "optimizer": {{"lr": 0.01}}, "training": {{"epochs": 10}}}}));
mlp.train(&rows.take(1400), &mut TrainSpec::epochs(0)).unwrap();
let acc = dryml::metrics::categorical_accuracy(&eval(&mlp, &rows.skip(1400)).unwrap()).unwrap();
(rows.count().unwrap(), acc >= 0.9, format!("{{acc:.3}}"))""", timeout=600)
    assert got.startswith("(1797, true, "), got
    # An image of the wrong size in a folder: the training's error names the file, and the
    # kernel and its variables live on.
    bad = tmp_path / "bad"
    for label in ("0", "1"):
        (bad / label).mkdir(parents=True)
        for f in sorted((pngs / label).iterdir())[:3]:
            (bad / label / f.name).write_bytes(f.read_bytes())
    odd = sorted((bad / "1").iterdir())[1]
    odd.write_bytes(png(np.zeros((8, 9), dtype=np.uint8)))
    got = value(kernel, f"""let mut m = CandleClassifier::new(dryml::serde_json::json!({{"layers": [{{"linear": 2}}], "training": {{"epochs": 1}}}}));
m.train(&folder("{bad}", &ImageOptions::default()).unwrap().data, &mut TrainSpec::epochs(0)).unwrap_err().to_string()""")
    assert got == f'"{odd}: element 4: the image is 9×8 pixels; the folder\'s images are 8×8"', got
    # A Parquet column of the wrong type: the file and the column are named.
    import pyarrow as pa
    import pyarrow.parquet as pq
    words = tmp_path / "words.parquet"
    pq.write_table(pa.table({"x": pa.array([1.0, 2.0]), "label": pa.array(["cat", "dog"])}), words)
    got = value(kernel, f'dryml::data::parquet::xy::<usize>("{words}", &[], "label").map(|_| ()).unwrap_err().to_string()')
    assert got == f'"{words}: column `label` holds Utf8; the target column must hold integers (classes)"', got
    assert value(kernel, "train.count().unwrap()") == "1400"


def test_a_sweeps_and_an_experiments_networks_write_tensorboard_runs_that_tensorboard_reads(kernel, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    repo, logdir = tmp_path / "runs", tmp_path / "tensorboard"
    ok(kernel, """use dryml::models::Model;
use dryml::models::candle::CandleClassifier;
use dryml::models::tensorboard::TensorBoard;
let iris = dryml::models::linfa::iris().shuffle(150, 1);
let defs: Vec<dryml::ObjectDef> = [0.01, 0.05].iter().map(|lr| dryml::ObjectDef::new("CandleClassifier", &dryml::serde_json::json!({
    "layers": [{"linear": 8}, "relu", {"linear": 3}],
    "optimizer": {"type": "adam", "lr": lr},
    "training": {"epochs": 4, "batch_size": 16, "validation_split": 0.2}
})).unwrap()).collect();""", timeout=1800)
    msgs = ok(kernel, f"""%%sweep defs --repo {repo}
|m: &mut CandleClassifier| {{
    let mut tb = TensorBoard::for_object("{logdir}", &*m).unwrap();
    let mut spec = m.train_spec();
    m.train_with(&iris, &mut spec, &mut [&mut tb]).unwrap();
    spec.step
}}""", timeout=1200)
    report = of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"]
    assert "2 trained, 0 failed" in report, report
    shown = displays(ok(kernel, f"%repo open {repo}\n%repo get CandleClassifier"))
    ids = sorted(o["id"] for o in [d for d in shown if DATA_MIME in d][-1][DATA_MIME]["objects"])
    # One run per model, named by its object id, read back by TensorBoard's own reader.
    assert sorted(p.name for p in logdir.iterdir()) == ids
    for run in ids:
        acc = EventAccumulator(str(logdir / run), size_guidance={"tensors": 0, "scalars": 0, "histograms": 0})
        acc.Reload()
        assert {"loss/train", "loss/validation"} <= set(acc.Tags()["scalars"]), acc.Tags()
        train = acc.Scalars("loss/train")
        assert [e.step for e in train] == [1, 2, 3, 4] and all(e.value > 0 for e in train), train
        assert len(acc.Scalars("loss/validation")) == 4
        text = acc.Tensors("definition")[0].tensor_proto.string_val[0].decode()
        assert "CandleClassifier" in text and '"lr"' in text, text
        # How it was made, as a table TensorBoard shows; and in the repo, for the same object.
        made = acc.Tensors("provenance")[0].tensor_proto.string_val[0].decode()
        assert made.startswith("| part | value |") and "| crate candle-core | 0.11." in made, made
        page = displays(ok(kernel, f"%repo show {run}"))[0]
        assert page[DATA_MIME]["provenance"]["crates"]["candle-core"].startswith("0.11."), page[DATA_MIME]
        # A histogram of each parameter of the network after every epoch.
        weights = [t for t in acc.Tags()["histograms"] if t.startswith("weights/")]
        assert len(weights) >= 4, acc.Tags()
        assert all([e.step for e in acc.Histograms(t)] == [1, 2, 3, 4] for t in weights), weights

    # An experiment that asks for TensorBoard: every network trained in it writes its run unasked,
    # and the experiment writes its own at the finish; a training after it writes none.
    exp_dir = tmp_path / "experiments"
    msgs = ok(kernel, f"""%%experiment lr_probe --tensorboard {exp_dir}
use dryml::models::TrainSpec;
let mut probe = CandleClassifier::new(dryml::serde_json::json!({{
    "layers": [{{"linear": 8}}, "relu", {{"linear": 3}}], "training": {{"epochs": 2, "batch_size": 16}}}}));
probe.train(&iris, &mut TrainSpec::epochs(0)).unwrap();
println!("probe={{}}", dryml::Object::meta(&probe).id);""", timeout=600)
    probe = [line for line in stdout_of(msgs).splitlines() if line.startswith("probe=")][0][len("probe="):]
    assert sorted(p.name for p in exp_dir.iterdir()) == sorted([probe, "lr_probe"])
    acc = EventAccumulator(str(exp_dir / probe), size_guidance={"tensors": 0, "scalars": 0, "histograms": 0})
    acc.Reload()
    assert [e.step for e in acc.Scalars("loss/train")] == [1, 2]
    assert any(t.startswith("weights/") for t in acc.Tags()["histograms"]), acc.Tags()
    assert "CandleClassifier" in acc.Tensors("definition")[0].tensor_proto.string_val[0].decode()
    acc = EventAccumulator(str(exp_dir / "lr_probe"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    assert {"memory/cpu/consumed_mib", "memory/cpu/peaked_mib", "memory/cpu/reclaimed_mib", "time/seconds"} <= set(
        acc.Tags()["scalars"]), acc.Tags()
    assert acc.Scalars("time/seconds")[0].value > 0
    report = acc.Tensors("report")[0].tensor_proto.string_val[0].decode()
    assert "Experiment lr_probe finished" in report and "probe" in report, report
    made = acc.Tensors("provenance")[0].tensor_proto.string_val[0].decode()
    assert "| rustc | rustc 1." in made and "| crate candle-core | 0.11." in made, made
    ok(kernel, """let mut after = CandleClassifier::new(dryml::serde_json::json!({
    "layers": [{"linear": 3}], "training": {"epochs": 1}}));
after.train(&iris, &mut dryml::models::TrainSpec::epochs(0)).unwrap();""", timeout=600)
    assert sorted(p.name for p in exp_dir.iterdir()) == sorted([probe, "lr_probe"])
    # A directory that cannot be made is said before the experiment starts.
    (tmp_path / "file").write_text("")
    reply, _ = kernel.execute(f"%%experiment --tensorboard {tmp_path / 'file' / 'tb'}\n1")
    assert reply["status"] == "error" and "--tensorboard" in reply["evalue"] and "cannot make" in reply["evalue"], reply
