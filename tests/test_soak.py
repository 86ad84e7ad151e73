"""A short soak in the suite (`tests/soak.py` runs the long one for the README): ordinary and
hostile cells and traffic against one kernel, every reply collected, variables and repo checked."""
import json

import pytest
from soak import soak


@pytest.mark.timing
def test_a_short_soak_loses_no_reply_variable_or_object():
    figures = soak(cells=150, seed=2)
    assert figures["cells"] == 150 and figures["replies_missing"] == 0
    # Without the samples, so that a failure shows every figure (pytest shortens a dict).
    shown = json.dumps({k: v for k, v in figures.items() if k != "samples"})
    # The kernel's own process: growth over the settled start (4 MiB measured here) and its
    # whole (27 MiB measured; issue 39's goal is 150). With its analysis process, which holds
    # evcxr's rust-analyzer: 621 to 715 MiB measured on 2026-11-27, idle or beside two busy
    # cores; one CI run saw 1,215 (issue 39's note), which `analysis_at_peak` would now explain.
    assert figures["rss_mib"]["peak"] - figures["rss_mib"]["start"] <= 30, shown
    assert figures["rss_mib"]["peak"] <= 100, shown
    assert figures["kernel_and_analysis_peak_mib"] <= 850, shown
    assert figures["fds"]["end"] <= figures["fds"]["start"] + 4, shown
    assert figures["interrupt_to_reply_s"]["max"] < 2, shown
