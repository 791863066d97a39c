//! Long work with the GIL released, stoppable with Ctrl-C.
//!
//! The work runs in its own Rust thread; the calling thread waits for it 50 ms at a time with
//! the GIL released and, between waits, lets Python check for signals. On KeyboardInterrupt it
//! asks the library to stop (the integrator then ends at its next step), waits for the thread
//! at most `interrupt::GRACE` (after which the thread's staging folders and locks are removed
//! and it is left to stop at its next poll), and raises the KeyboardInterrupt. The request is process-wide: runs in other Python threads
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
    // One short line, as the command line prints it.
    let text = tokdyn::input::error_line(&e.to_string());
    match e {
        Error::Scenario(_) | Error::Input(_) => PyValueError::new_err(text),
        Error::Io { .. } => PyOSError::new_err(text),
        _ => PyRuntimeError::new_err(text),
    }
}

/// Runs `work` in its own thread with the GIL released; Ctrl-C stops it within about 50 ms
/// plus one integration step. A command that has not stopped within
/// [`interrupt::GRACE`] of the Ctrl-C (a picture being drawn, say) is left to end on its own:
/// its staging folders and lock files are removed at once and KeyboardInterrupt is raised,
/// so one Ctrl-C always returns to Python within a second.
pub fn detached<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> PyResult<T> {
    // A request left over from an earlier Ctrl-C must not stop this run.
    interrupt::clear();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        // On a thread of rayon's pool: the parallel loops then start without a hand-off.
        let outcome = catch_unwind(AssertUnwindSafe(|| tokdyn::on_the_pool(work)));
        let _ = tx.send(outcome);
    });
    let mut rx = rx;
    loop {
        let (received, back) = py.detach(move || (rx.recv_timeout(POLL), rx));
        rx = back;
        match received {
            Ok(outcome) => return finished(outcome),
            Err(RecvTimeoutError::Disconnected) => return Err(internal_error()),
            Err(RecvTimeoutError::Timeout) => {}
        }
        if let Err(interrupted) = py.check_signals() {
            interrupt::request();
            let (stopped, _) = py.detach(move || (rx.recv_timeout(interrupt::GRACE), rx));
            if stopped.is_err() {
                // Still busy: leave it (the request stays, so it stops at its next poll),
                // with nothing of its output in place.
                interrupt::clean_up_now();
            } else {
                interrupt::clear();
            }
            return Err(interrupted);
        }
    }
}

/// The result of the work thread, or the error of a panic in it.
fn finished<T>(outcome: std::thread::Result<Result<T, Error>>) -> PyResult<T> {
    match outcome {
        Ok(result) => result.map_err(to_py_err),
        Err(_) => Err(internal_error()),
    }
}

fn internal_error() -> PyErr {
    PyRuntimeError::new_err("tokdyn: internal error (a panic in the library); please report it")
}
