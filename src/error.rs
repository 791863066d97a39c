//! The errors a user can meet, and their exit codes: 2 for bad input, 1 for a run that fails.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::integrate::{Solution, Status};
use crate::scenario::ScenarioError;

/// Everything that stops a command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A scenario or sweep file, or a `--set`, is wrong (exit 2).
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// Other bad input, already worded with its file and key (exit 2).
    #[error("{0}")]
    Input(String),
    /// The integration failed (exit 1), or was interrupted (exit 128 + the signal).
    #[error("{}", run_failed(.name, .model, .status))]
    RunFailed {
        /// The scenario.
        name: String,
        /// The model that ran.
        model: String,
        /// How the run ended.
        status: Status,
    },
    /// Stopped by an interruption (SIGINT/SIGTERM): `interrupted <where>` (exit 130).
    #[error("interrupted {0}")]
    Interrupted(String),
    /// Reading or writing a file failed (exit 1).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
}

/// `interrupted at t = ...` first for an interruption, else where and how the run failed.
fn run_failed(name: &str, model: &str, status: &Status) -> String {
    match status {
        Status::Interrupted { t } => format!(
            "interrupted at t = {t} ({name}, {model} model; nothing was written, any old result is intact)"
        ),
        _ => format!("{name}: the {model} run failed: {status}"),
    }
}

impl Error {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Scenario(_) | Error::Input(_) => 2,
            Error::RunFailed {
                status: Status::Interrupted { .. },
                ..
            }
            | Error::Interrupted(_) => 130,
            Error::RunFailed { .. } | Error::Io { .. } => 1,
        }
    }

    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}

/// Where a solution meets the errors: the integrator reports a [`Status`], the commands an
/// [`Error`] (kept here so that the integrator does not depend on the errors of the commands).
impl Solution {
    /// The solution of a run that reached its end, or its failure (numerical, or an
    /// interruption) as an [`Error::RunFailed`] saying where and when: the one place callers
    /// turn a [`Status`] into an error.
    pub fn succeeded(self, name: &str, model: impl fmt::Display) -> Result<Solution, Error> {
        if self.status.is_success() {
            Ok(self)
        } else {
            Err(Error::RunFailed {
                name: name.to_string(),
                model: model.to_string(),
                status: self.status,
            })
        }
    }
}
