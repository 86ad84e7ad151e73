//! The crates a cell's code names, found in one scan: which of dryml's features it needs, and
//! whether it pins a release of ndarray, Arrow or polars other than the one dryml is built
//! against (whose values then show as tables through code built against that release).

use std::sync::OnceLock;

/// The releases of the crates with tables that dryml is built against (the workspace's
/// `Cargo.toml`): `(major, minor)`.
const NDARRAY: (u64, u64) = (0, 16);
const ARROW: (u64, u64) = (60, 0);
const POLARS: (u64, u64) = (0, 55);

/// The crates a cell names, found in one scan.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Named {
    /// `tch` (as `tch::` or `use tch`).
    pub tch: bool,
    /// `linfa` or a crate of its family (`dryml::models::linfa` too).
    pub linfa: bool,
    /// candle (`candle_core`, `candle_nn`, `dryml::models::candle`).
    pub candle: bool,
    /// burn (`burn::`, `dryml::models::burn`).
    pub burn: bool,
    /// dryml's numpy readers (`dryml::data::numpy`, or `numpy::` once imported).
    pub numpy: bool,
    /// dryml's image folders (`dryml::data::images`, or `images::` once imported).
    pub images: bool,
    /// dryml's Parquet reader (`dryml::data::parquet`, or `parquet::` once imported).
    pub parquet: bool,
    /// Arrow, named as a crate (`arrow::`, `arrow_array::`, `use arrow`, `:dep arrow`): of
    /// dryml's release, its record batches show as `dryml`'s tables with the `parquet` feature.
    pub arrow: bool,
    /// A `:dep arrow` of another release than dryml's: its batches show as tables through code
    /// built against it (`display::Tables`), and dryml's `parquet` feature is not added for it.
    pub other_arrow: bool,
    /// A `:dep ndarray` of another release than dryml's, whose arrays show as tables the same way.
    pub other_ndarray: bool,
    /// A `:dep polars` of the polars `dryml`'s `polars` feature is built against (0.55), whose
    /// frames and series then show as `dryml`'s tables. Another version is left alone: adding
    /// the feature would build a second polars, and its types would not be the cell's.
    pub polars: bool,
    /// A `:dep polars` of another release, whose frames and series show as `dryml`'s tables
    /// through code built against it in each cell (`display::Tables`).
    pub other_polars: bool,
    /// `dryml`, so the dependency is added only for cells that name it; or `ndarray`, whose
    /// arrays show as `dryml`'s tables, or another release of a crate with tables.
    pub dryml: bool,
    /// dryml is named only by the calls that `!` and `%timeit` lines become: it is needed, but
    /// no value of it is shown, so later cells are not made to load it for their tables.
    pub habits_only: bool,
}

impl Named {
    /// Whether the code names a crate whose values show as tables (dryml, ndarray, Arrow, polars).
    pub fn tables(&self) -> bool {
        (self.dryml && !self.habits_only)
            || self.other_polars
            || self.polars
            || self.parquet
            || self.arrow
            || self.numpy
            || self.images
    }

    /// Arrow, and not another release than dryml's: dryml's `parquet` feature shows its batches.
    pub fn drymls_arrow(&self) -> bool {
        self.arrow && !self.other_arrow
    }

