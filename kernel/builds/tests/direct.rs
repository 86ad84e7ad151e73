//! The rustc-alone build against real cargo builds of a small cell crate with a path dependency:
//! it builds what cargo would, shows the cell's own errors, and sends the build back to cargo
//! whenever something cargo would look at has changed.

use dryml_builds::{Builds, DirectRustc, Outcome};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

/// A cell crate `cell` (a cdylib, as evcxr's) that calls its path dependency `dep`.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let path = dir.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        write("dep/Cargo.toml", "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
        write("dep/src/lib.rs", "pub fn two() -> i32 { 2 }\n");
        write(
            "cell/Cargo.toml",
            "[package]\nname = \"cell\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n\
             [dependencies]\ndep = { path = \"../dep\" }\n\n[workspace]\n",
        );
        write("cell/src/lib.rs", &cell_source(1));
        Fixture { dir }
    }

    fn cell_dir(&self) -> PathBuf {
        self.dir.path().join("cell")
    }

    fn record(&self) -> PathBuf {
        self.dir.path().join("record.json")
    }

    /// How the kernel would call cargo: the kernel's wrapper (on its own here) records the cell
    /// crate's rustc command.
    fn cargo(&self) -> Command {
        let mut cargo = Command::new(env!("CARGO"));
        // The build directory is the fixture's whatever the environment says (the test command
        // sets CARGO_BUILD_BUILD_DIR), as the kernel's builds set it.
        for var in ["CARGO_BUILD_BUILD_DIR", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "RUSTC_WRAPPER"] {
            cargo.env_remove(var);
        }
        cargo
            .args(["--offline", "build", "--message-format=json"])
            .current_dir(self.cell_dir())
            .env("CARGO_TARGET_DIR", self.dir.path().join("target"))
            .envs(dryml_builds::build_env(
                own_bin("dryml-record-rustc", env!("CARGO_BIN_EXE_dryml-record-rustc")).as_ref(),
                "cell",
                &self.record(),
            ));
        cargo
    }

    /// A cargo build, then what it recorded.
    fn cargo_build(&self) -> DirectRustc {
        let started = SystemTime::now();
        let output = self.cargo().output().unwrap();
        assert!(output.status.success(), "cargo: {}", String::from_utf8_lossy(&output.stderr));
        DirectRustc::load(&self.record(), &self.cargo(), started).expect("a command recorded")
    }

    fn write_cell(&self, source: &str) {
        fs::write(self.cell_dir().join("src/lib.rs"), source).unwrap();
    }
}

fn cell_source(n: i32) -> String {
    format!("#[no_mangle]\npub extern \"C\" fn answer() -> i32 {{ dep::two() * {n} }}\n")
}

fn modified(path: &Path) -> SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn a_changed_cell_is_built_by_the_recorded_command_alone() {
    let fixture = Fixture::new();
    let direct = fixture.cargo_build();
    let built_by_cargo = fixture.dir.path().join("target/debug/deps/libcell.so");
    let before = modified(&built_by_cargo);
    std::thread::sleep(Duration::from_millis(20));
    fixture.write_cell(&cell_source(21));
    let Outcome::Built(library) = direct.build(&fixture.cargo()) else { panic!("not built alone") };
    // Where cargo uplifts it, the same file as rustc wrote.
    assert_eq!(library, fixture.dir.path().join("target/debug/libcell.so"));
    assert!(modified(&built_by_cargo) > before, "the library was written again");
    assert_eq!(fs::read(&library).unwrap(), fs::read(&built_by_cargo).unwrap());
    // Again with the same command: the record stays good for cell after cell.
    fixture.write_cell(&cell_source(3));
    assert!(matches!(direct.build(&fixture.cargo()), Outcome::Built(_)));
}

#[test]
fn the_cells_own_errors_are_rustcs_output_not_a_trip_to_cargo() {
    let fixture = Fixture::new();
    let direct = fixture.cargo_build();
    fixture.write_cell("pub fn f() -> u8 { \"no\" }\n");
    let Outcome::Failed(output) = direct.build(&fixture.cargo()) else { panic!("no failure") };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("E0308") && stderr.contains("mismatched types"), "{stderr}");
}

/// Each change that cargo would notice, made after the record: the build goes back to cargo.
#[test]
fn whatever_cargo_would_look_at_sends_the_build_back_to_cargo() {
    type Change = fn(&Fixture, &mut Command);
    let changes: [(&str, Change); 6] = [
        ("a path dependency's source", |f, _| {
            fs::write(f.dir.path().join("dep/src/lib.rs"), "pub fn two() -> i32 { 3 }\n").unwrap()
        }),
        ("a new file in a path dependency", |f, _| fs::write(f.dir.path().join("dep/src/more.rs"), "").unwrap()),
        ("Cargo.toml", |f, _| {
            let manifest = f.cell_dir().join("Cargo.toml");
            let text = fs::read_to_string(&manifest).unwrap();
            fs::write(manifest, text.replace("[workspace]", "[features]\nx = []\n\n[workspace]")).unwrap();
        }),
        ("the cargo config", |f, _| {
            fs::create_dir_all(f.cell_dir().join(".cargo")).unwrap();
            fs::write(f.cell_dir().join(".cargo/config.toml"), "[build]\n").unwrap();
        }),
        ("how cargo is called", |_, cargo| {
            cargo.env("RUSTFLAGS", "-Cdebuginfo=0");
        }),
        ("a library the command links", |f, _| {
            let deps = f.dir.path().join("target/debug/deps");
            for entry in fs::read_dir(deps).unwrap() {
                let path = entry.unwrap().path();
                if path.file_name().unwrap().to_string_lossy().starts_with("libdep-") {
                    let file = fs::File::options().append(true).open(&path).unwrap();
                    file.set_modified(SystemTime::now() + Duration::from_secs(5)).unwrap();
                }
            }
        }),
    ];
    for (what, change) in changes {
        let fixture = Fixture::new();
        let direct = fixture.cargo_build();
        let mut cargo = fixture.cargo();
        change(&fixture, &mut cargo);
        fixture.write_cell(&cell_source(4));
        assert!(matches!(direct.build(&cargo), Outcome::Stale), "{what} changed, yet rustc ran alone");
    }
}

