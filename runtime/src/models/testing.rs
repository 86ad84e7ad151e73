//! What the models' tests share: iris split once, and the check every framework's model
//! passes (trained from its definition, above a floor on held-out data, the same reloaded).

use super::{eval, Model, TrainSpec};
use crate::data::ndarray::Array1;
use crate::data::{Dataset, Xy};
use crate::metrics::{categorical_accuracy, Classes};
use crate::objects::object::{from_bytes, to_bytes};
use crate::Object;
use serde_json::Value;

/// Fisher's iris, rows shuffled by `seed`: 100 to train on, 50 held out.
pub fn iris_split(seed: u64) -> (Dataset<Xy<Array1<f32>, usize>>, Dataset<Xy<Array1<f32>, usize>>) {
    let data = super::linfa::iris().shuffle(150, seed);
    (data.take(100), data.skip(100))
}

/// Builds the model `name` from `args` as a definition would, trains it on iris's 100 rows
/// (split by `seed`) and checks its accuracy on the 50 held out against `floor`, and that a
/// copy saved and loaded predicts the same, bit for bit. Gives the trained object, the loaded
/// copy and where the training ended.
pub fn floor_and_reload<M>(name: &str, args: &Value, seed: u64, floor: f64) -> (Box<dyn Object>, Box<dyn Object>, TrainSpec)
where
    M: Model<X = Array1<f32>, Y = usize> + Object,
    M::P: Classes + PartialEq + std::fmt::Debug + Sync,
{
    let (train, test) = iris_split(seed);
    let mut obj = crate::ObjectDef::new(name, args).unwrap().build().unwrap();
    let model = obj.downcast_mut::<M>().unwrap();
    let mut spec = TrainSpec::epochs(0);
    model.train(&train, &mut spec).unwrap();
    let scored = eval(&*model, &test).unwrap();
    let acc = categorical_accuracy(&scored).unwrap();
    assert!(acc >= floor, "{name}: accuracy {acc} on 50 held-out flowers, floor {floor}");
    let back = from_bytes(&to_bytes(&*obj).unwrap(), None).unwrap();
    let again = eval(back.downcast_ref::<M>().unwrap(), &test).unwrap();
    assert_eq!(again.collect().unwrap(), scored.collect().unwrap(), "{name} reloaded: the same predictions, bit for bit");
    (obj, back, spec)
}
