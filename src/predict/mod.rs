//! Fixed points of the Ott–Antonsen ODE, their stability, the cluster positions on the
//! boundary circle, limit cycles, and the predicted label (d = 2 LSA).
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
//! dF/dconjR and dF/dy = i (dF/dR - dF/dconjR). Fixed points in the closed unit disk are found
//! by damped Newton from a polar grid of starts and deduplicated. On |R| = 1 (two antipodal
//! clusters) the circle is invariant and arg R moves by g(phi) = omega(e^{i phi}) +
//! Im(H(e^{i phi}) e^{-i phi}), a trigonometric polynomial of degree 2: its zeros are fixed
//! cluster positions; none means the clusters rotate forever (docs/MATH.md §3.6).
//!
//! A boundary zero phi* has two eigenvalues. Along the circle, g'(phi*). Across it, the
//! linearisation of d|R|/dt = Re(F conj(R)) / |R| at |R| = 1, which is the radial component
//! u^T J u of the Jacobian J with u = (cos phi*, sin phi*) (the term with Re(F conj(R)) vanishes
//! on the invariant circle). Since the tangent i e^{i phi*} is an eigenvector of J with
//! eigenvalue g'(phi*), the transverse eigenvalue is also tr J - g'(phi*). The zero attracts
//! (converged clusters) only when both are negative.
//!
//! The predicted label is that of the attractor the OA flow reaches from R(0): a stable fixed
//! point (|R| = 1: converged clusters; inside: an interior point), the boundary circle without
//! zeros of g (rotating clusters), or a limit cycle (oscillation; a circle |R| = const that
//! turns is a rotating interior wave).

pub mod command;

use nalgebra::Matrix2;
use num_complex::Complex64;
use serde::Serialize;

use crate::classify::{classify, Label};
use crate::integrate::{solve, Method, Problem};
use crate::observe::{Observer, OrderSeries};
use crate::reduced::{OttAntonsen, SecondHarmonic};

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
    /// What the eigenvalues say.
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

/// A periodic orbit of the OA ODE found by integration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LimitCycle {
    /// The label of the long-term behaviour.
    pub label: Label,
    /// Period of the orbit, when it oscillates.
    pub period: Option<f64>,
    /// Smallest |R2| on the orbit.
    pub r_abs_min: f64,
    /// Largest |R2| on the orbit.
    pub r_abs_max: f64,
    /// R2 where the path starts.
    #[serde(serialize_with = "complex_pair")]
    pub start: Complex64,
}

/// Everything `tokdyn predict` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// Fixed points in the closed unit disk.
    pub fixed_points: Vec<FixedPoint>,
    /// Zeros of g(phi) on the boundary circle.
    pub boundary_zeros: Vec<BoundaryZero>,
    /// g vanishes identically: every boundary point is a fixed point.
    pub boundary_continuum: bool,
    /// Periodic orbits reached from a ring of starts.
    pub limit_cycles: Vec<LimitCycle>,
    /// R2 where the path starts.
    #[serde(serialize_with = "complex_pair")]
    pub start: Complex64,
    /// R2 at the end of the path from R2(0).
    #[serde(serialize_with = "complex_pair")]
    pub end: Complex64,
    /// How long the path from R2(0) was integrated.
    pub horizon: f64,
    /// The label of the long-term behaviour.
    pub label: Label,
    /// Why that label.
    pub reason: String,
}

fn complex_pair<S: serde::Serializer>(z: &Complex64, s: S) -> Result<S::Ok, S::Error> {
    [z.re, z.im].serialize(s)
}

