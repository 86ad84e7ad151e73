//! The build cache against scratch directories: claims, orphans, eviction, clearing, keys.

use super::key::key_for;
use super::*;
use std::path::Path;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dryml-cache-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Writes a unit's files as cargo lays them out, aged `age` (mtime and atime).
fn unit(generation: &Path, name: &str, hash: &str, kib: usize, age: Duration) {
    let p = generation.join("x86_64-unknown-linux-gnu/debug");
    let t = SystemTime::now() - age;
    for (rel, len) in [
        (format!(".fingerprint/{name}-{hash}/lib-{name}"), 16),
        (format!("deps/lib{}-{hash}.rlib", name.replace('-', "_")), kib * 1024),
        (format!("deps/{}-{hash}.d", name.replace('-', "_")), 64),
    ] {
        let f = p.join(rel);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, vec![1u8; len]).unwrap();
        File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_times(std::fs::FileTimes::new().set_accessed(t).set_modified(t))
            .unwrap();
    }
    let fp = p.join(format!(".fingerprint/{name}-{hash}"));
    File::open(&fp).unwrap().set_modified(t).unwrap();
}

#[test]
fn a_killed_build_leaves_no_cell_objects_or_incremental_state() {
    let root = scratch("killed");
    let profile = root.join("x86_64-unknown-linux-gnu/debug");
    let ours = "ctx_k0123456789ab";
    let gone = [
        format!("deps/{ours}.1907g0s9.1hn7dxg.rcgu.o"),
        format!("incremental/{ours}-3lyl1a8/s-h1-working/dep-graph.bin"),
    ];
    // Another kernel's cell crate, and other crates, are not this build's.
    let kept = [
        "deps/ctx_k0123456789abc.1907g0s9.rcgu.o",
        "deps/ctx_kfedcba987654.1907g0s9.rcgu.o",
        "incremental/ctx_kfedcba987654-3lyl1a8/s-h1/dep-graph.bin",
        "deps/libregex-0123456789abcdef.rlib",
        "deps/ctx_k0123456789ab-0123456789abcdef.d",
        "incremental/regex-1q2w/s-x/query.bin",
    ];
    for f in gone.iter().map(String::as_str).chain(kept) {
        std::fs::create_dir_all(profile.join(f).parent().unwrap()).unwrap();
        std::fs::write(profile.join(f), b"x").unwrap();
    }
    // Another kernel's build holds cargo's lock: the files are this kernel's alone, and the
    // interrupt's reply does not wait for that build.
    std::fs::write(profile.join(".cargo-lock"), b"").unwrap();
    let held = File::options().write(true).open(profile.join(".cargo-lock")).unwrap();
    dryml_sys::lock::exclusive(&held).unwrap();
    clean_killed_build(&root, ours);
    for f in &gone {
        assert!(!profile.join(f).exists(), "{f} is left");
    }
    assert!(!profile.join(format!("incremental/{ours}-3lyl1a8")).exists());
    for f in kept {
        assert!(profile.join(f).exists(), "{f} is not the cell crate's leftover");
    }
}

#[test]
fn kernels_claim_their_own_crates_and_a_gone_kernels_are_removed() {
    let root = scratch("claims");
    let cache = BuildCache::open(root.clone(), "gen".into(), 1 << 30).unwrap();
    let (a, b) = (cache.claim().unwrap(), cache.claim().unwrap());
    assert_ne!(a.cell_crate(), b.cell_crate());
    assert!(a.cell_crate().starts_with("ctx_k"), "{}", a.cell_crate());
    let profile = cache.dir().join("x86_64-unknown-linux-gnu/debug");
    let host = cache.dir().join("debug");
    let files = |c: &Claim| {
        // `job_`: a Slurm program of an earlier version's, which goes with its kernel's claim too.
        let (cell, job) = (c.cell_crate(), format!("job_{}", c.token));
        vec![
            profile.join(format!("deps/lib{cell}.so")),
            profile.join(format!(".fingerprint/{cell}-0123456789abcdef/lib-{cell}")),
            profile.join(format!("deps/{cell}-0123456789abcdef.d")),
            profile.join(format!("incremental/{cell}-3lyl1a8/s-1/x.bin")),
            host.join(format!("deps/{job}-fedcba9876543210")),
            host.join(format!(".fingerprint/{job}-fedcba9876543210/bin-{job}")),
        ]
    };
    let shared = profile.join("deps/libdryml-0123456789abcdef.rlib");
    for f in files(&a).iter().chain(&files(&b)).chain([&shared]) {
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, b"x").unwrap();
    }
    // A build aside of a kernel that holds no claim goes; a running kernel's stays.
    let aside = |name: &str| cache.dir().join(ASIDE_DIR).join(name).join("debug/deps/x.rlib");
    let (unclaimed, claimed) = (aside("ctx_k0123456789ab"), aside(&b.cell_crate()));
    for f in [&unclaimed, &claimed] {
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, b"x").unwrap();
    }
    assert!(cache.remove_orphans(Duration::ZERO).unwrap() > 0);
    assert!(!cache.dir().join(ASIDE_DIR).join("ctx_k0123456789ab").exists() && claimed.exists());
    // Both kernels run: nothing is theirs to take.
    assert_eq!(cache.remove_orphans(Duration::ZERO).unwrap(), 0);
    let gone = files(&a);
    drop(a);
    let _c = cache.claim().unwrap();
    assert!(cache.remove_orphans(Duration::ZERO).unwrap() > 0);
    for f in &gone {
        assert!(!f.exists(), "{} is left", f.display());
    }
    for f in files(&b).iter().chain([&shared]) {
        assert!(f.exists(), "{} belongs to a running kernel or to every kernel", f.display());
    }
    let claims: Vec<_> = std::fs::read_dir(cache.dir().join(KERNELS_DIR)).unwrap().flatten().collect();
    assert_eq!(claims.len(), 2, "the gone kernel's claim is removed; b's and the new one's stay");
}

