//! The period of s(t) and the trend of its cycles.
//!
//! The period is the lag L that maximises the autocorrelation of s over the tail, the Pearson
//! correlation
//!
//! ```text
//! rho(L) = sum_i (x_i - mean_a)(x_{i+L} - mean_b) / sqrt(sum (x_i - mean_a)^2 sum (x_{i+L} - mean_b)^2)
//! ```
//!
//! of s with itself shifted by L samples. It is found on a coarse copy (means over blocks of
//! samples, at most [`COARSE_POINTS`] of them) as the first local maximum after the first zero of rho whose
//! value is within [`ACF_SHARE`] of the best, refined at full resolution around it and by a
//! parabola through the three best lags. Sub-peaks (wiggles within one cycle) do not fool it:
//! the whole shape must repeat. The result is then checked against the extrema: the times of
//! the minimum (or maximum) of s in successive windows of one period must be spaced by the
//! period (within [`PEAK_CHECK`]). The swing of s per period-window, fitted as
//! swing_k ~ e^{-lambda t_k}, gives the decay rate lambda of a spiral (negative: growing), and
//! the mean of s per period-window, when it moves one way, the drift of a slow spiral whose
//! swing holds while its centre of motion moves.

/// Most points of the coarse copy the autocorrelation is searched on.
pub const COARSE_POINTS: usize = 1200;
/// A local maximum of rho is the period when it is at least this share of the best one.
pub const ACF_SHARE: f64 = 0.9;
/// Least correlation at the period for s to count as periodic.
pub const ACF_MIN: f64 = 0.3;
/// Relative tolerance of the check of the period against the spacing of the extrema.
pub const PEAK_CHECK: f64 = 0.05;

/// What the cycles of s say, when the tail holds at least two of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Cycles {
    /// The period (time).
    pub period: f64,
    /// Correlation of s with itself one period later.
    pub correlation: f64,
    /// lambda of swing_k ~ e^{-lambda t}; negative when the swing grows.
    pub decay_rate: f64,
    /// r^2 of that fit: a trend in the swing counts only when the swings lie on it.
    pub decay_fit: f64,
    /// Mean of s over the last period.
    pub last_mean: f64,
    /// Swing (max - min) of s over the last period.
    pub last_swing: f64,
    /// Number of whole periods in the tail.
    pub count: usize,
    /// Change of the mean of s per period from the first whole period to the last, when the
    /// means move one way (a slow spiral drifts; a limit cycle's mean holds); else 0.
    pub mean_drift: f64,
    /// Samples per period: the mean over one period is good to about swing / this.
    pub samples_per_period: f64,
}

/// Pearson correlation of `x[..n - lag]` with `x[lag..]`.
fn correlation(x: &[f64], lag: usize) -> f64 {
    let m = x.len() - lag;
    let (a, b) = (&x[..m], &x[lag..]);
    let (ma, mb) = (
        a.iter().sum::<f64>() / m as f64,
        b.iter().sum::<f64>() / m as f64,
    );
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (p, q) in a.iter().zip(b) {
        sab += (p - ma) * (q - mb);
        saa += (p - ma) * (p - ma);
        sbb += (q - mb) * (q - mb);
    }
    if saa <= 0.0 || sbb <= 0.0 {
        0.0
    } else {
        sab / (saa * sbb).sqrt()
    }
}

/// The lag (in samples of `x`) of the period on the coarse grid, and its correlation.
fn coarse_lag(x: &[f64]) -> Option<(usize, f64)> {
    let max_lag = x.len() / 2;
    let rho: Vec<f64> = (0..=max_lag).map(|l| correlation(x, l)).collect();
    let first_negative = rho.iter().position(|r| *r < 0.0)?;
    let maxima: Vec<usize> = (first_negative.max(1)..max_lag)
        .filter(|&l| rho[l] > rho[l - 1] && rho[l] >= rho[l + 1])
        .collect();
    let best = maxima
        .iter()
        .map(|&l| rho[l])
        .fold(f64::NEG_INFINITY, f64::max);
    if best < ACF_MIN {
        return None;
    }
    maxima
        .into_iter()
        .find(|&l| rho[l] >= ACF_SHARE * best)
        .map(|l| (l, rho[l]))
}

/// The lag of the period at full resolution, with sub-sample precision.
fn refined_lag(s: &[f64], coarse: usize, stride: usize) -> (f64, f64) {
    let lo = (coarse * stride).saturating_sub(2 * stride).max(1);
    let hi = (coarse * stride + 2 * stride).min(s.len() / 2);
    let (mut best, mut best_rho) = (lo, f64::NEG_INFINITY);
    for l in lo..=hi {
        let r = correlation(s, l);
        if r > best_rho {
            best = l;
            best_rho = r;
        }
    }
    if best > lo && best < hi {
        let (a, b, c) = (correlation(s, best - 1), best_rho, correlation(s, best + 1));
        let curvature = a - 2.0 * b + c;
        if curvature < 0.0 {
            let shift = (0.5 * (a - c) / curvature).clamp(-0.5, 0.5);
            return (best as f64 + shift, best_rho);
        }
    }
    (best as f64, best_rho)
}

