//! The dependencies a cell needs, added the first time code names them: `dryml` (from the
//! runtime's sources) and, with dryml's feature for it, each framework a cell names (`tch`,
//! where the venv has libtorch; `linfa`; candle; the readers of `dryml::data::numpy`,
//! `::images` and `::parquet`; polars' tables, for a `:dep polars` of the polars dryml is built
//! against); and the torch preload of `--preload torch`.

use super::display::Tables;
use super::named::Named;
use super::Session;
use crate::protocol::ErrorContent;

/// The `tch` the runtime's `torch` feature is built against (libtorch 2.13.0).
const TCH_VERSION: &str = "0.26.0";
/// The `linfa` the runtime's `linfa` feature is built against.
const LINFA_VERSION: &str = "0.8";
/// The candle the runtime's `candle` feature is built against.
const CANDLE_VERSION: &str = "0.11";
/// The burn the runtime's `burn` feature is built against, with its features.
const BURN: &str =
    r#"{ version = "=0.22.1", default-features = false, features = ["std", "flex", "autodiff", "optim"] }"#;

/// The frameworks a notebook has named, each added with `dryml`'s feature for it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Frameworks {
    pub torch: bool,
    pub linfa: bool,
    pub candle: bool,
    pub burn: bool,
    pub numpy: bool,
    pub images: bool,
    pub parquet: bool,
    pub polars: bool,
}

impl Frameworks {
    /// Each of dryml's features, and whether it is in.
    fn features(self) -> [(&'static str, bool); 8] {
        [
            ("torch", self.torch),
            ("linfa", self.linfa),
            // Where NVIDIA's driver runs and the set-up brought nvcc: candle's CUDA backend.
            (if crate::cuda::for_candle() { "candle-cuda" } else { "candle" }, self.candle),
            ("burn", self.burn),
            ("numpy", self.numpy),
            ("images", self.images),
            ("parquet", self.parquet),
            ("polars", self.polars),
        ]
    }
}

impl Session {
    /// Builds `dryml` (and the frameworks `code` names, with dryml's features for them) as a
    /// cell of that code would, so that later kernels find them in the machine's build cache.
    pub fn prepare_deps(&mut self, code: &str) -> Result<(), ErrorContent> {
        self.add_deps(code)
    }

    /// Adds `dryml` (and the frameworks code names, with dryml's features) the first time.
    fn add_deps(&mut self, code: &str) -> Result<(), ErrorContent> {
        let Some((deps, frameworks)) = self.deps_for(code) else { return Ok(()) };
        self.eval_hidden(&deps)?;
        self.note_deps_added(frameworks, false);
        Ok(())
    }

    /// The `:dep` lines a cell needs before it can run, and the frameworks the notebook has
    /// once they are added.
    pub(super) fn deps_for(&mut self, code: &str) -> Option<(String, Frameworks)> {
        let named = Named::in_code(code);
        // A cell naming `tch` gets it when the venv has libtorch.
        let want = Frameworks {
            torch: self.frameworks.torch || (named.tch && crate::torch::available().is_some()),
            linfa: self.frameworks.linfa || named.linfa,
            candle: self.frameworks.candle || named.candle,
            burn: self.frameworks.burn || named.burn,
            numpy: self.frameworks.numpy || named.numpy,
            images: self.frameworks.images || named.images,
            // Arrow named in a notebook that pinned another release is that release: no
            // second Arrow is built for dryml's tables.
            parquet: self.frameworks.parquet || named.parquet || (named.drymls_arrow() && !self.tables.arrow),
            polars: self.frameworks.polars || named.polars,
        };
        // The checkout's sources changed since dryml was added: it is added again, from their copy.
        let moved = self.dryml_added && self.sources.as_ref().is_some_and(|c| !c.current(&crate::paths::runtime()));
        if want == self.frameworks && (self.dryml_added || !named.dryml) && !moved {
            return None;
        }
        let path = self.dryml_sources();
        let path = path.to_string_lossy();
        let features: Vec<&str> = want.features().into_iter().filter(|f| f.1).map(|f| f.0).collect();
        let mut lines = vec![(
            "dryml",
            if features.is_empty() {
                format!("{{ path = {path:?} }}")
            } else {
                format!("{{ path = {path:?}, features = {features:?} }}")
            },
        )];
        if want.torch {
            lines.push(("tch", format!("\"={TCH_VERSION}\"")));
        }
        if want.linfa {
            lines.push(("linfa", format!("\"{LINFA_VERSION}\"")));
        }
        if want.candle {
            lines.push(("candle-core", format!("\"{CANDLE_VERSION}\"")));
            lines.push(("candle-nn", format!("\"{CANDLE_VERSION}\"")));
        }
        if want.burn {
            lines.push(("burn", BURN.to_string()));
            if !self.frameworks.burn {
                patch_burn();
            }
        }
        // Ours resolve (the set-up built them): evcxr need not ask cargo (0.05 s each).
        let known = &mut self.ctx.eval_context_mut().hooks_mut().known_deps;
        known.extend(lines.iter().map(|(name, config)| (name.to_string(), config.clone())));
        let deps: Vec<String> = lines.iter().map(|(name, config)| format!(":dep {name} = {config}")).collect();
        let deps = deps.join("\n");
        Some((deps, want))
    }

