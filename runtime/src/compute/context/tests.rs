//! Tests of `context`.

use super::*;

#[test]
fn requests_that_parse() {
    // (text, DRYML's spelling of the result)
    let table: &[(&str, &str)] = &[
        ("tf gpu/0=0.5 torch num_gpus=0", "{'tf': {'gpu/0': 0.5}, 'torch': {'num_gpus': 0}}"),
        ("default num_cpus=-1", "{'default': {'num_cpus': -1}}"),
        ("tf", "{'tf': {}}"),
        ("", "{}"),
        ("jax cpu/1=1 cpu/0=0.25 num_gpus=2", "{'jax': {'num_gpus': 2, 'cpu/0': 0.25, 'cpu/1': 1.0}}"),
        ("tf num_cpus=2 num_gpus=1 gpu/3=1.0", "{'tf': {'num_cpus': 2, 'num_gpus': 1, 'gpu/3': 1.0}}"),
    ];
    for (text, want) in table {
        let r = Requests::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(r.to_string(), *want, "{text:?}");
        assert_eq!(Requests::parse(&r.to_text()).unwrap(), r, "{text:?} round trip");
    }
    let r = Requests::parse("tf gpu/0=0.5").unwrap();
    assert_eq!(r.get("tf").unwrap().gpus[&0], 0.5);
    // Pairs before any framework are `default`'s.
    assert_eq!(
        Requests::parse("num_cpus=4 gpu/0=0.5 tf").unwrap(),
        Requests::parse("default num_cpus=4 gpu/0=0.5 tf").unwrap()
    );
    assert!(r.get("torch").is_none());
}

#[test]
fn requests_that_fail() {
    // (text, words the message must contain, index of the token it points at)
    let table: &[(&str, &str, usize)] = &[
        ("num_cpus=x", "default: num_cpus must be a whole number", 0),
        ("num_cpus=1 default", "framework `default` is given twice", 1),
        ("tf gpu/0=1.5", "tf: gpu/0 must be a fraction in (0, 1], got 1.5", 1),
        ("tf gpu/0=0", "in (0, 1]", 1),
        ("tf gpu/0=-0.1", "in (0, 1]", 1),
        ("tf gpu/0=half", "got `half`", 1),
        ("tf gpu/0=NaN", "got `NaN`", 1),
        ("tf gpu/x=0.5", "device index must be a whole number", 1),
        ("tf tpu/0=1", "unknown key `tpu/0`", 1),
        ("tf memory=4", "unknown key `memory`", 1),
        ("tf num_gpus=1.5", "num_gpus must be a whole number", 1),
        ("tf num_gpus=-2", "must be -1 or more", 1),
        ("torch num_cpus=1 num_cpus=2", "`num_cpus` is given twice", 2),
        ("tf gpu/0=0.5 gpu/0=0.25", "`gpu/0` is given twice", 2),
        ("tf torch tf", "framework `tf` is given twice", 2),
        ("tf {x}", "not a framework name", 1),
    ];
    for (text, words, token) in table {
        let e = Requests::parse(text).expect_err(text);
        assert!(e.message.contains(words), "{text:?}: {}", e.message);
        assert_eq!(e.token, Some(*token), "{text:?}");
    }
}

#[test]
fn devices_must_exist() {
    let r = Requests::parse("tf gpu/1=0.5 torch cpu/3=1").unwrap();
    let (message, key) = r.check_devices(4, 1).unwrap_err();
    assert_eq!(message, "tf: gpu/1 does not exist (this machine has 1 gpu, numbered from 0)");
    assert_eq!(key, "gpu/1");
    assert!(r.check_devices(4, 2).is_ok());
    assert!(r.check_devices(3, 2).unwrap_err().0.starts_with("torch: cpu/3"));
}

#[test]
fn checks_against_a_context() {
    let ctx = Context::decode("tf=gpu/0:1,cpu/0:1;torch=cpu/1:0.5").unwrap();
    assert_eq!(ctx.to_string(), "tf: gpu/0, cpu/0; torch: cpu/1=0.5");
    assert_eq!(Context::decode(&ctx.encode()).unwrap(), ctx);
    // (requirements, None when satisfied or words of why not)
    let table: &[(&str, Option<&str>)] = &[
        ("tf", None),
        ("tf num_gpus=1", None),
        ("tf num_gpus=2", Some("tf asks for num_gpus=2, it holds 1")),
        ("tf num_gpus=-1 num_cpus=-1", None),
        ("torch cpu/1=0.5", None),
        ("torch cpu/1=0.75", Some("torch asks for cpu/1=0.75, it holds 0.5")),
        ("torch num_gpus=1", Some("torch asks for num_gpus=1, it holds 0")),
        ("jax", Some("it has no `jax` framework")),
        ("", None),
    ];
    for (req, want) in table {
        let got = ctx.unmet(&Requests::parse(req).unwrap());
        match want {
            None => assert_eq!(got, None, "{req}"),
            Some(w) => assert!(got.as_deref().unwrap_or("").contains(w), "{req}: {got:?}"),
        }
    }
    let e = ContextError::Incompatible {
        requirements: Requests::parse("tf num_gpus=2").unwrap().to_string(),
        context: ctx.to_string(),
        why: "x".into(),
    };
    assert!(e
        .to_string()
        .starts_with("ContextIncompatibilityError: Context doesn't satisfy requirements {'tf': {'num_gpus': 2}}"));
}