    /// What `code` names.
    pub fn in_code(code: &str) -> Named {
        static SET: OnceLock<regex::RegexSet> = OnceLock::new();
        let set = SET.get_or_init(|| {
            regex::RegexSet::new([
                r"\btch\s*::|\buse\s+tch\b",
                r"\blinfa\w*\s*::|\buse\s+linfa",
                r"\bcandle(_core|_nn)?\s*::|\buse\s+candle",
                r"\bdryml\s*::|\buse\s+dryml\b|\bextern\s+crate\s+dryml\b|\bndarray\s*::|\buse\s+ndarray\b|:dep\s+ndarray\b",
                r"\bdata\s*::\s*numpy\b|\bnumpy\s*::",
                r"\bdata\s*::\s*images\b|\bimages\s*::",
                r"\bdata\s*::\s*parquet\b|\bparquet\s*::",
                r"\barrow(_array)?\s*::|\buse\s+arrow|:dep\s+arrow",
                r":dep\s+polars\s*=",
                r"\bburn\s*::|\buse\s+burn\b",
            ])
            .expect("static regexes")
        });
        // The calls `!` and `%timeit` lines become (dryml_magics::body).
        static HABITS: OnceLock<regex::Regex> = OnceLock::new();
        let habits = HABITS.get_or_init(|| {
            regex::Regex::new(r"\bdryml::(__kernel::(shell|timeit)::(line|cell)|timeit::Options)\b")
                .expect("static regex")
        });
        let m = set.matches(code);
        let habits_only =
            m.matched(3) && habits.is_match(code) && !set.matches(&habits.replace_all(code, "")).matched(3);
        let (mut other_ndarray, mut other_arrow, mut polars) = (false, false, false);
        for (name, release) in pins(code) {
            match name {
                "ndarray" => other_ndarray |= !same(release, NDARRAY),
                "arrow" => other_arrow |= !same(release, ARROW),
                _ => polars |= same(release, POLARS),
            }
        }
        let other_polars = m.matched(8) && !polars;
        Named {
            habits_only,
            tch: m.matched(0),
            linfa: m.matched(1),
            candle: m.matched(2),
            burn: m.matched(9),
            dryml: m.matched(3) || other_polars || other_arrow,
            other_polars,
            other_ndarray,
            numpy: m.matched(4),
            images: m.matched(5),
            parquet: m.matched(6),
            arrow: m.matched(7),
            other_arrow,
            polars,
        }
    }
}

/// Whether two releases are one to cargo (semver: the minor below 1.0, the major above).
fn same(a: (u64, u64), b: (u64, u64)) -> bool {
    if a.0 == 0 {
        a == b
    } else {
        a.0 == b.0
    }
}

