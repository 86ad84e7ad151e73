//! What answers completion and inspection beside a running cell: the analysis of the notebook's
//! last cell ([`dryml_analysis::Beside`]) and its names as the running cell found them.

use evcxr::Completions;

/// The analysis of the crate in `root`: what evcxr asks, what answers beside a cell from it,
/// and the kernel's own hold on it between cells. The analyzer's hundreds of MiB are in a
/// process the user's kernels share (this binary, see `main`; /proc/self/exe is it even after a
/// rebuild replaced the file), which a quiet notebook leaves. `DRYML_ANALYSIS=in-process` keeps
/// it in the kernel.
pub(super) fn analysis(root: &std::path::Path) -> Result<Analysis, evcxr::Error> {
    if std::env::var("DRYML_ANALYSIS").as_deref() == Ok("in-process") {
        let local = dryml_analysis::Local::new(root).map_err(|e| evcxr::Error::Message(format!("{e:#}")))?;
        return Ok((Box::new(local.clone()), local.beside(), Box::new(local)));
    }
    let client = dryml_analysis::Client::new("/proc/self/exe".into(), crate::paths::analysis_dir(), root);
    Ok((Box::new(client.clone()), client.beside(), Box::new(client)))
}

/// The analysis as evcxr, a cell's neighbours and the kernel each hold it.
pub(super) type Analysis = (Box<dyn evcxr::Analysis>, dryml_analysis::Beside, Box<dyn dryml_analysis::Standby>);

/// The notebook as a cell found it when it began, for requests answered while it runs.
pub struct Beside {
    analysis: dryml_analysis::Beside,
    variables: Vec<(String, String)>,
    items: Vec<String>,
}

impl Beside {
    pub(super) fn new(analysis: dryml_analysis::Beside, ctx: &evcxr::CommandContext) -> Beside {
        let variables = ctx.variables_and_types().map(|(n, t)| (n.to_owned(), t.to_owned())).collect();
        let items = ctx.defined_item_names().map(str::to_owned).collect();
        Beside { analysis, variables, items }
    }

    /// Whether the analysis answers now, without a wait for its load (which this begins).
    pub fn ready(&self) -> bool {
        self.analysis.ready()
    }

    /// Whether the analysis's load is under way.
    pub fn loading(&self) -> bool {
        self.analysis.loading()
    }

    pub fn completions(&self, code: &str, position: usize) -> anyhow::Result<Completions> {
        self.analysis.completions(code, position)
    }

    /// `(plain, html)` for the code before `position`, as evcxr's `hover_at` between cells;
    /// None where there is none.
    pub fn hover_at(&self, code: &str, position: usize) -> anyhow::Result<Option<(String, String)>> {
        let Some((plain, markdown)) = self.analysis.hover(code.get(..position).unwrap_or(code))? else {
            return Ok(None);
        };
        let mut html = String::new();
        pulldown_cmark::html::push_html(&mut html, pulldown_cmark::Parser::new(&markdown));
        Ok((!plain.is_empty()).then_some((plain, html)))
    }

    pub fn variables_and_types(&self) -> impl Iterator<Item = (&str, &str)> {
        self.variables.iter().map(|(n, t)| (n.as_str(), t.as_str()))
    }

    pub fn defined_item_names(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(String::as_str)
    }
}
