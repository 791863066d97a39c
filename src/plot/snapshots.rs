//! [`TokenSnapshots`]: an observer that keeps copies of (a subsample of) the tokens at a few
//! evenly spaced samples, for `tokens.png` and `tokens.gif`, the tokens of the last stretch of
//! the run (a rolling buffer over about the last [`RING_SHARE`] of the samples, from which
//! `tokens.png` picks times spread over the last period of an oscillation), the tokens at times
//! asked for (`[output] snapshots`), and the angle histograms of `kymograph.png`
//! ([`AngleHistory`]).
//!
//! Snapshot times chosen from the dynamics ([`snapshot_times`]): for a periodic run with period
//! P, `count` times t_end - P (count - 1 - i) / count, i = 0..count-1 (the last period); else
//! `count - 1` times spread evenly over the transient [0, t_c], where t_c is the first sample
//! after which |s(t) - s(t_end)| stays below 2% of the range of s, and t_end last.

use std::collections::VecDeque;
use std::io;

use super::kymograph::AngleHistory;

/// On the sphere (d = 3), runs of more tokens than this are drawn as a density shading: the
/// dots of a subsample would hide how many tokens each stands for.
pub const DENSITY_TOKENS: usize = 20_000;
use crate::observe::{Observer, RunInfo, Sample, TokenSource};

/// Share of the samples the rolling buffer of the last stretch spans.
pub const RING_SHARE: f64 = 0.15;
/// Snapshots kept in the rolling buffer.
const RING: usize = 120;

/// Copies of the tokens at `count` evenly spaced sample indices (the first and the last
/// included), each a fixed subsample of the tokens: every `stride`-th token, at most
/// [`TokenSnapshots::MAX_TOKENS`] of them (on a sphere with more than
/// [`DENSITY_TOKENS`] tokens, drawn as a density, as many as the memory bound allows) and at most [`TokenSnapshots::MAX_VALUES`] numbers
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
    /// Sample indices asked for (`[output] snapshots`), increasing.
    given: Vec<usize>,
    given_times: Vec<f64>,
    /// Snapshots at the given indices.
    at_given: Vec<(f64, Vec<f64>)>,
    /// Every `ring_stride`-th sample of the last stretch.
    ring_stride: usize,
    ring: VecDeque<(f64, Vec<f64>)>,
    history: AngleHistory,
    /// The subsample of the sample being handed over in pieces, and that sample's index.
    pending: Vec<f64>,
    pending_index: Option<usize>,
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

/// The stride of the rolling buffer: it spans about [`RING_SHARE`] of `samples`.
fn ring_stride(samples: usize) -> usize {
    ((samples as f64 * RING_SHARE / RING as f64).ceil() as usize).max(1)
}

