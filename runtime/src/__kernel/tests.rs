//! The shims the kernel expands cells to, compiled and run here as the kernel writes them.

use super::cell::{Shown, Spec};

fn spec(requests: &'static str) -> Spec {
    Spec { requests, timeout: Some(30.0), mem_limit: None, verbose: false, use_existing: false, dont_create: false }
}

#[test]
fn a_compute_cell_changes_only_its_updates() {
    let mut model: Vec<f64> = vec![1.0];
    let data: Vec<u8> = vec![7, 8];
    let shown: Shown = crate::__kernel::compute_cell!(spec("default num_cpus=0"); [model data] [model]; sandbox show; {
        model.push(data.len() as f64);
        drop(data);
        model.len()
    });
    assert_eq!(shown.0, "2");
    assert_eq!(model, vec![1.0, 2.0], "--update brings the sandbox's value back");
    assert_eq!(data, vec![7, 8], "the body moved its own copy");

    // A body ending in a statement shows nothing; one that is not an update stays as it was.
    let shown = crate::__kernel::compute_cell!(spec("default num_cpus=0"); [model] []; sandbox quiet; {
        model.clear();
    });
    assert_eq!((shown.0.as_str(), model.len()), ("", 2));
}

#[test]
fn with_no_context_held_use_existing_sandboxes_and_dont_create_refuses() {
    let mut n = 1u32;
    let here = Spec { use_existing: true, ..spec("default num_cpus=0") };
    let shown = crate::__kernel::compute_cell!(here; [n] [n]; here_or_sandbox show; {
        n += 1;
        std::process::id()
    });
    assert_ne!(shown.0, std::process::id().to_string(), "it ran in a sandbox");
    assert_eq!(n, 2);
    let refuse = Spec { dont_create: true, ..spec("default num_cpus=0") };
    let shown = crate::__kernel::compute_cell!(refuse; [n] [n]; here_or_sandbox show; {
        n += 1;
        n
    });
    assert_eq!((shown.0.as_str(), n), ("", 2), "NoContextError ends the cell, n untouched");
}

#[test]
fn a_failed_body_leaves_the_variables() {
    let mut v = vec![1u8];
    let shown = crate::__kernel::compute_cell!(spec("default num_cpus=0"); [v] [v]; sandbox show; {
        let _ = &v;
        panic!("boom")
    });
    assert_eq!((shown.0.as_str(), v.as_slice()), ("", &[1u8][..]));
}

/// Not run (a job needs Slurm): the job's shims must compile as the kernel writes them.
#[allow(dead_code, unreachable_code, clippy::diverging_sub_expression)]
fn job_shims_compile() {
    let mut w: Vec<f64> = Vec::new();
    let n = 3usize;
    let _: Shown = crate::__kernel::job_cell!("{}"; [w: Vec<f64>, n: usize] [w]; run(wait) show; {
        w.push(n as f64);
        w.len()
    });
    let _: Shown = crate::__kernel::job_cell!("{}"; [w: Vec<f64>] []; run(detach) quiet; {
        w.clear();
    });
    let defs: Vec<crate::objects::ObjectDef> = Vec::new();
    let _: Shown = crate::__kernel::job_cell!("{}"; [] []; sweep(defs, "/r", false); {
        |m: &mut crate::models::pipe::Standardize| m.fitted().is_some()
    });
    let _: Shown = crate::__kernel::cell::sweep("default", &defs, "/r", |m: &mut crate::models::pipe::Standardize| {
        m.fitted().is_some()
    });
}

#[test]
fn a_body_may_name_what_the_shim_names_inside() {
    // A notebook's own `CellError`, and variables called as the shim's locals are.
    struct CellError(u8);
    let (compute, value, out) = (5u8, 6u8, 7u8);
    let shown = crate::__kernel::compute_cell!(spec("default num_cpus=0"); [compute out value] []; sandbox show; {
        CellError(compute + value + out).0
    });
    assert_eq!(shown.0, "18");
}
