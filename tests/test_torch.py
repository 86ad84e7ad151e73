"""tch in notebooks, end to end: a cell naming `tch` gets it (libtorch from the venv's PyTorch
wheel, built with LIBTORCH_USE_PYTORCH=1) with dryml's torch feature, and sandboxes apply a
context's thread count through tch."""
import pytest

from conftest import ROOT, Kernel, value

TORCH_LIB = sorted((ROOT / ".venv" / "lib").glob("python3*/site-packages/torch/lib/libtorch.so"))


@pytest.fixture(scope="module")
def kernel():
    if not TORCH_LIB:
        pytest.fail("torch is missing from .venv: kernelspec/bootstrap.sh installs torch==2.13.0")
    k = Kernel(env={"DRYML_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"})
    yield k
    k.stop()


def test_a_tch_cell_compiles_and_runs(kernel):
    # The first tch cell builds tch and torch-sys against the venv's libtorch: minutes.
    got = value(kernel, "let t = tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0]);\n"
                        "(t.sum(tch::Kind::Float).double_value(&[]), tch::utils::has_cuda())", timeout=1200)
    assert got == "(6.0, false)", got


def test_sandbox_thread_count_through_tch(kernel):
    # libtorch is already running in the notebook's process; the fork's context still applies.
    value(kernel, "tch::set_num_threads(2); tch::get_num_threads()")
    got = value(kernel, "%%compute torch num_cpus=1\n"
                        "let x = tch::Tensor::ones([64, 64], (tch::Kind::Float, tch::Device::Cpu));\n"
                        "(tch::get_num_threads(), x.matmul(&x).sum(tch::Kind::Float).double_value(&[]))")
    assert got == "(1, 262144.0)", got
    assert value(kernel, "tch::get_num_threads()") == "2", "the notebook's own setting is untouched"
