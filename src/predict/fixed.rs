//! Fixed points of the Ott–Antonsen ODE in the closed unit disk and the zeros of the boundary
//! drift g (docs/MATH.md §3.6, §6.1).
//!
//! The OA field F(R) = i omega(R) R + (H(R) - conj(H(R)) R^2) / 2 is a cubic polynomial in
//! (Re R, Im R). With omega(R) = Im(c0 + c1 conj(R) + c2 R) and H(R) = g0 + g1 R + g2 conj(R),
//! its Wirtinger derivatives are
//!
//! ```text
//! dF/dR     = i (c2 - conj(c1)) / (2i) R + i omega + (g1 - conj(g2) R^2) / 2 - conj(H) R
//! dF/dconjR = i (c1 - conj(c2)) / (2i) R + (g2 - conj(g1) R^2) / 2
//! ```
//!
//! and the real Jacobian of (Re F, Im F) w.r.t. (Re R, Im R) has columns dF/dx = dF/dR +
//! dF/dconjR and dF/dy = i (dF/dR - dF/dconjR). Fixed points are found by damped Newton from a
//! polar grid of starts and deduplicated. On |R| = 1 the circle is invariant and arg R moves by
//! g(phi) = omega(e^{i phi}) + Im(H(e^{i phi}) e^{-i phi}); a zero phi* has the eigenvalue
//! g'(phi*) along the circle and u^T J u = tr J - g'(phi*) across it (u the radial unit vector).

use nalgebra::Matrix2;
use num_complex::Complex64;
use serde::Serialize;

use super::{complex_pair, complex_pairs};

/// A fixed point this close to |R| = 1 lies on the circle.
const ON_CIRCLE: f64 = 1e-6;
use crate::reduced::SecondHarmonic;

/// Stability of a fixed point from its two eigenvalues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stability {
    /// Both real parts negative.
    Stable,
    /// Both real parts positive.
    Unstable,
    /// One of each sign.
    Saddle,
    /// A purely imaginary pair: closed orbits around it in the linearisation.
    Center,
    /// A real part is zero (to 1e-9) otherwise: linearisation does not decide.
    NonHyperbolic,
}

/// A fixed point of the OA ODE.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FixedPoint {
    /// R2 at the fixed point.
    #[serde(serialize_with = "complex_pair")]
    pub r: Complex64,
    /// Eigenvalues of the Jacobian.
    #[serde(serialize_with = "complex_pairs")]
    pub eigenvalues: [Complex64; 2],
    /// Stability from the two eigenvalues.
    pub stability: Stability,
    /// |R| = 1: two antipodal clusters.
    pub on_boundary: bool,
}

impl FixedPoint {
    /// Whether it attracts every nearby state.
    pub fn is_stable(&self) -> bool {
        self.stability == Stability::Stable
    }
}

/// A zero of g on the boundary circle: a fixed position of two antipodal clusters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoundaryZero {
    /// arg R2 of the cluster axis (twice the clusters' angle).
    pub phi: f64,
    /// g'(phi): negative means the position attracts along the circle.
    pub slope: f64,
    /// The eigenvalue across the circle: d|R|/dt linearised at |R| = 1, u^T J u with u the
    /// radial unit vector; negative means nearby interior states approach the boundary.
    pub transverse: f64,
    /// Both eigenvalues negative: the two clusters at this axis attract every nearby state.
    pub attracting: bool,
}

/// The transverse eigenvalue at the boundary point e^{i phi}: the radial component of the
/// Jacobian, u^T J u with u = (cos phi, sin phi).
pub fn transverse_rate(sh: &SecondHarmonic, phi: f64) -> f64 {
    let j = oa_jacobian(sh, Complex64::from_polar(1.0, phi));
    let (c, s) = (phi.cos(), phi.sin());
    c * (j[(0, 0)] * c + j[(0, 1)] * s) + s * (j[(1, 0)] * c + j[(1, 1)] * s)
}

