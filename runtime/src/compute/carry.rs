//! How a notebook variable crosses into a sandbox or a Slurm job and back: a DRYML object as
//! its file (its compute hooks run around the work), any other serde value as MessagePack.
//!
//! The kernel's generated code picks the way by method resolution on the variable's concrete
//! type: `(&&&Out(&v)).encode()` takes [`OutObject`] for an [`Object`], else [`OutSerde`] for
//! a serde type, else [`OutNone`], an error that names the problem, so a cell naming a variable
//! that cannot cross gets that error and not a compile error in generated code.

use crate::objects::Object;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::marker::PhantomData;

/// A value leaving: `(&&&Out(&v)).encode()`.
pub struct Out<'a, T>(pub &'a T);

pub trait OutObject {
    fn encode(&self) -> Result<Vec<u8>, String>;
}
impl<T: Object> OutObject for &&Out<'_, T> {
    fn encode(&self) -> Result<Vec<u8>, String> {
        crate::objects::object::to_bytes(self.0).map_err(|e| format!("the object does not save: {e}"))
    }
}

pub trait OutSerde {
    fn encode(&self) -> Result<Vec<u8>, String>;
}
impl<T: Serialize + DeserializeOwned> OutSerde for &Out<'_, T> {
    fn encode(&self) -> Result<Vec<u8>, String> {
        rmp_serde::to_vec(self.0).map_err(|e| format!("does not serialize: {e}"))
    }
}

pub trait OutNone {
    fn encode(&self) -> Result<Vec<u8>, String> {
        Err("its type is neither a DRYML object nor serde's Serialize and Deserialize (derive them, or compute it in the cell)".into())
    }
}
impl<T> OutNone for Out<'_, T> {}

/// A value arriving, typed by where it goes: `(&&&In::<T>::new()).decode(bytes)`, or
/// `In::of(&v)` to take the type of the variable it replaces.
pub struct In<T>(PhantomData<T>);

impl<T> In<T> {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        In(PhantomData)
    }
    pub fn of(_: &T) -> Self {
        In(PhantomData)
    }
}

pub trait InObject<T> {
    fn decode(&self, bytes: &[u8]) -> Result<T, String>;
}
impl<T: Object> InObject<T> for &&In<T> {
    fn decode(&self, bytes: &[u8]) -> Result<T, String> {
        let obj =
            crate::objects::object::from_bytes(bytes, None).map_err(|e| format!("the object does not load: {e}"))?;
        obj.downcast::<T>()
            .map(|b| *b)
            .map_err(|o| format!("the file holds a {}, not a {}", o.type_name(), std::any::type_name::<T>()))
    }
}

pub trait InSerde<T> {
    fn decode(&self, bytes: &[u8]) -> Result<T, String>;
}
impl<T: DeserializeOwned> InSerde<T> for &In<T> {
    fn decode(&self, bytes: &[u8]) -> Result<T, String> {
        rmp_serde::from_slice(bytes).map_err(|e| format!("did not deserialize: {e}"))
    }
}

pub trait InNone<T> {
    fn decode(&self, _bytes: &[u8]) -> Result<T, String> {
        Err("its type is neither a DRYML object nor serde's Deserialize".into())
    }
}
impl<T> InNone<T> for In<T> {}

/// An object's compute hooks, a no-op for any other value: `(&&Hook(&mut v)).load_compute()`.
pub struct Hook<'a, T>(pub &'a mut T);

pub trait HookObject {
    fn load_compute(&mut self) -> Result<(), String>;
    fn save_compute(&mut self) -> Result<(), String>;
}
impl<T: Object> HookObject for &mut Hook<'_, T> {
    fn load_compute(&mut self) -> Result<(), String> {
        self.0.load_compute().map_err(|e| format!("load_compute: {e}"))
    }
    fn save_compute(&mut self) -> Result<(), String> {
        self.0.save_compute().map_err(|e| format!("save_compute: {e}"))
    }
}

pub trait HookNone {
    fn load_compute(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn save_compute(&mut self) -> Result<(), String> {
        Ok(())
    }
}
impl<T> HookNone for Hook<'_, T> {}

/// Brings every carrying trait into scope for generated code.
pub mod prelude {
    pub use super::{
        HookNone as _, HookObject as _, InNone as _, InObject as _, InSerde as _, OutNone as _, OutObject as _,
        OutSerde as _,
    };
}

#[cfg(test)]
mod tests {
    use super::prelude::*;
    use super::*;

    // Autoref dispatch needs the references the generated code writes, as it writes them.
    #[allow(clippy::needless_borrow)]
    #[test]
    fn each_type_takes_its_way() {
        let v = vec![1u8, 2];
        let bytes = (&&&Out(&v)).encode().unwrap();
        let back: Vec<u8> = (&&&In::of(&v)).decode(&bytes).unwrap();
        assert_eq!(back, v);
        let rc = std::rc::Rc::new(1);
        assert!((&&&Out(&rc)).encode().unwrap_err().contains("neither a DRYML object nor serde"));
        let mut n = 3u32;
        assert!((&mut &mut Hook(&mut n)).load_compute().is_ok());
    }
}
