//! Tests of `repo`.

use super::*;
use crate::objects::object::tests::{Cfg, Mlp, Named};
use crate::objects::Build;
use serde_json::Value;
use std::io::Write;

fn dir() -> PathBuf {
    std::env::temp_dir().join(format!("dryml-repo-{}-{}", std::process::id(), crate::objects::uuid_v4()))
}

fn named(lr: f64, data: &str) -> Named {
    Named::build(Cfg { lr, data: data.into() }, Meta::new())
}

#[test]
fn add_get_delete_and_reload() {
    let d = dir();
    assert!(matches!(Repo::open(&d), Err(RepoError::NotARepo(_))));
    let mut repo = Repo::create(&d).unwrap();
    assert!(matches!(Repo::create(&d), Err(RepoError::Exists(_))));
    let def = ObjectDef::new("Mlp", &(0.1, vec![4usize])).unwrap();
    for _ in 0..5 {
        repo.add(def.build().unwrap().as_ref()).unwrap();
    }
    let def2 = ObjectDef::new("Mlp", &(0.2, vec![4usize])).unwrap();
    for _ in 0..5 {
        repo.add(def2.build().unwrap().as_ref()).unwrap();
    }
    let bulk: Vec<Named> = (0..3).map(|i| named(i as f64, "bulk")).collect();
    let ids = repo.add_many(bulk.iter().map(|n| n as &dyn Object)).unwrap();
    assert_eq!(ids.len(), 3);
    assert_eq!(repo.find(&Selector::any().arg("data", json!("bulk"))).len(), 3);
    for id in &ids {
        repo.delete(id).unwrap();
    }
    let bad = Named::build(Cfg { lr: 0.0, data: "x".into() }, Meta::with_id("../escape"));
    assert!(repo.add(&bad).unwrap_err().to_string().contains("cannot name a file"));
    repo.add(&named(0.1, "mnist")).unwrap();
    assert_eq!(repo.len(), 11);
    assert_eq!(repo.get(&Selector::of("Mlp").args(vec![json!(0.2)])).unwrap().len(), 5);
    let one = repo.get_one(&Selector::of("models.Named")).unwrap();
    assert_eq!(one.downcast_ref::<Named>().unwrap().cfg.data, "mnist");
    let e = repo.get_one(&Selector::of("Mlp")).err().unwrap().to_string();
    assert_eq!(e, "expected one object matching Selector(Mlp), found 10");
    // A second handle (another process, say) sees additions after reload.
    let mut other = Repo::open(&d).unwrap();
    let id = repo.add(&named(0.3, "cifar")).unwrap();
    assert_eq!(other.len(), 11);
    other.reload().unwrap();
    assert_eq!(other.len(), 12);
    other.delete(&id).unwrap();
    repo.reload().unwrap();
    assert_eq!(repo.len(), 11);
    assert!(matches!(repo.by_id(&id), Err(RepoError::NoSuchId(_))));
    assert!(!d.join("objects").join(format!("{id}.dry")).exists());
    // Saving again replaces, by id.
    let mut m = repo.get(&Selector::of("Mlp")).unwrap().remove(0);
    m.meta_mut().description = "retrained".into();
    let mid = m.meta().id.clone();
    repo.save(m.as_ref()).unwrap();
    assert_eq!(repo.len(), 11);
    assert_eq!(repo.by_id(&mid).unwrap().meta().description, "retrained");
    let sums = repo.apply(&Selector::of("Mlp").args(vec![json!(0.1)]), |o| o.downcast_ref::<Mlp>().is_some()).unwrap();
    assert_eq!(sums, vec![true; 5]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn selectors_follow_dryml() {
    let def = |ty: &str, args: Value| ObjectDef { type_name: ty.into(), args };
    let meta = Meta::with_id("abc");
    let mlp = def("Mlp", json!({"lr": 0.1, "layers": [64, 10], "data": {"name": "mnist", "split": "train"}}));
    let pos = def("Data", json!([2, "x", {"k": 1}]));
    // (selector, definition, matches)
    let table: Vec<(Selector, &ObjectDef, bool)> = vec![
        (Selector::of("Mlp"), &mlp, true),
        (Selector::of("Data"), &mlp, false),
        (Selector::any().arg("lr", json!(0.1)), &mlp, true),
        (Selector::of("Mlp").arg("lr", json!(0.2)), &mlp, false),
        (Selector::of("Mlp").arg("data.name", json!("mnist")), &mlp, true),
        (Selector::of("Mlp").kwargs(json!({"data": {"split": "test"}})), &mlp, false),
        (Selector::of("Mlp").arg("layers", json!([64, 10])), &mlp, true),
        (Selector::of("Mlp").arg("layers", json!([64])), &mlp, false),
        (Selector::of("Mlp").arg("missing", json!(1)), &mlp, false),
        // A number in a path indexes a list, as a search's paths do.
        (Selector::of("Mlp").arg("layers.1", json!(10)), &mlp, true),
        (Selector::of("Mlp").arg("layers.0", json!(10)), &mlp, false),
        (Selector::of("Mlp").arg("layers.2", json!(10)), &mlp, false),
        (Selector::of("Mlp").arg("data.0", json!("mnist")), &mlp, false),
        (Selector::of("Data").args(vec![json!(2)]), &pos, true),
        (Selector::of("Data").args(vec![json!(2.0), json!("x")]), &pos, true),
        (Selector::of("Data").args(vec![json!(3)]), &pos, false),
        (Selector::of("Data").args(vec![json!(2), json!("x"), json!({"k": 1}), json!(4)]), &pos, false),
        (Selector::of("Data").args(vec![json!(2), json!("x"), json!({})]), &pos, true),
        (Selector::of("Data").kwargs(json!({"lr": 1})), &pos, false),
        (Selector::any().filter(|d, _| d.type_name.len() == 4), &pos, true),
        (Selector::any().filter(|d, _| d.type_name.len() == 3), &pos, false),
        (Selector::id("abc"), &pos, true),
        (Selector::id("abd"), &pos, false),
    ];
    for (i, (sel, d, want)) in table.iter().enumerate() {
        assert_eq!(sel.matches(d, &meta), *want, "row {i}: {sel} on {d}");
    }
    let sel = Selector::parse(&["Mlp", "lr=0.1", "data.name=mnist", "layers=[64,10]"]).unwrap();
    assert!(sel.matches(&mlp, &meta), "{sel}");
    assert!(Selector::parse(&["Mlp", "layers.0=64"]).unwrap().matches(&mlp, &meta));
    let sel = Selector::parse(&["Data", "0=2", "1=x"]).unwrap();
    assert!(sel.matches(&pos, &meta), "{sel}");
    for (words, msg, at) in [
        (&["lr=0.1"][..], "the first word is the type name", 0),
        (&["Mlp", "lr"][..], "`lr` is not key=value", 1),
        (&["Mlp", "a..b=1"][..], "empty key", 1),
        (&["Data", "1=x"][..], "without gaps", 1),
        (&["Data", "18446744073709551615=x"][..], "without gaps", 1),
        (&[][..], "expected a type name", 0),
    ] {
        let (m, i) = Selector::parse(words).err().unwrap();
        assert!(m.contains(msg) && i == at, "{words:?}: {m} at {i}");
    }
}

#[test]
fn a_writer_killed_mid_save_leaves_every_acknowledged_object_loadable() {
    let d = dir();
    Repo::create(&d).unwrap();
    let acks = d.join("acks");
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut repo = Repo::open(&d).unwrap();
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&acks).unwrap();
        for i in 0.. {
            let mut m = Mlp::build((i as f64, vec![64, 64]), Meta::new());
            m.weights.iter_mut().for_each(|w| *w = i as f32);
            let id = repo.add(&m).unwrap();
            // Acknowledged: add returned.
            writeln!(f, "{id}").unwrap();
        }
        unsafe { libc::_exit(0) };
    }
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(&acks).map(|t| t.lines().count()).unwrap_or(0) < 20 {
        assert!(t0.elapsed().as_secs() < 60, "the writer made no progress");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    let acked: Vec<String> = std::fs::read_to_string(&acks).unwrap().lines().map(str::to_string).collect();
    let repo = Repo::open(&d).unwrap();
    assert!(repo.len() >= acked.len(), "{} indexed, {} acknowledged", repo.len(), acked.len());
    for id in &acked {
        let m = repo.by_id(id).unwrap();
        let m = m.downcast_ref::<Mlp>().unwrap();
        assert!(m.weights.iter().all(|w| *w == m.args.0 as f32));
    }
    // Whatever else the index holds loads too; leftovers are only temporary files.
    for e in repo.entries() {
        repo.by_id(&e.meta.id).unwrap();
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn index_lines_naming_files_outside_the_repo_are_skipped() {
    let d = dir();
    let mut repo = Repo::create(&d).unwrap();
    let id = repo.add(&named(1.0, "kept")).unwrap();
    let line = std::fs::read_to_string(d.join(INDEX)).unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(d.join(INDEX)).unwrap();
    for bad in ["../../escape", "/etc/passwd", ".hidden", ""] {
        f.write_all(line.replace(&format!("\"{id}\""), &format!("{:?}", bad)).as_bytes()).unwrap();
    }
    f.write_all(b"{\"op\":\"delete\",\"id\":\"../x\"}\n").unwrap();
    drop(f);
    let fresh = Repo::open(&d).unwrap();
    assert_eq!(fresh.skipped, 5);
    assert_eq!(fresh.entries().iter().map(|e| e.meta.id.as_str()).collect::<Vec<_>>(), [id.as_str()]);
    assert!(matches!(fresh.by_id("../../escape"), Err(RepoError::NoSuchId(_))));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn two_processes_adding_at_once_lose_nothing_and_torn_lines_are_skipped() {
    let d = dir();
    Repo::create(&d).unwrap();
    let mut kids = Vec::new();
    for k in 0..4 {
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let r = std::panic::catch_unwind(|| {
                let mut repo = Repo::open(&d).unwrap();
                for i in 0..25 {
                    repo.add(&named(k as f64, &format!("p{k}-{i}"))).unwrap();
                }
            });
            unsafe { libc::_exit(if r.is_ok() { 0 } else { 1 }) };
        }
        kids.push(pid);
    }
    for pid in kids {
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(status, 0);
    }
    let mut repo = Repo::open(&d).unwrap();
    assert_eq!(repo.len(), 100);
    assert_eq!(repo.skipped, 0);
    // A crash mid-append leaves a torn line: readers skip it, the next writer ends it.
    let mut f = std::fs::OpenOptions::new().append(true).open(d.join(INDEX)).unwrap();
    f.write_all(br#"{"op":"add","object":{"type":"Nam"#).unwrap();
    drop(f);
    repo.add(&named(9.0, "after the crash")).unwrap();
    let fresh = Repo::open(&d).unwrap();
    assert_eq!(fresh.len(), 101);
    assert_eq!(fresh.skipped, 1);
    assert_eq!(fresh.find(&Selector::any().arg("data", json!("after the crash"))).len(), 1);
    std::fs::remove_dir_all(&d).unwrap();
}

fn files(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d.join(OBJECTS))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_failed_batch_adds_nothing_and_leaves_no_file() {
    let d = dir();
    let mut repo = Repo::create(&d).unwrap();
    let kept = repo.add(&named(1.0, "kept")).unwrap();
    let before = (files(&d), std::fs::read(d.join(INDEX)).unwrap());
    // Two objects with one id: refused before anything is written.
    let twins = [
        Named::build(Cfg { lr: 2.0, data: "a".into() }, Meta::with_id("twin")),
        Named::build(Cfg { lr: 3.0, data: "b".into() }, Meta::with_id("twin")),
    ];
    let e = repo.add_many(twins.iter().map(|o| o as &dyn Object)).unwrap_err();
    assert_eq!(e, RepoError::DuplicateId("twin".into()));
    assert!(e.to_string().contains("nothing was added"), "{e}");
    // A bad id after good objects: their staged files go too.
    let mixed = [named(4.0, "good"), Named::build(Cfg { lr: 5.0, data: "bad".into() }, Meta::with_id("../bad"))];
    assert!(repo.add_many(mixed.iter().map(|o| o as &dyn Object)).is_err());
    assert_eq!((files(&d), std::fs::read(d.join(INDEX)).unwrap()), before);
    assert_eq!(repo.len(), 1);
    repo.by_id(&kept).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_save_whose_index_append_fails_puts_the_old_file_back() {
    let d = dir();
    let mut repo = Repo::create(&d).unwrap();
    let id = repo.add(&Named::build(Cfg { lr: 1.0, data: "v1".into() }, Meta::with_id("m"))).unwrap();
    let new = Named::build(Cfg { lr: 2.0, data: "v2".into() }, Meta::with_id("m"));
    let fresh = Named::build(Cfg { lr: 3.0, data: "v3".into() }, Meta::with_id("n"));
    // The index cannot be appended to (a directory in its place; root ignores modes).
    std::fs::rename(d.join(INDEX), d.join("index.away")).unwrap();
    std::fs::create_dir(d.join(INDEX)).unwrap();
    assert!(matches!(repo.save(&new), Err(RepoError::Io(..))));
    assert!(matches!(repo.add_many([&new as &dyn Object, &fresh]), Err(RepoError::Io(..))));
    std::fs::remove_dir(d.join(INDEX)).unwrap();
    std::fs::rename(d.join("index.away"), d.join(INDEX)).unwrap();
    // The file is the one the index describes, and nothing else was left.
    assert_eq!(files(&d), [format!("{id}.dry")]);
    let fresh_repo = Repo::open(&d).unwrap();
    let entry = fresh_repo.entries()[0].clone();
    let obj = fresh_repo.by_id(&id).unwrap();
    assert_eq!(obj.definition(), entry.def);
    assert_eq!(obj.downcast_ref::<Named>().unwrap().cfg.data, "v1");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn processes_saving_one_id_at_once_leave_index_and_file_agreeing() {
    let d = dir();
    Repo::create(&d).unwrap();
    for round in 0..30 {
        // Both writers wait on one pipe, so their saves start together.
        let mut go = [0; 2];
        assert_eq!(unsafe { libc::pipe(go.as_mut_ptr()) }, 0);
        let mut kids = Vec::new();
        for k in 0..2 {
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let r = std::panic::catch_unwind(|| {
                    let mut repo = Repo::open(&d).unwrap();
                    let o = Named::build(Cfg { lr: k as f64, data: format!("r{round}-p{k}") }, Meta::with_id("shared"));
                    let mut b = [0u8; 1];
                    unsafe { libc::close(go[1]) };
                    unsafe { libc::read(go[0], b.as_mut_ptr().cast(), 1) };
                    if round % 5 == 4 && k == 1 {
                        let _ = repo.delete("shared");
                    } else {
                        repo.save(&o).unwrap();
                    }
                });
                unsafe { libc::_exit(if r.is_ok() { 0 } else { 1 }) };
            }
            kids.push(pid);
        }
        unsafe {
            libc::close(go[0]);
            libc::close(go[1]);
        }
        for pid in kids {
            let mut status = 0;
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(status, 0);
        }
        let repo = Repo::open(&d).unwrap();
        match repo.entries().first() {
            // Indexed: the file holds exactly what the index says.
            Some(e) => assert_eq!(repo.by_id("shared").unwrap().definition(), e.def, "round {round}"),
            // Deleted last: no file either.
            None => assert!(files(&d).is_empty(), "round {round}: {:?}", files(&d)),
        }
        assert!(files(&d).iter().all(|f| f == "shared.dry"), "{:?}", files(&d));
    }
    std::fs::remove_dir_all(&d).unwrap();
}
