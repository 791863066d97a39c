//! Reading a 2-D table of numbers from a `.npy` (float64 or float32, widened) or `.csv` file.
//!
//! Used for `{ file = "A.npy" }` matrices and for `tokens.init = "file"`. The caller states the
//! shape it needs; the shape is checked before any data is read (an `.npy` header can claim any
//! size), and every value must be finite. Errors are plain messages; the caller adds file and key.

use std::path::Path;

/// Read a `rows x cols` table, row-major, from `path` (`.npy` or `.csv`, by extension).
pub fn read_table(path: &Path, rows: usize, cols: usize) -> Result<Vec<f64>, String> {
    let shown = path.display();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let result = match ext.as_deref() {
        Some("npy") => read_npy(path, rows, cols),
        Some("csv") => read_csv(path, rows, cols),
        _ => {
            return Err(format!(
                "`{shown}`: unsupported file type (expected .npy or .csv)"
            ))
        }
    };
    result.map_err(|e| format!("`{shown}`: {e}"))
}

/// Reads a regular file of at most `limit` bytes (a FIFO or device is refused, never read).
fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    crate::input::read_bytes(path, limit)
}

/// Largest plausible size of a rows x cols numeric file: 8 bytes a number plus the header for
/// .npy, 64 characters a number for .csv, and 1 MiB of slack.
fn size_limit(rows: usize, cols: usize, per_number: u64) -> u64 {
    (rows as u64)
        .saturating_mul(cols as u64)
        .saturating_mul(per_number)
        .saturating_add(1 << 20)
}

fn check_finite(data: &[f64], cols: usize) -> Result<(), String> {
    match data.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(format!(
            "value {} at row {}, column {} is not finite",
            data[i],
            i / cols.max(1) + 1,
            i % cols.max(1) + 1
        )),
        None => Ok(()),
    }
}

fn read_csv(path: &Path, rows: usize, cols: usize) -> Result<Vec<f64>, String> {
    let bytes = read_bytes(path, size_limit(rows, cols, 64))?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(bytes.as_slice());
    let mut data = Vec::new();
    let mut found_rows = 0usize;
    let mut records = reader.records().peekable();
    // An optional header `x1,...,xd` (as tokdyn writes tokens_final.csv) is skipped.
    if let Some(Ok(first)) = records.peek() {
        if is_token_header(first) {
            records.next();
        }
    }
    for (r, record) in records.enumerate() {
        let record = record.map_err(|e| format!("malformed CSV: {e}"))?;
        if r >= rows {
            return Err(format!(
                "expected {rows} rows of {cols} numbers, found more rows"
            ));
        }
        if record.len() != cols {
            return Err(format!(
                "row {}: expected {cols} comma-separated numbers, found {}",
                r + 1,
                record.len()
            ));
        }
        for (c, field) in record.iter().enumerate() {
            let value: f64 = field.parse().map_err(|_| {
                format!(
                    "row {}, column {}: `{}` is not a number",
                    r + 1,
                    c + 1,
                    field.escape_debug()
                )
            })?;
            data.push(value);
        }
        found_rows = r + 1;
    }
    if found_rows != rows {
        return Err(format!(
            "expected {rows} rows of {cols} numbers, found {found_rows} rows"
        ));
    }
    check_finite(&data, cols)?;
    Ok(data)
}

/// Whether a CSV record is the header `x1,x2,...` that tokdyn writes above tokens.
fn is_token_header(record: &csv::StringRecord) -> bool {
    !record.is_empty()
        && record
            .iter()
            .enumerate()
            .all(|(i, field)| field == format!("x{}", i + 1))
}

