//! Progress of a long run on stderr: a bar on a terminal (after a second), a plain line every
//! ten seconds in a batch log (from the tenth second on, so a short run's stderr holds nothing
//! but its own messages), nothing for runs that end sooner.
//!
//! Progress is shown by wall time, not only at output samples: a ticker thread wakes every
//! `TICK` and reads the time the integrator last reached ([`crate::interrupt::clock`], one
//! relaxed store per step), so a stiff run with few samples reports from its first second.
//! The fraction done is t / t_end.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Observer, RunInfo, Sample};

/// How long a run goes before progress is shown at all.
const QUIET_START: Duration = Duration::from_secs(1);
/// Interval between plain log lines when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// How often the ticker looks at the integrator's time.
const TICK: Duration = Duration::from_millis(200);

/// Progress observer for one run, labelled with the scenario name.
pub struct Progress {
    label: String,
    enabled: bool,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Progress on stderr; `enabled = false` makes it silent.
    pub fn new(label: &str, enabled: bool) -> Self {
        Progress {
            label: label.to_string(),
            enabled,
            stop: Arc::new(AtomicBool::new(false)),
            ticker: None,
        }
    }

    fn stop_ticker(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.ticker.take() {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

/// What the ticker thread shows.
struct Display {
    label: String,
    started: Instant,
    t_end: f64,
    bar: Option<ProgressBar>,
    last_line: Option<Instant>,
    terminal: bool,
}

impl Display {
    fn show(&mut self, t: f64) {
        let fraction = (t / self.t_end).clamp(0.0, 1.0);
        if self.terminal {
            let label = &self.label;
            let bar = self.bar.get_or_insert_with(|| {
                let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
                if let Ok(style) = ProgressStyle::with_template(
                    "{prefix} [{elapsed_precise}] {wide_bar} {percent:>3}% eta {eta} {msg}",
                ) {
                    bar.set_style(style);
                }
                bar.set_prefix(label.clone());
                bar
            });
            bar.set_position((fraction * 1000.0) as u64);
            bar.set_message(format!("t = {t:.4}"));
        } else if self.started.elapsed() >= LOG_EVERY
            && self.last_line.is_none_or(|l| l.elapsed() >= LOG_EVERY)
        {
            self.last_line = Some(Instant::now());
            let elapsed = self.started.elapsed().as_secs_f64();
            let eta = if fraction > 0.0 {
                elapsed * (1.0 - fraction) / fraction
            } else {
                f64::NAN
            };
            let _ = writeln!(
                io::stderr().lock(),
                "{}: t = {:.4} of {} ({:.0}%), {:.0} s elapsed, about {:.0} s left",
                self.label,
                t,
                self.t_end,
                100.0 * fraction,
                elapsed,
                eta
            );
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            std::thread::park_timeout(TICK);
            if !stop.load(Ordering::Relaxed) && self.started.elapsed() >= QUIET_START {
                self.show(crate::interrupt::clock());
            }
        }
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Observer for Progress {
    fn start(&mut self, info: &RunInfo) -> io::Result<()> {
        self.stop_ticker();
        if !self.enabled {
            return Ok(());
        }
        crate::interrupt::set_clock(0.0);
        let stop = Arc::new(AtomicBool::new(false));
        self.stop = stop.clone();
        let display = Display {
            label: self.label.clone(),
            started: Instant::now(),
            t_end: info.t_end,
            bar: None,
            last_line: None,
            terminal: io::stderr().is_terminal(),
        };
        self.ticker = Some(std::thread::spawn(move || display.run(&stop)));
        Ok(())
    }

    fn sample(&mut self, _sample: &Sample<'_>) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.stop_ticker();
        Ok(())
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_ticker();
    }
}
