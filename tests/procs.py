"""Processes as /proc shows them, for the suite and the benchmarks alike: a process's environment
and resident memory, and the analysis processes listening in a directory."""
import os
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


def parent_of(pid):
    """A process's parent pid (0 once it is gone)."""
    try:
        # The command name in parentheses may hold spaces: the fields that follow it are plain.
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def exe_of(pid):
    """The program a process runs ("" once it is gone)."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _analysis_parents(dir):
    """{pid: parent pid} of every process whose DRYML_ANALYSIS_SOCKET names a socket in `dir`."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            socket = environ_of(proc.name).get("DRYML_ANALYSIS_SOCKET")
            if socket and Path(socket).parent == Path(dir):
                found[int(proc.name)] = parent_of(proc.name)
    return found


def analysis_pids_in(dir):
    """The analysis processes listening in `dir` (a DRYML_ANALYSIS_DIR; evcxr patch: each started
    with DRYML_ANALYSIS_SOCKET naming its socket there), with the children they run (`cargo
    metadata` for a load), which inherit that variable. A child caught between its fork and its
    exec still runs its parent's program in its parent's memory (shared, or copied on write), and
    shows its parent's RSS: it is left out, or a sample would count the server twice."""
    parents = _analysis_parents(dir)
    return [p for p, parent in parents.items() if not (parent in parents and exe_of(p) == exe_of(parent))]


def analysis_servers_in(dir):
    """The analysis servers listening in `dir`: `analysis_pids_in` less the children they run."""
    parents = _analysis_parents(dir)
    return [p for p, parent in parents.items() if parent not in parents]
