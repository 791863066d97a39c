//! Geodesics of the unit sphere: the exponential map and the parallel transport back along a
//! geodesic, for one token (docs/MATH.md §12, "The scheme").
//!
//! ```text
//! exp_x(v) = cos r x + sin r u,          r = |v|, u = v / r   (v tangent at x)
//! e_y      = -sin r x + cos r u          (the geodesic's unit velocity at y = exp_x(v))
//! back(w)  = w + <w, e_y> (sin r x + (1 - cos r) u)   (w tangent at y, moved to x)
//! ```
//!
//! The transport turns the component of w along the geodesic (e_y) into u and leaves the part
//! orthogonal to x and u alone: it is an isometry from the tangent space at y onto the one at x.
//! On the circle it is the identity on angular velocities, so a step made of these is a step of
//! the angle.

use crate::simd::dot;

/// The turn of a tangent vector v at x: its length r, cos r, sin r and sin(r) / r.
#[derive(Debug, Clone, Copy)]
pub struct Turn {
    r: f64,
    cos: f64,
    sin: f64,
    /// sin(r) / r (1 for r = 0), the factor that takes v to sin(r) u.
    sinc: f64,
    /// (1 - cos r) / r^2 (1/2 for r = 0), the factor that takes <w, v> v to (1 - cos r) <w, u> u.
    versinc: f64,
}

impl Turn {
    /// The turn of `v` (tangent at the point it will be applied to), one token at a time (the
    /// steps take their turns in blocks with `sin_cos_lanes`; this is their reference).
    #[cfg(test)]
    pub fn of(v: &[f64]) -> Turn {
        let r2 = dot(v, v);
        let r = r2.sqrt();
        let (sin, cos) = sin_cos(r, r2);
        Turn::with(r, r2, sin, cos)
    }

    /// The turn of a vector of length `r` (`r2` its squared length as summed, r = sqrt(r2))
    /// whose sine and cosine are known (from [`sin_cos_lanes`]).
    #[inline(always)]
    pub fn with(r: f64, r2: f64, sin: f64, cos: f64) -> Turn {
        if r < 1e-4 {
            // Taylor to r^4: the quotients lose digits for small r.
            return Turn {
                r,
                cos,
                sin,
                sinc: 1.0 - r2 / 6.0 + r2 * r2 / 120.0,
                versinc: 0.5 - r2 / 24.0 + r2 * r2 / 720.0,
            };
        }
        Turn {
            r,
            cos,
            sin,
            sinc: sin / r,
            versinc: (1.0 - cos) / r2,
        }
    }

    /// No turn (v = 0).
    pub const ZERO: Turn = Turn {
        r: 0.0,
        cos: 1.0,
        sin: 0.0,
        sinc: 1.0,
        versinc: 0.5,
    };

    /// out = exp_x(v) = cos r x + sin r u.
    #[cfg(test)]
    pub fn exp(&self, x: &[f64], v: &[f64], out: &mut [f64]) {
        for ((o, a), b) in out.iter_mut().zip(x).zip(v) {
            *o = self.cos * a + self.sinc * b;
        }
    }

    /// v <- exp_x(v) = cos r x + sin r u, in place.
    #[inline(always)]
    pub fn exp_in_place(&self, x: &[f64], v: &mut [f64]) {
        for (b, a) in v.iter_mut().zip(x) {
            *b = self.cos * a + self.sinc * *b;
        }
    }

    /// Moves `w` (tangent at y = exp_x(v)) back to x along the geodesic, in place.
    pub fn transport_back(&self, x: &[f64], v: &[f64], w: &mut [f64]) {
        // <w, e_y> r = -r sin r <w, x> + cos r <w, v>; the correction is
        // <w, e_y> (sin r x + (1 - cos r) u) = <w, e_y> r (sinc x + versinc v).
        let along = -self.r * self.sin * dot(w, x) + self.cos * dot(w, v);
        for ((c, a), b) in w.iter_mut().zip(x).zip(v) {
            *c += along * (self.sinc * a + self.versinc * b);
        }
    }
}

/// Below this angle sin and cos come from their Taylor polynomials: the first term left out
/// is at most 1/19! < 1e-17 and 1/20! < 1e-18 there (libm is called above, a turn of more than
/// one radian in one step).
const TAYLOR_ANGLE: f64 = 1.0;

