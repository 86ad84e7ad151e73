//! `local`'s unit tests.

use super::{Host, Local};
use crate::host::abs;
use anyhow::Result;
use evcxr::{Analysis, TypeName};

#[test]
fn priming_names_each_dependency_by_the_name_cells_use() {
    let toml = b"[package]\nname = \"ctx\"\n\n[dependencies]\ncandle-core = \"0.11\"\nndarray = { version = \"0.16\" }\ndryml = { path = \"/r\" }\n\n[profile.dev]\nopt-level = 1\n";
    let source = super::priming_source(toml);
    assert!(
        source.contains("let _ = candle_core::evcxr_priming;\n")
            && source.contains("let _ = ndarray::evcxr_priming;\n"),
        "{source}"
    );
    assert!(!source.contains("opt_level") && !source.contains("name::") && source.ends_with("}\n"), "{source}");
    // The kernel's own crate, there from the start, is left to the first request.
    assert!(!source.contains("dryml::"), "{source}");
}

fn cargo_toml(dir: &std::path::Path, name: &str) -> Result<()> {
    let toml = format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n");
    Ok(std::fs::write(dir.join("Cargo.toml"), toml)?)
}

fn type_of_x(analysis: &mut Local) -> Result<TypeName> {
    let source = "fn f() { let x = 1u8; }".to_owned();
    Ok(analysis.variables_in(source, "f")?.remove("x").expect("x").type_name)
}

#[test]
fn a_crate_that_leaves_before_its_load_leaves_the_others_analysed() -> Result<()> {
    let (a, b, c) = (tempfile::tempdir()?, tempfile::tempdir()?, tempfile::tempdir()?);
    let u8_type = TypeName::Named("u8".into());
    let mut first = Local::new(a.path())?;
    first.without_sysroot();
    cargo_toml(a.path(), "a")?;
    cargo_toml(c.path(), "c")?;
    assert_eq!(type_of_x(&mut first)?, u8_type);
    // b is selected (a request came) and leaves before its Cargo.toml was ever loaded: its
    // file is in no source root (ci24 panicked here).
    let b_root = abs(b.path())?;
    drop(Host::locked(&first.host(), &b_root, true)?);
    Local::attach(first.host(), b.path())?.detach();
    let mut third = Local::attach(first.host(), c.path())?;
    assert_eq!(type_of_x(&mut third)?, u8_type);
    // c leaves after its load: a is still analysed; b and c are gone.
    third.detach();
    assert_eq!(type_of_x(&mut first)?, u8_type);
    assert!(Host::locked(&first.host(), &b_root, false).is_err());
    assert!(Host::locked(&first.host(), &abs(c.path())?, false).is_err());
    Ok(())
}

#[test]
fn a_crate_whose_cargo_metadata_fails_is_not_analysed_without_its_dependencies() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let gone = dir.path().join("gone");
    depending(dir.path(), "a", &gone, "")?;
    let mut analysis = Local::new(dir.path())?;
    analysis.without_sysroot();
    // rust-analyzer alone falls back to the crate without dependencies, and types nothing
    // of theirs for as long as the Cargo.toml stays.
    let manifest = abs(&dir.path().join("Cargo.toml"))?;
    let error = crate::load::load(manifest, false).err().expect("a failed load").to_string();
    assert!(error.contains("cargo metadata failed") && error.contains("gone"), "{error}");
    // The written types, and rustc asked for the others.
    let source = "fn f() { let x: u8 = 1; let t = shared::Thing::default(); }".to_owned();
    let mut found: Vec<_> = analysis.variables_in(source, "f")?.into_iter().map(|(n, v)| (n, v.type_name)).collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(found, [("t".to_string(), TypeName::Unknown), ("x".to_string(), TypeName::Named("u8".into()))]);
    // What the server logs of such a miss reads nothing the database lacks.
    assert_eq!(analysis.why_unknown("f"), ["the crate was never loaded"]);
    Ok(())
}

