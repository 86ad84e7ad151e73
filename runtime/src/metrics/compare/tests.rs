//! Comparisons against hand-computed numbers, from scores and from a real repo's index.

use super::*;
use crate::objects::{Build, Meta};
use serde::{Deserialize, Serialize};

fn scores(v: &[(&str, f64)]) -> Vec<(String, f64)> {
    v.iter().map(|(i, s)| (i.to_string(), *s)).collect()
}

#[test]
fn mean_std_and_the_best_by_hand() {
    let c = Comparison::new("accuracy")
        .group("tch", scores(&[("a", 0.9), ("b", 0.8), ("c", 1.0)]))
        .group("linfa", scores(&[("d", 0.95)]));
    let s = c.summaries();
    // Mean 0.9; sample variance ((0)² + 0.1² + 0.1²) / 2 = 0.01.
    assert!((s[0].mean - 0.9).abs() < 1e-12 && (s[0].std - 0.1).abs() < 1e-12, "{s:?}");
    assert_eq!((s[0].min, s[0].max, s[0].n, s[0].best.clone()), (0.8, 1.0, 3, ("c".to_string(), 1.0)));
    assert_eq!((s[1].std, s[1].n), (0.0, 1));
    assert_eq!(c.best(), Some(("tch".to_string(), "c".to_string(), 1.0)));
    let html = c.html();
    assert!(html.contains("<th>accuracy (mean ± std)</th>"), "{html}");
    assert!(html.contains("<td><b>0.9000 ± 0.1000</b></td>"), "the best model's group in bold: {html}");
    assert!(html.contains("<td>0.9500 ± 0.0000</td>"), "{html}");
    assert!(c.to_string().contains("0.9000 ± 0.1000"), "{c}");
    assert_eq!(c.boxplot().svg().matches("<rect x=").count(), 2);
    // A loss: lower is better.
    let l = Comparison::new("mse").lower_is_better().group("a", scores(&[("x", 2.0), ("y", 1.0)]));
    assert_eq!(l.best(), Some(("a".to_string(), "y".to_string(), 1.0)));
}

#[derive(Serialize, Deserialize)]
struct Args {
    k: u32,
}

#[derive(crate::Object)]
struct Scored {
    args: Args,
    meta: Meta,
}

impl Build for Scored {
    type Args = Args;
    fn build(args: Args, meta: Meta) -> Self {
        Scored { args, meta }
    }
}

#[test]
fn groups_from_a_repo_read_the_metrics_a_sweep_kept() {
    let dir = std::env::temp_dir().join(format!("dryml-compare-{}", crate::objects::uuid_v4()));
    let mut repo = Repo::create(&dir).unwrap();
    for (k, acc) in [(1, 0.5), (1, 0.7), (2, 0.9)] {
        let mut obj = Scored::build(Args { k }, Meta::new());
        obj.meta.metrics = Some(serde_json::json!({"test": {"accuracy": acc}}));
        repo.add(&obj).unwrap();
    }
    let c = Comparison::from_repo(
        &repo,
        "test.accuracy",
        &[("k=1", Selector::of("Scored").arg("k", 1.into())), ("k=2", Selector::of("Scored").arg("k", 2.into()))],
    )
    .unwrap();
    let s = c.summaries();
    assert_eq!((s[0].n, s[0].mean, s[1].mean), (2, 0.6, 0.9));
    let best = c.best().unwrap();
    assert_eq!(
        repo.by_id(&best.1).unwrap().downcast_ref::<Scored>().unwrap().args.k,
        2,
        "the best comes back by its id"
    );
    let e = Comparison::from_repo(&repo, "loss", &[("all", Selector::of("Scored"))]).unwrap_err();
    assert!(
        e.to_string().starts_with("compare: Scored ")
            && e.to_string().contains("(in `all`) has no number `loss`: it has metrics {\"test\""),
        "{e}"
    );
    let e = Comparison::from_repo(&repo, "test.accuracy", &[("none", Selector::of("Nothing"))]).unwrap_err();
    assert!(e.to_string().contains("`none` selects no object"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
