//! `%repo`: opens a dryml repo in the kernel (which links `dryml`) to list, query, show, compare
//! and delete objects from the index alone; `load` builds an object in the child, where its type
//! is registered. The tables are [`view`]'s.

pub mod view;

use super::Host;
use crate::protocol::ErrorContent;
use dryml::objects::{Entry, Repo, RepoError, Selector};
use dryml_magics::RepoCall;

#[derive(Default)]
pub struct RepoMagic {
    /// The repo `%repo open` opened.
    repo: Option<Repo>,
    /// Index lines skipped that the user was already told about.
    warned_skipped: usize,
}

/// One line when index lines were skipped since the last time the user was told.
fn warn_skipped(host: &Host<'_>, repo: &Repo, warned: &mut usize) {
    if repo.skipped > *warned {
        host.warn(&format!(
            "dryml: {} line(s) of {} skipped: unreadable, or naming a file outside the repo\n",
            repo.skipped - *warned,
            repo.dir().join("index.jsonl").display()
        ));
        *warned = repo.skipped;
    }
}

fn repo_error(e: RepoError) -> ErrorContent {
    ErrorContent::new("RepoError", e.to_string())
}

/// The entry with id `id`, or an error naming the repo.
fn entry(repo: &Repo, id: &str) -> Result<Entry, ErrorContent> {
    repo.find(&Selector::id(id))
        .first()
        .map(|e| (*e).clone())
        .ok_or_else(|| ErrorContent::new("RepoError", format!("no object with id `{id}` in {}", repo.dir().display())))
}

impl RepoMagic {
    pub fn run(&mut self, host: &mut Host<'_>, call: &RepoCall) -> Result<(), ErrorContent> {
        if let RepoCall::Open { dir, create } = call {
            let dir = std::path::Path::new(dir);
            let exists = dir.join("dryml-repo").exists();
            let repo = if *create && !exists { Repo::create(dir) } else { Repo::open(dir) }.map_err(repo_error)?;
            let verb = if exists { "Opened" } else { "Created" };
            host.print(&format!("{verb} repo {}: {} objects\n", repo.dir().display(), repo.len()));
            self.warned_skipped = 0;
            warn_skipped(host, &repo, &mut self.warned_skipped);
            self.repo = Some(repo);
            return Ok(());
        }
        let Some(repo) = self.repo.as_mut() else {
            let sub = call.name();
            return Err(ErrorContent::new(
                "RepoError",
                format!("%repo {sub}: no repo is open (use %repo open DIR [--create])"),
            ));
        };
        // Other processes (sandboxes, other notebooks) may have added objects.
        repo.reload().map_err(repo_error)?;
        warn_skipped(host, repo, &mut self.warned_skipped);
        match call {
            RepoCall::Open { .. } => unreachable!("handled above"),
            RepoCall::Ls => {
                let all = repo.entries();
                let title = format!("{}: {} objects", repo.dir().display(), all.len());
                host.show(view::table(&title, &all));
            }
            RepoCall::Get(query) => {
                let sel = query.selector();
                let found = repo.find(&sel);
                host.show(view::table(&format!("{} matching {sel}", found.len()), &found));
            }
            RepoCall::Show(id) => {
                let e = entry(repo, id)?;
                host.show(view::show(repo, &e));
            }
            RepoCall::Diff(a, b) => {
                let (a, b) = (entry(repo, a)?, entry(repo, b)?);
                host.show(view::diff(&a, &b));
            }
            RepoCall::Rm(id) => {
                entry(repo, id)?;
                repo.delete(id).map_err(repo_error)?;
                host.print(&format!("Deleted {id}\n"));
            }
            RepoCall::Load { id, var } => {
                let e = entry(repo, id)?;
                let dir = repo.dir().to_string_lossy().into_owned();
                let code = super::codegen::repo_load(var, &dir, id, &e.def.type_name);
                host.session.set_cell_lines(None);
                host.session.eval_user(&code, host.io)?;
                host.print(&format!(
                    "{var} = {} {id} (downcast with {var}.downcast_ref::<{}>())\n",
                    e.def, e.def.type_name
                ));
            }
        }
        Ok(())
    }
}
