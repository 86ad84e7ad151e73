use super::*;
use crate::models::candle::CandleClassifier;
use crate::models::linfa::DecisionTree;
use crate::models::pipe::{Pipe, Standardize};
use crate::models::testing::iris_split;
use crate::models::{Model, TrainSpec};
use serde_json::{json, Value};

fn net(training: Value) -> CandleClassifier {
    CandleClassifier::new(
        json!({"layers": [{"linear": 16}, "relu", {"linear": 3}], "optimizer": {"type": "adam", "lr": 0.02}, "training": training}),
    )
}

#[test]
fn history_hears_every_epoch_with_its_losses() {
    let (train, _) = iris_split(1);
    let mut history = History::default();
    let mut spec = TrainSpec::epochs(0);
    net(json!({"epochs": 12, "batch_size": 16, "validation_split": 0.2}))
        .train_with(&train, &mut spec, &mut [&mut history])
        .unwrap();
    assert_eq!(history.epochs.iter().map(|e| e.epoch).collect::<Vec<_>>(), (1..=12).collect::<Vec<u64>>());
    let (tl, vl) = (history.train_losses(), history.val_losses());
    assert_eq!((tl.len(), vl.len()), (12, 12), "a training loss and a validation loss every epoch");
    assert!(tl.iter().chain(&vl).all(|l| l.is_finite() && *l > 0.0), "{tl:?} {vl:?}");
    assert!(tl[11] < tl[0] / 2.0, "it learns: {tl:?}");
    let svg = history.figure().svg();
    assert!(svg.contains("train") && svg.contains("validation"), "both curves are drawn");
}

#[test]
fn a_spec_that_names_its_epochs_trains_that_many_and_zero_takes_the_definitions() {
    let (train, _) = iris_split(1);
    let mut history = History::default();
    let mut spec = TrainSpec::epochs(3);
    net(json!({"epochs": 1, "batch_size": 16})).train_with(&train, &mut spec, &mut [&mut history]).unwrap();
    assert_eq!((spec.epochs, spec.epoch, history.epochs.len()), (3, 3, 3), "the caller's 3, not the definition's 1");
    let mut spec = TrainSpec::epochs(0);
    net(json!({"epochs": 2, "batch_size": 16})).train(&train, &mut spec).unwrap();
    assert_eq!((spec.epochs, spec.epoch), (2, 2), "0: the definition's");
}

#[test]
fn a_callback_that_says_stop_ends_the_training_there_for_good() {
    let (train, _) = iris_split(1);
    let dir = std::env::temp_dir().join(format!("dryml-callbacks-{}", crate::objects::uuid_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("model.dryml");
    let mut model = net(json!({"epochs": 40, "batch_size": 16}));
    model.checkpoint_to(&file);
    let mut heard = 0;
    let mut stop_at_3 = |e: &crate::models::training::Epoch| {
        heard += 1;
        if e.epoch == 3 {
            Control::Stop
        } else {
            Control::Continue
        }
    };
    let mut spec = TrainSpec::epochs(0);
    model.train_with(&train, &mut spec, &mut [&mut stop_at_3]).unwrap();
    assert_eq!(heard, 3);
    // 100 elements in batches of 16: 7 steps an epoch.
    assert_eq!(spec, TrainSpec { epochs: 3, epoch: 3, step: 21 }, "over after 3 epochs");
    let saved = crate::load_object(&file).unwrap();
    assert_eq!(saved.downcast_ref::<CandleClassifier>().unwrap().train_spec(), spec, "the checkpoint says it is over");
    // Trained again, from the spec or from the checkpoint, nothing more happens.
    let mut history = History::default();
    model.train_with(&train, &mut spec, &mut [&mut history]).unwrap();
    assert_eq!((spec.epoch, history.epochs.len()), (3, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_one_pass_model_tells_of_its_one_epoch_and_steps_pass_callbacks_on() {
    let (train, _) = iris_split(3);
    let mut history = History::default();
    let mut spec = TrainSpec::epochs(0);
    DecisionTree::new(json!({"max_depth": 3})).train_with(&train, &mut spec, &mut [&mut history]).unwrap();
    assert_eq!(history.epochs, [crate::models::training::Epoch { epoch: 1, train_loss: None, val_loss: None }]);
    assert!(!history.figure().svg().contains("validation"), "no curve drawn without losses");

    let mut history = History::default();
    let mut piped = Pipe::new(Standardize::new(), net(json!({"epochs": 4})));
    piped.train_with(&train, &mut TrainSpec::epochs(0), &mut [&mut history]).unwrap();
    assert_eq!(history.train_losses().len(), 4, "the pipe's model told of its epochs");
}
