//! Objects and repos: DRYML's `Object`, `ObjectDef`, `Repo` and `Selector` for Rust.
//!
//! An [`Object`] knows how it was built (its [`ObjectDef`]: a registered type name and its
//! constructor arguments as JSON) and who it is ([`Meta`]: id, creation time, description). It
//! saves to one versioned file and loads from that file alone; loading never runs code from
//! the file (DRYML unpickles with dill). A [`Repo`] is a directory of such files with an index
//! of their definitions, queried with [`Selector`]s without reading any object's state. In a
//! notebook, `%repo` browses a repo and `%%sweep` trains definitions into one; a [`Search`]
//! makes those definitions (grid or seeded random), and [`Repo::best`] picks the best of them.
//!
//! A type opts in with [`Build`] and `#[derive(dryml::Object)]`:
//!
//! ```
//! use dryml::objects::{Build, Meta, ObjectError, State};
//! use dryml::{ObjectDef, Repo, Selector};
//! use serde::{Deserialize, Serialize};
//! use serde_json::json;
//!
//! #[derive(Serialize, Deserialize)]
//! struct MlpArgs { lr: f64, hidden: usize }
//!
//! #[derive(dryml::Object)] // implements Object and registers "Mlp" when the code is loaded
//! struct Mlp { args: MlpArgs, meta: Meta, weights: Vec<f32> }
//!
//! impl Build for Mlp {
//!     type Args = MlpArgs;
//!     fn build(args: MlpArgs, meta: Meta) -> Self {
//!         let weights = vec![0.0; args.hidden];
//!         Mlp { args, meta, weights }
//!     }
//!     fn save_state(&self, s: &mut State) -> Result<(), ObjectError> { s.put("weights", &self.weights) }
//!     fn load_state(&mut self, s: &State) -> Result<(), ObjectError> { self.weights = s.get("weights")?; Ok(()) }
//! }
//!
//! let dir = std::env::temp_dir().join(format!("dryml-doc-repo-{}", std::process::id()));
//! let mut repo = Repo::create(&dir).unwrap();
//! for lr in [0.1, 0.01] {
//!     let def = ObjectDef::new("Mlp", &MlpArgs { lr, hidden: 4 }).unwrap();
//!     let mut mlp = def.build().unwrap();
//!     mlp.downcast_mut::<Mlp>().unwrap().weights[0] = lr as f32;
//!     repo.add(&*mlp).unwrap();
//! }
//! // Queries read the index only; `get` loads the files, by registered type name.
//! let found = repo.get(&Selector::of("Mlp").arg("lr", json!(0.1))).unwrap();
//! assert_eq!(found.len(), 1);
//! assert_eq!(found[0].downcast_ref::<Mlp>().unwrap().weights[0], 0.1);
//! std::fs::remove_dir_all(&dir).unwrap();
//! ```

pub(crate) mod object;
pub mod provenance;
pub(crate) mod repo;
pub(crate) mod search;

pub(crate) use object::{from_record, record, uuid_v4};
pub use object::{
    load_object, load_object_as, register, registered, save_object, Build, Meta, Object, ObjectDef, ObjectError, State,
    FRAMEWORK_MODELS,
};
pub use provenance::Provenance;
pub use repo::{Entry, Repo, RepoError, Selector};
pub use search::{Goal, Search};
