use super::*;
use crate::display::Tabular;
use ndarray::{array, Array1, Array2, ArrayD, IxDyn};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A supervised, indexed dataset of `n` rows of `w` features, with a map of two leaves as target.
fn nested(n: usize, w: usize) -> Dataset<Indexed<u64, Xy<Array1<f32>, BTreeMap<String, f64>>>> {
    let rows: Vec<Xy<Array1<f32>, BTreeMap<String, f64>>> = (0..n)
        .map(|i| {
            let x = Array1::from_iter((0..w).map(|j| (i * w + j) as f32));
            let y = [("a".to_string(), i as f64), ("b".to_string(), -(i as f64))].into_iter().collect();
            Xy { x, y }
        })
        .collect();
    Dataset::from_vec(rows).as_indexed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn batch_then_unbatch_is_the_identity(n in 0usize..40, w in 1usize..4, size in 1usize..12, drop in any::<bool>()) {
        let data = nested(n, w);
        let all = data.collect().unwrap();
        let batched = data.batch(size, drop).unwrap();
        let batches = batched.collect().unwrap();
        prop_assert_eq!(batched.len(), Len::Known(batches.len()));
        prop_assert!(batches.iter().all(|b| b.i.len() <= size && b.e.x.nrows() == b.i.len() && b.e.y["a"].len() == b.i.len()));
        let back = batched.unbatch().unwrap();
        let kept = if drop { n / size * size } else { n };
        prop_assert_eq!(back.len(), Len::Known(kept));
        prop_assert_eq!(back.collect().unwrap(), all[..kept].to_vec());
        prop_assert!(back.is_supervised() && back.is_indexed() && back.batch_size().is_none());
    }

    #[test]
    fn shuffle_is_a_permutation_for_every_seed(n in 0usize..60, buffer in 1usize..80, seed in any::<u64>()) {
        let data = Dataset::from_vec((0..n as u64).collect());
        let shuffled = data.shuffle(buffer, seed);
        let once = shuffled.collect().unwrap();
        prop_assert_eq!(&once, &shuffled.collect().unwrap(), "the same order on every pass");
        let mut sorted = once.clone();
        sorted.sort();
        prop_assert_eq!(sorted, (0..n as u64).collect::<Vec<_>>());
        prop_assert_eq!(shuffled.len(), Len::Known(n));
    }

    #[test]
    fn data_held_in_memory_gives_what_the_same_stream_gives(n in 0usize..50, buffer in 1usize..60, seed in any::<u64>(), size in 1usize..9, k in 0usize..10, drop in any::<bool>()) {
        // From arrays (random access, batches gathered) and from a generator of the same rows.
        let x = Array2::from_shape_fn((n, 2), |(i, j)| (i * 2 + j) as f32);
        let y = Array1::from_shape_fn(n, |i| i as i64);
        let held = Dataset::from_xy(x.clone(), y.clone()).unwrap();
        let (xs, ys) = (std::sync::Arc::new(x), std::sync::Arc::new(y));
        let streamed = Dataset::from_fn(Len::Known(n), move || {
            let (xs, ys) = (xs.clone(), ys.clone());
            (0..ys.len()).map(move |i| Xy { x: xs.row(i).to_owned(), y: ys[i] })
        });
        let pipe = |d: &Dataset<Xy<Array1<f32>, i64>>| d.skip(k).shuffle(buffer, seed).take(n).batch(size, drop).unwrap();
        let (a, b) = (pipe(&held), pipe(&streamed));
        prop_assert_eq!(a.len(), b.len());
        prop_assert_eq!(a.collect().unwrap(), b.collect().unwrap());
        prop_assert_eq!(a.unbatch().unwrap().collect().unwrap(), b.unbatch().unwrap().collect().unwrap());
    }

    #[test]
    fn take_and_skip_partition(n in 0usize..50, k in 0usize..60) {
        let data = nested(n, 2);
        let mut both = data.take(k).collect().unwrap();
        both.extend(data.skip(k).collect().unwrap());
        prop_assert_eq!(both, data.collect().unwrap());
        prop_assert_eq!(data.take(k).len(), Len::Known(k.min(n)));
        prop_assert_eq!(data.skip(k).len(), Len::Known(n.saturating_sub(k)));
    }

    #[test]
    fn known_lengths_are_what_a_pass_counts(n in 0usize..50, size in 1usize..9, k in 0usize..20, seed in any::<u64>()) {
        let data = nested(n, 1).shuffle(7, seed).skip(k).batch(size, false).unwrap();
        for d in [data.clone(), data.take(2), data.skip(1)] {
            if let Len::Known(len) = d.len() {
                prop_assert_eq!(len, d.count().unwrap());
            }
            let flat = d.unbatch().unwrap();
            match flat.len() {
                Len::Known(len) => prop_assert_eq!(len, flat.count().unwrap()),
                other => prop_assert_eq!(other, Len::Unknown),
            }
        }
    }
}

