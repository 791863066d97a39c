//! The stability of an axisymmetric stationary density rho(u), u = <x, e>, on S^{d-1} (d >= 3,
//! A = V = I, docs/MATH.md §17.6) against axisymmetric perturbations: the mean-field equation
//! linearised at rho,
//!
//! ```text
//! L[delta] = - div( delta grad Phi[rho] + rho grad Phi'[rho] delta ) + T Laplacian delta,
//! Phi'[rho] delta = (1 / beta) K * delta (usa),  (1 / beta) K * delta / K * rho (sa),
//! ```
//!
//! by Galerkin on p_1 .. p_n (the orthonormal Gegenbauer polynomials p_l = sqrt(N(d, l)) P_l;
//! zero mass), in the weak form: for axisymmetric f, g, grad f . grad g = (1 - u^2) f'(u) g'(u),
//! so
//!
//! ```text
//! <p_k, L[p_l]> = <(1 - u^2) p_k' J_l> - T k (k + d - 2) [k = l],
//! J_l = p_l Phi_u[rho] + rho d_u(Phi'[rho] p_l),   K * p_l = c_l p_l (Funk–Hecke),
//! ```
//!
//! `<.>` the mean against the normalised surface measure (Gauss sums in u); the Gram matrix is
//! the identity, so this matrix is the generator on the coefficients (the similar matrix
//! diag(N) A of the P_l's basis has entries of scales N(d, k) apart, which spoiled its
//! eigenvalues in high dimension). At the uniform state its eigenvalues are
//! l (l + d - 2)(c_l / beta - T). Rotations of the bump away from e
//! are not axisymmetric and are not in this block: the stability read here is on axisymmetric
//! perturbations only (the rotation mode is neutral there).

use nalgebra::DMatrix;

use super::self_consistency::{scaled_coefficients, Family};
use crate::mean_field::gegenbauer;
use crate::mean_field::Kernel;

/// p_l(u) and p_l'(u) for l = 0 ..= lmax (orthonormal).
fn values_and_slopes(d: usize, lmax: usize, u: f64) -> (Vec<f64>, Vec<f64>) {
    let (mut p, mut dp) = (vec![0.0; lmax + 1], vec![0.0; lmax + 1]);
    gegenbauer::orthonormal_polynomials(d, lmax, u, &mut p, &mut dp);
    (p, dp)
}

/// The largest real part of the spectrum of L on P_1 .. P_n at the density `rho` (values at the
/// `rho.len()` Gauss nodes of S^{d-1}, mean 1) of `family` at (beta, T); n is at most a quarter
/// of the nodes. `None` when a number is not finite.
pub fn leading_rate(family: &Family, beta: f64, t: f64, rho: &[f64], n: usize) -> Option<f64> {
    let d = family.d;
    let m = rho.len();
    let n = n.min(m / 4).max(1);
    let (u, w) = gegenbauer::nodes(d, m);
    let total: f64 = w.iter().sum();
    let q: Vec<f64> = w.iter().map(|x| x / total).collect();
    let mut c = scaled_coefficients(d, beta, n);
    if family.kernel != Kernel::Sa {
        let e = beta.exp();
        c.iter_mut().for_each(|x| *x *= e);
    }
    let table: Vec<(Vec<f64>, Vec<f64>)> = u.iter().map(|&x| values_and_slopes(d, n, x)).collect();
    // K * rho and its u-derivative at the nodes from rho's moments <rho p_l>.
    let moments: Vec<f64> = (0..=n)
        .map(|l| (0..m).map(|j| q[j] * rho[j] * table[j].0[l]).sum())
        .collect();
    let (mut k_rho, mut k_rho_u) = (vec![0.0; m], vec![0.0; m]);
    for j in 0..m {
        for l in 0..=n {
            let a = c[l] * moments[l];
            k_rho[j] += a * table[j].0[l];
            k_rho_u[j] += a * table[j].1[l];
        }
    }
    let sa = family.kernel == Kernel::Sa;
    if sa
        && k_rho
            .iter()
            .any(|x| x.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater))
    {
        return None;
    }
    let phi_u: Vec<f64> = (0..m)
        .map(|j| {
            if sa {
                k_rho_u[j] / (beta * k_rho[j])
            } else {
                k_rho_u[j] / beta
            }
        })
        .collect();
    let mut b = DMatrix::zeros(n, n);
    for l in 1..=n {
        let j_l: Vec<f64> = (0..m)
            .map(|j| {
                let (p, dp) = (&table[j].0, &table[j].1);
                let dphi = if sa {
                    c[l] / beta * (dp[l] / k_rho[j] - p[l] * k_rho_u[j] / (k_rho[j] * k_rho[j]))
                } else {
                    c[l] / beta * dp[l]
                };
                p[l] * phi_u[j] + rho[j] * dphi
            })
            .collect();
        for k in 1..=n {
            let mut a: f64 = (0..m)
                .map(|j| q[j] * (1.0 - u[j] * u[j]) * table[j].1[k] * j_l[j])
                .sum();
            if k == l {
                a -= t * (k * (k + d - 2)) as f64;
            }
            b[(k - 1, l - 1)] = a;
        }
    }
    let rates: Vec<f64> = b.complex_eigenvalues().iter().map(|z| z.re).collect();
    let top = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    rates.iter().all(|x| x.is_finite()).then_some(top)
}
