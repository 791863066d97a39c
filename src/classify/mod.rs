//! Labels of the long-term behaviour from an order-parameter series (docs/MATH.md §6).
//!
//! The classifier reads the nematic order s(t) (|R2| in d = 2) and the unwrapped angle of the
//! cluster axis (arg R2 in d = 2), so it means the same for every model and dimension. It looks
//! at the tail of the run, the last quarter of the samples:
//!
//! 1. **Swing of s.** Below [`SETTLED`] s has converged to s* = its final value.
//! 2. **Cycles.** Otherwise the peaks of s are found. With at least two full cycles, the
//!    peak-to-trough amplitudes A_k are fitted as A_k ~ e^{-lambda t}: if the amplitude falls
//!    clearly over the tail (lambda T > 0.3) the motion is a converging spiral (s* = the mean
//!    of the last cycle, `decay_rate` = lambda), if it holds it is an `oscillation` (`period`
//!    = mean peak spacing, `amplitude` = half the swing), if it grows (-lambda T > [`GROWING`],
//!    a slow outward spiral) or its mean per period drifts one way (by more than [`DRIFTING`]
//!    of the swing) the run is too short.
//! 3. **Monotone approach.** Without cycles, s at the start, middle and end of the tail gives
//!    the ratio q of successive changes; 0 < q < 1 is a decelerating approach whose limit is
//!    extrapolated geometrically (exact for an exponential approach, with rate
//!    lambda = -ln q / (T/2)). An approach to 1 that is algebraic (1 - s ~ t^{-p}, as at a
//!    regime boundary) is recognised by a log-log fit with a small exponent (0.3 < p < 2; an
//!    exponential approach seen over a short window fits with p = lambda t instead) and
//!    counted as clustering.
//! 4. **Axis.** For s* above [`NO_AXIS`] the axis angle's rate is measured on both halves of the
//!    tail: a steady rate above [`TURNING`] is rotation; a rate that stops or decays is a
//!    converged axis.
//!
//! s* > 1 - [`CLUSTERED`] is clustering. Anything else is `undetermined`, with the reason and
//! what to do about it.

use serde::Serialize;

pub use crate::label::Label;

use crate::observe::OrderSeries;

pub mod certainty;
pub mod chaos;
pub mod metastable;
pub mod period;
pub mod stationary;

pub use certainty::{certain, Certainty, CertaintyWatch};
pub use stationary::classify_stationary;

/// Fraction of the samples that make the tail.
pub const TAIL_FRACTION: f64 = 0.25;
/// s counts as settled when its swing over the tail is below this.
pub const SETTLED: f64 = 1e-3;
/// s* counts as clustered above 1 - this.
pub const CLUSTERED: f64 = 1e-3;
/// An extrapolated limit counts as clustered above 1 - this.
pub const CLUSTERED_EXTRAPOLATED: f64 = 1e-2;
/// A swing growing by more than this (log of the swing, over the tail) is a transient: an orbit
/// spiralling out slowly (to a limit cycle or to the boundary) is not yet an oscillation.
pub const GROWING: f64 = 0.1;
/// The mean of s per period moving one way by more than this share of the swing over the tail
/// is a transient (a slow spiral), not yet an oscillation.
pub const DRIFTING: f64 = 0.02;
/// Below this s* there is no axis to turn (the uniform state).
pub const NO_AXIS: f64 = 1e-2;
/// The axis counts as turning above this rate (radians of arg R2 per unit time).
pub const TURNING: f64 = 1e-3;
/// The samples resolve the axis when it turns by less than this between two of them.
pub const ALIASING: f64 = std::f64::consts::FRAC_PI_2;

/// How clustered tokens are shared between the two ends of their axis (from R1, the first
/// harmonic; written as `one`, `two-antipodal` or `unequal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clusters {
    /// All at one end (|R1| -> 1).
    One,
    /// Two equal antipodal clusters (|R1| -> 0).
    TwoAntipodal,
    /// Two clusters of unequal size.
    Unequal,
}

