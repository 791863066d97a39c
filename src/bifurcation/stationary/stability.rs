//! The stability of a stationary density rho on the circle (A = V = I, docs/MATH.md §17.6):
//! the spectrum of the mean-field equation linearised at rho,
//!
//! ```text
//! L[delta] = - d_theta( delta v[rho] + rho v[delta] ) + T d_theta^2 delta,
//! v[f] = (1 / beta) d_theta (K * f)                        (usa)
//! v[f] = (1 / beta) d_theta (K * f / K * rho)  (linearised; v[rho] = (1 / beta) d_theta log K * rho)  (sa)
//! ```
//!
//! on the zero-mass perturbations, Galerkin on cos(k theta), sin(k theta), k = 1 .. N (N = 2K + 16
//! for the self-consistency's K modes, at most M/4 of the density's grid of M angles; the products are formed on the grid, derivatives and
//! convolutions on the modes). As rho is even, L maps cosines to cosines and sines to sines:
//! two real blocks. Rotations leave the equation invariant, so L[rho'] = 0: the translation
//! mode rho' (odd) is removed from the sine block by deflation (a Householder reflection Q with
//! Q e_1 = rho' / |rho'| makes Q^T B Q block-triangular; its lower block is L on the quotient by
//! rho'). The state is stable when every remaining eigenvalue has a negative real part.

use std::f64::consts::PI;

use nalgebra::{DMatrix, DVector};
use num_complex::Complex64;
use rustfft::FftPlanner;

use super::self_consistency::Family;
use crate::mean_field::Kernel;
use crate::model::bessel::scaled_bessel_i;

/// Spectral operations on a grid of M angles.
struct Grid {
    m: usize,
    fwd: std::sync::Arc<dyn rustfft::Fft<f64>>,
    inv: std::sync::Arc<dyn rustfft::Fft<f64>>,
}

impl Grid {
    fn new(m: usize) -> Self {
        let mut planner = FftPlanner::new();
        Grid {
            m,
            fwd: planner.plan_fft_forward(m),
            inv: planner.plan_fft_inverse(m),
        }
    }

    /// The wavenumber of FFT index i (the Nyquist mode as 0: dropped by derivatives).
    fn k(&self, i: usize) -> f64 {
        let m = self.m;
        if 2 * i == m {
            0.0
        } else if i < m / 2 {
            i as f64
        } else {
            i as f64 - m as f64
        }
    }

    /// Coefficients c_k (f = sum c_k e^{i k theta}) of grid values.
    fn analyse(&self, f: &[f64]) -> Vec<Complex64> {
        let mut c: Vec<Complex64> = f.iter().map(|&x| Complex64::new(x, 0.0)).collect();
        self.fwd.process(&mut c);
        let s = 1.0 / self.m as f64;
        c.iter_mut().for_each(|z| *z *= s);
        c
    }

    /// Grid values of sum_k mult(k) c_k e^{i k theta} (real part).
    fn synthesize(&self, c: &[Complex64], mult: impl Fn(f64) -> Complex64) -> Vec<f64> {
        let mut z: Vec<Complex64> = c
            .iter()
            .enumerate()
            .map(|(i, v)| v * mult(self.k(i)))
            .collect();
        self.inv.process(&mut z);
        z.iter().map(|v| v.re).collect()
    }
}

/// The linearised operator at a stationary density.
pub struct Linearised {
    grid: Grid,
    kernel: Kernel,
    beta: f64,
    t: f64,
    /// 2 pi I_|k|(beta) / beta (usa) or 2 pi I_|k| / I_0 (sa, the 1/beta is in `scale`) by
    /// FFT index.
    conv: Vec<f64>,
    rho: Vec<f64>,
    /// v[rho] on the grid.
    v_rho: Vec<f64>,
    /// K * rho on the grid (in the units of `conv`).
    k_rho: Vec<f64>,
}

impl Linearised {
    /// The operator at the density `rho` (values on M equally spaced angles) of `family` at
    /// (beta, T).
    pub fn new(family: &Family, beta: f64, t: f64, rho: &[f64]) -> Self {
        let m = rho.len();
        let grid = Grid::new(m);
        let mut i = vec![0.0; m / 2 + 1];
        scaled_bessel_i(beta, &mut i);
        let conv: Vec<f64> = (0..m)
            .map(|j| {
                let k = grid.k(j).abs() as usize;
                match family.kernel {
                    Kernel::Sa => 2.0 * PI * i[k] / i[0],
                    _ => 2.0 * PI * i[k] * beta.exp() / beta,
                }
            })
            .collect();
        let c = grid.analyse(rho);
        let kc: Vec<Complex64> = c.iter().zip(&conv).map(|(a, b)| a * b).collect();
        let k_rho = grid.synthesize(&kc, |_| Complex64::new(1.0, 0.0));
        let dk = grid.synthesize(&kc, |k| Complex64::new(0.0, k));
        let v_rho = match family.kernel {
            Kernel::Sa => dk.iter().zip(&k_rho).map(|(a, b)| a / b / beta).collect(),
            _ => dk,
        };
        Linearised {
            grid,
            kernel: family.kernel,
            beta,
            t,
            conv,
            rho: rho.to_vec(),
            v_rho,
            k_rho,
        }
    }

