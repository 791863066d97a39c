//! The circle's partition into tight arcs by bisection along the start tokens' order
//! (docs/MATH.md §11.3, §11.4).
//!
//! The group model's plane tokens are y_k = P x_k / |P x_k| with det P > 0: an increasing map of
//! the circle. Sorted once by their start angle atan2(x_k2, x_k1), the tokens' angles a_k at any
//! later time go once round the circle in that order, up to rounding:
//!
//! ```text
//! positions p = 0 .. n-1 (token perm[p]),  step(p, q) = a_q - a_p, plus 2 pi when below -delta,
//! step(p, q) >= -delta for p < q,   delta = 64 eps (K + 2),   K = |P|_F^2 / det P >= cond P,
//! sum of the steps once round the positions = 2 pi.
//! ```
//!
//! A range of positions whose end-to-end step is at most theta - 2 delta holds no gap wider
//! than theta of the sorted angles; two neighbouring positions more than theta + 2 delta apart
//! are such a gap. Bisection finds every gap with O(k log n) angles for k tight clusters; an
//! arc's first and last angle (the doubles the sorted definition subtracts for its diameter)
//! are among the tokens from each end up to the first one a local bound beyond the extreme
//! angle seen so far. Near theta and at the arcs' ends a bound local to the arc replaces delta ([`Bound::over`]: Q = |adj(P) y|^2 at its largest over
//! the arc's images in place of its worst case K). Whatever the bounds do not decide (a gap
//! within 2 delta of theta, too many angles) is left to the pass over every token.
//!
//! Past cond P of some 1e13 the global bound exceeds 1/2 and the image side has nothing to
//! say; the start side ([`super::start_bound`], docs/MATH.md §11.4) bounds each token by its own
//! stretch |P x| / |x|, and the arcs' cuts are then checked on their extremes. Both bounds are
//! valid, so the bisection takes the smaller wherever it has both.

use std::f64::consts::{FRAC_PI_2, PI, TAU};

use super::clusters::{arc_span, ClusterRule};
pub use super::start_bound::step;
use super::start_bound::{arc_ends, arc_extremes, Reading, StartBound};

/// The start tokens of a d = 2 model sorted by angle: position p holds token `perm[p]`, token k
/// sits at position `inv[k]`.
#[derive(Debug, Clone)]
pub struct CircleOrder {
    perm: Vec<u32>,
    inv: Vec<u32>,
}

impl CircleOrder {
    /// The order of the start tokens (n x 2 row-major) by atan2(x_2, x_1), ties by index;
    /// `None` when a token is zero or not finite, or there are 2^32 tokens or more.
    pub fn of(tokens: &[f64]) -> Option<Self> {
        use rayon::prelude::*;
        let n = tokens.len() / 2;
        if n >= u32::MAX as usize {
            return None;
        }
        let keyed: Option<Vec<(f64, u32)>> = tokens
            .par_chunks_exact(2)
            .enumerate()
            .map(|(k, x)| {
                let usable = x[0].is_finite() && x[1].is_finite() && x[0].hypot(x[1]) > 0.0;
                usable.then(|| (x[1].atan2(x[0]), k as u32))
            })
            .collect();
        let mut keyed = keyed?;
        keyed.par_sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let perm: Vec<u32> = keyed.into_iter().map(|(_, k)| k).collect();
        let mut inv = vec![0u32; n];
        for (p, &k) in perm.iter().enumerate() {
            inv[k as usize] = p as u32;
        }
        Some(CircleOrder { perm, inv })
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.perm.len()
    }

    /// Whether there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.perm.is_empty()
    }

    /// The token at position p.
    pub fn token(&self, p: usize) -> usize {
        self.perm[p] as usize
    }

    /// The position of token k.
    pub fn position(&self, k: usize) -> usize {
        self.inv[k] as usize
    }

    /// Bytes held per token.
    pub const BYTES_PER_TOKEN: usize = 8;
}