fn complex_pairs<S: serde::Serializer>(z: &[Complex64; 2], s: S) -> Result<S::Ok, S::Error> {
    [[z[0].re, z[0].im], [z[1].re, z[1].im]].serialize(s)
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
            let r = if (r.norm() - 1.0).abs() < 1e-9 {
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
                on_boundary: (r.norm() - 1.0).abs() < 1e-9,
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

fn oa_series(sh: &SecondHarmonic, start: Complex64, horizon: f64) -> Option<OrderSeries> {
    let oa = OttAntonsen::new(*sh);
    let samples = ((horizon * 4.0) as usize).clamp(400, 20_001);
    let problem = Problem {
        dynamics: &oa,
        initial_state: vec![start.re, start.im],
        t_end: horizon,
        samples,
    };
    let mut series = OrderSeries::new();
    let sol = solve(
        &problem,
        Method::Dop853 {
            rtol: 1e-10,
            atol: 1e-12,
        },
        &mut [&mut series as &mut dyn Observer],
    )
    .ok()?;
    sol.status.is_success().then_some(series)
}

/// Periodic orbits of the OA ODE reached from a ring of starts (radii 0.3, 0.6, 0.9), found by
/// integrating up to `horizon` and classifying the tail.
pub fn limit_cycles(sh: &SecondHarmonic, horizon: f64) -> Vec<LimitCycle> {
    let mut cycles: Vec<LimitCycle> = Vec::new();
    for radius in [0.3, 0.6, 0.9] {
        for m in 0..6 {
            let s0 = Complex64::from_polar(radius, std::f64::consts::TAU * m as f64 / 6.0 + 0.1);
            let Some(series) = oa_series(sh, s0, horizon) else {
                continue;
            };
            let c = classify(&series);
            if !matches!(c.label, Label::Oscillation | Label::RotatingInterior) {
                continue;
            }
            let cycle = LimitCycle {
                label: c.label,
                period: c.features.period,
                r_abs_min: c.features.r2_abs_tail_min,
                r_abs_max: c.features.r2_abs_tail_max,
                start: s0,
            };
            let known = cycles.iter().any(|q| {
                (q.r_abs_min - cycle.r_abs_min).abs() < 1e-3
                    && (q.r_abs_max - cycle.r_abs_max).abs() < 1e-3
            });
            if !known {
                cycles.push(cycle);
            }
        }
    }
    cycles
}

/// Fixed points, boundary zeros and the predicted label from R(0) = `start`, integrating the
/// OA ODE up to `horizon` (limit cycles: [`limit_cycles`], which costs more).
pub fn predict(sh: &SecondHarmonic, start: Complex64, horizon: f64) -> Prediction {
    let fixed = fixed_points(sh);
    let (zeros, continuum) = boundary_zeros(sh);
    let (end, label, reason) = match oa_series(sh, start, horizon) {
        None => (
            start,
            Label::Undetermined,
            "the OA ODE could not be integrated from R(0)".to_string(),
        ),
        Some(series) => {
            let c = classify(&series);
            let end = series.r2.last().copied().unwrap_or(start);
            let near = fixed
                .iter()
                .filter(|p| p.is_stable())
                .find(|p| (p.r - end).norm() < 1e-3);
            match (near, c.label) {
                _ if near.is_none_or(|p| !p.on_boundary)
                    && (end.norm() - 1.0).abs() < 1e-3
                    && zeros.iter().any(|z| z.attracting && (Complex64::from_polar(1.0, z.phi) - end).norm() < 1e-3) => (
                    end,
                    Label::ConvergedClusters,
                    format!("the OA flow from R(0) reaches the boundary zero phi = {:.6} of g, attracting along the circle and across it", end.arg()),
                ),
                (Some(p), _) if p.on_boundary => (
                    end,
                    Label::ConvergedClusters,
                    format!("the OA flow from R(0) reaches the stable boundary fixed point R = {:.6}{:+.6}i", p.r.re, p.r.im),
                ),
                (Some(p), _) => (
                    end,
                    Label::InteriorPoint,
                    format!("the OA flow from R(0) reaches the stable interior fixed point R = {:.6}{:+.6}i", p.r.re, p.r.im),
                ),
                (None, Label::RotatingClusters) if zeros.is_empty() && !continuum => (
                    end,
                    Label::RotatingClusters,
                    "the OA flow reaches |R| = 1, where g(phi) has no zero: the clusters rotate forever".to_string(),
                ),
                (None, label) => (end, label, format!("OA flow from R(0): {}", c.reason)),
            }
        }
    };
    Prediction {
        fixed_points: fixed,
        boundary_zeros: zeros,
        boundary_continuum: continuum,
        limit_cycles: Vec::new(),
        start,
        end,
        horizon,
        label,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Attention, Head, Kernel};
    use nalgebra::DMatrix;

    fn sh(a: [f64; 4], v: [f64; 4]) -> SecondHarmonic {
        let m = |x: [f64; 4]| DMatrix::from_row_slice(2, 2, &x);
        SecondHarmonic::new(&Attention::new(
            Kernel::Lsa,
            1.0,
            vec![Head { a: m(a), v: m(v) }],
        ))
        .unwrap()
    }

    #[test]
    fn jacobian_matches_finite_differences() {
        let s = sh([0.3, -1.1, 0.7, 0.4], [0.9, 0.2, -0.5, 0.6]);
        let r = Complex64::new(0.3, -0.2);
        let j = oa_jacobian(&s, r);
        let h = 1e-6;
        for (col, dr) in [(0, Complex64::new(h, 0.0)), (1, Complex64::new(0.0, h))] {
            let d = (s.ott_antonsen_rhs(r + dr) - s.ott_antonsen_rhs(r - dr)) / (2.0 * h);
            assert!((j[(0, col)] - d.re).abs() < 1e-8 && (j[(1, col)] - d.im).abs() < 1e-8);
        }
    }

    #[test]
    fn every_fixed_point_is_a_zero_and_the_boundary_ones_are_zeros_of_g() {
        let s = sh([0.6, -0.9, 0.4, 0.2], [0.9, 0.2, -0.5, 0.6]);
        let fps = fixed_points(&s);
        assert!(!fps.is_empty());
        let (zeros, continuum) = boundary_zeros(&s);
        assert!(!continuum);
        for p in &fps {
            assert!(s.ott_antonsen_rhs(p.r).norm() < 1e-11);
            if p.on_boundary {
                assert!(zeros
                    .iter()
                    .any(|z| (Complex64::from_polar(1.0, z.phi) - p.r).norm() < 1e-6));
            }
        }
        for z in &zeros {
            assert!(s.boundary_drift(z.phi).abs() < 1e-10);
        }
    }

    #[test]
    fn boundary_zeros_have_both_eigenvalues_of_the_boundary_fixed_points() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        for _ in 0..20 {
            let s = sh(
                [next(), next(), next(), next()],
                [next(), next(), next(), next()],
            );
            let fps = fixed_points(&s);
            for z in &boundary_zeros(&s).0 {
                let j = oa_jacobian(&s, Complex64::from_polar(1.0, z.phi));
                assert!((z.transverse - (j.trace() - z.slope)).abs() < 1e-6);
                let Some(p) = fps
                    .iter()
                    .find(|p| (Complex64::from_polar(1.0, z.phi) - p.r).norm() < 1e-6)
                else {
                    continue;
                };
                if z.slope.abs() > 1e-6 && z.transverse.abs() > 1e-6 {
                    assert_eq!(z.attracting, p.is_stable(), "{z:?} {p:?}");
                }
            }
        }
    }

    #[test]
    fn with_v_identity_every_antipodal_pair_is_fixed() {
        // V = I: two antipodal clusters on any axis are stationary, so g vanishes identically.
        let s = sh([0.6, -0.9, 0.4, 0.2], [1.0, 0.0, 0.0, 1.0]);
        assert!(boundary_zeros(&s).1);
    }

    #[test]
    fn case1_interior_point_and_clustering() {
        // V = I, A with negative definite symmetric part: a stable interior fixed point.
        let interior = sh([-0.5, 0.3, -0.3, -0.4], [1.0, 0.0, 0.0, 1.0]);
        let p = predict(&interior, Complex64::new(0.3, 0.1), 200.0);
        assert_eq!(p.label, Label::InteriorPoint, "{}", p.reason);
        // tr A > 0: clustering.
        let clusters = sh([1.0, -0.5, 0.8, 0.3], [1.0, 0.0, 0.0, 1.0]);
        let p = predict(&clusters, Complex64::new(0.3, 0.1), 200.0);
        assert_eq!(p.label, Label::ConvergedClusters, "{}", p.reason);
    }

    #[test]
    fn case4_oscillation_has_a_limit_cycle_or_center() {
        let s = sh([1.0, 0.0, 0.0, 1.0], [0.2, 1.0, -1.0, -0.2]);
        let p = predict(&s, Complex64::new(0.3, 0.0), 200.0);
        assert_eq!(p.label, Label::Oscillation, "{}", p.reason);
        assert!(!limit_cycles(&s, 200.0).is_empty());
    }
}