#[test]
fn another_build_holding_the_directory_is_waited_for_through_cargo() {
    let fixture = Fixture::new();
    let direct = fixture.cargo_build();
    let lock = fs::File::options().write(true).open(fixture.dir.path().join("target/debug/.cargo-lock")).unwrap();
    lock.lock().unwrap();
    fixture.write_cell(&cell_source(5));
    assert!(matches!(direct.build(&fixture.cargo()), Outcome::Stale));
    drop(lock);
    assert!(matches!(direct.build(&fixture.cargo()), Outcome::Built(_)));
}

#[test]
fn no_record_where_a_source_changed_during_cargos_build_or_none_was_written() {
    let fixture = Fixture::new();
    fixture.cargo_build();
    // A build that started before the dependency's files were last written may have read them
    // before that write.
    assert!(DirectRustc::load(&fixture.record(), &fixture.cargo(), SystemTime::UNIX_EPOCH).is_none());
    assert!(DirectRustc::load(&fixture.dir.path().join("none.json"), &fixture.cargo(), SystemTime::now()).is_none());
}

/// The kernel's loop: cargo first (the wrapper records), rustc alone for the next cells, and cargo
/// again, recording anew, once how it is called changed.
#[test]
fn builds_go_to_cargo_then_rustc_alone_until_cargo_is_called_otherwise() {
    let fixture = Fixture::new();
    let mut builds = Builds::new(fixture.record());
    let cargo_builds = |cargo: &mut Command| {
        let output = cargo.output().unwrap();
        assert!(output.status.success(), "cargo: {}", String::from_utf8_lossy(&output.stderr));
    };
    assert!(matches!(builds.build(&fixture.cargo()), Outcome::Stale), "nothing recorded yet");
    cargo_builds(&mut fixture.cargo());
    assert!(fixture.record().is_file(), "the wrapper recorded the cell crate's command");
    fixture.write_cell(&cell_source(6));
    assert!(matches!(builds.build(&fixture.cargo()), Outcome::Built(_)));
    // Settled once cargo is done, the record is read then, not by the next build.
    let mut settled = Builds::new(fixture.record());
    assert!(matches!(settled.build(&fixture.cargo()), Outcome::Stale));
    fixture.write_cell(&cell_source(10));
    cargo_builds(&mut fixture.cargo());
    settled.settle();
    let record = fs::read(fixture.record()).unwrap();
    fs::remove_file(fixture.record()).unwrap();
    assert!(matches!(settled.build(&fixture.cargo()), Outcome::Built(_)));
    fs::write(fixture.record(), record).unwrap();
    let debugging = || {
        let mut cargo = fixture.cargo();
        cargo.env("DRYML_DEBUG_CELLS", "1");
        cargo
    };
    assert!(matches!(builds.build(&debugging()), Outcome::Stale));
    assert!(!fixture.record().exists(), "the old command is gone before cargo runs");
    fixture.write_cell(&cell_source(11));
    cargo_builds(&mut debugging());
    let recorded: dryml_builds::Recorded = serde_json::from_slice(&fs::read(fixture.record()).unwrap()).unwrap();
    assert!(recorded.args.windows(2).any(|w| w == ["-C", "debuginfo=2"]), "the wrapper's debug flags");
    // Called otherwise than the build that recorded: cargo's again, never the debugger's command.
    assert!(matches!(builds.build(&fixture.cargo()), Outcome::Stale));
    fixture.write_cell(&cell_source(7));
    cargo_builds(&mut fixture.cargo());
    assert!(matches!(builds.build(&fixture.cargo()), Outcome::Built(_)));
    // A cell's `:dep` writes Cargo.toml before its build, after the one cargo recorded: cargo's,
    // though the command is first read then.
    assert!(matches!(builds.build(&debugging()), Outcome::Stale));
    fixture.write_cell(&cell_source(8));
    cargo_builds(&mut debugging());
    let manifest = fixture.cell_dir().join("Cargo.toml");
    let text = fs::read_to_string(&manifest).unwrap();
    fs::write(&manifest, text.replace("[workspace]", "[features]\nx = []\n\n[workspace]")).unwrap();
    assert!(matches!(builds.build(&debugging()), Outcome::Stale), "built alone after a :dep");
    // A library the command links, gone (the build cache emptied) before the next cell.
    cargo_builds(&mut debugging());
    assert!(matches!(builds.build(&debugging()), Outcome::Built(_)));
    assert!(matches!(builds.build(&fixture.cargo()), Outcome::Stale));
    fixture.write_cell(&cell_source(9));
    cargo_builds(&mut fixture.cargo());
    for entry in fs::read_dir(fixture.dir.path().join("target/debug/deps")).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("libdep-") {
            fs::remove_file(path).unwrap();
        }
    }
    assert!(matches!(builds.build(&fixture.cargo()), Outcome::Stale), "built alone without its dependency");
}

/// The package's binary `name`, as cargo gives it to this run: the machine's build directory,
/// which clones share, may hold this test as another checkout compiled it, with its path in `env!`.
fn own_bin(name: &str, compiled: &str) -> std::path::PathBuf {
    std::env::var_os(format!("CARGO_BIN_EXE_{name}")).map_or_else(|| compiled.into(), Into::into)
}
