//! The label `chaotic` (docs/MATH.md §15): the tail of s swings without a
//! period and the largest Lyapunov exponent lambda_1 is positive beyond its spread,
//!
//! ```text
//! chaotic  <=>  swing of s over the tail >= SETTLED,  no period (below),  lambda_1 > 0,  lambda_1 > 2 spread_1
//! ```
//!
//! "No period": the tail's autocorrelation finds no cycle, or one correlated below
//! [`PERIODIC_CORRELATION`] with itself, or the two halves of the tail show different periods
//! (more than [`PERIOD_AGREEMENT`] apart) or no cycles. A limit cycle's running estimate of
//! lambda_1 falls like c / (t - transient), whose spread over the last half equals its value:
//! twice the spread keeps it from passing.

use super::period;
use super::{Classification, Label, SETTLED, TAIL_FRACTION};
use crate::observe::OrderSeries;

/// A tail whose cycles correlate less than this with themselves one period later has no period.
pub const PERIODIC_CORRELATION: f64 = 0.9;
/// The periods of the two halves of a periodic tail agree to this share.
pub const PERIOD_AGREEMENT: f64 = 0.02;

/// Whether the run labelled `c` (an oscillation or undetermined) has a tail of s that swings
/// without a period: then its largest exponent decides whether it is chaotic.
pub fn tail_without_period(c: &Classification, series: &OrderSeries) -> bool {
    if !matches!(c.label, Label::Oscillation | Label::Undetermined) || series.len() < 32 {
        return false;
    }
    let len = series.len();
    let start = len - ((len as f64 * TAIL_FRACTION).ceil() as usize).min(len);
    let (t, s) = (&series.t[start..], &series.nematic[start..]);
    let (lo, hi) = s
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        });
    if (hi - lo).is_nan() || hi - lo < SETTLED {
        return false;
    }
    let Some(whole) = period::cycles(t, s) else {
        return true;
    };
    if whole.correlation < PERIODIC_CORRELATION {
        return true;
    }
    let half = t.len() / 2;
    match (
        period::cycles(&t[..half], &s[..half]),
        period::cycles(&t[half..], &s[half..]),
    ) {
        (Some(a), Some(b)) => {
            (a.period - b.period).abs() > PERIOD_AGREEMENT * a.period.max(b.period)
        }
        _ => true,
    }
}

/// `c` relabelled `chaotic` when lambda_1 is positive beyond its spread (see the module's
/// rule); else `c` unchanged.
pub fn refine(c: Classification, lambda_1: f64, spread: f64) -> Classification {
    if !(lambda_1 > 0.0 && lambda_1 > 2.0 * spread) {
        return c;
    }
    let mut features = c.features;
    features.period = None;
    Classification {
        label: Label::Chaotic,
        reason: format!(
            "s swings without a period over the tail and the largest Lyapunov exponent is {lambda_1:.4e} > 0 (its running estimate moves by {spread:.2e} over the last half)"
        ),
        features,
    }
}