/// delta = 64 eps (K + 2) with K = |P|_F^2 / det P (P row-major): the largest backward step of
/// the computed angles along the start order (module docs; docs/MATH.md §11.3); `None` unless
/// det P > 0 and every number is finite.
pub fn rounding_bound(p: &[f64; 4]) -> Option<f64> {
    let det = p[0] * p[3] - p[1] * p[2];
    let frobenius: f64 = p.iter().map(|v| v * v).sum();
    let k = frobenius / det;
    let delta = 64.0 * f64::EPSILON * (k + 2.0);
    (det > 0.0 && delta.is_finite()).then_some(delta)
}

/// The rounding bound of a plane map P: [`rounding_bound`] everywhere, and a smaller one for
/// the tokens whose images lie on a short arc (docs/MATH.md §11.3).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// delta of [`rounding_bound`].
    pub global: f64,
    det: f64,
    frobenius: f64,
    /// Q(phi) = |adj(P) (cos phi, sin phi)|^2 = q0 + q1 cos 2 phi + q2 sin 2 phi.
    q: [f64; 3],
}

impl Bound {
    /// The bounds of P (row-major); `None` as for [`rounding_bound`].
    pub fn of(p: &[f64; 4]) -> Option<Self> {
        let global = rounding_bound(p)?;
        let sq: f64 = p.iter().map(|v| v * v).sum();
        let q = [
            sq / 2.0,
            (p[3] * p[3] + p[2] * p[2] - p[1] * p[1] - p[0] * p[0]) / 2.0,
            -(p[3] * p[1] + p[0] * p[2]),
        ];
        Some(Bound {
            global,
            det: p[0] * p[3] - p[1] * p[2],
            frobenius: sq.sqrt(),
            q,
        })
    }

    /// The largest Q over the arc [lo, hi] (hi - lo < pi), with a relative margin for its
    /// rounding.
    fn q_max(&self, lo: f64, hi: f64) -> f64 {
        let [q0, q1, q2] = self.q;
        let peak = q0 + q1.hypot(q2);
        if !(hi - lo).is_finite() || hi - lo >= PI {
            return peak;
        }
        let top = 0.5 * q2.atan2(q1);
        let q = |t: f64| q0 + q1 * (2.0 * t).cos() + q2 * (2.0 * t).sin();
        let inside = (top - lo).rem_euclid(PI) <= hi - lo;
        let m = if inside { peak } else { q(lo).max(q(hi)) };
        (m * (1.0 + 1e-9)).min(peak)
    }

    /// A bound for tokens whose computed angles lie in [lo - global, hi + global] (hi >= lo):
    /// 64 eps (|P|_F sqrt(Q) / det + 2 + Q / det) with Q the largest over the arc of their exact
    /// images, narrowed from the global bound while it shrinks (at most 64 times); never
    /// above it.
    pub fn over(&self, lo: f64, hi: f64) -> f64 {
        let mut delta = self.global;
        for _ in 0..NARROWINGS {
            let q = self.q_max(lo - 2.0 * delta, hi + 2.0 * delta);
            let local =
                64.0 * f64::EPSILON * (self.frobenius * q.sqrt() / self.det + 2.0 + q / self.det);
            if local.is_nan() || local >= delta {
                break;
            }
            let slowing = local > 0.9 * delta;
            delta = local;
            // Near its floor (or at a global bound near 0.5) a narrowing gains little.
            if slowing {
                break;
            }
        }
        delta
    }
}

/// The most narrowings of [`Bound::over`]: each multiplies the bound by about 2 delta / (64 eps)
/// times 64 eps = 2 delta (the global one), so at delta = 0.2 some 40 reach the rounding floor.
const NARROWINGS: usize = 64;

/// The tight arcs of one sample as ranges of positions of a [`CircleOrder`].
#[derive(Debug, Clone, PartialEq)]
pub struct Arcs {
    /// The first position of each arc, ascending; arc i runs to `starts[i + 1] - 1`, the last
    /// one round to `starts[0] - 1`.
    pub starts: Vec<usize>,
    /// Each arc's diameter (the sorted definition's last angle minus its first, to the bit).
    pub diameters: Vec<f64>,
    /// Number of positions.
    pub n: usize,
}

