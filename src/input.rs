//! Reading input files (scenarios, sweeps, token and matrix files) without hanging or
//! exhausting memory.
//!
//! Only regular files are read: a FIFO, a device, a socket or a directory is refused before it
//! is opened (opening a FIFO without a writer would block for ever; a device like `/dev/zero`
//! never ends). A file is read through `take(limit + 1)`, so at most `limit + 1` bytes are
//! read whatever the file claims: for a file of `size` bytes the rule is `size <= limit`.

use std::fs::{self, File};
use std::io::Read;
use std::path::Path;

/// Largest scenario or sweep file (TOML) read.
pub const TOML_LIMIT: u64 = 64 << 20;

/// What kind of thing `meta` describes, in words, when it is not a regular file.
fn not_regular(meta: &fs::Metadata) -> Option<&'static str> {
    let ft = meta.file_type();
    if ft.is_file() {
        return None;
    }
    if ft.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if ft.is_char_device() || ft.is_block_device() {
            return Some("a device");
        }
        if ft.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// Reads the regular file `path`, at most `limit` bytes; the error says what is wrong (without
/// the path, which the caller names with its key).
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let meta = fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if let Some(what) = not_regular(&meta) {
        return Err(format!("is {what}, not a regular file; give a file"));
    }
    let too_big = |size: u64| {
        format!(
            "is {} bytes, more than the {} bytes this input may have",
            size, limit
        )
    };
    if meta.len() > limit {
        return Err(too_big(meta.len()));
    }
    let file = File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    // The path may have been replaced between the two looks: check the opened file too.
    match file.metadata() {
        Ok(m) if not_regular(&m).is_none() => {}
        Ok(m) => {
            return Err(format!(
                "is {}, not a regular file; give a file",
                not_regular(&m).unwrap_or("not a regular file")
            ))
        }
        Err(e) => return Err(format!("cannot read: {e}")),
    }
    let mut bytes = Vec::with_capacity(meta.len().min(limit) as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// [`read_bytes`] of a UTF-8 text file.
pub fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    let bytes = read_bytes(path, limit)?;
    String::from_utf8(bytes).map_err(|e| format!("cannot read: not UTF-8 text ({e})"))
}

/// `text` cut to at most `max` characters (`...` marks a cut), for quoting values in error
/// lines.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max.saturating_sub(3)).collect();
    format!("{kept}...")
}

/// An error line with every quoted span (between backticks or double quotes) longer than
/// `max` characters clipped, so a huge offending value never floods the terminal.
pub fn clip_quotes(line: &str, max: usize) -> String {
    let mut out = String::with_capacity(line.len().min(4096));
    let mut rest = line;
    while let Some(open) = rest.find(['`', '"']) {
        let quote = rest[open..].chars().next().unwrap_or('`');
        out.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        match after.find(quote) {
            Some(close) => {
                out.push_str(&clip(&after[..close], max));
                out.push(quote);
                rest = &after[close + 1..];
            }
            None => {
                out.push_str(&clip(after, max));
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Longest error line printed; anything beyond is cut (with `...`).
pub const MAX_ERROR_LINE: usize = 2000;

/// The error line as printed: quoted spans clipped ([`clip_quotes`]), numbers written with
/// more than 24 characters (`1e300` printed in full) in the shortest scientific form, and
/// the whole at most [`MAX_ERROR_LINE`] characters.
pub fn error_line(line: &str) -> String {
    let line = line.replace('\n', " ");
    clip(&compact_numbers(&clip_quotes(&line, 80)), MAX_ERROR_LINE)
}

/// Rewrites every decimal number longer than 24 characters in `text` as `{:e}`.
pub fn compact_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4096));
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        let len = rest[start..]
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len() - start);
        let number = &rest[start..start + len];
        out.push_str(&rest[..start]);
        match number.parse::<f64>() {
            Ok(v) if len > 24 => out.push_str(&format!("{v:e}")),
            _ => out.push_str(number),
        }
        rest = &rest[start + len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_numbers_are_written_short() {
        let line = format!("t_end = {} and {} and 12.5", 1e300, 1e-300);
        let short = error_line(&line);
        assert_eq!(short, "t_end = 1e300 and 1e-300 and 12.5");
        assert_eq!(compact_numbers("v1.2.3 x"), "v1.2.3 x");
        let huge = "y".repeat(10 * MAX_ERROR_LINE);
        assert!(error_line(&huge).chars().count() <= MAX_ERROR_LINE);
    }

    #[test]
    fn limits_and_kinds() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.toml");
        fs::write(&p, "x = 1\n").unwrap();
        assert_eq!(read_text(&p, 64).unwrap(), "x = 1\n");
        assert!(read_bytes(&p, 5).unwrap_err().contains("6 bytes"));
        assert!(read_bytes(dir.path(), 64)
            .unwrap_err()
            .contains("a directory"));
        #[cfg(unix)]
        assert!(read_bytes(Path::new("/dev/zero"), 64)
            .unwrap_err()
            .contains("a device"));
    }

    #[test]
    fn quotes_are_clipped() {
        let long = "x".repeat(1000);
        let line = format!("f.toml: name: `{long}` is bad, \"{long}\" too; `short`");
        let clipped = clip_quotes(&line, 80);
        assert!(clipped.len() < 250, "{clipped}");
        assert!(clipped.contains(&format!("`{}...`", "x".repeat(77))));
        assert!(clipped.ends_with("too; `short`"));
        assert_eq!(clip_quotes("no quotes", 80), "no quotes");
        assert_eq!(clip("ab", 80), "ab");
        assert_eq!(clip(&"é".repeat(100), 10).chars().count(), 10);
    }
}
