"""Plots in notebooks: `dryml::plot` curves that redraw in place by display id, histograms and
scatters as cell values, images from bytes, `plotters` through `:dep`, and the kernel's own
plots (`%cell_logger plot`, experiment reports) drawn by the same code."""
import base64

import pytest
from conftest import displays, of_type, ok, value


def svg_of(data):
    svg = data["image/svg+xml"]
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>"), svg[:200]
    return svg


@pytest.mark.timing
def test_a_training_curve_redraws_in_place_and_a_rerun_shows_it_afresh(kernel):
    code = """let mut losses: Vec<f64> = Vec::new();
for step in 0..30 {
    losses.push(2.0 / (step + 1) as f64);
    if step % 10 == 9 { dryml::plot::Figure::new().title("loss").x_label("step").curve("", &losses).show_as("loss"); }
}"""
    for _ in range(2):
        msgs = ok(kernel, code)
        shown, updates = of_type(msgs, "display_data"), of_type(msgs, "update_display_data")
        # One output, redrawn twice: not three plots.
        assert len(shown) == 1 and len(updates) == 2, [m["msg_type"] for _, m in msgs]
        assert {m["content"]["transient"]["display_id"] for m in shown + updates} == {"loss"}
        assert "10 points" in shown[0]["content"]["data"]["text/plain"]
        last = updates[-1]["content"]["data"]
        assert "30 points, last 0.0667" in last["text/plain"], last["text/plain"]
        assert ">loss</text>" in svg_of(last) and ">step</text>" in svg_of(last)


@pytest.mark.timing
def test_a_live_curve_throttles_redraws_and_draws_the_last_point(kernel):
    msgs = ok(kernel, """let curve = dryml::plot::Curve::new("live");
for step in 0..40 {
    curve.push("train", 1.0 / (step + 1) as f64);
    curve.push("val", 1.5 / (step + 1) as f64);
    std::thread::sleep(std::time::Duration::from_millis(20));
}
// The trailing redraw comes within 200 ms of the last push.
std::thread::sleep(std::time::Duration::from_millis(400));""")
    shown, updates = of_type(msgs, "display_data"), of_type(msgs, "update_display_data")
    assert len(shown) == 1, "one output"
    # 80 pushes over about 0.8 s: a redraw at most every 200 ms, not one per push.
    assert 2 <= len(updates) <= 8, len(updates)
    last = updates[-1]["content"]["data"]
    assert "train: 40 points" in last["text/plain"] and "val: 40 points" in last["text/plain"], last["text/plain"]
    assert ">train</text>" in svg_of(last) and ">val</text>" in svg_of(last), "a legend"


def test_histograms_and_scatters_are_cell_values(kernel):
    msgs = ok(kernel, "dryml::plot::hist(&[1.0, 2.0, 2.5, 3.0, 9.0], 4).title(\"weights\")")
    data = of_type(msgs, "execute_result")[0]["content"]["data"]
    assert ">weights</text>" in svg_of(data) and svg_of(data).count("<rect") >= 5
    msgs = ok(kernel, "dryml::plot::scatter(&[1, 2, 3], &[3.0f32, 1.0, 2.0]).x_label(\"x\")")
    assert svg_of(of_type(msgs, "execute_result")[0]["content"]["data"]).count("<circle") == 3


def test_images_from_bytes(kernel, tmp_path):
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
    (tmp_path / "px.png").write_bytes(png)
    msgs = ok(kernel, f'dryml::display::png(&std::fs::read("{tmp_path}/px.png").unwrap());\n'
                      'dryml::display::svg("<svg xmlns=\\"http://www.w3.org/2000/svg\\" width=\\"4\\" height=\\"4\\"/>");')
    first, second = displays(msgs)
    assert base64.b64decode(first["image/png"]) == png
    assert second["image/svg+xml"].startswith("<svg")


def test_plotters_through_dep(kernel):
    # plotters, the Rust plotting crate, with its SVG backend: built on first use like any :dep.
    ok(kernel, ':dep plotters = { version = "0.3", default-features = false, features = ["svg_backend", "line_series"] }',
       timeout=900)
    msgs = ok(kernel, """use plotters::prelude::*;
let mut svg = String::new();
{
    let root = SVGBackend::with_string(&mut svg, (320, 200)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let mut chart = ChartBuilder::on(&root).margin(10).build_cartesian_2d(0f64..10.0, 0f64..100.0).unwrap();
    chart.draw_series(LineSeries::new((0..10).map(|x| (x as f64, (x * x) as f64)), &RED)).unwrap();
    root.present().unwrap();
}
dryml::display::svg(&svg);""", timeout=900)
    assert "<polyline" in svg_of(displays(msgs)[0]) or "<path" in svg_of(displays(msgs)[0])


def test_the_kernels_plots_use_the_same_code(kernel):
    ok(kernel, "%cell_logger on")
    ok(kernel, "let v = vec![0u8; 8 << 20];")
    ok(kernel, "%cell_logger off")
    svg = svg_of(displays(ok(kernel, "%cell_logger plot"))[0])
    assert "Execution time per cell" in svg and ">peak during</text>" in svg and ">used after</text>" in svg
    msgs = ok(kernel, "%%experiment plotted\nlet w = vec![1u8; 16 << 20];")
    html = [d["text/html"] for d in displays(msgs) if "text/html" in d][-1]
    assert "<svg" in html and ">consumed</text>" in html and ">reclaimed</text>" in html