impl Arcs {
    /// Number of tokens of arc i.
    pub fn size(&self, i: usize) -> usize {
        let end = self
            .starts
            .get(i + 1)
            .copied()
            .unwrap_or(self.starts[0] + self.n);
        end - self.starts[i]
    }

    /// The arc that holds position p.
    pub fn arc_of(&self, p: usize) -> usize {
        // Before the first start: the last arc, round the cycle (no division: a hot loop).
        match self.starts.partition_point(|&s| s <= p) {
            0 => self.starts.len() - 1,
            i => i - 1,
        }
    }
}

/// What the bisection decided about one sample.
#[derive(Debug, Clone, PartialEq)]
pub enum Partition {
    /// Not clustered: no gap wider than theta, an arc wider than theta, or too many arcs.
    NotClustered,
    /// The tight arcs.
    Arcs(Arcs),
}

/// The largest global bound tried: a step read within it of zero is taken as a backward step
/// (a whole turn short is caught by the total); beyond it the map is too far from conformal.
pub const MAX_GLOBAL_BOUND: f64 = 0.5;

/// A piece of the bisection: positions i < j (j = n is position 0 again) and their step;
/// `cut` when i, j are neighbours more than theta + 2 delta apart.
struct Piece {
    i: usize,
    step: f64,
    cut: bool,
    /// The rounding bound of the piece's tokens (local where it was narrowed).
    bound: f64,
}

/// Readings of positions, counted against a budget.
struct Angles<'f> {
    read: &'f mut dyn FnMut(usize) -> Reading,
    left: usize,
}

impl Angles<'_> {
    fn at(&mut self, p: usize) -> Option<Reading> {
        self.left = self.left.checked_sub(1)?;
        let r = (self.read)(p);
        r.angle.is_finite().then_some(r)
    }
}

/// The bounds the bisection has: the image side's while its global bound is below
/// [`MAX_GLOBAL_BOUND`], and the start side's (docs/MATH.md §11.4) always.
pub struct Bounds {
    /// The image-side bound, when usable.
    pub image: Option<Bound>,
    /// The start-side bound.
    pub start: StartBound,
}

impl Bounds {
    /// The bounds of the increasing map P (row-major); `None` when the start side has none.
    pub fn of(p: &[f64; 4]) -> Option<Self> {
        let image = Bound::of(p).filter(|b| (0.0..MAX_GLOBAL_BOUND).contains(&b.global));
        Some(Bounds {
            image,
            start: StartBound::of(p)?,
        })
    }

    /// The largest backward step from position i to a later position j.
    pub fn pair(&self, i: &Reading, j: &Reading) -> f64 {
        let start = self.start.point(i) + self.start.point(j);
        self.image.map_or(start, |b| b.global.min(start))
    }

    /// delta of the tokens of a range from i to j (their angles within [a_i - delta, a_j +
    /// delta]), its step s, narrowed on the image side when `near` theta.
    pub fn range(&self, i: &Reading, j: &Reading, s: f64, near: bool) -> f64 {
        let start = 2.0 * self.start.range(i, j);
        let image = self.image.map(|b| {
            if near {
                b.over(i.angle, i.angle + s)
            } else {
                b.global
            }
        });
        image.map_or(start, |b| b.min(start))
    }
}

