//! DRYML's `Object` and `ObjectDef` for Rust: objects that know how they were built, save to one
//! versioned file each, and load from that file alone, without the type at the call site.
//!
//! A type opts in with [`Build`] (its constructor arguments and how to build from them) and one
//! line, `#[derive(dryml::Object)]`, which implements [`Object`] and registers the type's name
//! with a constructor when the code is loaded (an `.init_array` entry). The registration runs
//! in every evcxr cell library that holds the type, so `load_object` works in any later cell. Loading never runs code from the file: the file names a registered type and
//! carries data (JSON arguments, binary state sections), nothing else.

mod file;

pub use file::{
    from_bytes, from_record, load_object, load_object_as, read_definition, record, save_object, to_bytes, to_bytes_as,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The container format this build writes; it reads this version and older.
pub const FILE_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"DRYMLOBJ";
/// Magic, version, body length, CRC-32 of the body.
const HEADER_LEN: usize = 8 + 4 + 8 + 4;

/// Who an object is: its id (a UUID unless given), when it was made, and a description.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// Unique among objects: a UUID unless given.
    pub id: String,
    /// Seconds since the Unix epoch.
    pub created: f64,
    /// Free text.
    pub description: String,
    /// What training returned (a sweep's metrics), kept with the object and in a repo's index.
    pub metrics: Option<Value>,
    /// How it was made: recorded by [`crate::Repo::add`] when the object has none yet (a
    /// training clears it, so a model trained again and stored records its new run).
    pub provenance: Option<super::Provenance>,
}

impl Meta {
    /// A fresh identity: a random (version 4) UUID and the time now.
    pub fn new() -> Meta {
        Meta { id: uuid_v4(), created: now(), description: String::new(), metrics: None, provenance: None }
    }
    /// An identity with this id.
    pub fn with_id(id: impl Into<String>) -> Meta {
        Meta { id: id.into(), ..Meta::new() }
    }
}

impl Default for Meta {
    fn default() -> Self {
        Meta::new()
    }
}

/// Seconds since the Unix epoch (0 before it).
pub(crate) fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A random UUID (version 4) from the kernel's random source.
pub fn uuid_v4() -> String {
    let mut b = [0u8; 16];
    if unsafe { libc::getrandom(b.as_mut_ptr().cast(), 16, 0) } != 16 {
        // getrandom cannot fail for 16 bytes once the pool is ready; fall back to time and pid.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        b[..8].copy_from_slice(&(t.as_nanos() as u64).to_le_bytes());
        b[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// How to make an object: a registered type name and the constructor arguments as JSON.
/// Arguments that serialize to a JSON array are DRYML's positional `args`; to an object, its
/// named `kwargs`; anything else is one positional argument.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectDef {
    /// The registered type name.
    pub type_name: String,
    /// The constructor arguments as JSON.
    pub args: Value,
}

impl ObjectDef {
    /// The definition of `type_name` built from `args`.
    pub fn new<A: Serialize>(type_name: &str, args: &A) -> Result<ObjectDef, ObjectError> {
        let args = serde_json::to_value(args).map_err(|e| ObjectError::Args(type_name.to_string(), e.to_string()))?;
        Ok(ObjectDef { type_name: type_name.to_string(), args })
    }

    /// A fresh object from these arguments, with a new id: "train ten copies of this network".
    pub fn build(&self) -> Result<Box<dyn Object>, ObjectError> {
        build(self, Meta::new())
    }

    /// Builds it as a `T`, without the registry: for types registered only where one was made
    /// (a generic model of a notebook's network, as `TchModel<Cnn>`). An error says when the
    /// definition is of another type.
    pub fn build_as<T: Build + Object>(&self) -> Result<T, ObjectError> {
        build_as(self, Meta::new())
    }

    /// The positional arguments (empty when the arguments are named).
    pub fn positional(&self) -> Vec<&Value> {
        match &self.args {
            Value::Array(a) => a.iter().collect(),
            Value::Object(_) => Vec::new(),
            v => vec![v],
        }
    }

    /// The named arguments, when the arguments are a JSON object.
    pub fn named(&self) -> Option<&serde_json::Map<String, Value>> {
        self.args.as_object()
    }
}

/// DRYML's call spelling: `Data([1, 2])` for positional arguments, `Mlp(lr=0.1, ...)` for named.
impl fmt::Display for ObjectDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner: Vec<String> = match &self.args {
            Value::Array(a) => a.iter().map(Value::to_string).collect(),
            Value::Object(m) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            Value::Null => Vec::new(),
            v => vec![v.to_string()],
        };
        write!(f, "{}({})", self.type_name, inner.join(", "))
    }
}

