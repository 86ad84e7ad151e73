//! `%repo`'s views of a repo's index: the table of entries, one entry's page with how it was
//! made (its provenance), and two entries side by side; as text, HTML and JSON.

use crate::protocol::published::Bundle;
use dryml::objects::{Entry, Repo};
use dryml_sys::units::size;
use serde::Serialize;
use serde_json::Value;

/// An entry in the figures: the table's row (with its metrics) or `show`'s page (with its file
/// and provenance).
#[derive(Serialize)]
struct Object<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    type_name: &'a str,
    args: &'a Value,
    created: f64,
    description: &'a str,
    size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    metrics: Option<&'a Option<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<&'a std::path::Path>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<Option<Value>>,
}

impl<'a> Object<'a> {
    fn of(e: &'a Entry) -> Object<'a> {
        Object {
            id: &e.meta.id,
            type_name: &e.def.type_name,
            args: &e.def.args,
            created: e.meta.created,
            description: &e.meta.description,
            size: e.size,
            metrics: None,
            file: None,
            provenance: None,
        }
    }
}

/// Two entries side by side in the figures.
#[derive(Serialize)]
struct Diff<'a> {
    a: &'a str,
    b: &'a str,
    differ: Vec<Differ<'a>>,
    same: usize,
}

/// A line where two entries differ.
#[derive(Serialize)]
struct Differ<'a> {
    name: &'a str,
    a: &'a str,
    b: &'a str,
}

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
    #[derive(Serialize)]
    struct Objects<'a> {
        objects: Vec<Object<'a>>,
    }
    let objects = entries.iter().map(|e| Object { metrics: Some(&e.meta.metrics), ..Object::of(e) }).collect();
    Bundle::html(text, html).with_data(&Objects { objects }).value()
}

/// `%repo show ID`: everything the index knows about one object.
pub fn show(repo: &Repo, e: &Entry) -> Value {
    let file = repo.dir().join("objects").join(format!("{}.dry", e.meta.id));
    let args = serde_json::to_string_pretty(&e.def.args).unwrap_or_default();
    let made: String =
        e.meta.provenance.iter().flat_map(|p| p.fields()).map(|(k, v)| format!("  {k}: {v}\n")).collect();
    let made =
        if made.is_empty() { "provenance: (none recorded)\n".to_string() } else { format!("provenance:\n{made}") };
    let text = format!(
        "{} {}\ntype: {}\ncreated: {} UTC\ndescription: {}\nsize: {}\nfile: {}\narguments:\n{args}\n{made}",
        e.def.type_name,
        e.meta.id,
        e.def.type_name,
        utc(e.meta.created),
        if e.meta.description.is_empty() { "(none)" } else { &e.meta.description },
        size(e.size),
        file.display()
    );
    let provenance = Some(e.meta.provenance.as_ref().map(|p| p.to_json()));
    Bundle::text(text).with_data(&Object { file: Some(&file), provenance, ..Object::of(e) }).value()
}

/// Each leaf of a JSON value as a dotted name and its text (`args.lr`, `args.layers.0`).
fn leaves(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) if !m.is_empty() => m.iter().for_each(|(k, v)| leaves(&format!("{prefix}.{k}"), v, out)),
        Value::Array(a) if !a.is_empty() => {
            a.iter().enumerate().for_each(|(i, v)| leaves(&format!("{prefix}.{i}"), v, out))
        }
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// One entry's lines for `%repo diff`: type, arguments, metrics, provenance.
fn lines(e: &Entry) -> Vec<(String, String)> {
    let mut out = vec![("type".to_string(), e.def.type_name.clone())];
    leaves("args", &e.def.args, &mut out);
    if let Some(m) = &e.meta.metrics {
        leaves("metrics", m, &mut out);
    }
    out.extend(e.meta.provenance.iter().flat_map(|p| p.fields()));
    out
}

/// `%repo diff A B`: the lines where two entries differ (a line one lacks shows `—`), in A's
/// order then B's, and how many are the same.
pub fn diff(a: &Entry, b: &Entry) -> Value {
    let (la, lb) = (lines(a), lines(b));
    let find = |l: &[(String, String)], k: &str| l.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut names: Vec<&String> = la.iter().map(|(n, _)| n).collect();
    names.extend(lb.iter().map(|(n, _)| n).filter(|n| !la.iter().any(|(m, _)| m == *n)));
    let missing = || "—".to_string();
    let rows: Vec<Vec<String>> = names
        .iter()
        .map(|n| (n, find(&la, n), find(&lb, n)))
        .filter(|(_, x, y)| x != y)
        .map(|(n, x, y)| vec![n.to_string(), clip(x.unwrap_or_else(missing)), clip(y.unwrap_or_else(missing))])
        .collect();
    let same = names.len() - rows.len();
    let title = format!("{} and {}: {} lines differ, {same} the same", a.meta.id, b.meta.id, rows.len());
    let (text, html) = crate::display_table::render(&title, &["", &a.meta.id, &b.meta.id], &rows);
    let differ = rows.iter().map(|r| Differ { name: &r[0], a: &r[1], b: &r[2] }).collect();
    Bundle::html(text, html).with_data(&Diff { a: &a.meta.id, b: &b.meta.id, differ, same }).value()
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
