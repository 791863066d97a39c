//! A process-wide interruption flag.
//!
//! A signal handler (or a test) calls [`request`]; long loops (the integrator's step loop,
//! the sweep's point loop) poll [`is_requested`] and stop at the next step, so the command can
//! clean up its staging folder and say `error: interrupted at t = ...`. The flag is one
//! relaxed atomic boolean: setting it is async-signal-safe and polling it costs one load.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

static REQUESTED: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The bits of the time the integrator last reached (for progress between samples).
static CLOCK: AtomicU64 = AtomicU64::new(0);
/// The bits of the offset added to the published time (the start of the current layer).
static CLOCK_OFFSET: AtomicU64 = AtomicU64::new(0);

/// Asks every running loop to stop at its next step.
pub fn request() {
    REQUESTED.store(true, Ordering::Relaxed);
}

/// Whether an interruption was requested (and not cleared since).
pub fn is_requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// Withdraws a request (for tests and for library users that run again afterwards).
pub fn clear() {
    SIGNAL.store(0, Ordering::Relaxed);
    REQUESTED.store(false, Ordering::Relaxed);
}

/// [`request`] on behalf of the signal `signal` (SIGINT = 2, SIGTERM = 15).
pub fn request_signal(signal: i32) {
    SIGNAL.store(signal, Ordering::Relaxed);
    request();
}

/// The exit code of a process stopped by a signal: 128 + the signal number (130 for SIGINT,
/// 143 for SIGTERM); `None` when no signal was received.
pub fn exit_code() -> Option<u8> {
    match SIGNAL.load(Ordering::Relaxed) {
        s @ 1..=127 => Some(128 + s as u8),
        _ => None,
    }
}

/// Publishes the time `t` the integrator has reached (one relaxed store per step), so that
/// progress can be shown between output samples.
pub fn set_clock(t: f64) {
    let offset = f64::from_bits(CLOCK_OFFSET.load(Ordering::Relaxed));
    CLOCK.store((t + offset).to_bits(), Ordering::Relaxed);
}

/// The start of the layer being integrated: the integrator counts time from there, and
/// [`set_clock`] adds it so that the clock shows the run's time.
pub fn set_clock_offset(start: f64) {
    CLOCK_OFFSET.store(start.to_bits(), Ordering::Relaxed);
}

/// The time last published by [`set_clock`] in this process.
pub fn clock() -> f64 {
    f64::from_bits(CLOCK.load(Ordering::Relaxed))
}

// ---------------------------------------------------------------------------------------------
// Clean-up on a forced stop
//
// A command that does not reach its next poll within [`GRACE`] of a signal (a picture being
// drawn, a long system call) is stopped from outside: the signal thread (CLI) or the Python
// binding removes what the command registered here (its staging folders and its exclusive
// lock files), prints one line and ends the process (CLI) or returns to Python.

/// How long a command may take to stop by itself after a signal before it is stopped from
/// outside (the whole stop stays within a second).
pub const GRACE: std::time::Duration = std::time::Duration::from_millis(600);

/// Paths to remove on a forced stop.
pub struct Registry(Mutex<Vec<PathBuf>>);

/// The process's registry.
static CLEANUP: Registry = Registry::new();
static EXITING: AtomicBool = AtomicBool::new(false);

/// A path removed on a forced stop while this value lives (dropping it withdraws it).
#[derive(Debug)]
pub struct Registered(&'static Registry, PathBuf);

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Registry")
    }
}

impl Registry {
    /// An empty registry.
    pub const fn new() -> Registry {
        Registry(Mutex::new(Vec::new()))
    }

    /// Registers `path` (a staging folder or a lock file) for removal on a forced stop.
    pub fn register(&'static self, path: &Path) -> Registered {
        if let Ok(mut list) = self.0.lock() {
            list.push(path.to_path_buf());
        }
        Registered(self, path.to_path_buf())
    }

    /// Removes every registered path (folders with their content); returns how many there
    /// were.
    pub fn clean_up(&self) -> usize {
        let paths = match self.0.lock() {
            Ok(mut list) => std::mem::take(&mut *list),
            Err(_) => return 0,
        };
        for p in &paths {
            let _ = match std::fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
                Ok(_) => std::fs::remove_file(p),
                Err(_) => Ok(()),
            };
        }
        paths.len()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut list) = self.0 .0.lock() {
            if let Some(i) = list.iter().rposition(|p| *p == self.1) {
                list.swap_remove(i);
            }
        }
    }
}

/// Registers `path` (a staging folder or a lock file) for removal on a forced stop.
pub fn register(path: &Path) -> Registered {
    CLEANUP.register(path)
}

/// Removes every path registered in this process (see [`Registry::clean_up`]).
pub fn clean_up_now() -> usize {
    CLEANUP.clean_up()
}

/// Claims the right to print the last line and end the process: `true` for the first caller
/// only (the command finishing by itself, or the forced stop).
pub fn claim_exit() -> bool {
    EXITING
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_paths_are_removed_once_and_withdrawn_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let staging = dir.path().join(".x.tmp-abcdef");
        std::fs::create_dir_all(staging.join("inner")).unwrap();
        let lock = dir.path().join(".x.lock");
        std::fs::write(&lock, "1").unwrap();
        let kept = dir.path().join("kept");
        std::fs::write(&kept, "1").unwrap();
        static REGISTRY: Registry = Registry::new();
        let _a = REGISTRY.register(&staging);
        let _b = REGISTRY.register(&lock);
        drop(REGISTRY.register(&kept));
        assert_eq!(REGISTRY.clean_up(), 2);
        assert!(!staging.exists() && !lock.exists());
        assert!(kept.exists(), "a withdrawn path is left alone");
    }
}
