//! The rounding of a plane map's token angles bounded from the start side, for maps of any
//! condition number (docs/MATH.md §11.4).
//!
//! ```text
//! r(x) = |P x| / |x|,   F = |P|_F,   m = a lower bound of r over the tokens concerned,
//! e(m) = 16 eps (F / m + 1)     bounds |computed angle - exact image angle| + the start
//!                               order's misordering, token by token (some 3 times the
//!                               worst case eps (5.1 F / r + 2.5), docs/MATH.md §11.4),
//! r over a start arc with no minimiser of |P u| (u = v_2, -v_2) inside: least at its ends;
//! r >= sigma_2 = det P / sigma_1 >= det P / F everywhere.
//! ```
//!
//! The image-side bound of the circle order's `Bound` needs det P to the last digits and
//! fails once cond P passes some 1e13; this one reads each visited token's |P x| and the start
//! angles, so the clusters of a map squeezed to rounding (all images on two antipodal points)
//! are decided from the tokens near the squeezed direction. The ends of a tight arc are found
//! by [`arc_ends`]: a scan from both ends that stops when no token between the two fronts can
//! lie beyond the extremes seen.

use std::f64::consts::{FRAC_PI_2, PI, TAU};

/// The step from angle a to angle b along the circle: b - a, plus 2 pi when below -delta.
pub fn step(a: f64, b: f64, delta: f64) -> f64 {
    let s = b - a;
    if s < -delta {
        s + TAU
    } else {
        s
    }
}

/// What the bisection reads of the token at one position of the start order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// The computed angle of the sample's token, atan2 as the pass over the tokens takes it.
    pub angle: f64,
    /// The start token's angle atan2(x_2, x_1) (of R x for a reversed map).
    pub start: f64,
    /// r = |fl(P x)| / |x|, the stretch of the start token (the map and token of the order).
    pub stretch: f64,
}

/// The start-side bound of one increasing plane map P (module docs).
#[derive(Debug, Clone, Copy)]
pub struct StartBound {
    frobenius: f64,
    /// det P / F (det P with one rounding): a lower bound of r everywhere.
    floor: f64,
    /// The start angle of a minimiser of |P u| (mod pi), and the margin it is known to.
    minimiser: f64,
    margin: f64,
}

/// det P of a 2 x 2 matrix (row-major) with one rounding (Kahan: w = p12 p21 and its error by
/// fused multiply-adds), so its sign is the exact determinant's.
pub fn exact_sign_det(p: &[f64; 4]) -> f64 {
    let w = p[1] * p[2];
    let error = (-p[1]).mul_add(p[2], w);
    p[0].mul_add(p[3], -w) + error
}

impl StartBound {
    /// The bound of P (row-major, det P > 0 exactly); `None` when an entry is not finite or
    /// |P|_F is zero or overflows.
    pub fn of(p: &[f64; 4]) -> Option<Self> {
        let sq: f64 = p.iter().map(|v| v * v).sum();
        let frobenius = sq.sqrt();
        if !(frobenius.is_finite() && frobenius > 0.0) {
            return None;
        }
        let det = exact_sign_det(p);
        let floor = (det / frobenius * (1.0 - 8.0 * f64::EPSILON)).max(0.0);
        // |P u(t)|^2 = c0 + c1 cos 2t + c2 sin 2t: M = P^T P, c1 = (M11 - M22) / 2, c2 = M12.
        let m11 = p[0] * p[0] + p[2] * p[2];
        let m22 = p[1] * p[1] + p[3] * p[3];
        let m12 = p[0] * p[1] + p[2] * p[3];
        let (c1, c2) = ((m11 - m22) / 2.0, m12);
        let spread = c1.hypot(c2);
        // Least where 2t = atan2(c2, c1) + pi. The entries of M round by up to 3 eps F^2, which
        // turns the direction by at most that over the spread (sigma_1^2 - sigma_2^2) / 2.
        let minimiser = 0.5 * c2.atan2(c1) + FRAC_PI_2;
        let margin = 1e-9 + 64.0 * f64::EPSILON * sq / spread;
        let margin = if margin.is_finite() { margin } else { PI };
        Some(StartBound {
            frobenius,
            floor,
            minimiser,
            margin,
        })
    }

