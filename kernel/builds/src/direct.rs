//! The kernel's half: the recorded command run again, while everything it read is as it was.

use crate::record::Recorded;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

/// Past this many files and directories in path dependencies, every build goes through cargo:
/// checking them all each cell would cost what cargo does.
const MAX_WATCHED: usize = 5000;

/// rustc's errors for a dependency that is gone, or was rebuilt or replaced under the command
/// (can't find crate, possibly newer version, incompatible rustc, invalid metadata...): cargo's
/// to sort out, not the user's.
const STALE_CODES: &[&str] = &["E0460", "E0461", "E0462", "E0463", "E0464", "E0514", "E0786"];

/// A file's modification time and length; `None` if it is missing. Links are followed, as cargo
/// follows them to the sources.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let meta = fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// What a build without cargo came to.
#[derive(Debug)]
pub enum Outcome {
    /// The cell crate's library, linked to where cargo would uplift it (the one rustc wrote, in
    /// the shared build directory, stays cargo's).
    Built(PathBuf),
    /// rustc's output for the cell's own compile errors.
    Failed(Output),
    /// Something changed that cargo must look at.
    Stale,
}

/// The cell crate's rustc command from cargo's last build of it, with what must stay as it is for
/// that command to build what cargo would.
#[derive(Debug)]
pub struct DirectRustc {
    command: Recorded,
    /// How cargo was called (program, arguments, environment, directory), as text.
    cargo: String,
    cargo_toml: Option<Vec<u8>>,
    config_toml: Option<Vec<u8>>,
    watched: Vec<(PathBuf, Stamp)>,
    out_dir: PathBuf,
    library: String,
}

/// How `cargo` is called, as text to compare.
fn cargo_call(cargo: &Command) -> String {
    let mut envs: Vec<_> = cargo.get_envs().collect();
    envs.sort();
    format!(
        "{:?} {:?} {envs:?} {:?}",
        cargo.get_program(),
        cargo.get_args().collect::<Vec<_>>(),
        cargo.get_current_dir()
    )
}

/// `cargo` again (program, arguments, environment, directory), to run or be asked later how
/// it was called.
pub fn copy(cargo: &Command) -> Command {
    let mut copy = Command::new(cargo.get_program());
    copy.args(cargo.get_args());
    in_env_of(cargo, &mut copy);
    copy
}

/// `command` with `cargo`'s environment and directory.
fn in_env_of(cargo: &Command, command: &mut Command) {
    for (k, v) in cargo.get_envs() {
        match v {
            Some(v) => command.env(k, v),
            None => command.env_remove(k),
        };
    }
    if let Some(dir) = cargo.get_current_dir() {
        command.current_dir(dir);
    }
}

/// The crate's manifest and cargo config, as bytes (`None`: missing).
fn manifests(crate_dir: &Path) -> [Option<Vec<u8>>; 2] {
    [fs::read(crate_dir.join("Cargo.toml")).ok(), fs::read(crate_dir.join(".cargo").join("config.toml")).ok()]
}

impl DirectRustc {
    /// After a cargo build (`cargo`, run in the cell crate's directory) that `started` then: the
    /// command the wrapper recorded in `record`, with what it read. `None`: the next build goes
    /// through cargo (no record, a path dependency too big to watch or changed during the build).
    pub fn load(record: &Path, cargo: &Command, started: SystemTime) -> Option<DirectRustc> {
        let [cargo_toml, config_toml] = manifests(cargo.get_current_dir()?);
        DirectRustc::load_as(record, cargo, started, [cargo_toml, config_toml])
    }