#[test]
fn kernel_tokens_are_read_from_file_names() {
    assert_eq!(token_of("libctx_k0123456789ab.so"), Some("k0123456789ab"));
    assert_eq!(token_of("job_k0123456789ab-0123456789abcdef.d"), Some("k0123456789ab"));
    assert_eq!(token_of("ctx_k0123456789ab-3lyl1a8"), Some("k0123456789ab"));
    assert_eq!(token_of("ctx_k0123456789ab.1907g0s9.rcgu.o"), Some("k0123456789ab"));
    for other in [
        "libctx.so",
        "ctx-3lyl1a8",
        "ctx_k0123.so",
        "libdryml-0123456789abcdef.rlib",
        "job_kxyz456789abc",
        "my_ctx_k0123456789ab",
    ] {
        assert_eq!(token_of(other), None, "{other}");
    }
}

#[test]
fn unit_names_parse() {
    assert_eq!(unit_of("libdryml-7734e6fd54cb951f.rlib"), Some(("libdryml", "7734e6fd54cb951f")));
    assert_eq!(unit_of("cfg-if-47cdb9446b43fb74"), Some(("cfg-if", "47cdb9446b43fb74")));
    assert_eq!(unit_of("libctx.so"), None);
    assert_eq!(unit_of("ctx.d"), None);
    assert_eq!(unit_of("build-script-build"), None);
}

#[test]
fn the_key_changes_with_the_toolchain_and_with_libtorch() {
    let info = |v: &str, h: &str| format!("rustc {v}\nbinary: rustc\ncommit-hash: {h}\nrelease: {v}\n");
    let rustc_only = key_for(&info("1.95.0", "59807616e1fa"), None);
    assert_eq!(rustc_only, "rustc-1.95.0-59807616e");
    assert_ne!(key_for(&info("1.96.0", "0123456789ab"), None), rustc_only);
    let venv = |name: &str, version: &str| {
        let lib = scratch(name).join("torch").join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("..").join("version.py"), format!("__version__ = '{version}'\n")).unwrap();
        lib
    };
    let (a, b, c) = (venv("ka", "2.13.0+cu130"), venv("kb", "2.14.0+cpu"), venv("kc", "2.13.0+cu130"));
    let key_a = key_for(&info("1.95.0", "59807616e1fa"), Some(&a));
    assert!(key_a.starts_with("rustc-1.95.0-59807616e-torch-2.13.0_cu130-"), "{key_a}");
    assert_ne!(key_for(&info("1.95.0", "59807616e1fa"), Some(&b)), key_a, "another libtorch version");
    assert_ne!(key_for(&info("1.95.0", "59807616e1fa"), Some(&c)), key_a, "the same version elsewhere");
    for lib in [a, b, c] {
        std::fs::remove_dir_all(lib.parent().unwrap().parent().unwrap()).unwrap();
    }
}