#[test]
fn flags_survive_every_method() {
    let data = nested(10, 3);
    let all: Vec<Box<dyn Fn() -> (bool, bool)>> = vec![
        Box::new({
            let d = data.clone();
            move || (d.is_supervised(), d.is_indexed())
        }),
        Box::new({
            let d = data.shuffle(4, 1).take(5).skip(1);
            move || (d.is_supervised(), d.is_indexed())
        }),
        Box::new({
            let d = data.apply_x(|x| x * 2.0).apply_y(|y| y["a"]);
            move || (d.is_supervised(), d.is_indexed())
        }),
        Box::new({
            let d = data.batch(3, true).unwrap().apply(|x, y| (x, y));
            move || (d.is_supervised(), d.is_indexed())
        }),
        Box::new({
            let d = data.map_el(|v: f32| v + 1.0);
            move || (d.is_supervised(), d.is_indexed())
        }),
    ];
    for flags in all {
        assert_eq!(flags(), (true, true));
    }
    let plain = data.as_not_indexed().as_not_supervised();
    assert_eq!((plain.is_supervised(), plain.is_indexed()), (false, false));
    let only_x = data.as_not_supervised();
    assert_eq!((only_x.is_supervised(), only_x.is_indexed()), (false, true));
    assert_eq!(only_x.peek().unwrap().unwrap(), Indexed { i: 0, e: array![0.0f32, 1.0, 2.0] });
    assert!(
        format!("{:?}", data.batch(4, false).unwrap()).starts_with("Dataset of 3 "),
        "{:?}",
        data.batch(4, false).unwrap()
    );
    assert!(format!("{:?}", data.batch(4, false).unwrap()).ends_with("(supervised, indexed, batches of 4)"));
}

#[test]
fn map_el_changes_leaves_of_its_type_only() {
    let data = Dataset::from_vec(vec![(array![1.0f32, 2.0], 3i64, 0.5f64)]).map_el(|v: f32| v * 10.0);
    assert_eq!(data.collect().unwrap(), [(array![10.0f32, 20.0], 3, 0.5)]);
    let data = data.map_el(|v: i64| -v).batch(1, false).unwrap().map_el(|v: f64| v + 1.0);
    let b = data.peek().unwrap().unwrap();
    assert_eq!((b.0, b.1, b.2), (array![[10.0f32, 20.0]], array![-3i64], array![1.5f64]));
}

#[test]
fn arrays_of_any_rank_batch_and_split() {
    let images = ArrayD::from_shape_vec(IxDyn(&[5, 2, 3]), (0..30).map(|v| v as u8).collect()).unwrap();
    let data = Dataset::from_array(images.clone()).unwrap();
    let batched = data.batch(2, false).unwrap();
    let shapes: Vec<Vec<usize>> = batched.collect().unwrap().iter().map(|b| b.shape().to_vec()).collect();
    assert_eq!(shapes, [vec![2, 2, 3], vec![2, 2, 3], vec![1, 2, 3]]);
    let back: Vec<_> =
        batched.unbatch().unwrap().collect().unwrap().into_iter().map(|a| a.into_raw_vec_and_offset().0).collect();
    assert_eq!(back.concat(), images.into_raw_vec_and_offset().0);
}

#[test]
fn bad_input_is_a_clear_error() {
    // Rows of different lengths cannot stack: the pass ends with an error naming the element.
    let ragged = Dataset::from_vec(vec![array![1.0f32, 2.0], array![1.0f32], array![3.0f32, 4.0]]);
    let e = ragged.batch(3, false).unwrap().collect().unwrap_err();
    assert_eq!(e, DataError::Shapes("element 1 of a batch has shape [1], element 0 has [2]".into()));
    assert_eq!(ragged.batch(0, false).unwrap_err(), DataError::Argument("batch size 0".into()));
    assert_eq!(ragged.unbatch().unwrap_err(), DataError::NotBatched);
    let keys =
        Dataset::from_vec(vec![BTreeMap::from([("a".to_string(), 1.0)]), BTreeMap::from([("b".to_string(), 1.0)])]);
    assert!(keys
        .batch(2, false)
        .unwrap()
        .collect()
        .unwrap_err()
        .to_string()
        .contains("element 1 of a batch has keys [\"b\"]"));
    let e = Dataset::from_xy(Array2::<f32>::zeros((3, 2)), Array1::<i64>::zeros(2)).unwrap_err();
    assert_eq!(e.to_string(), "shapes do not fit: x has 3 rows and y 2 entries");
    let forever = Dataset::from_fn(Len::Infinite, || 0u8..);
    assert_eq!(forever.count().unwrap_err(), DataError::Infinite("count"));
    assert_eq!(forever.take(3).collect().unwrap(), [0, 1, 2]);
    // An error in the middle of a pass comes through a shuffle and a batch, and ends the pass.
    let failing = Dataset::from_source(Len::Unknown, || {
        Box::new((0..5).map(|i| if i == 3 { Err(DataError::Argument("bad row 3".into())) } else { Ok(i as f32) }))
    });
    let got: Vec<_> = failing.shuffle(2, 1).batch(2, false).unwrap().iter().collect();
    assert!(matches!(got.last(), Some(Err(DataError::Argument(m))) if m == "bad row 3"), "{got:?}");
}

