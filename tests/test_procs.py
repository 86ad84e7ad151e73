"""The suite's process readers (tests/procs.py) against real processes: what the soak and the
memory benchmark count as a notebook's analysis."""
import os
import signal
import subprocess
import sys
import tempfile
import time

from procs import analysis_pids_in, rss_mib

# A stand-in analysis process: 200 MiB touched, then a child that sits between its fork and its
# exec for a while (as a `cargo metadata` spawn of a 600 MiB server does, briefly, under load),
# then execs a real program that keeps the variable.
SERVER = """
import os, sys, time
hold = bytearray(200 << 20)
for i in range(0, len(hold), 4096):
    hold[i] = 1
child = os.fork()
if child == 0:
    time.sleep(float(sys.argv[1]))
    os.execv("/bin/sleep", ["sleep", "30"])
print(child, flush=True)
time.sleep(60)
"""


def test_a_child_between_fork_and_exec_is_not_a_second_analysis_process():
    with tempfile.TemporaryDirectory() as d:
        env = {"DRYML_ANALYSIS_SOCKET": f"{d}/analysis.sock", "PATH": "/usr/bin:/bin"}
        server = subprocess.Popen([sys.executable, "-c", SERVER, "3"], env=env, stdout=subprocess.PIPE,
                                  text=True)
        child = None
        try:
            child = int(server.stdout.readline())
            forked = analysis_pids_in(d)
            # Before the exec: one server of about 200 MiB, not two (what the soak once summed
            # to 1,218 MiB: [server, 597], [its child, 597]).
            assert forked == [server.pid], (forked, child)
            assert 190 <= sum(rss_mib(p) for p in forked) <= 260
            deadline = time.time() + 20
            while sorted(analysis_pids_in(d)) != sorted([server.pid, child]):
                assert time.time() < deadline, "the child's exec"
                time.sleep(0.05)
            # After it, the child is a program of its own and counts, as `cargo metadata` does.
            assert rss_mib(child) < 20
        finally:
            server.kill()
            server.wait()
            if child:
                os.kill(child, signal.SIGKILL)
