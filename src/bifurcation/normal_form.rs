//! The Ott–Antonsen field as a cubic polynomial in (R, conj R), its derivatives of every order,
//! and the normal-form coefficients of its codimension-one bifurcations (docs/MATH.md §10.1).
//!
//! With omega and H affine in R and conj R, R' = i omega(R) R + (H - conj(H) R^2) / 2 is
//!
//! ```text
//! P(z) = sum a_jk z^j zbar^k,   a00 = g0/2,  a10 = (c0 - conj c0)/2 + g1/2,  a01 = g2/2,
//!        a20 = (c2 - conj c1)/2 - conj(g0)/2,  a11 = (c1 - conj c2)/2,
//!        a30 = -conj(g2)/2,  a21 = -conj(g1)/2.
//! ```
//!
//! On x = (Re z, Im z) the field is F = (Re P, Im P) = ((P + P*)/2, (P - P*)/(2i)) with P* the
//! polynomial of conjugated coefficients in swapped variables, and its n-th derivative along
//! directions u_1..u_n (complex vectors allowed: the forms extend C-linearly) is
//!
//! ```text
//! D^n P[u_1..u_n] = sum over S ⊆ {1..n} of d^{n-|S|}_z d^{|S|}_zbar P · prod_{i∉S} zeta(u_i) · prod_{i∈S} eta(u_i),
//! zeta(u) = u1 + i u2,   eta(u) = u1 - i u2.
//! ```
//!
//! From these: J = DF, B = D^2 F, C = D^3 F exactly (no finite differences), and
//!
//! - the first Lyapunov coefficient at a Hopf point (tr J = 0, det J = omega^2 > 0), with
//!   J q = i omega q, J^T p = -i omega p, <p, q> = conj(p)^T q = 1, <q, q> = 1:
//!   `l1 = Re( <p, C(q,q,qbar)> - 2 <p, B(q, J^-1 B(q,qbar))> + <p, B(qbar, (2 i omega - J)^-1 B(q,q))> ) / (2 omega)`;
//! - the quadratic coefficient of a fold (det J = 0): J q = 0, J^T p = 0, p . q = 1,
//!   `a = p . B(q, q) / 2` (a cusp where it vanishes).

use nalgebra::{Matrix2, Vector2};
use num_complex::Complex64;

use crate::reduced::SecondHarmonic;

/// A vector of C^2 (a complex direction in the real plane).
pub type CVector = [Complex64; 2];

const ZERO: Complex64 = Complex64 { re: 0.0, im: 0.0 };

/// The OA field of one parameter value as a cubic polynomial in (z, zbar).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubicField {
    /// a[j][k]: the coefficient of z^j zbar^k (j + k <= 3).
    a: [[Complex64; 4]; 4],
    /// The same for P* (conjugated coefficients, swapped variables).
    b: [[Complex64; 4]; 4],
}

/// j (j - 1) ... (j - p + 1).
fn falling(j: usize, p: usize) -> f64 {
    (0..p).map(|i| (j - i) as f64).product()
}

impl CubicField {
    /// The polynomial of a second-harmonic model's OA field.
    pub fn new(sh: &SecondHarmonic) -> Self {
        let (c0, c1, c2, g0, g1, g2) = sh.coefficients();
        let mut a = [[ZERO; 4]; 4];
        a[0][0] = g0 * 0.5;
        a[1][0] = (c0 - c0.conj()) * 0.5 + g1 * 0.5;
        a[0][1] = g2 * 0.5;
        a[2][0] = (c2 - c1.conj()) * 0.5 - g0.conj() * 0.5;
        a[1][1] = (c1 - c2.conj()) * 0.5;
        a[3][0] = -g2.conj() * 0.5;
        a[2][1] = -g1.conj() * 0.5;
        let mut b = [[ZERO; 4]; 4];
        for (j, row) in a.iter().enumerate() {
            for (k, c) in row.iter().enumerate() {
                b[k][j] = c.conj();
            }
        }
        CubicField { a, b }
    }

    /// d^p_z d^q_zbar of the polynomial `coef` at the real point x.
    fn partial(coef: &[[Complex64; 4]; 4], x: Vector2<f64>, p: usize, q: usize) -> Complex64 {
        let z = Complex64::new(x[0], x[1]);
        let mut sum = ZERO;
        for (j, row) in coef.iter().enumerate().skip(p) {
            for (k, c) in row.iter().enumerate().skip(q) {
                if *c != ZERO {
                    sum += c
                        * falling(j, p)
                        * falling(k, q)
                        * z.powu((j - p) as u32)
                        * z.conj().powu((k - q) as u32);
                }
            }
        }
        sum
    }