    /// e(m) for a lower bound m of r (infinite when m is not positive).
    fn rounding(&self, m: f64) -> f64 {
        if m > 0.0 {
            16.0 * f64::EPSILON * (self.frobenius / m + 1.0)
        } else {
            f64::INFINITY
        }
    }

    /// A lower bound of r for the token read (its computed stretch less that one's rounding
    /// and the start order's misordering), never below the floor.
    fn least(&self, r: &Reading) -> f64 {
        (r.stretch * (1.0 - 4.0 * f64::EPSILON) - 8.0 * f64::EPSILON * self.frobenius)
            .max(self.floor)
    }

    /// The bound of one token's angle.
    pub fn point(&self, r: &Reading) -> f64 {
        self.rounding(self.least(r))
    }

    /// The bound of every token at the positions from `a`'s to `b`'s (their start angles on
    /// the arc from a.start counter-clockwise to b.start, within the misordering): from the
    /// ends' stretches when that arc holds no minimiser of |P u|, else from the floor.
    pub fn range(&self, a: &Reading, b: &Reading) -> f64 {
        let length = (b.start - a.start).rem_euclid(2.0 * PI);
        let from = a.start - self.margin;
        let to_minimiser = (self.minimiser - from).rem_euclid(PI);
        let holds = length + 2.0 * self.margin >= PI || to_minimiser <= length + 2.0 * self.margin;
        if !length.is_finite() || holds {
            return self.rounding(self.floor);
        }
        let ends = self.least(a).min(self.least(b)) - 8.0 * f64::EPSILON * self.frobenius;
        self.rounding(ends.max(self.floor))
    }
}

/// The first and last angle (the sorted definition's, round the cut when `across`) of the
/// tight arc at positions `start..=end` of n (round the cycle when end < start), by reading
/// from both ends: an unread token lies between the fronts, so its exact image lies between
/// theirs and its angle within [lo front - e(lo) - e(between), hi front + e(hi) + e(between)];
/// the scan stops once the extremes seen lie strictly beyond. The front with the smaller
/// stretch moves first. `None` when `read` refuses (the budget).
pub fn arc_ends(
    start: usize,
    end: usize,
    n: usize,
    bound: &StartBound,
    read: &mut dyn FnMut(usize) -> Option<Reading>,
) -> Option<(f64, f64, bool)> {
    let len = (end + n - start) % n + 1;
    let at = |q: usize| (start + q) % n;
    let first = read(at(0))?;
    // Offsets from the first angle (the arc is shorter than pi / 2, its tokens within it).
    let offset = |a: f64| step(first.angle, a, 1.0);
    let mut seen = vec![first.angle];
    let (mut lo, mut hi) = (0, len - 1);
    let mut front_lo = first;
    let mut front_hi = if hi == 0 { first } else { read(at(hi))? };
    if hi > 0 {
        seen.push(front_hi.angle);
    }
    let (mut lowest, mut highest) = (
        offset(first.angle).min(offset(front_hi.angle)),
        offset(first.angle).max(offset(front_hi.angle)),
    );
    while lo + 1 < hi {
        let between = bound.range(&front_lo, &front_hi);
        let floor = offset(front_lo.angle) - bound.point(&front_lo) - between;
        let ceiling = offset(front_hi.angle) + bound.point(&front_hi) + between;
        if lowest < floor && highest > ceiling {
            break;
        }
        let reading = if front_lo.stretch <= front_hi.stretch {
            lo += 1;
            front_lo = read(at(lo))?;
            front_lo
        } else {
            hi -= 1;
            front_hi = read(at(hi))?;
            front_hi
        };
        seen.push(reading.angle);
        lowest = lowest.min(offset(reading.angle));
        highest = highest.max(offset(reading.angle));
    }
    arc_extremes(&seen, &seen)
}

