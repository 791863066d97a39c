//! The errors a user can meet, and their exit codes: 2 for bad input, 1 for a run that fails.

use std::io;
use std::path::PathBuf;

use crate::integrate::Status;
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
    /// The integration failed (exit 1).
    #[error("{name}: the {model} run failed: {status}")]
    RunFailed {
        name: String,
        model: String,
        status: Status,
    },
    /// Reading or writing a file failed (exit 1).
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl Error {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Scenario(_) | Error::Input(_) => 2,
            Error::RunFailed { .. } | Error::Io { .. } => 1,
        }
    }

    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}
