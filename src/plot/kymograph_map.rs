//! A kymograph column of the group model in d = 2 without a pass over the tokens
//! (docs/MATH.md §2.2).
//!
//! The tokens are y_k = P x_k / |P x_k| with det P > 0, so their doubled angles are
//! xi_k = F(xi_k(0)) for one increasing circle map F, and with the bin edges e_j = 2 pi j / B:
//!
//! ```text
//! psi_j = F^{-1}(e_j) = doubled angle of adj(P) (cos e_j/2, sin e_j/2),
//! count_j = #{k : xi_k(0) in [psi_j, psi_{j+1})},  F' >= 1 / kappa,  kappa = s_max / s_min of P.
//! ```
//!
//! The start angles are sorted once (kept as f32, within 1e-6), so each column costs 2 B
//! binary searches. Tokens whose start angle lies within delta of a psi_j are binned one by
//! one exactly as a pass over the tokens bins them (`kymograph::angle_bin_of`); every
//! other token is at least (delta - 1e-6 - 1e-14 kappa) / kappa from an edge after the map, far
//! more than the rounding of the map and of the bin (1e-14 kappa), so its bin is the bin of its
//! segment. delta = 2e-6 + 1e-12 (kappa + kappa^2); above [`MAX_WINDOW`] (Phi far from
//! conformal) [`doubled_counts_along`] counts the column from the computed angles along the
//! start tokens' order instead (docs/MATH.md §11.4):
//!
//! ```text
//! a range of positions i < j with step(a_i, a_j) = s, |s| < pi / (2 B): its angles lie in
//! [a_i + min(s, 0) - delta_I, a_i + max(s, 0) + delta_I]  (delta_I: Bound::over, §11.3);
//! one bin at both ends of that interval (with a margin for the bin's rounding)
//!   => every token of the range is in that bin; else bisect, down to single tokens.
//! ```
//!
//! Then a column costs O(B log n) angles for spread tokens and O(k log n) for k tight clusters;
//! more than a budget of angles leave it to the pass over the tokens.

use std::f64::consts::{PI, TAU};

use super::kymograph::{angle_bin, angle_bin_of, BINS};
use crate::observe::circle_order::{step, Bounds, MAX_GLOBAL_BOUND};
use crate::observe::start_bound::Reading;
use crate::observe::token_source::{key_angle, key_index};
use crate::observe::PlaneMap;

/// The largest window delta (radians of start angle) the column is counted with.
pub const MAX_WINDOW: f64 = 1e-3;

/// The half-width delta of the windows around the preimages of the edges for a map with
/// condition number kappa (module docs).
fn window(kappa: f64) -> f64 {
    2e-6 + 1e-12 * (kappa + kappa * kappa)
}

/// s_max / s_min of the 2 x 2 matrix p (row-major) with determinant det > 0.
fn condition(p: &[f64; 4], det: f64) -> f64 {
    let frob2: f64 = p.iter().map(|v| v * v).sum();
    let disc = (frob2 * frob2 - 4.0 * det * det).max(0.0).sqrt();
    (frob2 + disc) / 2.0 / det
}

/// The unwrapped preimages psi_0 < psi_1 < ... < psi_B = psi_0 + 2 pi of the edges, or `None`
/// when two come within 2 delta of each other.
fn preimages(p: &[f64; 4], delta: f64) -> Option<[f64; BINS + 1]> {
    let [a, b, c, d] = *p;
    let raw: [f64; BINS] = std::array::from_fn(|j| {
        let half = 0.5 * TAU * j as f64 / BINS as f64;
        let (s, co) = half.sin_cos();
        let (w0, w1) = (d * co - b * s, -c * co + a * s);
        (2.0 * w1.atan2(w0)).rem_euclid(TAU)
    });
    let mut out = [0.0; BINS + 1];
    out[0] = raw[0];
    for j in 1..BINS {
        out[j] = out[j - 1] + (raw[j] - raw[j - 1]).rem_euclid(TAU);
    }
    out[BINS] = raw[0] + TAU;
    let spaced = out.windows(2).all(|w| w[1] - w[0] > 2.0 * delta);
    (spaced && out.iter().all(|v| v.is_finite())).then_some(out)
}

/// The number of sorted start angles below the unwrapped angle x: whole turns times n plus
/// those below x mod 2 pi.
fn below(sorted: &[u64], x: f64) -> i64 {
    let turns = (x / TAU).floor();
    let r = x - turns * TAU;
    let within = sorted.partition_point(|&key| key_angle(key) < r);
    turns as i64 * sorted.len() as i64 + within as i64
}