    /// `L[delta]` on the grid.
    pub fn apply(&self, delta: &[f64]) -> Vec<f64> {
        let g = &self.grid;
        let c = g.analyse(delta);
        let kc: Vec<Complex64> = c.iter().zip(&self.conv).map(|(a, b)| a * b).collect();
        let v_delta: Vec<f64> = match self.kernel {
            Kernel::Sa => {
                let k_delta = g.synthesize(&kc, |_| Complex64::new(1.0, 0.0));
                let q: Vec<f64> = k_delta
                    .iter()
                    .zip(&self.k_rho)
                    .map(|(a, b)| a / b)
                    .collect();
                let qc = g.analyse(&q);
                g.synthesize(&qc, |k| Complex64::new(0.0, k / self.beta))
            }
            _ => g.synthesize(&kc, |k| Complex64::new(0.0, k)),
        };
        let flux: Vec<f64> = (0..g.m)
            .map(|j| delta[j] * self.v_rho[j] + self.rho[j] * v_delta[j])
            .collect();
        let fc = g.analyse(&flux);
        let t = self.t;
        let mixed: Vec<Complex64> = fc
            .iter()
            .zip(&c)
            .enumerate()
            .map(|(i, (f, d))| {
                let k = g.k(i);
                -Complex64::new(0.0, k) * f - t * k * k * d
            })
            .collect();
        g.synthesize(&mixed, |_| Complex64::new(1.0, 0.0))
    }

    /// The cosine and sine blocks of L on k = 1 .. n.
    fn blocks(&self, n: usize) -> (DMatrix<f64>, DMatrix<f64>) {
        let m = self.grid.m;
        let theta = |j: usize| 2.0 * PI * j as f64 / m as f64;
        let mut cos_block = DMatrix::zeros(n, n);
        let mut sin_block = DMatrix::zeros(n, n);
        for k in 1..=n {
            let basis_c: Vec<f64> = (0..m).map(|j| (k as f64 * theta(j)).cos()).collect();
            let basis_s: Vec<f64> = (0..m).map(|j| (k as f64 * theta(j)).sin()).collect();
            let lc = self.grid.analyse(&self.apply(&basis_c));
            let ls = self.grid.analyse(&self.apply(&basis_s));
            for j in 1..=n {
                cos_block[(j - 1, k - 1)] = 2.0 * lc[j].re;
                sin_block[(j - 1, k - 1)] = -2.0 * ls[j].im;
            }
        }
        (cos_block, sin_block)
    }

    /// The largest real part of L's spectrum on the modes k <= n (at most M/4) without the
    /// translation mode; `None` when the density has no translation mode (uniform) or a number
    /// is not finite.
    pub fn leading_rate(&self, n: usize) -> Option<f64> {
        let n = n.min(self.grid.m / 4);
        let (cos_block, sin_block) = self.blocks(n);
        // rho' in sine coordinates: rho = sum a_k cos k theta -> rho' = sum -k a_k sin k theta.
        let c = self.grid.analyse(&self.rho);
        let s = DVector::from_iterator(n, (1..=n).map(|k| -(k as f64) * 2.0 * c[k].re));
        let quotient = deflate(&sin_block, &s)?;
        let rates = cos_block
            .complex_eigenvalues()
            .iter()
            .chain(quotient.complex_eigenvalues().iter())
            .map(|z| z.re)
            .collect::<Vec<f64>>();
        let top = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        rates.iter().all(|x| x.is_finite()).then_some(top)
    }
}

/// The block of `b` on the quotient by the direction `s`: Q^T B Q without its first row and
/// column, Q the Householder reflection with Q e_1 = s / |s|.
fn deflate(b: &DMatrix<f64>, s: &DVector<f64>) -> Option<DMatrix<f64>> {
    let n = s.len();
    let norm = s.norm();
    if !(norm > 0.0 && norm.is_finite()) {
        return None;
    }
    let mut v = s / norm;
    // v = e_1 + sign(u_0) u with u = s/|s| (no cancellation), Q = I - 2 v v^T / v^T v maps
    // e_1 to -sign(u_0) u.
    let sign = if v[0] >= 0.0 { 1.0 } else { -1.0 };
    v *= sign;
    v[0] += 1.0;
    let vv = v.dot(&v);
    let q = if vv > 0.0 {
        DMatrix::identity(n, n) - (&v * v.transpose()) * (2.0 / vv)
    } else {
        DMatrix::identity(n, n)
    };
    let full = q.transpose() * b * &q;
    Some(full.view((1, 1), (n - 1, n - 1)).into_owned())
}
