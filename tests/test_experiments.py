"""Experiments and the cell logger, end to end: real allocations in evcxr's child, real /proc
figures, and GPU figures from a fake NVML library loaded through nvml-wrapper's real path."""
import os

import pytest

from conftest import NO_NVML, displays, json_events, of_type, running_kernel, stdout_of, value

MIB = 1 << 20


@pytest.fixture(scope="module")
def kernel():
    """A kernel whose NVML library does not exist, so CPU-only paths are the same on any machine."""
    with running_kernel(NO_NVML) as k:
        yield k


def vars_of(kernel):
    reply, msgs = kernel.execute(":vars")
    assert reply["status"] == "ok"
    text = stdout_of(msgs) + "".join(m["content"]["data"]["text/plain"] for m in of_type(msgs, "execute_result"))
    return {line.split(":")[0].strip() for line in text.splitlines() if ":" in line}


def cpu(report):
    return next(d for d in report["devices"] if d["device"] == "cpu")


def finish_of(msgs):
    events = json_events(msgs, "finish")
    assert len(events) == 1, [d.get("text/plain") for d in displays(msgs)]
    return events[0]


def test_512_mib_consumed_and_reclaimed(kernel):
    kernel.execute("let before_exp = 7u32;")
    reply, msgs = kernel.execute("%%experiment big\nlet v = vec![1u8; 512 << 20];\nlet n = v.len();")
    assert reply["status"] == "ok", reply
    start = json_events(msgs, "start")
    assert start and start[0]["name"] == "big"
    r = finish_of(msgs)
    c = cpu(r)
    assert abs(c["consumed"] - 512 * MIB) <= 0.02 * 512 * MIB, c
    assert c["reclaimed"] >= 0.99 * c["consumed"], c
    assert sorted(r["deleted"]) == ["n", "v"]
    assert r["potential_leaks"] == []
    text = next(d["text/plain"] for d in displays(msgs) if "finished" in d["text/plain"])
    assert "Deleted: n, v" in text and "Reclaimed" in text
    html = next(d["text/html"] for d in displays(msgs) if "finished" in d["text/plain"])
    assert "<table" in html
    names = vars_of(kernel)
    assert "v" not in names and "n" not in names and "before_exp" in names
    # The same figures reach Rust code.
    reply, msgs = kernel.execute(
        '{ let r = dryml::experiment::last().unwrap(); let c = r.cpu().unwrap();\n'
        'println!("{} {} {} {}", r.name, c.consumed, c.reclaimed, r.deleted.join(",")); }')
    assert reply["status"] == "ok", reply
    name, consumed, reclaimed, deleted = stdout_of(msgs).split()
    assert (name, int(consumed), int(reclaimed), deleted) == ("big", c["consumed"], c["reclaimed"], "n,v")


def test_short_spike_shows_as_peak_not_consumed(kernel):
    code = ("%%experiment spike\n"
            "let w = vec![3u8; 256 << 20];\n"
            "std::thread::sleep(std::time::Duration::from_millis(5));\n"
            "drop(w);")
    reply, msgs = kernel.execute(code)
    assert reply["status"] == "ok", reply
    r = finish_of(msgs)
    c = cpu(r)
    # VmHWM comes from Linux's folded per-CPU RSS counter, short of the truth by at most this.
    assert 0 < r["peak_tolerance"] <= 64 * MIB
    assert c["peaked"] >= 256 * MIB - r["peak_tolerance"], c
    assert abs(c["consumed"]) < 8 * MIB, c


def test_keep_keeps_variable_and_memory(kernel):
    reply, msgs = kernel.execute("%%experiment --keep kept_buf\nlet kept_buf = vec![5u8; 128 << 20];\nlet scratch = 1;")
    assert reply["status"] == "ok", reply
    r = finish_of(msgs)
    assert r["kept"] == ["kept_buf"] and r["deleted"] == ["scratch"]
    c = cpu(r)
    assert c["consumed"] >= 127 * MIB and c["reclaimed"] < 4 * MIB, c
    assert c["peaked"] < 4 * MIB, c  # kept memory is consumed, not a passing peak
    reply, msgs = kernel.execute("kept_buf.len()")
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == str(128 * MIB)
    kernel.execute("drop(kept_buf);")