/// An arc's first angle among `lows` and last among `highs` (candidates read from its two
/// ends), and whether it runs through the cut at +-pi: it does when the angles seen lie near
/// both pi and -pi (the arc being shorter than pi / 2), and then those near -pi come last.
pub fn arc_extremes(lows: &[f64], highs: &[f64]) -> Option<(f64, f64, bool)> {
    let seen = || lows.iter().chain(highs);
    let across = seen().any(|&a| a > FRAC_PI_2) && seen().any(|&a| a < -FRAC_PI_2);
    let key = |a: f64| (across && a < 0.0, a);
    let earlier = |a: &f64, b: &f64| {
        let (x, y) = (key(*a), key(*b));
        x.0.cmp(&y.0).then(x.1.total_cmp(&y.1))
    };
    let first = lows.iter().copied().min_by(earlier)?;
    let last = highs.iter().copied().max_by(earlier)?;
    Some((first, last, across))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// P = R(alpha) diag(s, 1 / s) R(beta) (cond s^2), row-major.
    fn squeeze(alpha: f64, s: f64, beta: f64) -> [f64; 4] {
        let (ca, sa, cb, sb) = (alpha.cos(), alpha.sin(), beta.cos(), beta.sin());
        [
            ca * s * cb - sa * sb / s,
            -ca * s * sb - sa * cb / s,
            sa * s * cb + ca * sb / s,
            -sa * s * sb + ca * cb / s,
        ]
    }

    /// What the bisection reads of start token x under P (the group model's arithmetic).
    fn reading(p: &[f64; 4], x: [f64; 2]) -> Reading {
        let (a, b) = (p[0] * x[0] + p[1] * x[1], p[2] * x[0] + p[3] * x[1]);
        let size = (a * a + b * b).sqrt();
        Reading {
            angle: (b / size).atan2(a / size),
            start: x[1].atan2(x[0]),
            stretch: a.hypot(b) / x[0].hypot(x[1]),
        }
    }

    /// The exact image angle of x under P to a few eps: P x in double-double (products split
    /// by fused multiply-adds), then atan2 of the leading parts corrected by the trailing ones.
    fn exact_angle(p: &[f64; 4], x: [f64; 2]) -> f64 {
        let two_sum = |a: f64, b: f64| {
            let s = a + b;
            let v = s - a;
            (s, (a - (s - v)) + (b - v))
        };
        let dot = |u: f64, v: f64| {
            let (h1, h2) = (u * x[0], v * x[1]);
            let (l1, l2) = (u.mul_add(x[0], -h1), v.mul_add(x[1], -h2));
            let (s, e) = two_sum(h1, h2);
            two_sum(s, e + l1 + l2)
        };
        let ((a, al), (b, bl)) = (dot(p[0], p[1]), dot(p[2], p[3]));
        b.atan2(a) + (a * bl - b * al) / (a * a + b * b)
    }

    #[test]
    fn the_bound_holds_for_every_token_and_along_the_order_at_any_condition() {
        let mut rng = ChaCha8Rng::seed_from_u64(41);
        let (mut worst_point, mut worst_step): (f64, f64) = (0.0, 0.0);
        for trial in 0..40 {
            let s = [1.0, 1e2, 1e4, 1e7, 1e8, 1e10, 1e20, 1e50][trial % 8];
            let p = squeeze(rng.random_range(-PI..PI), s, rng.random_range(-PI..PI));
            // The doubles' det may be of either sign once cond P passes 1 / eps: then P R of
            // R x (R = diag(1, -1)), as the plane order takes it.
            let reversed = exact_sign_det(&p) < 0.0;
            let p = if reversed {
                [p[0], -p[1], p[2], -p[3]]
            } else {
                p
            };
            let bound = StartBound::of(&p).unwrap();
            // Uniform start angles, each with copies a few ulps longer or turned (twins
            // whose order the sort may swap), and some right at the squeezed direction.
            let mut x: Vec<[f64; 2]> = Vec::new();
            for _ in 0..1500 {
                let t: f64 = rng.random_range(-PI..PI);
                let base = [t.cos(), t.sin()];
                x.push(base);
                x.push([
                    base[0] * (1.0 + f64::EPSILON),
                    base[1] * (1.0 + f64::EPSILON),
                ]);
                x.push([base[0], f64::from_bits(base[1].to_bits() + 2)]);
            }
            let squeezed = 0.5 * bound.minimiser.sin().atan2(bound.minimiser.cos()) * 2.0;
            x.push([squeezed.cos(), squeezed.sin()]);
            if reversed {
                x.iter_mut().for_each(|t| t[1] = -t[1]);
            }
            // The start order: by atan2, ties by index (as the plane order sorts).
            let mut order: Vec<usize> = (0..x.len()).collect();
            order.sort_by(|&i, &j| {
                let key = |k: usize| x[k][1].atan2(x[k][0]);
                key(i).total_cmp(&key(j)).then(i.cmp(&j))
            });
            let read: Vec<Reading> = order.iter().map(|&k| reading(&p, x[k])).collect();
            for (q, r) in read.iter().enumerate() {
                let e = bound.point(r);
                let error = (r.angle - exact_angle(&p, x[order[q]]) + PI).rem_euclid(2.0 * PI) - PI;
                if e.is_finite() {
                    worst_point = worst_point.max((error.abs() - 4.0 * f64::EPSILON) / e);
                }
            }
            // Along the order: no step back beyond the two tokens' bounds (once round).
            for q in 1..read.len() {
                let (a, b) = (&read[q - 1], &read[q]);
                let pair = bound.point(a) + bound.point(b);
                if pair < 0.5 {
                    let back = -(b.angle - a.angle + PI).rem_euclid(2.0 * PI) + PI;
                    if back > 0.0 && back < 1.0 {
                        worst_step = worst_step.max(back / pair);
                    }
                }
            }
        }
        eprintln!("worst error {worst_point} of the bound, worst step back {worst_step} of it");
        assert!(
            worst_point <= 0.5,
            "a token's error is {worst_point} of its bound"
        );
        assert!(
            worst_step <= 0.5,
            "a step back is {worst_step} of the pair's bound"
        );
    }

    #[test]
    fn a_range_is_bounded_by_its_ends_unless_it_holds_the_squeezed_direction() {
        let p = squeeze(0.3, 1e6, -1.1);
        let bound = StartBound::of(&p).unwrap();
        let at = |t: f64| reading(&p, [t.cos(), t.sin()]);
        let squeezed = bound.minimiser;
        // An arc short of the squeezed direction: its ends' bound, finite and small.
        let (a, b) = (at(squeezed + 0.1), at(squeezed + 1.0));
        let e = bound.range(&a, &b);
        assert!(e.is_finite() && e >= bound.point(&a).max(bound.point(&b)));
        assert!(e < 1e-9, "{e}");
        // Through the squeezed direction (or its opposite): the floor det / F, far larger.
        let wide = bound.range(&at(squeezed - 0.1), &at(squeezed + 0.1));
        let opposite = bound.range(&at(squeezed + PI - 0.1), &at(squeezed + PI + 0.1));
        assert!(wide > 1e3 * e && opposite > 1e3 * e, "{wide} {opposite}");
        // Every token of the short arc within its bound of the range.
        for k in 0..=100 {
            let r = at(squeezed + 0.1 + 0.009 * k as f64);
            assert!(bound.point(&r) <= e);
        }
    }

    #[test]
    fn the_determinant_has_the_exact_sign() {
        // det = 1 - (1 + eps)(1 - eps) = eps^2 > 0, which one product rounds to 0.
        let p = [1.0, 1.0 + f64::EPSILON, 1.0 - f64::EPSILON, 1.0];
        assert_eq!(p[0] * p[3] - p[1] * p[2], 0.0);
        assert_eq!(exact_sign_det(&p), f64::EPSILON * f64::EPSILON);
        let q = [1.0 + f64::EPSILON, 1.0, 1.0, 1.0 - f64::EPSILON];
        assert!(exact_sign_det(&q) < 0.0);
    }
}
