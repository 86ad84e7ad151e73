//! How a result was made: the folder's git state, the notebook's cells that ran, the toolchain,
//! the cell crate's resolved crates, libtorch, CUDA, the GPUs, the host, the context and the
//! seed. A repo records it with every object it stores ([`crate::Repo::add`]); `%repo show`
//! prints it and `%repo diff` sets two side by side.
//!
//! In a notebook the kernel writes what it knows (cells, toolchain, the cell crate's
//! `Cargo.lock`, libtorch, GPUs, and git, looked at beside each cell's build) to its state
//! directory; [`Provenance::here`] adds what this process sees (host, context), once per cell
//! run, and asks git itself only where the kernel did not.
//!
//! ```
//! let p = dryml::objects::Provenance::here();
//! assert_eq!(p.dryml, env!("CARGO_PKG_VERSION"));
//! let back = dryml::objects::Provenance::from_json(&p.to_json());
//! assert_eq!(back, p);
//! ```

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The kernel's part, in its state directory (`DRYML_STATE_DIR`), rewritten before each cell.
pub const KERNEL_FILE: &str = "provenance.json";

/// How a result was made. Every part is optional where it may be unknown (no git, no kernel).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Provenance {
    /// The git state of the folder the process ran in.
    pub git: Option<Git>,
    /// The notebook's path, as Jupyter named it (`JPY_SESSION_NAME`).
    pub notebook: Option<String>,
    /// The cells that had run in the kernel up to this result.
    pub cells: Option<Cells>,
    /// `rustc --version`.
    pub rustc: Option<String>,
    /// `cargo --version`.
    pub cargo: Option<String>,
    /// Every crate the cell crate resolved, name to version (two releases joined by `, `).
    pub crates: BTreeMap<String, String>,
    /// dryml's version.
    pub dryml: String,
    /// libtorch's version, where the kernel found PyTorch's.
    pub libtorch: Option<String>,
    /// The CUDA libtorch was built for.
    pub cuda: Option<String>,
    /// The machine's GPUs (NVML).
    pub gpus: Vec<Gpu>,
    /// The host's name.
    pub host: String,
    /// The compute context the process held (`%context`, a sandbox's), as its environment
    /// holds it.
    pub context: Option<String>,
    /// The definition's `seed` argument, where it has one.
    pub seed: Option<u64>,
}

/// A folder's git state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Git {
    /// The commit checked out (`HEAD`); empty before the first commit.
    pub commit: String,
    /// The branch, or `None` when detached.
    pub branch: Option<String>,
    /// Whether tracked files differ from `HEAD` or untracked files exist.
    pub dirty: bool,
    /// The git object id of `git diff HEAD` where tracked files differ.
    pub diff: Option<String>,
}

impl Git {
    /// `dir`'s git state, or `None` outside a work tree (or without git). The status and the
    /// diff's id (`git diff HEAD` piped into `git hash-object`) are asked at once: about 3 ms.
    pub fn of(dir: &Path) -> Option<Git> {
        git(dir)
    }

    /// The JSON [`Provenance::to_json`] keeps it as.
    pub fn to_json(&self) -> Value {
        json!({"commit": self.commit, "branch": self.branch, "dirty": self.dirty, "diff": self.diff})
    }
}

/// The cells that ran: how many, and a SHA-256 of their source in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Cells {
    /// Cells run so far.
    pub count: u64,
    /// SHA-256 of their source, each cell's length before it.
    pub sha256: String,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Gpu {
    /// Its model name.
    pub name: String,
    /// Its memory in bytes.
    pub memory: u64,
    /// NVIDIA's driver version.
    pub driver: String,
}

