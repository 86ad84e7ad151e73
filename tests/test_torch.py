"""tch in notebooks, end to end: a cell naming `tch` gets it (libtorch from the venv's PyTorch
wheel, built with LIBTORCH_USE_PYTORCH=1) with dryml's torch feature, and sandboxes apply a
context's thread count through tch."""
import pytest

from conftest import NO_NVML, ROOT, answered, json_events, ok, running_kernel, stdout_of, value

TORCH_LIB = sorted((ROOT / ".venv" / "lib").glob("python3*/site-packages/torch/lib/libtorch.so"))


@pytest.fixture(scope="module")
def kernel():
    if not TORCH_LIB:
        pytest.fail("torch is missing from .venv: kernelspec/bootstrap.sh installs torch==2.13.0")
    with running_kernel(NO_NVML) as k:
        yield k


def test_a_tch_cell_compiles_and_runs(kernel):
    # The first tch cell builds tch and torch-sys against the venv's libtorch: minutes.
    got = value(kernel, "let t = tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0]);\n"
                        "(t.sum(tch::Kind::Float).double_value(&[]), tch::utils::has_cuda())", timeout=1200)
    assert got == "(6.0, false)", got


def test_the_analysis_serves_tch_and_dryml_values(kernel):
    # Untyped `let`s of a tch and a dryml type: rustc writes `Tensor` and `ObjectDef`, names not
    # in the cell's scope, so their types are the analyzer's, from its own process.
    ok(kernel, 'let tt = tch::Tensor::from_slice(&[1.0f32, 2.0]);\n'
               'let made = dryml::ObjectDef::new("Analysed", &1).unwrap();', timeout=1200)
    types = dict(line.split(": ", 1) for line in value(kernel, ":vars").splitlines())
    assert types["tt"] == "tch::Tensor" and types["made"] == "dryml::ObjectDef", types
    assert value(kernel, "(tt.size(), made.type_name.clone())") == '([2], "Analysed")'
    r, _ = answered(kernel, "complete", "tt.su", 5, until=lambda r: any(m.startswith("sum") for m in r["matches"]))
    assert any(m.startswith("sum(") or m == "sum" for m in r["matches"]), r["matches"]
    code = "dryml::save_object"
    r, _ = answered(kernel, "inspect", code, len(code), 1, until=lambda r: r["found"])
    assert r["found"] and "written to a temporary file, synced, then renamed" in r["data"]["text/plain"], r


LOADS_CUDA = 'std::fs::read_to_string("/proc/self/maps").unwrap().contains("libtorch_cuda")'
ON_CUDA = "tch::Tensor::f_zeros([1], (tch::Kind::Float, tch::Device::Cuda(0))).map(|_| ()).unwrap_err().to_string()"


def test_a_tch_cell_has_libtorchs_cuda_backend_where_a_gpu_driver_is(kernel):
    # torch-sys links libtorch_cuda but calls none of it: dropped by the linker's --as-needed,
    # libtorch had no CUDA backend even on a machine with GPUs. Where NVIDIA's driver is (here
    # forced, as there is none), a tensor asked for on a GPU must reach CUDA itself.
    assert (TORCH_LIB[0].parent / "libtorch_cuda.so").exists(), "bootstrap.sh installs PyTorch's CUDA wheel"
    with running_kernel({**NO_NVML, "DRYML_TORCH_CUDA": "1"}) as gpu:
        assert value(gpu, "let t = tch::Tensor::from_slice(&[1.0f32]); t.size()", timeout=1200) == "[1]"
        assert value(gpu, LOADS_CUDA) == "true"
        got = value(gpu, ON_CUDA)
        assert "no NVIDIA driver" in got and "from the 'CUDA' backend" not in got, got
    # Without a driver it is not loaded: it would cost the process about 260 MiB for nothing.
    assert value(kernel, LOADS_CUDA) == "false"
    assert "from the 'CUDA' backend" in value(kernel, ON_CUDA)


