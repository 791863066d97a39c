//! Labels of noisy runs: the stationary state, read from time averages over the tail
//! (docs/MATH.md, "Noise").
//!
//! Under noise the order parameters never converge; they fluctuate about their stationary
//! values. Over the tail (the last half of the samples) the classifier takes the time averages
//! and standard deviations of |R1| and s:
//!
//! ```text
//! ordered   <=>  max(<|R1|>, <s>) > ORDERED_FLOOR / sqrt(n)
//! ```
//!
//! (for n independent uniform tokens E |R1|^2 = 1/n, and s is of the same size, so the floor
//! is [`ORDERED_FLOOR`] times the finite-n fluctuation of the disordered state). A disordered
//! state is the uniform one: `interior-point`. An ordered one is `converged-clusters` (one or
//! two noisy clusters whose axis only diffuses), or `rotating-clusters` when the axis turns
//! the same way on both halves of the tail by more than [`ROTATING_TURN`] radians each.

use super::{classify_prefix, Classification, Clusters, Label};
use crate::observe::OrderSeries;

/// The order parameters count as ordered above this many times 1 / sqrt(n).
pub const ORDERED_FLOOR: f64 = 5.0;
/// Fraction of the samples the stationary averages are taken over (the last ones).
pub const STATIONARY_FRACTION: f64 = 0.5;
/// The axis of an ordered noisy state counts as rotating when it turns by more than this
/// (doubled angle, radians) on each half of the tail, in the same direction.
pub const ROTATING_TURN: f64 = std::f64::consts::PI;

/// Mean and standard deviation.
fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// The label of the stationary state of a noisy run of `n` tokens.
pub fn classify_stationary(series: &OrderSeries, n: usize) -> Classification {
    let mut c = classify_prefix(series, series.len());
    let len = series.len();
    let tail = ((len as f64 * STATIONARY_FRACTION).ceil() as usize).clamp(len.min(2), len);
    let start = len - tail;
    let f = &mut c.features;
    f.tail_start = series.t.get(start).copied().unwrap_or(0.0);
    let r1: Vec<f64> = series.r1[start..]
        .iter()
        .map(|r| r.unwrap_or(0.0))
        .collect();
    let (r1_mean, r1_sd) = mean_sd(&r1);
    let (s_mean, s_sd) = mean_sd(&series.nematic[start..]);
    if series.r1[start..].iter().all(Option::is_some) {
        f.r1_abs_mean = Some(r1_mean);
        f.r1_abs_sd = Some(r1_sd);
    }
    f.nematic_mean = Some(s_mean);
    f.nematic_sd = Some(s_sd);
    (f.period, f.amplitude, f.decay_rate, f.algebraic_exponent) = (None, None, None, None);
    f.limit = Some(s_mean);
    let floor = ORDERED_FLOOR / (n.max(1) as f64).sqrt();
    if len < 8 {
        c.label = Label::Undetermined;
        c.reason = format!("only {len} samples; ask for at least 8 (time.samples)");
        return c;
    }
    let ordered = r1_mean.max(s_mean) > floor;
    let stats = format!(
        "time averages over t >= {:.4}: |R1| {r1_mean:.4} +- {r1_sd:.4}, s {s_mean:.4} +- {s_sd:.4}",
        f.tail_start
    );
    if !ordered {
        f.clusters = None;
        c.label = Label::InteriorPoint;
        c.reason = format!(
            "noisy stationary state, disordered: {stats}, below the floor {floor:.4} = {ORDERED_FLOOR} / sqrt(n)"
        );
        return c;
    }
    f.clusters = Some(if r1_mean > floor {
        Clusters::One
    } else {
        Clusters::TwoAntipodal
    });
    let angle = &series.axis_angle[start..];
    let mid = angle.len() / 2;
    let first = angle[mid] - angle[0];
    let second = angle[angle.len() - 1] - angle[mid];
    let rotating =
        first.abs() > ROTATING_TURN && second.abs() > ROTATING_TURN && first * second > 0.0;
    let span = series.t[len - 1] - f.tail_start;
    if span > 0.0 {
        f.r2_arg_rate = (first + second) / span;
    }
    c.label = if rotating {
        Label::RotatingClusters
    } else {
        Label::ConvergedClusters
    };
    let axis = if rotating {
        format!("the axis turns at {:.4} rad per unit time", f.r2_arg_rate)
    } else {
        "the axis only diffuses".to_string()
    };
    c.reason = format!("noisy stationary state, ordered: {stats}; {axis}");
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::OrderParameters;
    use num_complex::Complex64;

    /// A series whose |R1| and s are `level` plus a deterministic wiggle of size `wiggle`.
    fn series(level: f64, wiggle: f64, turn: f64) -> OrderSeries {
        let mut s = OrderSeries::new();
        for i in 0..400 {
            let t = 0.1 * i as f64;
            let r = level + wiggle * (1.7 * t).sin();
            let mut o = OrderParameters::from_r2(Complex64::from_polar(r, turn * t));
            o.r1 = Some(r);
            s.push(t, &o);
        }
        s
    }

    #[test]
    fn disordered_and_ordered_states_are_told_apart_at_the_finite_n_floor() {
        // n = 400: the floor is 5 / 20 = 0.25.
        let c = classify_stationary(&series(0.1, 0.05, 0.0), 400);
        assert_eq!(c.label, Label::InteriorPoint, "{}", c.reason);
        let c = classify_stationary(&series(0.6, 0.05, 0.0), 400);
        assert_eq!(c.label, Label::ConvergedClusters, "{}", c.reason);
        let mean = c.features.r1_abs_mean.unwrap();
        assert!((mean - 0.6).abs() < 0.01, "{mean}");
        // The sd of a sine of amplitude a is a / sqrt(2).
        let sd = c.features.nematic_sd.unwrap();
        assert!((sd - 0.05 / 2f64.sqrt()).abs() < 0.005, "{sd}");
        let c = classify_stationary(&series(0.6, 0.05, 0.5), 400);
        assert_eq!(c.label, Label::RotatingClusters, "{}", c.reason);
        assert!((c.features.r2_arg_rate - 0.5).abs() < 1e-9);
    }
}
