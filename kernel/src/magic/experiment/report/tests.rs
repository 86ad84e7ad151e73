//! `report`'s unit tests.

use super::*;
use crate::magic::experiment::render::{group, hms, report_bundle};
use crate::measure::meter::CpuMem;

fn sample(rss: u64, hwm: u64) -> Sample {
    Sample {
        at: Instant::now(),
        cpu: CpuMem { rss, hwm, available: 1 << 30, total: 2 << 30 },
        gpus: vec![],
        pids: vec![1],
    }
}

fn vars(list: &[(&str, &str)]) -> BTreeMap<String, String> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[test]
fn rebound_names_from_top_level_bindings() {
    let got =
        rebound_names("let a = 1; let (b, mut c): (i32, i32) = (1, 2); d = 3; if x { e = 4; } let S { f, .. } = s;")
            .unwrap();
    assert_eq!(got, ["a", "b", "c", "d", "f"]);
    assert!(rebound_names("let = ;").unwrap().is_empty());
}

#[test]
fn cleanup_plan() {
    let mut e = Experiment::start(
        "x".into(),
        sample(100, 100),
        vec![],
        vars(&[("old", "i32"), ("m", "Vec<u8>"), ("t", "i32")]),
        ["k".to_string()],
    );
    e.note_cell("let m = vec![1u8];").unwrap();
    let now = vars(&[("old", "i32"), ("m", "Vec<u8>"), ("t", "String"), ("new1", "u8"), ("k", "u8")]);
    let c = e.cleanup(&now);
    assert_eq!(c.delete, ["new1"]);
    assert_eq!(c.reassigned, ["m", "t"]);
    assert_eq!(c.kept, ["k"]);
}

#[test]
fn report_figures() {
    let mut e = Experiment::start("x".into(), sample(100 << 20, 100 << 20), vec![], BTreeMap::new(), []);
    e.observe(&sample(400 << 20, 900 << 20));
    let r = e.report(
        &sample(612 << 20, 612 << 20),
        &sample(101 << 20, 101 << 20),
        Cleanup { delete: vec!["a".into()], reassigned: vec![], kept: vec![], unknown_keep: vec!["modle".into()] },
        vec![],
        vec![],
    );
    assert_eq!(r.notes, ["asked to keep modle, but no such variable exists"]);
    let cpu = r.cpu().unwrap();
    assert_eq!(cpu.consumed, 512 << 20);
    assert_eq!(cpu.reclaimed, 511 << 20);
    assert_eq!(cpu.peaked, 288 << 20);
    assert_eq!(peaked(100, 50, 300), 200);
    assert_eq!(peaked(100, 150, 150), 0);
    assert!(r.potential_leaks().is_empty());
    let b = report_bundle(&r, true, None);
    let text = b["text/plain"].as_str().unwrap();
    assert!(text.contains("Deleted: a") && text.contains("99.80%"), "{text}");
    assert_eq!(b[dryml::__kernel::display::DATA_MIME]["devices"][0]["consumed"], 512 << 20);
}

#[test]
fn formatting() {
    assert_eq!(group(1234567.4), "1,234,567");
    assert_eq!(group(-1500.0), "-1,500");
    assert_eq!(group(0.2), "0");
    assert_eq!(hms(3723.5), "1:02:03.500");
}

#[test]
fn cleanup_code_shape() {
    let c = cleanup_code(&["a".into()]);
    assert!(c.contains("drop(a)") && c.contains("malloc_trim(0)"));
}