    /// D^n of the polynomial `coef` at x along `dirs`.
    fn form_of(coef: &[[Complex64; 4]; 4], x: Vector2<f64>, dirs: &[CVector]) -> Complex64 {
        let n = dirs.len();
        let i = Complex64::i();
        let mut sum = ZERO;
        for mask in 0..(1usize << n) {
            let q = mask.count_ones() as usize;
            let d = Self::partial(coef, x, n - q, q);
            if d == ZERO {
                continue;
            }
            let factor: Complex64 = dirs
                .iter()
                .enumerate()
                .map(|(m, u)| {
                    if mask >> m & 1 == 1 {
                        u[0] - i * u[1]
                    } else {
                        u[0] + i * u[1]
                    }
                })
                .product();
            sum += d * factor;
        }
        sum
    }

    /// D^n F(x)\[dirs\] as a vector of C^2 (real for real directions).
    pub fn form(&self, x: Vector2<f64>, dirs: &[CVector]) -> CVector {
        let p = Self::form_of(&self.a, x, dirs);
        let ps = Self::form_of(&self.b, x, dirs);
        [(p + ps) * 0.5, (p - ps) / Complex64::new(0.0, 2.0)]
    }

    /// F(x).
    pub fn field(&self, x: Vector2<f64>) -> Vector2<f64> {
        let f = self.form(x, &[]);
        Vector2::new(f[0].re, f[1].re)
    }

    /// J(x) = DF(x).
    pub fn jacobian(&self, x: Vector2<f64>) -> Matrix2<f64> {
        let c1 = self.form(x, &[real(Vector2::new(1.0, 0.0))]);
        let c2 = self.form(x, &[real(Vector2::new(0.0, 1.0))]);
        Matrix2::new(c1[0].re, c2[0].re, c1[1].re, c2[1].re)
    }

    /// dJ/dx_k(x): the matrix v -> B(e_k, v).
    pub fn jacobian_derivative(&self, x: Vector2<f64>, k: usize) -> Matrix2<f64> {
        let mut e = Vector2::zeros();
        e[k] = 1.0;
        let c1 = self.form(x, &[real(e), real(Vector2::new(1.0, 0.0))]);
        let c2 = self.form(x, &[real(e), real(Vector2::new(0.0, 1.0))]);
        Matrix2::new(c1[0].re, c2[0].re, c1[1].re, c2[1].re)
    }
}

/// A real vector as a complex one.
pub fn real(v: Vector2<f64>) -> CVector {
    [Complex64::new(v[0], 0.0), Complex64::new(v[1], 0.0)]
}

fn conj(v: CVector) -> CVector {
    [v[0].conj(), v[1].conj()]
}

/// <p, q> = conj(p)^T q.
fn inner(p: CVector, q: CVector) -> Complex64 {
    p[0].conj() * q[0] + p[1].conj() * q[1]
}

/// Solves (J + s I) y = r for complex s and r (2 x 2, by Cramer's rule); None when singular.
fn solve_shifted(j: &Matrix2<f64>, s: Complex64, r: CVector) -> Option<CVector> {
    let (a, b, c, d) = (j[(0, 0)] + s, j[(0, 1)], j[(1, 0)], j[(1, 1)] + s);
    let det = a * d - b * c;
    (det.norm() > 0.0).then(|| [(d * r[0] - b * r[1]) / det, (a * r[1] - c * r[0]) / det])
}

/// An eigenvector of J for the eigenvalue `lambda` (a null vector of J - lambda I).
fn eigenvector(j: &Matrix2<f64>, lambda: Complex64) -> CVector {
    let (a, b, c, d) = (j[(0, 0)] - lambda, j[(0, 1)], j[(1, 0)], j[(1, 1)] - lambda);
    // The null vector of the larger row.
    if a.norm() + b.abs() >= c.abs() + d.norm() {
        [Complex64::new(b, 0.0), -a]
    } else {
        [-d, Complex64::new(c, 0.0)]
    }
}

/// The first Lyapunov coefficient at a Hopf point x of `field` (tr J = 0 there; the value at
/// a point nearby uses omega^2 = det J). None unless det J > 0.
pub fn first_lyapunov(field: &CubicField, x: Vector2<f64>) -> Option<f64> {
    let j = field.jacobian(x);
    let det = j.determinant();
    if det.is_nan() || det <= 0.0 {
        return None;
    }
    let omega = det.sqrt();
    let iw = Complex64::new(0.0, omega);
    // The imaginary pair of the nearest Hopf point: J's own eigenvalue when tr J != 0 is
    // tr/2 + i omega'; the formula uses J as given with the eigenvalue i omega of its
    // trace-free part.
    let j0 = j - Matrix2::identity() * (j.trace() / 2.0);
    let mut q = eigenvector(&j0, iw);
    let norm = inner(q, q).re.sqrt();
    q = [q[0] / norm, q[1] / norm];
    let jt = j0.transpose();
    let mut p = eigenvector(&jt, -iw);
    let s = inner(p, q);
    if s.norm() == 0.0 {
        return None;
    }
    p = [p[0] / s.conj(), p[1] / s.conj()];
    let qb = conj(q);
    let c = field.form(x, &[q, q, qb]);
    let b_qqb = field.form(x, &[q, qb]);
    let b_qq = field.form(x, &[q, q]);
    let h11 = solve_shifted(&j0, ZERO, b_qqb)?;
    let h20 = solve_shifted(&(-j0), 2.0 * iw, b_qq)?;
    let term = inner(p, c) - 2.0 * inner(p, field.form(x, &[q, h11]))
        + inner(p, field.form(x, &[qb, h20]));
    let l1 = term.re / (2.0 * omega);
    l1.is_finite().then_some(l1)
}

