//! Progress of a sweep on stderr: a bar with ETA on a terminal, a plain line about every
//! 10 seconds otherwise (batch logs).

use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Interval between plain lines when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Counts finished points and shows it.
pub struct Monitor {
    label: String,
    what: &'static str,
    total: u64,
    done: u64,
    started: Instant,
    last_line: Instant,
    bar: Option<ProgressBar>,
    enabled: bool,
}

impl Monitor {
    /// A monitor of `total` items (`what`: "points", "boundaries"); silent if not `enabled`.
    pub fn new(label: &str, what: &'static str, total: u64, enabled: bool) -> Self {
        let enabled = enabled && total > 0;
        let bar = (enabled && io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg} eta {eta}",
            ) {
                bar.set_style(style);
            }
            bar.set_prefix(label.to_string());
            bar.set_message(what);
            bar
        });
        let now = Instant::now();
        Monitor {
            label: label.to_string(),
            what,
            total,
            done: 0,
            started: now,
            last_line: now,
            bar,
            enabled,
        }
    }

    /// One more item finished.
    pub fn inc(&mut self) {
        self.done += 1;
        if !self.enabled {
            return;
        }
        if let Some(bar) = &self.bar {
            bar.inc(1);
        } else if self.last_line.elapsed() >= LOG_EVERY {
            self.last_line = Instant::now();
            let elapsed = self.started.elapsed().as_secs_f64();
            let fraction = self.done as f64 / self.total as f64;
            let left = elapsed * (1.0 - fraction) / fraction.max(1e-12);
            let _ = writeln!(
                io::stderr().lock(),
                "{}: {}/{} {} ({:.0}%), {:.0} s elapsed, about {:.0} s left",
                self.label,
                self.done,
                self.total,
                self.what,
                100.0 * fraction,
                elapsed,
                left
            );
        }
    }

    /// Removes the bar.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.finish();
    }
}