def test_multi_cell_experiment_with_keep_data_and_rebinding(kernel):
    kernel.execute("let model = vec![0u8; 1024];")
    reply, msgs = kernel.execute("%experiment start sweep")
    assert json_events(msgs, "start")[0]["name"] == "sweep"
    kernel.execute("let a = vec![1u8; 64 << 20];")
    reply, msgs = kernel.execute("%experiment data")
    data = json_events(msgs, "data")[0]
    assert cpu(data)["consumed"] >= 63 * MIB
    # `model` existed before and is re-bound here: its new value belongs to the experiment.
    kernel.execute("let model = vec![2u8; 32 << 20];\nlet b = 2u64;")
    kernel.execute("%experiment keep b")
    reply, msgs = kernel.execute("%experiment finish")
    r = finish_of(msgs)
    assert r["deleted"] == ["a"] and r["reassigned"] == ["model"] and r["kept"] == ["b"]
    assert cpu(r)["reclaimed"] >= 95 * MIB, cpu(r)
    names = vars_of(kernel)
    assert "b" in names and "a" not in names and "model" not in names


def test_starting_twice_finishes_the_first(kernel):
    kernel.execute("%experiment start first")
    kernel.execute("let first_var = vec![1u8; 16 << 20];")
    reply, msgs = kernel.execute("%experiment start second")
    kinds = [(j["event"], j["name"]) for j in json_events(msgs)]
    assert kinds == [("finish", "first"), ("start", "second")]
    assert json_events(msgs, "finish")[0]["deleted"] == ["first_var"]
    reply, msgs = kernel.execute("%experiment finish")
    assert finish_of(msgs)["name"] == "second"


def test_panic_inside_an_experiment_still_reports(kernel):
    kernel.execute("let survivor = 3u8;")
    reply, msgs = kernel.execute('%%experiment boom\nlet big = vec![1u8; 32 << 20];\npanic!("inside");')
    assert reply["status"] == "error" and reply["ename"] == "panic"
    r = finish_of(msgs)
    assert r["name"] == "boom"
    assert "survivor" in vars_of(kernel)
    reply, msgs = kernel.execute("%experiment data")
    assert reply["status"] == "error" and "no experiment is open" in reply["evalue"]


def test_bad_arguments_change_nothing(kernel):
    reply, _ = kernel.execute("%%experiment --keep a,,b\nlet never_defined = 1;")
    assert reply["status"] == "error" and reply["ename"] == "MagicError"
    assert "`` is not a variable name" in reply["evalue"] and "column" in reply["evalue"]
    assert "never_defined" not in vars_of(kernel)
    reply, _ = kernel.execute("%experiment keep x")
    assert reply["status"] == "error" and "no experiment is open" in reply["evalue"]
    kernel.execute("%experiment start")
    reply, _ = kernel.execute("%experiment keep 9x")
    assert reply["status"] == "error" and "`9x` is not a variable name" in reply["evalue"]
    reply, _ = kernel.execute("%experiment stop")
    assert reply["status"] == "error" and "unknown subcommand `stop`" in reply["evalue"]
    # Still open after the errors.
    reply, msgs = kernel.execute("%experiment data")
    assert reply["status"] == "ok" and json_events(msgs, "data")
    kernel.execute("%experiment finish")


def test_no_nvml_means_a_note_not_an_error(kernel):
    reply, msgs = kernel.execute("%%experiment\nlet q = 1;")
    r = finish_of(msgs)
    assert [d["device"] for d in r["devices"]] == ["cpu"]
    assert any("no GPU figures" in n for n in r["notes"]), r["notes"]