/// (sin r, cos r) for r >= 0 with r2 = r^2: Horner's rule on the Taylor polynomials (to degree
/// 17 and 18 at most) when r <= [`TAYLOR_ANGLE`] (the step's turns; one pass instead of two libm calls),
/// libm otherwise. The steps use [`sin_cos_lanes`], which gives the same bits for blocks of
/// angles; this one-angle form is its reference in the tests.
#[cfg(test)]
pub fn sin_cos(r: f64, r2: f64) -> (f64, f64) {
    if r > TAYLOR_ANGLE {
        return r.sin_cos();
    }
    // sin r = r (1 - r^2/(2 3) (1 - r^2/(4 5) (1 - ...))), cos r = 1 - r^2/(1 2) (1 - r^2/(3 4) (...)).
    // Terms: the first left out is below 1e-19 (r <= 1/8, 5 terms), 1e-18 (r <= 1/2, 7 terms)
    // or 1e-17 (9 terms); the usual noise step turns by a few hundredths.
    let terms = if r <= 0.125 {
        5
    } else if r <= 0.5 {
        7
    } else {
        9
    };
    let (mut s, mut c) = (1.0, 1.0);
    for k in (0..terms).rev() {
        s = 1.0 - r2 * SIN_FACTORS[k] * s;
        c = 1.0 - r2 * COS_FACTORS[k] * c;
    }
    (r * s, c)
}

/// Angles handled together by [`sin_cos_lanes`] (two 4-wide vectors).
pub const LANES: usize = 8;

/// `sin_cos` of [`LANES`] angles at once, bit for bit: every lane runs the nine Horner steps
/// with the factors beyond its own number of terms multiplied by zero (a step s <- 1 - r^2 0 s
/// keeps s = 1 exactly, so the lane's first real step starts from the same 1), which makes one
/// straight loop over the lanes that the compiler turns into vector instructions, without the
/// branch on each angle's number of terms; angles above [`TAYLOR_ANGLE`] are then taken from
/// libm. `r >= 0`, `r2` = r^2 as the caller computed it.
#[inline(always)]
pub fn sin_cos_lanes(r: &[f64; LANES], r2: &[f64; LANES]) -> ([f64; LANES], [f64; LANES]) {
    // 1 where the lane uses the factors of k = 5, 6 (r > 1/8) or k = 7, 8 (r > 1/2), else 0.
    let seven = r.map(|v| if v > 0.125 { 1.0 } else { 0.0 });
    let nine = r.map(|v| if v > 0.5 { 1.0 } else { 0.0 });
    let (mut s, mut c) = ([1.0; LANES], [1.0; LANES]);
    for k in (0..9).rev() {
        let used = match k {
            0..=4 => [1.0; LANES],
            5 | 6 => seven,
            _ => nine,
        };
        for l in 0..LANES {
            s[l] = 1.0 - r2[l] * (SIN_FACTORS[k] * used[l]) * s[l];
            c[l] = 1.0 - r2[l] * (COS_FACTORS[k] * used[l]) * c[l];
        }
    }
    for l in 0..LANES {
        s[l] *= r[l];
    }
    if r.iter().any(|&v| v > TAYLOR_ANGLE) {
        for l in 0..LANES {
            if r[l] > TAYLOR_ANGLE {
                (s[l], c[l]) = r[l].sin_cos();
            }
        }
    }
    (s, c)
}

/// 1 / ((2k) (2k + 1)) for k = 1..=9.
const SIN_FACTORS: [f64; 9] = [
    1.0 / 6.0,
    1.0 / 20.0,
    1.0 / 42.0,
    1.0 / 72.0,
    1.0 / 110.0,
    1.0 / 156.0,
    1.0 / 210.0,
    1.0 / 272.0,
    1.0 / 342.0,
];

