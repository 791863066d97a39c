//! Progress on stderr, the one reporter of the project: a bar on a terminal, a plain line every
//! ten seconds in a batch log (from the tenth second on, so a short job's stderr holds nothing
//! but its own messages). A line reads `LABEL: WHAT (P%), E s elapsed, about L s left` with
//! the estimate L = E (1 - f) / f for the fraction done f.
//!
//! Two things report through it (`Reporter`): one run ([`Progress`], f = t / t_end, shown by
//! wall time: a ticker thread wakes every `TICK` and reads the time the integrator last
//! reached, [`crate::interrupt::clock`], one relaxed store per step, so a stiff run with few
//! samples reports from its first second; nothing for runs that end within `QUIET_START`),
//! and the points of a sweep (`Counter`, f = done / total, shown as each point finishes).

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
/// Positions of the terminal bar.
const BAR_LENGTH: u64 = 1000;

/// Shows a fraction done on stderr: the bar or the log lines of the module comment.
pub(crate) struct Reporter {
    label: String,
    started: Instant,
    bar: Option<ProgressBar>,
    last_line: Option<Instant>,
    terminal: bool,
}

impl Reporter {
    /// A reporter labelled `label`, its clock started now.
    pub(crate) fn new(label: &str) -> Self {
        Reporter {
            label: label.to_string(),
            started: Instant::now(),
            bar: None,
            last_line: None,
            terminal: io::stderr().is_terminal(),
        }
    }

    /// Time since [`Reporter::new`].
    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Shows `fraction` done, described by `what` ("t = 1.5000 of 10", "3/40 points").
    pub(crate) fn show(&mut self, fraction: f64, what: &str) {
        let fraction = fraction.clamp(0.0, 1.0);
        if self.terminal {
            let label = &self.label;
            let bar = self.bar.get_or_insert_with(|| {
                let bar =
                    ProgressBar::with_draw_target(Some(BAR_LENGTH), ProgressDrawTarget::stderr());
                if let Ok(style) = ProgressStyle::with_template(
                    "{prefix} [{elapsed_precise}] {wide_bar} {percent:>3}% eta {eta} {msg}",
                ) {
                    bar.set_style(style);
                }
                bar.set_prefix(label.clone());
                bar
            });
            bar.set_position((fraction * BAR_LENGTH as f64) as u64);
            bar.set_message(what.to_string());
        } else if self.elapsed() >= LOG_EVERY
            && self.last_line.is_none_or(|l| l.elapsed() >= LOG_EVERY)
        {
            self.last_line = Some(Instant::now());
            let elapsed = self.elapsed().as_secs_f64();
            let left = if fraction > 0.0 {
                elapsed * (1.0 - fraction) / fraction
            } else {
                f64::NAN
            };
            let _ = writeln!(
                io::stderr().lock(),
                "{}: {} ({:.0}%), {:.0} s elapsed, about {:.0} s left",
                self.label,
                what,
                100.0 * fraction,
                elapsed,
                left
            );
        }
    }

    /// Removes the bar.
    pub(crate) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Progress of counted items (a sweep's points or boundaries).
pub(crate) struct Counter {
    reporter: Option<Reporter>,
    what: &'static str,
    total: u64,
    done: u64,
}

impl Counter {
    /// A counter of `total` items (`what`: "points", "boundaries"); silent if not `enabled`.
    pub(crate) fn new(label: &str, what: &'static str, total: u64, enabled: bool) -> Self {
        Counter {
            reporter: (enabled && total > 0).then(|| Reporter::new(label)),
            what,
            total,
            done: 0,
        }
    }

    /// One more item finished.
    pub(crate) fn inc(&mut self) {
        self.done += 1;
        if let Some(reporter) = &mut self.reporter {
            let what = format!("{}/{} {}", self.done, self.total, self.what);
            reporter.show(self.done as f64 / self.total as f64, &what);
        }
    }

    /// Removes the bar.
    pub(crate) fn finish(&mut self) {
        if let Some(reporter) = &mut self.reporter {
            reporter.finish();
        }
    }
}

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

/// What the ticker thread shows: the integrator's time as a fraction of `t_end`.
struct Ticker {
    reporter: Reporter,
    t_end: f64,
}

impl Ticker {
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            std::thread::park_timeout(TICK);
            if !stop.load(Ordering::Relaxed) && self.reporter.elapsed() >= QUIET_START {
                let t = crate::interrupt::clock();
                let what = format!("t = {t:.4} of {}", self.t_end);
                self.reporter.show(t / self.t_end, &what);
            }
        }
        self.reporter.finish();
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
        let ticker = Ticker {
            reporter: Reporter::new(&self.label),
            t_end: info.t_end,
        };
        self.ticker = Some(std::thread::spawn(move || ticker.run(&stop)));
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
