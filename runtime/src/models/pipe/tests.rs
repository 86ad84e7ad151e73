//! Pipes on real data: a standardising step before a network, classes after it.

use super::*;
use crate::metrics::categorical_accuracy;
use crate::models::tch::TchClassifier;
use serde_json::json;

fn net() -> TchClassifier {
    TchClassifier::new(
        json!({"layers": [{"linear": 32}, "relu", {"linear": 9}], "optimizer": {"type": "adam", "lr": 0.01}, "training": {"epochs": 15, "batch_size": 32}}),
    )
}

#[test]
fn a_standardising_step_is_learnt_and_the_classes_follow() {
    // Wine quality's raw features span 0.01 to 289: standardised, a network learns them.
    let data = crate::models::linfa::winequality().shuffle(1599, 2);
    let (train, test) = (data.take(1200), data.skip(1200));
    let mut piped = Then::new(Pipe::new(Standardize::new(), net()), ArgMax::new());
    let mut spec = TrainSpec::epochs(0);
    piped.train(&train, &mut spec).unwrap();
    assert_eq!(spec.epoch, 15, "the network's own cursor");
    let (mean, std) = piped.model.transform.fitted().unwrap().clone();
    let raw = train.map(|e| e.x).collect().unwrap();
    let by_hand = raw.iter().fold(Array1::<f32>::zeros(11), |s, x| s + x) / raw.len() as f32;
    assert!((&mean - &by_hand).iter().all(|d| d.abs() < 1e-3), "the mean of the training features");
    let standardised: Vec<Array1<f32>> = raw.iter().map(|x| (x - &mean) / &std).collect();
    let var0 = standardised.iter().map(|x| x[0] * x[0]).sum::<f32>() / raw.len() as f32;
    assert!((var0 - 1.0).abs() < 1e-3, "unit variance: {var0}");
    // Classes out, scored as any model's; the same as the arg-max of the scores.
    let classes = eval(&piped, &test).unwrap();
    let acc = categorical_accuracy(&classes).unwrap();
    let scores = eval(&piped.model, &test).unwrap();
    assert_eq!(acc, categorical_accuracy(&scores).unwrap());
    assert!(acc >= 0.5, "accuracy {acc} on 399 held-out wines, floor 0.5 (a third are of one class)");
    // The fitted step travels as an object; reloaded, it standardises the same.
    let back =
        crate::objects::object::from_bytes(&crate::objects::object::to_bytes(&piped.model.transform).unwrap(), None)
            .unwrap();
    let back = back.downcast_ref::<Standardize>().unwrap();
    assert_eq!(back.apply(&raw[0]).unwrap(), piped.model.transform.apply(&raw[0]).unwrap());
}

#[test]
fn steps_fail_clearly() {
    assert_eq!(Standardize::new().apply(&Array1::zeros(2)).unwrap_err(), ModelError::NotTrained("Standardize"));
    let mut s = Standardize::new();
    s.fit(&Dataset::from_vec(vec![Array1::from_vec(vec![1.0f32, 2.0])])).unwrap();
    assert_eq!(
        s.apply(&Array1::zeros(3)).unwrap_err().to_string(),
        "Standardize: an element of 3 features; it was fitted on 2"
    );
    assert_eq!(
        s.apply(&Array1::from_vec(vec![1.0, 2.0])).unwrap().to_vec(),
        [0.0, 0.0],
        "a constant feature is only centred"
    );
    assert_eq!(ArgMax::new().apply(&Array1::zeros(0)).unwrap_err().to_string(), "ArgMax: scores of no classes");
    let e = Standardize::new().fit(&Dataset::from_vec(Vec::<Array1<f32>>::new())).unwrap_err();
    assert!(e.to_string().contains("no elements") || e.to_string().contains("at least one element"), "{e}");
}