    /// As [`DirectRustc::load`], with the crate's manifests as that build read them.
    fn load_as(
        record: &Path,
        cargo: &Command,
        started: SystemTime,
        [cargo_toml, config_toml]: [Option<Vec<u8>>; 2],
    ) -> Option<DirectRustc> {
        if !cargo_runs_rustc_alone(cargo) {
            return None;
        }
        let command: Recorded = serde_json::from_slice(&fs::read(record).ok()?).ok()?;
        let out_dir = PathBuf::from(command.arg_after("--out-dir")?);
        let name = command.arg_after("--crate-name")?;
        let library = format!("{}{name}{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
        let mut watched = Vec::new();
        // The libraries the command links (a dependency rebuilt or evicted shows here; one gone
        // since cargo's build, read later by `Builds`, is cargo's to build again).
        for pair in command.args.windows(2) {
            if let ("--extern", Some((_, path))) = (pair[0].as_str(), pair[1].split_once('=')) {
                watched.push((PathBuf::from(path), Some(stamp(Path::new(path))?)));
            }
        }
        // Path dependencies: cargo rebuilds one when any of its sources changes.
        for dir in path_packages(cargo)? {
            watch_tree(&dir, &mut watched, started)?;
        }
        Some(DirectRustc { cargo: cargo_call(cargo), cargo_toml, config_toml, command, watched, out_dir, library })
    }

    /// Builds the cell crate (its source written already) with the recorded command, if `cargo`
    /// (how it would be built now) and all the command read are as they were.
    pub fn build(&self, cargo: &Command) -> Outcome {
        let Some(crate_dir) = cargo.get_current_dir() else {
            return Outcome::Stale;
        };
        if cargo_call(cargo) != self.cargo
            || manifests(crate_dir) != [self.cargo_toml.clone(), self.config_toml.clone()]
        {
            return Outcome::Stale;
        }
        // Cargo's own lock on the build directory, so that no other kernel's cargo (or the build
        // cache's eviction) changes what this build reads meanwhile. A build holding it is
        // waited for through cargo, which an interrupt can kill.
        let Some(profile_dir) = self.out_dir.parent() else {
            return Outcome::Stale;
        };
        let lock = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(profile_dir.join(".cargo-lock"));
        let Ok(lock) = lock else {
            return Outcome::Stale;
        };
        if lock.try_lock().is_err() || self.watched.iter().any(|(path, was)| stamp(path) != *was) {
            return Outcome::Stale;
        }
        let output = Command::new(&self.command.program)
            .args(&self.command.args)
            .env_clear()
            .envs(self.command.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.command.cwd)
            .output();
        match output {
            Ok(output) if output.status.success() => {
                uplift(&self.out_dir.join(&self.library), cargo).map_or(Outcome::Stale, Outcome::Built)
            }
            Ok(output) if !names_a_stale_dependency(&output) => Outcome::Failed(output),
            _ => Outcome::Stale,
        }
    }
}

/// The cell crate's builds one after another: rustc alone while the command cargo last ran for it
/// stays good, else cargo, whose command the wrapper records for the next build.
#[derive(Debug)]
pub struct Builds {
    record: PathBuf,
    direct: Option<DirectRustc>,
    /// The cargo build that the wrapper records: when it began, how cargo was called, and the
    /// crate's manifests it read (a cell's `:dep` writes Cargo.toml before its build).
    cargo_build: Option<(SystemTime, Command, [Option<Vec<u8>>; 2])>,
}

impl Builds {
    /// Builds whose wrapper records in `record` ([`crate::build_env`]).
    pub fn new(record: PathBuf) -> Builds {
        Builds { record, direct: None, cargo_build: None }
    }

    /// Once the cargo build that [`Builds::build`] left to cargo has ended: reads what the
    /// wrapper recorded (`cargo metadata` among it, about 0.1 s), so the next cell need not.
    pub fn settle(&mut self) {
        if let Some((started, cargo, read)) = self.cargo_build.take() {
            self.direct = DirectRustc::load_as(&self.record, &cargo, started, read);
        }
    }

