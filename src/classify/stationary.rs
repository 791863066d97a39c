//! Labels of noisy runs: the stationary state, read from time averages over the tail
//! (docs/MATH.md, "Noise").
//!
//! Under noise the order parameters never converge; they fluctuate about their stationary
//! values. Over the tail (the last half of the samples) the classifier takes the time averages
//! and standard deviations of |R1| and s:
//!
//! ```text
//! ordered   <=>  max(<|R1|>, <s>) > min(ORDERED_FLOOR / sqrt(n), ORDERED_CAP)
//! ```
//!
//! (for n independent uniform tokens E |R1|^2 = 1/n, and s is of the same size, so the floor
//! is [`ORDERED_FLOOR`] times the finite-n fluctuation of the disordered state; for a few tokens,
//! n < 31, the cap [`ORDERED_CAP`] = 0.9 lies above any disordered mean). A disordered
//! state is the uniform one: `interior-point`. An ordered one is `converged-clusters` (one or
//! two noisy clusters whose axis only diffuses), or `rotating-clusters` when the axis turns
//! the same way on both halves of the tail by more than [`ROTATING_TURN`] radians each.

use super::{classify_prefix, Classification, Clusters, Label};
use crate::observe::OrderSeries;

/// The order parameters count as ordered above this many times 1 / sqrt(n)...
pub const ORDERED_FLOOR: f64 = 5.0;
/// ... or above this, whichever is lower: 5 / sqrt(n) passes 1 below n = 25, where no state
/// could be ordered, while the disordered state's mean |R1| (and s) is at most E |R1| of two
/// independent uniform tokens, E |cos(Delta / 2)| = 2 / pi = 0.64, and falls with n.
pub const ORDERED_CAP: f64 = 0.9;
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
    let floor = (ORDERED_FLOOR / (n.max(1) as f64).sqrt()).min(ORDERED_CAP);
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
            "noisy stationary state, disordered: {stats}, below the floor {floor:.4} = min({ORDERED_FLOOR} / sqrt(n), {ORDERED_CAP})"
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
    let rotating = first.abs() > ROTATING_TURN
        && second.abs() > ROTATING_TURN
        && first * second > 0.0
        && drifts(series, start);
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

/// Whether the axis moves ballistically over the tail from `start`, not only diffuses: the
/// mean turn over a lag of L samples is at least halfway from a random walk's sqrt(L) times the
/// mean turn over one sample to a drift's L times. The turn is the unwrapped doubled angle in
/// d = 2 and the doubled angle between the axes in d > 2 (whose accumulated angle only grows,
/// so a random walk would also turn by more than pi), with L small enough there that the drift
/// over L stays below pi / 2. False when the samples are too coarse for that (L < 2: the axis
/// turns by more than pi / 4 per sample); true (the turns alone decide) when they are too few
/// (fewer than 16) or the axes were not kept.
fn drifts(series: &OrderSeries, start: usize) -> bool {
    let n = series.len() - start;
    let in_plane = series.axes.is_empty();
    if n < 16 || (!in_plane && series.axes.len() != series.len() * series.axis_dim) {
        return true;
    }
    let turn = |i: usize, j: usize| {
        if in_plane {
            (series.axis_angle[j] - series.axis_angle[i]).abs()
        } else {
            crate::observe::axis_distance(series.axis(i), series.axis(j))
        }
    };
    let mean_turn = |lag: usize| {
        let count = n - lag;
        (start..start + count)
            .map(|i| turn(i, i + lag))
            .sum::<f64>()
            / count as f64
    };
    let one = mean_turn(1);
    if one <= 0.0 {
        return false;
    }
    let lag = if in_plane {
        n / 4
    } else {
        ((std::f64::consts::FRAC_PI_2 / one) as usize).min(n / 4)
    };
    if lag < 2 {
        // The axis turns by more than pi / 4 between samples: no drift can be told from it.
        return false;
    }
    let l = lag as f64;
    mean_turn(lag) >= 0.5 * (l + l.sqrt()) * one
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

    /// An ordered noisy series whose axis drifts by `drift` and diffuses by `noise` (per
    /// sample, doubled angle): in the plane (R2's argument) or, with `d3`, as an axis turning
    /// in the (e1, e2) plane and tilted towards e3 by a random walk.
    fn walking_axis(drift: f64, noise: f64, d3: bool) -> OrderSeries {
        use rand::SeedableRng;
        use rand_distr::{Distribution, StandardNormal};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut s = OrderSeries::new();
        let (mut phi, mut tilt) = (0.0f64, 0.0f64);
        for i in 0..200 {
            let z: f64 = StandardNormal.sample(&mut rng);
            let w: f64 = StandardNormal.sample(&mut rng);
            phi += drift + noise * z;
            tilt += noise * w;
            let mut o = OrderParameters::from_r2(Complex64::from_polar(0.95, phi));
            o.r1 = Some(0.95);
            if d3 {
                // Doubled angles: the line's own angles are half of them.
                let (a, b) = (0.5 * phi, 0.5 * tilt);
                o.axis = Some(vec![a.cos() * b.cos(), a.sin() * b.cos(), b.sin()]);
            }
            s.push(0.25 * i as f64, &o);
        }
        s
    }

    #[test]
    fn a_diffusing_axis_is_not_a_rotating_one() {
        for d3 in [false, true] {
            // A random walk of 0.6 rad per sample turns by far more than pi on each half.
            let c = classify_stationary(&walking_axis(0.0, 0.6, d3), 1000);
            assert_eq!(c.label, Label::ConvergedClusters, "d3 {d3}: {}", c.reason);
            let turned = (c.features.r2_arg_rate * 25.0).abs();
            assert!(d3 || turned < 40.0, "{turned}");
            // A drift of 0.3 rad per sample without noise and under a third of it (in d = 3
            // a walk of 0.1 in each of two directions).
            for noise in [0.0, 0.1] {
                let c = classify_stationary(&walking_axis(0.3, noise, d3), 1000);
                assert_eq!(
                    c.label,
                    Label::RotatingClusters,
                    "d3 {d3} noise {noise}: {}",
                    c.reason
                );
            }
        }
    }

    #[test]
    fn a_few_tokens_can_be_ordered_and_disordered() {
        // n = 2: 5 / sqrt(2) = 3.5 is above any |R1|; the cap 0.9 is above the disordered
        // mean 2 / pi = 0.64 of two independent uniform tokens and below a merged pair's 1.
        for n in [1, 2, 10, 24] {
            let c = classify_stationary(&series(0.99, 0.005, 0.0), n);
            assert_eq!(c.label, Label::ConvergedClusters, "n = {n}: {}", c.reason);
            let disordered = 2.0 / std::f64::consts::PI / (n as f64 / 2.0).sqrt().max(1.0);
            let c = classify_stationary(&series(disordered, 0.2, 0.0), n.max(2));
            assert_eq!(c.label, Label::InteriorPoint, "n = {n}: {}", c.reason);
        }
    }
}