def test_sandbox_thread_count_through_tch(kernel):
    # libtorch is already running in the notebook's process; the fork's context still applies.
    value(kernel, "tch::set_num_threads(2); tch::get_num_threads()")
    got = value(kernel, "%%compute torch num_cpus=1\n"
                        "let x = tch::Tensor::ones([64, 64], (tch::Kind::Float, tch::Device::Cpu));\n"
                        "(tch::get_num_threads(), x.matmul(&x).sum(tch::Kind::Float).double_value(&[]))")
    assert got == "(1, 262144.0)", got
    assert value(kernel, "tch::get_num_threads()") == "2", "the notebook's own setting is untouched"


def test_an_object_wrapping_a_tch_model_keeps_its_weights_in_its_file(kernel, tmp_path):
    path = tmp_path / "linear.dry"
    value(kernel, """use dryml::{Build, Meta, Object, State};
use dryml::objects::ObjectError;
#[derive(dryml::Object)]
struct Linear { args: (i64, i64), meta: Meta, vs: tch::nn::VarStore, layer: tch::nn::Linear }
impl Build for Linear {
    type Args = (i64, i64);
    fn build(args: (i64, i64), meta: Meta) -> Self {
        let vs = tch::nn::VarStore::new(tch::Device::Cpu);
        let layer = tch::nn::linear(vs.root() / "fc", args.0, args.1, Default::default());
        Linear { args, meta, vs, layer }
    }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> { s.put_var_store("weights", &self.vs) }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> { s.load_var_store("weights", &mut self.vs) }
}
dryml::objects::registered()""", timeout=1200)
    # In a block: evcxr cannot keep a closure that borrows another variable.
    code = f"""{{
let m = Linear::build((3, 2), Meta::new());
let x = tch::Tensor::ones([1, 3], (tch::Kind::Float, tch::Device::Cpu));
let before = Vec::<f32>::try_from(tch::nn::Module::forward(&m.layer, &x).view([-1])).unwrap();
dryml::save_object(&m, "{path}").unwrap();
let fresh = m.definition().build().unwrap();
let back = dryml::load_object("{path}").unwrap();
let f = |o: &Box<dyn Object>| Vec::<f32>::try_from(tch::nn::Module::forward(&o.downcast_ref::<Linear>().unwrap().layer, &x).view([-1])).unwrap();
(before == f(&back), before == f(&fresh))
}}"""
    assert value(kernel, code) == "(true, false)", "the loaded model has the saved weights; a fresh build does not"


def test_real_cpu_out_of_memory_with_tch_tensors_in_a_sandbox(kernel):
    # The sandbox takes the memory limit, so the notebook's own process is never limited.
    got = value(kernel, """%%compute default num_cpus=0
// libtorch starts its thread pools on first use: before the limit, not under it.
let _ = tch::Tensor::ones([64, 64], (tch::Kind::Float, tch::Device::Cpu)).matmul(&tch::Tensor::ones([64, 64], (tch::Kind::Float, tch::Device::Cpu))).sum(tch::Kind::Float).double_value(&[]);
let vm = std::fs::read_to_string("/proc/self/statm").unwrap().split_whitespace().next().unwrap().parse::<u64>().unwrap() * 4096;
dryml::batch::set_cpu_memory_limit((vm + (1 << 30)) as f64 / (1u64 << 30) as f64).unwrap();
let mut sizes = Vec::new();
let rows = dryml::batch::batch(1 << 28, |n| {
    sizes.push(n);
    tch::Tensor::f_ones([n as i64, 4], (tch::Kind::Float, tch::Device::Cpu)).map(|t| t.size()[0])
}).unwrap();
// Sizes that failed were real libtorch allocation errors; chunked walks a tensor.
let t = tch::Tensor::arange(1000, (tch::Kind::Float, tch::Device::Cpu));
let mut sum = 0.0;
let mut steps = 0;
dryml::batch::chunked(&t, 64, 0, |c, _, _| { sum += c.sum(tch::Kind::Double).double_value(&[]); steps += 1; Ok::<(), tch::TchError>(()) }).unwrap();
(rows, sizes.len() > 1, sum, steps)""", timeout=1200)
    rows, retried, total, steps = got.strip("()").split(", ")
    assert 1 << 24 <= int(rows) <= 1 << 26 and retried == "true", got
    assert (float(total), int(steps)) == (499500.0, 16), got
    assert value(kernel, "1 + 1") == "2", "the notebook's process is not limited"


