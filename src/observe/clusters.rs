//! Tight clusters of the tokens at one sample (docs/MATH.md §11).
//!
//! The rule, with the angle theta = [`ClusterRule::threshold`] (default [`DEFAULT_THRESHOLD`]):
//!
//! ```text
//! link x_i ~ x_j when angle(x_i, x_j) <= theta; the groups are the single-linkage components.
//! The tokens are clustered when every group has angular diameter <= theta
//! (max_{i, j in group} angle(x_i, x_j)) and there are at most max(1, ceil(sqrt n)) groups.
//! Otherwise the count is 0 (not clustered).
//! ```
//!
//! Groups of a clustered state are more than theta apart token to token (else they would be
//! linked) and at most theta wide, so they are the clusters in any reasonable sense; the cap
//! sqrt(n) keeps a few scattered tokens (small n, spacing above theta) from counting as
//! clusters of one.
//!
//! Cost, no n x n matrix: d = 2 takes the angles (the components are the arcs between gaps
//! larger than theta of the sorted angles, a component's diameter is its arc, last angle minus
//! first) and finds those gaps from pseudo-angle bins at most theta / 2 wide without sorting and
//! with an atan2 only for each bin's least and greatest token, O(n + 16 / theta), exact: the
//! same partition and the same diameters as the sort (docs/MATH.md §11.2; the sort remains for
//! thresholds so small that the bins outnumber 4 n). d >= 3 makes
//! groups by one leader pass (a token joins the first leader within theta, else leads a new
//! group; more leaders than the cap means not clustered), O(n k d), then verifies: a group is
//! tight when twice its radius about its centre is <= theta, not tight when a true pair is
//! wider than theta, and in between it is decided pair by pair when it holds at most
//! [`EXACT_PAIRS`] pairs (a larger group counts as not tight: conservative, and only in the
//! short transient when its radius is between theta / 2 and theta). The diameter reported for
//! a group of more than [`EXACT_DIAMETER_TOKENS`] tokens proven tight by its radius is the
//! farthest pair seen from its farthest token (a true pairwise angle, at least half the
//! diameter); smaller groups get the exact one. Two groups are apart when
//! their centres are more than theta + both radii apart, else pair by pair under the same
//! limit. In a clustered state the leader pass finds exactly the components. Angles are
//! formed as 2 asin(|x - y| / 2), accurate for the tiny angles of tight clusters.

use crate::parallel::TOKENS_PER_CHUNK;
use std::f64::consts::{PI, TAU};

/// The default angle (radians) below which tokens count as one tight cluster.
pub const DEFAULT_THRESHOLD: f64 = 0.1;
/// Largest number of token pairs checked one by one when the bounds do not decide (d >= 3).
pub const EXACT_PAIRS: usize = 1 << 22;
/// Up to this many tokens a tight group's diameter is computed pair by pair (d >= 3); a larger
/// group proven tight by its radius reports the farthest pair seen from its farthest token.
pub const EXACT_DIAMETER_TOKENS: usize = 256;

/// The rule that says which tokens form a tight cluster.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClusterRule {
    /// The angle theta (radians, 0 < theta < pi): the linking distance and the largest diameter.
    pub threshold: f64,
}

