//! Candle conversions: bit-for-bit round trips that keep batches and layouts, and clear errors.

use super::*;
use candle_core::DType;
use ndarray::{array, Array1, Array2};

fn bits(v: &[Xy<Array1<f32>, i64>]) -> Vec<(Vec<u32>, i64)> {
    v.iter().map(|e| (e.x.iter().map(|f| f.to_bits()).collect(), e.y)).collect()
}

fn odd_rows() -> Vec<Xy<Array1<f32>, i64>> {
    let odd = [0.1f32, -0.0, f32::NAN, f32::INFINITY, f32::MIN_POSITIVE / 2.0, -3.5];
    (0..7).map(|i| Xy { x: Array1::from_iter(odd.iter().map(|v| v * (i as f32 + 1.0))), y: i }).collect()
}

#[test]
fn tensors_round_trip_bit_for_bit_and_keep_the_batch() {
    let rows = odd_rows();
    let batched = Dataset::from_vec(rows.clone()).batch(3, false).unwrap();
    let tensors = batched.to_candle();
    assert_eq!((tensors.len(), tensors.batch_size()), (batched.len(), Some(3)), "batched as it was");
    let shapes: Vec<(Vec<usize>, Vec<usize>, DType)> =
        tensors.collect().unwrap().iter().map(|t| (t.x.dims().to_vec(), t.y.dims().to_vec(), t.x.dtype())).collect();
    assert_eq!(
        shapes,
        [(vec![3, 6], vec![3], DType::F32), (vec![3, 6], vec![3], DType::F32), (vec![1, 6], vec![1], DType::F32)]
    );
    let back = tensors.from_candle::<Xy<Array2<f32>, Array1<i64>>>().unbatch().unwrap().collect().unwrap();
    assert_eq!(bits(&back), bits(&rows));
    // Every dtype a leaf can be, unbatched and indexed too.
    let mixed = Dataset::from_vec(vec![(array![1.5f64, -2.0], array![[1u8, 255]], 7i32, 9u32)])
        .map(|(a, b, c, d)| Xy { x: Indexed { i: c, e: a }, y: Indexed { i: d, e: b } });
    let again =
        mixed.to_candle().from_candle::<Xy<Indexed<i32, Array1<f64>>, Indexed<u32, Array2<u8>>>>().collect().unwrap();
    assert_eq!(again, mixed.collect().unwrap());
    // A view that is not in standard layout goes over in its logical order.
    let t = array![[1.0f32, 2.0], [3.0, 4.0]].reversed_axes().to_candle().unwrap();
    assert_eq!(t.to_vec2::<f32>().unwrap(), [[1.0, 3.0], [2.0, 4.0]]);
}

#[test]
fn a_tensor_of_another_dtype_or_rank_is_an_error() {
    let t = Dataset::from_vec(vec![array![1.0f32, 2.0]]).to_candle();
    let e = t.from_candle::<Array1<f64>>().collect().unwrap_err();
    assert_eq!(e.to_string(), "shapes do not fit: a tensor of dtype F32 read as f64");
    let e = t.from_candle::<Array2<f32>>().collect().unwrap_err();
    assert!(e.to_string().contains("a tensor of shape [2] read as an array of rank 2"), "{e}");
    let e = t.from_candle::<f32>().collect().unwrap_err();
    assert!(e.to_string().contains("a tensor of shape [2] read as one f32"), "{e}");
}

/// ndarray → tch → ndarray → candle → ndarray, and candle's tensors straight into tch's:
/// the same bits at every stop.
#[cfg(feature = "torch")]
#[test]
fn tch_and_candle_agree_bit_for_bit() {
    let rows = odd_rows();
    let data = Dataset::from_vec(rows.clone()).batch(4, false).unwrap();
    let through_tch = data.to_tch().from_tch::<Xy<Array2<f32>, Array1<i64>>>();
    let through_both = through_tch.to_candle().from_candle::<Xy<Array2<f32>, Array1<i64>>>();
    assert_eq!(bits(&through_both.unbatch().unwrap().collect().unwrap()), bits(&rows));
    let from_candle_to_tch = data.to_candle().from_candle::<Xy<Array2<f32>, Array1<i64>>>().to_tch();
    for (a, b) in from_candle_to_tch.collect().unwrap().iter().zip(data.to_tch().collect().unwrap()) {
        assert_eq!((a.x.size(), a.x.kind()), (b.x.size(), b.x.kind()));
        let (va, vb) =
            (Vec::<f32>::try_from(a.x.flatten(0, -1)).unwrap(), Vec::<f32>::try_from(b.x.flatten(0, -1)).unwrap());
        assert_eq!(
            va.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
            vb.iter().map(|f| f.to_bits()).collect::<Vec<_>>()
        );
    }
}
