use super::*;
use crate::data::ndarray::{array, Array1};

fn scored() -> Dataset<Xy<Array1<f32>, i64>> {
    // Predicted classes 1, 0, 2, 1, 1 against 1, 0, 0, 2, 1.
    Dataset::from_vec(vec![
        Xy { x: array![0.1, 0.7, 0.2], y: 1 },
        Xy { x: array![0.9, 0.05, 0.05], y: 0 },
        Xy { x: array![0.3, 0.3, 0.4], y: 0 },
        Xy { x: array![0.2, 0.5, 0.3], y: 2 },
        Xy { x: array![0.0, 1.0, 0.0], y: 1 },
    ])
}

#[test]
fn accuracy_and_confusion_against_hand_counts() {
    for batch in [None, Some(1), Some(2), Some(5)] {
        let acc = match batch {
            None => categorical_accuracy(&scored()).unwrap(),
            Some(b) => categorical_accuracy(&scored().batch(b, false).unwrap()).unwrap(),
        };
        assert_eq!(acc, 3.0 / 5.0, "batches of {batch:?}");
    }
    let m = confusion_matrix(&scored().batch(2, false).unwrap(), 3).unwrap();
    assert_eq!(m, array![[1, 0, 1], [0, 2, 0], [0, 1, 0]]);
    assert!(confusion_matrix(&scored(), 2).unwrap_err().to_string().contains("class 2 is not below 2"));
}

#[test]
fn mse_against_hand_values() {
    let data = Dataset::from_vec(vec![Xy { x: 1.0f64, y: 2.0f64 }, Xy { x: 3.0, y: 3.0 }, Xy { x: -1.0, y: 1.0 }]);
    // (1 + 0 + 4) / 3
    assert_eq!(mean_squared_error(&data).unwrap(), 5.0 / 3.0);
    assert_eq!(mean_squared_error(&data.batch(2, false).unwrap()).unwrap(), 5.0 / 3.0);
    let wide = Dataset::from_vec(vec![Xy { x: array![1.0f32, 2.0], y: array![1.0f32, 0.0] }]);
    assert_eq!(mean_squared_error(&wide).unwrap(), 2.0);
}

#[test]
fn f1_is_counted_over_elements_not_averaged_over_batches() {
    // tp 2, fp 1, fn 1: F1 = 4 / 6. Per-batch F1s of [1,1],[0,?]... would average to another number.
    let data = Dataset::from_vec(vec![(1u8, 1u8), (1, 1), (1, 0), (0, 1), (0, 0)]).map(|(x, y)| Xy { x, y });
    assert_eq!(binary_f1_score(&data).unwrap(), 4.0 / 6.0);
    for b in 1..=5 {
        assert_eq!(binary_f1_score(&data.batch(b, false).unwrap()).unwrap(), 4.0 / 6.0, "batches of {b}");
    }
    let none = Dataset::from_vec(vec![Xy { x: 0u8, y: 0u8 }]);
    assert_eq!(binary_f1_score(&none).unwrap(), 0.0);
    let three = Dataset::from_vec(vec![Xy { x: 2u8, y: 0u8 }]);
    assert_eq!(binary_f1_score(&three).unwrap_err().to_string(), "binary_f1_score: class 2 is not 0 or 1");
}

#[test]
fn mismatched_and_empty_inputs_are_errors() {
    let bad = Dataset::from_vec(vec![Xy { x: array![1usize, 0], y: 1usize }]);
    assert_eq!(
        categorical_accuracy(&bad).unwrap_err().to_string(),
        "shapes do not fit: categorical_accuracy: element 0 has 2 predictions for 1 targets"
    );
    let empty: Dataset<Xy<f64, f64>> = Dataset::from_vec(vec![]);
    assert_eq!(mean_squared_error(&empty).unwrap_err().to_string(), "mean_squared_error: the dataset is empty");
}
