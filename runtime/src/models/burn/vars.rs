//! A burn network's variables: its layers' modules, shared between the network's body (which
//! runs them) and dryml's optimiser (which steps them), each under its layer's name; read and
//! written by name, and stepped by [`super::super::optim`]'s arithmetic on burn's tensors.

use crate::data::BurnError;
use crate::models::net::Optimizer as Opt;
use crate::models::optim::{Named, Saved, Settings};
use crate::models::seam::{fail, Optimiser};
use crate::models::ModelError;
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::{Gradients, Tensor, TensorData};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A module the network's body and its optimiser share.
pub(crate) type Shared<M> = Arc<Mutex<M>>;

/// A shared module as the variables hold it, whatever its type: a layer's, or a network of the
/// user's own.
pub(crate) type Slot = Arc<dyn Held>;

/// A module behind its lock, read, written and stepped by dryml's visitor and mappers (burn's
/// `visit` and `map` are generic over them, so each has its method here).
pub(crate) trait Held: Send + Sync {
    fn read(&self, r: &mut Reader);
    fn write(&self, w: &mut Writer);
    fn step(&self, s: &mut Stepper<'_>);
}

impl<M: Module> Held for Mutex<M> {
    fn read(&self, r: &mut Reader) {
        lock(self).visit(r);
    }
    fn write(&self, w: &mut Writer) {
        map(self, w);
    }
    fn step(&self, s: &mut Stepper<'_>) {
        map(self, s);
    }
}

/// The module mapped in place (burn's `map` takes it by value; a clone shares its tensors).
fn map<M: Module>(m: &Mutex<M>, mapper: &mut impl ModuleMapper) {
    let mut g = lock(m);
    *g = g.clone().map(mapper);
}

/// The modules by name (`layer0`, ...; empty for a network of the user's own, whose parameters
/// its fields name), in the layers' order.
#[derive(Default, Clone)]
pub(crate) struct BurnVars(pub(crate) Vec<(String, Slot)>);

/// The module behind a share (a panic elsewhere leaves its values as they were).
pub(crate) fn lock<M>(m: &Mutex<M>) -> MutexGuard<'_, M> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A visitor or mapper's place in a module: its slot's name, then the fields it entered.
#[derive(Default)]
pub(crate) struct Path(Vec<String>);

impl Path {
    fn at(slot: &str) -> Path {
        Path(if slot.is_empty() { Vec::new() } else { vec![slot.to_string()] })
    }
    fn name(&self) -> String {
        self.0.join(".")
    }
}

/// A tensor's values as `f32`s.
pub(super) fn values<const D: usize>(t: Tensor<D>) -> Result<Vec<f32>, BurnError> {
    t.into_data().try_to_vec_as::<f32>().map_err(|e| BurnError(format!("{e:?}")))
}

/// Reads every float parameter's name, shape and values (the first it cannot read, its error).
pub(crate) struct Reader(Path, Named, Option<BurnError>);

impl ModuleVisitor for Reader {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.0 .0.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.0 .0.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let t = param.val();
        match values(t.clone()) {
            Ok(v) => self.1.push((self.0.name(), t.dims().to_vec(), v)),
            Err(e) => {
                self.2.get_or_insert(BurnError(format!("reading {}: {e}", self.0.name())));
            }
        }
    }
}

/// Puts values back by name (a parameter it has none for stays as it is), keeping each one's
/// device and whether it learns.
pub(crate) struct Writer(Path, HashMap<String, Vec<f32>>);

impl ModuleMapper for Writer {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.0 .0.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.0 .0.pop();
    }
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(values) = self.1.remove(&self.0.name()) else { return param };
        let (id, t, mapper) = param.consume();
        let learns = t.is_require_grad();
        let mut new = Tensor::<D>::from_data(TensorData::new(values, t.shape()), &t.device());
        if learns {
            new = new.require_grad();
        }
        Param::from_mapped_value(id, new, mapper)
    }
}

/// One optimiser step over every parameter the loss reached.
pub(crate) struct Stepper<'a> {
    path: Path,
    grads: &'a mut Gradients,
    opt: &'a mut Optim,
}

impl ModuleMapper for Stepper<'_> {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.0.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.0.pop();
    }
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, t, mapper) = param.consume();
        let Some(g) = t.grad_remove(self.grads) else { return Param::from_mapped_value(id, t, mapper) };
        let w = self.opt.update(&self.path.name(), t.inner(), g);
        Param::from_mapped_value(id, Tensor::from_inner(w).require_grad(), mapper)
    }
}

