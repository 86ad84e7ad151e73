//! Models compared on the same footing: a metric's scores per group of models (a repo
//! selection, or scores one computed), summed up as mean ± std per group in an HTML table and a
//! box-and-whisker plot, with the best model's id to reload it (DRYML's Tutorial 5).

use crate::data::DataError;
use crate::objects::{Repo, Selector};
use crate::plot::Figure;
use serde_json::Value;
use std::fmt::{self, Write as _};

/// Scores of a metric, by group of models.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    metric: String,
    higher_is_better: bool,
    groups: Vec<(String, Vec<(String, f64)>)>,
}

/// One group's numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The group's label.
    pub label: String,
    /// How many models it has.
    pub n: usize,
    /// The mean score.
    pub mean: f64,
    /// The sample standard deviation (n − 1; 0 for one model).
    pub std: f64,
    /// The lowest score.
    pub min: f64,
    /// The highest score.
    pub max: f64,
    /// The best model's id and score.
    pub best: (String, f64),
}

impl Comparison {
    /// A comparison by `metric` (its name, and the key of a sweep's metrics that
    /// [`Comparison::from_repo`] reads); higher is better unless [`Comparison::lower_is_better`].
    pub fn new(metric: &str) -> Comparison {
        Comparison { metric: metric.to_string(), higher_is_better: true, groups: Vec::new() }
    }

    /// Lower scores are better (a loss, an error).
    pub fn lower_is_better(mut self) -> Comparison {
        self.higher_is_better = false;
        self
    }

    /// A group of models' `(id, score)`s, however scored.
    pub fn group(mut self, label: &str, scores: impl IntoIterator<Item = (String, f64)>) -> Comparison {
        self.groups.push((label.to_string(), scores.into_iter().collect()));
        self
    }

    /// A group per `(label, selector)`, each model's score read from the metrics a sweep kept
    /// with it in `repo`'s index (`metric` may be a dotted path into them). A model without
    /// that metric, or a selection of none, is an error that names it.
    pub fn from_repo(repo: &Repo, metric: &str, groups: &[(&str, Selector)]) -> Result<Comparison, DataError> {
        let mut c = Comparison::new(metric);
        for (label, sel) in groups {
            let entries = repo.find(sel);
            if entries.is_empty() {
                return Err(DataError::Argument(format!(
                    "compare: `{label}` selects no object in {}",
                    repo.dir().display()
                )));
            }
            let mut scores = Vec::new();
            for e in entries {
                let found = e
                    .meta
                    .metrics
                    .as_ref()
                    .and_then(|m| metric.split('.').try_fold(m, |v, k| v.get(k)))
                    .and_then(Value::as_f64);
                let score = found.ok_or_else(|| {
                    let kept = e.meta.metrics.as_ref().map_or("no metrics".to_string(), |m| format!("metrics {m}"));
                    DataError::Argument(format!(
                        "compare: {} {} (in `{label}`) has no number `{metric}`: it has {kept}",
                        e.def.type_name, e.meta.id
                    ))
                })?;
                scores.push((e.meta.id.clone(), score));
            }
            c = c.group(label, scores);
        }
        Ok(c)
    }