fn text(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

impl Provenance {
    /// This process's provenance now: the kernel's part (where a kernel wrote one), and the
    /// host, the context and (where the kernel did not look) git as this process sees them.
    /// Computed once per cell run.
    pub fn here() -> Provenance {
        let state_dir = std::env::var_os(crate::sys::protocol::STATE_DIR_ENV).map(std::path::PathBuf::from);
        let kernel = kernel_part(state_dir.map(|d| d.join(KERNEL_FILE)).as_deref());
        let cwd = std::env::current_dir().unwrap_or_default();
        // Keyed by the cell run and the folder: a sweep storing a hundred objects asks git once;
        // outside a kernel, once a second (a script adding objects one by one). Never waited
        // for: a process forked while another thread held it (a sandbox) would wait forever,
        // so a busy cache is simply not used.
        type Last = (Value, std::path::PathBuf, Instant, Provenance);
        static LAST: Mutex<Option<Last>> = Mutex::new(None);
        let cached = LAST.try_lock().ok().and_then(|last| {
            let (k, dir, at, p) = last.as_ref()?;
            let fresh = if kernel.is_null() { at.elapsed() < Duration::from_secs(1) } else { true };
            (*k == kernel && *dir == cwd && fresh).then(|| p.clone())
        });
        let mut p = cached.unwrap_or_else(|| {
            let p = Provenance::made(&kernel, &cwd);
            if let Ok(mut last) = LAST.try_lock() {
                *last = Some((kernel, cwd, Instant::now(), p.clone()));
            }
            p
        });
        p.context = context();
        p
    }

    /// The provenance of work done in `dir`, with the kernel's part from `kernel_file` (the
    /// kernel itself asks so, for an experiment's report); no context.
    pub fn at(kernel_file: Option<&Path>, dir: &Path) -> Provenance {
        Provenance::made(&kernel_part(kernel_file), dir)
    }

    fn made(kernel: &Value, dir: &Path) -> Provenance {
        let mut p = Provenance::from_json(kernel);
        // The kernel looks while the cell builds; `null` from it: no work tree there.
        if kernel.get("git").is_none() {
            p.git = Git::of(dir);
        }
        p.dryml = env!("CARGO_PKG_VERSION").to_string();
        p.host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string();
        p
    }

    /// An object's: the one it carries (made earlier, loaded from a repo), else this cell
    /// run's with the definition's `seed`.
    pub fn of(object: &dyn crate::Object) -> Provenance {
        object.meta().provenance.clone().unwrap_or_else(|| {
            let mut p = Provenance::here();
            p.seed = object.definition().args.get("seed").and_then(Value::as_u64);
            p
        })
    }

    /// [`Provenance::fields`] as a Markdown table (a TensorBoard run's `provenance` text).
    pub fn markdown(&self) -> String {
        let mut t = String::from("| part | value |\n|---|---|\n");
        for (k, v) in self.fields() {
            t.push_str(&format!("| {k} | {} |\n", v.replace('|', "\\|")));
        }
        t
    }

    /// The JSON a repo's index and object files keep.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(g) = &self.git {
            m.insert("git".into(), g.to_json());
        }
        let mut put = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        };
        put("notebook", &self.notebook);
        put("rustc", &self.rustc);
        put("cargo", &self.cargo);
        put("libtorch", &self.libtorch);
        put("cuda", &self.cuda);
        put("context", &self.context);
        if let Some(c) = &self.cells {
            m.insert("cells".into(), json!({"count": c.count, "sha256": c.sha256}));
        }
        if !self.crates.is_empty() {
            m.insert("crates".into(), json!(self.crates));
        }
        m.insert("dryml".into(), json!(self.dryml));
        if !self.gpus.is_empty() {
            let gpus: Vec<Value> =
                self.gpus.iter().map(|g| json!({"name": g.name, "memory": g.memory, "driver": g.driver})).collect();
            m.insert("gpus".into(), json!(gpus));
        }
        m.insert("host".into(), json!(self.host));
        if let Some(s) = self.seed {
            m.insert("seed".into(), json!(s));
        }
        Value::Object(m)
    }

    /// Reads [`Provenance::to_json`]'s form (and the kernel's part); what is missing stays empty.
    pub fn from_json(v: &Value) -> Provenance {
        let git = v.get("git").filter(|g| g.is_object()).map(|g| Git {
            commit: text(g, "commit").unwrap_or_default(),
            branch: text(g, "branch"),
            dirty: g.get("dirty").and_then(Value::as_bool).unwrap_or(false),
            diff: text(g, "diff"),
        });
        let cells = v.get("cells").filter(|c| c.is_object()).map(|c| Cells {
            count: c.get("count").and_then(Value::as_u64).unwrap_or(0),
            sha256: text(c, "sha256").unwrap_or_default(),
        });
        let crates = v
            .get("crates")
            .and_then(Value::as_object)
            .map(|o| o.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default();
        let gpus = v
            .get("gpus")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|g| Gpu {
                        name: text(g, "name").unwrap_or_default(),
                        memory: g.get("memory").and_then(Value::as_u64).unwrap_or(0),
                        driver: text(g, "driver").unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Provenance {
            git,
            notebook: text(v, "notebook"),
            cells,
            rustc: text(v, "rustc"),
            cargo: text(v, "cargo"),
            crates,
            dryml: text(v, "dryml").unwrap_or_default(),
            libtorch: text(v, "libtorch"),
            cuda: text(v, "cuda"),
            gpus,
            host: text(v, "host").unwrap_or_default(),
            context: text(v, "context"),
            seed: v.get("seed").and_then(Value::as_u64),
        }
    }

    /// Each part as a named line (`git.commit`, `crate polars`, `gpu 0` ...), in a fixed order:
    /// what `%repo show` prints and `%repo diff` compares.
    pub fn fields(&self) -> Vec<(String, String)> {
        let mut f: Vec<(String, String)> = Vec::new();
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                f.push((k.to_string(), v));
            }
        };
        if let Some(g) = &self.git {
            put("git.commit", Some(g.commit.clone()));
            put("git.branch", Some(g.branch.clone().unwrap_or_else(|| "(detached)".into())));
            put("git.dirty", Some(g.dirty.to_string()));
            put("git.diff", g.diff.clone());
        }
        put("notebook", self.notebook.clone());
        put("cells", self.cells.as_ref().map(|c| format!("{} (sha256 {})", c.count, c.sha256)));
        put("rustc", self.rustc.clone());
        put("cargo", self.cargo.clone());
        put("dryml", Some(self.dryml.clone()));
        put("libtorch", self.libtorch.clone());
        put("cuda", self.cuda.clone());
        for (i, g) in self.gpus.iter().enumerate() {
            let gib = g.memory as f64 / (1u64 << 30) as f64;
            put(&format!("gpu {i}"), Some(format!("{} ({gib:.0} GiB), driver {}", g.name, g.driver)));
        }
        put("host", Some(self.host.clone()));
        put("context", self.context.clone());
        put("seed", self.seed.map(|s| s.to_string()));
        for (name, version) in &self.crates {
            put(&format!("crate {name}"), Some(version.clone()));
        }
        f
    }
}