/// The partition of n tokens into tight arcs under `rule`, from the readings of positions of
/// the start order (`read(p)`: the sample's token at position p, its atan2 as the pass over the
/// tokens computes it, with its start token's angle and stretch), with at most `budget`
/// readings; `None` when the bounds do not decide or the budget runs out (then the pass over
/// the tokens must run). Without the image-side bound the arcs are decided from the start side
/// and their gaps checked on the extremes found (docs/MATH.md §11.4).
pub fn partition(
    n: usize,
    rule: ClusterRule,
    bounds: &Bounds,
    budget: usize,
    read: &mut dyn FnMut(usize) -> Reading,
) -> Option<Partition> {
    let theta = rule.threshold;
    if n < 2 {
        return None;
    }
    let mut angles = Angles { read, left: budget };
    let pieces = bisect(n, theta, bounds, &mut angles)?;
    // Once round: the steps add up to 2 pi (a piece read a turn short shows here).
    let total: f64 = pieces.iter().map(|p| p.step).sum();
    if !(PI..3.0 * PI).contains(&total) {
        return None;
    }
    let cuts: Vec<usize> = pieces.iter().filter(|p| p.cut).map(|p| p.i).collect();
    if cuts.is_empty() {
        return Some(Partition::NotClustered);
    }
    if cuts.len() > ClusterRule::max_clusters(n) {
        // Cuts from the start side are checked only on the arcs' extremes.
        return bounds.image.map(|_| Partition::NotClustered);
    }
    // Arc i starts after cut i (cuts ascending); its pieces are those between the two cuts.
    let mut starts: Vec<usize> = cuts.iter().map(|&c| (c + 1) % n).collect();
    let mut spans = vec![0.0; cuts.len()];
    let mut counts = vec![0usize; cuts.len()];
    let mut piece_bounds = vec![0.0_f64; cuts.len()];
    let mut arc = cuts.len() - 1;
    for piece in &pieces {
        if piece.cut {
            arc = (arc + 1) % cuts.len();
        } else {
            spans[arc] += piece.step;
            counts[arc] += 1;
            piece_bounds[arc] = piece_bounds[arc].max(piece.bound);
        }
    }
    // The arc after the last cut holds the positions from its start round to the first cut.
    let mut ends: Vec<usize> = cuts.clone();
    ends.rotate_left(1);
    let mut extremes = Vec::with_capacity(cuts.len());
    for a in 0..cuts.len() {
        // The arc's tokens are those of its pieces: their largest bound holds for all of them.
        let margin = (counts[a] as f64 + 2.0) * piece_bounds[a];
        if spans[a] - margin > theta {
            return Some(Partition::NotClustered);
        }
        if spans[a] + margin >= FRAC_PI_2 {
            return None;
        }
        let (first, last, across) = match &bounds.image {
            Some(image) => arc_diameter(starts[a], ends[a], n, image, &mut angles)?,
            None => arc_ends(starts[a], ends[a], n, &bounds.start, &mut |p| angles.at(p))?,
        };
        if arc_span(first, last, across) > theta {
            return Some(Partition::NotClustered);
        }
        extremes.push((first, last, across));
    }
    if bounds.image.is_none() && !gaps_hold(&extremes, theta) {
        return None;
    }
    let mut diameters: Vec<f64> = extremes
        .iter()
        .map(|&(first, last, across)| arc_span(first, last, across))
        .collect();
    // Ascending starts: the arc after the last cut may start at position 0.
    let first = (0..starts.len()).min_by_key(|&a| starts[a]).unwrap_or(0);
    starts.rotate_left(first);
    diameters.rotate_left(first);
    Some(Partition::Arcs(Arcs {
        starts,
        diameters,
        n,
    }))
}

/// Whether the arcs (their first and last angles, in the circle's order) are apart by gaps
/// wider than theta as the sorted definition computes them (the next first minus this last,
/// plus 2 pi as (first + 2 pi) - last round the cut), and once round in that order (the spans
/// and gaps add up to 2 pi).
fn gaps_hold(extremes: &[(f64, f64, bool)], theta: f64) -> bool {
    let k = extremes.len();
    let mut total = 0.0;
    for a in 0..k {
        let (first, last, across) = extremes[a];
        let next = extremes[(a + 1) % k].0;
        let gap = if next >= last {
            next - last
        } else {
            (next + TAU) - last
        };
        if gap.is_nan() || gap <= theta {
            return false;
        }
        total += gap + arc_span(first, last, across);
    }
    (total - TAU).abs() < 1e-6
}

