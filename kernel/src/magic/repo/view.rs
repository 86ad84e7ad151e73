//! `%repo`'s views of a repo's index: the table of entries and one entry's page, as text,
//! HTML and JSON.

use dryml::objects::{Entry, Repo};
use dryml_sys::units::size;
use serde_json::{json, Value};

/// `2026-11-22 03:04:05` (UTC) from Unix seconds.
pub fn utc(secs: f64) -> String {
    chrono::DateTime::from_timestamp(secs.max(0.0) as i64, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

fn clip(text: String) -> String {
    if text.chars().count() > 80 {
        text.chars().take(77).collect::<String>() + "..."
    } else {
        text
    }
}

/// Entries as a table: id, type, arguments, created, size, and the metrics training gave (a
/// sweep's) when any entry has them; text, HTML and JSON.
pub fn table(title: &str, entries: &[&Entry]) -> Value {
    let with_metrics = entries.iter().any(|e| e.meta.metrics.is_some());
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let mut row = vec![
                e.meta.id.clone(),
                e.def.type_name.clone(),
                clip(e.def.args.to_string()),
                utc(e.meta.created),
                size(e.size),
            ];
            if with_metrics {
                row.push(e.meta.metrics.as_ref().map(|m| clip(m.to_string())).unwrap_or_default());
            }
            row
        })
        .collect();
    let mut header = vec!["id", "type", "arguments", "created", "size"];
    if with_metrics {
        header.push("metrics");
    }
    let (text, html) = crate::display_table::render(title, &header, &rows);
    let objects: Vec<Value> = entries
        .iter()
        .map(|e| json!({"id": e.meta.id, "type": e.def.type_name, "args": e.def.args, "created": e.meta.created, "description": e.meta.description, "size": e.size, "metrics": e.meta.metrics}))
        .collect();
    json!({"text/plain": text, "text/html": html, dryml::__kernel::display::DATA_MIME: {"objects": objects}})
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
        dryml::__kernel::display::DATA_MIME: {"id": e.meta.id, "type": e.def.type_name, "args": e.def.args, "created": e.meta.created,
                             "description": e.meta.description, "size": e.size, "file": file}
    })
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