    /// Each group's summary, in the order the groups were given (groups with no finite score
    /// are left out).
    pub fn summaries(&self) -> Vec<Summary> {
        self.groups
            .iter()
            .filter_map(|(label, scores)| {
                let finite: Vec<&(String, f64)> = scores.iter().filter(|(_, s)| s.is_finite()).collect();
                let n = finite.len();
                let first = finite.first()?;
                let mean = finite.iter().map(|(_, s)| s).sum::<f64>() / n as f64;
                let var = if n > 1 {
                    finite.iter().map(|(_, s)| (s - mean).powi(2)).sum::<f64>() / (n - 1) as f64
                } else {
                    0.0
                };
                let better = |a: f64, b: f64| if self.higher_is_better { a > b } else { a < b };
                let best = finite.iter().fold(*first, |b, x| if better(x.1, b.1) { x } else { b });
                let (min, max) =
                    finite.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (_, s)| (lo.min(*s), hi.max(*s)));
                Some(Summary { label: label.clone(), n, mean, std: var.sqrt(), min, max, best: best.clone() })
            })
            .collect()
    }

    /// The best model of all: its group's label, its id and its score.
    pub fn best(&self) -> Option<(String, String, f64)> {
        let better = |a: f64, b: f64| if self.higher_is_better { a > b } else { a < b };
        self.summaries()
            .into_iter()
            .map(|s| (s.label, s.best.0, s.best.1))
            .reduce(|b, x| if better(x.2, b.2) { x } else { b })
    }

    /// The table: a row per group, mean ± std, min, max, n and the best model's id.
    pub fn html(&self) -> String {
        let mut h =
            String::from("<table class=\"dryml-compare\">\n<thead><tr><th style=\"text-align:left\">model</th>");
        let _ = write!(h, "<th>{} (mean ± std)</th><th>min</th><th>max</th><th>n</th><th style=\"text-align:left\">best</th></tr></thead>\n<tbody>\n", esc(&self.metric));
        let overall = self.best();
        for s in self.summaries() {
            let top = overall.as_ref().is_some_and(|b| b.1 == s.best.0);
            let (open, close) = if top { ("<b>", "</b>") } else { ("", "") };
            let _ = writeln!(
                h,
                "<tr><td style=\"text-align:left\">{open}{}{close}</td><td>{open}{} ± {}{close}</td><td>{}</td><td>{}</td><td>{}</td><td style=\"text-align:left\"><code>{}</code></td></tr>",
                esc(&s.label),
                num(s.mean),
                num(s.std),
                num(s.min),
                num(s.max),
                s.n,
                esc(&s.best.0)
            );
        }
        h.push_str("</tbody>\n</table>\n");
        h
    }

    /// A box-and-whisker plot of each group's scores.
    pub fn boxplot(&self) -> Figure {
        let labels: Vec<&str> = self.groups.iter().map(|(l, _)| l.as_str()).collect();
        let scores: Vec<Vec<f64>> = self.groups.iter().map(|(_, s)| s.iter().map(|(_, v)| *v).collect()).collect();
        Figure::new().title(&format!("{} by model", self.metric)).y_label(&self.metric).boxes(&labels, &scores)
    }

    /// Shows the table and the box plot as one output.
    pub fn show(&self) {
        let html = format!("{}{}", self.html(), self.boxplot().svg());
        crate::display::display(
            &[("text/html", &html), ("text/plain", &self.to_string())],
            crate::display::Update::New,
        );
    }

    /// evcxr's display protocol: a comparison that is a cell's value shows its table and plot.
    pub fn evcxr_display(&self) {
        println!("EVCXR_BEGIN_CONTENT text/html\n{}{}\nEVCXR_END_CONTENT", self.html(), self.boxplot().svg());
        println!("EVCXR_BEGIN_CONTENT text/plain\n{self}\nEVCXR_END_CONTENT");
    }
}

/// The table as text.
impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = self.summaries();
        let width = rows.iter().map(|s| s.label.chars().count()).max().unwrap_or(5).max(5);
        writeln!(
            f,
            "{:width$}  {:>20}  {:>8}  {:>8}  {:>3}  best",
            "model",
            format!("{} mean ± std", self.metric),
            "min",
            "max",
            "n"
        )?;
        for s in rows {
            writeln!(
                f,
                "{:width$}  {:>20}  {:>8}  {:>8}  {:>3}  {}",
                s.label,
                format!("{} ± {}", num(s.mean), num(s.std)),
                num(s.min),
                num(s.max),
                s.n,
                s.best.0
            )?;
        }
        Ok(())
    }
}

fn num(v: f64) -> String {
    format!("{v:.4}")
}

use crate::display::wire::escape_html as esc;

#[cfg(test)]
mod tests;
