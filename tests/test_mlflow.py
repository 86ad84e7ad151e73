"""MLflow tracking against a real `mlflow server` (from the venv, SQLite and a local artifact
store, on loopback): an `%%experiment --mlflow` cell's networks, a sweep's trials as nested runs,
read back with MLflow's own client; a server stopped mid-run loses nothing."""
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import ok, running_kernel, stderr_of, value
from test_provenance import dirty_checkout

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

IRIS = """use dryml::models::{eval, Model};
use dryml::models::candle::CandleClassifier;
let iris = dryml::models::linfa::iris().shuffle(150, 1);"""

NET = """let mut m = CandleClassifier::new(dryml::serde_json::json!({
    "layers": [{"linear": 8}, "relu", {"linear": 3}],
    "optimizer": {"type": "adam", "lr": 0.05},
    "training": {"epochs": EPOCHS, "batch_size": 16}
}));"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def mlflow_server(d, port=None):
    """`mlflow server` on loopback with its store in `d`; yields (uri, stop) and stops it after."""
    port = port or free_port()
    d.mkdir(exist_ok=True)
    bin_ = Path(sys.executable).with_name("mlflow")
    cmd = [str(bin_), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--backend-store-uri", f"sqlite:///{d / 'mlflow.db'}", "--artifacts-destination", str(d / "artifacts")]
    proc = subprocess.Popen(cmd, cwd=d, stdout=open(d / "server.log", "ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    uri = f"http://127.0.0.1:{port}"

    def stop():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    try:
        deadline = time.time() + 120
        while True:
            try:
                if urllib.request.urlopen(f"{uri}/health", timeout=2).status == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.time() < deadline, (d / "server.log").read_text()[-3000:]
            time.sleep(0.3)
        yield uri, stop
    finally:
        stop()


def runs_of(client, experiment):
    e = client.get_experiment_by_name(experiment)
    return client.search_runs([e.experiment_id]) if e else []


def until(what, seconds=60):
    deadline = time.time() + seconds
    while True:
        got = what()
        if got or time.time() > deadline:
            return got
        time.sleep(0.5)


def test_an_experiments_network_and_a_sweeps_trials_reach_the_server(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    dirty_checkout(work)
    with mlflow_server(tmp_path / "server") as (uri, _), \
            running_kernel({"DRYML_MLFLOW_SPOOL": str(tmp_path / "spool")}) as k:
        client = MlflowClient(uri)
        ok(k, f"%cd {work}")
        ok(k, IRIS, timeout=1800)
        msgs = ok(k, f"%%experiment fit --keep m --mlflow {uri}\n" + NET.replace("EPOCHS", "4")
                  + "\nm.train(&iris, &mut m.train_spec()).unwrap();", timeout=600)
        assert "MLflow" not in stderr_of(msgs), stderr_of(msgs)
        # The experiment's run, and the network's nested in it: there once the cell has replied.
        runs = runs_of(client, "fit")
        assert len(runs) == 2, runs
        parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
        child = next(r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id)
        assert parent.info.status == child.info.status == "FINISHED"
        assert parent.data.metrics["time/seconds"] > 0 and "memory/cpu/consumed_mib" in parent.data.metrics
        p = child.data.params
        assert p["type"] == "CandleClassifier" and p["args.optimizer.lr"] == "0.05", p
        assert p["args.layers.0.linear"] == "8" and p["args.training.epochs"] == "4", p
        loss = client.get_metric_history(child.info.run_id, "loss/train")
        assert [m.step for m in loss] == [1, 2, 3, 4] and all(m.value > 0 for m in loss), loss
        tags = child.data.tags
        assert tags["dryml.git.dirty"] == "true" and tags["dryml.git.branch"] == "main", tags
        assert tags["dryml.crate.candle-core"].startswith("0.11."), tags
        assert tags["dryml.rustc"].startswith("rustc 1.") and tags["dryml.object"], tags
        assert parent.data.tags["dryml.git.dirty"] == "true", parent.data.tags
        # The model artifact loads back and predicts the same.
        got = Path(client.download_artifacts(child.info.run_id, "model.dryml", str(tmp_path)))
        same = value(k, f"""let back = dryml::load_object_as::<CandleClassifier>("{got}").unwrap();