/// Whether the extrema of s, one per window of one period, recur with the period.
fn extrema_agree(t: &[f64], s: &[f64], period: f64) -> bool {
    let check = |pick: &dyn Fn(&[f64]) -> usize| {
        let times = window_times(t, s, period, pick);
        if times.len() < 2 {
            return false;
        }
        let spacing = (times[times.len() - 1] - times[0]) / (times.len() - 1) as f64;
        (spacing - period).abs() <= PEAK_CHECK * period
    };
    let argmin = |w: &[f64]| {
        (0..w.len())
            .min_by(|&a, &b| w[a].total_cmp(&w[b]))
            .unwrap_or(0)
    };
    let argmax = |w: &[f64]| {
        (0..w.len())
            .max_by(|&a, &b| w[a].total_cmp(&w[b]))
            .unwrap_or(0)
    };
    check(&argmin) || check(&argmax)
}

/// Index ranges of the whole windows of one period, counted back from the end.
fn windows(t: &[f64], period: f64) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut end = t.len();
    let t_last = t[t.len() - 1];
    let mut k = 1;
    loop {
        let t_start = t_last - k as f64 * period;
        if t_start < t[0] {
            break;
        }
        let start = t.partition_point(|v| *v < t_start);
        if end - start < 2 {
            break;
        }
        out.push((start, end));
        end = start;
        k += 1;
    }
    out.reverse();
    out
}

/// The time of the picked sample in each window (first window first).
fn window_times(t: &[f64], s: &[f64], period: f64, pick: &dyn Fn(&[f64]) -> usize) -> Vec<f64> {
    windows(t, period)
        .into_iter()
        .map(|(a, b)| t[a + pick(&s[a..b])])
        .collect()
}

/// The cycles of s over the tail (t, s on a uniform grid), when it repeats at least twice.
pub fn cycles(t: &[f64], s: &[f64]) -> Option<Cycles> {
    if s.len() < 16 {
        return None;
    }
    let dt = (t[t.len() - 1] - t[0]) / (t.len() - 1) as f64;
    let stride = s.len().div_ceil(COARSE_POINTS).max(1);
    // Block means, not every stride-th sample: a dip narrower than a block still shows.
    let coarse: Vec<f64> = s
        .chunks_exact(stride)
        .map(|c| c.iter().sum::<f64>() / stride as f64)
        .collect();
    let (lag, _) = coarse_lag(&coarse)?;
    let (lag, correlation) = refined_lag(s, lag, stride);
    let period = lag * dt;
    if correlation < ACF_MIN || !extrema_agree(t, s, period) {
        return None;
    }
    let w = windows(t, period);
    if w.len() < 2 {
        return None;
    }
    let (mut times, mut log_swings) = (Vec::new(), Vec::new());
    for &(a, b) in &w {
        let (lo, hi) = super::min_max(&s[a..b]);
        if hi - lo <= 0.0 {
            return None;
        }
        times.push(0.5 * (t[a] + t[b - 1]));
        log_swings.push((hi - lo).ln());
    }
    let &(a, b) = w.last()?;
    let (lo, hi) = super::min_max(&s[a..b]);
    let (slope, _, decay_fit) = super::fit(&times, &log_swings);
    let means: Vec<f64> = w
        .iter()
        .map(|&(a, b)| s[a..b].iter().sum::<f64>() / (b - a) as f64)
        .collect();
    let steps: Vec<f64> = means.windows(2).map(|m| m[1] - m[0]).collect();
    let one_way = steps.iter().all(|d| *d > 0.0) || steps.iter().all(|d| *d < 0.0);
    let mean_drift = if one_way {
        means[means.len() - 1] - means[0]
    } else {
        0.0
    };
    Some(Cycles {
        mean_drift,
        samples_per_period: period / dt,
        period,
        correlation,
        decay_rate: -slope,
        decay_fit,
        last_mean: s[a..b].iter().sum::<f64>() / (b - a) as f64,
        last_swing: hi - lo,
        count: w.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(n: usize, dt: f64) -> Vec<f64> {
        (0..n).map(|i| 1000.0 + i as f64 * dt).collect()
    }

    #[test]
    fn a_sine_has_its_period() {
        let t = grid(5000, 0.1);
        let s: Vec<f64> = t.iter().map(|v| 0.5 + 0.2 * (v * 0.7).sin()).collect();
        let c = cycles(&t, &s).unwrap();
        let exact = std::f64::consts::TAU / 0.7;
        assert!((c.period - exact).abs() < 1e-3 * exact, "{}", c.period);
        assert!(c.decay_rate.abs() < 1e-3);
    }

    #[test]
    fn sub_peaks_do_not_shorten_the_period() {
        // Period 50 with ten wiggles per cycle: counting maxima would say 5.
        let t = grid(6000, 0.1);
        let p = 50.0;
        let s: Vec<f64> = t
            .iter()
            .map(|v| {
                let ph = std::f64::consts::TAU * v / p;
                0.6 + 0.3 * ph.sin() + 0.02 * (10.0 * ph).sin()
            })
            .collect();
        let c = cycles(&t, &s).unwrap();
        assert!((c.period - p).abs() < 0.01 * p, "{}", c.period);
    }

    #[test]
    fn a_decaying_spiral_has_its_rate() {
        let t = grid(8000, 0.1);
        let s: Vec<f64> = t
            .iter()
            .map(|v| 0.3 + 0.1 * (-0.01 * (v - 1000.0)).exp() * (v * 0.9).cos())
            .collect();
        let c = cycles(&t, &s).unwrap();
        assert!((c.decay_rate - 0.01).abs() < 1e-3, "{}", c.decay_rate);
    }

    #[test]
    fn noise_free_drift_has_no_cycles() {
        let t = grid(3000, 0.1);
        let s: Vec<f64> = t.iter().map(|v| 1.0 - 1.0 / v).collect();
        assert!(cycles(&t, &s).is_none());
    }
}
