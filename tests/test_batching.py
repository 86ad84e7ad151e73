"""dryml::batch in the kernel: the progress bar of `range` updates one display in place, and the
kernel's interrupt stops the loop between steps, keeping the notebook's variables."""
import time

import pytest
from conftest import of_type, ok, stdout_of, value, wait_for

STEP = "std::thread::sleep(std::time::Duration::from_millis({ms}));"
OK = "Ok::<(), std::collections::TryReserveError>(())"


def bar_steps(msgs):
    """How many steps the progress bar's latest redraw shows (0 before it shows)."""
    bars = [m["content"]["data"]["text/plain"] for _, m in msgs if m["msg_type"] in ("display_data", "update_display_data")]
    return int(bars[-1].split("] ")[1].split("/")[0]) if bars else 0


@pytest.mark.timing
def test_a_slow_range_shows_one_progress_bar_updated_in_place(kernel):
    msgs = ok(kernel, f"""let mut seen = Vec::new();
dryml::batch::range(0, 20, 2, |lo, hi| {{ {STEP.format(ms=60)} seen.push((lo, hi)); {OK} }}).unwrap();
println!("{{}} steps", seen.len());""", timeout=600)
    shown = of_type(msgs, "display_data")
    updates = of_type(msgs, "update_display_data")
    assert len(shown) == 1, [m["content"] for m in shown]
    display_id = shown[0]["content"]["transient"]["display_id"]
    assert display_id.startswith("dryml-range-")
    assert updates and all(u["content"]["transient"]["display_id"] == display_id for u in updates)
    last = updates[-1]["content"]["data"]
    assert "20/20" in last["text/plain"] and "#" * 30 in last["text/plain"], last
    assert '<progress value="20" max="20"' in last["text/html"], last
    # No more than ten redraws a second: 0.6 s of steps gives a handful, not one per step.
    assert len(updates) <= 6, len(updates)


def test_a_quick_range_shows_no_bar(kernel):
    msgs = ok(kernel, f"let mut n = 0; dryml::batch::range(0, 1000, 10, |lo, hi| {{ n += hi - lo; {OK} }}).unwrap(); n")
    assert of_type(msgs, "display_data") == [] and of_type(msgs, "update_display_data") == []
    assert of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"] == "1000"


@pytest.mark.timing
def test_interrupt_stops_range_between_steps_and_keeps_variables(kernel):
    # dryml compiled first: an interrupt during that build would only stop the build.
    ok(kernel, "let mut done: Vec<usize> = Vec::new(); let mut after = dryml::interrupted();")
    msg_id = kernel.send("execute", f"""dryml::batch::range(0, 1000, 1, |_lo, hi| {{ {STEP.format(ms=100)} done.push(hi); {OK} }}).unwrap();
after = true;""")
    wait_for(lambda: bar_steps(kernel.progress(msg_id)) >= 5, 300, "five steps on the bar")
    t0 = time.time()
    kernel.interrupt()
    reply, msgs = kernel.collect(msg_id, timeout=60)
    assert time.time() - t0 < 1.0, "stopped at the next step, well before the kernel's grace period ends"
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    assert "variables are kept" in reply["evalue"], reply["evalue"]
    # The steps that ran are in the notebook's variable; the code after the loop did not run.
    got = value(kernel, "(done.len(), done.iter().copied().eq(1..=done.len()), after)")
    n, contiguous, after = got.strip("()").split(", ")
    assert 5 <= int(n) < 1000 and contiguous == "true" and after == "false", got
    # The bar's last redraw says where the loop stopped.
    last = of_type(msgs, "update_display_data")[-1]["content"]["data"]["text/plain"]
    assert f"{int(n)}/1000" in last, (last, n)
    # The process was not restarted: the kernel goes on with the same variables.
    assert value(kernel, "done.len()") == n


def test_sizes_and_the_default_cache_carry_across_cells(kernel):
    # Each cell links its own copy of dryml; the table of sizes lives in the kernel binary.
    # Global: the default cache's free-memory bucket could change between cells on a busy machine.
    ok(kernel, "dryml::batch::set_default_cache(dryml::batch::Cache::Global);")
    ok(kernel, """fn fits_64(tried: &mut Vec<usize>) -> usize {
    dryml::batch::batch(512, |b| { tried.push(b); if b > 64 { Err(std::collections::TryReserveError::from(Vec::<u8>::new().try_reserve(usize::MAX).unwrap_err())) } else { Ok(b) } }).unwrap()
}
let mut first = Vec::new(); fits_64(&mut first);""")
    assert value(kernel, "first") == "[512, 256, 128, 64]"
    assert value(kernel, "let mut second = Vec::new(); fits_64(&mut second); second") == "[64]"
    # The default cache kind set in a cell holds in the next ones.
    ok(kernel, "dryml::batch::set_default_cache(dryml::batch::Cache::None);")
    assert value(kernel, "let mut third = Vec::new(); fits_64(&mut third); third") == "[512, 256, 128, 64]"
    ok(kernel, "dryml::batch::set_default_cache(dryml::batch::Cache::CallSiteAndMemory);")


@pytest.mark.timing
def test_a_polling_loop_gets_time_to_finish_a_long_step_and_a_second_interrupt_kills(kernel):
    ok(kernel, "let mut long_steps: Vec<usize> = Vec::new(); dryml::interrupted()")
    # Steps of 2.5 s: longer than the 1 s grace a cell otherwise gets after an interrupt. The
    # loop tells the kernel it polls once its bar shows (after the first step).
    msg_id = kernel.send("execute", f"dryml::batch::range(0, 100, 1, |_lo, hi| {{ {STEP.format(ms=2500)} long_steps.push(hi); {OK} }}).unwrap();")
    wait_for(lambda: bar_steps(kernel.progress(msg_id)) >= 1, 300, "the bar after the first step")
    time.sleep(0.75)  # the scenario: interrupt mid-step, leaving more than the 1 s grace of the step to run
    t0 = time.time()
    kernel.interrupt()
    reply, _ = kernel.collect(msg_id, timeout=60)
    waited = time.time() - t0
    assert reply["ename"] == "KeyboardInterrupt" and "variables are kept" in reply["evalue"], reply
    assert 1.0 < waited < 3.0, f"the kernel waited {waited:.1f} s for the step to end"
    assert value(kernel, "long_steps") == "[1, 2]"
    # Pressing interrupt again does not wait for the step.
    msg_id = kernel.send("execute", f'println!("running"); dryml::batch::range(0, 100, 1, |_lo, _hi| {{ {STEP.format(ms=30000)} {OK} }}).unwrap();')
    # The first 30 s step is running; the bar has not shown, so no announcement yet.
    wait_for(lambda: "running" in stdout_of(kernel.progress(msg_id)), 300, "the cell to start running")
    kernel.interrupt()  # returns once the kernel has sent the child SIGINT: the first is pending
    t0 = time.time()
    kernel.interrupt()
    reply, _ = kernel.collect(msg_id, timeout=60)
    assert time.time() - t0 < 1.0
    assert reply["ename"] == "KeyboardInterrupt" and "restarted" in reply["evalue"], reply