#[test]
fn evicts_least_recently_used_units_and_generations_but_not_recent_ones() {
    let root = scratch("lru");
    let day = Duration::from_secs(86_400);
    let cache = BuildCache::open(root.clone(), "rustc-new".into(), 900 << 10).unwrap();
    cache.touch().unwrap();
    let cur = cache.dir();
    unit(&cur, "old-crate", "00000000000000a1", 300, 9 * day);
    unit(&cur, "mid-crate", "00000000000000a2", 300, 3 * day);
    unit(&cur, "hot-crate", "00000000000000a3", 300, Duration::from_secs(60));
    let stale_gen = root.join("rustc-old");
    unit(&stale_gen, "tch", "00000000000000b1", 300, 5 * day);
    std::fs::write(stale_gen.join(USED_FILE), "1").unwrap();
    File::open(stale_gen.join(USED_FILE)).unwrap().set_modified(SystemTime::now() - 5 * day).unwrap();

    let freed = cache.collect(Duration::from_secs(1)).unwrap();
    assert!(freed >= 600 << 10, "freed {freed}");
    let left = |p: &Path| p.exists();
    let deps = cur.join("x86_64-unknown-linux-gnu/debug/deps");
    assert!(!left(&deps.join("libold_crate-00000000000000a1.rlib")), "the oldest unit goes first");
    assert!(!left(&cur.join("x86_64-unknown-linux-gnu/debug/.fingerprint/old-crate-00000000000000a1")));
    assert!(!left(&stale_gen), "then the generation used 5 days ago");
    assert!(left(&deps.join("libmid_crate-00000000000000a2.rlib")), "then it is below the bound");
    assert!(left(&deps.join("libhot_crate-00000000000000a3.rlib")));
    assert!(tree_size(&root).0 <= 900 << 10);

    // Over the bound with only recent units: nothing is evicted.
    let tight = BuildCache::open(root.clone(), "rustc-new".into(), 1).unwrap();
    unit(&cur, "mid-crate", "00000000000000a2", 300, Duration::from_secs(10));
    assert_eq!(tight.collect(Duration::from_secs(1)).unwrap(), 0);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_build_in_progress_is_never_evicted_or_cleared() {
    let root = scratch("lock");
    let cache = BuildCache::open(root.clone(), "g".into(), 1).unwrap();
    unit(&cache.dir(), "old", "00000000000000c1", 100, Duration::from_secs(9 * 86_400));
    // Another "cargo" holds the profile directory's lock.
    let lock = File::create(cache.dir().join("x86_64-unknown-linux-gnu/debug/.cargo-lock")).unwrap();
    dryml_sys::lock::exclusive(&lock).unwrap();
    assert_eq!(cache.collect(Duration::from_millis(200)).unwrap(), 0);
    let err = cache.clear(Duration::from_millis(200)).unwrap_err().to_string();
    assert!(err.contains("a build is running"), "{err}");
    drop(lock);
    assert!(cache.clear(Duration::from_secs(1)).unwrap() > 100 << 10);
    assert_eq!(units(&cache.dir()).len(), 0);
    assert!(cache.dir().join("x86_64-unknown-linux-gnu/debug/.cargo-lock").exists(), "cargo's lock file stays");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn refuses_a_directory_others_may_write() {
    use std::os::unix::fs::PermissionsExt;
    let root = scratch("mode");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = BuildCache::open(root.clone(), "g".into(), 1).err().expect("refused").to_string();
    assert!(err.contains("refusing"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
    let made = BuildCache::open(root.clone(), "g".into(), 1).unwrap();
    assert_eq!(std::fs::metadata(&made.root).unwrap().mode() & 0o777, 0o700);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn report_lists_generations_and_largest_crates() {
    let root = scratch("report");
    let cache = BuildCache::open(root.clone(), "cur".into(), 1 << 30).unwrap();
    cache.touch().unwrap();
    unit(&cache.dir(), "torch-sys", "00000000000000d1", 200, Duration::ZERO);
    unit(&cache.dir(), "libc", "00000000000000d2", 20, Duration::ZERO);
    unit(&root.join("other"), "libc", "00000000000000d3", 20, Duration::ZERO);
    let r = cache.report();
    assert_eq!(r.generations.len(), 2);
    let cur = r.generations.iter().find(|g| g.current).unwrap();
    assert_eq!((cur.key.as_str(), cur.units), ("cur", 2));
    assert!(cur.last_used.is_some());
    assert_eq!(r.largest[0].0, "torch-sys");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_builds_of_a_removed_copy_of_the_sources_go_and_no_others() {
    let root = scratch("copies");
    let generation = root.join("gen");
    let (gone, kept) = (root.join("dryml-src/0123456789abcdef"), root.join("dryml-src/fedcba9876543210"));
    for (hash, copy) in [("1111111111111111", &gone), ("2222222222222222", &kept)] {
        unit(&generation, "dryml", hash, 4, Duration::ZERO);
        let d = generation.join(format!("x86_64-unknown-linux-gnu/debug/deps/dryml-{hash}.d"));
        std::fs::write(&d, format!("{}: {}/runtime/src/lib.rs\n", d.display(), copy.display())).unwrap();
    }
    // A copy whose path starts with the removed one's is another copy.
    unit(&generation, "serde", "3333333333333333", 4, Duration::ZERO);
    let d = generation.join("x86_64-unknown-linux-gnu/debug/deps/serde-3333333333333333.d");
    std::fs::write(&d, format!("{}: {}0/src/lib.rs\n", d.display(), gone.display())).unwrap();
    assert!(super::super::source::remove_builds_from(&generation, &gone) > 0);
    let profile = generation.join("x86_64-unknown-linux-gnu/debug");
    assert!(!profile.join("deps/libdryml-1111111111111111.rlib").exists());
    assert!(!profile.join(".fingerprint/dryml-1111111111111111").exists());
    assert!(profile.join("deps/libdryml-2222222222222222.rlib").exists());
    assert!(profile.join("deps/libserde-3333333333333333.rlib").exists());
    std::fs::remove_dir_all(&root).unwrap();
}
