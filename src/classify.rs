//! Labels of the long-term behaviour from an order-parameter series (SPEC section 4).
//!
//! The classifier reads the nematic order s(t) and the unwrapped axis angle (in d = 2, |R2| and
//! arg R2), so it means the same for every model and dimension. Over the tail of the run (the
//! last quarter of the samples) it measures
//!
//! - the swing of s, max s - min s, and whether it shrinks between the two halves of the tail;
//! - the rotation rate of the axis, the least-squares slope of the axis angle;
//! - s at the end.
//!
//! A settled s near 1 is clustering (converged or rotating by the rate), a settled s below 1 is
//! an interior point (steady or rotating), a swing that does not shrink is an oscillation, and a
//! swing that is still shrinking leaves the run `undetermined` with the advice to run longer.

use serde::Serialize;

use crate::observe::OrderSeries;

/// Fraction of the samples that make the tail.
const TAIL_FRACTION: f64 = 0.25;
/// s counts as settled when its tail swing is below this.
const SETTLED: f64 = 1e-3;
/// s counts as clustered above 1 - this.
const CLUSTERED: f64 = 1e-3;
/// The axis counts as turning above this rate.
const TURNING: f64 = 1e-3;

/// The labels of SPEC section 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Label {
    ConvergedClusters,
    RotatingClusters,
    Oscillation,
    InteriorPoint,
    RotatingInterior,
    Undetermined,
}

impl Label {
    /// The label's word in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Label::ConvergedClusters => "converged-clusters",
            Label::RotatingClusters => "rotating-clusters",
            Label::Oscillation => "oscillation",
            Label::InteriorPoint => "interior-point",
            Label::RotatingInterior => "rotating-interior",
            Label::Undetermined => "undetermined",
        }
    }
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The numbers a label is read from (summary.json `features`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Features {
    pub r2_abs_final: f64,
    pub r2_abs_tail_min: f64,
    pub r2_abs_tail_max: f64,
    /// Rotation rate of arg R2 (the doubled axis angle) over the tail, in radians per unit time.
    pub r2_arg_rate: f64,
    pub nematic_final: f64,
    pub nematic_tail_min: f64,
    pub nematic_tail_max: f64,
    pub r1_abs_final: Option<f64>,
    /// Period of an oscillation of s (mean spacing of its upward crossings of the tail mean).
    pub period: Option<f64>,
    /// Exponential decay rate of the distance of s to its limit, when it decays.
    pub decay_rate: Option<f64>,
    /// Start time of the tail the features are measured on.
    pub tail_start: f64,
}

/// A label with its reason and the features it was read from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    pub label: Label,
    pub reason: String,
    pub features: Features,
}

/// Least-squares slope of y against t.
fn slope(t: &[f64], y: &[f64]) -> f64 {
    let n = t.len() as f64;
    let (mt, my) = (t.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut num, mut den) = (0.0, 0.0);
    for (a, b) in t.iter().zip(y) {
        num += (a - mt) * (b - my);
        den += (a - mt) * (a - mt);
    }
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(*x), hi.max(*x))
        })
}

