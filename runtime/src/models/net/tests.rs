//! Tests of `net`: definitions, their shapes and dropout's masks.

use super::*;
use serde_json::json;

fn shapes(layers: Value, inputs: usize) -> Result<Vec<Shape>, String> {
    NetDef::from_args(&json!({ "layers": layers }), "M").and_then(|d| d.shapes(inputs, "M")).map_err(|e| e.to_string())
}

#[test]
fn a_cnn_definition_gives_each_layer_its_shape() {
    let cnn = json!([{"reshape": [1, 8, 8]}, {"conv2d": {"channels": 8, "kernel": 3, "padding": 1}}, "batch_norm", "relu",
                     {"max_pool": 2}, {"conv2d": {"channels": 16, "kernel": 3, "stride": 2}}, {"avg_pool": 1}, "flatten",
                     {"dropout": 0.25}, {"linear": 10}]);
    let got = shapes(cnn, 64).unwrap();
    use Shape::{Flat, Image};
    assert_eq!(
        got,
        vec![
            Flat(64),
            Image([1, 8, 8]),
            Image([8, 8, 8]),
            Image([8, 8, 8]),
            Image([8, 8, 8]),
            Image([8, 4, 4]),
            Image([16, 1, 1]),
            Image([16, 1, 1]),
            Flat(16),
            Flat(16),
            Flat(10)
        ]
    );
}

#[test]
fn a_layer_that_cannot_take_what_it_gets_is_named() {
    let cases = [
        (
            json!([{"reshape": [1, 8, 8]}, {"linear": 10}]),
            64,
            "M: layer 1 ({\"linear\":10}) takes flat features, and gets images of 1×8×8: add \"flatten\" before it",
        ),
        (
            json!([{"conv2d": {"channels": 4, "kernel": 3}}, {"linear": 2}]),
            64,
            "takes images, and gets 64 features: add {\"reshape\": [channels, height, width]} before it",
        ),
        (
            json!([{"reshape": [1, 8, 7]}, "flatten", {"linear": 2}]),
            64,
            "makes images of [1, 8, 7] (56 values) from 64 features",
        ),
        (
            json!([{"reshape": [1, 2, 2]}, {"conv2d": {"channels": 1, "kernel": 5}}, "flatten", {"linear": 2}]),
            4,
            "has a kernel of 5 for images of 1×2×2 padded by 0",
        ),
        (
            json!([{"reshape": [1, 2, 2]}, {"max_pool": 3}, "flatten", {"linear": 2}]),
            4,
            "pools windows of 3 over images of 1×2×2",
        ),
    ];
    for (layers, inputs, want) in cases {
        let e = shapes(layers.clone(), inputs).unwrap_err();
        assert!(e.contains(want), "{layers}: {e}");
    }
    let parse = [
        (
            json!([{"conv2d": {"channels": 4}}, {"linear": 2}]),
            "layer 0 ({\"conv2d\":{\"channels\":4}}): conv2d needs `kernel`",
        ),
        (json!([{"conv2d": {"channels": 4, "kernel": 3, "dilation": 2}}, {"linear": 2}]), "conv2d has no `dilation`"),
        (json!([{"dropout": 1.5}, {"linear": 2}]), "the dropout probability must be a number from 0 up to 1, not 1.5"),
        (json!([{"reshape": [1, 8]}, {"linear": 2}]), "reshape takes [channels, height, width]"),
        (json!([{"max_pool": 0}, {"linear": 2}]), "its window must be a positive integer, not 0"),
    ];
    for (layers, want) in parse {
        let e = shapes(layers.clone(), 64).unwrap_err();
        assert!(e.contains(want), "{layers}: {e}");
    }
}

#[test]
fn dropout_masks_are_a_function_of_seed_layer_and_step() {
    let m = dropout_mask(7, 2, 10, 10_000, 0.25);
    assert_eq!(m, dropout_mask(7, 2, 10, 10_000, 0.25));
    assert_ne!(m, dropout_mask(7, 2, 11, 10_000, 0.25));
    assert_ne!(m, dropout_mask(7, 3, 10, 10_000, 0.25));
    let dropped = m.iter().filter(|&&v| v == 0.0).count();
    assert!((2_300..2_700).contains(&dropped), "{dropped} of 10000 dropped at p = 0.25");
    assert!(m.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
}