impl Default for ClusterRule {
    fn default() -> Self {
        ClusterRule {
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

/// The smallest threshold accepted: angles between unit vectors in doubles are resolved to about
/// 1e-15 (the test `tiny_diameters_are_resolved`), so a smaller "tight" would only mean "the
/// same double", and a threshold below it (1e-300) leaves every token its own cluster.
pub const MIN_THRESHOLD: f64 = 1e-12;

impl ClusterRule {
    /// A rule with the angle `threshold`; `None` unless MIN_THRESHOLD <= threshold < pi.
    pub fn new(threshold: f64) -> Option<Self> {
        (MIN_THRESHOLD..PI)
            .contains(&threshold)
            .then_some(ClusterRule { threshold })
    }

    /// The largest count that still counts as clustered for n tokens: max(1, ceil(sqrt n)).
    pub fn max_clusters(n: usize) -> usize {
        ((n as f64).sqrt().ceil() as usize).max(1)
    }
}

/// The tight clusters of one configuration of tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Clustering {
    /// Number of tight clusters; 0 when the tokens are not clustered.
    pub count: usize,
    /// Tokens per cluster, descending (empty when not clustered).
    pub sizes: Vec<usize>,
    /// Unit centres (the normalised mean of each cluster's tokens), in the order of `sizes`.
    pub centres: Vec<Vec<f64>>,
    /// Largest angular diameter of a cluster (radians); `None` when not clustered.
    pub diameter: Option<f64>,
    /// Smallest angle between two centres; `None` when count <= 1.
    pub separation: Option<f64>,
    /// The rule's angle.
    pub threshold: f64,
    /// Number of tokens.
    pub n: usize,
}

impl Clustering {
    /// Whether the tokens sit in tight clusters (count >= 1).
    pub fn is_clustered(&self) -> bool {
        self.count > 0
    }

    /// Fraction of the tokens in the largest cluster; `None` when not clustered.
    pub fn largest_fraction(&self) -> Option<f64> {
        self.sizes.first().map(|&m| m as f64 / self.n.max(1) as f64)
    }

    /// Weights n_a / n of the clusters, in the order of `sizes`.
    pub fn weights(&self) -> Vec<f64> {
        let n = self.n.max(1) as f64;
        self.sizes.iter().map(|&m| m as f64 / n).collect()
    }

    /// The answer for n tokens that are not clustered.
    pub fn not_clustered(n: usize, threshold: f64) -> Self {
        Clustering {
            count: 0,
            sizes: Vec::new(),
            centres: Vec::new(),
            diameter: None,
            separation: None,
            threshold,
            n,
        }
    }
}

/// The tight clusters of tokens (n x d row-major, unit rows) under `rule`.
///
/// ```
/// use tokdyn::observe::clusters::{detect_clusters, ClusterRule};
/// // Two tight groups on the circle, at angles 0 and 2.
/// let angles = [0.0, 0.01, -0.01, 2.0, 2.02];
/// let tokens: Vec<f64> = angles.iter().flat_map(|t: &f64| [t.cos(), t.sin()]).collect();
/// let c = detect_clusters(&tokens, 2, ClusterRule::default());
/// assert_eq!((c.count, c.sizes.clone()), (2, vec![3, 2]));
/// assert!((c.diameter.unwrap() - 0.02).abs() < 1e-12);
/// ```
pub fn detect_clusters(tokens: &[f64], d: usize, rule: ClusterRule) -> Clustering {
    detect_clusters_in(tokens, d, rule, &mut CircleScratch::default())
}

/// Per-token arrays of the circle's binned partition (d = 2), kept by a caller that detects
/// clusters at every sample so that a sample allocates nothing of size n.
#[derive(Debug, Default)]
pub struct CircleScratch {
    pseudo: Vec<f64>,
    bin: Vec<u32>,
}

/// [`detect_clusters`] with the d = 2 arrays in `scratch`: the same answer.
pub fn detect_clusters_in(
    tokens: &[f64],
    d: usize,
    rule: ClusterRule,
    scratch: &mut CircleScratch,
) -> Clustering {
    let n = tokens.len() / d.max(1);
    if n == 0 || d < 2 {
        return Clustering::not_clustered(n, rule.threshold);
    }
    if d == 2 {
        return circle_clustering(tokens, rule.threshold, scratch);
    }
    match leader_groups(tokens, d, rule.threshold) {
        Some(groups) if groups.len() <= ClusterRule::max_clusters(n) => {
            summarise(tokens, d, groups, rule.threshold)
        }
        _ => Clustering::not_clustered(n, rule.threshold),
    }
}

/// The directions x_k / |x_k| of tokens that may be off the sphere (a pre-LN stream); the
/// tokens themselves, borrowed, when every row is a unit vector to rounding.
pub fn directions(tokens: &[f64], d: usize) -> std::borrow::Cow<'_, [f64]> {
    if d == 0 || tokens.chunks_exact(d).all(is_unit) {
        return std::borrow::Cow::Borrowed(tokens);
    }
    let mut z = tokens.to_vec();
    for x in z.chunks_exact_mut(d) {
        let r = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        if r > 0.0 {
            x.iter_mut().for_each(|v| *v /= r);
        }
    }
    std::borrow::Cow::Owned(z)
}

/// Whether a row is a unit vector to rounding (|x|^2 within 1e-12 of 1): [`directions`] keeps
/// the tokens as they are when every row is.
pub fn is_unit(x: &[f64]) -> bool {
    (x.iter().map(|v| v * v).sum::<f64>() - 1.0).abs() <= 1e-12
}

/// The tight clusters of weighted points (k x d row-major, unit rows; point a stands for
/// `counts[a]` tokens at one place): the same as [`detect_clusters`] of the tokens with every
/// point repeated, in O(k^2 d) (the cluster model's states).
pub fn detect_points(points: &[f64], counts: &[usize], d: usize, rule: ClusterRule) -> Clustering {
    let n: usize = counts.iter().sum();
    let k = counts.len();
    let theta = rule.threshold;
    let row = |a: usize| &points[a * d..(a + 1) * d];
    let mut group: Vec<usize> = (0..k).collect();
    // Single linkage by relabelling (k is small).
    for a in 0..k {
        for b in a + 1..k {
            if group[a] != group[b] && angle_between(row(a), row(b)) <= theta {
                let (keep, drop) = (group[a].min(group[b]), group[a].max(group[b]));
                group
                    .iter_mut()
                    .filter(|g| **g == drop)
                    .for_each(|g| *g = keep);
            }
        }
    }
    let mut labels: Vec<usize> = group.clone();
    labels.sort_unstable();
    labels.dedup();
    if n == 0 || labels.len() > ClusterRule::max_clusters(n) {
        return Clustering::not_clustered(n, theta);
    }
    let mut parts = Vec::new();
    for &l in &labels {
        let members: Vec<usize> = (0..k).filter(|&a| group[a] == l).collect();
        let mut diameter: f64 = 0.0;
        for (i, &a) in members.iter().enumerate() {
            for &b in &members[i + 1..] {
                diameter = diameter.max(angle_between(row(a), row(b)));
            }
        }
        if diameter > theta {
            return Clustering::not_clustered(n, theta);
        }
        let mut sum = vec![0.0; d];
        for &a in &members {
            for (s, v) in sum.iter_mut().zip(row(a)) {
                *s += counts[a] as f64 * v;
            }
        }
        parts.push(Part {
            size: members.iter().map(|&a| counts[a]).sum(),
            first: members[0],
            diameter,
            centre: direction_of_sum(sum, Some(row(members[0]).to_vec())),
        });
    }
    clustering_of(parts, theta, n)
}

/// A verified tight group: its token indices and its diameter.
struct Group {
    members: Vec<usize>,
    diameter: f64,
}

/// The angle between unit vectors: 2 asin(|x - y| / 2) up to a right angle, pi - 2 asin(|x +
/// y| / 2) beyond it (docs/MATH.md §11), each accurate to rounding where the other is not (asin
/// near 1 turns a rounding of the chord into an error of its square root: 3e-8 at pi).
pub fn angle_between(x: &[f64], y: &[f64]) -> f64 {
    let chord2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
    if chord2 <= 2.0 {
        return 2.0 * (chord2.sqrt() / 2.0).asin();
    }
    let across2: f64 = x.iter().zip(y).map(|(a, b)| (a + b) * (a + b)).sum();
    PI - 2.0 * (across2.sqrt() / 2.0).min(1.0).asin()
}

/// d = 2: the arcs between gaps wider than theta of the sorted angles, when each arc is at most
/// theta long; by pseudo-angle bins in O(n + bins) when the bins are few enough and every token
/// has a direction, else by sorting the angles.
fn circle_clustering(tokens: &[f64], theta: f64, scratch: &mut CircleScratch) -> Clustering {
    let n = tokens.len() / 2;
    let binned = pseudo_angle_bins(theta)
        .filter(|&b| b <= MAX_BINS_PER_TOKEN * n + MIN_BINS)
        .and_then(|bins| binned_arcs(tokens, theta, bins, scratch));
    let fits = |count: usize| count <= ClusterRule::max_clusters(n);
    match binned {
        Some(Some(arcs)) if fits(arcs.spans.len()) => {
            summarise_arcs(tokens, &arcs, &scratch.bin, theta)
        }
        Some(_) => Clustering::not_clustered(n, theta),
        None => match sorted_angle_groups(&circle_angles(tokens), theta) {
            Some(groups) if fits(groups.len()) => summarise(tokens, 2, groups, theta),
            _ => Clustering::not_clustered(n, theta),
        },
    }
}

/// The angles atan2(x_2, x_1) in [-pi, pi] of d = 2 tokens (elementwise, so the same numbers
/// whatever the thread count).
fn circle_angles(tokens: &[f64]) -> Vec<f64> {
    use rayon::prelude::*;
    let mut angles = Vec::with_capacity(tokens.len() / 2);
    tokens
        .par_chunks_exact(2)
        .with_min_len(1 << 14)
        .map(|x| x[1].atan2(x[0]))
        .collect_into_vec(&mut angles);
    angles
}

/// The binned partition is used while bins <= MAX_BINS_PER_TOKEN n + MIN_BINS (else the sort is
/// as cheap and needs no table of bins).
const MAX_BINS_PER_TOKEN: usize = 4;
/// See [`MAX_BINS_PER_TOKEN`].
const MIN_BINS: usize = 256;

/// The pseudo-angle of (x_1, x_2) != 0 in [0, 4]: 0 at atan2 = -pi, 1 at -pi/2, 2 at 0, 3 at
/// pi/2, 4 at pi, and in each quarter the fraction |x_2| / (|x_1| + |x_2|) or
/// |x_1| / (|x_1| + |x_2|) (the signs of zeros sort as atan2 sorts them). It increases with the
/// angle, at a rate between 1 / 2 and 1 per radian, and its rounding is below 1e-15
/// (docs/MATH.md §11.2): a division instead of an atan2.
#[inline(always)]
fn pseudo_angle(x1: f64, x2: f64) -> f64 {
    let (ax, ay) = (x1.abs(), x2.abs());
    let below = x2.is_sign_negative();
    let odd = below != x1.is_sign_negative();
    let base = if below { 0.0 } else { 2.0 } + if odd { 1.0 } else { 0.0 };
    let part = if odd { ax } else { ay };
    base + part / (ax + ay)
}

/// Pseudo-angles closer than this are ordered by the sign of the cross product: far above their
/// rounding (1e-15), far below a bin (theta / 16 >= 6e-14).
const NEAR: f64 = 1e-14;

/// The number of pseudo-angle bins over [0, 4]: a bin 4 / B <= theta / 4 - 1e-15 wide spans at
/// most theta / 2 of angle (docs/MATH.md §11.2); `None` when that is not a usable count (a bin
/// index must fit in 32 bits).
fn pseudo_angle_bins(theta: f64) -> Option<usize> {
    let bins = (4.0 / (0.25 * theta - 1e-15)).ceil();
    (1.0..u32::MAX as f64)
        .contains(&bins)
        .then_some(bins as usize)
}

/// Whether token i (x_i1, x_i2) comes before token j at a smaller angle, given their
/// pseudo-angles: by the pseudo-angles when they are more than [`NEAR`] apart, else by the sign
/// of x_i x x_j (positive: x_j is counterclockwise of x_i), each product's rounding error
/// recovered by a fused multiply-add so that the sign is the exact one.
#[inline(always)]
fn comes_before(i: (f64, f64, f64), j: (f64, f64, f64)) -> bool {
    let ((pi, xi1, xi2), (pj, xj1, xj2)) = (i, j);
    if pi < pj - NEAR {
        return true;
    }
    if pi > pj + NEAR {
        return false;
    }
    let a = xi1 * xj2;
    let b = xi2 * xj1;
    let exact = (a - b) + (xi1.mul_add(xj2, -a) - xi2.mul_add(xj1, -b));
    exact > 0.0
}

/// The sorted definition's arcs from `bins` pseudo-angle bins (module docs) in O(n + bins):
/// each bin's least and greatest token by [`comes_before`], their atan2 only; inside a bin no gap
/// exceeds theta, so only the gaps between consecutive non-empty bins decide, and an arc's
/// diameter is its greatest angle minus its least (docs/MATH.md §11.2). `None` when a token
/// has no direction (0 or not finite): the sort handles those. Each token's bin is left in
/// `scratch.bin`.
fn binned_arcs(
    tokens: &[f64],
    theta: f64,
    bins: usize,
    scratch: &mut CircleScratch,
) -> Option<Option<Arcs>> {
    let n = tokens.len() / 2;
    let CircleScratch {
        pseudo,
        bin: token_bins,
    } = scratch;
    pseudo.clear();
    pseudo.resize(n, 0.0);
    crate::simd::vectorized(
        #[inline(always)]
        || {
            for (p, x) in pseudo.iter_mut().zip(tokens.chunks_exact(2)) {
                *p = pseudo_angle(x[0], x[1]);
            }
        },
    );
    if !pseudo.iter().all(|p| p.is_finite()) {
        return None;
    }
    let scale = bins as f64 / 4.0;
    let bin = |p: f64| ((p * scale) as usize).min(bins - 1);
    let extremes = crate::simd::vectorized(
        #[inline(always)]
        || BinExtremes::of(tokens, pseudo, bins, bin, token_bins),
    );
    let angle = |k: usize| tokens[2 * k + 1].atan2(tokens[2 * k]);
    let (low, high) = (&extremes.low, &extremes.high);
    let filled: Vec<usize> = (0..bins).filter(|&b| low[b] != usize::MAX).collect();
    let lowest: Vec<f64> = filled.iter().map(|&b| angle(low[b])).collect();
    let highest: Vec<f64> = filled
        .iter()
        .zip(&lowest)
        .map(|(&b, &a)| if high[b] == low[b] { a } else { angle(high[b]) })
        .collect();
    let Some((label, spans)) = arcs_of_bins(&lowest, &highest, theta) else {
        return Some(None);
    };
    let mut arc_of_bin = vec![u32::MAX; bins];
    let mut sizes = vec![0; spans.len()];
    for (&b, &l) in filled.iter().zip(&label) {
        arc_of_bin[b] = l;
        sizes[l as usize] += extremes.count[b];
    }
    Some(Some(Arcs {
        spans,
        sizes,
        arc_of_bin,
    }))
}

/// The arcs of the binned partition: each arc's diameter and size, and each bin's arc.
struct Arcs {
    spans: Vec<f64>,
    sizes: Vec<usize>,
    arc_of_bin: Vec<u32>,
}

impl Arcs {
    /// The arc of the tokens in bin `bin`.
    fn arc(&self, bin: u32) -> usize {
        self.arc_of_bin[bin as usize] as usize
    }
}

/// [`summarise`] of the arcs without listing their members: one pass over the tokens in index
/// order finds each arc's first token and adds its rows by chunks of [`TOKENS_PER_CHUNK`] tokens
/// (each chunk's part from zero, the parts in chunk order), the additions of [`centre_of`], so
/// the same doubles. `token_bins` holds each token's bin.
fn summarise_arcs(tokens: &[f64], arcs: &Arcs, token_bins: &[u32], threshold: f64) -> Clustering {
    let m = arcs.spans.len();
    let mut first = vec![usize::MAX; m];
    let mut sums = vec![[0.0; 2]; m];
    let mut parts = vec![[0.0; 2]; m];
    let mut met = vec![false; m];
    for (c, chunk) in tokens.chunks(2 * TOKENS_PER_CHUNK).enumerate() {
        let offset = c * TOKENS_PER_CHUNK;
        for (i, x) in chunk.chunks_exact(2).enumerate() {
            let a = arcs.arc(token_bins[offset + i]);
            if !met[a] {
                met[a] = true;
                first[a] = first[a].min(offset + i);
            }
            parts[a][0] += x[0];
            parts[a][1] += x[1];
        }
        for a in 0..m {
            if !met[a] {
                continue;
            }
            sums[a][0] += parts[a][0];
            sums[a][1] += parts[a][1];
            (parts[a], met[a]) = ([0.0; 2], false);
        }
    }
    let parts = (0..m)
        .map(|a| {
            let k = first[a];
            Part {
                size: arcs.sizes[a],
                first: k,
                diameter: arcs.spans[a],
                centre: direction_of_sum(sums[a].to_vec(), Some(tokens[2 * k..2 * k + 2].to_vec())),
            }
        })
        .collect();
    clustering_of(parts, threshold, tokens.len() / 2)
}

/// Each bin's token count and least and greatest token ([`comes_before`]; `usize::MAX` for an
/// empty bin).
struct BinExtremes {
    count: Vec<usize>,
    low: Vec<usize>,
    high: Vec<usize>,
}

impl BinExtremes {
    #[inline(always)]
    /// The extremes of `bins` bins, each token's bin written into `token_bins`.
    fn of(
        tokens: &[f64],
        pseudo: &[f64],
        bins: usize,
        bin: impl Fn(f64) -> usize,
        token_bins: &mut Vec<u32>,
    ) -> Self {
        token_bins.clear();
        let mut e = BinExtremes {
            count: vec![0; bins],
            low: vec![usize::MAX; bins],
            high: vec![usize::MAX; bins],
        };
        let key = |k: usize| (pseudo[k], tokens[2 * k], tokens[2 * k + 1]);
        for (k, &p) in pseudo.iter().enumerate() {
            let b = bin(p);
            token_bins.push(b as u32);
            e.count[b] += 1;
            if e.low[b] == usize::MAX {
                (e.low[b], e.high[b]) = (k, k);
            } else if comes_before(key(k), key(e.low[b])) {
                e.low[b] = k;
            } else if comes_before(key(e.high[b]), key(k)) {
                e.high[b] = k;
            }
        }
        e
    }
}

/// The arcs of the non-empty bins in order (their least and greatest angles): each bin's arc and
/// each arc's diameter, `None` when there is no gap wider than theta or an arc is wider than
/// theta. The gap after bin j is the next bin's least angle minus bin j's greatest (the last one
/// wraps round by 2 pi); an arc's span is its greatest angle minus its least, the part after
/// the cut at +-pi giving the greatest of an arc through it.
fn arcs_of_bins(lowest: &[f64], highest: &[f64], theta: f64) -> Option<(Vec<u32>, Vec<f64>)> {
    let m = lowest.len();
    let gap = |j: usize| -> f64 {
        let next = if j + 1 == m {
            lowest[0] + TAU
        } else {
            lowest[j + 1]
        };
        next - highest[j]
    };
    let start = (0..m).find(|&j| gap(j) > theta).map(|j| (j + 1) % m)?;
    let mut label = vec![u32::MAX; m];
    let mut spans = Vec::new();
    let (mut first, mut least, mut greatest) = (start, f64::INFINITY, f64::NEG_INFINITY);
    for step in 0..m {
        let j = (start + step) % m;
        if j == 0 && first != 0 {
            // Through the cut: the arc's greatest angle is after it.
            greatest = f64::NEG_INFINITY;
        }
        if j >= first {
            least = least.min(lowest[j]);
        }
        greatest = greatest.max(highest[j]);
        label[j] = spans.len() as u32;
        if gap(j) > theta {
            let span = arc_span(least, greatest, j < first);
            if span > theta || spans.len() >= u32::MAX as usize - 1 {
                return None;
            }
            spans.push(span);
            (first, least, greatest) = ((j + 1) % m, f64::INFINITY, f64::NEG_INFINITY);
        }
    }
    Some((label, spans))
}

/// The span of an arc from its first angle to its last (in sorted order), `wrapped` when it
/// runs through the cut at +-pi: (last + 2 pi) - first, else last - first.
pub(super) fn arc_span(first: f64, last: f64, wrapped: bool) -> f64 {
    if wrapped {
        (last + TAU) - first
    } else {
        last - first
    }
}

/// The definition: sort the angles, cut after every gap wider than theta (the gap after the
/// last angle wraps around: first + 2 pi - last); each arc is a group, at most theta wide.
fn sorted_angle_groups(angles: &[f64], theta: f64) -> Option<Vec<Group>> {
    let n = angles.len();
    let mut order: Vec<(f64, usize)> = angles.iter().copied().zip(0..).collect();
    order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let gap = |i: usize| -> f64 {
        // The gap after sorted position i (the last one wraps around).
        let next = if i + 1 == n {
            order[0].0 + TAU
        } else {
            order[i + 1].0
        };
        next - order[i].0
    };
    // Start after a gap wider than theta; none means one chain around the whole circle.
    let start = (0..n).find(|&i| gap(i) > theta).map(|i| (i + 1) % n)?;
    let mut groups = Vec::new();
    let mut members = Vec::new();
    let mut first = start;
    for step in 0..n {
        // (start + step) mod n, without a division per token.
        let i = if start + step >= n {
            start + step - n
        } else {
            start + step
        };
        members.push(order[i].1);
        if gap(i) > theta {
            let span = arc_span(order[first].0, order[i].0, i < first);
            if span > theta {
                return None;
            }
            groups.push(Group {
                members: std::mem::take(&mut members),
                diameter: span,
            });
            first = if i + 1 == n { 0 } else { i + 1 };
        }
    }
    Some(groups)
}

/// d >= 3: groups by one leader pass, then verified (module docs).
fn leader_groups(tokens: &[f64], d: usize, theta: f64) -> Option<Vec<Group>> {
    let n = tokens.len() / d;
    let cap = ClusterRule::max_clusters(n);
    let row = |k: usize| &tokens[k * d..(k + 1) * d];
    let mut leaders: Vec<usize> = Vec::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    for k in 0..n {
        match leaders
            .iter()
            .position(|&l| angle_between(row(l), row(k)) <= theta)
        {
            Some(g) => members[g].push(k),
            None => {
                if leaders.len() == cap {
                    return None;
                }
                leaders.push(k);
                members.push(vec![k]);
            }
        }
    }
    let caps: Vec<Cap> = members.iter().map(|m| Cap::of(tokens, d, m)).collect();
    let mut groups = Vec::with_capacity(members.len());
    for (m, cap) in members.into_iter().zip(&caps) {
        let diameter = tight_diameter(tokens, d, &m, cap, theta)?;
        groups.push(Group {
            members: m,
            diameter,
        });
    }
    for a in 0..groups.len() {
        for b in a + 1..groups.len() {
            if !apart(
                tokens,
                d,
                (&groups[a], &caps[a]),
                (&groups[b], &caps[b]),
                theta,
            ) {
                return None;
            }
        }
    }
    Some(groups)
}

/// A group's centre, its radius about the centre and a true pairwise angle (a lower bound of
/// the diameter, at least half of it).
struct Cap {
    centre: Vec<f64>,
    radius: f64,
    farthest_pair: f64,
}

impl Cap {
    fn of(tokens: &[f64], d: usize, members: &[usize]) -> Cap {
        let row = |k: usize| &tokens[k * d..(k + 1) * d];
        let centre = centre_of(tokens, d, members);
        let (far, radius) = members
            .iter()
            .map(|&k| (k, angle_between(row(k), &centre)))
            .fold(
                (members[0], 0.0),
                |best, x| if x.1 > best.1 { x } else { best },
            );
        let farthest_pair = members
            .iter()
            .map(|&k| angle_between(row(k), row(far)))
            .fold(0.0, f64::max);
        Cap {
            centre,
            radius,
            farthest_pair,
        }
    }
}

/// A group's centre c = s / |s| (its first member when s vanishes), with s the sum of its
/// members' rows added by fixed chunks of token indices
/// (2048 tokens, the chunks of every sum over tokens): each chunk's members in the order given,
/// from zero, and the chunks' sums in the order met, from zero (docs/MATH.md §11.5). For
/// members in index order these are the doubles of a pass that sums each chunk apart, on any
/// thread, and adds the chunks' sums in chunk order (as the bisection of plane maps does).
pub fn centre_of(tokens: &[f64], d: usize, members: &[usize]) -> Vec<f64> {
    let row = |k: usize| &tokens[k * d..(k + 1) * d];
    let mut sum = vec![0.0; d];
    let mut chunk_sum = vec![0.0; d];
    let mut chunk = None;
    for &k in members {
        let c = k / TOKENS_PER_CHUNK;
        if chunk != Some(c) {
            // The last chunk's sum, +0 before the first (0 + 0 = 0: no change).
            add_into(&mut sum, &chunk_sum);
            chunk_sum.fill(0.0);
            chunk = Some(c);
        }
        add_into(&mut chunk_sum, row(k));
    }
    add_into(&mut sum, &chunk_sum);
    direction_of_sum(sum, members.first().map(|&k| row(k).to_vec()))
}

/// sum += x, number by number.
fn add_into(sum: &mut [f64], x: &[f64]) {
    for (s, v) in sum.iter_mut().zip(x) {
        *s += v;
    }
}

/// The sum of unit vectors `sum` (added from zero in member order) made unit; `first` (the
/// first vector) when the sum vanishes: the end of [`centre_of`].
pub fn direction_of_sum(sum: Vec<f64>, first: Option<Vec<f64>>) -> Vec<f64> {
    let norm = sum.iter().map(|v| v * v).sum::<f64>().sqrt();
    if norm > 0.0 {
        sum.iter().map(|v| v / norm).collect()
    } else {
        first.unwrap_or(sum)
    }
}

/// The diameter of a group when it is at most theta, else `None` (module docs).
fn tight_diameter(
    tokens: &[f64],
    d: usize,
    members: &[usize],
    cap: &Cap,
    theta: f64,
) -> Option<f64> {
    if cap.farthest_pair > theta {
        return None;
    }
    let m = members.len();
    if 2.0 * cap.radius <= theta && m > EXACT_DIAMETER_TOKENS {
        // Tight by the radius bound; the farthest pair (at least half the diameter) is reported.
        return Some(cap.farthest_pair);
    }
    if m.saturating_mul(m) / 2 <= EXACT_PAIRS {
        let (a, b) = widest_pair(tokens, d, members);
        let widest = angle_between(&tokens[a * d..(a + 1) * d], &tokens[b * d..(b + 1) * d]);
        return (widest <= theta).then_some(widest);
    }
    // Too many pairs: 2 r bounds the diameter; the farthest pair is reported.
    (2.0 * cap.radius <= theta).then_some(cap.farthest_pair)
}

/// The pair of members farthest apart: the largest squared chord |x_a - x_b|^2, which ranks
/// pairs of unit vectors as their angle does, so one angle is taken (for the pair found) instead
/// of one per pair. The pairs are scanned in member order, the first of equal chords kept.
fn widest_pair(tokens: &[f64], d: usize, members: &[usize]) -> (usize, usize) {
    crate::simd::vectorized(
        #[inline(always)]
        || {
            let row = |k: usize| &tokens[k * d..(k + 1) * d];
            let mut best = (0.0, members[0], members[0]);
            let mut consider = |c: f64, a: usize, b: usize| {
                if c > best.0 {
                    best = (c, a, b);
                }
            };
            for (i, &a) in members.iter().enumerate() {
                // Four partners at a time (four independent sums, each in the order of
                // `squared_chord`), the rest one by one: the same doubles, the same first maximum.
                let mut partners = members[i + 1..].chunks_exact(4);
                for b in &mut partners {
                    let c = squared_chords(row(a), [row(b[0]), row(b[1]), row(b[2]), row(b[3])]);
                    for (c, &b) in c.into_iter().zip(b) {
                        consider(c, a, b);
                    }
                }
                for &b in partners.remainder() {
                    consider(squared_chord(row(a), row(b)), a, b);
                }
            }
            (best.1, best.2)
        },
    )
}

/// |x - y|^2, summed in [`crate::simd::LANES`] running sums so that the loop vectorises.
#[inline(always)]
fn squared_chord(x: &[f64], y: &[f64]) -> f64 {
    squared_chords(x, [y])[0]
}

/// [`squared_chord`] of x and each of the `K` rows `ys`, side by side.
#[inline(always)]
fn squared_chords<const K: usize>(x: &[f64], ys: [&[f64]; K]) -> [f64; K] {
    use crate::simd::LANES;
    let mut acc = [[0.0; LANES]; K];
    let body = x.len() - x.len() % LANES;
    for start in (0..body).step_by(LANES) {
        let a = &x[start..start + LANES];
        for (acc, y) in acc.iter_mut().zip(&ys) {
            let b = &y[start..start + LANES];
            for l in 0..LANES {
                acc[l] += (a[l] - b[l]) * (a[l] - b[l]);
            }
        }
    }
    let mut out = [0.0; K];
    for ((o, acc), y) in out.iter_mut().zip(&acc).zip(&ys) {
        let tail: f64 = (x[body..].iter().zip(&y[body..]))
            .map(|(a, b)| (a - b) * (a - b))
            .sum();
        *o = acc.iter().sum::<f64>() + tail;
    }
    out
}

/// Whether every token of one group is more than theta from every token of the other.
fn apart(tokens: &[f64], d: usize, a: (&Group, &Cap), b: (&Group, &Cap), theta: f64) -> bool {
    let centres = angle_between(&a.1.centre, &b.1.centre);
    if centres - a.1.radius - b.1.radius > theta {
        return true;
    }
    if a.0.members.len().saturating_mul(b.0.members.len()) > EXACT_PAIRS {
        return false;
    }
    let row = |k: usize| &tokens[k * d..(k + 1) * d];
    a.0.members.iter().all(|&i| {
        b.0.members
            .iter()
            .all(|&j| angle_between(row(i), row(j)) > theta)
    })
}

/// Puts each group's members in increasing order: nothing to do when they are (the binned
/// partition lists them so), by one pass over the tokens when the groups hold every token once
/// (O(n)), else by sorting.
fn sort_members(groups: &mut [Group], n: usize) {
    if groups
        .iter()
        .all(|g| g.members.windows(2).all(|w| w[0] < w[1]))
    {
        return;
    }
    let total: usize = groups.iter().map(|g| g.members.len()).sum();
    if total != n || groups.len() >= u32::MAX as usize {
        groups.iter_mut().for_each(|g| g.members.sort_unstable());
        return;
    }
    let mut label = vec![u32::MAX; n];
    for (a, g) in groups.iter().enumerate() {
        for &k in &g.members {
            label[k] = a as u32;
        }
    }
    if label.contains(&u32::MAX) {
        groups.iter_mut().for_each(|g| g.members.sort_unstable());
        return;
    }
    groups.iter_mut().for_each(|g| g.members.clear());
    for (k, &a) in label.iter().enumerate() {
        groups[a as usize].members.push(k);
    }
}

/// Sizes, centres, diameter and separation of verified groups, largest first (ties: the group
/// whose first token comes first).
fn summarise(tokens: &[f64], d: usize, mut groups: Vec<Group>, threshold: f64) -> Clustering {
    let n = tokens.len() / d;
    sort_members(&mut groups, n);
    let parts = groups
        .iter()
        .map(|g| Part {
            size: g.members.len(),
            first: g.members[0],
            diameter: g.diameter,
            centre: centre_of(tokens, d, &g.members),
        })
        .collect();
    clustering_of(parts, threshold, n)
}

/// A verified group's summary: its size, its first token, its diameter and its centre.
struct Part {
    size: usize,
    first: usize,
    diameter: f64,
    centre: Vec<f64>,
}

/// The clustering of verified groups, largest first (ties: the group whose first token comes
/// first).
fn clustering_of(mut parts: Vec<Part>, threshold: f64, n: usize) -> Clustering {
    parts.sort_by(|a, b| b.size.cmp(&a.size).then(a.first.cmp(&b.first)));
    let diameter = parts.iter().map(|p| p.diameter).reduce(f64::max);
    let sizes = parts.iter().map(|p| p.size).collect();
    let centres: Vec<Vec<f64>> = parts.into_iter().map(|p| p.centre).collect();
    Clustering {
        count: centres.len(),
        sizes,
        diameter,
        separation: smallest_separation(&centres),
        centres,
        threshold,
        n,
    }
}

/// The smallest angle between two of the centres; `None` for fewer than two.
pub fn smallest_separation(centres: &[Vec<f64>]) -> Option<f64> {
    let mut best: Option<f64> = None;
    for (i, a) in centres.iter().enumerate() {
        for b in &centres[i + 1..] {
            let s = angle_between(a, b);
            best = Some(best.map_or(s, |x| x.min(s)));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, StandardNormal};

    /// Single linkage by union-find over all pairs, with the diameter of each component:
    /// the count of the module's rule computed the slow, independent way.
    fn single_linkage_count(tokens: &[f64], d: usize, theta: f64) -> usize {
        let n = tokens.len() / d;
        let row = |k: usize| &tokens[k * d..(k + 1) * d];
        let angle = |i: usize, j: usize| {
            let c: f64 = row(i).iter().zip(row(j)).map(|(a, b)| a * b).sum();
            c.clamp(-1.0, 1.0).acos()
        };
        let mut parent: Vec<usize> = (0..n).collect();
        fn root(p: &mut [usize], mut i: usize) -> usize {
            while p[i] != i {
                p[i] = p[p[i]];
                i = p[i];
            }
            i
        }
        for i in 0..n {
            for j in i + 1..n {
                if angle(i, j) <= theta {
                    let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                    parent[a] = b;
                }
            }
        }
        let roots: Vec<usize> = (0..n).map(|i| root(&mut parent, i)).collect();
        for i in 0..n {
            for j in i + 1..n {
                if roots[i] == roots[j] && angle(i, j) > theta {
                    return 0;
                }
            }
        }
        let mut distinct = roots.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() > ClusterRule::max_clusters(n) {
            0
        } else {
            distinct.len()
        }
    }

    /// `k` clusters of random spread around random centres in d dimensions.
    fn cloud(rng: &mut ChaCha8Rng, n: usize, d: usize, k: usize, spread: f64) -> Vec<f64> {
        let centres: Vec<Vec<f64>> = (0..k).map(|_| unit(rng, d, 1.0, None)).collect();
        (0..n)
            .flat_map(|i| unit(rng, d, spread, Some(&centres[i % k])))
            .collect()
    }

    fn unit(rng: &mut ChaCha8Rng, d: usize, spread: f64, around: Option<&[f64]>) -> Vec<f64> {
        let v: Vec<f64> = (0..d)
            .map(|c| {
                let g: f64 = StandardNormal.sample(rng);
                around.map_or(g, |a| a[c]) + spread * g * around.map_or(0.0, |_| 1.0)
            })
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        v.iter().map(|x| x / norm).collect()
    }

    #[test]
    fn agrees_with_single_linkage_on_random_configurations() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut clustered = 0;
        for trial in 0..300 {
            let d = 2 + trial % 4;
            let k = 1 + trial % 5;
            let n = 20 + (trial * 7) % 60;
            let spread = [0.0, 0.005, 0.02, 0.05, 0.2][trial % 5];
            let tokens = cloud(&mut rng, n, d, k, spread);
            let theta = [0.1, 0.3][trial % 2];
            let c = detect_clusters(&tokens, d, ClusterRule::new(theta).unwrap());
            assert_eq!(
                c.count,
                single_linkage_count(&tokens, d, theta),
                "trial {trial}: d = {d}, k = {k}, n = {n}, spread {spread}"
            );
            assert_eq!(
                c.sizes.iter().sum::<usize>(),
                if c.count > 0 { n } else { 0 }
            );
            clustered += (c.count > 0) as usize;
        }
        assert!(clustered > 50 && clustered < 290, "{clustered}");
    }

    /// Groups as (members ascending, diameter's bits), ordered by their first member.
    fn canonical(groups: Option<Vec<Group>>) -> Option<Vec<(Vec<usize>, u64)>> {
        let mut out: Vec<(Vec<usize>, u64)> = groups?
            .into_iter()
            .map(|mut g| {
                g.members.sort_unstable();
                (g.members, g.diameter.to_bits())
            })
            .collect();
        out.sort();
        Some(out)
    }

    /// k arcs of angles in [-pi, pi) of width `width`, the first ending at the cut when
    /// `across` (so it runs through +-pi), and the last arc's first angle `after` the previous
    /// arc's last plus `gap` (the gap near the threshold, to the ulp).
    fn arcs(rng: &mut ChaCha8Rng, n: usize, k: usize, width: f64, gap: f64) -> Vec<f64> {
        use rand::RngExt;
        let wrap = |a: f64| (a + PI).rem_euclid(TAU) - PI;
        let centres: Vec<f64> = (0..k).map(|_| rng.random_range(-PI..PI)).collect();
        let mut angles: Vec<f64> = (0..n)
            .map(|i| wrap(centres[i % k] + width * (rng.random::<f64>() - 0.5)))
            .collect();
        // One more arc of two angles `gap` apart at the end of the first arc.
        let last = angles
            .iter()
            .step_by(k)
            .fold(f64::NEG_INFINITY, |m, &a| m.max(a));
        if last.is_finite() && last + gap < PI {
            angles.push(last + gap);
        }
        angles
    }

    /// Unit tokens at the given angles.
    fn on_circle(angles: &[f64]) -> Vec<f64> {
        angles.iter().flat_map(|a| [a.cos(), a.sin()]).collect()
    }

    /// The definition: the sorted atan2 of the tokens.
    fn sorted_groups(tokens: &[f64], theta: f64) -> Option<Vec<(Vec<usize>, u64)>> {
        canonical(sorted_angle_groups(&circle_angles(tokens), theta))
    }

    /// The binned partition as groups (members and diameter), and its summary against the
    /// sorted groups' [`summarise`] (the same doubles).
    fn binned(tokens: &[f64], theta: f64, bins: usize) -> Option<Vec<(Vec<usize>, u64)>> {
        let mut scratch = CircleScratch::default();
        let arcs =
            binned_arcs(tokens, theta, bins, &mut scratch).expect("every token has a direction")?;
        let mut groups: Vec<Group> = arcs
            .spans
            .iter()
            .map(|&diameter| Group {
                members: Vec::new(),
                diameter,
            })
            .collect();
        for k in 0..tokens.len() / 2 {
            groups[arcs.arc(scratch.bin[k])].members.push(k);
        }
        let sizes: Vec<usize> = groups.iter().map(|g| g.members.len()).collect();
        assert_eq!(sizes, arcs.sizes);
        let sorted = sorted_angle_groups(&circle_angles(tokens), theta).expect("the same arcs");
        assert_eq!(
            summarise_arcs(tokens, &arcs, &scratch.bin, theta),
            summarise(tokens, 2, sorted, theta)
        );
        canonical(Some(groups))
    }

    #[test]
    fn binned_partition_is_the_sorted_one() {
        let mut rng = ChaCha8Rng::seed_from_u64(38);
        let (mut clustered, mut wrapped) = (0, 0);
        for trial in 0..600 {
            let theta = [0.1, 0.3, 0.02, 1.0][trial % 4];
            let k = 1 + trial % 7;
            // A few trials over more than one chunk of TOKENS_PER_CHUNK tokens (the centres'
            // sums by chunks).
            let n = if trial % 40 == 1 {
                5000
            } else {
                1 + (trial * 13) % 400
            };
            let width = [0.0, 0.3, 0.9, 1.0, 1.5, 8.0][trial % 6] * theta;
            // Gaps at the threshold: exactly, and one or two ulps either side (before the
            // tokens' rounding, so on both sides of theta after it).
            let ulp = f64::EPSILON * 4.0;
            let gap = theta + [0.0, -ulp, ulp, -2.0 * ulp, 2.0 * ulp, 0.5][trial % 6];
            let mut angles = arcs(&mut rng, n, k, width, gap);
            if trial % 3 == 0 {
                // An arc through the cut: angles near -pi and near pi.
                let m = angles.len();
                for a in angles.iter_mut().take(m / 2).step_by(2) {
                    *a = (PI - 0.4 * theta * (*a + PI) / TAU).min(PI);
                }
                for a in angles.iter_mut().skip(m / 2).step_by(3) {
                    *a = -PI + 0.4 * theta * (*a + PI) / TAU;
                }
            }
            let tokens = on_circle(&angles);
            let sorted = sorted_groups(&tokens, theta);
            let bins = pseudo_angle_bins(theta).unwrap();
            for b in [bins, 3 * bins + 1] {
                assert_eq!(
                    binned(&tokens, theta, b),
                    sorted,
                    "trial {trial}: theta {theta}, bins {b}"
                );
            }
            clustered += sorted.is_some() as usize;
            wrapped += (trial % 3 == 0 && sorted.is_some()) as usize;
        }
        assert!(clustered > 100 && clustered < 550, "{clustered}");
        assert!(wrapped > 30, "{wrapped}");
    }

    #[test]
    fn collapsed_clusters_are_ordered_by_the_exact_cross_product() {
        // Tokens a few ulps apart in angle (a cluster that has converged): their pseudo-angles
        // tie within their rounding, so the cross product orders them; the extremes and the
        // diameter are still the sorted atan2's.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for trial in 0..200 {
            use rand::RngExt;
            let centres = [rng.random_range(-PI..PI), rng.random_range(-PI..PI)];
            let tokens: Vec<f64> = (0..300)
                .flat_map(|k| {
                    let c: f64 = centres[k % 2];
                    let (x, y) = (c.cos(), c.sin());
                    // Nudge each coordinate by up to 4 ulps (then the token is unit to rounding).
                    let mut nudge = |v: f64| {
                        f64::from_bits((v.to_bits() as i64 + rng.random_range(-4..=4)) as u64)
                    };
                    [nudge(x), nudge(y)]
                })
                .collect();
            let theta = [0.1, 1e-9][trial % 2];
            let Some(bins) = pseudo_angle_bins(theta).filter(|&b| b < 1 << 28) else {
                continue;
            };
            assert_eq!(
                binned(&tokens, theta, bins),
                sorted_groups(&tokens, theta),
                "trial {trial}"
            );
        }
    }

