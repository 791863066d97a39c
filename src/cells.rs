//! Numbers as text: CSV cells for sweeps and bifurcation files (written with
//! `output::write_atomic`), and short numbers for titles and legends.
//!
//! Every cell of a sweep file is a string formatted once, the same way the `csv` crate formats
//! numbers (`ryu`, the shortest decimal that reads back to the same f64), so rows computed now,
//! read back from a progress file or from a shard file give the same bytes.

/// The shortest decimal that reads back to `x`, as the `csv` crate writes it (`1.0`, `0.25`,
/// `1e-7`, `NaN`, `inf`).
pub fn fmt_f64(x: f64) -> String {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::with_capacity(24));
    // Writing one number into memory cannot fail.
    let _ = w.serialize(x);
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8_lossy(&bytes).trim_end().to_string()
}

/// An optional number: empty cell for `None`.
pub fn fmt_opt(x: Option<f64>) -> String {
    x.map(fmt_f64).unwrap_or_default()
}

/// One CSV record (with its line break) from cells.
pub fn csv_line<S: AsRef<[u8]>>(cells: &[S]) -> String {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    let _ = w.write_record(cells);
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A whole CSV file: header and rows.
pub fn csv_text<S: AsRef<[u8]>>(
    header: &[S],
    rows: impl IntoIterator<Item = Vec<String>>,
) -> String {
    let mut text = csv_line(header);
    for row in rows {
        text.push_str(&csv_line(&row));
    }
    text
}

/// A short number for titles, labels and legends: 3 significant digits, no trailing zeros.
pub fn short_number(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e5).contains(&a) {
        return format!("{v:.2e}");
    }
    let digits = (2 - a.log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Parses the records of CSV text (no header handling); records of any length.
pub fn parse_records(text: &str) -> Result<Vec<Vec<String>>, csv::Error> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    r.records()
        .map(|rec| rec.map(|rec| rec.iter().map(str::to_string).collect()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_shortest_round_trip() {
        assert_eq!(fmt_f64(1.0), "1.0");
        assert_eq!(fmt_f64(0.25), "0.25");
        assert_eq!(fmt_f64(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(fmt_f64(1e-7), "1e-7");
        assert_eq!(fmt_f64(-3.5e20), "-3.5e20");
        assert_eq!(fmt_opt(None), "");
        for x in [0.1, 1.0 / 3.0, 6.02e23, -1e-300, 123456.789] {
            assert_eq!(fmt_f64(x).parse::<f64>().unwrap(), x);
        }
    }

    #[test]
    fn lines_quote_only_when_needed() {
        assert_eq!(csv_line(&["a", "", "1.5"]), "a,,1.5\n");
        assert_eq!(
            csv_line(&["x", "say \"hi\", then"]),
            "x,\"say \"\"hi\"\", then\"\n"
        );
        let text = csv_text(&["a", "b"], vec![vec!["1".into(), "".into()]]);
        assert_eq!(text, "a,b\n1,\n");
        let back = parse_records("x,\"say \"\"hi\"\", then\"\n1\n").unwrap();
        assert_eq!(
            back,
            vec![
                vec!["x".to_string(), "say \"hi\", then".into()],
                vec!["1".into()]
            ]
        );
    }
}