/// The numbers a label is read from (summary.json `features`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Features {
    /// |R2| at the last sample.
    pub r2_abs_final: f64,
    /// Smallest |R2| over the tail.
    pub r2_abs_tail_min: f64,
    /// Largest |R2| over the tail.
    pub r2_abs_tail_max: f64,
    /// Rotation rate of arg R2 (the doubled axis angle) over the second half of the tail.
    pub r2_arg_rate: f64,
    /// The nematic order s at the last sample.
    pub nematic_final: f64,
    /// Smallest s over the tail.
    pub nematic_tail_min: f64,
    /// Largest s over the tail.
    pub nematic_tail_max: f64,
    /// |R1| at the last sample (none for the Ott–Antonsen model, which has no R1).
    pub r1_abs_final: Option<f64>,
    /// The limit s* of s, when s converges (extrapolated for a slow approach).
    pub limit: Option<f64>,
    /// Period of an oscillation of s (mean spacing of its peaks in the tail).
    pub period: Option<f64>,
    /// Half the swing of s over the tail, for an oscillation.
    pub amplitude: Option<f64>,
    /// Exponential rate at which s approaches its limit (or a spiral's amplitude decays).
    pub decay_rate: Option<f64>,
    /// Exponent p of an algebraic approach to 1 (1 - s ~ t^-p), as at a regime boundary.
    pub algebraic_exponent: Option<f64>,
    /// For clustering: how the tokens are shared between the two ends of the axis.
    pub clusters: Option<Clusters>,
    /// Start time of the tail the features are measured on.
    pub tail_start: f64,
    /// Noisy runs: the time average of |R1| over the tail (the last half of the samples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub r1_abs_mean: Option<f64>,
    /// Noisy runs: the standard deviation of |R1| over the tail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub r1_abs_sd: Option<f64>,
    /// Noisy runs: the time average of s over the tail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nematic_mean: Option<f64>,
    /// Noisy runs: the standard deviation of s over the tail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nematic_sd: Option<f64>,
}

/// A label with its reason and the features it was read from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    /// The label.
    pub label: Label,
    /// Why: the rule that decided it, with its numbers (and what to change when undetermined).
    pub reason: String,
    /// The numbers the label was read from.
    pub features: Features,
}

/// Least-squares slope of y against x.
fn slope(x: &[f64], y: &[f64]) -> f64 {
    fit(x, y).0
}

/// Least-squares line y = a x + b: (a, b, r^2).
fn fit(x: &[f64], y: &[f64]) -> (f64, f64, f64) {
    let n = x.len() as f64;
    if x.len() < 2 {
        return (0.0, y.first().copied().unwrap_or(0.0), 0.0);
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    if sxx <= 0.0 {
        return (0.0, my, 0.0);
    }
    let a = sxy / sxx;
    let r2 = if syy > 0.0 {
        sxy * sxy / (sxx * syy)
    } else {
        1.0
    };
    (a, my - a * mx, r2)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(*x), hi.max(*x))
        })
}

