//! The shells every framework's network models share, as macros: a model of a network
//! definition (`defined_model!`: a classifier, or a regressor) and a model around a user's own
//! network (`own_model!`), each expanded in its framework's module with that framework's network.

/// Declares a framework's model of a network definition (`$name`, of the framework's
/// [`Network`](super::Network) `$net` learning [`Target`](super::Target)s `$y`: a classifier or a
/// regressor): the object (its arguments, a [`Trained`](super::Trained) network), `new`,
/// `train_spec`, `checkpoint_to`, its state and its [`Model`](crate::models::Model) impl, the
/// same for every framework.
macro_rules! defined_model {
    ($(#[$doc:meta])* $name:ident, $net:ty, $y:ty) => {
        $(#[$doc])*
        #[derive(crate::Object)]
        pub struct $name {
            args: serde_json::Value,
            meta: crate::objects::Meta,
            trained: crate::models::net::Trained<$net>,
        }

        impl $name {
            /// A model of these arguments (as `ObjectDef::new(..)?.build()` makes).
            pub fn new(args: serde_json::Value) -> $name {
                <$name as crate::objects::Build>::build(args, crate::objects::Meta::new())
            }

            /// Where its training stands.
            pub fn train_spec(&self) -> crate::models::TrainSpec {
                self.trained.spec
            }

            /// Where its network runs (`None` before it is built by a training or a load):
            /// the GPU its context gives its framework, else the CPU.
            pub fn placement(&self) -> Option<crate::models::placement::Placement> {
                self.trained.net.as_ref().map(crate::models::net::Network::placement)
            }

            /// Every parameter of its network by name, sorted, with its shape and values
            /// (empty before it is built): the weights, exact to the bit.
            pub fn parameters(&self) -> Result<crate::models::net::Named, crate::models::ModelError> {
                self.trained.net.as_ref().map_or(Ok(Vec::new()), crate::models::net::Network::parameters)
            }

            /// Saves it to `path` after every epoch of its training (a killed training, loaded
            /// from there, resumes at the next epoch).
            pub fn checkpoint_to(&mut self, path: impl Into<std::path::PathBuf>) {
                self.trained.checkpoint = Some(path.into());
            }
        }

        impl crate::objects::Build for $name {
            type Args = serde_json::Value;
            fn build(args: serde_json::Value, meta: crate::objects::Meta) -> Self {
                $name { args, meta, trained: Default::default() }
            }
            fn save_state(&self, s: &mut crate::objects::State) -> Result<(), crate::objects::ObjectError> {
                self.trained.save(s)
            }
            fn load_state(&mut self, s: &crate::objects::State) -> Result<(), crate::objects::ObjectError> {
                self.trained.load(&self.args, s)
            }
        }

        impl crate::models::Model for $name {
            type X = crate::data::ndarray::Array1<f32>;
            type Y = $y;
            type P = crate::data::ndarray::Array1<f32>;

            /// Trains by its `training` procedure from where its [`TrainSpec`](crate::models::TrainSpec)
            /// stands, saving itself to its checkpoint (if set) after every epoch.
            fn train(&mut self, data: &crate::data::Dataset<crate::data::Xy<Self::X, Self::Y>>, spec: &mut crate::models::TrainSpec) -> Result<(), crate::models::ModelError> {
                self.train_with(data, spec, &mut [])
            }

            /// Trains as `train` does, telling `callbacks` of every epoch (its losses).
            fn train_with(
                &mut self,
                data: &crate::data::Dataset<crate::data::Xy<Self::X, Self::Y>>,
                spec: &mut crate::models::TrainSpec,
                callbacks: &mut [&mut dyn crate::models::callbacks::Callback],
            ) -> Result<(), crate::models::ModelError> {
                crate::models::net::train(self, |c| (&c.args, &mut c.trained), data, spec, callbacks)
            }

            fn predict(&self, x: &Self::X) -> Result<Self::P, crate::models::ModelError> {
                Ok(self.predict_all(vec![x.clone()])?.remove(0))
            }

            fn predict_all(&self, xs: Vec<Self::X>) -> Result<Vec<Self::P>, crate::models::ModelError> {
                if xs.is_empty() {
                    return Ok(Vec::new());
                }
                self.predict_batch(crate::data::Element::stack(xs)?)
            }

            fn predict_batch(&self, xs: crate::data::ndarray::Array2<f32>) -> Result<Vec<Self::P>, crate::models::ModelError> {
                crate::models::net::predict(&self.trained, &xs)
            }
        }
    };
}
pub(crate) use defined_model;

/// Declares a framework's model around a network of the user's own (`$name<N, Y, X>`, for `N`
/// of the framework's trait `$trait<X>`, learning targets `Y` (classes by default) from inputs
/// `X` of the framework's `$input` (rows of `f32`s by default), its network `$net`): the object
/// (its arguments, a [`Trained`](super::Trained)
/// network), `new`, `register`, `train_spec`, `checkpoint_to`, `placement`, `parameters`,
/// and its [`Model`](crate::models::Model) impl, the same for every framework. Written by hand,
/// not derived: the derive takes no generic types, and the type is registered under the
/// network's `NAME` (with its target type where that is not a class) when a model is made.
#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
macro_rules! own_model {
    ($(#[$doc:meta])* $name:ident, $trait:ident, $input:ident, $net:ty) => {
        $(#[$doc])*
        pub struct $name<N: $trait<X>, Y: crate::models::net::Target = usize, X: $input = crate::data::ndarray::Array1<f32>> {
            args: serde_json::Value,
            meta: crate::objects::Meta,
            trained: crate::models::net::Trained<$net>,
        }

        impl<N: $trait<X>, Y: crate::models::net::Target, X: $input> $name<N, Y, X> {
            /// A model of these arguments (the type is registered for loading by name).
            pub fn new(args: serde_json::Value) -> $name<N, Y, X> {
                Self::register();
                <$name<N, Y, X> as crate::objects::Build>::build(args, crate::objects::Meta::new())
            }

            /// Registers the type under its network's `NAME` (`NAME<f32>` where it learns values,
            /// see [`own_name`](crate::models::net::own_name)), so `load_object`, `%repo load`
            /// and `ObjectDef::build` can make it (done by `new`).
            pub fn register() {
                crate::objects::register::<$name<N, Y, X>>(Self::saved_name());
            }

            /// The name it is saved and registered under.
            fn saved_name() -> &'static str {
                crate::models::net::own_name::<Y>(N::NAME)
            }

            /// Where its training stands.
            pub fn train_spec(&self) -> crate::models::TrainSpec {
                self.trained.spec
            }

            /// Saves it to `path` after every epoch of its training.
            pub fn checkpoint_to(&mut self, path: impl Into<std::path::PathBuf>) {
                self.trained.checkpoint = Some(path.into());
            }

            /// Where its network runs (`None` before it is built by a training or a load).
            pub fn placement(&self) -> Option<crate::models::placement::Placement> {
                self.trained.net.as_ref().map(crate::models::net::Network::placement)
            }

            /// Every parameter of its network by name, sorted, with its shape and values.
            pub fn parameters(&self) -> Result<crate::models::net::Named, crate::models::ModelError> {
                self.trained.net.as_ref().map_or(Ok(Vec::new()), crate::models::net::Network::parameters)
            }
        }

        impl<N: $trait<X>, Y: crate::models::net::Target, X: $input> crate::objects::Build for $name<N, Y, X> {
            type Args = serde_json::Value;
            fn build(args: serde_json::Value, meta: crate::objects::Meta) -> Self {
                $name { args, meta, trained: Default::default() }
            }
            fn save_state(&self, s: &mut crate::objects::State) -> Result<(), crate::objects::ObjectError> {
                self.trained.save(s)
            }
            fn load_state(&mut self, s: &crate::objects::State) -> Result<(), crate::objects::ObjectError> {
                self.trained.load(&self.args, s)
            }
        }

        impl<N: $trait<X>, Y: crate::models::net::Target, X: $input> crate::objects::Object for $name<N, Y, X> {
            fn type_name(&self) -> &'static str {
                Self::saved_name()
            }
            fn definition(&self) -> crate::objects::ObjectDef {
                crate::objects::ObjectDef::new(Self::saved_name(), &self.args).expect("a JSON value serializes")
            }
            fn meta(&self) -> &crate::objects::Meta {
                &self.meta
            }
            fn meta_mut(&mut self) -> &mut crate::objects::Meta {
                &mut self.meta
            }
            fn save_state(&self, s: &mut crate::objects::State) -> Result<(), crate::objects::ObjectError> {
                crate::objects::Build::save_state(self, s)
            }
            fn load_state(&mut self, s: &crate::objects::State) -> Result<(), crate::objects::ObjectError> {
                crate::objects::Build::load_state(self, s)
            }
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }
            fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
                self
            }
            fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
                self
            }
        }

        impl<N: $trait<X>, Y: crate::models::net::Target, X: $input> crate::models::Model for $name<N, Y, X> {
            type X = X;
            type Y = Y;
            type P = crate::data::ndarray::Array1<f32>;

            fn train(&mut self, data: &crate::data::Dataset<crate::data::Xy<X, Y>>, spec: &mut crate::models::TrainSpec) -> Result<(), crate::models::ModelError> {
                self.train_with(data, spec, &mut [])
            }

            fn train_with(&mut self, data: &crate::data::Dataset<crate::data::Xy<X, Y>>, spec: &mut crate::models::TrainSpec, callbacks: &mut [&mut dyn crate::models::callbacks::Callback]) -> Result<(), crate::models::ModelError> {
                crate::models::net::train(self, |m| (&m.args, &mut m.trained), data, spec, callbacks)
            }

            fn predict(&self, x: &X) -> Result<crate::data::ndarray::Array1<f32>, crate::models::ModelError> {
                Ok(crate::models::Model::predict_batch(self, <X as crate::data::Element>::stack(vec![x.clone()])?)?.remove(0))
            }

            fn predict_batch(&self, xs: <X as crate::data::Element>::Batch) -> Result<Vec<crate::data::ndarray::Array1<f32>>, crate::models::ModelError> {
                crate::models::net::predict(&self.trained, &xs)
            }
        }
    };
}
#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
pub(crate) use own_model;

