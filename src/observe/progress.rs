//! Progress of a long run on stderr: a bar on a terminal, a plain line every few seconds in a
//! batch log, nothing for runs that end within a second or two.

use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Observer, RunInfo, Sample};

/// How long a run goes before progress is shown at all.
const QUIET_START: Duration = Duration::from_secs(2);
/// Interval between plain log lines when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Progress observer for one run, labelled with the scenario name.
pub struct Progress {
    label: String,
    started: Instant,
    t_end: f64,
    bar: Option<ProgressBar>,
    last_line: Option<Instant>,
    terminal: bool,
    enabled: bool,
}

impl Progress {
    /// Progress on stderr; `enabled = false` makes it silent.
    pub fn new(label: &str, enabled: bool) -> Self {
        Progress {
            label: label.to_string(),
            started: Instant::now(),
            t_end: 1.0,
            bar: None,
            last_line: None,
            terminal: io::stderr().is_terminal(),
            enabled,
        }
    }
}

impl Observer for Progress {
    fn start(&mut self, info: &RunInfo) -> io::Result<()> {
        self.started = Instant::now();
        self.t_end = info.t_end;
        Ok(())
    }

    fn sample(&mut self, sample: &Sample<'_>) -> io::Result<()> {
        if !self.enabled || self.started.elapsed() < QUIET_START {
            return Ok(());
        }
        let fraction = (sample.t / self.t_end).clamp(0.0, 1.0);
        if self.terminal {
            let bar = self.bar.get_or_insert_with(|| {
                let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
                if let Ok(style) = ProgressStyle::with_template(
                    "{prefix} [{elapsed_precise}] {wide_bar} {percent:>3}% eta {eta} {msg}",
                ) {
                    bar.set_style(style);
                }
                bar.set_prefix(self.label.clone());
                bar
            });
            bar.set_position((fraction * 1000.0) as u64);
            bar.set_message(format!("t = {:.4}", sample.t));
        } else if self.last_line.is_none_or(|l| l.elapsed() >= LOG_EVERY) {
            self.last_line = Some(Instant::now());
            let elapsed = self.started.elapsed().as_secs_f64();
            let eta = if fraction > 0.0 {
                elapsed * (1.0 - fraction) / fraction
            } else {
                f64::NAN
            };
            let mut err = io::stderr().lock();
            writeln!(
                err,
                "{}: t = {:.4} of {} ({:.0}%), {:.0} s elapsed, about {:.0} s left",
                self.label,
                sample.t,
                self.t_end,
                100.0 * fraction,
                elapsed,
                eta
            )?;
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        Ok(())
    }
}