#[test]
fn csv_files_read_whole_with_errors_at_their_line() {
    let dir = std::env::temp_dir().join(format!("dryml-data-csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.csv");
    std::fs::write(&good, "a,label,b\n1,0,2\n3,1,4.5\n").unwrap();
    let data = Dataset::from_csv_xy(&good, "label", &CsvOptions::default()).unwrap();
    assert_eq!(data.collect().unwrap(), [Xy { x: array![1.0, 2.0], y: 0.0 }, Xy { x: array![3.0, 4.5], y: 1.0 }]);
    assert_eq!(Dataset::from_csv(&good, &CsvOptions::default()).unwrap().count().unwrap(), 2);
    let e = Dataset::from_csv_xy(&good, "class", &CsvOptions::default()).unwrap_err();
    assert!(e.to_string().ends_with("good.csv: no column `class` (the columns: a, label, b)"), "{e}");
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "a,b\n1,2\n3,x\n").unwrap();
    let e = Dataset::from_csv(&bad, &CsvOptions::default()).unwrap_err();
    assert!(e.to_string().ends_with("bad.csv:3: column 2: `x` is not a number"), "{e}");
    let e = Dataset::from_csv(dir.join("missing.csv"), &CsvOptions::default()).unwrap_err();
    assert!(matches!(&e, DataError::File { at: None, .. }) && e.to_string().contains("missing.csv"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shuffle_reaches_every_order_the_buffer_allows() {
    // A buffer as long as the data: all six orders of three over some seeds (DRYML's never
    // picked the last slot, so its first element was never the last of the buffer).
    let data = Dataset::from_vec(vec![0u8, 1, 2]);
    let orders: std::collections::BTreeSet<Vec<u8>> =
        (0..300).map(|seed| data.shuffle(3, seed).collect().unwrap()).collect();
    assert_eq!(orders.len(), 6, "{orders:?}");
    // A buffer of one keeps the order.
    assert_eq!(data.shuffle(1, 5).collect().unwrap(), [0, 1, 2]);
}

#[test]
fn a_dataset_shows_its_layout_and_first_elements_only() {
    let d = Dataset::from_vec((0..100usize).map(|i| Xy { x: i as f32, y: i % 3 }).collect());
    let t = d.table();
    assert_eq!(t.caption(), "Dataset of 100 Xy<f32, usize> (supervised)");
    let text = t.text();
    assert!(text.lines().next().unwrap().contains('x') && text.lines().next().unwrap().ends_with('y'), "{text}");
    assert_eq!(t.shown_rows(), 5, "five elements: {text}");
    assert!(text.lines().nth(6).unwrap().trim_start().starts_with('…'), "and the elision: {text}");

    // An endless pipeline: the table takes five elements and stops.
    let endless = Dataset::from_fn(Len::Infinite, || (0u64..).map(|i| i as f32)).map(|x| x * 2.0);
    let text = endless.table().text();
    assert!(text.contains("8.0"), "{text}");
    assert!(text.ends_with("Dataset of infinitely many f32"), "{text}");
    // A pass that ends before five elements shows no elision, whatever the length says.
    let short = Dataset::from_fn(Len::Unknown, || (0..3u64).map(|i| i as f32));
    assert_eq!(short.table().shown_rows(), 3);
    assert!(!short.table().text().contains('…'), "{}", short.table().text());
}

#[test]
fn a_failing_pass_shows_its_error_in_the_table() {
    let d: Dataset<f32> =
        Dataset::from_source(Len::Known(3), || Box::new(vec![Ok(1.0), Err(DataError::EmptyBatch)].into_iter()));
    let text = d.table().text();
    assert!(text.contains("error: a batch needs at least one element"), "{text}");
}

#[test]
fn stored_elements_stay_stored_through_reorderings_but_not_a_map_or_a_generator() {
    let d = Dataset::from_vec((0..10usize).collect::<Vec<_>>());
    assert!(d.is_stored() && d.shuffle(10, 3).skip(2).take(5).is_stored());
    assert!(!d.map(|i| i + 1).is_stored(), "a map's function may differ from pass to pass");
    assert!(!d.map(|i| i + 1).shuffle(10, 3).is_stored());
    assert!(!Dataset::from_fn(Len::Known(3), || 0..3usize).is_stored());
    assert!(!d.batch(4, false).unwrap().is_stored(), "batches are made, not stored");
}
