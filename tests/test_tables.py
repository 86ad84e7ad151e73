"""Tables: a cell whose value is an `ndarray` array or a `Dataset` shows an HTML table with its
text form, bounded to the head and tail rows; other values keep their own display."""
from conftest import of_type, ok, running_kernel


def result(kernel, code):
    return of_type(ok(kernel, code), "execute_result")[0]["content"]["data"]


def test_arrays_and_datasets_are_a_cells_table(kernel):
    ok(kernel, "use dryml::data::ndarray::Array2;\n"
               "let a = Array2::<f64>::from_shape_fn((100_000, 4), |(i, j)| (i * 4 + j) as f64);")
    data = result(kernel, "a")
    html, text = data["text/html"], data["text/plain"]
    assert "<table" in html and "100000 rows × 4 columns, f64" in html, html[:300]
    # Pandas' rule: the first and last five rows, an elision between.
    assert html.count("<tr>") == 5 + 1 + 5, html
    assert "<th>99999</th><td>399996</td>" in html, html
    assert text.splitlines()[-2].split() == ["99999", "399996", "399997", "399998", "399999"], text
    # Shown, not moved: the array is still the notebook's.
    assert result(kernel, "a.len()")["text/plain"] == "400000"
    assert "<table" in result(kernel, "a.view()")["text/html"]
    # A reference keeps evcxr's Debug text (a table for it would make the display ambiguous).
    assert result(kernel, "&a")["text/plain"].startswith("[[0.0, 1.0, 2.0, 3.0],")
    assert "3 rows, i64" in result(kernel, "dryml::data::ndarray::arr1(&[1i64, 2, 3])")["text/html"]

    data = result(kernel, "dryml::data::Dataset::from_vec((0..50usize).map(|i| dryml::data::Xy { x: i as f32, y: i % 2 }).collect::<Vec<_>>())")
    html = data["text/html"]
    assert "<th>x</th><th>y</th>" in html and "<td>4.0</td><td>0</td>" in html, html
    assert "Dataset of 50 Xy&lt;f32, usize&gt; (supervised)" in html, html
    assert html.count("<tr>") == 5 + 1, "five elements and an elision, not fifty"


def test_other_values_keep_their_own_display(kernel):
    ok(kernel, "let a = dryml::data::ndarray::arr1(&[1.5f32]);")
    # Debug as before for a type without a table; a type's own evcxr_display first.
    assert result(kernel, "vec![1, 2]") == {"text/plain": "[1, 2]"}
    data = result(kernel, "dryml::Html(\"<i>mine</i>\".into())")
    assert data["text/html"] == "<i>mine</i>" and "<table" not in data["text/html"]
    assert result(kernel, "(1, \"x\")") == {"text/plain": "(1, \"x\")"}
    # A type's own evcxr_display, by value and through a reference, with dryml's tables in scope.
    ok(kernel, '#[derive(Debug)] struct Shown(u8);\n'
               'impl Shown { fn evcxr_display(&self) { println!("EVCXR_BEGIN_CONTENT text/html\\n<b>{}</b>\\nEVCXR_END_CONTENT", self.0); } }')
    for expr in ("Shown(7)", "&Shown(7)"):
        assert result(kernel, expr).get("text/html") == "<b>7</b>", expr


def test_a_notebooks_own_ndarray_shows_tables(kernel):
    # `:dep ndarray` alone brings dryml's tables (the same ndarray as dryml's).
    data = result(kernel, ':dep ndarray = "0.16"\nndarray::arr2(&[[1, 2], [3, 4]])')
    assert "2 rows × 2 columns, i32" in data["text/html"], data


def test_a_polars_frame_and_series_are_tables_however_long(kernel):
    # A `:dep polars` of the polars dryml is built against brings dryml's tables for its types.
    ok(kernel, ':dep polars = { version = "0.55", default-features = false }\nuse polars::prelude::*;', timeout=1200)
    data = result(kernel, 'df!("id" => &[1i32, 2, 3], "score" => &[Some(0.5f64), None, Some(1.5)], '
                          '"name" => &["a", "b", "c"]).unwrap()')
    html = data["text/html"]
    assert "DataFrame: 3 rows × 3 columns" in html, html
    assert "<th>id (i32)</th><th>score (f64)</th><th>name (str)</th>" in html, html
    assert "<th>1</th><td>2</td><td>null</td><td>b</td>" in html, html
    assert "name (str)" in data["text/plain"], data
    # Ten million rows: only the head and tail are read and shown.
    ok(kernel, 'let big = DataFrame::new_infer_height(vec![Series::new("n".into(), (0..10_000_000i64).collect::<Vec<_>>()).into()]).unwrap();')
    data = result(kernel, "big")
    assert "DataFrame: 10000000 rows × 1 columns" in data["text/html"], data
    assert "<th>9999999</th><td>9999999</td>" in data["text/html"] and len(data["text/html"]) < 20_000
    data = result(kernel, 'big.column("n").unwrap().as_materialized_series().head(Some(70))')
    assert "Series: 70 rows of i64" in data["text/html"] and "<th>69</th><td>69</td>" in data["text/html"], data
    # `big` was only borrowed to be shown.
    assert result(kernel, "big.height()")["text/plain"] == "10000000"


