"""The GPU check: holds the kernel's GPU memory figures (read by `dryml-gpu-probe`, which runs the
kernel's own NVML code) against real allocations, `torch.cuda` and `nvidia-smi`, and our
out-of-memory test against the messages real CUDA gives. See README.md beside this file.

    python3 check.py [--json report.json]          on a machine with a GPU and PyTorch
    python3 check.py --fake LIB --script FILE      here: the fake NVML stands in for the GPU
    python3 check.py --bench                       then dryml against PyTorch's loops (bench.py)

Each check prints one line, PASS, FAIL or SKIP, with what it saw; the exit code is 1 if any
check failed. Allocations are made by child processes, as a notebook's sandbox would make them.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20
GIB = 1 << 30
DEVICE_WIDE = "per-process GPU memory is not visible in this container; figures are device-wide"

# A child that holds GPU memory until told to let it go: real (torch) or fake (a file the fake
# NVML counts as the process's GPU memory). It prints one JSON line per step.
TORCH_HOLDER = r"""
import json, os, sys, torch
dev = int(sys.argv[1])
held = []
print(json.dumps({"pid": os.getpid()}), flush=True)
for line in sys.stdin:
    cmd, *arg = line.split()
    if cmd == "hold":
        held.append(torch.empty(int(arg[0]), dtype=torch.uint8, device=f"cuda:{dev}"))
        torch.cuda.synchronize(dev)
    elif cmd == "free":
        held.clear()
        torch.cuda.empty_cache()
        torch.cuda.synchronize(dev)
    print(json.dumps({"reserved": torch.cuda.memory_reserved(dev)}), flush=True)
"""

FAKE_HOLDER = r"""
import json, os, sys
script, cuda = sys.argv[1], int(sys.argv[2])
path = f"{script}.{os.getpid()}.held"
# CUDA numbers GPUs in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID); the script by NVML index.
gpus = sorted((l.split()[2].lower(), l.split()[1]) for l in open(script) if l.startswith("gpu "))
with open(script, "a") as f:
    f.write(f"proc {gpus[cuda][1]} {os.getpid()} @{path}\n")
print(json.dumps({"pid": os.getpid()}), flush=True)
held = 0
for line in sys.stdin:
    cmd, *arg = line.split()
    if cmd == "hold":
        held += int(arg[0])
        with open(path, "wb") as f:
            f.truncate(held)
    elif cmd == "free":
        held = 0
        if os.path.exists(path):
            os.remove(path)
    print(json.dumps({"reserved": held}), flush=True)
"""

# Messages libtorch gives, as written in PyTorch's sources (c10/cuda/CUDACachingAllocator.cpp,
# aten/src/ATen/cuda/CublasHandlePool.cpp, ATen/cudnn); on a GPU they are captured instead.
RECORDED_MESSAGES = [
    "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.19 GiB of "
    "which 4.56 GiB is free. Of the allocated memory 72.12 GiB is allocated by PyTorch.",
    "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other API call.",
    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input.",
]

# Each runs in a fresh process on GPU 0 and prints the message of the error it provoked.
PROVOKE = {
    "CUDA out of memory (caching allocator)": r"""
import torch
free, total = torch.cuda.mem_get_info(0)
torch.empty(2 * total, dtype=torch.uint8, device="cuda:0")
""",
    "cuBLAS with the GPU full": r"""
import torch
a = torch.ones(256, 256, device="cuda:0")
keep = []
while True:
    try:
        keep.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda:0"))
    except torch.OutOfMemoryError:
        break
while True:
    try:
        keep.append(torch.empty(1 << 20, dtype=torch.uint8, device="cuda:0"))
    except torch.OutOfMemoryError:
        break
a @ a
torch.cuda.synchronize(0)
""",
    "cuDNN with the GPU full": r"""
import torch
x = torch.ones(8, 64, 128, 128, device="cuda:0")
w = torch.ones(64, 64, 3, 3, device="cuda:0")
keep = []
for size in (64 << 20, 1 << 20, 64 << 10):
    while True:
        try:
            keep.append(torch.empty(size, dtype=torch.uint8, device="cuda:0"))
        except torch.OutOfMemoryError:
            break
