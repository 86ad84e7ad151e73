"""The GPU benchmark (`check.py --bench`): each network trained through dryml (tch and candle,
the bundle's `dryml-gpu-model`) and in PyTorch's own Python loop on the same device, with the same
layers, Adam (1e-3) and cross-entropy, on generated rows: seconds per epoch after a warm-up epoch.

PyTorch's loops: `device` (the rows moved to the device once, batches sliced from a permutation
there) and, in FP32, `loader` (a `DataLoader` over CPU tensors, each batch copied over). Each
network runs in FP32, then on a GPU with TF32 matmuls (`torch.backends.cuda.matmul.allow_tf32`;
dryml's `"precision": "tf32"`) and bf16 autocast (`torch.autocast`; dryml's `"bf16"`). Without
CUDA the sizes are cut so that it runs on the CPU in a minute, and only the first network is
run in the other precisions: the figures then only show that the code runs.
"""
import json
import subprocess
import time

# (name, layers as dryml's definition writes them, features per row, rows, batch) on a GPU.
NETS = [
    ("mlp 784-1024-1024-10", [{"linear": 1024}, "relu", {"linear": 1024}, "relu", {"linear": 10}], 784, 60000, 256),
    ("mlp 784-8192-8192-10", [{"linear": 8192}, "relu", {"linear": 8192}, "relu", {"linear": 10}], 784, 60000, 4096),
    ("cnn 3x64x64", [{"reshape": [3, 64, 64]}, {"conv2d": {"channels": 32, "kernel": 3, "stride": 1, "padding": 1}},
                     "relu", {"max_pool": 2}, {"conv2d": {"channels": 64, "kernel": 3, "stride": 1, "padding": 1}},
                     "relu", {"max_pool": 2}, "flatten", {"linear": 10}], 3 * 64 * 64, 20000, 256),
]
# The same on the CPU: narrower, fewer rows and smaller images.
CPU_NETS = [
    ("mlp 784-256-256-10", [{"linear": 256}, "relu", {"linear": 256}, "relu", {"linear": 10}], 784, 4096, 256),
    ("mlp 784-1024-1024-10", [{"linear": 1024}, "relu", {"linear": 1024}, "relu", {"linear": 10}], 784, 4096, 1024),
    ("cnn 3x16x16", [{"reshape": [3, 16, 16]}, {"conv2d": {"channels": 8, "kernel": 3, "stride": 1, "padding": 1}},
                     "relu", {"max_pool": 2}, "flatten", {"linear": 10}], 3 * 16 * 16, 2048, 128),
]
CLASSES = 10


def torch_net(torch, layers):
    """`layers` (dryml's words) as PyTorch modules; lazy ones take their sizes from a first batch."""
    nn = torch.nn
    mods = []
    for layer in layers:
        if layer == "relu":
            mods.append(nn.ReLU())
        elif layer == "flatten":
            mods.append(nn.Flatten())
        elif "linear" in layer:
            mods.append(nn.LazyLinear(layer["linear"]))
        elif "reshape" in layer:
            mods.append(nn.Unflatten(1, tuple(layer["reshape"])))
        elif "conv2d" in layer:
            c = layer["conv2d"]
            mods.append(nn.LazyConv2d(c["channels"], c["kernel"], stride=c["stride"], padding=c["padding"]))
        elif "max_pool" in layer:
            mods.append(nn.MaxPool2d(layer["max_pool"]))
        else:
            raise ValueError(f"no PyTorch layer for {layer!r}")
    return nn.Sequential(*mods)


