//! Periodic orbits of the planar Ott–Antonsen field by multiple shooting (docs/MATH.md §10.3).
//!
//! A cycle of period T at parameter p is given by m points u_0..u_{m-1} of R^2 with
//!
//! ```text
//! phi(u_i, T/m; p) = u_{(i+1) mod m},   i = 0..m-1          (2m equations)
//! F(u_ref, p_ref) . (u_0 - u_ref) = 0                          (phase: a Poincaré section)
//! ```
//!
//! phi the flow of F(., p), integrated by the orbits of `predict::orbit` (the crate's DOP853;
//! `tokdyn predict` integrates its cycles there too). The derivatives of phi come from the
//! variational equations, integrated with the orbit:
//!
//! ```text
//! Phi' = J(x) Phi, Phi(0) = I;   w' = J(x) w + F_p(x), w(0) = 0;   s' = tr J(x), s(0) = 0,
//! d phi/du = Phi,   d phi/dT = F(phi) / m,   d phi/dp = w.
//! ```
//!
//! The monodromy M = Phi_{m-1} ... Phi_0 has the eigenvalues 1 (along the flow) and the
//! nontrivial Floquet multiplier mu; in the plane det M = mu = exp(sum_i s_i) (Liouville), so
//! mu comes without cancellation from the integral of tr J, and tr M - 1 is an independent
//! check. F_p is exact: the field is linear in the six coefficients, so F_p is the field of
//! their derivative.

use nalgebra::{DMatrix, DVector, Matrix2, Vector2};
use num_complex::Complex64;

use crate::predict::oa_jacobian;
use crate::predict::orbit::{Field, Orbit};
use crate::reduced::SecondHarmonic;

/// Most accepted steps of one segment.
const MAX_STEPS: u64 = 200_000;

/// The OA field at one parameter value with its parameter derivative.
#[derive(Debug, Clone, Copy)]
pub struct PlanarField {
    sh: SecondHarmonic,
    /// The coefficients' derivative in p (the field of these is F_p).
    dsh: SecondHarmonic,
}

fn complex(x: Vector2<f64>) -> Complex64 {
    Complex64::new(x[0], x[1])
}

impl PlanarField {
    /// The field of `sh` whose coefficients change with p at the rate `dsh`.
    pub fn new(sh: SecondHarmonic, dsh: SecondHarmonic) -> Self {
        PlanarField { sh, dsh }
    }

    /// F(x).
    pub fn f(&self, x: Vector2<f64>) -> Vector2<f64> {
        let r = self.sh.ott_antonsen_rhs(complex(x));
        Vector2::new(r.re, r.im)
    }

    /// J(x) = DF(x).
    pub fn j(&self, x: Vector2<f64>) -> Matrix2<f64> {
        oa_jacobian(&self.sh, complex(x))
    }

    /// F_p(x).
    pub fn fp(&self, x: Vector2<f64>) -> Vector2<f64> {
        let r = self.dsh.ott_antonsen_rhs(complex(x));
        Vector2::new(r.re, r.im)
    }

    /// A fixed point near `x` by Newton (None when Newton fails).
    pub fn equilibrium(&self, mut x: Vector2<f64>) -> Option<Vector2<f64>> {
        for _ in 0..40 {
            let step = self.j(x).lu().solve(&self.f(x))?;
            x -= step;
            if !x.iter().all(|v| v.is_finite()) {
                return None;
            }
            if step.norm() < 1e-13 {
                return (self.f(x).norm() < 1e-10).then_some(x);
            }
        }
        None
    }
}

/// One shooting segment: where it ends and its derivatives.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    /// phi(u, tau).
    pub end: Vector2<f64>,
    /// d phi / du.
    pub phi: Matrix2<f64>,
    /// d phi / dp.
    pub w: Vector2<f64>,
    /// The integral of tr J over the segment.
    pub trace_integral: f64,
}

impl PlanarField {
    /// The flow with its variational equations, integrated by the orbits `tokdyn predict`
    /// follows too (`predict::orbit`).
    fn flow(&self) -> Field {
        Field {
            sh: self.sh,
            sign: 1.0,
            variational: Some(self.dsh),
        }
    }
}

/// Integrates the segment from u over the time tau > 0; None when the integrator fails.
pub fn shoot(field: &PlanarField, u: Vector2<f64>, tau: f64) -> Option<Segment> {
    if !(tau > 0.0 && tau.is_finite()) {
        return None;
    }
    let flow = field.flow();
    let mut orbit = Orbit::until(&flow, complex(u), tau, MAX_STEPS);
    while orbit.t() < tau {
        if !orbit.step() {
            return None;
        }
    }
    let y = orbit.y();
    Some(Segment {
        end: Vector2::new(y[0], y[1]),
        phi: Matrix2::new(y[2], y[4], y[3], y[5]),
        w: Vector2::new(y[6], y[7]),
        trace_integral: y[8],
    })
}

/// Points (t, x(t)) of the orbit from u over [0, tau): the times tau j / k (j = 0..k-1) and
/// the quarters of every integrator step (dense output), in time order, so that fast
/// excursions are resolved however long the slow parts take.
pub fn sample(
    field: &PlanarField,
    u: Vector2<f64>,
    tau: f64,
    k: usize,
) -> Option<Vec<(f64, Vector2<f64>)>> {
    let flow = field.flow();
    let mut orbit = Orbit::until(&flow, complex(u), tau, MAX_STEPS);
    let mut out = vec![(0.0, u)];
    let mut next_grid = 1;
    while orbit.t() < tau {
        let t_old = orbit.t();
        if !orbit.step() {
            return None;
        }
        let t_new = orbit.t().min(tau);
        let mut times: Vec<f64> = (1..=4)
            .map(|q| t_old + (t_new - t_old) * q as f64 / 4.0)
            .filter(|t| *t < tau)
            .collect();
        while next_grid < k && tau * next_grid as f64 / k as f64 <= t_new {
            times.push(tau * next_grid as f64 / k as f64);
            next_grid += 1;
        }
        times.sort_by(f64::total_cmp);
        for t in times {
            let y = orbit.at(t);
            out.push((t, Vector2::new(y[0], y[1])));
        }
    }
    Some(out)
}