torch.nn.functional.conv2d(x, w)
torch.cuda.synchronize(0)
""",
}
PROVOKE_WRAP = r"""
import sys, traceback
try:
    exec(sys.stdin.read())
    print("NO ERROR")
except BaseException as e:
    print("ERROR " + str(e).split("\n\nCompile with")[0].strip(), flush=True)
"""


class Checks:
    def __init__(self):
        self.results = []

    def report(self, name, status, detail):
        self.results.append({"check": name, "status": status, "detail": detail})
        print(f"{status:4} {name}: {detail}", flush=True)

    def expect(self, name, ok, detail):
        self.report(name, "PASS" if ok else "FAIL", detail)


class Bundle:
    """How this run reaches the GPU: the probe, and real or fake holders."""

    def __init__(self, args):
        self.probe_path = args.probe or os.path.join(HERE, "dryml-gpu-probe")
        self.fake = args.fake
        self.script = args.script
        self.env = dict(os.environ)
        # Torch numbers GPUs as NVML and the kernel do (the kernel sets this in its child too).
        self.env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        self.env.pop("CUDA_VISIBLE_DEVICES", None)
        if self.fake:
            self.env["DRYML_NVML_LIB"] = self.fake
            self.env["FAKE_NVML_SCRIPT"] = self.script

    def probe(self, *args, wrap=(), extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        out = subprocess.run([*wrap, self.probe_path, *args], env=env, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"probe {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def holder(self, device=0):
        if self.fake:
            cmd = [sys.executable, "-c", FAKE_HOLDER, self.script, str(device)]
        else:
            cmd = [sys.executable, "-c", TORCH_HOLDER, str(device)]
        return Holder(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=self.env))

    def gpu_count(self):
        if self.fake:
            with open(self.script) as f:
                return sum(1 for line in f if line.startswith("gpu "))
        import torch
        return torch.cuda.device_count()

    def smi(self, query, what):
        """nvidia-smi's CSV answer to --query-QUERY=WHAT, or None without nvidia-smi."""
        if self.fake or not shutil.which("nvidia-smi"):
            return None
        out = subprocess.run(["nvidia-smi", f"--query-{query}={what}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=60)
        return [[c.strip() for c in line.split(",")] for line in out.stdout.strip().splitlines() if line.strip()]


class Holder:
    def __init__(self, proc):
        self.proc = proc
        self.pid = self._read()["pid"]

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the holder ended ({self.proc.wait()})")
        return json.loads(line)

    def hold(self, nbytes):
        self.proc.stdin.write(f"hold {nbytes}\n")
        self.proc.stdin.flush()
        return self._read()["reserved"]

    def free(self):
        self.proc.stdin.write("free\n")
        self.proc.stdin.flush()
        return self._read()["reserved"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def bus_key(g):
    return g["bus_id"].lower()


def run(bundle, checks):
    n = bundle.gpu_count()
    first = bundle.probe("sample")
    gpus = first["gpus"]
    in_order = [bus_key(g) for g in gpus] == sorted(bus_key(g) for g in gpus)
    checks.expect("devices", len(gpus) == n and n > 0 and in_order,
                  f"{len(gpus)} GPUs seen of {n}, in PCI bus order: {in_order}; " +
                  "; ".join(f"{g['label']} {g['name']} ({g['bus_id']}) {g['total'] / GIB:.1f} GiB" for g in gpus))
    if not gpus:
        return
    checks.expect("pid view", first["pid_view"] == "Same" and first["note"] is None,
                  f"{first['pid_view']}, note {first['note']!r} (this process is in the machine's pid namespace)")

    h = bundle.holder(0)
    try:
        reserved = h.hold(GIB)
        s = bundle.probe("sample", "--pids", str(h.pid))
        used = s["gpus"][0]["used_by_us"]
        # A CUDA context costs a few hundred MiB beside what PyTorch reserves.
        ok = used == reserved if bundle.fake else reserved <= used <= reserved + 2 * GIB
        checks.expect("per-process", ok, f"holder pid {h.pid}: probe {used / MIB:.0f} MiB, torch reserved {reserved / MIB:.0f} MiB")
        apps = bundle.smi("compute-apps", "pid,used_memory")
        if apps is None:
            checks.report("per-process vs nvidia-smi", "SKIP", "no nvidia-smi")
        else:
            smi = {int(p): int(m) * MIB for p, m in apps if p.isdigit() and m.isdigit()}
            if h.pid in smi:
                checks.expect("per-process vs nvidia-smi", abs(smi[h.pid] - used) <= MIB,
                              f"nvidia-smi {smi[h.pid] / MIB:.0f} MiB, probe {used / MIB:.0f} MiB for pid {h.pid}")
            else:
                checks.report("per-process vs nvidia-smi", "FAIL",
                              f"nvidia-smi lists no pid {h.pid} (it lists {sorted(smi)}): pids are not this namespace's")
        other = bundle.probe("sample", "--pids", str(os.getpid()))
        checks.expect("others not counted", all(g["used_by_us"] == 0 for g in other["gpus"]),
                      f"this driver's own pid reads {[g['used_by_us'] for g in other['gpus']]} while the holder holds {reserved / MIB:.0f} MiB")

        wide = bundle.probe("sample", "--pids", str(h.pid), extra_env={"DRYML_GPU_MEMORY": "device"})
        g = wide["gpus"][0]
        checks.expect("device-wide", wide["note"] == DEVICE_WIDE and g["used_by_us"] == g["total"] - g["free"] and g["used_by_us"] >= used,
                      f"used {g['used_by_us'] / MIB:.0f} of {g['total'] / MIB:.0f} MiB (free {g['free'] / MIB:.0f}); note {wide['note']!r}")
        mem = bundle.smi("gpu", "pci.bus_id,memory.free,memory.total")
        if mem is None:
            checks.report("device-wide vs nvidia-smi", "SKIP", "no nvidia-smi")
        else:
            row = next((r for r in mem if r[0].lower().endswith(g["bus_id"][-12:].lower())), mem[0])
            checks.expect("device-wide vs nvidia-smi", abs(int(row[1]) * MIB - g["free"]) <= 64 * MIB and abs(int(row[2]) * MIB - g["total"]) <= MIB,
                          f"nvidia-smi free {row[1]} MiB of {row[2]}; probe free {g['free'] / MIB:.0f} of {g['total'] / MIB:.0f}")

        container = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
        if os.geteuid() != 0 or not shutil.which("unshare"):
            checks.report("container", "SKIP", "making a pid namespace needs root and unshare")
        else:
            # Inside, the holder's pid is not one NVML lists: the kernel must say device-wide.
            c = bundle.probe("sample", "--pids", "1", wrap=container)
            cg = c["gpus"][0]
            checks.expect("container", c["pid_view"] == "Hidden" and c["note"] == DEVICE_WIDE and cg["used_by_us"] >= reserved,
                          f"in a new pid namespace: {c['pid_view']}, used {cg['used_by_us'] / MIB:.0f} MiB device-wide while the holder holds {reserved / MIB:.0f}; note {c['note']!r}")
        h.free()

        # A short spike: 2 GiB held for 0.3 s while the kernel's 20 ms watch runs.
        watch = subprocess.Popen([bundle.probe_path, "watch", "--root", str(h.pid), "--secs", "2.5"],
                                 env=bundle.env, stdout=subprocess.PIPE, text=True)
        time.sleep(0.7)
        spike = h.hold(2 * GIB)
        time.sleep(0.3)
        h.free()
        peaks = json.loads(watch.communicate(timeout=60)[0].strip().splitlines()[-1])["peaks"]
        checks.expect("spike peak", peaks and peaks[0] >= spike,
                      f"watch peak {peaks[0] / MIB if peaks else 0:.0f} MiB for a {spike / MIB:.0f} MiB spike held 0.3 s")
    finally:
        h.close()

    if n < 2:
        checks.report("several GPUs", "SKIP", "one GPU")
    else:
        holders = [bundle.holder(i) for i in range(n)]
        try:
            got = [hh.hold((i + 1) * 256 * MIB) for i, hh in enumerate(holders)]
            pids = ",".join(str(hh.pid) for hh in holders)
            s = bundle.probe("sample", "--pids", pids)
            per = [g["used_by_us"] for g in s["gpus"]]
            ok = all((p == r) if bundle.fake else (r <= p <= r + 2 * GIB) for p, r in zip(per, got))
            checks.expect("several GPUs", ok, f"per GPU {[round(p / MIB) for p in per]} MiB for {[round(r / MIB) for r in got]} held, by CUDA index")
        finally:
            for hh in holders:
                hh.close()

    messages = []
    if bundle.fake:
        messages = [("recorded", m) for m in RECORDED_MESSAGES]
    else:
        for name, code in PROVOKE.items():
            out = subprocess.run([sys.executable, "-c", PROVOKE_WRAP], input=code, env=bundle.env,
                                 capture_output=True, text=True, timeout=600)
            line = next((l for l in out.stdout.splitlines() if l.startswith(("ERROR ", "NO ERROR"))), None)
            if line and line.startswith("ERROR "):
                messages.append((name, line[len("ERROR "):]))
            else:
                checks.report(f"provoke: {name}", "SKIP", f"no error came: {(line or out.stderr.strip()[-300:])!r}")
    if messages:
        payload = "".join(json.dumps(m) + "\n" for _, m in messages)
        out = subprocess.run([bundle.probe_path, "classify"], input=payload, env=bundle.env,
                             capture_output=True, text=True, timeout=60)
        verdicts = json.loads(out.stdout.strip().splitlines()[-1])
        for (name, m), v in zip(messages, verdicts):
            checks.expect(f"out of memory: {name}", v["out_of_memory"], repr(m[:300]))


def libtorch():
    """The directory of this machine's libtorch (PyTorch's `torch/lib`), PyTorch's version, and
    the library folders of the CUDA packages it brought (`nvidia/*/lib`)."""
    code = ("import glob, os, torch\n"
            "print('dir=' + os.path.dirname(torch.__file__)); print('version=' + torch.__version__)\n"
            "try:\n import nvidia; print('nvidia=' + os.pathsep.join(sorted(d for p in nvidia.__path__ for d in glob.glob(p + '/*/lib'))))\n"
            "except ImportError: pass")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        return None, None, []
    said = dict(line.split("=", 1) for line in out.stdout.splitlines() if line.split("=")[0] in ("dir", "version", "nvidia"))
    path, version, nvidia = said["dir"], said["version"], said.get("nvidia", "")
    return os.path.join(path, "lib"), version, [d for d in nvidia.split(os.pathsep) if d]


def run_model(bundle, checks):
    """dryml's own tch model in a context claimed with `dryml::set_context`: where it trains and
    what a share of a GPU lets libtorch take."""
    model = os.path.join(HERE, "dryml-gpu-model")
    if not os.path.exists(model):
        checks.report("model", "SKIP", "the bundle has no dryml-gpu-model (built where there was no libtorch)")
        return
    lib, version, nvidia = libtorch()
    if lib is None:
        checks.report("model", "SKIP", "python3 cannot import torch, whose libtorch the model links")
        return
    built_for = open(os.path.join(HERE, "libtorch-version")).read().strip() if os.path.exists(os.path.join(HERE, "libtorch-version")) else "?"
    same = version.split("+")[0] == built_for.split("+")[0]
    if not same and built_for != "?":
        # A model built for one libtorch may load on another and then break ("incoherent element
        # sizes"): that says nothing of dryml, so the versions are compared before any run.
        checks.report("model", "SKIP", f"the bundle was built against PyTorch {built_for}, this machine has {version}: "
                      f"build it for this one (bash tests/gpu/build.sh --torch {version.split('+')[0]})")
        return
    state = tempfile.mkdtemp(prefix="dryml-gpu-state-")
    bundle.probe("machine", "--state-dir", state)
    # candle's CUDA backend links CUDA's libraries by name: PyTorch's nvidia packages hold them.
    env = dict(bundle.env, DRYML_STATE_DIR=state, LD_LIBRARY_PATH=os.pathsep.join([lib, *nvidia]))
    bundle.model = (model, env)

    def model_run(context, *args):
        out = subprocess.run([model, "--context", context, *args], env=env, capture_output=True, text=True, timeout=600)
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines:
            raise RuntimeError(f"dryml-gpu-model {context!r} {' '.join(args)} ended {out.returncode}: {out.stderr.strip()[-500:]}")
        return json.loads(lines[-1])

    try:
        cpu = model_run("torch num_cpus=1", "train")
    except RuntimeError as e:
        if "libcuda.so.1" in str(e):
            # Built with candle's CUDA backend (build.sh --cuda), it links NVIDIA's driver.
            checks.report("model", "SKIP", f"the model links candle's CUDA backend, and this machine has no NVIDIA "
                          f"driver (libcuda.so.1): build the bundle without --cuda here; {e}")
            return
        status = "FAIL" if same else "SKIP"
        checks.report("model", status, f"built against libtorch {built_for}, this machine has {version}: {e}")
        return
    checks.expect("model on the CPU", cpu.get("placement") == "cpu" and cpu.get("accuracy", 0) >= 0.95,
                  f"context {cpu.get('context')!r}: placed on {cpu.get('placement')}, accuracy {cpu.get('accuracy')}, {cpu.get('seconds', 0):.2f} s; {cpu.get('error', '')}")
    whole = model_run("torch gpu/0=1", "train")
    if bundle.fake:
        # libtorch here has no CUDA: the model must say where its context put it and why it cannot go.
        err = whole.get("error", "")
        checks.expect("model on its GPU", "the context gives torch cuda:0 (gpu/0), but libtorch sees 0 CUDA devices" in err,
                      f"libtorch without CUDA, CUDA_VISIBLE_DEVICES {whole.get('visible')!r}: {err}")
    else:
        checks.expect("model on its GPU", whole.get("placement") == "cuda:0 (gpu/0)" and whole.get("accuracy", 0) >= 0.95,
                      f"context {whole.get('context')!r}, CUDA_VISIBLE_DEVICES {whole.get('visible')!r}, {whole.get('cuda_devices')} CUDA devices: "
                      f"placed on {whole.get('placement')}, accuracy {whole.get('accuracy')}, {whole.get('seconds', 0):.2f} s; {whole.get('error', '')}")
    try:
        run_candle(bundle, checks, model_run)
    except RuntimeError as e:  # candle's failure is its own: torch's checks go on
        checks.report("candle", "FAIL", str(e))
    total = bundle.probe("sample")["gpus"][0]["total"]
    capped = model_run("torch gpu/0=0.25", "alloc", "--fraction", "0.4", "--total", str(total))
    conf = capped.get("alloc_conf")
    refused = str(capped.get("refused", ""))
    if not os.path.exists(os.path.join(lib, "libtorch_cuda.so")):
        checks.report("CUDA backend linked", "SKIP", f"this libtorch ({lib}) has no CUDA")
    else:
        # Without libtorch_cuda loaded, libtorch has no CUDA backend at all, GPU or not.
        checks.expect("CUDA backend linked", "from the 'CUDA' backend" not in refused,
                      f"an allocation on cuda:0 gave {(refused or capped.get('allocated'))!r:.200}")
    if bundle.fake:
        checks.report("GPU share caps torch", "SKIP", f"libtorch here has no CUDA; the context set PYTORCH_CUDA_ALLOC_CONF={conf}")
        return
    small = model_run("torch gpu/0=0.25", "alloc", "--fraction", "0.1", "--total", str(total))
    free = model_run("torch gpu/0=1", "alloc", "--fraction", "0.4", "--total", str(total))
    checks.expect("GPU share caps torch",
                  conf == "per_process_memory_fraction:0.25" and capped.get("out_of_memory") is True and "allocated" in small and "allocated" in free,
                  f"PYTORCH_CUDA_ALLOC_CONF={conf}: 40% of {total / GIB:.1f} GiB at a share of 0.25: {str(capped.get('refused', capped))[:200]!r}; "
                  f"10% at 0.25: {small.get('allocated', small)}; 40% with the whole GPU: {free.get('allocated', free)}")


def run_candle(bundle, checks, model_run):
    """dryml's candle model: on the CPU, and on the GPU its context gives it through candle's
    CUDA backend (where the bundle was built with it: build.sh --cuda)."""
    cpu = model_run("candle num_cpus=1", "--framework", "candle", "train")
    bundle.candle_cuda = cpu.get("candle_cuda") is True
    checks.expect("candle on the CPU", cpu.get("placement") == "cpu" and cpu.get("accuracy", 0) >= 0.95,
                  f"context {cpu.get('context')!r}: placed on {cpu.get('placement')}, accuracy {cpu.get('accuracy')}, "
                  f"{cpu.get('seconds', 0):.2f} s; {cpu.get('error', '')}")
    whole = model_run("candle gpu/0=1", "--framework", "candle", "train")
    err = whole.get("error", "")
    if bundle.fake:
        # No driver here: the model must name its context's GPU and say what is missing.
        missing = "but CUDA did not open it here" if bundle.candle_cuda else "but dryml's candle is built without CUDA"
        checks.expect("candle on its GPU", f"the context gives candle cuda:0 (gpu/0), {missing}" in err,
                      f"candle's CUDA backend built: {bundle.candle_cuda}; {err}")
    elif not bundle.candle_cuda:
        checks.report("candle on its GPU", "SKIP", f"the bundle's candle has no CUDA backend (build it with "
                      f"bash tests/gpu/build.sh --cuda): {err}")
    else:
        checks.expect("candle on its GPU", whole.get("placement") == "cuda:0 (gpu/0)" and whole.get("accuracy", 0) >= 0.95,
                      f"context {whole.get('context')!r}, CUDA_VISIBLE_DEVICES {whole.get('visible')!r}: placed on "
                      f"{whole.get('placement')}, accuracy {whole.get('accuracy')}, {whole.get('seconds', 0):.2f} s; {err}")


def run_bench(bundle, checks):
    """bench.py's rows, printed with dryml's ratio to each of PyTorch's loops."""
    if getattr(bundle, "model", None) is None:
        checks.report("bench", "SKIP", "no model here for this PyTorch (see the model lines)")
        return []
    sys.path.insert(0, HERE)
    import bench
    figures = []

    def report(name, row):
        figures.append({"net": name, **row})
        if "settled" in row:
            print(f"BENCH {name}: tried batches {row['tried']}, settled on {row['settled']} "
                  f"({row['placement']}), {row['seconds']:.1f} s", flush=True)
            return
        ours = [k for k in ("dryml", "candle") if k in row]
        theirs = {k: v for k, v in row.items() if k.startswith("torch ")}
        mine = "; ".join(f"{'tch' if k == 'dryml' else k} {row[k]:.3f} s/epoch ({row[k + ' placed on']})" for k in ours)
        ratios = "; ".join(f"{k} {v:.3f} s (" + ", ".join(
            f"{'tch' if o == 'dryml' else o}/this {row[o] / v:.2f}" for o in ours) + ")" for k, v in theirs.items())
        print(f"BENCH {name} on {row['device']}: dryml {mine}; {ratios}", flush=True)

    try:
        bench.run(*bundle.model, report, candle_cuda=getattr(bundle, "candle_cuda", False))
    except Exception as e:  # the benchmark is figures, not a check: it says why it stopped
        checks.report("bench", "FAIL", f"{type(e).__name__}: {e}")
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe", help="the probe binary (default: beside this file)")
    ap.add_argument("--fake", metavar="LIB", help="a fake libnvidia-ml.so (tests/fake_nvml) instead of the GPU")
    ap.add_argument("--script", help="the fake NVML's script file (with --fake)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--bench", action="store_true", help="then the benchmark (bench.py), where the model runs")
    args = ap.parse_args()
    if args.fake and not args.script:
        ap.error("--fake needs --script")
    checks = Checks()
    bundle = Bundle(args)
    print(f"dryml GPU check: {'fake NVML ' + args.fake if args.fake else 'this machine'}; probe {bundle.probe_path}", flush=True)
    for part in (run, run_model):
        try:
            part(bundle, checks)
        except Exception as e:  # a check that could not run is a failure, with what stopped it
            checks.report(part.__name__.replace("_", " "), "FAIL", f"{type(e).__name__}: {e}")
    figures = []
    if args.bench:
        figures = run_bench(bundle, checks)
    failed = [r for r in checks.results if r["status"] == "FAIL"]
    print(f"{len(checks.results) - len(failed)} of {len(checks.results)} checks passed or were skipped; {len(failed)} failed", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"fake": bool(args.fake), "results": checks.results, "bench": figures}, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
