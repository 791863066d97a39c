//! A process-wide interruption flag.
//!
//! A signal handler (or a test) calls [`request`]; long loops (the integrator's step loop,
//! the sweep's point loop) poll [`is_requested`] and stop at the next step, so the command can
//! clean up its staging folder and say `error: interrupted at t = ...`. The flag is one
//! relaxed atomic boolean: setting it is async-signal-safe and polling it costs one load.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The bits of the time the integrator last reached (for progress between samples).
static CLOCK: AtomicU64 = AtomicU64::new(0);

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
    CLOCK.store(t.to_bits(), Ordering::Relaxed);
}

/// The time last published by [`set_clock`] in this process.
pub fn clock() -> f64 {
    f64::from_bits(CLOCK.load(Ordering::Relaxed))
}
