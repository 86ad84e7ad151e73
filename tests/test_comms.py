"""Jupyter comms and widgets against the real kernel: comms opened from either side, messages
both ways while a cell runs and between cells, closes from either side, unknown targets refused,
and ipywidgets' protocol (a slider set by the frontend read by the next cell, a progress bar)."""
from conftest import of_type, ok, stdout_of, wait_for

VIEW = "application/vnd.jupyter.widget-view+json"


def comm_send(kernel, msg_type, content):
    """Sends a comm message as a frontend does (on shell, no reply owed); returns its msg_id."""
    msg = kernel.kc.session.msg(msg_type, content)
    kernel.kc.shell_channel.send(msg)
    return kernel.expect(msg["header"]["msg_id"], None)


def comms(kernel, target=None):
    reply, _ = kernel.request("comm_info", target)
    assert reply["status"] == "ok", reply
    return reply["comms"]


def comm_msgs(msgs, t):
    return [m["content"] for m in of_type(msgs, t)]


def arrive(kernel, msg_id, msg_type, n=1, timeout=30):
    """Waits until `n` messages of `msg_type` under msg_id have come (they may follow its idle)."""
    wait_for(lambda: (kernel._pump(0.1), len([m for _, m in kernel.iopub.get(msg_id, [])
                                              if m["msg_type"] == msg_type]) >= n)[1], timeout, msg_type)
    return kernel.collect(msg_id)[1]


def test_comms_both_ways_while_a_cell_runs_and_between_cells(kernel):
    assert comms(kernel) == {}
    msgs = ok(kernel, 'use dryml::serde_json::json;\nuse std::sync::{Arc, Mutex};\n'
                      'let got = Arc::new(Mutex::new(Vec::<String>::new()));\n'
                      'let c = dryml::widgets::Comm::open("test.target", json!({"hello": 1}), json!({"v": "1"}));\n'
                      '{ let g = got.clone(); c.on_msg(move |d| g.lock().unwrap().push(d.to_string())); }\n'
                      '{ let g = got.clone(); c.on_close(move |d| g.lock().unwrap().push(format!("closed {d}"))); }\n'
                      'c.send(json!({"from": "rust"}));')
    (opened,) = comm_msgs(msgs, "comm_open")
    assert opened["target_name"] == "test.target" and opened["data"] == {"hello": 1}, opened
    # The comm's metadata is the message's own, as ipykernel sends it.
    assert of_type(msgs, "comm_open")[0]["metadata"] == {"v": "1"}
    cid = opened["comm_id"]
    assert comm_msgs(msgs, "comm_msg") == [{"comm_id": cid, "data": {"from": "rust"}}]
    assert comms(kernel) == {cid: {"target_name": "test.target"}}
    assert comms(kernel, "test.target") == {cid: {"target_name": "test.target"}}
    assert comms(kernel, "other") == {}

    # A message from the frontend reaches the notebook's process while a cell runs.
    running = kernel.send("execute", 'let t = std::time::Instant::now();\n'
                          'while got.lock().unwrap().is_empty() && t.elapsed().as_secs() < 60 {\n'
                          '    std::thread::sleep(std::time::Duration::from_millis(5));\n}\n'
                          'println!("got {:?} after {} ms", got.lock().unwrap(), t.elapsed().as_millis());')
    wait_for(lambda: of_type(kernel.progress(running), "execute_input"), 60, "the cell to start")
    kernel.collect(comm_send(kernel, "comm_msg", {"comm_id": cid, "data": {"value": 7}}))
    reply, msgs = kernel.collect(running)
    assert reply["status"] == "ok", reply
    assert 'got ["{\\"value\\":7}"]' in stdout_of(msgs), stdout_of(msgs)

    # Closed by the frontend: the cell's handler hears it; later messages to it are refused.
    kernel.collect(comm_send(kernel, "comm_close", {"comm_id": cid, "data": {"bye": True}}))
    assert comms(kernel) == {}
    assert "closed {\\\"bye\\\":true}" in stdout_of(ok(kernel, 'println!("{:?} {}", got.lock().unwrap(), c.is_closed());'))
    late = kernel.collect(comm_send(kernel, "comm_msg", {"comm_id": cid, "data": {}}))[1]
    assert comm_msgs(late, "comm_close") == [{"comm_id": cid, "data": {}}]


