//! Tests of `object`.

use super::*;

#[derive(crate::Object)]
pub(crate) struct Mlp {
    pub(crate) args: (f64, Vec<usize>),
    meta: Meta,
    pub(crate) weights: Vec<f32>,
    head: Option<Box<dyn Object>>,
}

impl Build for Mlp {
    type Args = (f64, Vec<usize>);
    fn build(args: Self::Args, meta: Meta) -> Self {
        let n = args.1.iter().sum();
        Mlp { args, meta, weights: vec![0.0; n], head: None }
    }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> {
        s.put("weights", &self.weights)?;
        if let Some(h) = &self.head {
            s.put_object("head", h.as_ref())?;
        }
        Ok(())
    }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> {
        self.weights = s.get("weights")?;
        self.head = s.get_object("head").ok();
        Ok(())
    }
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct Cfg {
    pub lr: f64,
    pub data: String,
}
#[derive(crate::Object)]
#[dryml(name = "models.Named")]
pub(crate) struct Named {
    #[dryml(args)]
    pub(crate) cfg: Cfg,
    #[dryml(meta)]
    id: Meta,
}
impl Build for Named {
    type Args = Cfg;
    fn build(cfg: Cfg, id: Meta) -> Self {
        Named { cfg, id }
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dryml-obj-{}-{}", std::process::id(), uuid_v4()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn round_trip_with_state_and_a_nested_object() {
    let mut m = Mlp::build((0.1, vec![2, 3]), Meta::with_id("m-1"));
    m.weights = vec![1.0, 2.0, 3.0, 4.0, 5.0];
    m.head = Some(Box::new(Named::build(Cfg { lr: 0.5, data: "mnist".into() }, Meta::new())));
    let path = tmp("m.dry");
    save_object(&m, &path).unwrap();
    let back = load_object(&path).unwrap();
    assert_eq!(back.type_name(), "Mlp");
    assert_eq!(back.id(), "m-1");
    assert_eq!(back.definition(), ObjectDef::new("Mlp", &(0.1, vec![2, 3])).unwrap());
    let back = back.downcast::<Mlp>().map_err(|_| "not an Mlp").unwrap();
    assert_eq!(back.weights, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    let head = back.head.as_ref().unwrap().downcast_ref::<Named>().unwrap();
    assert_eq!(head.cfg.data, "mnist");
    // build() makes a fresh object from the same arguments, with a new id and fresh state.
    let copy = back.definition().build().unwrap();
    assert_ne!(copy.id(), "m-1");
    assert_eq!(copy.downcast_ref::<Mlp>().unwrap().weights, vec![0.0; 5]);
    assert_eq!(copy.definition().positional().len(), 2);
    let n = Named::build(Cfg { lr: 0.1, data: "x".into() }, Meta::new());
    assert_eq!(n.definition().named().unwrap()["lr"], 0.1);
    assert_eq!(n.definition().type_name, "models.Named");
    assert_eq!(n.definition().to_string(), r#"models.Named(data="x", lr=0.1)"#);
    assert_eq!(ObjectDef::new("Data", &(vec![1, 2], "a")).unwrap().to_string(), r#"Data([1,2], "a")"#);
}

#[test]
fn bad_files_say_what_is_wrong_and_where() {
    let m = Mlp::build((0.1, vec![1]), Meta::new());
    let good = to_bytes(&m).unwrap();
    let path = tmp("bad.dry");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (good[..good.len() - 3].to_vec(), "truncated: the header promises"),
        (good[..10].to_vec(), "truncated: 10 bytes"),
        (
            {
                let mut b = good.clone();
                let n = b.len();
                b[n - 2] ^= 0xff;
                b
            },
            "corrupt: the checksum does not match",
        ),
        (
            {
                let mut b = good.clone();
                b[8..12].copy_from_slice(&7u32.to_le_bytes());
                b
            },
            "written by a newer dryml (format version 7",
        ),
        (b"PK\x03\x04 a zip file, not ours at all".to_vec(), "not a DRYML object file"),
        (
            {
                let mut b = good.clone();
                b.push(0);
                b
            },
            "1 stray bytes",
        ),
        (unknown_type_file(), "unknown type `Gone`"),
    ];
    for (bytes, words) in cases {
        std::fs::write(&path, &bytes).unwrap();
        let e = load_object(&path).unwrap_err().to_string();
        assert!(e.starts_with(&path.display().to_string()), "{e}");
        assert!(e.contains(words), "{words}: {e}");
    }
    let e = load_object(path.with_file_name("missing.dry")).unwrap_err().to_string();
    assert!(e.contains("missing.dry") && e.contains("No such file"), "{e}");
}

fn unknown_type_file() -> Vec<u8> {
    struct Gone {
        meta: Meta,
    }
    impl Object for Gone {
        fn type_name(&self) -> &'static str {
            "Gone"
        }
        fn definition(&self) -> ObjectDef {
            ObjectDef::new("Gone", &()).unwrap()
        }
        fn meta(&self) -> &Meta {
            &self.meta
        }
        fn meta_mut(&mut self) -> &mut Meta {
            &mut self.meta
        }
        fn save_state(&self, _: &mut State) -> Result<(), ObjectError> {
            Ok(())
        }
        fn load_state(&mut self, _: &State) -> Result<(), ObjectError> {
            Ok(())
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
        fn as_any_mut(&mut self) -> &mut dyn Any {
            self
        }
        fn into_any(self: Box<Self>) -> Box<dyn Any> {
            self
        }
    }
    // Implemented by hand, never registered: the file names a type this process lacks.
    to_bytes(&Gone { meta: Meta::new() }).unwrap()
}

#[test]
fn uuids_are_version_4() {
    let a = uuid_v4();
    assert_eq!(a.len(), 36);
    assert_eq!(&a[14..15], "4");
    assert_ne!(a, uuid_v4());
}

#[test]
fn an_unknown_framework_model_says_which_feature_and_path_register_it() {
    let e = ObjectError::UnknownType("DecisionTree".into(), vec!["ArgMax".into()]).to_string();
    assert_eq!(
        e,
        "unknown type `DecisionTree`: no `#[derive(dryml::Object)]` type of that name in this process (registered: ArgMax); \
         `DecisionTree` is dryml's model of its `linfa` feature: name `dryml::models::linfa::DecisionTree` in a cell first \
         (in a notebook the kernel then builds dryml with it)"
    );
    assert!(!ObjectError::UnknownType("Gone".into(), vec![]).to_string().contains("feature"));
}

#[test]
fn an_object_built_and_loaded_as_its_type_needs_no_registry_and_a_wrong_type_is_named() {
    let m = ObjectDef::new("Mlp", &(0.5, vec![2, 1])).unwrap().build_as::<Mlp>().unwrap();
    assert_eq!(m.weights, vec![0.0; 3]);
    let path = tmp("typed.dry");
    let mut saved = m;
    saved.weights = vec![1.0, 2.0, 3.0];
    save_object(&saved, &path).unwrap();
    let back = load_object_as::<Mlp>(&path).unwrap();
    assert_eq!((back.weights.clone(), back.meta().id.clone()), (saved.weights.clone(), saved.meta().id.clone()));
    let e = load_object_as::<Named>(&path).err().unwrap().to_string();
    assert!(e.contains("arguments of `Mlp`: they do not make a `dryml::objects::object::tests::Named`"), "{e}");
    let def = ObjectDef::new("models.Named", &Cfg { lr: 0.1, data: "d".into() }).unwrap();
    save_object(&def.build_as::<Named>().unwrap(), &path).unwrap();
    let e = ObjectDef::new("Other", &def.args).unwrap().build_as::<Named>().err().unwrap().to_string();
    assert_eq!(e, "arguments of `Other`: the definition is a `Other`, not a `models.Named`");
}