/// What a type provides to become an [`Object`]; `#[derive(dryml::Object)]` does the rest,
/// reading the arguments and the identity from the fields `args: Self::Args` and `meta: Meta`
/// (or those marked `#[dryml(args)]` and `#[dryml(meta)]`).
pub trait Build: Sized + 'static {
    /// The constructor arguments, saved in the definition.
    type Args: Serialize + DeserializeOwned;
    /// Makes the object; `meta` is its identity, to be kept in its `meta` field.
    fn build(args: Self::Args, meta: Meta) -> Self;
    /// DRYML's `save_object_imp`: state beyond the arguments (weights, optimiser state).
    fn save_state(&self, _state: &mut State) -> Result<(), ObjectError> {
        Ok(())
    }
    /// DRYML's `load_object_imp`, run on a freshly built object.
    fn load_state(&mut self, _state: &State) -> Result<(), ObjectError> {
        Ok(())
    }
    /// DRYML's `load_compute_imp`: take what computing needs (a model onto its device), run in
    /// the sandbox or Slurm job before the work, so device memory is held only there.
    fn load_compute(&mut self) -> Result<(), ObjectError> {
        Ok(())
    }
    /// DRYML's `save_compute_imp`: bring the trained state back into what [`Build::save_state`]
    /// writes (weights off the device) and let go of the device, run after the work.
    fn save_compute(&mut self) -> Result<(), ObjectError> {
        Ok(())
    }
}

/// dryml's own models of each framework: the type name a repo records, the path that names it,
/// and the cargo feature it needs (a notebook gets the feature by naming the path; loading
/// such a model where dryml was built without it says so). Here, below `models`, so that
/// errors of this layer can name them.
pub const FRAMEWORK_MODELS: [(&str, &str, &str); 7] = [
    ("TchClassifier", "dryml::models::tch::TchClassifier", "torch"),
    ("TchRegressor", "dryml::models::tch::TchRegressor", "torch"),
    ("CandleClassifier", "dryml::models::candle::CandleClassifier", "candle"),
    ("CandleRegressor", "dryml::models::candle::CandleRegressor", "candle"),
    ("BurnClassifier", "dryml::models::burn::BurnClassifier", "burn"),
    ("BurnRegressor", "dryml::models::burn::BurnRegressor", "burn"),
    ("DecisionTree", "dryml::models::linfa::DecisionTree", "linfa"),
];

/// An object of a registered type, as a trait object. `#[derive(dryml::Object)]` implements it
/// from [`Build`].
pub trait Object: Any {
    /// The registered type name.
    fn type_name(&self) -> &'static str;
    /// The definition it was built from (type and arguments; no id).
    fn definition(&self) -> ObjectDef;
    /// Its identity.
    fn meta(&self) -> &Meta;
    /// Its identity, to change.
    fn meta_mut(&mut self) -> &mut Meta;
    /// [`Build::save_state`] (the derive forwards it).
    fn save_state(&self, state: &mut State) -> Result<(), ObjectError>;
    /// [`Build::load_state`] (the derive forwards it).
    fn load_state(&mut self, state: &State) -> Result<(), ObjectError>;
    /// [`Build::load_compute`] (the derive forwards it).
    fn load_compute(&mut self) -> Result<(), ObjectError> {
        Ok(())
    }
    /// [`Build::save_compute`] (the derive forwards it).
    fn save_compute(&mut self) -> Result<(), ObjectError> {
        Ok(())
    }
    /// As [`Any`], to downcast.
    fn as_any(&self) -> &dyn Any;
    /// As [`Any`], to downcast.
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// As [`Any`], to downcast.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl dyn Object {
    /// Its id (`meta().id`).
    pub fn id(&self) -> &str {
        &self.meta().id
    }
    /// The object as a `T`, if it is one.
    pub fn downcast_ref<T: Object>(&self) -> Option<&T> {
        self.as_any().downcast_ref()
    }
    /// The object as a `T`, if it is one.
    pub fn downcast_mut<T: Object>(&mut self) -> Option<&mut T> {
        self.as_any_mut().downcast_mut()
    }
    /// The concrete object, or the box back when it is another type.
    pub fn downcast<T: Object>(self: Box<Self>) -> Result<Box<T>, Box<dyn Object>> {
        if self.as_any().is::<T>() {
            Ok(self.into_any().downcast().expect("checked"))
        } else {
            Err(self)
        }
    }
}

impl fmt::Debug for dyn Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.definition(), self.meta().id)
    }
}

type Constructor = fn(&Value, Meta) -> Result<Box<dyn Object>, ObjectError>;

static REGISTRY: Mutex<BTreeMap<String, Constructor>> = Mutex::new(BTreeMap::new());

fn construct<T: Build + Object>(args: &Value, meta: Meta) -> Result<Box<dyn Object>, ObjectError> {
    let name = std::any::type_name::<T>();
    let args: T::Args =
        serde_json::from_value(args.clone()).map_err(|e| ObjectError::Args(name.to_string(), e.to_string()))?;
    Ok(Box::new(T::build(args, meta)))
}

/// Registers `T` under `name` (done by the derive; a later registration replaces it).
pub fn register<T: Build + Object>(name: &str) {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), construct::<T>);
}

/// The registered type names.
pub fn registered() -> Vec<String> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
}

