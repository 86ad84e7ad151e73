"""A short soak in the suite (`tests/soak.py` runs the long one for the README): ordinary and
hostile cells and traffic against one kernel, every reply collected, variables and repo checked."""
from soak import soak


def test_a_short_soak_loses_no_reply_variable_or_object():
    figures = soak(cells=150, seed=2)
    assert figures["cells"] == 150 and figures["replies_missing"] == 0
    # The kernel's own process: growth over the settled start (4 MiB measured here) and its
    # whole (27 MiB measured; issue 39's goal is 150). With its analysis process, which holds
    # evcxr's rust-analyzer: its peak swings with when loads and primings ran beside which cells
    # and with the machine's load: 641 to 756 MiB before the source roots and collections of
    # 2026-11-27, 966 and 1,215 since (issue 39's note: to bring back down).
    assert figures["rss_mib"]["peak"] - figures["rss_mib"]["start"] <= 30, figures["rss_mib"]
    assert figures["rss_mib"]["peak"] <= 100, figures["rss_mib"]
    assert figures["kernel_and_analysis_peak_mib"] <= 1500, figures
    assert figures["fds"]["end"] <= figures["fds"]["start"] + 4, figures["fds"]
    assert figures["interrupt_to_reply_s"]["max"] < 2, figures["interrupt_to_reply_s"]
