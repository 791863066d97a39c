//! The Ott–Antonsen coefficients of a two-parameter family as an exact quadratic in (p1, p2),
//! when they are one (docs/MATH.md §10.2).
//!
//! The coefficients (c0, c1, c2, g0, g1, g2) are sums of products a± v± beta; when the matrix
//! entries are affine in the parameters they are polynomials of degree at most 2 in (p1, p2).
//! In the box's coordinates s = (p - centre) / half-width,
//!
//! ```text
//! c(s) = a0 + a1 s1 + a2 s2 + a3 s1^2 + a4 s1 s2 + a5 s2^2,
//! ```
//!
//! fitted exactly on the stencil (0, 0), (±1, 0), (0, ±1), (1, 1) and accepted only if it
//! reproduces the scenario's own coefficients at four further points (inside and outside the
//! box) to 1e-12 relative. Then a continuation evaluates the quadratic instead of building the
//! scenario at every parameter value; otherwise (expressions such as sin(p)) it builds them.

use num_complex::Complex64;

/// The six complex coefficients.
pub type Coefficients = [Complex64; 6];

/// The coefficients as quadratics in the box's coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuadraticModel {
    centre: [f64; 2],
    half: [f64; 2],
    terms: [[Complex64; 6]; 6],
}

impl QuadraticModel {
    /// Fits `eval` over the box [lo, hi]; `None` when the coefficients are not such a quadratic.
    pub fn fit(
        eval: &dyn Fn([f64; 2]) -> Result<Coefficients, String>,
        lo: [f64; 2],
        hi: [f64; 2],
    ) -> Result<Option<Self>, String> {
        let centre = [(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0];
        let half = [(hi[0] - lo[0]).abs() / 2.0, (hi[1] - lo[1]).abs() / 2.0];
        if half.iter().any(|h| h.is_nan() || *h <= 0.0) {
            return Ok(None);
        }
        let at = |s: [f64; 2]| eval([centre[0] + half[0] * s[0], centre[1] + half[1] * s[1]]);
        let f00 = at([0.0, 0.0])?;
        let (fp1, fm1) = (at([1.0, 0.0])?, at([-1.0, 0.0])?);
        let (fp2, fm2) = (at([0.0, 1.0])?, at([0.0, -1.0])?);
        let f11 = at([1.0, 1.0])?;
        let mut terms = [[Complex64::new(0.0, 0.0); 6]; 6];
        for c in 0..6 {
            let a0 = f00[c];
            let a1 = (fp1[c] - fm1[c]) / 2.0;
            let a3 = (fp1[c] + fm1[c]) / 2.0 - a0;
            let a2 = (fp2[c] - fm2[c]) / 2.0;
            let a5 = (fp2[c] + fm2[c]) / 2.0 - a0;
            let a4 = f11[c] - (a0 + a1 + a2 + a3 + a5);
            terms[c] = [a0, a1, a2, a3, a4, a5];
        }
        let model = QuadraticModel {
            centre,
            half,
            terms,
        };
        let scale = 1.0 + terms.iter().flatten().map(|t| t.norm()).fold(0.0, f64::max);
        for s in [[-0.7, 0.4], [0.3, -0.9], [0.55, 0.65], [-1.3, 1.2]] {
            let p = [centre[0] + half[0] * s[0], centre[1] + half[1] * s[1]];
            let exact = eval(p)?;
            let fitted = model.at(p);
            let off = (0..6)
                .map(|c| (exact[c] - fitted[c]).norm())
                .fold(0.0, f64::max);
            if off.is_nan() || off > 1e-12 * scale {
                return Ok(None);
            }
        }
        Ok(Some(model))
    }

    /// The coefficients at p.
    pub fn at(&self, p: [f64; 2]) -> Coefficients {
        let s1 = (p[0] - self.centre[0]) / self.half[0];
        let s2 = (p[1] - self.centre[1]) / self.half[1];
        let m = [1.0, s1, s2, s1 * s1, s1 * s2, s2 * s2];
        let mut out = [Complex64::new(0.0, 0.0); 6];
        for (c, t) in self.terms.iter().enumerate() {
            out[c] = t.iter().zip(m).map(|(a, x)| a * x).sum();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quadratics_are_fitted_exactly_and_other_maps_refused() {
        let quad = |p: [f64; 2]| -> Result<Coefficients, String> {
            let z = Complex64::new(p[0] - 2.0 * p[1] * p[0], p[1] * p[1] + 0.5);
            Ok([
                z,
                z * 2.0,
                Complex64::new(p[0], 0.0),
                z.conj(),
                z * 3.0,
                Complex64::new(1.0, 0.0),
            ])
        };
        let m = QuadraticModel::fit(&quad, [-1.0, 0.5], [2.0, 3.0])
            .unwrap()
            .unwrap();
        let p = [0.37, 2.2];
        let (a, b) = (m.at(p), quad(p).unwrap());
        assert!((0..6).all(|c| (a[c] - b[c]).norm() < 1e-13));
        let sine = |p: [f64; 2]| -> Result<Coefficients, String> {
            Ok([Complex64::new(p[0].sin(), p[1]); 6])
        };
        assert!(QuadraticModel::fit(&sine, [-1.0, 0.5], [2.0, 3.0])
            .unwrap()
            .is_none());
    }
}
