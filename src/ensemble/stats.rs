//! Statistics over the runs of an ensemble (docs/MATH.md, "Ensembles"): label shares with Wilson 95%
//! intervals, quantiles of the cluster count, and the mean and spread of the order
//! parameters at every sample time.
//!
//! ```text
//! Wilson:  p = k / N,  z = 1.959964,
//!          centre = (p + z^2 / (2N)) / (1 + z^2 / N),
//!          half   = z sqrt(p (1 - p) / N + z^2 / (4 N^2)) / (1 + z^2 / N),
//!          [low, high] = [centre - half, centre + half]
//! mean and sd at each sample over the runs, in run order (Welford), sd with N - 1 (0 for N = 1)
//! ```

use std::collections::BTreeMap;

use serde::Serialize;

use crate::classify::Label;

/// The 97.5% quantile of the standard normal distribution.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// The share of one label with its Wilson 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LabelShare {
    /// Runs with this label.
    pub count: usize,
    /// count / runs.
    pub share: f64,
    /// Lower end of the Wilson 95% interval.
    pub low: f64,
    /// Upper end of the Wilson 95% interval.
    pub high: f64,
}

/// The Wilson 95% score interval of `count` successes in `runs` trials.
pub fn wilson(count: usize, runs: usize) -> (f64, f64) {
    let n = runs.max(1) as f64;
    let p = count as f64 / n;
    let z2 = Z_95 * Z_95;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z_95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The shares of the labels that occur, by word.
pub fn label_shares(labels: &[Label]) -> BTreeMap<&'static str, LabelShare> {
    let mut out = BTreeMap::new();
    for label in Label::ALL {
        let count = labels.iter().filter(|l| **l == label).count();
        if count > 0 {
            let (low, high) = wilson(count, labels.len());
            out.insert(
                label.as_str(),
                LabelShare {
                    count,
                    share: count as f64 / labels.len() as f64,
                    low,
                    high,
                },
            );
        }
    }
    out
}

/// The most frequent label and its share (ties: the first in [`Label::ALL`] order).
pub fn most_frequent(labels: &[Label]) -> Option<(Label, f64)> {
    let mut best: Option<(Label, usize)> = None;
    for label in Label::ALL {
        let count = labels.iter().filter(|l| **l == label).count();
        if count > 0 && best.is_none_or(|(_, c)| count > c) {
            best = Some((label, count));
        }
    }
    best.map(|(l, c)| (l, c as f64 / labels.len() as f64))
}

/// Minimum, median and maximum of the cluster counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CountQuantiles {
    /// The smallest count.
    pub min: usize,
    /// The median (the mean of the middle two for an even number of runs).
    pub median: f64,
    /// The largest count.
    pub max: usize,
}

/// The quantiles of `counts`; `None` when there is none.
pub fn count_quantiles(counts: &[usize]) -> Option<CountQuantiles> {
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    let (first, last) = (*sorted.first()?, *sorted.last()?);
    let m = sorted.len();
    let median = if m % 2 == 1 {
        sorted[m / 2] as f64
    } else {
        0.5 * (sorted[m / 2 - 1] + sorted[m / 2]) as f64
    };
    Some(CountQuantiles {
        min: first,
        median,
        max: last,
    })
}

/// Running mean and spread of a series over runs, sample by sample (Welford, in run order).
#[derive(Debug, Clone, Default)]
pub struct SeriesMoments {
    runs: usize,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

impl SeriesMoments {
    /// Adds one run's series (the first `len` samples of every run are kept).
    pub fn add(&mut self, values: &[f64]) {
        if self.runs == 0 {
            self.mean = vec![0.0; values.len()];
            self.m2 = vec![0.0; values.len()];
        }
        self.runs += 1;
        let k = self.runs as f64;
        for ((m, s), x) in self.mean.iter_mut().zip(&mut self.m2).zip(values) {
            let delta = x - *m;
            *m += delta / k;
            *s += delta * (x - *m);
        }
    }

    /// The mean at each sample.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The sample standard deviation at each sample (0 for one run).
    pub fn sd(&self) -> Vec<f64> {
        let k = self.runs.saturating_sub(1).max(1) as f64;
        self.m2.iter().map(|s| (s / k).max(0.0).sqrt()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_hand_values_and_the_normal_limit() {
        // 0 of 10: [0, z^2 / (N + z^2)].
        let (lo, hi) = wilson(0, 10);
        assert_eq!(lo, 0.0);
        assert!(
            (hi - Z_95 * Z_95 / (10.0 + Z_95 * Z_95)).abs() < 1e-12,
            "{hi}"
        );
        // Large N: close to p +- z sqrt(p (1 - p) / N).
        let (lo, hi) = wilson(30_000, 100_000);
        let half = Z_95 * (0.3f64 * 0.7 / 1e5).sqrt();
        assert!((lo - (0.3 - half)).abs() < 1e-5 && (hi - (0.3 + half)).abs() < 1e-5);
        // The interval is symmetric under k -> N - k.
        let (a, b) = wilson(3, 17);
        let (c, d) = wilson(14, 17);
        assert!((a - (1.0 - d)).abs() < 1e-15 && (b - (1.0 - c)).abs() < 1e-15);
    }

    #[test]
    fn moments_and_quantiles_match_direct_formulas() {
        let runs = [[1.0, 2.0], [3.0, 2.0], [8.0, 2.0]];
        let mut m = SeriesMoments::default();
        runs.iter().for_each(|r| m.add(r));
        assert_eq!(m.mean(), &[4.0, 2.0]);
        let sd = m.sd();
        assert!((sd[0] - 13f64.sqrt()).abs() < 1e-12 && sd[1] == 0.0);
        let q = count_quantiles(&[3, 1, 2, 7]).unwrap();
        assert_eq!((q.min, q.median, q.max), (1, 2.5, 7));
        assert_eq!(count_quantiles(&[]), None);
    }
}