/// Declares a framework's face (`$f`, `$word` in docs), the same for every framework: the
/// input its own networks take (`$input`: what `$to` makes tensors of, `$onto` moves), the
/// tensors a batch becomes (`Tensors<X>`), the classifier and regressor of a definition, and the
/// model around a user's own network (`$own`, of the framework's trait `$net`).
#[cfg(any(feature = "torch", feature = "candle"))]
macro_rules! framework_models {
    ($f:ident, $word:literal, $input:ident, $to:ident :: $to_fn:ident, $onto:ident,
     $classifier:ident, $regressor:ident, $own:ident, $net:ident) => {
        #[doc = concat!($word, ", as the shared network ([`super::seam`]) uses it.")]
        pub(crate) struct $f;

        /// A network in this framework.
        type Net<B, Y = usize> = super::seam::Net<$f, B, Y>;

        #[doc = concat!("What a network of your own takes per element, in ", $word, ": any [`Input`](super::net::Input)")]
        /// (rows, images, a pair, a triple or a map of them), its batches made tensors on the
        /// network's device.
        pub trait $input: super::net::Input<Batch: $to<Tensors: $onto + 'static>> {}
        impl<X: super::net::Input<Batch: $to<Tensors: $onto + 'static>>> $input for X {}

        impl<X: $input> super::seam::Feeds<$f> for X {
            type Tensors = Tensors<X>;
            fn feed(batch: &X::Batch) -> Result<Tensors<X>, crate::data::DataError> {
                batch.$to_fn()
            }
        }

        /// The tensors a batch of `X` becomes: a tensor, or a tuple or map of them.
        pub type Tensors<X> = <<X as crate::data::Element>::Batch as $to>::Tensors;

        super::net::defined_model!(
            #[doc = concat!("A classifier of rows of `f32` features: a sequential network in ", $word, ".")]
            /// Its arguments are a [`NetDef`](super::net::NetDef) (`layers`, `optimizer`, `loss`,
            /// `seed`, `precision`; the inputs are the data's) and `training`,
            /// [`Training`](super::training::Training)'s settings. Each is reachable by selectors
            /// and sweeps: `optimizer.lr=0.01`, `layers=[...]`.
            $classifier,
            Net<super::seam::layers::Layers<$f>>,
            usize
        );

        super::net::defined_model!(
            #[doc = concat!("A regression of rows of `f32` features to a value (`f32` targets) in ", $word, ":")]
            /// the classifier's network and arguments, its last layer `{"linear": 1}`, its loss
            /// MSE unless `loss` says otherwise. It predicts the network's outputs.
            $regressor,
            Net<super::seam::layers::Layers<$f>, f32>,
            f32
        );

        super::net::own_model!(
            #[doc = concat!("A model around a network of your own ([`", stringify!($net), "`]): a classifier, or a")]
            /// regression with `Y` values (`f32`, `Array1<f32>`). It has everything a definition's
            /// classifier has: the shared training by its `training` argument, the optimiser,
            /// loss and seed of its `optimizer`, `loss` and `seed`, checkpoints and a resume to
            /// the bit, the context's device, [`eval`](super::eval), the repo, sweeps,
            /// `%%compute` and Slurm. The network's own arguments sit beside those, so selectors
            /// and sweeps reach them. Saved under its network's `NAME`; a process that has made
            /// none registers the type with `register` before loading one by name.
            $own,
            $net,
            $input,
            Net<super::seam::Own<N, X>, Y>
        );

        impl<N: $net<X>, Y: super::net::Target, X: $input> $own<N, Y, X> {
            /// The network, once built.
            pub fn net(&self) -> Option<&N> {
                self.trained.net.as_ref().map(|n| &n.body.0)
            }
        }
    };
}
#[cfg(any(feature = "torch", feature = "candle"))]
pub(crate) use framework_models;