#[test]
fn environment_of_a_context() {
    let machine = Machine {
        cpus: 4,
        gpus: vec![
            crate::compute::devices::GpuInfo { index: 0, cuda_id: "1".into(), name: "A".into(), total_bytes: 1 },
            crate::compute::devices::GpuInfo { index: 1, cuda_id: "3".into(), name: "B".into(), total_bytes: 1 },
        ],
    };
    let ctx = Context::decode("tf=gpu/1:0.5,cpu/2:1;torch=gpu/0:1,cpu/3:0.5").unwrap();
    let env: BTreeMap<String, String> = ctx.env(&machine).into_iter().collect();
    assert_eq!(env["CUDA_VISIBLE_DEVICES"], "1,3");
    assert_eq!(env["OMP_NUM_THREADS"], "2");
    assert_eq!(env["TF_FORCE_GPU_ALLOW_GROWTH"], "true");
    assert_eq!(ctx.cpu_set(), vec![2, 3]);
    assert_eq!(ctx.cuda_device(1), Some(1));
    assert_eq!(ctx.gpu_share("tf", 1), Some(0.5));
    let none = Context::decode("default=").unwrap();
    let env: BTreeMap<String, String> = none.env(&machine).into_iter().collect();
    assert_eq!(env["CUDA_VISIBLE_DEVICES"], "", "no GPU held: CUDA sees none");
    assert!(!env.contains_key("OMP_NUM_THREADS"));
    assert!(!env.contains_key("PYTORCH_CUDA_ALLOC_CONF"), "nothing to cap");
}

#[test]
fn a_share_of_a_gpu_caps_libtorchs_allocator() {
    let fraction = |text: &str| Context::decode(text).unwrap().torch_memory_fraction();
    assert_eq!(fraction("torch=gpu/0:0.5,cpu/0:1"), Some(0.5));
    assert_eq!(fraction("torch=gpu/0:0.75,gpu/1:0.25"), Some(0.25), "one cap for every device: the smallest");
    assert_eq!(fraction("tf=gpu/0:0.5;default=gpu/1:0.3"), Some(0.3), "torch unnamed: the default's");
    assert_eq!(fraction("torch=gpu/0:1;default=gpu/1:0.3"), None, "a whole GPU: no cap");
    assert_eq!(fraction("tf=gpu/0:0.5;torch=cpu/0:1"), None, "torch holds no GPU");
    assert_eq!(torch_alloc_conf(None, 0.5), "per_process_memory_fraction:0.5");
    assert_eq!(
        torch_alloc_conf(Some("expandable_segments:True, per_process_memory_fraction:0.9"), 0.25),
        "expandable_segments:True,per_process_memory_fraction:0.25",
        "the user's settings kept, an earlier cap replaced"
    );
    let machine = Machine {
        cpus: 1,
        gpus: vec![crate::compute::devices::GpuInfo {
            index: 0,
            cuda_id: "0".into(),
            name: "A".into(),
            total_bytes: 1,
        }],
    };
    let env: BTreeMap<String, String> = Context::decode("torch=gpu/0:0.5").unwrap().env(&machine).into_iter().collect();
    assert!(env["PYTORCH_CUDA_ALLOC_CONF"].ends_with("per_process_memory_fraction:0.5"), "{env:?}");
}

#[test]
fn requests_built_in_rust_are_the_parsed_ones_and_checked_alike() {
    let built = Requests::build().num_cpus(4).framework("tf").gpu(0, 0.5).cpu(1, 1.0).framework("torch").num_gpus(-1);
    assert_eq!(built.done().unwrap(), Requests::parse("num_cpus=4 tf gpu/0=0.5 cpu/1=1 torch num_gpus=-1").unwrap());
    assert_eq!(Requests::build().done().unwrap(), Requests::default());
    // Each mistake the grammar refuses, refused with the same words and no token.
    for (built, text) in [
        (Requests::build().framework("tf").gpu(0, 2.0), "tf gpu/0=2"),
        (Requests::build().gpu(0, 0.0), "gpu/0=0"),
        (Requests::build().cpu(0, f64::NAN), "cpu/0=NaN"),
        (Requests::build().num_cpus(-2), "num_cpus=-2"),
        (Requests::build().num_gpus(1).num_gpus(2), "num_gpus=1 num_gpus=2"),
        (Requests::build().framework("tf").framework("tf"), "tf tf"),
    ] {
        let e = built.done().expect_err(text);
        assert_eq!(e.token, None, "{text}");
        assert_eq!(e.message, Requests::parse(text).unwrap_err().message, "{text}");
    }
    // A name the grammar would split, and the first of two mistakes.
    assert!(Requests::build().framework("a b").done().unwrap_err().message.contains("`a b`"));
    let e = Requests::build().gpu(0, 2.0).framework("x y").done().unwrap_err();
    assert!(e.message.starts_with("default: gpu/0"), "{}", e.message);
}