/// The sample indices nearest to `times` on the grid t_i = i t_end / (samples - 1), sorted and
/// distinct (negative or non-finite times are left out).
fn given_indices(times: &[f64], samples: usize, t_end: f64) -> Vec<usize> {
    if samples < 2 || t_end.is_nan() || t_end <= 0.0 {
        return if samples > 0 { vec![0] } else { Vec::new() };
    }
    let dt = t_end / (samples - 1) as f64;
    let mut out: Vec<usize> = times
        .iter()
        .filter(|t| t.is_finite() && **t >= 0.0)
        .map(|t| (t / dt).round().min(1e15) as usize)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Times for `tokens.png` chosen from the dynamics (see the module doc): `t` and `s` the sample
/// times and the nematic order, `period` the period when the run is periodic.
pub fn snapshot_times(t: &[f64], s: &[f64], period: Option<f64>, count: usize) -> Vec<f64> {
    let n = t.len().min(s.len());
    if n == 0 || count == 0 {
        return Vec::new();
    }
    let (t0, t_end) = (t[0], t[n - 1]);
    if count == 1 {
        return vec![t_end];
    }
    if let Some(p) = period.filter(|p| p.is_finite() && *p > 0.0 && t_end - p >= t0) {
        return (0..count)
            .map(|i| t_end - p * (count - 1 - i) as f64 / count as f64)
            .collect();
    }
    let s_end = s[n - 1];
    let (lo, hi) = super::finite_range(s[..n].iter().copied()).unwrap_or((0.0, 0.0));
    let tol = (0.02 * (hi - lo)).max(1e-12);
    let settled = (0..n)
        .rev()
        .find(|&i| (s[i] - s_end).abs().is_nan() || (s[i] - s_end).abs() >= tol)
        .map(|i| (i + 1).min(n - 1))
        .unwrap_or(0);
    let tc = t[settled].max(t0 + (t_end - t0) / (count as f64 * 4.0));
    let mut out: Vec<f64> = (0..count - 1)
        .map(|i| t0 + (tc - t0) * i as f64 / (count - 2).max(1) as f64)
        .collect();
    out.push(t_end);
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
        // On a sphere drawn as a density shading, as many tokens as the memory bound allows.
        let most = if d == 3 && n > DENSITY_TOKENS {
            Self::MAX_VALUES
        } else {
            Self::MAX_TOKENS
        };
        let per_snapshot = (Self::MAX_VALUES / ((count + RING).max(1) * d)).clamp(1, most);
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
            given: Vec::new(),
            given_times: Vec::new(),
            at_given: Vec::new(),
            ring_stride: ring_stride(samples),
            ring: VecDeque::new(),
            history: AngleHistory::new(n, d),
            pending: Vec::new(),
            pending_index: None,
        }
    }

    /// Also keeps the tokens at these times (the nearest samples of a run of `samples` samples
    /// over [0, t_end]; the sample spacing continues past t_end when the run is extended).
    pub fn with_times(mut self, times: &[f64], samples: usize, t_end: f64) -> Self {
        self.given_times = times.to_vec();
        self.given = given_indices(times, samples, t_end);
        self
    }

    /// The angle histograms recorded for `kymograph.png`.
    pub fn history(&self) -> &AngleHistory {
        &self.history
    }

    /// Whether the snapshots were asked for (`[output] snapshots`).
    pub fn has_given(&self) -> bool {
        !self.given.is_empty()
    }

    /// Every snapshot kept, increasing in time (equal times once): the evenly spaced ones, the
    /// last stretch and the asked-for ones; with asked-for times, only those.
    pub fn candidates(&self) -> Vec<(f64, &[f64])> {
        if self.has_given() {
            return self
                .at_given
                .iter()
                .map(|(t, x)| (*t, x.as_slice()))
                .collect();
        }
        let mut all: Vec<(f64, &[f64])> = self
            .times
            .iter()
            .zip(&self.tokens)
            .map(|(t, x)| (*t, x.as_slice()))
            .chain(self.ring.iter().map(|(t, x)| (*t, x.as_slice())))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        all.dedup_by(|a, b| a.0 == b.0);
        all
    }

    fn subsample(&self, tokens: &[f64]) -> Vec<f64> {
        if self.stride == 1 {
            return tokens.to_vec();
        }
        tokens
            .chunks_exact(self.d)
            .step_by(self.stride)
            .flatten()
            .copied()
            .collect()
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
        let kept = self.subsample(tokens);
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

/// At most this fraction of the tokens' angles for a column along the start order (each costs
/// a few times a token of the pass over the tokens).
const ALONG_BUDGET_FRACTION: usize = 16;

/// The kymograph's column of a plane map from the angles along the start tokens' order
/// ([`super::kymograph_map::doubled_counts_along`]), when the map has that order.
fn counts_along_the_order(source: &dyn TokenSource) -> Option<[u64; super::kymograph::BINS]> {
    let n = source.n();
    // Below this the pass over the tokens is as cheap (the clusters' bisection uses the same).
    if n < crate::observe::plane_clusters::MIN_TOKENS {
        return None;
    }
    let plane = source.plane_order()?;
    if plane.len() != n {
        return None;
    }
    let bounds = crate::observe::circle_order::Bounds::of(&plane.p)?;
    let mut read = |q: usize| plane.read(source, q);
    let budget = (n / ALONG_BUDGET_FRACTION).max(4096);
    super::kymograph_map::doubled_counts_along(n, &bounds, budget, &mut read)
}

impl Observer for TokenSnapshots {
    fn wants_tokens(&self) -> bool {
        true
    }

    /// Every sample: the kymograph's angle histograms and the last stretch read them all.
    fn wants_tokens_at(&self, _index: usize) -> bool {
        true
    }

    fn takes_token_pieces(&self) -> bool {
        true
    }

    /// The same subsample and angle counts as a whole sample's, a piece at a time.
    fn sample_tokens(&mut self, index: usize, first: usize, rows: &[f64]) -> io::Result<()> {
        self.history.record_piece(index, first, rows);
        self.pending_index = Some(index);
        let skip = (self.stride - first % self.stride) % self.stride;
        for row in rows.chunks_exact(self.d).skip(skip).step_by(self.stride) {
            self.pending.extend_from_slice(row);
        }
        Ok(())
    }

    /// In d = 2 from a plane map: the kymograph's column by
    /// [`super::kymograph_map::doubled_counts`] and the subsample token by token (the same
    /// numbers as from the pieces).
    fn sample_source(&mut self, index: usize, source: &dyn TokenSource) -> io::Result<bool> {
        if self.d != 2 || source.d() != 2 {
            return Ok(false);
        }
        let n = source.n();
        if self.history.records(index) {
            let token = |k: usize, y: &mut [f64]| source.rows(k, y);
            let counts = source
                .plane_map()
                .and_then(|map| super::kymograph_map::doubled_counts(&map, token))
                .or_else(|| counts_along_the_order(source));
            let Some(counts) = counts else {
                return Ok(false);
            };
            self.history.add_counts(index, &counts, n as u64);
        }
        self.pending_index = Some(index);
        let mut row = [0.0; 2];
        for k in (0..n).step_by(self.stride) {
            source.rows(k, &mut row);
            self.pending.extend_from_slice(&row);
        }
        Ok(true)
    }

    fn start(&mut self, info: &RunInfo) -> io::Result<()> {
        self.wanted = spaced(info.samples, self.count);
        self.next = 0;
        self.times.clear();
        self.tokens.clear();
        self.at_given.clear();
        self.ring.clear();
        self.pending.clear();
        self.pending_index = None;
        self.ring_stride = ring_stride(info.samples);
        self.history.clear();
        if !self.given_times.is_empty() {
            self.given = given_indices(&self.given_times, info.samples, info.t_end);
        }
        Ok(())
    }

    fn sample(&mut self, sample: &Sample<'_>) -> io::Result<()> {
        let given = self.given.binary_search(&sample.index).is_ok();
        let ring = sample.index.is_multiple_of(self.ring_stride);
        while self.next < self.wanted.len() && self.wanted[self.next] < sample.index {
            self.next += 1;
        }
        let wanted = self.next < self.wanted.len() && self.wanted[self.next] == sample.index;
        if wanted {
            self.next += 1;
        }
        // The subsample of this sample's tokens, given whole or in pieces before.
        let kept = match sample.tokens {
            Some(tokens) => {
                self.history.record(sample.index, sample.t, tokens);
                (given || ring || wanted).then(|| self.subsample(tokens))
            }
            None if self.pending_index.take() == Some(sample.index) => {
                self.history.finish_record(sample.index, sample.t);
                Some(std::mem::take(&mut self.pending))
            }
            None => None,
        };
        let Some(kept) = kept else {
            return Ok(());
        };
        if given {
            self.at_given.push((sample.t, kept.clone()));
        }
        if ring {
            if self.ring.len() == RING {
                self.ring.pop_front();
            }
            self.ring.push_back((sample.t, kept.clone()));
        }
        if wanted {
            self.times.push(sample.t);
            self.tokens.push(kept);
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