/// The counts per bin of the doubled angles of the tokens y_k = P x_k / |P x_k| of `map`, the
/// bins of `angle_bin_of` (factor 2, [`BINS`] bins); `token(k, y)` makes token k as the pass
/// over the tokens does. `None` when the map is too far from conformal (module docs).
pub fn doubled_counts(
    map: &PlaneMap<'_>,
    token: impl Fn(usize, &mut [f64]),
) -> Option<[u64; BINS]> {
    let p = map.p;
    let det = p[0] * p[3] - p[1] * p[2];
    let n = map.sorted.len();
    // det > 0 (a NaN is not).
    if det.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || n == 0 {
        return None;
    }
    let delta = window(condition(&p, det));
    if delta.partial_cmp(&MAX_WINDOW) != Some(std::cmp::Ordering::Less) {
        return None;
    }
    let psi = preimages(&p, delta)?;
    let first = below(map.sorted, psi[0] - delta);
    // Window j's start, its end, then the next window's start (the last wraps by one turn).
    let bounds: Vec<(i64, i64)> = (0..BINS)
        .map(|j| {
            (
                below(map.sorted, psi[j] - delta),
                below(map.sorted, psi[j] + delta),
            )
        })
        .chain(std::iter::once((first + n as i64, first + n as i64)))
        .collect();
    let ordered = bounds
        .windows(2)
        .all(|w| w[0].0 <= w[0].1 && w[0].1 <= w[1].0);
    if !ordered {
        return None;
    }
    let mut counts = [0u64; BINS];
    let mut y = [0.0; 2];
    for j in 0..BINS {
        let (lo, hi) = bounds[j];
        for position in lo..hi {
            let k = key_index(map.sorted[position.rem_euclid(n as i64) as usize]);
            token(k, &mut y);
            if let Some(bin) = angle_bin_of(y[1], y[0], 2.0, BINS) {
                counts[bin] += 1;
            }
        }
        counts[j] += (bounds[j + 1].0 - hi) as u64;
    }
    Some(counts)
}

/// The counts per bin of the doubled angles of n tokens from their computed angles along the
/// start order (module docs): `read(p)` is what the bisection reads at position p (atan2 of the
/// sample's token, the double a pass over the tokens bins, with its start token's angle and
/// stretch); at most `budget` readings. `None` when a pair of neighbours has no usable bound,
/// an angle is not finite, the steps do not go once round, or the budget runs out.
pub fn doubled_counts_along(
    n: usize,
    bounds: &Bounds,
    budget: usize,
    read: &mut dyn FnMut(usize) -> Reading,
) -> Option<[u64; BINS]> {
    if n < 2 {
        return None;
    }
    let mut left = budget;
    let mut at = |p: usize| -> Option<Reading> {
        left = left.checked_sub(1)?;
        let r = read(p);
        r.angle.is_finite().then_some(r)
    };
    let bin = |a: f64| angle_bin(2.0 * a, BINS);
    let mut counts = [0u64; BINS];
    let mut total = 0.0;
    let (r0, half) = (at(0)?, n / 2);
    let rh = at(half)?;
    // (i, j, r_i, r_j); j = n stands for position 0. Range [i, j) holds positions i .. j - 1.
    let mut stack = vec![(half, n, rh, r0), (0, half, r0, rh)];
    while let Some((i, j, ri, rj)) = stack.pop() {
        let pair = bounds.pair(&ri, &rj);
        let usable = pair < MAX_GLOBAL_BOUND;
        let s = step(ri.angle, rj.angle, pair);
        if j - i == 1 {
            // A single token: its own angle's bin; its step counts toward the turn only when
            // its wrap is certain.
            if !usable {
                return None;
            }
            counts[bin(ri.angle)] += 1;
        } else if let Some(b) = usable.then(|| one_bin(&ri, &rj, s, bounds)).flatten() {
            counts[b] += (j - i) as u64;
        } else {
            let m = i + (j - i) / 2;
            let rm = at(m)?;
            stack.push((m, j, rm, rj));
            stack.push((i, m, ri, rm));
            continue;
        }
        total += s;
    }
    // Once round: a range read a whole turn short shows as a total near 0.
    (PI..3.0 * PI).contains(&total).then_some(counts)
}