# ---- framework preloading (IPyExperimentsPytorch's `torch.ones((1, 1)).cuda()`) ----------------

GiB, MiB = 1 << 30, 1 << 20
FAKE_GPU = f"gpu 0 00000000:1A:00.0 GPU-aaaa1111 {40 * GiB} {39 * GiB} Fake A100\n"


def fake_cuda_init(k, name):
    """In a fresh child: the fake GPU's reading for the child is the size of a file, and a thread
    makes that file 300 MiB once libtorch is mapped, as a CUDA context appears when a framework is
    first used. Returns the child's pid."""
    k.restart()
    pid = int(value(k, "std::process::id()"))
    k.script.write_text(FAKE_GPU + f"proc 0 {pid} @{k.dir}/{name}\n")
    ok(k, f"""{{ let p = "{k.dir}/{name}";
std::thread::spawn(move || loop {{
    if std::fs::read_to_string("/proc/self/maps").map_or(false, |m| m.contains("libtorch")) {{
        std::fs::File::create(p).unwrap().set_len(300 << 20).unwrap();
        break;
    }}
    std::thread::sleep(std::time::Duration::from_millis(5));
}}); }}""")
    return pid


def gpu_consumed(msgs):
    finish = [j for j in json_events(msgs, "finish")]
    assert finish, stdout_of(msgs)
    return {d["device"]: d["consumed"] for d in finish[0]["devices"]}["gpu/0"]


@pytest.fixture(scope="module")
def preload_kernel(fake_gpu_kernel):
    if not TORCH_LIB:
        pytest.fail("torch is missing from .venv: kernelspec/bootstrap.sh installs torch==2.13.0")
    with fake_gpu_kernel(FAKE_GPU) as k:
        yield k


TCH_CELL = "let t = tch::Tensor::ones([2, 2], (tch::Kind::Float, tch::Device::Cpu));\nt.size()"


def test_without_preload_the_first_tch_cell_looks_like_a_leak(preload_kernel):
    # The control: the experiment that first touches the framework is charged its one-time cost.
    k = preload_kernel
    fake_cuda_init(k, "control")
    ok(k, "%experiment start control\nlet x = 1u8;")
    ok(k, TCH_CELL, timeout=1200)
    msgs = ok(k, "%experiment finish")
    assert gpu_consumed(msgs) == 300 * MiB


def test_preload_torch_keeps_the_frameworks_memory_out_of_the_experiment(preload_kernel):
    k = preload_kernel
    fake_cuda_init(k, "explicit")
    msgs = ok(k, "%experiment start tch --preload torch", timeout=1200)
    said = stdout_of(msgs)
    assert "dryml: preloaded torch (Cpu)" in said and "300 MiB on gpu/0" in said, said
    assert "before the experiment's starting sample" in said
    start = json_events(msgs, "start")[0]
    assert start["devices"][1]["process"] == 300 * MiB, "the starting sample follows the preload"
    ok(k, TCH_CELL)
    assert gpu_consumed(ok(k, "%experiment finish")) == 0


def test_an_experiment_whose_first_cell_names_tch_preloads_it(preload_kernel):
    k = preload_kernel
    fake_cuda_init(k, "auto")
    msgs = ok(k, "%%experiment auto\n" + TCH_CELL, timeout=1200)
    said = stdout_of(msgs)
    assert "as the experiment's first cell names `tch`" in said, said
    assert gpu_consumed(msgs) == 0
    # Once loaded, later experiments have nothing to preload.
    msgs = ok(k, "%%experiment again\n" + TCH_CELL)
    assert "preloaded" not in stdout_of(msgs)


def test_preload_names_an_unknown_framework(preload_kernel):
    reply, _ = preload_kernel.execute("%experiment start --preload jax")
    assert reply["status"] == "error" and "unknown framework `jax` for --preload (known: torch)" in reply["evalue"]
