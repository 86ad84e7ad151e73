"""The GPU check's bundle (tests/gpu/), run here as it runs on a GPU machine but against the fake
NVML: the probe as the bundle ships it (the kernel's own NVML code), and check.py driving real
child processes whose "GPU memory" the fake library reports."""
import json
import os
import shutil
import subprocess
import sys

from conftest import ROOT

GIB = 1 << 30
GPUS = (f"gpu 0 00000000:5E:00.0 GPU-bbbb2222 {80 * GIB} auto Fake H100 B\n"
        f"gpu 1 00000000:1A:00.0 GPU-aaaa1111 {40 * GIB} auto Fake A100 A\n")


def check(fake_nvml_lib, tmp_path, script_text, env=None, bundle=ROOT / "build/gpu-bundle"):
    script = tmp_path / "script"
    script.write_text(script_text)
    report = tmp_path / "report.json"
    out = subprocess.run([sys.executable, str(bundle / "check.py"), "--fake", str(fake_nvml_lib),
                          "--script", str(script), "--json", str(report)],
                         capture_output=True, text=True, timeout=300, env=env)
    results = {r["check"]: (r["status"], r["detail"]) for r in json.loads(report.read_text())["results"]}
    return out, results


def test_the_bundle_builds_and_passes_against_the_fake_nvml(fake_nvml_lib, tmp_path):
    build = subprocess.run(["bash", str(ROOT / "tests/gpu/build.sh")], capture_output=True, text=True, timeout=1200)
    assert build.returncode == 0, build.stdout + build.stderr
    assert "bundle:" in build.stdout and (ROOT / "build/gpu-bundle.tar.gz").exists()
    # Another user's job holds 5 GiB on the H100: never counted as ours.
    out, results = check(fake_nvml_lib, tmp_path, GPUS + f"proc 0 999999 {5 * GIB}\n")
    assert out.returncode == 0, out.stdout + out.stderr
    status = {k: s for k, (s, _) in results.items()}
    assert status == {
        "devices": "PASS", "pid view": "PASS", "per-process": "PASS", "per-process vs nvidia-smi": "SKIP",
        "others not counted": "PASS", "device-wide": "PASS", "device-wide vs nvidia-smi": "SKIP",
        "container": "PASS", "spike peak": "PASS", "several GPUs": "PASS",
        **{"out of memory: recorded": "PASS"},
        "model on the CPU": "PASS", "model on its GPU": "PASS", "candle on the CPU": "PASS",
        "candle on its GPU": "PASS", "CUDA backend linked": "PASS", "GPU share caps torch": "SKIP",
    }, out.stdout
    # dryml's model in a context, on the machine the kernel's pool would see (the fake GPUs).
    assert "placed on cpu, accuracy " in results["model on the CPU"][1], results["model on the CPU"]
    assert "CUDA_VISIBLE_DEVICES 'GPU-aaaa1111'" in results["model on its GPU"][1], results["model on its GPU"]
    assert "no NVIDIA driver" in results["CUDA backend linked"][1], results["CUDA backend linked"]
    # candle the same: on the CPU, or the context's GPU named with what this build lacks.
    assert "placed on cpu, accuracy " in results["candle on the CPU"][1], results["candle on the CPU"]
    assert "built without CUDA (the `candle-cuda` feature" in results["candle on its GPU"][1], results["candle on its GPU"]
    assert results["GPU share caps torch"][1].endswith("PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:0.25")
    # PCI bus order: the A100 at 1A is gpu/0.
    assert results["devices"][1].startswith("2 GPUs seen of 2, in PCI bus order: True; gpu/0 Fake A100 A (0000:1a:00.0)"), results["devices"]


def test_the_check_fails_when_the_figures_are_wrong(fake_nvml_lib, tmp_path):
    # Forced device-wide figures where per-process ones are visible: the other job's 5 GiB is
    # then counted as the holder's, and the check says so.
    env = {**os.environ, "DRYML_GPU_MEMORY": "device"}
    out, results = check(fake_nvml_lib, tmp_path, GPUS + f"proc 1 999999 {5 * GIB}\n", env)
    assert out.returncode == 1, out.stdout
    assert results["per-process"][0] == "FAIL" and results["pid view"][0] == "FAIL", out.stdout


def test_a_bundle_built_for_another_pytorch_skips_its_model_checks_naming_both(fake_nvml_lib, tmp_path):
    # The bundle as if built against the GPU machine's PyTorch 2.11 (the case that broke with
    # "incoherent element sizes"): no model runs, and the check says why instead of failing.
    bundle = tmp_path / "bundle"
    shutil.copytree(ROOT / "build/gpu-bundle", bundle, symlinks=True)
    (bundle / "libtorch-version").write_text("2.11.0+cu130\n")
    out, results = check(fake_nvml_lib, tmp_path, GPUS, bundle=bundle)
    assert out.returncode == 0, out.stdout + out.stderr
    status, detail = results["model"]
    assert status == "SKIP" and "built against PyTorch 2.11.0+cu130, this machine has 2.13.0" in detail, detail
    assert "model on the CPU" not in results, "no model ran"


def test_the_benchmark_runs_here_on_the_cpu(fake_nvml_lib, tmp_path):
    # `check.py --bench` (bench.py): each network through dryml and PyTorch's two loops, cut to
    # the CPU's size here. The figures mean nothing on this machine; the rows must all be there.
    script = tmp_path / "script"
    script.write_text(GPUS)
    report = tmp_path / "report.json"
    out = subprocess.run([sys.executable, str(ROOT / "build/gpu-bundle/check.py"), "--fake", str(fake_nvml_lib),
                          "--script", str(script), "--json", str(report), "--bench"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = json.loads(report.read_text())["bench"]
    names = [(r["net"].split(",")[0], r["net"].split(", ")[-1]) for r in rows]
    assert names == [("mlp 784-256-256-10", "fp32"), ("mlp 784-1024-1024-10", "fp32"), ("cnn 3x16x16", "fp32"),
                     ("mlp 784-256-256-10", "tf32"), ("mlp 784-256-256-10", "bf16")], rows
    for r in rows:
        assert r["device"] == "cpu" and r["dryml placed on"] == "cpu" and r["candle placed on"] == "cpu", r
        loops = ("torch device", "torch loader") if r["net"].endswith("fp32") else ("torch device",)
        assert all(r[k] > 0 for k in ("dryml", "candle", *loops)), r
    assert out.stdout.count("BENCH ") == 5 and "tch/this" in out.stdout and "candle/this" in out.stdout, out.stdout