    #[test]
    fn pseudo_angles_increase_with_the_angle_and_place_the_signed_zeros_as_atan2() {
        let mut last = f64::NEG_INFINITY;
        for i in 0..=4000 {
            let a = -PI + TAU * i as f64 / 4000.0;
            let p = pseudo_angle(a.cos(), a.sin());
            assert!(
                p >= last - 1e-15 && (0.0..=4.0).contains(&p),
                "{a}: {p} after {last}"
            );
            last = p;
        }
        for (x1, x2, p) in [
            (-1.0, -0.0, 0.0),
            (-0.0, -1.0, 1.0),
            (1.0, -0.0, 2.0),
            (1.0, 0.0, 2.0),
            (0.0, 1.0, 3.0),
            (-1.0, 0.0, 4.0),
        ] {
            assert_eq!(pseudo_angle(x1, x2), p, "({x1}, {x2})");
        }
    }

    #[test]
    fn tokens_without_a_direction_or_at_the_extremes_of_the_doubles_go_through() {
        // A zero row or a non-finite one sends the circle to the sort; subnormal, huge and
        // signed-zero rows stay binned; nothing panics and the answer is the definition's.
        let base = on_circle(&[0.3, 0.3001, 2.0, 2.0002]);
        let mut cases: Vec<(Vec<f64>, bool)> = Vec::new();
        for (row, binned) in [
            ([0.0, 0.0], false),
            ([f64::NAN, 1.0], false),
            ([f64::INFINITY, f64::INFINITY], false),
            ([1e-310, 3e-310], true),
            ([-0.0, -1.0], true),
            ([-1.0, -0.0], true),
            ([-1.0, 0.0], true),
            ([1e300, -1e300], true),
        ] {
            let mut tokens = base.clone();
            tokens.extend(row);
            cases.push((tokens, binned));
        }
        for (tokens, binned) in cases {
            let bins = pseudo_angle_bins(0.1).unwrap();
            let arcs = binned_arcs(&tokens, 0.1, bins, &mut CircleScratch::default());
            assert_eq!(arcs.is_some(), binned, "{:?}", &tokens[8..]);
            let found = circle_clustering(&tokens, 0.1, &mut CircleScratch::default());
            let expected = match sorted_angle_groups(&circle_angles(&tokens), 0.1) {
                Some(groups) if groups.len() <= ClusterRule::max_clusters(5) => {
                    summarise(&tokens, 2, groups, 0.1)
                }
                _ => Clustering::not_clustered(5, 0.1),
            };
            if tokens.iter().all(|v| v.is_finite()) {
                assert_eq!(found, expected, "{:?}", &tokens[8..]);
            } else {
                assert_eq!(found.count, expected.count);
            }
        }
    }

