"""Never down (issue 14), end to end: input that used to kill the kernel gets an answer, and the
kernel, its variables and the next cell survive. Deep nesting first: `is_complete` (sent on every
Enter by consoles) and cells whose code the kernel or evcxr parses recursively."""
from conftest import ok, running_kernel, stderr_of, value

DEEP = 5000


def nested(n):
    return "(" * n + "1" + ")" * n


def test_deep_nesting_in_is_complete_is_answered(kernel):
    ok(kernel, "let keep = 5u32;")
    r, _ = kernel.request("is_complete", "(" * 20000 + ")" * 20000, timeout=30)
    assert r["status"] == "complete", r
    r, _ = kernel.request("is_complete", "(" * 20000, timeout=30)
    assert r["status"] == "incomplete", r
    assert value(kernel, "keep + 1") == "6"


def test_deep_cells_fail_or_run_and_the_kernel_goes_on(kernel):
    ok(kernel, "let keep2 = 7u32;")
    # evcxr parses the cell, then rustc judges it (here rustc's own stack gives out).
    reply, _ = kernel.execute(f"let q = {nested(DEEP)};", timeout=300)
    assert reply["status"] in ("ok", "error"), reply
    # The experiment's re-binding scan refuses with one line and the cell still runs.
    reply, msgs = kernel.execute(f"%%experiment\nlet q2 = {nested(DEEP)};", timeout=300)
    assert f"nested {DEEP} levels deep, over the 256 the kernel analyses" in stderr_of(msgs), stderr_of(msgs)
    # `%%compute` needs the syntax to build its code: a clear error instead.
    reply, _ = kernel.execute(f"%%compute\nlet q3 = {nested(DEEP)};", timeout=300)
    assert reply["status"] == "error" and reply["ename"] == "MagicError", reply
    assert f"nested {DEEP} levels deep" in reply["evalue"], reply["evalue"]
    assert value(kernel, "keep2 + 1") == "8"


def test_a_bug_of_ours_costs_one_error_reply_not_the_kernel():
    # DRYML_TEST_PANIC_ON makes the engine panic on exactly this cell, as a bug of ours would.
    with running_kernel({"DRYML_TEST_PANIC_ON": "// panic here"}) as k:
        ok(k, "let keep3 = 9u8;")
        reply, msgs = k.execute("// panic here")
        assert reply["status"] == "error" and reply["ename"] == "InternalError", reply
        assert "DRYML_TEST_PANIC_ON matched the cell" in reply["evalue"] and "recovered" in reply["evalue"], reply
        assert [m for _, m in msgs if m["msg_type"] == "error"], "the error is published too"
        # The engine's lock was held when it panicked: the next requests still get it.
        assert value(k, "keep3 + 1") == "10"
        r, _ = k.request("complete", "keep", 4)
        assert "keep3" in r["matches"], r