def test_cell_logger_modes(kernel):
    reply, msgs = kernel.execute("%cell_logger reset")
    # Nothing logged yet: a sentence, not two empty charts.
    reply, msgs = kernel.execute("%cell_logger plot")
    empty = displays(msgs)[0]
    assert "image/svg+xml" not in empty and empty["text/plain"].startswith("No cell has been logged yet"), empty
    reply, msgs = kernel.execute("%cell_logger on")
    reply, msgs = kernel.execute("let logged = vec![1u8; 64 << 20];")
    line = displays(msgs)[-1]["text/plain"]
    assert "△Consumed" in line and "Exec time" in line and "CPU:" in line, line
    # The rows start with a bullet every font has (U+2022), not IPyExperiments' CJK U+30FB.
    assert all(l.startswith("\u2022 ") for l in line.splitlines()), line
    cpu_row = next(l for l in line.splitlines() if "CPU:" in l)
    assert int(cpu_row.split()[2].replace(",", "")) in range(63, 66), line
    reply, msgs = kernel.execute("{ let t = vec![1u8; 200 << 20]; drop(t); }")
    # An experiment inside a logged cell restarts the high-water mark; the cell's peak survives.
    reply, msgs = kernel.execute("%%experiment\nlet e = vec![1u8; 96 << 20];")
    row = next(l for l in displays(msgs)[-1]["text/plain"].splitlines() if "CPU:" in l)
    assert int(row.split()[2]) == 0 and int(row.split()[3]) >= 95, row
    kernel.execute("%cell_logger compact")
    reply, msgs = kernel.execute("1 + 1")
    compact = displays(msgs)[-1]["text/plain"]
    assert "\n" not in compact and "CPU:" in compact and "Exec time" in compact, compact
    reply, msgs = kernel.execute("%cell_logger data")
    data = json_events(msgs)[0]
    cells = data["cells"]
    consumed = [c["cpu"]["consumed"] for c in cells]
    peaked = [c["cpu"]["peaked"] for c in cells]
    assert any(abs(c - 64 * MIB) < 2 * MIB for c in consumed), consumed
    assert any(p >= 200 * MIB - data["peak_tolerance"] for p in peaked), peaked
    assert all(c["measure_us"] > 0 for c in cells) and len(cells) == 5
    assert "<table" in displays(msgs)[0]["text/html"]
    reply, msgs = kernel.execute("%cell_logger plot")
    svg = displays(msgs)[0]["image/svg+xml"]
    assert svg.startswith("<svg") and svg.count("<rect") >= 2 * len(cells)
    kernel.execute("%cell_logger off")
    reply, msgs = kernel.execute("2 + 2")
    assert not displays(msgs)
    kernel.execute("%cell_logger reset")
    reply, msgs = kernel.execute("%cell_logger data")
    assert json_events(msgs)[0]["cells"] == []
    kernel.execute("drop(logged);")


# ---- GPU figures through the fake NVML ---------------------------------------------------------

FAKE_TENSOR = """
pub struct FakeGpuTensor(std::path::PathBuf);
impl FakeGpuTensor {
    pub fn new(path: &str, bytes: u64) -> Self {
        std::fs::File::create(path).unwrap().set_len(bytes).unwrap();
        FakeGpuTensor(path.into())
    }
}
impl Drop for FakeGpuTensor {
    fn drop(&mut self) { let _ = std::fs::remove_file(&self.0); }
}
"""


@pytest.fixture(scope="module")
def gpu_kernel(fake_gpu_kernel):
    GiB = 1 << 30
    # NVML lists the GPUs out of PCI order; another user's job holds 20 GiB on the first. The
    # GPUs exist before the kernel starts (it reads them once); the child's pid comes after.
    gpus = (f"gpu 0 00000000:5E:00.0 GPU-bbbb2222 {80 * GiB} {50 * GiB} Fake H100 B\n"
            f"gpu 1 00000000:1A:00.0 GPU-aaaa1111 {40 * GiB} {39 * GiB} Fake A100 A\n")
    with fake_gpu_kernel(gpus) as k:
        pid = int(value(k, "std::process::id()"))
        k.script.write_text(
            gpus +
            f"proc 0 999999 {20 * GiB}\n"
            f"proc 0 {pid} @{k.dir}/t0\n"
            f"proc 1 {pid} @{k.dir}/t1\n")
        k.execute(FAKE_TENSOR)
        yield k


def test_gpu_per_process_memory_and_pci_numbering(gpu_kernel):
    d = gpu_kernel.dir
    code = (f"%%experiment gpu\n"
            f"let on_b = FakeGpuTensor::new(\"{d}/t0\", 3 << 30);\n"
            f"let on_a = FakeGpuTensor::new(\"{d}/t1\", 1 << 30);")
    reply, msgs = gpu_kernel.execute(code)
    assert reply["status"] == "ok", reply
    start = json_events(msgs, "start")[0]
    # PCI bus order: the A100 at 1A is gpu/0 whatever NVML's own index.
    names = [(g["device"], g["name"], g["bus_id"]) for g in start["devices"][1:]]
    assert names == [("gpu/0", "Fake A100 A", "0000:1a:00.0"), ("gpu/1", "Fake H100 B", "0000:5e:00.0")]
    assert [g["process"] for g in start["devices"][1:]] == [0, 0]
    r = finish_of(msgs)
    gpus = {g["device"]: g for g in r["devices"] if g["device"] != "cpu"}
    # Only this process's memory counts, not the other job's 20 GiB.
    assert gpus["gpu/0"]["consumed"] == 1 << 30 and gpus["gpu/1"]["consumed"] == 3 << 30
    assert gpus["gpu/0"]["reclaimed"] == 1 << 30 and gpus["gpu/1"]["reclaimed"] == 3 << 30
    assert gpus["gpu/1"]["total"] == 80 << 30 and gpus["gpu/1"]["name"].startswith("Fake H100 B")
    assert not any("no GPU" in n for n in r["notes"])
    text = next(x["text/plain"] for x in displays(msgs) if "finished" in x["text/plain"])
    assert "gpu/1 Fake H100 B (0000:5e:00.0)" in text and "3,072" in text