/// The Jacobian of (Re R', Im R') with respect to (Re R, Im R).
///
/// ```
/// use num_complex::Complex64;
/// use nalgebra::DMatrix;
/// use tokdyn::model::{Attention, Head, Kernel};
/// use tokdyn::predict::oa_jacobian;
/// use tokdyn::reduced::SecondHarmonic;
/// let i2 = DMatrix::identity(2, 2);
/// let sh = SecondHarmonic::new(&Attention::new(Kernel::Lsa, 1.0, vec![Head { a: i2.clone(), v: i2 }])).unwrap();
/// // A = V = I: R' = (R - |R|^2 R) / 2, so the Jacobian at 0 is I / 2.
/// let j = oa_jacobian(&sh, Complex64::new(0.0, 0.0));
/// assert!((j[(0, 0)] - 0.5).abs() < 1e-15 && (j[(1, 1)] - 0.5).abs() < 1e-15);
/// ```
pub fn oa_jacobian(sh: &SecondHarmonic, r: Complex64) -> Matrix2<f64> {
    let (c0, c1, c2, g0, g1, g2) = sh.coefficients();
    let i = Complex64::i();
    let omega = (c0 + c1 * r.conj() + c2 * r).im;
    let h = g0 + g1 * r + g2 * r.conj();
    let domega_dr = (c2 - c1.conj()) / (2.0 * i);
    let domega_drbar = (c1 - c2.conj()) / (2.0 * i);
    let df_dr = i * domega_dr * r + i * omega + (g1 - g2.conj() * r * r) * 0.5 - h.conj() * r;
    let df_drbar = i * domega_drbar * r + (g2 - g1.conj() * r * r) * 0.5;
    let dx = df_dr + df_drbar;
    let dy = i * (df_dr - df_drbar);
    Matrix2::new(dx.re, dy.re, dx.im, dy.im)
}

fn eigenvalues(j: &Matrix2<f64>) -> [Complex64; 2] {
    let tr = j.trace();
    let det = j.determinant();
    let disc = Complex64::new(tr * tr / 4.0 - det, 0.0).sqrt();
    [tr / 2.0 + disc, tr / 2.0 - disc]
}

fn stability(ev: &[Complex64; 2]) -> Stability {
    let tol = 1e-9;
    let neg = ev.iter().filter(|e| e.re < -tol).count();
    let pos = ev.iter().filter(|e| e.re > tol).count();
    match (neg, pos) {
        (2, _) => Stability::Stable,
        (_, 2) => Stability::Unstable,
        (1, 1) => Stability::Saddle,
        (0, 0) if ev[0].im.abs() > tol => Stability::Center,
        _ => Stability::NonHyperbolic,
    }
}

/// Damped Newton from `r`; the root if it converges inside the closed disk.
fn newton(sh: &SecondHarmonic, mut r: Complex64) -> Option<Complex64> {
    for _ in 0..100 {
        let f = sh.ott_antonsen_rhs(r);
        if f.norm() < 1e-14 {
            break;
        }
        let j = oa_jacobian(sh, r);
        let inv = j.try_inverse()?;
        let step = inv * nalgebra::Vector2::new(f.re, f.im);
        let mut delta = Complex64::new(step[0], step[1]);
        if delta.norm() > 0.5 {
            delta *= 0.5 / delta.norm();
        }
        r -= delta;
        if !(r.re.is_finite() && r.im.is_finite()) || r.norm() > 1.5 {
            return None;
        }
    }
    (sh.ott_antonsen_rhs(r).norm() < 1e-11 && r.norm() <= 1.0 + 1e-9).then_some(r)
}

/// The fixed points of the OA ODE in the closed unit disk.
pub fn fixed_points(sh: &SecondHarmonic) -> Vec<FixedPoint> {
    let mut roots: Vec<Complex64> = Vec::new();
    let mut starts = vec![Complex64::new(0.0, 0.0)];
    for k in 1..=10 {
        let radius = k as f64 / 10.0;
        for m in 0..24 {
            starts.push(Complex64::from_polar(
                radius,
                std::f64::consts::TAU * m as f64 / 24.0,
            ));
        }
    }
    for start in starts {
        if let Some(r) = newton(sh, start) {
            // A double root on the circle (an eigenvalue 0) converges only linearly.
            let r = if (r.norm() - 1.0).abs() < ON_CIRCLE {
                r / r.norm()
            } else {
                r
            };
            if roots.iter().all(|q| (q - r).norm() > 1e-7) {
                roots.push(r);
            }
        }
    }
    roots.sort_by(|a, b| {
        a.norm()
            .total_cmp(&b.norm())
            .then(a.arg().total_cmp(&b.arg()))
    });
    roots
        .into_iter()
        .map(|r| {
            let ev = eigenvalues(&oa_jacobian(sh, r));
            FixedPoint {
                r,
                eigenvalues: ev,
                stability: stability(&ev),
                on_boundary: (r.norm() - 1.0).abs() < ON_CIRCLE,
            }
        })
        .collect()
}

