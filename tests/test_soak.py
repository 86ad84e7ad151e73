"""A short soak in the suite (`tests/soak.py` runs the long one for the README): ordinary and
hostile cells and traffic against one kernel, every reply collected, variables and repo checked."""
from soak import soak


def test_a_short_soak_loses_no_reply_variable_or_object():
    figures = soak(cells=150, seed=2)
    assert figures["cells"] == 150 and figures["replies_missing"] == 0
    # Growth over the settled start (10 MiB measured here), and the whole (632 MiB measured).
    assert figures["rss_mib"]["peak"] - figures["rss_mib"]["start"] <= 100, figures["rss_mib"]
    assert figures["rss_mib"]["peak"] <= 750, figures["rss_mib"]
    assert figures["fds"]["end"] <= figures["fds"]["start"] + 4, figures["fds"]
    assert figures["interrupt_to_reply_s"]["max"] < 2, figures["interrupt_to_reply_s"]