    /// What to tell a notebook whose cell adds a framework once `dryml` is built: its values
    /// of dryml's types belong to the earlier build.
    pub(super) fn rebuild_notice(&self, want: Frameworks) -> Option<String> {
        rebuild_notice(self.dryml_added, self.frameworks, want)
    }

    /// Where cells build `dryml` from: the content-named copy of the runtime's sources in the
    /// build cache ([`super::source`]), else (no cache, or no copy could be made) the sources.
    fn dryml_sources(&mut self) -> std::path::PathBuf {
        let runtime = crate::paths::runtime();
        let Ok(Some(cache)) = &self.cache else { return runtime };
        if let Some(copy) = self.sources.as_ref().filter(|c| c.current(&runtime)) {
            return copy.runtime().to_path_buf();
        }
        // An older copy is let go first, so that it may go with its builds (DRYML_SOURCE_COPIES).
        self.sources = None;
        match super::source::copy(&runtime, &cache.dir()) {
            Ok(copy) => {
                let path = copy.runtime().to_path_buf();
                self.sources = Some(copy);
                path
            }
            Err(e) => {
                tracing::warn!("dryml is built from {} itself: {e:#}", runtime.display());
                runtime
            }
        }
    }

    /// `tables`: the code that added them names a crate whose values show as tables.
    pub(super) fn note_deps_added(&mut self, frameworks: Frameworks, tables: bool) {
        self.dryml_added = true;
        self.frameworks = frameworks;
        if tables {
            self.show_tables();
        }
    }

    /// A cell's value of a type with a table (arrays, datasets, frames) shows as one from now on.
    /// Only once a cell names such a crate: the prelude makes rustc load dryml's whole crate
    /// graph for every cell with a value (46 ms of a 150 ms trivial cell), and a notebook that
    /// only has dryml from the warm-up shows no tables.
    pub(super) fn show_tables(&mut self) {
        if self.dryml_added && !self.tables.shown {
            self.set_tables(Tables { shown: true, ..self.tables });
        }
    }

    pub(super) fn set_tables(&mut self, tables: Tables) {
        self.tables = tables;
        self.ctx.eval_context_mut().hooks_mut().final_display = tables.around();
    }

    /// Whether `code` names a crate whose values show as tables, and what was shown before if
    /// this cell changed it, for the caller to put back if the cell does not build: the table
    /// code goes in with a cell whose own `:dep` lines (`with_deps`) bring dryml in, so that the
    /// first cell shows its value as later cells would, and a polars, ndarray or Arrow of the
    /// notebook's own release is read from the cell that adds it on.
    pub(super) fn tables_for(&mut self, code: &str, with_deps: bool) -> (bool, Option<Tables>) {
        let named = Named::in_code(code);
        let tables = named.tables();
        if tables {
            self.show_tables();
        }
        let before = self.tables;
        let want = Tables {
            shown: before.shown || (tables && with_deps),
            polars: before.polars || named.other_polars,
            ndarray: before.ndarray || named.other_ndarray,
            arrow: before.arrow || named.other_arrow,
        };
        if want == before {
            return (tables, None);
        }
        self.set_tables(want);
        (tables, Some(before))
    }

    /// Whether this child has loaded libtorch through a cell or a preload.
    pub fn torch_loaded(&self) -> bool {
        self.frameworks.torch
    }