/// Indices of the local maxima of `s` (plateaus count once, at their first sample).
fn peaks(s: &[f64]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut i = 1;
    while i + 1 < s.len() {
        if s[i] > s[i - 1] {
            let mut j = i;
            while j + 1 < s.len() && s[j + 1] == s[i] {
                j += 1;
            }
            if j + 1 < s.len() && s[j + 1] < s[i] {
                out.push(i);
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// Number of interior maxima and minima of `s` that stand out by more than 5% of the swing.
fn turning_points(s: &[f64], swing: f64) -> usize {
    let (lo, hi) = min_max(s);
    let maxima = peaks(s)
        .into_iter()
        .filter(|&i| s[i] - lo > 0.05 * swing)
        .count();
    let negated: Vec<f64> = s.iter().map(|v| -v).collect();
    let minima = peaks(&negated)
        .into_iter()
        .filter(|&i| hi - s[i] > 0.05 * swing)
        .count();
    maxima + minima
}

/// The cycles of s from the spacing of its peaks: the fallback when the tail is too short or
/// too irregular for the autocorrelation (e.g. few samples per cycle).
fn peak_cycles(t: &[f64], s: &[f64], swing: f64) -> Option<period::Cycles> {
    let (lo, _) = min_max(s);
    let maxima: Vec<usize> = peaks(s)
        .into_iter()
        .filter(|&i| s[i] - lo > 0.05 * swing)
        .collect();
    if maxima.len() < 3 {
        return None;
    }
    let (mut times, mut log_amplitudes) = (Vec::new(), Vec::new());
    for w in maxima.windows(2) {
        let trough = s[w[0]..=w[1]].iter().copied().fold(f64::INFINITY, f64::min);
        let amplitude = 0.5 * (s[w[0]] + s[w[1]]) - trough;
        if amplitude <= 0.0 {
            return None;
        }
        times.push(0.5 * (t[w[0]] + t[w[1]]));
        log_amplitudes.push(amplitude.ln());
    }
    let count = maxima.len() - 1;
    let period = (t[maxima[count]] - t[maxima[0]]) / count as f64;
    let (a, b) = (maxima[count - 1], maxima[count]);
    let (w_lo, w_hi) = min_max(&s[a..=b]);
    Some(period::Cycles {
        period,
        correlation: f64::NAN,
        decay_rate: -slope(&times, &log_amplitudes),
        decay_fit: 1.0,
        last_mean: s[a..b].iter().sum::<f64>() / (b - a) as f64,
        last_swing: w_hi - w_lo,
        count,
        mean_drift: 0.0,
        samples_per_period: f64::INFINITY,
    })
}

/// A monotone approach: (limit, exponential rate), when the changes shrink.
fn approach(t: &[f64], s: &[f64]) -> Option<(f64, f64)> {
    let m = s.len() / 2;
    let (s1, s2, s3) = (s[0], s[m], s[s.len() - 1]);
    let (d1, d2) = (s2 - s1, s3 - s2);
    if d1 == 0.0 || d1 * d2 <= 0.0 {
        return None;
    }
    let q = d2 / d1;
    if !(q > 0.0 && q < 1.0) {
        return None;
    }
    let half = 0.5 * (t[t.len() - 1] - t[0]);
    let limit = s3 + d2 * q / (1.0 - q);
    Some((limit, -q.ln() / half))
}

/// 1 - s ~ c t^{-p}, the approach to 1 at a regime boundary: returns p.
///
/// s must rise over the tail with rises that shrink ever more slowly: at five equally spaced
/// points the ratios of successive rises increase (an exponential approach has one constant
/// ratio, exactly e^{-lambda h}), and ln(1 - s) must be a straight line in ln t with a small
/// exponent (over a short window an exponential approach also looks straight, with an apparent
/// exponent lambda t).
fn algebraic_approach_to_one(t: &[f64], s: &[f64]) -> Option<f64> {
    let last = s.len() - 1;
    if t[0] <= 0.0 || s.iter().any(|v| *v >= 1.0) || s[last] < 0.9 {
        return None;
    }
    let q: Vec<f64> = (0..5).map(|k| s[k * last / 4]).collect();
    let rises: Vec<f64> = q.windows(2).map(|w| w[1] - w[0]).collect();
    if rises.iter().any(|d| *d <= 1e-13) {
        return None;
    }
    let ratios: Vec<f64> = rises.windows(2).map(|w| w[1] / w[0]).collect();
    let slowing = ratios[0] < ratios[1] && ratios[1] < ratios[2] && ratios[2] < 1.0;
    if !slowing || ratios[2] - ratios[0] < 0.005 {
        return None;
    }
    let x: Vec<f64> = t.iter().map(|v| v.ln()).collect();
    let y: Vec<f64> = s.iter().map(|v| (1.0 - v).ln()).collect();
    let (a, _, r2) = fit(&x, &y);
    (a < -0.3 && a > -3.0 && r2 > 0.99).then_some(-a)
}

/// Largest change of the axis angle between two samples: above [`ALIASING`] a turning axis
/// cannot be told from one turning the other way (the angle is known modulo 2 pi).
/// Only steps between samples where s is above `floor` count (near s = 0 the axis is not
/// defined and may jump).
fn largest_axis_step(angle: &[f64], s: &[f64], floor: f64) -> f64 {
    (1..angle.len())
        .filter(|&i| s[i] > floor && s[i - 1] > floor)
        .map(|i| (angle[i] - angle[i - 1]).abs())
        .fold(0.0, f64::max)
}

/// The axis over the tail: (turning, rate of the second half, reason when it decelerates).
fn axis_motion(t: &[f64], angle: &[f64]) -> (bool, f64) {
    let m = t.len() / 2;
    let early = slope(&t[..=m], &angle[..=m]);
    let late = slope(&t[m..], &angle[m..]);
    let turned = (angle[angle.len() - 1] - angle[m]).abs();
    let steady = late.abs() >= 0.8 * early.abs() && late.abs() <= 1.25 * early.abs();
    (late.abs() > TURNING && steady && turned > 0.02, late)
}

/// Classifies a series.
///
/// ```
/// use num_complex::Complex64;
/// use tokdyn::classify::{classify, Label};
/// use tokdyn::observe::{OrderParameters, OrderSeries};
/// let mut series = OrderSeries::new();
/// for i in 0..401 {
///     let t = 0.5 * i as f64;
///     series.push(t, &OrderParameters::from_r2(Complex64::from_polar(1.0 - (-t).exp(), 0.2 * t)));
/// }
/// let c = classify(&series);
/// assert_eq!(c.label, Label::RotatingClusters);
/// assert!((c.features.r2_arg_rate - 0.2).abs() < 1e-9);
/// ```
pub fn classify(series: &OrderSeries) -> Classification {
    classify_prefix(series, series.len())
}

/// Classifies the first `len` samples of a series (the window [0, t_len]).
pub fn classify_prefix(series: &OrderSeries, len: usize) -> Classification {
    let len = len.min(series.len());
    let tail_len = ((len as f64 * TAIL_FRACTION).ceil() as usize).clamp(len.min(2), len);
    let start = len - tail_len;
    let t = &series.t[start..len];
    let s = &series.nematic[start..len];
    let angle = &series.axis_angle[start..len];
    let r2_abs: Vec<f64> = series.r2[start..len].iter().map(|z| z.norm()).collect();
    let (r_lo, r_hi) = min_max(&r2_abs);
    let (s_lo, s_hi) = min_max(s);
    let s_final = s.last().copied().unwrap_or(0.0);
    let swing = s_hi - s_lo;
    let r1_final = series.r1[..len].last().copied().flatten();
    let mut f = Features {
        r2_abs_final: r2_abs.last().copied().unwrap_or(0.0),
        r2_abs_tail_min: r_lo,
        r2_abs_tail_max: r_hi,
        r2_arg_rate: 0.0,
        nematic_final: s_final,
        nematic_tail_min: s_lo,
        nematic_tail_max: s_hi,
        r1_abs_final: r1_final,
        limit: None,
        period: None,
        amplitude: None,
        decay_rate: None,
        algebraic_exponent: None,
        clusters: None,
        tail_start: t.first().copied().unwrap_or(0.0),
        r1_abs_mean: None,
        r1_abs_sd: None,
        nematic_mean: None,
        nematic_sd: None,
    };
    if len < 8 {
        return Classification {
            label: Label::Undetermined,
            reason: format!("only {len} samples; ask for at least 8 (time.samples)"),
            features: f,
        };
    }
    let (turning, rate) = axis_motion(t, angle);
    f.r2_arg_rate = rate;
    let (limit, how) = match limit_of_s(t, s, swing, &mut f) {
        Ok(found) => found,
        Err(done) => return *done,
    };
    f.limit = Some(limit);

    let clustered = limit > 1.0 - CLUSTERED;
    let has_axis = limit > NO_AXIS;
    let rotating = has_axis && turning;
    if clustered {
        f.clusters = r1_final.map(|r1| {
            if r1 > 0.99 {
                Clusters::One
            } else if r1 < 0.01 {
                Clusters::TwoAntipodal
            } else {
                Clusters::Unequal
            }
        });
    }
    let step = largest_axis_step(angle, s, 0.5 * limit);
    if has_axis && step > ALIASING {
        return undetermined(
            f,
            format!(
                "s -> {limit:.6}, but the axis turns by up to {step:.2} rad between samples, too far to tell its direction and rate; raise time.samples"
            ),
        );
    }
    let label = match (clustered, rotating) {
        (true, true) => Label::RotatingClusters,
        (true, false) => Label::ConvergedClusters,
        (false, true) => Label::RotatingInterior,
        (false, false) => Label::InteriorPoint,
    };
    let axis = if !has_axis {
        "no axis (uniform state)".to_string()
    } else if rotating {
        format!("the axis turns at {rate:.4} rad per unit time")
    } else {
        "the axis stops".to_string()
    };
    Classification {
        label,
        reason: format!("s {how} -> {limit:.6}; {axis}"),
        features: f,
    }
}

/// The limit of s over the tail and how it is reached, or the finished classification when the
/// tail shows an oscillation or cannot decide.
fn limit_of_s(
    t: &[f64],
    s: &[f64],
    swing: f64,
    f: &mut Features,
) -> Result<(f64, String), Box<Classification>> {
    let s_final = s[s.len() - 1];
    let (s_lo, s_hi) = (f.nematic_tail_min, f.nematic_tail_max);
    // An algebraic approach to 1 moves little over the tail: it is tested before "settled".
    if let Some(p) = algebraic_approach_to_one(t, s)
        .filter(|_| approach(t, s).is_none_or(|(limit, _)| limit > 0.95))
    {
        f.algebraic_exponent = Some(p);
        return Ok((
            1.0,
            format!("approaches 1 algebraically (1 - s ~ t^-{p:.2})"),
        ));
    }
    if swing < SETTLED {
        // An exponential approach is extrapolated exactly; a settled s is its own limit.
        let limit = approach(t, s)
            .map(|(l, _)| l)
            .filter(|l| (0.0..=1.0).contains(l) && (l - s_final).abs() <= 10.0 * swing)
            .unwrap_or(s_final);
        return Ok((limit, "settles".to_string()));
    }
    if let Some(c) = period::cycles(t, s).or_else(|| peak_cycles(t, s, swing)) {
        return limit_of_cycles(t, swing, &c, f);
    }
    if turning_points(s, swing) > 0 {
        return Err(Box::new(undetermined(
            f.clone(),
            format!(
                "s turns within the tail (swing {swing:.2e}) but shows fewer than two full cycles: the period may be longer than the tail; run longer (time.t_max)"
            ),
        )));
    }
    if s_lo > 1.0 - 2.0 * CLUSTERED_EXTRAPOLATED
        && s_final >= s_hi - 0.25 * swing
        && mean(&s[s.len() / 2..]) > mean(&s[..s.len() / 2])
    {
        // Finite-n clustering: s creeps up to 1 with small wiggles (the Watanabe–Strogatz
        // angle modulates R2 while |Z| -> 1).
        return Ok((
            1.0,
            format!("creeps up to 1 (above {s_lo:.4} over the tail, highest at the end)"),
        ));
    }
    if let Some((limit, rate)) = approach(t, s).filter(|(l, _)| (-0.01..=1.01).contains(l)) {
        f.decay_rate = Some(rate);
        let limit = if limit > 1.0 - CLUSTERED_EXTRAPOLATED {
            1.0
        } else {
            limit.max(0.0)
        };
        return Ok((limit, format!("approaches its limit at rate {rate:.3e}")));
    }
    Err(Box::new(undetermined(
        f.clone(),
        format!(
            "s still moves by {swing:.2e} over the tail without a clear limit or cycle; run longer (time.t_max)"
        ),
    )))
}

/// The limit of s when its tail shows cycles `c`: a converging spiral's mean, or the finished
/// classification (an oscillation, or a growing swing that cannot be decided yet).
fn limit_of_cycles(
    t: &[f64],
    swing: f64,
    c: &period::Cycles,
    f: &mut Features,
) -> Result<(f64, String), Box<Classification>> {
    let (s_lo, s_hi) = (f.nematic_tail_min, f.nematic_tail_max);
    f.period = Some(c.period);
    let tail_time = t[t.len() - 1] - t[0];
    // A trend in the swing counts when the swings lie on it (few samples per period
    // scatter them).
    let trend = if c.decay_fit > 0.6 {
        c.decay_rate * tail_time
    } else {
        0.0
    };
    if trend > 0.3 {
        f.decay_rate = Some(c.decay_rate);
        return Ok((
            c.last_mean,
            format!(
                "spirals in (swing per period decays at rate {:.3e}, period {:.4})",
                c.decay_rate, c.period
            ),
        ));
    }
    if trend < -GROWING {
        return Err(Box::new(undetermined(
            f.clone(),
            format!(
                "s oscillates with a growing swing (rate {:.3e}, period {:.4}); run longer (time.t_max)",
                -c.decay_rate, c.period
            ),
        )));
    }
    let resolution = 2.0 * swing / c.samples_per_period;
    if c.mean_drift.abs() > (DRIFTING * swing).max(resolution) {
        return Err(Box::new(undetermined(
            f.clone(),
            format!(
                "s oscillates (period {:.4}) while the mean of its cycles drifts by {:.3e} over the tail; run longer (time.t_max)",
                c.period, c.mean_drift
            ),
        )));
    }
    f.amplitude = Some(0.5 * swing);
    let how = if c.correlation.is_nan() {
        "from the spacing of its peaks".to_string()
    } else {
        format!("correlation {:.3} one period apart", c.correlation)
    };
    let reason = format!(
        "s keeps swinging between {s_lo:.4} and {s_hi:.4} with period {:.4} ({} periods in the tail, {how})",
        c.period, c.count
    );
    Err(Box::new(Classification {
        label: Label::Oscillation,
        reason,
        features: f.clone(),
    }))
}

fn undetermined(features: Features, reason: String) -> Classification {
    Classification {
        label: Label::Undetermined,
        reason,
        features,
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
        assert_eq!(oc.label, Label::Oscillation, "{}", oc.reason);
        let p = oc.features.period.unwrap();
        assert!((p - 2.0 * std::f64::consts::PI / 0.7).abs() < 0.05, "{p}");
        assert!((oc.features.amplitude.unwrap() - 0.2).abs() < 1e-3);
        let i = series(|t| Complex64::from_polar(0.3 + (-t).exp(), 1.0));
        assert_eq!(classify(&i).label, Label::InteriorPoint);
        let w = series(|t| Complex64::from_polar(0.4, 0.05 * t));
        assert_eq!(classify(&w).label, Label::RotatingInterior);
    }

    #[test]
    fn a_decaying_spiral_is_convergence_not_oscillation() {
        // R = R* + 0.3 e^{(-0.025 + 0.74 i) t}, the slow spiral of docs/MATH.md §6 around |R*| = 0.0999.
        let spiral = series(|t| {
            Complex64::new(0.0999, 0.0) + Complex64::from_polar(0.05 * (-0.025 * t).exp(), 0.74 * t)
        });
        let c = classify(&spiral);
        assert_eq!(c.label, Label::InteriorPoint, "{}", c.reason);
        assert!((c.features.decay_rate.unwrap() - 0.025).abs() < 0.005);
        assert!((c.features.limit.unwrap() - 0.0999).abs() < 0.01);
    }

    #[test]
    fn cycles_whose_mean_drifts_are_not_an_oscillation() {
        // A steady swing around a centre that moves (a slow spiral seen from |R2|).
        let drifting = series(|t| Complex64::new(0.3 + 0.0015 * t + 0.2 * (0.7 * t).sin(), 0.0));
        let c = classify(&drifting);
        assert_eq!(c.label, Label::Undetermined, "{}", c.reason);
        assert!(c.reason.contains("drifts"), "{}", c.reason);
    }

    #[test]
    fn algebraic_approach_to_one_is_clustering() {
        let slow = series(|t| Complex64::from_polar(1.0 - 1.0 / (1.0 + t), 0.0));
        let c = classify(&slow);
        assert_eq!(c.label, Label::ConvergedClusters, "{}", c.reason);
    }

    #[test]
    fn slow_rotation_and_a_stopping_axis_are_told_apart() {
        let slow = series(|t| Complex64::from_polar(1.0, 0.004 * t));
        assert_eq!(classify(&slow).label, Label::RotatingClusters);
        let stopping = series(|t| Complex64::from_polar(1.0, 1.0 - (-0.05 * t).exp()));
        assert_eq!(classify(&stopping).label, Label::ConvergedClusters);
    }

    #[test]
    fn a_departure_from_a_saddle_late_in_the_run_is_not_called_settled() {
        // s sits at 0.5 (near a saddle) and leaves for 1 at t = 185, inside the tail.
        let late =
            series(|t| Complex64::from_polar(0.5 + 0.5 / (1.0 + (-(t - 185.0) / 3.0).exp()), 0.0));
        let c = classify(&late);
        assert_eq!(c.label, Label::Undetermined, "{}", c.reason);
        // Left earlier, the same transient is over by the tail: clustering.
        let early =
            series(|t| Complex64::from_polar(0.5 + 0.5 / (1.0 + (-(t - 60.0) / 3.0).exp()), 0.0));
        assert_eq!(classify(&early).label, Label::ConvergedClusters);
    }

    #[test]
    fn the_uniform_state_has_no_axis() {
        let u = series(|t| Complex64::from_polar(1e-4 * (-t).exp() + 1e-5, 0.7 * t));
        assert_eq!(classify(&u).label, Label::InteriorPoint);
    }

    #[test]
    fn a_drifting_series_is_undetermined_with_advice() {
        let u = series(|t| Complex64::from_polar(0.2 + 0.002 * t, 0.0));
        let c = classify(&u);
        assert_eq!(c.label, Label::Undetermined);
        assert!(c.reason.contains("run longer"));
        // One and a half slow cycles in the tail: not enough to call it anything.
        let slow = series(|t| Complex64::from_polar(0.5 + 0.3 * (t / 5.0).sin(), 0.0));
        let c = classify(&slow);
        assert_eq!(c.label, Label::Undetermined, "{}", c.reason);
        let short = OrderSeries::new();
        assert_eq!(classify(&short).label, Label::Undetermined);
    }
}
