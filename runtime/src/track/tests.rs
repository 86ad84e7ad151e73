//! The queue's lines and names; the sender against a real server is `tests/test_mlflow.py`'s.

use super::*;

#[test]
fn definitions_flatten_to_dotted_parameters() {
    let mut out = Vec::new();
    flatten("args", &json!({"lr": 0.1, "layers": [{"units": 32}], "name": "mlp", "seed": null}), &mut out);
    assert_eq!(
        out,
        [
            ("args.layers.0.units".to_string(), "32".to_string()),
            ("args.lr".into(), "0.1".into()),
            ("args.name".into(), "mlp".into()),
            ("args.seed".into(), "null".into()),
        ]
    );
}

#[test]
fn provenance_parts_become_tags_mlflow_accepts() {
    let mut p = Provenance::default();
    p.crates.insert("tch".into(), "0.20.0".into());
    p.host = "h1".into();
    let tags = provenance_tags(&p);
    assert!(tags.contains(&("dryml.crate.tch".into(), "0.20.0".into())), "{tags:?}");
    assert!(tags.contains(&("dryml.host".into(), "h1".into())), "{tags:?}");
    assert!(tags.iter().all(|(k, _)| k.chars().all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))));
}

#[test]
fn calls_queue_in_order_as_whole_lines_from_many_threads() {
    let dir = std::env::temp_dir().join(format!("dryml-spool-test-{}", std::process::id()));
    std::env::set_var(crate::sys::protocol::MLFLOW_SPOOL_ENV, &dir);
    let m = mlflow("http://127.0.0.1:1/");
    assert_eq!(m.uri(), "http://127.0.0.1:1");
    let run = m.start_run("e", "r").unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let run = &run;
            s.spawn(move || {
                (0u32..50).for_each(|i| run.log_metric(&format!("m{t}"), f64::from(i), u64::from(i)).unwrap())
            });
        }
    });
    let key = run.key().to_string();
    run.end().unwrap();
    let text = std::fs::read_to_string(dir.join(spool::file_name("http://127.0.0.1:1"))).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 1 + 200 + 1);
    assert_eq!(lines[0]["op"], "start");
    assert_eq!(lines[201]["op"], "end");
    assert!(lines.iter().all(|l| l["key"] == key.as_str() && l["uri"] == "http://127.0.0.1:1"));
    // Each thread's steps stay in order.
    let steps: Vec<u64> =
        lines.iter().filter(|l| l["metrics"][0][0] == "m2").map(|l| l["metrics"][0][2].as_u64().unwrap()).collect();
    assert_eq!(steps, (0..50).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_ended_run_takes_nothing_more_and_the_active_run_is_unset_after_a_panic() {
    let run = Run { uri: "u".into(), experiment: "e".into(), key: "k".into(), ended: true };
    assert_eq!(run.set_tags(&[]), Err(TrackError::Ended("k".into())));
    let r = std::panic::catch_unwind(|| with_active(&run, || panic!("trial failed")));
    assert!(r.is_err());
    assert!(Active::get().is_none());
}