    /// Loads libtorch into the child and makes one tensor on the best device (CUDA's context
    /// where there is CUDA), as IPyExperimentsPytorch's `torch.ones((1, 1)).cuda()`. Returns
    /// the device it used.
    pub fn preload_torch(&mut self) -> Result<String, ErrorContent> {
        if crate::torch::available().is_none() {
            return Err(ErrorContent::new(
                crate::protocol::MAGIC_ERROR,
                "--preload torch: libtorch was not found (the kernel looks for PyTorch's wheel in the \
                 project's venv; kernelspec/setup.sh installs it)",
            ));
        }
        let (deps, frameworks) = self.deps_for("tch::").unwrap_or((String::new(), self.frameworks));
        let out = self.capture_stdout(&format!("{deps}\n{PRELOAD_TORCH}"))?;
        if !deps.is_empty() {
            self.note_deps_added(frameworks, false);
        }
        Ok(out.trim().to_string())
    }
}

/// The notice for a cell that adds frameworks to a notebook whose `dryml` is already built
/// (`None` when it adds none, or dryml is not built yet).
fn rebuild_notice(dryml_added: bool, had: Frameworks, want: Frameworks) -> Option<String> {
    let added: Vec<&str> =
        had.features().into_iter().zip(want.features()).filter(|(h, w)| w.1 && !h.1).map(|(_, w)| w.0).collect();
    if !dryml_added || added.is_empty() {
        return None;
    }
    let (s, them) = if added.len() > 1 { ("s", "them") } else { ("", "it") };
    Some(format!(
        "dryml: this cell adds the framework{s} {}, so dryml is built again with {them}. Values of dryml's \
         types made before (datasets, models) belong to the earlier build and do not mix with the new one's. \
         To build once, name every framework in the notebook's first dryml cell (as `use \
         dryml::models::{{tch::TchClassifier, candle::CandleClassifier, linfa::DecisionTree}};`), or restart.\n",
        added.join(", ")
    ))
}

/// Gives the cell crate (evcxr's, `EVCXR_TMPDIR`) the workspace's patched burn manifests
/// (`kernel/patches/`), in a `.cargo/config.toml` in the folder above it (evcxr writes the
/// crate's own): without them a crate with burn and tch does not resolve (burn's optional
/// libtorch backend links another libtorch). Written when burn is first named (the folder is
/// the kernel's own): cargo warns of a patch no crate uses.
fn patch_burn() {
    let (Some(dir), patched) = (std::env::var_os("EVCXR_TMPDIR"), crate::paths::runtime().join("../target/patched"))
    else {
        return;
    };
    let patch = |name: &str| patched.join(name).canonicalize().ok();
    let (Some(dispatch), Some(signal)) = (patch("burn-dispatch-0.22.1"), patch("burn-signal-0.22.1")) else {
        tracing::warn!("no patched burn manifests under {} (kernelspec/patch-deps.sh)", patched.display());
        return;
    };
    let config = format!(
        "[patch.crates-io]\nburn-dispatch = {{ path = {:?} }}\nburn-signal = {{ path = {:?} }}\n",
        dispatch.display().to_string(),
        signal.display().to_string()
    );
    let Some(dir) = std::path::Path::new(&dir).parent().map(|above| above.join(".cargo")) else { return };
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        dryml_sys::fs::write_atomic(&dir.join("config.toml"), config.as_bytes(), dryml_sys::fs::Durability::NoFsync)
    });
    if let Err(e) = written {
        tracing::warn!("the cell crate's cargo config was not written in {}: {e}", dir.display());
    }
}

/// The preload: one tensor on the best device, then the device's name.
const PRELOAD_TORCH: &str = "{ let d = tch::Device::cuda_if_available(); \
    let _t = tch::Tensor::ones([1, 1], (tch::Kind::Float, d)); println!(\"{d:?}\"); }";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_a_framework_after_dryml_is_built_is_told() {
        let none = Frameworks::default();
        let linfa = Frameworks { linfa: true, ..none };
        let all = Frameworks { torch: true, linfa: true, candle: true, ..none };
        assert_eq!(rebuild_notice(false, none, linfa), None, "the first build");
        assert_eq!(rebuild_notice(true, linfa, linfa), None, "nothing added");
        let n = rebuild_notice(true, linfa, all).unwrap();
        assert!(
            n.starts_with("dryml: this cell adds the frameworks torch, candle, so dryml is built again with them."),
            "{n}"
        );
        assert!(n.contains("do not mix") && n.ends_with("or restart.\n"), "{n}");
        // The advice's line names every framework so that the kernel sees them.
        let advice = n.split('`').nth(1).unwrap();
        assert_eq!(
            Named::in_code(advice),
            Named { tch: true, linfa: true, candle: true, dryml: true, ..Named::default() },
            "{advice}"
        );
        assert!(rebuild_notice(true, none, linfa)
            .unwrap()
            .contains("the framework linfa, so dryml is built again with it."));
    }
}