/// The pieces of positions 0..n once round, in order (module docs).
fn bisect(n: usize, theta: f64, bounds: &Bounds, angles: &mut Angles) -> Option<Vec<Piece>> {
    let r0 = angles.at(0)?;
    let half = n / 2;
    let rh = angles.at(half)?;
    let mut pieces = Vec::new();
    // (i, j, r_i, r_j); j = n stands for position 0. Right halves pushed first: pieces in order.
    let mut stack = vec![(half, n, rh, r0), (0, half, r0, rh)];
    while let Some((i, j, ri, rj)) = stack.pop() {
        let pair = bounds.pair(&ri, &rj);
        let usable = pair < MAX_GLOBAL_BOUND;
        let s = step(ri.angle, rj.angle, pair);
        // The image side narrows its bound of this range's tokens (near theta only), and of
        // the neighbours' arcs.
        let wide = bounds.image.map_or(pair, |b| b.global.max(pair));
        let near = (theta - 2.0 * wide..=theta + 2.0 * wide).contains(&s);
        let local = if usable {
            bounds.range(&ri, &rj, s, near)
        } else {
            f64::INFINITY
        };
        if s <= theta - 2.0 * local {
            pieces.push(Piece {
                i,
                step: s,
                cut: false,
                bound: local,
            });
        } else if j - i == 1 {
            let ends = match (&bounds.image, usable) {
                (_, false) => return None,
                (Some(b), true) if near => {
                    b.over(ri.angle, ri.angle).max(b.over(rj.angle, rj.angle))
                }
                (Some(b), true) => b.global,
                // The start side's cuts are checked on the arcs' extremes.
                (None, true) => pair,
            };
            if s <= theta + 2.0 * ends {
                return None;
            }
            pieces.push(Piece {
                i,
                step: s,
                cut: true,
                bound: ends,
            });
        } else {
            let m = i + (j - i) / 2;
            let rm = angles.at(m)?;
            stack.push((m, j, rm, rj));
            stack.push((i, m, ri, rm));
        }
    }
    Some(pieces)
}

