//! Sizes and durations as people write them (`512M`, `2GiB`, `90s`, `30m`), read the same way
//! by the magics, the kernel's settings and the code that reads `DRYML_*` variables, and the
//! one way bytes and counts are written for people ([`size`], [`grouped`]).

/// `512M`, `1.5G`, `2GiB`, `1000`: bytes, with binary K/M/G/T suffixes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: f64 = num.parse().map_err(|_| format!("`{text}` is not a size (as in 512M or 2G)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (use K, M, G or T)")),
    };
    let bytes = n * mult as f64;
    if !(1.0..=u64::MAX as f64).contains(&bytes) {
        return Err(format!("`{text}` is not a positive size"));
    }
    Ok(bytes as u64)
}

/// `90`, `90s`, `30m`, `2h`, `1d`: seconds.
pub fn parse_seconds(t: &str) -> Option<f64> {
    let (num, mult) = match t.char_indices().last()? {
        (i, 's') => (&t[..i], 1.0),
        (i, 'm') => (&t[..i], 60.0),
        (i, 'h') => (&t[..i], 3600.0),
        (i, 'd') => (&t[..i], 86400.0),
        _ => (t, 1.0),
    };
    num.trim().parse::<f64>().ok().map(|n| n * mult).filter(|s| s.is_finite() && *s > 0.0)
}

/// Bytes in binary units, one decimal: `1.5 GiB`.
pub fn size(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// A whole number with thousands separators: `-12,345`.
pub fn grouped(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_group_by_thousands() {
        let cases = [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (-1234567, "-1,234,567"),
            (i64::MIN, "-9,223,372,036,854,775,808"),
        ];
        for (n, want) in cases {
            assert_eq!(grouped(n), want);
        }
    }

    #[test]
    fn sizes_and_durations_parse() {
        for (text, bytes) in
            [("512M", 512u64 << 20), ("2GiB", 2 << 30), ("1000", 1000), ("4k", 4096), ("1.5g", 3 << 29)]
        {
            assert_eq!(parse_size(text).unwrap(), bytes, "{text}");
        }
        for bad in ["", "M", "-1G", "0", "1.2.3M", "ten", "10X"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_seconds("90"), Some(90.0));
        assert_eq!(parse_seconds("30m"), Some(1800.0));
        assert_eq!(parse_seconds("1.5h"), Some(5400.0));
        assert_eq!(parse_seconds("0"), None);
        assert_eq!(parse_seconds("soon"), None);
    }
}