eval(&back, &iris).unwrap().collect().unwrap() == eval(&m, &iris).unwrap().collect().unwrap()""")
        assert same == "true", same

        # A sweep: one parent run, a child per definition, each with its loss and its metrics.
        ok(k, """let defs: Vec<dryml::ObjectDef> = [0.01, 0.05].iter().map(|lr| dryml::ObjectDef::new("CandleClassifier", &dryml::serde_json::json!({
    "layers": [{"linear": 8}, "relu", {"linear": 3}],
    "optimizer": {"type": "adam", "lr": lr},
    "training": {"epochs": 3, "batch_size": 16}
})).unwrap()).collect();""")
        msgs = ok(k, f"""%%sweep defs --repo {tmp_path / 'lr_sweep'} --mlflow {uri}
|m: &mut CandleClassifier| {{
    m.train(&iris, &mut m.train_spec()).unwrap();
    dryml::metrics::categorical_accuracy(&eval(&*m, &iris).unwrap()).unwrap()
}}""", timeout=900)
        assert "MLflow" not in stderr_of(msgs), stderr_of(msgs)
        runs = runs_of(client, "lr_sweep")
        parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        assert [r.info.run_name for r in parents] == ["sweep defs"], runs
        trials = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
        assert sorted(r.data.params["args.optimizer.lr"] for r in trials) == ["0.01", "0.05"], trials
        for t in trials:
            assert t.info.status == "FINISHED" and 0 < t.data.metrics["value"] <= 1, t.data
            steps = [m.step for m in client.get_metric_history(t.info.run_id, "loss/train")]
            assert steps == [1, 2, 3], steps
            assert [a.path for a in client.list_artifacts(t.info.run_id)] == ["model.dryml"]
        # A cell that fails ends its experiment's run as FAILED.
        reply, _ = k.execute(f'%%experiment broken --mlflow {uri}\npanic!("no")')
        assert reply["status"] == "error", reply
        assert [r.info.status for r in runs_of(client, "broken")] == ["FAILED"]
        # Everything sent: the queue is gone.
        assert not list((tmp_path / "spool").glob("*.jsonl"))


def test_a_server_stopped_mid_run_gets_the_run_once_it_is_back(tmp_path):
    port = free_port()
    spool = tmp_path / "spool"
    with running_kernel({"DRYML_MLFLOW_SPOOL": str(spool)}) as k:
        ok(k, IRIS, timeout=1800)
        with mlflow_server(tmp_path / "server", port) as (uri, stop):
            client = MlflowClient(uri)
            # Eight epochs of half a second each: the server goes after the first have reached it.
            cell = (f"%%experiment slow --mlflow {uri}\n" + NET.replace("EPOCHS", "8") + """
let mut spec = m.train_spec();
let mut pause = |_: &dryml::models::training::Epoch| { std::thread::sleep(std::time::Duration::from_millis(500)); dryml::models::callbacks::Control::Continue };
m.train_with(&iris, &mut spec, &mut [&mut pause]).unwrap();
spec.epoch""")
            msg_id = k.send("execute", cell)
            started = until(lambda: [r for r in runs_of(client, "slow") if "mlflow.parentRunId" in r.data.tags], 120)
            assert started, "the network's run never reached the server"
            stop()
            reply, msgs = k.collect(msg_id, timeout=300)
        # The cell itself is fine; the calls the server missed are said to wait in the queue.
        assert reply["status"] == "ok", reply
        err = stderr_of(msgs)
        assert "MLflow" in err and "stay queued" in err, err
        assert list(spool.glob("*.jsonl")), "nothing was queued"
        with mlflow_server(tmp_path / "server", port) as (uri, _):
            client = MlflowClient(uri)

            def arrived():
                runs = runs_of(client, "slow")
                child = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
                return child if child and all(r.info.status == "FINISHED" for r in runs) else None

            child = until(arrived, 60)
            assert child and len(child) == 1, runs_of(client, "slow")
            steps = [m.step for m in client.get_metric_history(child[0].info.run_id, "loss/train")]
            assert steps == list(range(1, 9)), steps
            assert [a.path for a in client.list_artifacts(child[0].info.run_id)] == ["model.dryml"]
            # The next cell says the server has them.
            assert "answers again" in stderr_of(ok(k, "1 + 1"))