/// Classifies a series (at least two samples).
pub fn classify(series: &OrderSeries) -> Classification {
    let len = series.len();
    let tail_len = ((len as f64 * TAIL_FRACTION).ceil() as usize).clamp(2.min(len), len);
    let start = len - tail_len;
    let t = &series.t[start..];
    let s = &series.nematic[start..];
    let r2_abs: Vec<f64> = series.r2[start..].iter().map(|z| z.norm()).collect();
    let (r_lo, r_hi) = min_max(&r2_abs);
    let (s_lo, s_hi) = min_max(s);
    let rate = slope(t, &series.axis_angle[start..]);
    let s_final = *s.last().unwrap_or(&0.0);
    let half = s.len() / 2;
    let (a_lo, a_hi) = min_max(&s[..half.max(1)]);
    let (b_lo, b_hi) = min_max(&s[half..]);
    let (early_swing, late_swing) = (a_hi - a_lo, b_hi - b_lo);
    let swing = s_hi - s_lo;
    let period = oscillation_period(t, s);
    let mut features = Features {
        r2_abs_final: *r2_abs.last().unwrap_or(&0.0),
        r2_abs_tail_min: r_lo,
        r2_abs_tail_max: r_hi,
        r2_arg_rate: rate,
        nematic_final: s_final,
        nematic_tail_min: s_lo,
        nematic_tail_max: s_hi,
        r1_abs_final: series.r1.last().copied().flatten(),
        period: None,
        decay_rate: None,
        tail_start: t.first().copied().unwrap_or(0.0),
    };
    let turning = rate.abs() > TURNING && s_final > SETTLED;
    let (label, reason) = if swing < SETTLED {
        if s_final > 1.0 - CLUSTERED {
            if turning {
                (
                    Label::RotatingClusters,
                    format!(
                        "s -> {s_final:.6} with the axis turning at {rate:.4} rad per unit time"
                    ),
                )
            } else {
                (
                    Label::ConvergedClusters,
                    format!("s -> {s_final:.6} and the axis stops"),
                )
            }
        } else if turning {
            (
                Label::RotatingInterior,
                format!(
                    "s -> {s_final:.6} < 1 with the axis turning at {rate:.4} rad per unit time"
                ),
            )
        } else {
            (
                Label::InteriorPoint,
                format!("s -> {s_final:.6} < 1 and the axis stops"),
            )
        }
    } else if late_swing > 0.8 * early_swing && period.is_some() {
        features.period = period;
        (
            Label::Oscillation,
            format!("s keeps swinging by {swing:.4} over the tail"),
        )
    } else {
        (
            Label::Undetermined,
            format!("s still moves by {swing:.2e} over the tail (from {early_swing:.2e} to {late_swing:.2e}); run longer"),
        )
    };
    Classification {
        label,
        reason,
        features,
    }
}

/// Mean spacing of the upward crossings of the mean, when there are at least two.
fn oscillation_period(t: &[f64], s: &[f64]) -> Option<f64> {
    let mean = s.iter().sum::<f64>() / s.len() as f64;
    let crossings: Vec<f64> = t
        .windows(2)
        .zip(s.windows(2))
        .filter(|(_, w)| w[0] < mean && w[1] >= mean)
        .map(|(tw, w)| tw[0] + (tw[1] - tw[0]) * (mean - w[0]) / (w[1] - w[0]))
        .collect();
    if crossings.len() >= 2 {
        Some((crossings[crossings.len() - 1] - crossings[0]) / (crossings.len() - 1) as f64)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::OrderParameters;
    use num_complex::Complex64;

    fn series(f: impl Fn(f64) -> Complex64) -> OrderSeries {
        let mut s = OrderSeries::new();
        for i in 0..2001 {
            let t = i as f64 * 0.1;
            s.push(t, &OrderParameters::from_r2(f(t)));
        }
        s
    }

    #[test]
    fn closed_form_series_get_their_labels() {
        let c = series(|t| Complex64::from_polar(1.0 - (-t).exp(), 0.3));
        assert_eq!(classify(&c).label, Label::ConvergedClusters);
        let r = series(|t| Complex64::from_polar(1.0 - (-t).exp(), 0.5 * t));
        let rc = classify(&r);
        assert_eq!(rc.label, Label::RotatingClusters);
        assert!((rc.features.r2_arg_rate - 0.5).abs() < 1e-9);
        let o = series(|t| Complex64::from_polar(0.5 + 0.2 * (0.7 * t).sin(), 0.0));
        let oc = classify(&o);
        assert_eq!(oc.label, Label::Oscillation);
        let p = oc.features.period.unwrap();
        assert!((p - 2.0 * std::f64::consts::PI / 0.7).abs() < 0.05, "{p}");
        let i = series(|t| Complex64::from_polar(0.3 + (-t).exp(), 1.0));
        assert_eq!(classify(&i).label, Label::InteriorPoint);
        let u = series(|t| Complex64::from_polar(0.5 * (-0.001 * t).exp(), 0.0));
        assert_eq!(classify(&u).label, Label::Undetermined);
    }
}