/// The kernel's part, as JSON (`null` outside a kernel, or unreadable).
fn kernel_part(file: Option<&Path>) -> Value {
    file.and_then(|f| std::fs::read(f).ok()).and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or(Value::Null)
}

/// The process's context as its environment holds it (`torch=gpu/0:0.5;default=cpu/0:1`):
/// read here, not decoded, since objects stand below compute.
fn context() -> Option<String> {
    std::env::var(crate::sys::protocol::CONTEXT_ENV).ok().filter(|c| !c.is_empty())
}

/// Git's id of the empty blob: `git diff HEAD` said nothing (only untracked files differ).
const EMPTY_BLOB: &str = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";

/// [`Git::of`]: the status and the diff's id at once (about 3 ms, not 7 one after the other).
fn git(dir: &Path) -> Option<Git> {
    let spawn = |args: &[&str], stdin: Stdio| {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
    };
    let status = spawn(&["status", "--porcelain=v2", "--branch"], Stdio::null());
    let mut diff = spawn(&["diff", "HEAD", "--binary"], Stdio::null()).ok();
    let hash = diff
        .as_mut()
        .and_then(|d| d.stdout.take())
        .and_then(|out| spawn(&["hash-object", "--stdin"], Stdio::from(out)).ok());
    let id = hash.and_then(|h| h.wait_with_output().ok()).filter(|o| o.status.success());
    let diffed = diff.map(|mut d| d.wait().is_ok_and(|s| s.success())).unwrap_or(false);
    let out = status.ok()?.wait_with_output().ok().filter(|o| o.status.success())?;
    let mut g = Git::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(oid) = line.strip_prefix("# branch.oid ") {
            g.commit = if oid == "(initial)" { String::new() } else { oid.to_string() };
        } else if let Some(head) = line.strip_prefix("# branch.head ") {
            g.branch = (head != "(detached)").then(|| head.to_string());
        } else if !line.starts_with('#') {
            g.dirty = true;
        }
    }
    let id = id.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    g.diff = id.filter(|id| g.dirty && diffed && !id.is_empty() && id != EMPTY_BLOB);
    Some(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) {
        let ok = Command::new("git").args(args).current_dir(dir).output().expect("git runs").status.success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn git_state_clean_dirty_and_outside() {
        let dir = std::env::temp_dir().join(format!("dryml-prov-git-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let outside = git(&dir);
        // The temp folder may itself be in no work tree at all.
        assert!(outside.is_none() || outside.is_some_and(|g| !g.commit.is_empty() || g.branch.is_some()));
        run(&dir, &["init", "-q", "-b", "main"]);
        let fresh = git(&dir).expect("a work tree");
        assert_eq!((fresh.commit.as_str(), fresh.branch.as_deref(), fresh.dirty), ("", Some("main"), false));
        std::fs::write(dir.join("train.rs"), "fn main() {}\n").unwrap();
        run(&dir, &["add", "train.rs"]);
        run(&dir, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"]);
        let clean = git(&dir).unwrap();
        assert_eq!(clean.commit.len(), 40, "{clean:?}");
        assert!(!clean.dirty && clean.diff.is_none(), "{clean:?}");
        std::fs::write(dir.join("train.rs"), "fn main() { println!(); }\n").unwrap();
        let dirty = git(&dir).unwrap();
        assert!(dirty.dirty && dirty.commit == clean.commit, "{dirty:?}");
        let id = dirty.diff.clone().expect("a diff id");
        assert_eq!(id.len(), 40);
        // Another change, another id; the same change, the same.
        assert_eq!(git(&dir).unwrap().diff, Some(id.clone()));
        std::fs::write(dir.join("train.rs"), "fn main() { panic!(); }\n").unwrap();
        assert_ne!(git(&dir).unwrap().diff, Some(id));
        // Only an untracked file: dirty, no diff.
        run(&dir, &["checkout", "-q", "train.rs"]);
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        let untracked = git(&dir).unwrap();
        assert!(untracked.dirty && untracked.diff.is_none(), "{untracked:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn json_round_trip_and_fields() {
        let p = Provenance {
            git: Some(Git { commit: "a".repeat(40), branch: None, dirty: true, diff: Some("b".repeat(40)) }),
            notebook: Some("runs/mnist.ipynb".into()),
            cells: Some(Cells { count: 7, sha256: "c".repeat(64) }),
            rustc: Some("rustc 1.95.0".into()),
            cargo: None,
            crates: [("polars".to_string(), "0.53.0".to_string())].into(),
            dryml: "0.1.0".into(),
            libtorch: Some("2.13.0".into()),
            cuda: None,
            gpus: vec![Gpu { name: "NVIDIA H100".into(), memory: 80 << 30, driver: "580.1".into() }],
            host: "node1".into(),
            context: None,
            seed: Some(3),
        };
        assert_eq!(Provenance::from_json(&p.to_json()), p);
        let fields = p.fields();
        let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("git.branch"), Some("(detached)"));
        assert_eq!(get("git.dirty"), Some("true"));
        assert_eq!(get("gpu 0"), Some("NVIDIA H100 (80 GiB), driver 580.1"));
        assert_eq!(get("crate polars"), Some("0.53.0"));
        assert_eq!(get("cargo"), None);
        let md = p.markdown();
        assert!(md.starts_with("| part | value |\n|---|---|\n| git.commit | aaaa"), "{md}");
        assert!(md.contains("| crate polars | 0.53.0 |\n"), "{md}");
        // A record from before provenance, or damaged, reads as empty parts.
        assert_eq!(Provenance::from_json(&json!({"git": 3, "gpus": "x"})), Provenance::default());
    }
}