/// The one bin of every token of the range from reading i to reading j with step s, or
/// `None`: the start side's delta, else the image side's global then narrowed one.
fn one_bin(i: &Reading, j: &Reading, s: f64, bounds: &Bounds) -> Option<usize> {
    // Shorter than half a bin of the (single) angle: a range cannot hold two whole bins' edges.
    const SPAN: f64 = PI / BINS as f64 / 2.0;
    // Above the rounding of `angle_bin`'s reduction and scaling (angles below 2 pi).
    const MARGIN: f64 = 1e-12;
    if s.abs() >= SPAN {
        return None;
    }
    let a = i.angle;
    let (lo, hi) = (a + s.min(0.0), a + s.max(0.0));
    let within = |w: f64| {
        let first = angle_bin(2.0 * (lo - w - MARGIN), BINS);
        (first == angle_bin(2.0 * (hi + w + MARGIN), BINS)).then_some(first)
    };
    within(2.0 * bounds.start.range(i, j)).or_else(|| {
        bounds
            .image
            .and_then(|b| within(b.global).or_else(|| within(b.over(lo, hi))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::token_source::sorted_doubled_angles;
    use rand::{RngExt, SeedableRng};

    /// The counts of a pass over the tokens (the reference).
    fn pass(p: &[f64; 4], x: &[f64]) -> [u64; BINS] {
        let mut counts = [0u64; BINS];
        for x in x.chunks_exact(2) {
            let mut y = [0.0; 2];
            image(p, x, &mut y);
            if let Some(bin) = angle_bin_of(y[1], y[0], 2.0, BINS) {
                counts[bin] += 1;
            }
        }
        counts
    }

    fn image(p: &[f64; 4], x: &[f64], y: &mut [f64]) {
        let (a, b) = (p[0] * x[0] + p[1] * x[1], p[2] * x[0] + p[3] * x[1]);
        let size = (a * a + b * b).sqrt();
        y[0] = a / size;
        y[1] = b / size;
    }

    fn circle(angles: &[f64]) -> Vec<f64> {
        angles.iter().flat_map(|t| [t.cos(), t.sin()]).collect()
    }

    fn check(p: [f64; 4], x: &[f64]) -> bool {
        let sorted = sorted_doubled_angles(x).unwrap();
        let map = PlaneMap { p, sorted: &sorted };
        let token = |k: usize, y: &mut [f64]| image(&p, &x[2 * k..2 * k + 2], y);
        match doubled_counts(&map, token) {
            Some(counts) => {
                assert_eq!(counts, pass(&p, x), "p = {p:?}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn the_counts_are_those_of_a_pass_on_random_maps_and_tokens() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut counted = 0;
        for trial in 0..60 {
            let n = 1 + trial * 97;
            let angles: Vec<f64> = (0..n).map(|_| rng.random_range(-4.0..4.0)).collect();
            let x = circle(&angles);
            // Near conformal, sheared and strongly squeezed maps (the last refused or counted).
            let scale = [0.1, 1.0, 10.0, 300.0][trial % 4];
            let p: [f64; 4] = [
                scale * rng.random_range(0.5..1.5),
                rng.random_range(-2.0..2.0),
                rng.random_range(-2.0..2.0),
                rng.random_range(0.5..1.5),
            ];
            let det = p[0] * p[3] - p[1] * p[2];
            let p = if det > 0.0 {
                p
            } else {
                [p[1], p[0], p[3], p[2]]
            };
            counted += usize::from(check(p, &x));
        }
        assert!(counted >= 30, "{counted} of 60 maps counted");
    }

    #[test]
    fn tokens_on_the_preimages_of_the_edges_and_in_clusters_land_as_in_a_pass() {
        let p = [1.3, 0.4, -0.2, 0.9];
        let det = p[0] * p[3] - p[1] * p[2];
        // Start tokens placed exactly on the preimages of every edge, and next to them.
        let mut x = Vec::new();
        for j in 0..BINS {
            let half = 0.5 * TAU * j as f64 / BINS as f64;
            let (s, c) = half.sin_cos();
            let w = [(p[3] * c - p[1] * s) / det, (-p[2] * c + p[0] * s) / det];
            let t = w[1].atan2(w[0]);
            for dt in [-1e-9, -1e-15, 0.0, 1e-15, 1e-9, 1e-5] {
                x.extend_from_slice(&[(t + dt).cos(), (t + dt).sin()]);
            }
        }
        assert!(check(p, &x));
        // Three tight clusters (the tokens of a clustered state).
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let angles: Vec<f64> = (0..3000)
            .map(|k| [0.3, 1.9, -2.2][k % 3] + 1e-4 * rng.random_range(-1.0..1.0))
            .collect();
        assert!(check(p, &circle(&angles)));
        assert!(check([1.0, 0.0, 0.0, 1.0], &circle(&angles)));
    }

    /// P = R(alpha) diag(s, 1 / s) R(beta) with random alpha, beta (cond s^2), row-major.
    fn squeeze(rng: &mut rand_chacha::ChaCha8Rng, s: f64) -> [f64; 4] {
        let (a, b) = (
            rng.random_range(-3.0..3.0_f64),
            rng.random_range(-3.0..3.0_f64),
        );
        let (sa, ca) = a.sin_cos();
        let (sb, cb) = b.sin_cos();
        let d = [s * ca, -sa / s, s * sa, ca / s];
        [
            d[0] * cb + d[1] * sb,
            -d[0] * sb + d[1] * cb,
            d[2] * cb + d[3] * sb,
            -d[2] * sb + d[3] * cb,
        ]
    }

    /// The counts along the start order of the tokens of P (any sign of det P), if decided.
    fn along(p: [f64; 4], x: &[f64]) -> Option<[u64; BINS]> {
        let order = crate::observe::circle_order::CircleOrder::of(x).unwrap();
        let plane = crate::observe::PlaneOrder::new(p, &order, x)?;
        let bounds = Bounds::of(&plane.p)?;
        let mut read = |q: usize| {
            let k = plane.token(q);
            let mut y = [0.0; 2];
            image(&p, &x[2 * k..2 * k + 2], &mut y);
            let s = plane.start_token(q);
            Reading {
                angle: y[1].atan2(y[0]),
                start: s[1].atan2(s[0]),
                stretch: (p[0] * x[2 * k] + p[1] * x[2 * k + 1])
                    .hypot(p[2] * x[2 * k] + p[3] * x[2 * k + 1])
                    / s[0].hypot(s[1]),
            }
        };
        doubled_counts_along(x.len() / 2, &bounds, x.len(), &mut read)
    }

    #[test]
    fn counts_along_the_order_are_those_of_a_pass_up_to_cond_1e12() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(72);
        let (mut decided, mut trials) = (0, 0);
        for trial in 0..120 {
            // P = R(alpha) diag(s, 1 / s) R(beta), cond s^2 from 1 to 1e12; every other one
            // with a column negated (det < 0).
            let cond: f64 = [1.0, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12][trial % 7];
            let s = cond.sqrt();
            let mut p = squeeze(&mut rng, s);
            if trial % 2 == 1 {
                p[1] = -p[1];
                p[3] = -p[3];
            }
            // Spread tokens, a few tight clusters, and tokens next to the edges' preimages.
            let n = 200 + trial * 37;
            let angles: Vec<f64> = match trial % 3 {
                0 => (0..n).map(|_| rng.random_range(-4.0..4.0)).collect(),
                1 => (0..n)
                    .map(|k| [0.3, 1.9, -2.2][k % 3] + 1e-3 * rng.random_range(-1.0..1.0))
                    .collect(),
                _ => (0..n)
                    .map(|k| {
                        let j = (k % BINS) as f64;
                        0.5 * TAU * j / BINS as f64 + 1e-12 * rng.random_range(-1.0..1.0)
                    })
                    .collect(),
            };
            let x = if trial % 3 == 2 {
                // Start tokens whose images sit on or next to the edges: x = adj(P) y.
                angles
                    .iter()
                    .flat_map(|t| {
                        let (st, ct) = t.sin_cos();
                        let w = [p[3] * ct - p[1] * st, -p[2] * ct + p[0] * st];
                        let r = w[0].hypot(w[1]);
                        [w[0] / r, w[1] / r]
                    })
                    .collect()
            } else {
                circle(&angles)
            };
            trials += 1;
            if let Some(counts) = along(p, &x) {
                assert_eq!(
                    counts,
                    pass(&p, &x),
                    "trial {trial}: cond {cond}, p = {p:?}"
                );
                decided += 1;
            }
        }
        assert!(decided > trials * 2 / 3, "{decided} of {trials} decided");
    }

    /// Past cond 1e13 (the image side's limit) up to 1e200 the start side counts the column:
    /// uniform tokens, whose images are two antipodal points to rounding, give the pass's
    /// counts, reversed maps (the doubles' det of either sign) included.
    #[test]
    fn counts_along_the_order_are_those_of_a_pass_for_squeezed_maps() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(73);
        let mut decided = 0;
        let trials = 30;
        for trial in 0..trials {
            let s = [1e7, 1e8, 1e10, 1e20, 1e100][trial % 5];
            let p = squeeze(&mut rng, s);
            let n = 5000 + 300 * trial;
            let angles: Vec<f64> = (0..n).map(|_| rng.random_range(-4.0..4.0)).collect();
            let x = circle(&angles);
            if let Some(counts) = along(p, &x) {
                assert_eq!(counts, pass(&p, &x), "trial {trial}: s {s}, p = {p:?}");
                decided += 1;
            }
        }
        assert_eq!(decided, trials, "{decided} of {trials} decided");
    }

    #[test]
    fn maps_far_from_conformal_are_left_to_the_pass() {
        let x = circle(&[0.1, 0.2, 0.3]);
        let sorted = sorted_doubled_angles(&x).unwrap();
        let p = [1e5, 0.0, 0.0, 1e-5];
        let map = PlaneMap { p, sorted: &sorted };
        assert!(doubled_counts(&map, |_, _| {}).is_none());
        let map = PlaneMap {
            p: [0.0, 1.0, 1.0, 0.0],
            sorted: &sorted,
        };
        assert!(doubled_counts(&map, |_, _| {}).is_none());
    }
}
