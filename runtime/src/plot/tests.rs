//! Tests of `plot`.

use super::*;

#[test]
fn round_ticks_cover_the_range() {
    assert_eq!(ticks(0.0, 10.0, 5), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    let t = ticks(0.13, 0.91, 4);
    assert_eq!(t.first(), Some(&0.0));
    assert!(*t.last().unwrap() >= 0.91, "{t:?}");
    assert_eq!(short(0.30000000000000004), "0.3");
    assert_eq!(short(1234567.0), "1,234,567");
    assert_eq!(short(-2500.0), "-2,500");
    assert_eq!(short(3e-5), "3e-5");
}

#[test]
fn a_curve_has_axes_labels_and_a_legend() {
    let svg = Figure::new()
        .title("loss <train>")
        .x_label("step")
        .y_label("loss")
        .curve("train", &[2.0, 1.0, 0.5])
        .curve("val", &[2.2f32, 1.4, 0.9])
        .svg();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert!(svg.contains("loss &lt;train&gt;"), "the title is escaped");
    assert!(svg.contains(">train</text>") && svg.contains(">val</text>"), "a legend names both series");
    assert!(svg.contains(">step</text>") && svg.contains("rotate(-90"), "both axes are labelled");
}

#[test]
fn a_nan_breaks_the_line_and_long_series_are_thinned() {
    let f = Figure::new().curve("", &[1.0, 2.0, f64::NAN, 3.0, 4.0]);
    assert_eq!(f.svg().matches("<polyline").count(), 2);
    let long: Vec<f64> = (0..100_000).map(|i| (i as f64).sin()).collect();
    let svg = Figure::new().curve("sin", &long).svg();
    assert!(svg.len() < 40_000, "{} bytes", svg.len());
    assert!(Figure::new().curve("", &[f64::NAN]).svg().contains("</svg>"), "nothing finite still draws axes");
    assert!(Figure::new().curve("", &[-1e308, 1e308]).svg().contains("</svg>"), "a range past f64's reach");
}

#[test]
fn histogram_counts_every_value() {
    let f = Figure::new().histogram("h", &[1, 1, 2, 3, 3, 3, 10], 3);
    assert_eq!(f.series[0].ys, [6.0, 0.0, 1.0]);
    assert_eq!(f.series[0].ys.iter().sum::<f64>(), 7.0);
    let one = Figure::new().histogram("h", &[5.0; 4], 4);
    assert_eq!(one.series[0].ys.iter().sum::<f64>(), 4.0, "equal values fall in a bin");
    assert!(Figure::new().histogram("h", &[0.0; 0], 4).svg().contains("</svg>"), "no values still draws");
}

#[test]
fn bars_are_labelled_and_stacked_panels_share_one_document() {
    let f = Figure::new().bars("peak", &["1", "2", "3"], &[10u64, 20, 5]).size(300, 150);
    let svg = stack(&[f.clone(), f]);
    assert_eq!(svg.matches("<svg").count(), 3);
    assert!(svg.contains("height=\"300\""));
    assert!(svg.contains("<title>peak 1: 20</title>"));
}

#[test]
fn text_names_series_and_last_values() {
    let f = Figure::new().title("acc").curve("train", &[0.5, 0.75]);
    assert_eq!(f.text(), "<plot \"acc\"; train: 2 points, last 0.75>");
}

#[test]
fn boxes_show_quartiles_whiskers_and_outliers() {
    // 1..=9 and one far value: quartiles 3.25, 5.5, 7.75 (linear), whiskers 1 and 9, 40 beyond.
    let b = BoxStats::of(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 40.0]).unwrap();
    assert_eq!(b, BoxStats { low: 1.0, q1: 3.25, median: 5.5, q3: 7.75, high: 9.0 });
    assert_eq!(BoxStats::of(&[0.9]).unwrap(), BoxStats { low: 0.9, q1: 0.9, median: 0.9, q3: 0.9, high: 0.9 });
    assert_eq!(BoxStats::of(&[f64::NAN]), None);
    let groups = vec![vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 40.0], vec![0.5, 0.6]];
    let svg = Figure::new().title("accuracy").boxes(&["tch", "linfa"], &groups).svg();
    assert_eq!(svg.matches("<rect x=").count(), 2, "a box each, and no legend: {svg}");
    assert!(svg.contains(">tch</text>") && svg.contains(">linfa</text>"), "named on the x axis");
    assert_eq!(svg.matches("<circle").count(), 1, "one outlier, drawn as a ring");
    assert!(svg.contains("<title>tch: n 10, median 5.5, quartiles 3.25 to 7.75</title>"), "{svg}");
}