def test_gpu_leak_and_cell_logger_rows(gpu_kernel):
    d = gpu_kernel.dir
    gpu_kernel.execute("%cell_logger on")
    reply, msgs = gpu_kernel.execute(f'let held = FakeGpuTensor::new("{d}/t0", 2 << 30);')
    line = displays(msgs)[-1]["text/plain"]
    rows = {l.split()[1]: l for l in line.splitlines()[1:]}
    assert set(rows) == {"CPU:", "GPU/0:", "GPU/1:"}, line
    assert rows["GPU/1:"].split()[2] == "2,048", line
    # A GPU spike inside the cell, freed before it ends: caught by the watch that reads NVML
    # every 20 ms while a cell runs (NVML keeps no high-water mark).
    reply, msgs = gpu_kernel.execute(
        f'{{ let t = FakeGpuTensor::new("{d}/t1", 3 << 30); std::thread::sleep(std::time::Duration::from_millis(300)); drop(t); }}')
    row = next(l for l in displays(msgs)[-1]["text/plain"].splitlines() if "GPU/0:" in l)
    assert row.split()[2:4] == ["0", "3,072"], row
    reply, msgs = gpu_kernel.execute(
        f'%%experiment\n{{ let t = FakeGpuTensor::new("{d}/t1", 1 << 30); std::thread::sleep(std::time::Duration::from_millis(300)); drop(t); }}')
    g0 = next(g for g in finish_of(msgs)["devices"] if g["device"] == "gpu/0")
    assert (g0["consumed"], g0["peaked"]) == (0, 1 << 30), g0
    gpu_kernel.execute("%cell_logger off")
    # Kept GPU memory is not reclaimed: flagged as a potential leak when not asked to be kept.
    reply, msgs = gpu_kernel.execute(f'%experiment start leaky\nstd::mem::forget(FakeGpuTensor::new("{d}/t1", 1 << 30));')
    reply, msgs = gpu_kernel.execute("%experiment finish")
    r = finish_of(msgs)
    assert r["potential_leaks"] == ["gpu/0"], r
    text = next(x["text/plain"] for x in displays(msgs) if "finished" in x["text/plain"])
    assert "Potential leak on gpu/0: 1,024 MiB" in text
    os.remove(d / "t1")
    gpu_kernel.execute("drop(held);")


def test_cuda_visible_devices_renumbers(gpu_kernel):
    gpu_kernel.execute("%env CUDA_VISIBLE_DEVICES=1")
    reply, msgs = gpu_kernel.execute("%%experiment\nlet z = 1;")
    start = json_events(msgs, "start")[0]
    assert [(g["device"], g["bus_id"]) for g in start["devices"][1:]] == [("gpu/0", "0000:5e:00.0")]
    gpu_kernel.execute("%env --unset CUDA_VISIBLE_DEVICES")
    reply, msgs = gpu_kernel.execute('std::env::var("CUDA_DEVICE_ORDER").unwrap()')
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == '"PCI_BUS_ID"'


# ---- GPU figures where NVML's pids are not the kernel's (containers) ---------------------------

# What Docker does to a kernel: its own pid namespace and /proc, while the driver (here the fake
# NVML) goes on naming processes by the machine's pids.
CONTAINER = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
DEVICE_WIDE = "per-process GPU memory is not visible in this container; figures are device-wide"