    /// Before each build (`cargo`: how it would be called now): `Stale` means cargo builds it.
    pub fn build(&mut self, cargo: &Command) -> Outcome {
        match &self.cargo_build {
            Some((_, then, _)) if cargo_call(then) == cargo_call(cargo) => self.settle(),
            _ => self.cargo_build = None,
        }
        match self.direct.as_ref().map(|direct| direct.build(cargo)) {
            Some(Outcome::Stale) | None => {}
            Some(done) => return done,
        }
        self.direct = None;
        // What the wrapper records then is this build's command, or nothing.
        let _ = fs::remove_file(&self.record);
        let read = cargo.get_current_dir().map(manifests).unwrap_or_default();
        self.cargo_build = Some((SystemTime::now(), copy(cargo), read));
        Outcome::Stale
    }
}

/// Whether cargo runs rustc as the recorded command would alone: not under `mold -run` (whose
/// linker it hands rustc), with `-Ztime-passes` (whose report is cargo's to show), or under a
/// `RUSTC_WRAPPER` (sccache, evcxr's cache), which must see every build.
fn cargo_runs_rustc_alone(cargo: &Command) -> bool {
    let env = |key: &str| cargo.get_envs().find(|(k, _)| *k == key).and_then(|(_, v)| v);
    Path::new(cargo.get_program()).file_name() != Some("mold".as_ref())
        && !env("RUSTFLAGS").is_some_and(|flags| flags.to_string_lossy().contains("-Ztime-passes"))
        && env("RUSTC_WRAPPER").is_none()
}

/// Links `library` (in a profile's `deps`) to where `cargo` would uplift it: the target
/// directory's `[<triple>/]<profile>/`, `CARGO_TARGET_DIR` or `target` in the crate's directory.
fn uplift(library: &Path, cargo: &Command) -> Option<PathBuf> {
    let profile = library.parent()?.parent()?.file_name()?;
    let target_dir = cargo.get_envs().find(|(k, _)| *k == "CARGO_TARGET_DIR").and_then(|(_, v)| v);
    let mut dir = cargo.get_current_dir()?.join(target_dir.unwrap_or("target".as_ref()));
    let mut args = cargo.get_args();
    if let Some(triple) = args.by_ref().find(|a| *a == "--target").and_then(|_| args.next()) {
        dir.push(triple);
    }
    dir.push(profile);
    let uplifted = dir.join(library.file_name()?);
    let _ = fs::remove_file(&uplifted);
    fs::create_dir_all(&dir).ok()?;
    fs::hard_link(library, &uplifted).or_else(|_| fs::copy(library, &uplifted).map(|_| ())).ok()?;
    Some(uplifted)
}

/// Whether rustc's JSON diagnostics include one of [`STALE_CODES`].
fn names_a_stale_dependency(output: &Output) -> bool {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .any(|d| d["code"]["code"].as_str().is_some_and(|c| STALE_CODES.contains(&c)))
}

/// The directories of the path packages in the dependency graph of the crate `cargo` builds:
/// `cargo metadata` with its program, options, environment and directory.
fn path_packages(cargo: &Command) -> Option<Vec<PathBuf>> {
    let mut metadata = Command::new(cargo.get_program());
    // Options before the subcommand (`--offline`) apply to it too.
    metadata.args(cargo.get_args().take_while(|a| a.to_str().is_some_and(|a| a.starts_with('-'))));
    metadata.args(["metadata", "--format-version", "1"]);
    cargo.get_current_dir()?;
    in_env_of(cargo, &mut metadata);
    let output = metadata.output().ok()?;
    if !output.status.success() {
        return None;
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let root = metadata["resolve"]["root"].as_str();
    let mut dirs = Vec::new();
    for package in metadata["packages"].as_array()? {
        if package["source"].is_null() && package["id"].as_str() != root {
            dirs.push(Path::new(package["manifest_path"].as_str()?).parent()?.to_owned());
        }
    }
    Some(dirs)
}

/// Every file and directory under `dir` but build output and hidden ones, with its stamp.
/// `None` past [`MAX_WATCHED`] (which also ends a walk around a cycle of links), or for a file
/// changed since the build `started`: cargo may have read it before the change.
fn watch_tree(dir: &Path, watched: &mut Vec<(PathBuf, Stamp)>, started: SystemTime) -> Option<()> {
    watched.push((dir.to_owned(), stamp(dir)));
    for entry in fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        if watched.len() >= MAX_WATCHED {
            return None;
        }
        if path.is_dir() {
            watch_tree(&path, watched, started)?;
        } else {
            let stamped = stamp(&path);
            if stamped.is_some_and(|(modified, _)| modified >= started) {
                return None;
            }
            watched.push((path, stamped));
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rustc's real output for `source`, a library checked on its own.
    fn rustc(source: &str) -> Output {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("lib.rs"), source).unwrap();
        Command::new("rustc")
            .args(["--error-format=json", "--crate-type=lib", "--emit=metadata", "lib.rs"])
            .current_dir(dir.path())
            .output()
            .unwrap()
    }

    #[test]
    fn rustc_runs_alone_only_where_cargo_would_run_it_as_recorded() {
        let mut cargo = Command::new("/usr/bin/cargo");
        cargo.env("RUSTFLAGS", "-Cprefer-dynamic");
        assert!(cargo_runs_rustc_alone(&cargo));
        cargo.env("RUSTFLAGS", "-Cprefer-dynamic -Ztime-passes");
        assert!(!cargo_runs_rustc_alone(&cargo));
        assert!(!cargo_runs_rustc_alone(Command::new("mold").args(["-run", "/usr/bin/cargo"])));
        cargo.env("RUSTFLAGS", "-Cprefer-dynamic").env("RUSTC_WRAPPER", "/usr/bin/sccache");
        assert!(!cargo_runs_rustc_alone(&cargo));
    }

    #[test]
    fn a_missing_dependency_is_cargos_to_sort_out_a_type_error_the_users() {
        assert!(names_a_stale_dependency(&rustc("extern crate gone_since_the_record;")));
        assert!(!names_a_stale_dependency(&rustc("pub fn f() -> u8 { \"no\" }")));
    }
}
