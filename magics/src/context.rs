//! The JSON form of a resource request (`%context {"tf": {"gpu/0": 0.5}}`), read into the same
//! grammar as the text form, so both give the same values and the same errors.

use dryml::context::Requests;
use serde_json::Value;

/// Parses `{"framework": {"key": number, ...}, ...}`. Errors name the place in the JSON.
pub fn requests_from_json(text: &str) -> Result<Requests, String> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| format!("not valid JSON at line {}, column {}: {e}", e.line(), e.column()))?;
    let Value::Object(frameworks) = v else {
        return Err("expected a JSON object of frameworks, as in {\"tf\": {\"gpu/0\": 0.5}}".into());
    };
    // The text grammar does the checking: one token per framework and per key=value.
    let mut tokens = Vec::new();
    let mut places = Vec::new();
    for (fw, keys) in &frameworks {
        tokens.push(fw.clone());
        places.push(format!("\"{fw}\""));
        let Value::Object(keys) = keys else {
            return Err(format!("\"{fw}\": expected an object of keys, as in {{\"num_gpus\": 1}}"));
        };
        for (k, val) in keys {
            let Value::Number(n) = val else {
                return Err(format!("\"{fw}\".\"{k}\": expected a number, got {val}"));
            };
            tokens.push(format!("{k}={n}"));
            places.push(format!("\"{fw}\".\"{k}\""));
        }
    }
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    Requests::parse_tokens(&refs).map_err(|e| match e.token {
        Some(i) => format!("{} (at {})", e.message, places[i]),
        None => e.message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_text_forms_agree() {
        let table: &[(&str, &str)] = &[
            (r#"{"tf": {"gpu/0": 0.5}, "torch": {"num_gpus": 0}}"#, "tf gpu/0=0.5 torch num_gpus=0"),
            (r#"{"default": {}}"#, "default"),
            (r#"{"tf": {"num_cpus": -1, "cpu/2": 1}}"#, "tf num_cpus=-1 cpu/2=1"),
        ];
        for (json, text) in table {
            assert_eq!(requests_from_json(json).unwrap(), Requests::parse(text).unwrap(), "{json}");
        }
    }

    #[test]
    fn json_errors_name_the_place() {
        let table: &[(&str, &str)] = &[
            (r#"{"tf": {"gpu/0": 1.5}}"#, "tf: gpu/0 must be a fraction in (0, 1], got 1.5 (at \"tf\".\"gpu/0\")"),
            (r#"{"tf": {"gpu/0": "half"}}"#, "\"tf\".\"gpu/0\": expected a number, got \"half\""),
            (r#"{"tf": {"num_gpus": 1.5}}"#, "num_gpus must be a whole number"),
            (r#"{"tf": 1}"#, "\"tf\": expected an object of keys"),
            (r#"[1]"#, "expected a JSON object of frameworks"),
            (r#"{"tf": {"#, "not valid JSON at line 1"),
            (r#"{"tf": {"tpu/0": 1}}"#, "unknown key `tpu/0`"),
        ];
        for (json, words) in table {
            let e = requests_from_json(json).expect_err(json);
            assert!(e.contains(words), "{json}: {e}");
        }
    }
}