fn build(def: &ObjectDef, meta: Meta) -> Result<Box<dyn Object>, ObjectError> {
    let found = REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).get(&def.type_name).copied();
    let ctor = found.ok_or_else(|| ObjectError::UnknownType(def.type_name.clone(), registered()))?;
    ctor(&def.args, meta)
}

/// Named binary sections of an object's state, and nested objects saved with their parent.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct State {
    sections: Vec<(String, Vec<u8>)>,
}

impl State {
    /// Stores raw bytes under `name`.
    pub fn put_bytes(&mut self, name: &str, bytes: Vec<u8>) {
        self.sections.retain(|(n, _)| n != name);
        self.sections.push((name.to_string(), bytes));
    }
    /// Stores any serde value under `name` (MessagePack).
    pub fn put<T: Serialize>(&mut self, name: &str, value: &T) -> Result<(), ObjectError> {
        let b = rmp_serde::to_vec(value).map_err(|e| ObjectError::State(name.to_string(), e.to_string()))?;
        self.put_bytes(name, b);
        Ok(())
    }
    /// Stores a nested object, whole (its definition, identity and state).
    pub fn put_object(&mut self, name: &str, obj: &dyn Object) -> Result<(), ObjectError> {
        let b = to_bytes(obj)?;
        self.put_bytes(name, b);
        Ok(())
    }
    /// The bytes of section `name`.
    pub fn bytes(&self, name: &str) -> Result<&[u8], ObjectError> {
        self.sections
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.as_slice())
            .ok_or_else(|| ObjectError::State(name.to_string(), "no such section".into()))
    }
    /// Section `name`, deserialized.
    pub fn get<T: DeserializeOwned>(&self, name: &str) -> Result<T, ObjectError> {
        rmp_serde::from_slice(self.bytes(name)?).map_err(|e| ObjectError::State(name.to_string(), e.to_string()))
    }
    /// The object nested as section `name`.
    pub fn get_object(&self, name: &str) -> Result<Box<dyn Object>, ObjectError> {
        from_bytes(self.bytes(name)?, None)
    }
    /// The sections' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.sections.iter().map(|(n, _)| n.as_str())
    }
}

/// tch models: weights travel in the object's own file, in libtorch's format.
#[cfg(feature = "torch")]
impl State {
    /// Stores every variable of `vs` under `name`.
    pub fn put_var_store(&mut self, name: &str, vs: &tch::nn::VarStore) -> Result<(), ObjectError> {
        let mut buf = Vec::new();
        vs.save_to_stream(&mut buf).map_err(|e| ObjectError::State(name.to_string(), e.to_string()))?;
        self.put_bytes(name, buf);
        Ok(())
    }
    /// Loads the variables saved under `name` into `vs`, which must have the same shapes (build
    /// the model from the object's arguments first, as `Build::build` does).
    pub fn load_var_store(&self, name: &str, vs: &mut tch::nn::VarStore) -> Result<(), ObjectError> {
        vs.load_from_stream(std::io::Cursor::new(self.bytes(name)?))
            .map_err(|e| ObjectError::State(name.to_string(), e.to_string()))
    }
}

/// Why an object could not be saved or loaded. File errors name the file.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectError {
    /// A file problem: the path and what is wrong.
    File(PathBuf, String),
    /// The type is not registered in this process (with the registered names).
    UnknownType(String, Vec<String>),
    /// Arguments that do not fit the type.
    Args(String, String),
    /// A state section that is missing or malformed.
    State(String, String),
    /// The bytes are not a DRYML object (where they came from is added by the caller).
    Format(String),
}

impl fmt::Display for ObjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectError::File(p, m) => write!(f, "{}: {m}", p.display()),
            ObjectError::UnknownType(t, known) => {
                write!(
                    f,
                    "unknown type `{t}`: no `#[derive(dryml::Object)]` type of that name in this process (registered: {})",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                )?;
                if let Some((_, path, feature)) = FRAMEWORK_MODELS.iter().find(|m| m.0 == t) {
                    write!(f, "; `{t}` is dryml's model of its `{feature}` feature: name `{path}` in a cell first (in a notebook the kernel then builds dryml with it)")?;
                }
                Ok(())
            }
            ObjectError::Args(t, m) => write!(f, "arguments of `{t}`: {m}"),
            ObjectError::State(s, m) => write!(f, "state section `{s}`: {m}"),
            ObjectError::Format(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ObjectError {}

fn build_as<T: Build + Object>(def: &ObjectDef, meta: Meta) -> Result<T, ObjectError> {
    let args: T::Args = serde_json::from_value(def.args.clone()).map_err(|e| {
        ObjectError::Args(def.type_name.clone(), format!("they do not make a `{}`: {e}", std::any::type_name::<T>()))
    })?;
    let obj = T::build(args, meta);
    if obj.type_name() != def.type_name {
        return Err(ObjectError::Args(
            def.type_name.clone(),
            format!("the definition is a `{}`, not a `{}`", def.type_name, obj.type_name()),
        ));
    }
    Ok(obj)
}

#[cfg(test)]
pub(crate) mod tests;