fn read_npy(path: &Path, rows: usize, cols: usize) -> Result<Vec<f64>, String> {
    let bytes = read_bytes(path, size_limit(rows, cols, 8))?;
    npy_shape_guard(&bytes)?;
    let npy =
        npyz::NpyFile::new(bytes.as_slice()).map_err(|e| format!("not a valid .npy file: {e}"))?;
    let found = npy.shape().to_vec();
    if found.len() != 2 || found[0] != rows as u64 || found[1] != cols as u64 {
        let dims: Vec<String> = found.iter().map(u64::to_string).collect();
        return Err(format!(
            "expected shape ({rows}, {cols}), found ({})",
            dims.join(", ")
        ));
    }
    let order = npy.order();
    let dtype = npy.dtype().descr();
    let read_error = |e: std::io::Error| format!("cannot read the data: {e}");
    let is_f32 = matches!(npy.dtype(), npyz::DType::Plain(t)
        if t.type_char() == npyz::TypeChar::Float && t.size_field() == 4);
    let flat: Vec<f64> = match (is_f32, npy) {
        (true, npy) => match npy.data::<f32>() {
            Ok(reader) => reader
                .map(|v| v.map(f64::from))
                .collect::<Result<_, _>>()
                .map_err(read_error)?,
            Err(_) => return Err(format!("cannot read float32 data (dtype {dtype})")),
        },
        (false, npy) => match npy.data::<f64>() {
            Ok(reader) => reader.collect::<Result<_, _>>().map_err(read_error)?,
            Err(_) => {
                return Err(format!(
                    "expected float64 or float32 data, found dtype {dtype}"
                ))
            }
        },
    };
    let data = match order {
        npyz::Order::C => flat,
        npyz::Order::Fortran => {
            // Column-major in the file: element (r, c) is at c * rows + r.
            let mut data = Vec::with_capacity(flat.len());
            for r in 0..rows {
                for c in 0..cols {
                    data.push(flat[c * rows + r]);
                }
            }
            data
        }
    };
    check_finite(&data, cols)?;
    Ok(data)
}

