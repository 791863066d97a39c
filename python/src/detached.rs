//! Long work with the GIL released, stoppable with Ctrl-C.
//!
//! The work runs in a scoped Rust thread; the calling thread waits for it 50 ms at a time with
//! the GIL released and, between waits, lets Python check for signals. On KeyboardInterrupt it
//! asks the library to stop (the integrator then ends at its next step), waits for the thread,
//! and raises the KeyboardInterrupt. The request is process-wide: runs in other Python threads
//! stop too (with RuntimeError "interrupted at t = ...").

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use tokdyn::error::Error;

use tokdyn::interrupt;

/// How often the calling thread checks for Ctrl-C.
const POLL: Duration = Duration::from_millis(50);

/// The Python exception of a library error: bad input is ValueError, a failed run
/// RuntimeError (its message gives the time), a failed read or write OSError.
pub fn to_py_err(e: Error) -> PyErr {
    match e {
        Error::Scenario(_) | Error::Input(_) => PyValueError::new_err(e.to_string()),
        Error::Io { .. } => PyOSError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

/// Runs `work` in its own thread with the GIL released; Ctrl-C stops it within about 50 ms
/// plus one integration step.
pub fn detached<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, Error> + Send,
) -> PyResult<T> {
    // A request left over from an earlier Ctrl-C must not stop this run.
    interrupt::clear();
    let (tx, rx) = channel();
    std::thread::scope(|s| {
        s.spawn(move || {
            let outcome = catch_unwind(AssertUnwindSafe(work));
            let _ = tx.send(outcome);
        });
        let mut rx = rx;
        loop {
            let (received, back) = py.detach(move || (rx.recv_timeout(POLL), rx));
            rx = back;
            match received {
                Ok(Ok(result)) => return result.map_err(to_py_err),
                Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                    return Err(PyRuntimeError::new_err(
                        "tokdyn: internal error (a panic in the library); please report it",
                    ))
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if let Err(interrupted) = py.check_signals() {
                interrupt::request();
                let _ = py.detach(move || rx.recv());
                interrupt::clear();
                return Err(interrupted);
            }
        }
    })
}
