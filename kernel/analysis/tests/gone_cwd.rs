//! Files removed under the analysis: the folder its process was started from (a kernel run in a
//! notebook's folder, then deleted), its own binary (a kernel rebuilt), and the folder cargo runs
//! rustc in (ci48). Its own test binary: it changes the process's working directory.

use anyhow::Result;
use dryml_analysis::Client;
use evcxr::{Analysis, TypeName};

/// What the analysis processes of `sockets` logged.
fn logs(sockets: &std::path::Path) -> String {
    let files = std::fs::read_dir(sockets).into_iter().flatten().flatten();
    let logs = files.filter(|e| e.path().extension().is_some_and(|x| x == "log"));
    logs.map(|e| std::fs::read_to_string(e.path()).unwrap_or_default()).collect()
}

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
    // A copy of the server, removed once it runs, as a kernel rebuilt under its notebooks: the
    // loads' rustc wrapper is the running binary still.
    let program = dir.path().join("dryml-analysis-serve");
    std::fs::copy(own_bin("dryml-analysis-serve", env!("CARGO_BIN_EXE_dryml-analysis-serve")), &program)?;
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
    let types = client.variables_in(source.clone(), "f")?;
    let log = logs(&sockets);
    assert_eq!(
        (&types["v"].type_name, &types["n"].type_name),
        (&TypeName::Named("Vec<u8>".into()), &TypeName::Named("usize".into())),
        "{log}"
    );
    assert!(!log.contains("incomplete load"), "{log}");

    // The server's file removed (a kernel rebuilt under its notebooks), a crate loads again in
    // the process still running: the loads' rustc wrapper is that process's binary.
    std::fs::remove_file(&program)?;
    let toml = std::fs::read_to_string(first_root.join("Cargo.toml"))?;
    std::fs::write(first_root.join("Cargo.toml"), toml + "\n[features]\nwide = []\n")?;
    let types = first.variables_in(source.clone(), "f")?;
    assert_eq!(types["v"].type_name, TypeName::Named("Vec<u8>".into()), "{}", logs(&sockets));
    assert!(!logs(&sockets).contains("incomplete load"), "{}", logs(&sockets));

    // As a load's rustc wrapper in a folder since removed (where cargo ran, in ci48): rustc
    // runs, from `/`. rustup's proxy alone exits with "Could not locate working directory".
    let doomed = dir.path().join("doomed");
    std::fs::create_dir(&doomed)?;
    std::env::set_current_dir(&doomed)?;
    std::fs::remove_dir(&doomed)?;
    let server = own_bin("dryml-analysis-serve", env!("CARGO_BIN_EXE_dryml-analysis-serve"));
    let out = std::process::Command::new(server).env("DRYML_ANALYSIS_RUSTC", "1").args(["rustc", "-vV"]).output()?;
    std::env::set_current_dir(dir.path())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.starts_with("rustc "), "{out:?}");
    Ok(())
}

/// The package's binary `name`, as cargo gives it to this run: the machine's build directory,
/// which clones share, may hold this test as another checkout compiled it, with its path in `env!`.
fn own_bin(name: &str, compiled: &str) -> std::path::PathBuf {
    std::env::var_os(format!("CARGO_BIN_EXE_{name}")).map_or_else(|| compiled.into(), Into::into)
}