/// The quadratic normal-form coefficient a = p . B(q, q) / 2 of a fold at x (J q = 0,
/// J^T p = 0, p . q = 1), with q oriented along `orient` (q . orient >= 0) so that the sign
/// is continuous along a curve. None when J has no null direction to speak of (J = 0).
pub fn fold_coefficient(
    field: &CubicField,
    x: Vector2<f64>,
    orient: Vector2<f64>,
) -> Option<(f64, Vector2<f64>)> {
    let j = field.jacobian(x);
    let null = |m: &Matrix2<f64>| -> Vector2<f64> {
        let (a, b, c, d) = (m[(0, 0)], m[(0, 1)], m[(1, 0)], m[(1, 1)]);
        if a.abs() + b.abs() >= c.abs() + d.abs() {
            Vector2::new(b, -a)
        } else {
            Vector2::new(-d, c)
        }
    };
    let mut q = null(&j);
    if q.norm() == 0.0 {
        return None;
    }
    q /= q.norm();
    if q.dot(&orient) < 0.0 {
        q = -q;
    }
    let mut p = null(&j.transpose());
    let s = p.dot(&q);
    if s == 0.0 {
        return None;
    }
    p /= s;
    let b = field.form(x, &[real(q), real(q)]);
    Some((0.5 * (p[0] * b[0].re + p[1] * b[1].re), q))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Attention, Head, Kernel};
    use crate::predict::oa_jacobian;
    use nalgebra::DMatrix;

    fn random_sh(seed: u64) -> SecondHarmonic {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut m = || DMatrix::from_fn(2, 2, |_, _| rng.random_range(-1.0..1.0));
        let (a, v) = (m(), m());
        SecondHarmonic::new(&Attention::new(Kernel::Lsa, 1.3, vec![Head { a, v }])).unwrap()
    }

    #[test]
    fn the_polynomial_is_the_field_and_its_derivatives_are_exact() {
        for seed in 0..5 {
            let sh = random_sh(seed);
            let f = CubicField::new(&sh);
            let x = Vector2::new(0.31, -0.42);
            let r = sh.ott_antonsen_rhs(Complex64::new(x[0], x[1]));
            assert!((f.field(x) - Vector2::new(r.re, r.im)).norm() < 1e-14);
            assert!((f.jacobian(x) - oa_jacobian(&sh, Complex64::new(x[0], x[1]))).norm() < 1e-14);
            // Second and third derivatives against central differences of the lower ones.
            let h = 1e-5;
            for k in 0..2 {
                let mut e = Vector2::zeros();
                e[k] = h;
                let fd = (f.jacobian(x + e) - f.jacobian(x - e)) / (2.0 * h);
                assert!((fd - f.jacobian_derivative(x, k)).norm() < 1e-8);
                let u = Vector2::new(0.3, 0.7);
                let c = f.form(x, &[real(e / h), real(u), real(u)]);
                let bp = f.form(x + e, &[real(u), real(u)]);
                let bm = f.form(x - e, &[real(u), real(u)]);
                for i in 0..2 {
                    assert!((c[i].re - (bp[i].re - bm[i].re) / (2.0 * h)).abs() < 1e-8);
                    assert!(c[i].im.abs() < 1e-15);
                }
            }
        }
    }

    /// l1 = s / w... in the normalisation <q, q> = 1 it is 2 s / w (|z|^2 = 2 |w_q|^2).
    #[test]
    fn l1_of_the_radial_normal_form() {
        // A = V = I: R' = (R - |R|^2 R) / 2 (no Hopf point); build the normal form by hand
        // instead: P(z) = i w z + s z^2 zbar.
        for (w, s) in [(1.5, -0.4), (0.7, 0.9)] {
            let mut a = [[ZERO; 4]; 4];
            a[1][0] = Complex64::new(0.0, w);
            a[2][1] = Complex64::new(s, 0.0);
            let mut b = [[ZERO; 4]; 4];
            for (j, row) in a.iter().enumerate() {
                for (k, c) in row.iter().enumerate() {
                    b[k][j] = c.conj();
                }
            }
            let f = CubicField { a, b };
            let l1 = first_lyapunov(&f, Vector2::zeros()).unwrap();
            assert!((l1 - 2.0 * s / w).abs() < 1e-12, "{l1}");
        }
    }
}