/// The first and last angle of the arc from position `start` to `end` (round the cycle when
/// end < start), and whether it runs through the cut at +-pi: the doubles the sorted
/// definition subtracts for its diameter. The first and last angles are among the tokens scanned from each end until one
/// lies the end's local bound beyond the extreme seen so far (docs/MATH.md §11.3).
fn arc_diameter(
    start: usize,
    end: usize,
    n: usize,
    bound: &Bound,
    angles: &mut Angles,
) -> Option<(f64, f64, bool)> {
    let len = (end + n - start) % n + 1;
    let at = |q: usize| (start + q) % n;
    let (a_start, a_end) = (angles.at(start)?.angle, angles.at(end)?.angle);
    let delta = bound.over(a_start, a_start + step(a_start, a_end, bound.global));
    // A later token q below the lowest angle seen lies within delta below a_start, and so does
    // every token from the start to q: their bound is the one local to the arc's start end, and
    // the scan stops at the first angle more than that above the lowest one seen (steps
    // measured from a_start, through the cut). Likewise at the last end.
    let at_start = bound.over(a_start - delta, a_start).min(delta);
    let mut near_start = vec![a_start];
    let mut lowest = 0.0_f64;
    for q in 1..len {
        let a = angles.at(at(q))?.angle;
        near_start.push(a);
        let s = step(a_start, a, delta);
        if s > lowest + at_start {
            break;
        }
        lowest = lowest.min(s);
    }
    let at_end = bound.over(a_end, a_end + delta).min(delta);
    let mut near_end = vec![a_end];
    let mut highest = 0.0_f64;
    for q in (0..len - 1).rev() {
        let a = angles.at(at(q))?.angle;
        near_end.push(a);
        let s = -step(a, a_end, delta);
        if s < highest - at_end {
            break;
        }
        highest = highest.max(s);
    }
    arc_extremes(&near_start, &near_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_sorts_by_angle_and_inverts() {
        let angles = [3.0, -1.0, 0.5, 0.5, -3.1, 0.0];
        let tokens: Vec<f64> = angles
            .iter()
            .flat_map(|t: &f64| [t.cos(), t.sin()])
            .collect();
        let order = CircleOrder::of(&tokens).unwrap();
        let perm: Vec<usize> = (0..6).map(|p| order.token(p)).collect();
        assert_eq!(perm, vec![4, 1, 5, 2, 3, 0]);
        assert!((0..6).all(|k| order.token(order.position(k)) == k));
        assert!(CircleOrder::of(&[0.0, 0.0, 1.0, 0.0]).is_none());
        assert!(CircleOrder::of(&[f64::NAN, 1.0]).is_none());
    }

    #[test]
    fn the_bound_grows_with_the_condition_number() {
        let conformal = rounding_bound(&[2.0, -1.0, 1.0, 2.0]).unwrap();
        assert!((conformal - 64.0 * f64::EPSILON * 4.0).abs() < 1e-20);
        let squeezed = rounding_bound(&[1e4, 0.0, 0.0, 1e-4]).unwrap();
        assert!(squeezed > 1e8 * 64.0 * f64::EPSILON);
        assert!(rounding_bound(&[0.0, 1.0, 1.0, 0.0]).is_none());
        assert!(rounding_bound(&[f64::INFINITY, 0.0, 0.0, 1.0]).is_none());
    }

    #[test]
    fn the_angles_go_once_round_in_the_start_order_within_the_bound() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let mut worst: f64 = 0.0;
        for trial in 0..24 {
            let s = [1.0f64, 10.0, 1e2, 1e3, 1e4][trial % 5];
            let (alpha, beta): (f64, f64) = (rng.random_range(-PI..PI), rng.random_range(-PI..PI));
            // P = R(alpha) diag(s, 1 / s) R(beta): cond s^2 up to 1e8.
            let (ca, sa, cb, sb) = (alpha.cos(), alpha.sin(), beta.cos(), beta.sin());
            let p = [
                ca * s * cb - sa * sb / s,
                -ca * s * sb - sa * cb / s,
                sa * s * cb + ca * sb / s,
                -sa * s * sb + ca * cb / s,
            ];
            let delta = rounding_bound(&p).unwrap();
            // Uniform angles, each with copies a few ulps longer (same start angle).
            let x: Vec<f64> = (0..3000)
                .flat_map(|_| {
                    let t: f64 = rng.random_range(-PI..PI);
                    (0..3).flat_map(move |j| {
                        let c = 1.0 + j as f64 * f64::EPSILON;
                        [c * t.cos(), c * t.sin()]
                    })
                })
                .collect();
            let order = CircleOrder::of(&x).unwrap();
            let angle = |q: usize| {
                let k = order.token(q % order.len());
                let (a, b) = (
                    p[0] * x[2 * k] + p[1] * x[2 * k + 1],
                    p[2] * x[2 * k] + p[3] * x[2 * k + 1],
                );
                let size = (a * a + b * b).sqrt();
                (b / size).atan2(a / size)
            };
            // Unwrapped along the order: once round, never back by more than delta / 4.
            let (mut u, mut top) = (0.0, 0.0f64);
            for q in 1..=order.len() {
                u += step(angle(q - 1), angle(q), delta / 4.0);
                top = top.max(u);
                worst = worst.max((top - u) / delta);
            }
            assert!((u - TAU).abs() < 1e-9, "trial {trial}: once round, {u}");
        }
        assert!(worst <= 0.25, "backward steps up to {worst} delta");
    }

    #[test]
    fn arcs_know_their_sizes_and_positions() {
        let arcs = Arcs {
            starts: vec![2, 5, 9],
            diameters: vec![0.0; 3],
            n: 10,
        };
        assert_eq!((arcs.size(0), arcs.size(1), arcs.size(2)), (3, 4, 3));
        let of: Vec<usize> = (0..10).map(|p| arcs.arc_of(p)).collect();
        assert_eq!(of, vec![2, 2, 0, 0, 0, 1, 1, 1, 1, 2]);
    }
}
