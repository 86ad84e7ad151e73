//! Folders removed under the analysis: the one its process was started from (a kernel run in a
//! notebook's folder, then deleted), and the one cargo runs rustc in (ci48). Its own test
//! binary: it changes the process's working directory.

use anyhow::Result;
use dryml_analysis::Client;
use evcxr::{Analysis, TypeName};
use std::path::PathBuf;

#[test]
fn a_process_started_in_a_removed_directory_still_loads_crates_whole() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("a");
    std::fs::create_dir_all(root.join("src"))?;
    std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"a\"\nversion = \"0.1.0\"\nedition = \"2024\"\n")?;
    let sockets = dir.path().join("sockets");
    std::fs::create_dir(&sockets)?;
    let gone = dir.path().join("gone");
    std::fs::create_dir(&gone)?;
    std::env::set_current_dir(&gone)?;
    let program = PathBuf::from(env!("CARGO_BIN_EXE_dryml-analysis-serve"));
    let source = "fn f() { let v = vec![1u8]; let n = v.len(); }".to_owned();
    // A first kernel starts the process from its folder, which goes while the process serves.
    let first_root = dir.path().join("first");
    std::fs::create_dir_all(first_root.join("src"))?;
    std::fs::write(
        first_root.join("Cargo.toml"),
        "[package]\nname = \"first\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )?;
    let mut first = Client::new(program.clone(), Some(sockets.clone()), &first_root);
    first.variables_in(source.clone(), "f")?;
    std::env::set_current_dir(dir.path())?;
    std::fs::remove_dir(&gone)?;
    let mut client = Client::new(program.clone(), Some(sockets.clone()), &root);
    let types = client.variables_in(source, "f")?;
    let log = std::fs::read_dir(&sockets)?
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    assert_eq!(
        (&types["v"].type_name, &types["n"].type_name),
        (&TypeName::Named("Vec<u8>".into()), &TypeName::Named("usize".into())),
        "{log}"
    );
    assert!(!log.contains("incomplete load"), "{log}");

    // As a load's rustc wrapper in a folder since removed (where cargo ran, in ci48): rustc
    // runs, from `/`. rustup's proxy alone exits with "Could not locate working directory".
    let doomed = dir.path().join("doomed");
    std::fs::create_dir(&doomed)?;
    std::env::set_current_dir(&doomed)?;
    std::fs::remove_dir(&doomed)?;
    let out = std::process::Command::new(&program).env("DRYML_ANALYSIS_RUSTC", "1").args(["rustc", "-vV"]).output()?;
    std::env::set_current_dir(dir.path())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.starts_with("rustc "), "{out:?}");
    Ok(())
}
