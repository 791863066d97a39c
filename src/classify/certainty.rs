//! When a label is certain, and the observer that stops a run once it is.
//!
//! A label read at time t is **certain** when the label of the window [0, t] and that of the
//! shorter window [0, t / g] (g = [`WINDOW_GROWTH`]) are the same, not `undetermined`, and
//! their features agree:
//!
//! - `oscillation`: periods within [`PERIOD_AGREEMENT`] (relative);
//! - `interior-point`, `rotating-interior`: limits s* within [`LIMIT_AGREEMENT`];
//! - `rotating-clusters`, `rotating-interior`: rotation rates within [`RATE_AGREEMENT`]
//!   (relative) and of the same sign;
//! - `converged-clusters`: the label alone.
//!
//! Each window is classified on its own tail (its last quarter), so the two tails are
//! [0.6 t, 0.8 t] and [0.75 t, t] for g = 1.25: a label that holds on both has held for a
//! while. A run with `time.t_max > time.t_end` checks at t_end, then at each checkpoint
//! g times later, and stops at the first certain one (or at t_max).

use std::io;

use super::{classify_prefix, Classification, Label};
use crate::observe::{Observer, OrderSeries, RunInfo, Sample};

/// The longer window is this many times the shorter one.
pub const WINDOW_GROWTH: f64 = 1.25;
/// Relative agreement of two periods.
pub const PERIOD_AGREEMENT: f64 = 0.02;
/// Absolute agreement of two limits of s.
pub const LIMIT_AGREEMENT: f64 = 2e-3;
/// Relative agreement of two rotation rates.
pub const RATE_AGREEMENT: f64 = 0.05;

/// A label with the verdict on its certainty.
#[derive(Debug, Clone, PartialEq)]
pub struct Certainty {
    /// The classification of the whole series.
    pub classification: Classification,
    /// Whether the shorter window says the same.
    pub certain: bool,
    /// Why not, when not.
    pub doubt: Option<String>,
}

fn close(a: Option<f64>, b: Option<f64>, tol: f64, relative: bool) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            let scale = if relative { a.abs().max(b.abs()) } else { 1.0 };
            (a - b).abs() <= tol * scale && (!relative || a * b > 0.0)
        }
        (None, None) => true,
        _ => false,
    }
}

/// Why two classifications of growing windows disagree, or None when they agree.
fn disagreement(short: &Classification, long: &Classification) -> Option<String> {
    if long.label == Label::Undetermined {
        return Some(format!("the label is undetermined: {}", long.reason));
    }
    if short.label != long.label {
        return Some(format!(
            "the label changed from {} to {} between the last two windows",
            short.label, long.label
        ));
    }
    let (a, b) = (&short.features, &long.features);
    let rate = |c: &Classification| Some(c.features.r2_arg_rate);
    match long.label {
        Label::Oscillation if !close(a.period, b.period, PERIOD_AGREEMENT, true) => Some(format!(
            "the period changed from {:?} to {:?}",
            a.period, b.period
        )),
        Label::InteriorPoint | Label::RotatingInterior
            if !close(a.limit, b.limit, LIMIT_AGREEMENT, false) =>
        {
            Some(format!(
                "the limit of s changed from {:?} to {:?}",
                a.limit, b.limit
            ))
        }
        Label::RotatingClusters | Label::RotatingInterior
            if !close(rate(short), rate(long), RATE_AGREEMENT, true) =>
        {
            Some(format!(
                "the rotation rate changed from {:.4e} to {:.4e}",
                a.r2_arg_rate, b.r2_arg_rate
            ))
        }
        _ => None,
    }
}

/// Classifies `series` and says whether the label is certain (see the module's definition).
pub fn certain(series: &OrderSeries) -> Certainty {
    let len = series.len();
    let long = classify_prefix(series, len);
    let short_len = ((len as f64 / WINDOW_GROWTH).round() as usize).max(1);
    let short = classify_prefix(series, short_len);
    let doubt = disagreement(&short, &long);
    Certainty {
        classification: long,
        certain: doubt.is_none(),
        doubt,
    }
}

/// An [`OrderSeries`] that, asked at a checkpoint, says whether its label is certain.
#[derive(Debug, Default)]
pub struct CertaintyWatch {
    /// The series recorded so far.
    pub series: OrderSeries,
}

impl Observer for CertaintyWatch {
    fn start(&mut self, info: &RunInfo) -> io::Result<()> {
        self.series.start(info)
    }
    fn sample(&mut self, sample: &Sample<'_>) -> io::Result<()> {
        self.series.sample(sample)
    }
    fn enough(&mut self) -> bool {
        certain(&self.series).certain
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::OrderParameters;
    use num_complex::Complex64;

    fn series(t_end: f64, f: impl Fn(f64) -> Complex64) -> OrderSeries {
        let mut s = OrderSeries::new();
        for i in 0..=2000 {
            let t = t_end * i as f64 / 2000.0;
            s.push(t, &OrderParameters::from_r2(f(t)));
        }
        s
    }

    #[test]
    fn a_steady_cycle_is_certain_and_a_late_departure_is_not() {
        let o = series(200.0, |t| Complex64::new(0.5 + 0.2 * (0.7 * t).sin(), 0.0));
        let c = certain(&o);
        assert!(c.certain, "{:?}", c.doubt);
        // s sits at 0.5 and leaves for 1 at t = 170: the shorter window says interior point.
        let late = series(200.0, |t| {
            Complex64::new(0.5 + 0.5 / (1.0 + (-(t - 170.0) / 2.0).exp()), 0.0)
        });
        let c = certain(&late);
        assert!(!c.certain);
    }

    #[test]
    fn a_slowing_rotation_is_not_certain() {
        // The axis turns at 0.5 / (1 + t / 20): the rate halves between the two windows.
        let slowing = series(200.0, |t| {
            Complex64::from_polar(1.0, 10.0 * (1.0 + t / 20.0).ln())
        });
        let c = certain(&slowing);
        assert!(!c.certain, "{:?}", c.classification);
    }
}
