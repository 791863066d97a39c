//! The one error type of scenario loading.
//!
//! Every problem with a scenario (a missing file, malformed TOML, an unknown key, a bad value,
//! a bad `--set`, an unreadable token file) becomes a [`ScenarioError`] whose `Display` is a
//! single line naming the scenario file, the key (when there is one) and what is wrong:
//!
//! ```text
//! scenarios/x.toml: model.V[1][0]: unknown param `v13` (params are: v11, v12)
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

/// A problem with a scenario; `Display` is one line: `FILE: KEY: MESSAGE` (or `FILE: MESSAGE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    file: PathBuf,
    key: Option<String>,
    message: String,
}

impl ScenarioError {
    /// An error about one key of the scenario (`model.beta`, `model.V[1][0]`, `tokens.path`).
    pub fn at(file: &Path, key: impl Into<String>, message: impl Into<String>) -> Self {
        ScenarioError {
            file: file.to_path_buf(),
            key: Some(one_line(&key.into())),
            message: one_line(&message.into()),
        }
    }

    /// An error about the file as a whole (cannot read it, malformed TOML).
    pub fn file(file: &Path, message: impl Into<String>) -> Self {
        ScenarioError {
            file: file.to_path_buf(),
            key: None,
            message: one_line(&message.into()),
        }
    }

    /// The scenario file the error is about.
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// The key the error is about, if any.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// What is wrong (without file and key).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file.display())?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// Squash a message onto one line: line breaks become "; ", other control characters are escaped.
pub(crate) fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty());
    if let Some(first) = lines.next() {
        push_escaped(&mut out, first);
        for line in lines {
            out.push_str("; ");
            push_escaped(&mut out, line.trim_start());
        }
    }
    out
}

fn push_escaped(out: &mut String, line: &str) {
    for c in line.chars() {
        if c.is_control() && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_key_and_message() {
        let e = ScenarioError::at(
            Path::new("scenarios/x.toml"),
            "model.beta",
            "must be finite",
        );
        assert_eq!(
            e.to_string(),
            "scenarios/x.toml: model.beta: must be finite"
        );
        assert_eq!(e.key(), Some("model.beta"));
        assert_eq!(e.path(), Path::new("scenarios/x.toml"));
        let e = ScenarioError::file(Path::new("a.toml"), "cannot read: No such file");
        assert_eq!(e.to_string(), "a.toml: cannot read: No such file");
    }

    #[test]
    fn display_is_one_line() {
        let e = ScenarioError::at(
            Path::new("a.toml"),
            "k\ney",
            "first\n  second\r\n\nthird\u{7}",
        );
        let s = e.to_string();
        assert!(!s.contains('\n') && !s.contains('\r'), "{s:?}");
        assert!(s.contains("first; second; third"), "{s}");
    }
}
