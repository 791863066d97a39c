//! A process-wide interruption flag.
//!
//! A signal handler (or a test) calls [`request`]; long loops (the integrator's step loop,
//! the sweep's point loop) poll [`is_requested`] and stop at the next step, so the command can
//! clean up its staging folder and say `error: interrupted at t = ...`. The flag is one
//! relaxed atomic boolean: setting it is async-signal-safe and polling it costs one load.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

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
    REQUESTED.store(false, Ordering::Relaxed);
}
