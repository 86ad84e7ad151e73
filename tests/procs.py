"""Processes as /proc shows them, for the suite and the benchmarks alike: a process's environment
and resident memory, and the analysis processes listening in a directory."""
from pathlib import Path


def environ_of(pid):
    """A process's environment, {} where it is gone or not ours to read."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(v.split("=", 1) for v in raw.decode(errors="replace").split("\0") if "=" in v)


def rss_mib(pid):
    """A process's resident memory in MiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:")), 0)
    except OSError:
        return 0


def command_of(pid):
    """A process's command line, shortened ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80].strip()
    except OSError:
        return ""


def analysis_pids_in(dir):
    """The analysis processes listening in `dir` (a DRYML_ANALYSIS_DIR; evcxr patch: each started
    with EVCXR_ANALYSIS_SOCKET naming its socket there), with the children they run (`cargo
    metadata` for a load), which inherit that variable."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            socket = environ_of(proc.name).get("EVCXR_ANALYSIS_SOCKET")
            if socket and Path(socket).parent == Path(dir):
                pids.append(int(proc.name))
    return pids