impl BurnVars {
    /// Every float parameter by name, sorted, with its shape and values.
    pub(crate) fn named(&self) -> Result<Named, BurnError> {
        let mut out = Vec::new();
        for (name, slot) in &self.0 {
            let mut r = Reader(Path::at(name), Vec::new(), None);
            slot.read(&mut r);
            if let Some(e) = r.2 {
                return Err(e);
            }
            out.extend(r.1);
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Puts values back by name.
    pub(crate) fn set(&self, values: HashMap<String, Vec<f32>>) {
        let mut w = Writer(Path::default(), values);
        for (name, slot) in &self.0 {
            w.0 = Path::at(name);
            slot.write(&mut w);
        }
    }

    /// Adds `slot` under `name`, its parameters given `values` by name (the slots before it are
    /// left alone).
    pub(crate) fn add(&mut self, name: String, slot: Slot, values: HashMap<String, Vec<f32>>) {
        slot.write(&mut Writer(Path::at(&name), values));
        self.0.push((name, slot));
    }
}

/// The optimiser ([`optim`]'s update over burn's tensors): each parameter's moments by name,
/// made at its first step.
pub(crate) struct Optim {
    who: &'static str,
    settings: Settings,
    step: u64,
    vars: BurnVars,
    first: HashMap<String, Tensor<1>>,
    second: HashMap<String, Tensor<1>>,
}

impl Optim {
    /// The gradients of `loss`, then the update of every parameter it reached.
    pub(crate) fn backward_step(&mut self, loss: &Tensor<1>) {
        let mut grads = loss.backward();
        self.step += 1;
        let vars = self.vars.clone();
        let mut s = Stepper { path: Path::default(), grads: &mut grads, opt: self };
        for (name, slot) in &vars.0 {
            s.path = Path::at(name);
            slot.step(&mut s);
        }
    }

    /// `w` after one step with gradient `g` (PyTorch's update), its moments kept by `name`.
    fn update<const D: usize>(&mut self, name: &str, w: Tensor<D>, g: Tensor<D>) -> Tensor<D> {
        let s = self.settings;
        let shape = w.shape();
        let n = shape.num_elements();
        let mut g = g;
        if s.weight_decay > 0.0 && s.kind != Opt::AdamW {
            g = g + w.clone().mul_scalar(s.weight_decay as f32);
        }
        let zeros = || Tensor::<1>::zeros([n], &w.device());
        let update = match s.kind {
            Opt::Sgd if s.momentum > 0.0 => {
                let m = self.first.remove(name).unwrap_or_else(zeros).reshape(shape.clone());
                let m = m.mul_scalar(s.momentum as f32) + g;
                self.first.insert(name.to_string(), m.clone().reshape([n]));
                m.mul_scalar(s.lr as f32)
            }
            Opt::Sgd => g.mul_scalar(s.lr as f32),
            Opt::Adam | Opt::AdamW => {
                let (c1, c2) = s.bias_corrections(self.step);
                let m = self.first.remove(name).unwrap_or_else(zeros).reshape(shape.clone());
                let v = self.second.remove(name).unwrap_or_else(zeros).reshape(shape.clone());
                let m = m.mul_scalar(s.beta1 as f32) + g.clone().mul_scalar((1.0 - s.beta1) as f32);
                let v = v.mul_scalar(s.beta2 as f32) + g.powi_scalar(2).mul_scalar((1.0 - s.beta2) as f32);
                self.first.insert(name.to_string(), m.clone().reshape([n]));
                self.second.insert(name.to_string(), v.clone().reshape([n]));
                let denom = v.sqrt().mul_scalar((1.0 / c2.sqrt()) as f32).add_scalar(s.eps as f32);
                (m / denom).mul_scalar((s.lr / c1) as f32)
            }
        };
        let w = if s.kind == Opt::AdamW { w.mul_scalar((1.0 - s.lr * s.weight_decay) as f32) } else { w };
        w - update
    }

    /// The moments `of` each parameter, shaped as the parameter (`shapes`).
    fn moments(&self, of: &HashMap<String, Tensor<1>>, shapes: &Named) -> Result<Named, ModelError> {
        let mut out = Vec::with_capacity(of.len());
        for (name, t) in of {
            let dims = shapes.iter().find(|p| &p.0 == name).map_or_else(|| t.dims().to_vec(), |p| p.1.clone());
            out.push((name.clone(), dims, values(t.clone()).map_err(fail(self.who, "reading a moment"))?));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Every parameter, as the optimiser's errors name it.
    fn named(&self) -> Result<Named, ModelError> {
        self.vars.named().map_err(fail(self.who, "reading the weights"))
    }
}

impl Optimiser<super::Burn> for Optim {
    fn new(vars: &BurnVars, settings: Settings, who: &'static str) -> Result<Optim, ModelError> {
        let (first, second) = (HashMap::new(), HashMap::new());
        Ok(Optim { who, settings, step: 0, vars: vars.clone(), first, second })
    }

    fn steps(&self) -> u64 {
        self.step
    }

    fn parameters(&self) -> Result<Named, ModelError> {
        self.named()
    }

    fn save(&self) -> Result<Vec<u8>, ModelError> {
        let shapes = self.named()?;
        Saved {
            step: self.step,
            first: self.moments(&self.first, &shapes)?,
            second: self.moments(&self.second, &shapes)?,
        }
        .to_bytes(self.who)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        let shapes: Vec<(String, Vec<usize>)> = self.named()?.into_iter().map(|(n, d, _)| (n, d)).collect();
        let saved = Saved::from_bytes(bytes, self.who, &shapes)?;
        let device = super::cpu();
        let tensors = |m: &Named| -> HashMap<String, Tensor<1>> {
            m.iter()
                .map(|(name, _, v)| {
                    (name.clone(), Tensor::<1>::from_data(TensorData::new(v.clone(), [v.len()]), &device))
                })
                .collect()
        };
        self.first = tensors(&saved.first);
        self.second = tensors(&saved.second);
        self.step = saved.step;
        Ok(())
    }
}
