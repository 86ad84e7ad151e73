//! `%repo`: the kernel's view of a dryml object repo. Listing, querying, showing and deleting
//! read the repo's index in the kernel itself (no object file is opened, no type is needed);
//! `load` builds the object in the notebook's process, where its type is registered.

use dryml::repo::{Entry, Repo, Selector};
use serde_json::{json, Value};

/// `2026-11-22 03:04:05` (UTC) from Unix seconds.
pub fn utc(secs: f64) -> String {
    let s = secs.max(0.0) as i64;
    let (days, rem) = (s.div_euclid(86_400), s.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

fn size(bytes: u64) -> String {
    dryml::compute::size(bytes)
}

/// Entries as a table: id, type, arguments, created, size; text, HTML and JSON.
pub fn table(title: &str, entries: &[&Entry]) -> Value {
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let mut args = e.def.args.to_string();
            if args.chars().count() > 80 {
                args = args.chars().take(77).collect::<String>() + "...";
            }
            vec![e.meta.id.clone(), e.def.type_name.clone(), args, utc(e.meta.created), size(e.size)]
        })
        .collect();
    let (text, html) = crate::table::render(title, &["id", "type", "arguments", "created", "size"], &rows);
    let objects: Vec<Value> = entries
        .iter()
        .map(|e| json!({"id": e.meta.id, "type": e.def.type_name, "args": e.def.args, "created": e.meta.created, "description": e.meta.description, "size": e.size}))
        .collect();
    json!({"text/plain": text, "text/html": html, "application/json": {"objects": objects}})
}

/// `%repo show ID`: everything the index knows about one object.
pub fn show(repo: &Repo, e: &Entry) -> Value {
    let file = repo.dir().join("objects").join(format!("{}.dry", e.meta.id));
    let args = serde_json::to_string_pretty(&e.def.args).unwrap_or_default();
    let text = format!(
        "{} {}\ntype: {}\ncreated: {} UTC\ndescription: {}\nsize: {}\nfile: {}\narguments:\n{args}\n",
        e.def.type_name,
        e.meta.id,
        e.def.type_name,
        utc(e.meta.created),
        if e.meta.description.is_empty() { "(none)" } else { &e.meta.description },
        size(e.size),
        file.display()
    );
    json!({
        "text/plain": text,
        "application/json": {"id": e.meta.id, "type": e.def.type_name, "args": e.def.args, "created": e.meta.created,
                             "description": e.meta.description, "size": e.size, "file": file}
    })
}

/// The selector of `%repo get`'s words.
pub fn selector(words: &[String]) -> Result<Selector, String> {
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    Selector::parse(&refs).map_err(|(m, _)| m)
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(super::utc(951_782_400.0), "2000-02-29 00:00:00");
        assert_eq!(super::utc(1_795_316_645.0), "2026-11-22 03:04:05");
    }
}
