//! [`TokenSnapshots`]: an observer that keeps copies of (a subsample of) the tokens at a few
//! evenly spaced samples, for `tokens.png` and `tokens.gif`.

use std::io;

use crate::observe::{Observer, RunInfo, Sample};

/// Copies of the tokens at `count` evenly spaced sample indices (the first and the last
/// included), each a fixed subsample of the tokens: every `stride`-th token, at most
/// [`TokenSnapshots::MAX_TOKENS`] of them and at most [`TokenSnapshots::MAX_VALUES`] numbers
/// over all snapshots, so memory stays small for any n, d and count.
///
/// ```
/// use tokdyn::plot::TokenSnapshots;
/// let snaps = TokenSnapshots::new(2001, 100_000, 2, 60);
/// assert_eq!(snaps.stride(), 50); // 2000 of the 100000 tokens
/// ```
#[derive(Debug, Clone)]
pub struct TokenSnapshots {
    d: usize,
    n: usize,
    count: usize,
    stride: usize,
    /// Sample indices to keep, increasing.
    wanted: Vec<usize>,
    next: usize,
    times: Vec<f64>,
    tokens: Vec<Vec<f64>>,
}

/// `count` evenly spaced indices in `0..samples`, first and last included, increasing, distinct.
fn spaced(samples: usize, count: usize) -> Vec<usize> {
    if samples == 0 || count == 0 {
        return Vec::new();
    }
    if count == 1 {
        return vec![samples - 1];
    }
    let mut out: Vec<usize> = (0..count)
        .map(|i| {
            // Rounded i (samples - 1) / (count - 1) in integers.
            (2 * i * (samples - 1) + (count - 1)) / (2 * (count - 1))
        })
        .collect();
    out.dedup();
    out
}

impl TokenSnapshots {
    /// At most this many tokens are kept per snapshot.
    pub const MAX_TOKENS: usize = 2000;
    /// At most this many numbers (8 bytes each) are kept over all snapshots.
    pub const MAX_VALUES: usize = 4_000_000;

    /// Keeps the tokens (n of dimension d) at `count` evenly spaced indices of `samples` output
    /// samples. The number of samples is taken again from the run in [`Observer::start`].
    pub fn new(samples: usize, n: usize, d: usize, count: usize) -> Self {
        let d = d.max(1);
        let per_snapshot = (Self::MAX_VALUES / (count.max(1) * d)).clamp(1, Self::MAX_TOKENS);
        let stride = n.div_ceil(per_snapshot).max(1);
        TokenSnapshots {
            d,
            n,
            count,
            stride,
            wanted: spaced(samples, count),
            next: 0,
            times: Vec::new(),
            tokens: Vec::new(),
        }
    }

    /// Snapshots given directly: `(t, tokens n x d row-major)` each (e.g. from files); the same
    /// subsampling applies.
    pub fn from_snapshots(d: usize, snapshots: &[(f64, Vec<f64>)]) -> Self {
        let n = snapshots
            .iter()
            .map(|(_, x)| x.len() / d.max(1))
            .max()
            .unwrap_or(0);
        let mut s = TokenSnapshots::new(snapshots.len(), n, d, snapshots.len());
        for (t, x) in snapshots {
            s.push(*t, x);
        }
        s
    }

    /// Records one snapshot (every `stride`-th token of `tokens`, n x d row-major).
    pub fn push(&mut self, t: f64, tokens: &[f64]) {
        let d = self.d;
        let kept: Vec<f64> = tokens
            .chunks_exact(d)
            .step_by(self.stride)
            .flatten()
            .copied()
            .collect();
        self.times.push(t);
        self.tokens.push(kept);
    }

    /// Dimension of the tokens.
    pub fn d(&self) -> usize {
        self.d
    }

    /// Number of tokens of the run (before subsampling).
    pub fn n(&self) -> usize {
        self.n
    }

    /// One token in `stride` is kept.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Number of snapshots recorded.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// Times of the snapshots.
    pub fn times(&self) -> &[f64] {
        &self.times
    }

    /// The kept tokens of snapshot `i` (row-major, `d` a row).
    pub fn tokens(&self, i: usize) -> &[f64] {
        self.tokens.get(i).map(Vec::as_slice).unwrap_or(&[])
    }
}

impl Observer for TokenSnapshots {
    fn wants_tokens(&self) -> bool {
        true
    }

    fn wants_tokens_at(&self, index: usize) -> bool {
        self.wanted.binary_search(&index).is_ok()
    }

    fn start(&mut self, info: &RunInfo) -> io::Result<()> {
        self.wanted = spaced(info.samples, self.count);
        self.next = 0;
        self.times.clear();
        self.tokens.clear();
        Ok(())
    }

    fn sample(&mut self, sample: &Sample<'_>) -> io::Result<()> {
        while self.next < self.wanted.len() && self.wanted[self.next] < sample.index {
            self.next += 1;
        }
        if self.next < self.wanted.len() && self.wanted[self.next] == sample.index {
            self.next += 1;
            if let Some(tokens) = sample.tokens {
                self.push(sample.t, tokens);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::OrderParameters;
    use num_complex::Complex64;

    #[test]
    fn spaced_indices_include_both_ends() {
        assert_eq!(spaced(11, 3), vec![0, 5, 10]);
        assert_eq!(spaced(2001, 6), vec![0, 400, 800, 1200, 1600, 2000]);
        assert_eq!(spaced(3, 10), vec![0, 1, 2]);
        assert_eq!(spaced(5, 1), vec![4]);
        assert!(spaced(0, 4).is_empty());
        assert!(spaced(4, 0).is_empty());
        assert_eq!(spaced(1, 5), vec![0]);
    }

    #[test]
    fn keeps_a_bounded_subsample_at_the_wanted_samples() {
        let (n, d, samples) = (5000, 2, 21);
        let mut snaps = TokenSnapshots::new(samples, n, d, 5);
        assert_eq!(snaps.stride(), 3);
        let tokens: Vec<f64> = (0..n * d).map(|i| i as f64).collect();
        let order = OrderParameters::from_r2(Complex64::new(0.0, 0.0));
        snaps
            .start(&RunInfo {
                samples,
                t_end: 2.0,
            })
            .unwrap();
        for index in 0..samples {
            let s = Sample {
                index,
                t: index as f64 * 0.1,
                state: &[],
                order: &order,
                tokens: Some(&tokens),
            };
            snaps.sample(&s).unwrap();
        }
        assert!(snaps.wants_tokens());
        assert_eq!(snaps.len(), 5);
        assert_eq!(snaps.times()[4], 2.0);
        assert_eq!(snaps.tokens(0).len(), 1667 * 2);
        assert_eq!(&snaps.tokens(0)[..4], &[0.0, 1.0, 6.0, 7.0]);
        assert!(snaps.tokens(99).is_empty());
    }

    #[test]
    fn memory_is_bounded_in_high_dimension() {
        let snaps = TokenSnapshots::new(1001, 100_000, 100, 100);
        let per = 100_000usize.div_ceil(snaps.stride());
        assert!(per * 100 * 100 <= TokenSnapshots::MAX_VALUES);
        let one = TokenSnapshots::new(10, 1, 3, 4);
        assert_eq!(one.stride(), 1);
    }
}