/// The releases `code`'s `:dep` lines pin for ndarray, arrow and polars: `"0.15"`, `"=0.15.6"`,
/// `{ version = "55", … }`. A line without a number (`"*"`, a path, git) pins none.
fn pins(code: &str) -> impl Iterator<Item = (&'static str, (u64, u64))> + '_ {
    static PIN: OnceLock<regex::Regex> = OnceLock::new();
    let pin = PIN.get_or_init(|| {
        regex::Regex::new(
            r#":dep\s+(ndarray|arrow|polars)\s*=\s*(?:\{[^}\n]*\bversion\s*=\s*)?"\s*[=^~]?\s*(\d+)(?:\.(\d+))?"#,
        )
        .expect("static regex")
    });
    pin.captures_iter(code).filter_map(|c| {
        let name = ["ndarray", "arrow", "polars"].into_iter().find(|n| *n == &c[1])?;
        let major = c[2].parse().ok()?;
        let minor = c.get(3).map_or(Some(0), |m| m.as_str().parse().ok())?;
        Some((name, (major, minor)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crates_named_in_a_cell() {
        let named = |code: &str| Named::in_code(code);
        assert!(named("use dryml::display;").dryml && named("let x = dryml :: version();").dryml);
        assert!(!named("let dryml_count = 1;").dryml && !named("let x = 1;").dryml);
        assert!(named("let d = dryml::models::linfa::iris();").linfa && named("use linfa_trees::DecisionTree;").linfa);
        assert!(!named("let linfa = 1;").linfa);
        assert!(
            named("use candle_core::Tensor;").candle && named("dryml::models::candle::CandleClassifier::new(a)").candle
        );
        assert!(!named("let candles = 3;").candle);
        assert!(named("use burn::tensor::Tensor;").burn && named("dryml::models::burn::BurnClassifier::new(a)").burn);
        assert!(!named("let burned = 3; sunburn::x();").burn);
        assert_eq!(
            named("use tch::Tensor; let m = dryml::models::tch::TchClassifier::new(a);"),
            Named { tch: true, dryml: true, ..Named::default() }
        );
        assert!(
            named("let d = dryml::data::numpy::rows(\"x.npy\");").numpy
                && named("use dryml::data::numpy;\nnumpy::xy(p, \"x\", \"y\")").numpy
        );
        assert!(!named("let numpy_rows = 3;").numpy);
        assert!(
            named("dryml::data::images::folder(p, &o)").images
                && named("use dryml::data::parquet;\nparquet::xy::<usize>(p, &[], \"y\")").parquet
        );
        assert!(!named("let images = 3; let parquet_file = p;").images && !named("let parquet_file = p;").parquet);
        assert!(!named("let tchotchke = 1;").tch);
        // ndarray's arrays and Arrow's batches show as dryml's tables.
        assert!(named(":dep ndarray = \"0.16\"").dryml && named("use ndarray::Array2;").dryml);
        assert!(named("ndarray::arr1(&[1])").dryml && !named("let ndarray_x = 1;").dryml);
        assert!(named("use arrow_array::RecordBatch;").arrow && named("arrow::array::Int32Array::from(v)").arrow);
        assert!(!named("let arrows = 2; let arrow_x = 1;").arrow);
        // polars, when the `:dep` asks for the version dryml's feature is built against.
        for dep in [":dep polars = \"0.55\"", ":dep polars = { version = \"0.55.2\", features = [\"lazy\"] }"] {
            assert!(named(dep).polars, "{dep}");
        }
        for other in
            [":dep polars = \"0.46\"", ":dep polars = \"0.550\"", "use polars::prelude::*;", ":dep polars_x = \"0.55\""]
        {
            assert!(!named(other).polars, "{other}");
        }
        // dryml named only by a `!` line's call: added, but no tables for it.
        let shell = named("let n = 1;\ndryml::__kernel::shell::line(\"ls\");");
        assert!(shell.dryml && shell.habits_only && !shell.tables());
        let both = named("dryml::__kernel::shell::line(\"ls\");\ndryml::data::ndarray::arr1(&[1])");
        assert!(both.dryml && !both.habits_only && both.tables());
        // Another release: its frames show as tables through code built against it.
        let other = named(":dep polars = { version = \"0.53.0\", features = [\"lazy\"] }");
        assert!(other.other_polars && other.dryml && other.tables() && !other.polars);
        assert!(!named(":dep polars = \"0.55\"").other_polars && !named("use polars::prelude::*;").other_polars);
    }

    #[test]
    fn releases_other_than_drymls_are_told_apart() {
        let named = |code: &str| Named::in_code(code);
        let nd = named(":dep ndarray = \"0.15\"");
        assert!(nd.other_ndarray && nd.dryml && nd.tables(), "{nd:?}");
        for ours in [":dep ndarray = \"0.16\"", ":dep ndarray = { version = \"^0.16.1\" }", ":dep ndarray = \"*\""] {
            assert!(!named(ours).other_ndarray, "{ours}");
        }
        assert!(named(":dep ndarray = { version = \"0.17.2\", features = [\"serde\"] }").other_ndarray);
        let arrow = named(":dep arrow = { version = \"55\", default-features = false }");
        assert!(arrow.other_arrow && !arrow.drymls_arrow() && arrow.dryml && arrow.tables(), "{arrow:?}");
        for ours in [":dep arrow = \"60.2\"", ":dep arrow = \"=60\"", "use arrow::array::Int32Array;"] {
            let n = named(ours);
            assert!(!n.other_arrow && n.drymls_arrow(), "{ours}");
        }
        // Only the crate itself: a crate named after it pins nothing.
        assert!(!named(":dep ndarray-stats = \"0.5\"").other_ndarray);
        assert!(!named(":dep arrow2 = \"0.18\"").other_arrow && !named(":dep arrow-array = \"50\"").other_arrow);
    }
}