/// Check an `.npy` header before handing the bytes to `npyz`: the declared header must fit in
/// the file and the shape's element count must not overflow (`npyz` multiplies it unchecked).
/// Anything else odd is left for `npyz` to report.
fn npy_shape_guard(bytes: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    if bytes.len() < 10 || !bytes.starts_with(MAGIC) {
        return Err("not a .npy file (no NUMPY magic)".to_string());
    }
    let (len, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = start
        .checked_add(len)
        .and_then(|end| bytes.get(start..end))
        .ok_or_else(|| "truncated .npy header".to_string())?;
    let text = String::from_utf8_lossy(header);
    let Some(at) = text.find("shape") else {
        return Ok(());
    };
    let rest = &text[at..];
    let (Some(open), Some(close)) = (rest.find('('), rest.find(')')) else {
        return Ok(());
    };
    if close < open {
        return Ok(());
    }
    let mut total: u64 = 1;
    for part in rest[open + 1..close].split(',') {
        let part = part.trim().trim_end_matches('L');
        if part.is_empty() {
            continue;
        }
        let Ok(dim) = part.parse::<u64>() else {
            return Ok(());
        };
        total = total
            .checked_mul(dim)
            .ok_or_else(|| format!("shape ({}) is too large", rest[open + 1..close].trim()))?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use npyz::WriterBuilder;

    /// Write a C-order float64 .npy file (also used by other tests of the scenario module).
    pub(crate) fn write_npy(path: &Path, shape: &[u64], data: &[f64]) {
        let file = std::fs::File::create(path).unwrap();
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(shape)
            .writer(std::io::BufWriter::new(file))
            .begin_nd()
            .unwrap();
        writer.extend(data.iter().copied()).unwrap();
        writer.finish().unwrap();
    }

    #[test]
    fn npy_round_trip_and_shape_check() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.npy");
        write_npy(&p, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
        assert_eq!(read_table(&p, 2, 3).unwrap(), vec![1., 2., 3., 4., 5., 6.]);
        let err = read_table(&p, 3, 2).unwrap_err();
        assert!(err.contains("expected shape (3, 2), found (2, 3)"), "{err}");
        assert!(err.contains("m.npy"), "{err}");
    }

    #[test]
    fn npy_float32_is_widened() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f4.npy");
        let file = std::fs::File::create(&p).unwrap();
        let mut writer = npyz::WriteOptions::<f32>::new()
            .default_dtype()
            .shape(&[2, 2])
            .writer(std::io::BufWriter::new(file))
            .begin_nd()
            .unwrap();
        writer.extend([0.1f32, -2.5, 3.0, 1e-3]).unwrap();
        writer.finish().unwrap();
        let got = read_table(&p, 2, 2).unwrap();
        let want: Vec<f64> = [0.1f32, -2.5, 3.0, 1e-3]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        assert_eq!(got, want);
        assert_ne!(got[0], 0.1, "widened from float32, not reparsed");
    }

    #[test]
    fn npy_fortran_order_is_transposed_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.npy");
        let file = std::fs::File::create(&p).unwrap();
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[2, 3])
            .order(npyz::Order::Fortran)
            .writer(std::io::BufWriter::new(file))
            .begin_nd()
            .unwrap();
        // Column-major storage of [[1, 2, 3], [4, 5, 6]].
        writer.extend([1., 4., 2., 5., 3., 6.]).unwrap();
        writer.finish().unwrap();
        assert_eq!(read_table(&p, 2, 3).unwrap(), vec![1., 2., 3., 4., 5., 6.]);
    }

    #[test]
    fn npy_wrong_dtype_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("i.npy");
        let file = std::fs::File::create(&p).unwrap();
        let mut writer = npyz::WriteOptions::<i64>::new()
            .default_dtype()
            .shape(&[1, 2])
            .writer(std::io::BufWriter::new(file))
            .begin_nd()
            .unwrap();
        writer.extend([1i64, 2]).unwrap();
        writer.finish().unwrap();
        let err = read_table(&p, 1, 2).unwrap_err();
        assert!(err.contains("float64"), "{err}");

        let g = dir.path().join("g.npy");
        std::fs::write(&g, b"hello").unwrap();
        assert!(read_table(&g, 1, 2).is_err());
        // A header claiming an overflowing shape must be an error, not a panic.
        let mut bad = b"\x93NUMPY\x01\x00".to_vec();
        let h = b"{'descr': '<f8', 'fortran_order': False, 'shape': (18446744073709551615, 3), }\n";
        bad.extend((h.len() as u16).to_le_bytes());
        bad.extend(h);
        let b = dir.path().join("b.npy");
        std::fs::write(&b, &bad).unwrap();
        let err = read_table(&b, 2, 3).unwrap_err();
        assert!(err.contains("too large"), "{err}");
        // A plausible header with too little data.
        let mut short = b"\x93NUMPY\x01\x00".to_vec();
        let h = b"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }\n";
        short.extend((h.len() as u16).to_le_bytes());
        short.extend(h);
        short.extend(1.0f64.to_le_bytes());
        let s = dir.path().join("s.npy");
        std::fs::write(&s, &short).unwrap();
        assert!(read_table(&s, 2, 3).is_err());
    }

    #[test]
    fn csv_reading_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        std::fs::write(&p, "1, 2\n3,4.5\n").unwrap();
        assert_eq!(read_table(&p, 2, 2).unwrap(), vec![1., 2., 3., 4.5]);
        std::fs::write(&p, "1,2\n3\n").unwrap();
        let err = read_table(&p, 2, 2).unwrap_err();
        assert!(err.contains("row 2"), "{err}");
        std::fs::write(&p, "1,2\n3,x\n").unwrap();
        let err = read_table(&p, 2, 2).unwrap_err();
        assert!(err.contains("`x` is not a number"), "{err}");
        std::fs::write(&p, "1,2\n3,inf\n").unwrap();
        let err = read_table(&p, 2, 2).unwrap_err();
        assert!(err.contains("not finite"), "{err}");
        std::fs::write(&p, "1,2\n").unwrap();
        let err = read_table(&p, 2, 2).unwrap_err();
        assert!(err.contains("found 1 rows"), "{err}");
        std::fs::write(&p, "1,2\n3,4\n5,6\n").unwrap();
        assert!(read_table(&p, 2, 2).is_err());
        // The header tokdyn writes above tokens_final.csv is skipped; any other text is not.
        std::fs::write(&p, "x1,x2\n1,2\n3,4\n").unwrap();
        assert_eq!(read_table(&p, 2, 2).unwrap(), vec![1., 2., 3., 4.]);
        std::fs::write(&p, "x2,x1\n1,2\n3,4\n").unwrap();
        assert!(read_table(&p, 2, 2).is_err());
    }

    #[test]
    fn missing_file_and_bad_extension() {
        let err = read_table(Path::new("/nonexistent/q.csv"), 1, 1).unwrap_err();
        assert!(
            err.contains("/nonexistent/q.csv") && err.contains("cannot read"),
            "{err}"
        );
        let err = read_table(Path::new("q.txt"), 1, 1).unwrap_err();
        assert!(err.contains(".npy or .csv"), "{err}");
    }
}