/// The zeros of g(phi) on [0, 2 pi), and whether g vanishes identically.
pub fn boundary_zeros(sh: &SecondHarmonic) -> (Vec<BoundaryZero>, bool) {
    let m = 3600;
    let tau = std::f64::consts::TAU;
    let values: Vec<f64> = (0..=m)
        .map(|k| sh.boundary_drift(tau * k as f64 / m as f64))
        .collect();
    let scale = values.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    if scale < 1e-12 {
        return (Vec::new(), true);
    }
    let slope = |phi: f64| {
        let h = 1e-6;
        (sh.boundary_drift(phi + h) - sh.boundary_drift(phi - h)) / (2.0 * h)
    };
    let mut zeros = Vec::new();
    for k in 0..m {
        let (a, b) = (tau * k as f64 / m as f64, tau * (k + 1) as f64 / m as f64);
        let (ga, gb) = (values[k], values[k + 1]);
        if ga == 0.0 {
            zeros.push(a);
        } else if ga * gb < 0.0 {
            let (mut lo, mut hi, mut glo) = (a, b, ga);
            for _ in 0..60 {
                let mid = 0.5 * (lo + hi);
                let gm = sh.boundary_drift(mid);
                if gm * glo <= 0.0 {
                    hi = mid;
                } else {
                    lo = mid;
                    glo = gm;
                }
            }
            zeros.push(0.5 * (lo + hi));
        } else if k > 0 {
            // A double zero (tangency) shows as a local minimum of |g| that touches zero.
            let prev = values[k - 1].abs();
            if ga.abs() <= prev && ga.abs() <= gb.abs() && ga.abs() < 1e-9 * scale {
                zeros.push(a);
            }
        }
    }
    let zeros = zeros
        .into_iter()
        .map(|phi| {
            let phi = if phi > std::f64::consts::PI {
                phi - tau
            } else {
                phi
            };
            let (slope, transverse) = (slope(phi), transverse_rate(sh, phi));
            BoundaryZero {
                phi,
                slope,
                transverse,
                attracting: slope < 0.0 && transverse < 0.0,
            }
        })
        .collect();
    (zeros, false)
}

/// The boundary circle |R| = 1 as a periodic orbit, when g has no zero: the clusters rotate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BoundaryCircle {
    /// The time the axis takes to go once round, integral of d phi / |g(phi)|.
    pub period: f64,
    /// The Floquet multiplier across the circle, exp(integral of tr J(e^{i phi}) / |g(phi)| d phi):
    /// below 1 the rotating clusters attract the interior states near the circle.
    pub multiplier: f64,
}

/// The period and transverse multiplier of the boundary circle when g has no zero (the
/// trapezoidal rule, spectrally accurate for this smooth periodic integrand).
pub fn boundary_circle(sh: &SecondHarmonic) -> Option<BoundaryCircle> {
    let m = 4096;
    let tau = std::f64::consts::TAU;
    let (mut period, mut exponent) = (0.0, 0.0);
    let mut sign = 0.0;
    for k in 0..m {
        let phi = tau * k as f64 / m as f64;
        let g = sh.boundary_drift(phi);
        if g == 0.0 || (sign != 0.0 && g.signum() != sign) {
            return None;
        }
        sign = g.signum();
        let tr = oa_jacobian(sh, Complex64::from_polar(1.0, phi)).trace();
        period += 1.0 / g.abs();
        exponent += tr / g.abs();
    }
    let h = tau / m as f64;
    Some(BoundaryCircle {
        period: period * h,
        multiplier: (exponent * h).exp(),
    })
}