/// 1 / ((2k - 1) (2k)) for k = 1..=9.
const COS_FACTORS: [f64; 9] = [
    1.0 / 2.0,
    1.0 / 12.0,
    1.0 / 30.0,
    1.0 / 56.0,
    1.0 / 90.0,
    1.0 / 132.0,
    1.0 / 182.0,
    1.0 / 240.0,
    1.0 / 306.0,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn tangent(x: &[f64], v: &mut [f64]) {
        let a = dot(x, v);
        v.iter_mut().zip(x).for_each(|(c, b)| *c -= a * b);
    }

    fn unit(v: &mut [f64]) {
        let r = dot(v, v).sqrt();
        v.iter_mut().for_each(|c| *c /= r);
    }

    #[test]
    fn the_taylor_sin_cos_matches_libm() {
        for i in 0..=2000 {
            let r = 1.2 * i as f64 / 2000.0;
            let (s, c) = sin_cos(r, r * r);
            assert!(
                (s - r.sin()).abs() < 3e-16 && (c - r.cos()).abs() < 3e-16,
                "r = {r}"
            );
        }
    }

    #[test]
    fn sin_cos_lanes_gives_the_bits_of_sin_cos() {
        // Angles across every number of terms, the branch points and libm's range.
        let mut angles: Vec<f64> = (0..=1600).map(|i| 1.6 * i as f64 / 1600.0).collect();
        angles.extend([
            0.125,
            0.5,
            1.0,
            0.125f64.next_up(),
            0.5f64.next_up(),
            1e-300,
            7.0,
        ]);
        for block in angles.chunks(LANES) {
            let mut r = [0.0; LANES];
            r[..block.len()].copy_from_slice(block);
            let r2 = r.map(|v| v * v);
            let (s, c) = sin_cos_lanes(&r, &r2);
            for l in 0..LANES {
                let (es, ec) = sin_cos(r[l], r2[l]);
                assert_eq!(s[l].to_bits(), es.to_bits(), "sin {}", r[l]);
                assert_eq!(c[l].to_bits(), ec.to_bits(), "cos {}", r[l]);
            }
        }
    }

    #[test]
    fn the_exponential_map_on_the_circle_turns_the_angle() {
        // x = (cos a, sin a), v = s (-sin a, cos a): exp_x(v) = (cos(a + s), sin(a + s)).
        for (a, s) in [(0.3f64, 0.7f64), (2.0, -1.9), (-1.0, 1e-6), (0.5, 3.0)] {
            let x = [a.cos(), a.sin()];
            let v = [-s * a.sin(), s * a.cos()];
            let mut y = [0.0; 2];
            Turn::of(&v).exp(&x, &v, &mut y);
            let b = a + s;
            assert!((y[0] - b.cos()).abs() < 1e-15 && (y[1] - b.sin()).abs() < 1e-15);
        }
    }

    #[test]
    fn transport_back_is_an_isometry_onto_the_tangent_space_and_turns_the_velocity() {
        // In R^5: the transported vector is tangent at x, keeps its length, and the geodesic's
        // velocity at y goes to u (the velocity at x); a vector orthogonal to x and v stays.
        let mut x = [0.3, -0.2, 0.8, 0.1, 0.45];
        unit(&mut x);
        for scale in [1e-7, 0.01, 0.9, 2.5] {
            let mut v = [0.5, 0.1, -0.3, 0.7, -0.2];
            tangent(&x, &mut v);
            unit(&mut v);
            let u = v;
            v.iter_mut().for_each(|c| *c *= scale);
            let turn = Turn::of(&v);
            let mut y = [0.0; 5];
            turn.exp(&x, &v, &mut y);
            let mut w = [0.2, 0.9, -0.4, 0.3, 0.6];
            tangent(&y, &mut w);
            let before = dot(&w, &w);
            turn.transport_back(&x, &v, &mut w);
            assert!(dot(&w, &x).abs() < 1e-14, "r = {scale}: not tangent");
            assert!((dot(&w, &w) - before).abs() < 1e-14, "r = {scale}: length");
            let (s, c) = scale.sin_cos();
            let mut velocity: Vec<f64> = x.iter().zip(&u).map(|(a, b)| -s * a + c * b).collect();
            turn.transport_back(&x, &v, &mut velocity);
            let gap: f64 = velocity.iter().zip(&u).map(|(a, b)| (a - b).abs()).sum();
            assert!(gap < 1e-14, "r = {scale}: velocity {velocity:?} vs {u:?}");
        }
    }
}