def test_targets_unknown_comms_and_many_comms(kernel):
    # A comm_open to a target nothing registered is closed at once, under that open.
    refused = kernel.collect(comm_send(kernel, "comm_open", {"comm_id": "x1", "target_name": "nobody", "data": {}}))[1]
    assert comm_msgs(refused, "comm_close") == [{"comm_id": "x1", "data": {}}]
    # A target the notebook registers: the frontend opens comms to it, and an echo comes back
    # between cells, under the message it answers.
    ok(kernel, 'dryml::widgets::register_target("echo", |comm, data| {\n'
               '    comm.send(dryml::serde_json::json!({"opened_with": data}));\n'
               '    let c = comm.clone();\n'
               '    comm.on_msg(move |d| c.send(d.clone()));\n});')
    opened = arrive(kernel, comm_send(kernel, "comm_open", {"comm_id": "e1", "target_name": "echo", "data": {"a": 1}}), "comm_msg")
    assert comm_msgs(opened, "comm_msg")[0]["data"] == {"opened_with": {"a": 1}}
    echo = arrive(kernel, comm_send(kernel, "comm_msg", {"comm_id": "e1", "data": {"ping": 2}}), "comm_msg")
    assert comm_msgs(echo, "comm_msg")[0] == {"comm_id": "e1", "data": {"ping": 2}}
    assert comms(kernel, "echo") == {"e1": {"target_name": "echo"}}

    # Many comms, closed from the notebook's side.
    msgs = ok(kernel, 'let many: Vec<_> = (0..200).map(|i| dryml::widgets::Comm::open("many", dryml::serde_json::json!({"i": i}), dryml::serde_json::json!({}))).collect();')
    assert len(comm_msgs(msgs, "comm_open")) == 200
    assert len(comms(kernel, "many")) == 200
    msgs = ok(kernel, 'for c in &many { c.close(dryml::serde_json::json!({})); }')
    assert len(comm_msgs(msgs, "comm_close")) == 200
    assert comms(kernel, "many") == {} and list(comms(kernel)) == ["e1"]
    # Garbage is refused cleanly: no id, no data; the kernel goes on.
    kernel.collect(comm_send(kernel, "comm_msg", {"data": None}))
    assert ok(kernel, "1 + 1")


def test_a_slider_set_by_the_frontend_is_read_by_the_next_cell(kernel):
    msgs = ok(kernel, 'let k = dryml::widgets::IntSlider::new(1..=10, 3).description("k");\nk.clone()')
    opens = comm_msgs(msgs, "comm_open")
    state = opens[0]["data"]["state"]
    assert opens[0]["target_name"] == "jupyter.widget"
    assert of_type(msgs, "comm_open")[0]["metadata"] == {"version": "2.1.0"}, "ipywidgets reads the protocol version here"
    assert (state["_model_name"], state["_view_name"], state["_model_module_version"]) == ("IntSliderModel", "IntSliderView", "2.0.0")
    (result,) = of_type(msgs, "execute_result")
    view = result["content"]["data"][VIEW]
    assert view == {"version_major": 2, "version_minor": 0, "model_id": opens[0]["comm_id"]}, result
    assert result["content"]["data"]["text/plain"] == 'IntSlider(value=3, description="k", min=1, max=10)'
    kernel.collect(comm_send(kernel, "comm_msg", {"comm_id": view["model_id"], "data": {"method": "update", "state": {"value": 8}, "buffer_paths": []}}))
    assert "k is 8" in stdout_of(ok(kernel, 'println!("k is {}", k.value());'))
    # A reloaded page's widget manager reads every state at once on its control comm, the
    # frontend's update included, and closes it.
    kernel.collect(comm_send(kernel, "comm_open", {"comm_id": "ctl", "target_name": "jupyter.widget.control", "data": {}}))
    states = kernel.collect(comm_send(kernel, "comm_msg", {"comm_id": "ctl", "data": {"method": "request_states"}}))[1]
    (answer,) = comm_msgs(states, "comm_msg")
    assert answer["data"]["method"] == "update_states", answer
    mine = answer["data"]["states"][view["model_id"]]
    assert (mine["model_name"], mine["model_module_version"]) == ("IntSliderModel", "2.0.0")
    assert (mine["state"]["value"], mine["state"]["description"]) == (8, "k"), mine
    kernel.collect(comm_send(kernel, "comm_close", {"comm_id": "ctl", "data": {}}))
    assert "ctl" not in comms(kernel)


def test_a_widget_progress_bar_advances_and_ends_at_100_percent(kernel):
    msgs = ok(kernel, 'for _ in dryml::widgets::progress_as("steps", 0..200) { std::thread::sleep(std::time::Duration::from_millis(2)); }')
    opens = {o["comm_id"]: o["data"]["state"]["_model_name"] for o in comm_msgs(msgs, "comm_open")}
    assert sorted(opens.values()) == ["HBoxModel", "HTMLModel", "HTMLModel", "IntProgressModel"], opens
    bar = next(i for i, n in opens.items() if n == "IntProgressModel")
    values = [m["data"]["state"]["value"] for m in comm_msgs(msgs, "comm_msg") if m["comm_id"] == bar and "value" in m["data"]["state"]]
    # Redrawn every 100 ms while it ran (400 ms or more on a loaded machine), not at every one of
    # its 200 steps, and last at 200.
    assert 2 <= len(values) <= 100 and values == sorted(values) and values[-1] == 200, values
    last = [m["data"]["state"] for m in comm_msgs(msgs, "comm_msg") if m["comm_id"] == bar][-1]
    assert last["bar_style"] == "success", last
    texts = [m["data"]["state"]["value"] for m in comm_msgs(msgs, "comm_msg") if opens[m["comm_id"]] == "HTMLModel"]
    assert "steps: 100%" in texts and any(t.startswith("200/200 [00:0") for t in texts), texts
    (shown,) = [d for d in (m["content"]["data"] for m in of_type(msgs, "display_data")) if VIEW in d]
    assert opens[shown[VIEW]["model_id"]] == "HBoxModel"