def machine_pid(inner, root):
    """The pid this test sees for the process under `root` that its pid namespace calls `inner`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                ns = next(l for l in f if l.startswith("NSpid:")).split()[1:]
        except (OSError, StopIteration):
            continue
        if len(ns) > 1 and int(ns[-1]) == inner and is_below(int(entry), root):
            return int(entry)
    raise AssertionError(f"no process {inner} under {root}")


def is_below(pid, root):
    while pid > 1:
        if pid == root:
            return True
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return False


def gpu_rows(msgs):
    return {g["device"]: g for g in finish_of(msgs)["devices"] if g["device"] != "cpu"}


def test_gpu_figures_in_a_container_are_device_wide(fake_gpu_kernel):
    GiB = 1 << 30
    gpus = (f"gpu 0 00000000:1A:00.0 GPU-aaaa1111 {40 * GiB} auto Fake A100 A\n"
            f"gpu 1 00000000:5E:00.0 GPU-bbbb2222 {80 * GiB} auto Fake H100 B\n")
    with fake_gpu_kernel(gpus, wrap=CONTAINER) as k:
        d = k.dir
        inner = int(value(k, "std::process::id()"))
        host = machine_pid(inner, k.km.provisioner.process.pid)
        assert host != inner
        # gpu/0 lists the child by its machine pid, beside another job; gpu/1 lists no process
        # at all while its memory is in use, as nvidia-smi shows inside Docker.
        k.script.write_text(gpus + f"proc 0 {host} @{d}/t0\nproc 0 999999 {5 * GiB}\nused 1 @{d}/t1\n")
        k.execute(FAKE_TENSOR)
        reply, msgs = k.execute("%cell_logger on")
        reply, msgs = k.execute(f'%%experiment\nlet a = FakeGpuTensor::new("{d}/t0", 3 << 30);\n'
                                f'let b = FakeGpuTensor::new("{d}/t1", 1 << 30);')
        assert reply["status"] == "ok", reply
        start = next(x["text/plain"] for x in displays(msgs) if "started" in x["text/plain"])
        assert DEVICE_WIDE in start, start
        g = gpu_rows(msgs)
        # Per process these would read 0: the experiment's work shows, device-wide.
        assert (g["gpu/0"]["consumed"], g["gpu/1"]["consumed"]) == (3 << 30, 1 << 30), g
        assert (g["gpu/0"]["reclaimed"], g["gpu/1"]["reclaimed"]) == (3 << 30, 1 << 30), g
        assert DEVICE_WIDE in finish_of(msgs)["notes"]
        # The cell logger's GPU rows and %context's view are device-wide too.
        reply, msgs = k.execute(f'let kept = FakeGpuTensor::new("{d}/t1", 2 << 30);')
        row = next(l for l in displays(msgs)[-1]["text/plain"].splitlines() if "GPU/1:" in l)
        assert row.split()[2] == "2,048", row
        reply, msgs = k.execute("%context")
        view = displays(msgs)[0]
        assert DEVICE_WIDE in view["text/plain"], view["text/plain"]
        assert "78.0 of 80.0 GiB" in view["text/plain"], view["text/plain"]
        k.execute("%cell_logger off")
        k.execute("drop(kept);")


def one_gpu_experiment(fake_gpu_kernel, script, code):
    """On a kernel whose one fake GPU also answers `script` (with {pid} the child's pid and {d}
    the test's directory), the finish of `code` (with {d}) run as an experiment."""
    gpus = f"gpu 0 00000000:1A:00.0 GPU-aaaa1111 {40 << 30} auto Fake A100 A\n"
    with fake_gpu_kernel(gpus) as k:
        pid = int(value(k, "std::process::id()"))
        k.script.write_text(gpus + script.format(pid=pid, d=k.dir))
        k.execute(FAKE_TENSOR)
        reply, msgs = k.execute("%%experiment\n" + code.format(d=k.dir))
        assert reply["status"] == "ok", reply
        return gpu_rows(msgs)["gpu/0"], finish_of(msgs)["notes"]


def test_gpu_figures_when_nvml_cannot_list_processes(fake_gpu_kernel):
    # Listing processes needs a permission this user lacks (NVML_ERROR_NO_PERMISSION).
    g, notes = one_gpu_experiment(fake_gpu_kernel, "proc 0 {pid} @{d}/t0\nfail processes 4\n",
                                  'let a = FakeGpuTensor::new("{d}/t0", 2 << 30);')
    assert g["consumed"] == 2 << 30, g
    assert any("NVML cannot list the processes on gpu/0" in n and "figures are device-wide" in n for n in notes), notes


def test_gpu_figures_stay_per_process_in_the_machines_pid_namespace(fake_gpu_kernel):
    # No process of ours is listed yet, and another job's memory grows meanwhile: that is not
    # ours, and nothing switches to device-wide figures.
    g, notes = one_gpu_experiment(fake_gpu_kernel, "proc 0 {pid} @{d}/t0\nproc 0 999999 @{d}/other\n",
                                  'std::fs::File::create("{d}/other").unwrap().set_len(4 << 30).unwrap();\n'
                                  'let a = FakeGpuTensor::new("{d}/t0", 1 << 30);')
    assert g["consumed"] == 1 << 30, g
    assert not any("device-wide" in n for n in notes), notes