def test_a_notebooks_own_polars_release_shows_the_same_tables():
    """A polars other than dryml's (a public tutorial pins 0.53): its frames and series show as
    the same bounded tables, from code built against that release in each cell."""
    with running_kernel() as k:
        ok(k, ':dep polars = { version = "=0.53.0", default-features = false, features = ["fmt"] }\n'
              "use polars::prelude::*;", timeout=2400)
        data = result(k, 'df!("id" => &[1i32, 2, 3], "score" => &[Some(0.5f64), None, Some(1.5)], '
                         '"name" => &["a", "b", "c"]).unwrap()')
        html = data.get("text/html", "")
        assert "DataFrame: 3 rows × 3 columns" in html, data
        assert "<th>id (i32)</th><th>score (f64)</th><th>name (str)</th>" in html, html
        assert "<th>1</th><td>2</td><td>null</td><td>b</td>" in html, html
        ok(k, "let big = df!(\"n\" => (0..1_000_000i64).collect::<Vec<_>>()).unwrap();")
        html = result(k, "big")["text/html"]
        assert "DataFrame: 1000000 rows × 1 columns" in html and "<th>999999</th><td>999999</td>" in html
        assert len(html) < 20_000
        html = result(k, 'Series::new("flag".into(), [true, false])')["text/html"]
        assert "Series: 2 rows of bool" in html and "<td>false</td>" in html, html
        # Values that are not polars' keep their display.
        assert result(k, "vec![1, 2]") == {"text/plain": "[1, 2]"}


def test_a_notebooks_own_ndarray_and_arrow_releases_show_the_same_tables():
    """ndarray 0.15 (which public tutorials pin) and an Arrow other than dryml's 60: their
    arrays and batches show as dryml's own do, beside dryml's own arrays in the same notebook."""
    with running_kernel() as k:
        ok(k, ':dep ndarray = "0.15"\n'
              ':dep arrow = { version = "55", default-features = false }', timeout=2400)
        html = result(k, "ndarray::arr2(&[[1.5f64, 2.0], [3.0, 4.0]])")["text/html"]
        assert "2 rows × 2 columns, f64" in html and "<th>1</th><td>3</td><td>4</td>" in html, html
        ok(k, "let big = ndarray::Array1::from_iter(0..1_000_000i64);")
        html = result(k, "big")["text/html"]
        assert "1000000 rows, i64" in html and "<th>999999</th><td>999999</td>" in html, html
        assert len(html) < 20_000
        html = result(k, "ndarray::Array3::<u8>::zeros((2, 2, 2))")["text/html"]
        assert "shape [2, 2, 2], u8" in html, html
        # dryml's own ndarray (0.16) beside it, and a view of the notebook's.
        assert "1 rows, i64" in result(k, "dryml::data::ndarray::arr1(&[7i64])")["text/html"]
        assert "1000000 rows, i64" in result(k, "big.view()")["text/html"]
        ok(k, "use std::sync::Arc;\nuse arrow::array::{ArrayRef, Int32Array, StringArray};\n"
              "let batch = arrow::record_batch::RecordBatch::try_from_iter(vec![\n"
              "    (\"id\", Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])) as ArrayRef),\n"
              "    (\"name\", Arc::new(StringArray::from(vec![\"a\", \"b\", \"c\"])) as ArrayRef),\n"
              "]).unwrap();")
        html = result(k, "batch")["text/html"]
        assert "RecordBatch: 3 rows × 2 columns" in html, html
        assert "<th>id (Int32)</th><th>name (Utf8)</th>" in html, html
        assert "<th>1</th><td>null</td><td>b</td>" in html, html
        assert result(k, "vec![1, 2]") == {"text/plain": "[1, 2]"}


def test_the_cell_that_brings_dryml_in_shows_its_table_too():
    """A first cell's value shows as the same cell's would later: with the warm-up off, and sent
    at once after the start (the warm-up not yet done)."""
    for env in ({"DRYML_NO_WARM_UP": "1"}, {}):
        with running_kernel(env) as k:
            data = result(k, "dryml::data::ndarray::arr1(&[1i64, 2, 3])")
            assert "3 rows, i64" in data.get("text/html", ""), (env, data)
    # A first cell that fails leaves no table code behind for the cells after it.
    with running_kernel({"DRYML_NO_WARM_UP": "1"}) as k:
        failed = k.execute("dryml::data::ndarray::arr1(&[1i64, 2, 3]) + nothing")[0]
        assert failed["status"] == "error"
        assert result(k, "vec![1, 2]") == {"text/plain": "[1, 2]"}
        assert "3 rows, i64" in result(k, "dryml::data::ndarray::arr1(&[1i64, 2, 3])")["text/html"]