    #[test]
    fn a_gap_equal_to_the_threshold_links() {
        // theta equal to the computed gap links; the next double below it splits.
        for (a, b) in [(0.5, 0.625), (PI - 0.0625, -PI + 0.03125)] {
            let tokens = on_circle(&[a, b]);
            let angles = circle_angles(&tokens);
            let gap = if angles[1] > angles[0] {
                angles[1] - angles[0]
            } else {
                (angles[1] + TAU) - angles[0]
            };
            let bins = pseudo_angle_bins(gap).unwrap();
            let expected = Some(vec![(vec![0, 1], gap.to_bits())]);
            assert_eq!(sorted_groups(&tokens, gap), expected);
            assert_eq!(binned(&tokens, gap, bins), expected);
            let below = f64::from_bits(gap.to_bits() - 1);
            for groups in [sorted_groups(&tokens, below), binned(&tokens, below, bins)] {
                let sizes: Vec<usize> = groups.unwrap().iter().map(|g| g.0.len()).collect();
                assert_eq!(sizes, vec![1, 1]);
            }
        }
    }

    #[test]
    fn the_leader_pass_matches_the_sort_on_the_circle() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for trial in 0..200 {
            let tokens = cloud(&mut rng, 50, 2, 1 + trial % 6, [0.0, 0.01, 0.04][trial % 3]);
            let count = circle_clustering(&tokens, 0.1, &mut CircleScratch::default()).count;
            let sorted = (count > 0).then_some(count);
            let leaders = leader_groups(&tokens, 2, 0.1).map(|g| g.len());
            assert_eq!(sorted.filter(|&k| k <= 8), leaders.filter(|&k| k <= 8));
        }
    }

    #[test]
    fn uniform_tokens_are_not_clustered_and_point_masses_are() {
        let n = 2000;
        let circle: Vec<f64> = (0..n)
            .flat_map(|k| {
                let t = 2.0 * PI * k as f64 / n as f64;
                [t.cos(), t.sin()]
            })
            .collect();
        assert_eq!(detect_clusters(&circle, 2, ClusterRule::default()).count, 0);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let sphere: Vec<f64> = (0..n).flat_map(|_| unit(&mut rng, 5, 1.0, None)).collect();
        let c = detect_clusters(&sphere, 5, ClusterRule::default());
        assert_eq!((c.count, c.diameter, c.largest_fraction()), (0, None, None));
        // Three exact points with 5, 3, 2 copies: diameters 0, separation 2 pi / 3.
        let points: Vec<f64> = [0usize, 0, 0, 0, 0, 1, 1, 1, 2, 2]
            .iter()
            .flat_map(|&a| {
                let t = 2.0 * PI * a as f64 / 3.0;
                [t.cos(), 0.0, t.sin()]
            })
            .collect();
        let c = detect_clusters(&points, 3, ClusterRule::default());
        assert_eq!((c.count, c.sizes.clone()), (3, vec![5, 3, 2]));
        assert_eq!(c.diameter, Some(0.0));
        assert!((c.separation.unwrap() - 2.0 * PI / 3.0).abs() < 1e-12);
        assert_eq!(c.largest_fraction(), Some(0.5));
    }

    #[test]
    fn weighted_points_count_as_their_repeated_tokens() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for trial in 0..100 {
            let d = 2 + trial % 3;
            let points = cloud(&mut rng, 6, d, 1 + trial % 4, [0.0, 0.03, 0.08][trial % 3]);
            let counts = [5, 1, 3, 2, 4, 1];
            let tokens: Vec<f64> = points
                .chunks_exact(d)
                .zip(counts)
                .flat_map(|(p, m)| std::iter::repeat_n(p, m).flatten().copied())
                .collect();
            let rule = ClusterRule::default();
            let a = detect_points(&points, &counts, d, rule);
            let b = detect_clusters(&tokens, d, rule);
            assert_eq!((a.count, &a.sizes), (b.count, &b.sizes), "trial {trial}");
        }
    }

    #[test]
    fn centres_by_chunks_are_within_their_rounding_bound_of_the_exact_sum() {
        // The members' sum by compensated (Neumaier) summation is exact to a few eps; the
        // chunked sum is off by at most (members per chunk + chunks) eps sum |y| (MATH §11.5).
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let d = 3;
        let n = 150_001;
        let tokens = cloud(&mut rng, n, d, 1, 0.3);
        let members: Vec<usize> = (0..n).filter(|k| k % 3 != 1).collect();
        let centre = centre_of(&tokens, d, &members);
        let mut exact = vec![0.0; d];
        let mut bound = vec![0.0; d];
        for c in 0..d {
            let (mut sum, mut carry) = (0.0_f64, 0.0_f64);
            for &k in &members {
                let v = tokens[k * d + c];
                let t = sum + v;
                carry += if sum.abs() >= v.abs() {
                    (sum - t) + v
                } else {
                    (v - t) + sum
                };
                sum = t;
                bound[c] += v.abs();
            }
            exact[c] = sum + carry;
        }
        let size = exact.iter().map(|v| v * v).sum::<f64>().sqrt();
        let chunks = n.div_ceil(TOKENS_PER_CHUNK) as f64;
        for c in 0..d {
            let allowed = (TOKENS_PER_CHUNK as f64 + chunks + 4.0) * f64::EPSILON * bound[c] / size
                + 4.0 * f64::EPSILON;
            let err = (centre[c] - exact[c] / size).abs();
            assert!(err <= allowed, "component {c}: {err:e} > {allowed:e}");
        }
    }

    #[test]
    fn angles_are_exact_to_rounding_from_zero_to_antipodal() {
        // y is x turned by t in the plane of x and a unit u orthogonal to it, so the angle is t
        // (to the rounding of y's entries, a few 1e-16): near pi the chord form alone is off
        // by up to the square root of a rounding, some 1e-8.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for d in [2, 3, 7] {
            for _ in 0..20 {
                let x = unit(&mut rng, d, 1.0, None);
                let w = unit(&mut rng, d, 1.0, None);
                let along: f64 = x.iter().zip(&w).map(|(a, b)| a * b).sum();
                let u: Vec<f64> = w.iter().zip(&x).map(|(b, a)| b - along * a).collect();
                let size = u.iter().map(|v| v * v).sum::<f64>().sqrt();
                let u: Vec<f64> = u.iter().map(|v| v / size).collect();
                for k in 1..=13 {
                    let small = 10f64.powi(-k);
                    for t in [small, std::f64::consts::FRAC_PI_2 + small, PI - small] {
                        let y: Vec<f64> = x
                            .iter()
                            .zip(&u)
                            .map(|(a, b)| t.cos() * a + t.sin() * b)
                            .collect();
                        let err = (angle_between(&x, &y) - t).abs();
                        assert!(err <= 1e-15 * t.max(1.0), "d {d} t {t}: off by {err:e}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_threshold_must_be_an_angle_between_zero_and_pi() {
        assert!(ClusterRule::new(0.0).is_none());
        assert!(ClusterRule::new(PI).is_none());
        assert!(ClusterRule::new(f64::NAN).is_none());
        assert!(ClusterRule::new(0.5).is_some());
        assert!(ClusterRule::new(1e-300).is_none());
        assert!(ClusterRule::new(MIN_THRESHOLD).is_some());
    }

    #[test]
    fn the_widest_chord_is_the_widest_angle() {
        // The diameter of a group up to EXACT_DIAMETER_TOKENS tokens, found by squared chords,
        // against the largest of every pair's angle; spreads from 1e-12 to beyond theta.
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for trial in 0..120 {
            let d = [2, 3, 7, 100][trial % 4];
            let m = [2, 3, 17, 256][(trial / 4) % 4];
            let spread = [1e-12, 1e-7, 1e-3, 0.02, 0.2][(trial / 16) % 5];
            let tokens = cloud(&mut rng, m, d, 1, spread);
            let members: Vec<usize> = (0..m).collect();
            let row = |k: usize| &tokens[k * d..(k + 1) * d];
            let mut exact: f64 = 0.0;
            for a in 0..m {
                for b in a + 1..m {
                    exact = exact.max(angle_between(row(a), row(b)));
                }
            }
            let theta = 0.1;
            let cap = Cap::of(&tokens, d, &members);
            let found = tight_diameter(&tokens, d, &members, &cap, theta);
            if exact <= theta {
                let found = found.unwrap_or(f64::NAN);
                assert!(
                    (found - exact).abs() <= 4.0 * f64::EPSILON * exact,
                    "trial {trial}: d = {d}, m = {m}: {found} against {exact}"
                );
            } else {
                assert!(found.is_none(), "trial {trial}: {exact} > theta");
            }
        }
    }

    #[test]
    fn the_widest_pair_four_at_a_time_is_the_pair_by_pair_one() {
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        for trial in 0..40 {
            let (d, m) = ([3, 9, 100][trial % 3], [2, 5, 31, 200][trial % 4]);
            let tokens = cloud(&mut rng, m, d, 1, [1e-12, 1e-3][trial % 2]);
            let members: Vec<usize> = (0..m).collect();
            let row = |k: usize| &tokens[k * d..(k + 1) * d];
            let mut best = (0.0, 0, 0);
            for a in 0..m {
                for b in a + 1..m {
                    let c: f64 = row(a)
                        .iter()
                        .zip(row(b))
                        .map(|(x, y)| (x - y) * (x - y))
                        .sum();
                    if c > best.0 {
                        best = (c, a, b);
                    }
                }
            }
            let (a, b) = widest_pair(&tokens, d, &members);
            let found = squared_chord(row(a), row(b));
            assert!((found - best.0).abs() <= 1e-15 * best.0, "trial {trial}");
            let (four, one) = (
                squared_chords(row(0), [row(m - 1); 4])[3],
                squared_chord(row(0), row(m - 1)),
            );
            assert_eq!(four.to_bits(), one.to_bits());
        }
    }

    #[test]
    fn tiny_diameters_are_resolved() {
        let eps: f64 = 1e-9;
        let tokens = [1.0, 0.0, 0.0, eps.cos(), eps.sin(), 0.0];
        let c = detect_clusters(&tokens, 3, ClusterRule::default());
        assert_eq!(c.count, 1);
        assert!((c.diameter.unwrap() - eps).abs() < 1e-15);
    }
}