#[test]
fn a_shared_host_where_the_prelude_has_no_type_starts_again_and_others_load_again() -> Result<()> {
    let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    cargo_toml(a.path(), "a")?;
    cargo_toml(b.path(), "b")?;
    let mut first = Local::new(a.path())?;
    let mut second = Local::attach(first.host(), b.path())?;
    let u8_type = TypeName::Named("u8".into());
    assert_eq!(type_of_x(&mut first)?, u8_type);
    // A crate without std's prelude (as a broken graph leaves one) misses `y`; the probe
    // finds no `vec!` either, so the host starts again with b alone.
    let source = "#![no_std]\nfn f() { let x = 1u8; let y = vec![2u8]; }".to_owned();
    let found = second.variables_in(source, "f")?;
    assert_eq!((&found["x"].type_name, &found["y"].type_name), (&u8_type, &TypeName::Unknown));
    assert!(first.host().lock().unwrap().alone(), "a left the host that started again");
    // a loads again at its next request.
    assert_eq!(type_of_x(&mut first)?, u8_type);
    Ok(())
}

/// A crate that depends on `shared` by path, as each notebook's depends on the runtime
/// crate in the build cache; `extra` adds to its dependencies.
fn depending(dir: &std::path::Path, name: &str, shared: &std::path::Path, extra: &str) -> Result<()> {
    let toml = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         [dependencies]\nshared = {{ path = {:?} }}\n{extra}",
        shared.display().to_string()
    );
    Ok(std::fs::write(dir.join("Cargo.toml"), toml)?)
}

fn types(analysis: &mut Local) -> Result<Vec<(String, TypeName)>> {
    let source = "fn f() { let thing = shared::Thing::default(); let all = vec![thing.0]; }";
    let mut found: Vec<_> =
        analysis.variables_in(source.into(), "f")?.into_iter().map(|(n, v)| (n, v.type_name)).collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

#[test]
fn crates_sharing_a_path_dependency_keep_their_types_as_others_come_and_go() -> Result<()> {
    let dirs = [tempfile::tempdir()?, tempfile::tempdir()?, tempfile::tempdir()?, tempfile::tempdir()?];
    let (shared, other) = (dirs[3].path().join("shared"), dirs[3].path().join("other"));
    let shared = shared.as_path();
    std::fs::create_dir_all(other.join("src"))?;
    cargo_toml(&other, "other")?;
    std::fs::write(other.join("src/lib.rs"), "pub fn one() -> u8 { 1 }")?;
    std::fs::create_dir_all(shared.join("src"))?;
    cargo_toml(shared, "shared")?;
    let toml = std::fs::read_to_string(shared.join("Cargo.toml"))?;
    std::fs::write(shared.join("Cargo.toml"), toml + "\n[features]\nwide = []\n")?;
    std::fs::write(
        shared.join("src/lib.rs"),
        "#[derive(Default)] pub struct Thing(pub u16);\n#[cfg(feature = \"wide\")] pub struct Wide;",
    )?;
    let (a, b, c) = (dirs[0].path(), dirs[1].path(), dirs[2].path());
    let named = |t: &str| TypeName::Named(t.into());
    let expected = vec![("all".to_string(), named("Vec<u16>")), ("thing".to_string(), named("shared::Thing"))];
    // a asks for a feature of the shared crate, as a notebook that named a framework asks
    // dryml's: two crates of the same files in the union.
    for (dir, name, features) in [(a, "a", "[\"wide\"]"), (b, "b", "[]"), (c, "c", "[]")] {
        let toml = format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
            [dependencies]\nshared = {{ path = {:?}, features = {features} }}\n",
            shared.display().to_string()
        );
        std::fs::write(dir.join("Cargo.toml"), toml)?;
    }
    let mut first = Local::new(a)?;
    assert_eq!(types(&mut first)?, expected, "a alone");
    let mut second = Local::attach(first.host(), b)?;
    assert_eq!(types(&mut second)?, expected, "b beside a");
    assert_eq!(types(&mut first)?, expected, "a selected again");
    first.detach();
    let mut third = Local::attach(second.host(), c)?;
    assert_eq!(types(&mut third)?, expected, "c after a left");
    assert_eq!(types(&mut second)?, expected, "b selected again");
    // b's Cargo.toml changes (a `:dep`): its graph is loaded again beside c's.
    depending(b, "b", shared, &format!("other = {{ path = {:?} }}\n", other.display().to_string()))?;
    assert_eq!(types(&mut second)?, expected, "b reloaded");
    assert_eq!(types(&mut third)?, expected, "c after b reloaded");
    third.detach();
    assert_eq!(types(&mut second)?, expected, "b alone");
    Ok(())
}