/// The unknowns of a cycle: y = (u_0, .., u_{m-1}, T, p) in R^{2m + 2}.
pub struct Unknowns;

impl Unknowns {
    /// The number of segments of `y`.
    pub fn segments(y: &DVector<f64>) -> usize {
        (y.len() - 2) / 2
    }

    /// u_i.
    pub fn point(y: &DVector<f64>, i: usize) -> Vector2<f64> {
        Vector2::new(y[2 * i], y[2 * i + 1])
    }

    /// T.
    pub fn period(y: &DVector<f64>) -> f64 {
        y[y.len() - 2]
    }

    /// p.
    pub fn parameter(y: &DVector<f64>) -> f64 {
        y[y.len() - 1]
    }
}

/// The section of the phase condition: through `point`, normal to `normal`.
#[derive(Debug, Clone, Copy)]
pub struct Section {
    /// A point of the section.
    pub point: Vector2<f64>,
    /// Its normal (the flow there).
    pub normal: Vector2<f64>,
}

/// The shooting residual (2m periodicity rows and the phase row) and its Jacobian
/// ((2m + 1) x (2m + 2)) at y, with the segments; None when an integration fails.
pub fn shooting_system(
    field: &PlanarField,
    y: &DVector<f64>,
    section: &Section,
) -> Option<(DVector<f64>, DMatrix<f64>, Vec<Segment>)> {
    let m = Unknowns::segments(y);
    let n = 2 * m + 2;
    let period = Unknowns::period(y);
    let tau = period / m as f64;
    let mut r = DVector::zeros(2 * m + 1);
    let mut a = DMatrix::zeros(2 * m + 1, n);
    let mut segments = Vec::with_capacity(m);
    for i in 0..m {
        let seg = shoot(field, Unknowns::point(y, i), tau)?;
        let next = (i + 1) % m;
        let gap = seg.end - Unknowns::point(y, next);
        let f_end = field.f(seg.end) / m as f64;
        for row in 0..2 {
            r[2 * i + row] = gap[row];
            for col in 0..2 {
                a[(2 * i + row, 2 * i + col)] += seg.phi[(row, col)];
                a[(2 * i + row, 2 * next + col)] -= if row == col { 1.0 } else { 0.0 };
            }
            a[(2 * i + row, n - 2)] = f_end[row];
            a[(2 * i + row, n - 1)] = seg.w[row];
        }
        segments.push(seg);
    }
    let u0 = Unknowns::point(y, 0);
    r[2 * m] = section.normal.dot(&(u0 - section.point));
    a[(2 * m, 0)] = section.normal[0];
    a[(2 * m, 1)] = section.normal[1];
    Some((r, a, segments))
}

/// The nontrivial Floquet multiplier from the segments: exp of the integral of tr J, the
/// check tr M - 1 from the monodromy M, and the norm of M (the check's error grows with it).
pub fn multipliers(segments: &[Segment]) -> (f64, f64, f64) {
    let integral: f64 = segments.iter().map(|s| s.trace_integral).sum();
    let monodromy = segments.iter().fold(Matrix2::identity(), |m, s| s.phi * m);
    (integral.exp(), monodromy.trace() - 1.0, monodromy.norm())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The radial normal form z' = (a + i w) z - |z|^2 z as OA coefficients is not available;
    /// instead check the variational equations against finite differences on a random field.
    #[test]
    fn the_variational_equations_are_the_derivatives_of_the_flow() {
        let sh = SecondHarmonic::from_coefficients([
            Complex64::new(0.2, 0.7),
            Complex64::new(-0.3, 0.1),
            Complex64::new(0.4, -0.2),
            Complex64::new(0.1, 0.3),
            Complex64::new(-0.5, 0.2),
            Complex64::new(0.3, 0.4),
        ]);
        let dsh = SecondHarmonic::from_coefficients([Complex64::new(0.1, 0.2); 6]);
        let field = PlanarField::new(sh, dsh);
        let u = Vector2::new(0.2, -0.1);
        let tau = 1.7;
        let seg = shoot(&field, u, tau).unwrap();
        let h = 1e-6;
        for k in 0..2 {
            let mut e = Vector2::zeros();
            e[k] = h;
            let fd = (shoot(&field, u + e, tau).unwrap().end
                - shoot(&field, u - e, tau).unwrap().end)
                / (2.0 * h);
            assert!((fd - seg.phi.column(k)).norm() < 1e-7, "{fd} {}", seg.phi);
        }
        // d/dp: the field of sh + t dsh.
        let shifted = |t: f64| {
            let (a, b) = (sh.coefficients(), dsh.coefficients());
            let c = [
                a.0 + b.0 * t,
                a.1 + b.1 * t,
                a.2 + b.2 * t,
                a.3 + b.3 * t,
                a.4 + b.4 * t,
                a.5 + b.5 * t,
            ];
            PlanarField::new(SecondHarmonic::from_coefficients(c), dsh)
        };
        let fd = (shoot(&shifted(h), u, tau).unwrap().end
            - shoot(&shifted(-h), u, tau).unwrap().end)
            / (2.0 * h);
        assert!((fd - seg.w).norm() < 1e-7);
        // Liouville: det Phi = exp(integral of tr J).
        assert!((seg.phi.determinant() - seg.trace_integral.exp()).abs() < 1e-9);
    }
}
