//! `%cache`: shows, collects and clears the machine's build cache (`session::cache`).

use super::Host;
use crate::protocol::ErrorContent;
use crate::session::cache::{BuildCache, Report};
use dryml_magics::CacheCall;
use dryml_sys::units::size;
use std::time::Duration;

/// How long `%cache clear` waits for another kernel's build before it gives up.
const CLEAR_WAIT: Duration = Duration::from_secs(30);

pub fn run(host: &mut Host<'_>, call: CacheCall) -> Result<(), ErrorContent> {
    let cache = match host.session.build_cache() {
        Ok(Some(cache)) => cache,
        Ok(None) => {
            host.print("The build cache is off (DRYML_BUILD_CACHE=off): this kernel builds in its own directory.\n");
            return Ok(());
        }
        Err(why) => return Err(ErrorContent::new("BuildCacheError", format!("the build cache is not in use: {why}"))),
    };
    let failed = |e: anyhow::Error| ErrorContent::new("BuildCacheError", format!("{e:#}"));
    match call {
        CacheCall::Show => {
            show(host, cache);
            Ok(())
        }
        CacheCall::Collect => {
            let freed = cache.collect(Duration::ZERO).map_err(failed)?;
            host.print(&format!("evicted {}\n", size(freed)));
            Ok(())
        }
        CacheCall::Clear => {
            let freed = cache.clear(CLEAR_WAIT).map_err(failed)?;
            host.print(&format!("cleared {}: the next build of each crate starts cold\n", size(freed)));
            Ok(())
        }
    }
}

fn show(host: &Host<'_>, cache: &BuildCache) {
    let (text, html) = render(&cache.report());
    host.show(crate::protocol::published::Bundle::html(text, html));
}

/// The report as text and HTML (`dryml-kernel cache show` prints the text).
pub fn render(r: &Report) -> (String, String) {
    let total: u64 = r.generations.iter().map(|g| g.bytes).sum();
    let title = format!(
        "Build cache {}: {} of {} ({})",
        r.root.display(),
        size(total),
        size(r.limit),
        crate::session::cache::LIMIT_ENV
    );
    let rows: Vec<Vec<String>> = r
        .generations
        .iter()
        .map(|g| {
            let used =
                g.last_used.map(|t| chrono::DateTime::<chrono::Local>::from(t).format("%Y-%m-%d %H:%M").to_string());
            vec![
                format!("{}{}", g.key, if g.current { " (this kernel)" } else { "" }),
                size(g.bytes),
                g.units.to_string(),
                used.unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let (mut text, mut html) = crate::display_table::render(
        &title,
        &["toolchain and libtorch", "size", "crate builds", "last kernel start"],
        &rows,
    );
    if !r.largest.is_empty() {
        let largest: Vec<String> = r.largest.iter().map(|(n, b)| format!("{n} {}", size(*b))).collect();
        let line = format!("Largest here: {}", largest.join(", "));
        text.push_str(&format!("\n{line}\n"));
        html.push_str(&format!("<p>{}</p>", crate::display_table::escape(&line)));
    }
    (text, html)
}