def torch_loop(torch, layers, features, rows, batch, epochs, device, loop, precision):
    """Seconds per epoch of PyTorch's own loop (`device` or `loader`) in `precision`."""
    import contextlib
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    if precision == "bf16":
        def cast():
            return torch.autocast(device.type, dtype=torch.bfloat16)
    else:
        cast = contextlib.nullcontext
    x = torch.rand(rows, features) * 2 - 1
    y = torch.randint(0, CLASSES, (rows,))
    net = torch_net(torch, layers).to(device)
    net(x[:2].to(device))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        with cast():
            loss = loss_fn(net(xb), yb)
        loss.backward()
        opt.step()

    if loop == "device":
        x, y = x.to(device), y.to(device)

        def epoch():
            order = torch.randperm(rows, device=device)
            for i in range(0, rows, batch):
                at = order[i:i + batch]
                step(x[at], y[at])
    else:
        data = torch.utils.data.TensorDataset(x, y)
        loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, pin_memory=device.type == "cuda")

        def epoch():
            for xb, yb in loader:
                step(xb.to(device, non_blocking=True), yb.to(device, non_blocking=True))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    epoch()
    sync()
    started = time.perf_counter()
    for _ in range(epochs):
        epoch()
    sync()
    return (time.perf_counter() - started) / epochs


def dryml_loop(model, env, framework, context, layers, features, rows, batch, epochs, precision):
    """Seconds per epoch through dryml's `framework` model, and where its context placed it."""
    out = subprocess.run([model, "--context", context, "--framework", framework, "bench", "--layers", json.dumps(layers),
                          "--rows", str(rows), "--features", str(features), "--classes", str(CLASSES),
                          "--batch", str(batch), "--epochs", str(epochs), "--precision", precision],
                         env=env, capture_output=True, text=True, timeout=3600)
    lines = out.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"error": out.stderr.strip()[-500:]}
    if "error" in result:
        raise RuntimeError(f"dryml-gpu-model bench: {result['error']}")
    return result["seconds_per_epoch"], result["placement"]


def toma(model, env, report, framework):
    """TOMA's job on the GPU: the busy MLP from a batch too big for the GPU, halved on CUDA's
    out-of-memory error until an epoch fits. tch's context is a quarter of the GPU (the share
    caps libtorch's allocator); candle's is the whole GPU (its allocations go straight to the
    driver, with no share to cap them)."""
    layers = NETS[1][1]
    # The whole of an H200 takes a batch of 2^18 of this network: candle starts from 2^20.
    context, rows = ("torch gpu/0=0.25", 1 << 18) if framework == "torch" else ("candle gpu/0=1", 1 << 20)
    out = subprocess.run([model, "--context", context, "--framework", framework, "toma", "--layers", json.dumps(layers),
                          "--rows", str(rows), "--features", "784", "--classes", str(CLASSES),
                          "--batch", str(rows)], env=env, capture_output=True, text=True, timeout=3600)
    lines = out.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"error": out.stderr.strip()[-500:]}
    if "error" in result:
        raise RuntimeError(f"dryml-gpu-model toma ({framework}): {result['error']}")
    share = "a quarter of the GPU" if framework == "torch" else "the whole GPU"
    report(f"toma: mlp 784-8192-8192-10 through {framework} under {share}", result)


def run(model, env, report, candle_cuda=False):
    """Each network through dryml (tch, and candle where it has the device) and PyTorch's loops,
    in each precision; `report(name, figures)` hears each row."""
    import torch
    cuda = torch.cuda.is_available()
    device = torch.device("cuda:0" if cuda else "cpu")
    if not cuda:
        torch.set_num_threads(2)
    where = "gpu/0=1" if cuda else "num_cpus=2"
    candle = candle_cuda or not cuda
    epochs = 3
    nets = NETS if cuda else CPU_NETS
    for precision in ("fp32", "tf32", "bf16"):
        for name, layers, features, rows, batch in nets if cuda or precision == "fp32" else nets[:1]:
            ours, placed = dryml_loop(model, env, "torch", f"torch {where}", layers, features, rows, batch, epochs, precision)
            row = {"device": str(device), "dryml placed on": placed, "dryml": ours}
            if candle:
                row["candle"], row["candle placed on"] = dryml_loop(model, env, "candle", f"candle {where}", layers,
                                                                    features, rows, batch, epochs, precision)
            for loop in ["device", "loader"] if precision == "fp32" else ["device"]:
                row[f"torch {loop}"] = torch_loop(torch, layers, features, rows, batch, epochs, device, loop, precision)
            report(f"{name}, batch {batch}, {rows} rows, {precision}", row)
    if cuda:
        toma(model, env, report, "torch")
        if candle:
            toma(model, env, report, "candle")
