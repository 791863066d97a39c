//! The self-consistency of a stationary density on the circle (A = V = I, docs/MATH.md §17.6):
//!
//! ```text
//! rho = e^{g} / Z,   g(theta) = (2 / (beta T)) sum_{k in modes} I_k(beta) R_k cos(k theta)      (usa)
//!                    g(theta) = (1 / (beta T)) log(1 + 2 sum_k (I_k / I_0)(beta) R_k cos(k theta)) (sa)
//! F(R, p) = R - m(R, p),   m_k = integral cos(k theta) rho(theta) dtheta
//! ```
//!
//! for a density symmetric about theta = 0, rho = (1 / 2 pi)(1 + 2 sum_k R_k cos(k theta)): the
//! convolution with e^{beta cos} multiplies the k-th mode by 2 pi I_k(beta), so `Phi[rho]` is g
//! up to a constant. The unknowns are the moments R_k of a list of modes (all k <= K, or the
//! multiples l, 2l, ... of an l-fold symmetric state); K is where I_K / I_1 falls below 1e-16.
//! The integrals are sums over M equally spaced angles (exact to round-off for a resolved
//! density: the trapezoid rule on a periodic analytic function). F, its Jacobian in R and its
//! derivative in the parameter (T or beta) are exact expressions (covariances under rho).
//!
//! On S^{d-1}, d >= 3, the same map for axisymmetric densities rho(u), u = <x, e>, against the
//! normalised surface measure: rho = 1 + sum_l N(d, l) R_l P_l(u) with R_l = <P_l(u)>, so
//! K * rho = c_0 + sum_l N(d, l) c_l R_l P_l(u) by Funk–Hecke (`mean_field::gegenbauer`: P_l the
//! Gegenbauer polynomials with P_l(1) = 1, c_l the Funk–Hecke coefficients):
//!
//! ```text
//! g(u) = (1 / (beta T)) sum_l N(d, l) c_l R_l P_l(u)                 (usa)
//! g(u) = (1 / (beta T)) log(1 + sum_l N(d, l) (c_l / c_0) R_l P_l(u))  (sa)
//! ```
//!
//! the integrals being Gauss sums for the weight (1 - u^2)^{(d-3)/2}. Both are one form,
//! K * rho = a_0 + sum_k a_k R_k b_k with the basis b_k = cos(k theta) or P_k(u) and
//! a_k = 2 I_k (circle: a_0 = I_0) or N(d, k) c_k (a_0 = c_0); beta-derivatives
//! I_k' = (I_{k-1} + I_{k+1}) / 2, c_l' = ((l + d - 2) c_{l+1} + l c_{l-1}) / (2 l + d - 2).

use std::f64::consts::PI;

use nalgebra::{DMatrix, DVector};

use crate::mean_field::gegenbauer;
use crate::mean_field::Kernel;
use crate::model::bessel::scaled_bessel_i;

/// The parameter followed by a continuation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parameter {
    /// `noise.temperature`.
    Temperature,
    /// `model.beta`.
    Beta,
}

/// The fixed data of a family: the kernel, the parameter followed and the other's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Family {
    /// usa or sa.
    pub kernel: Kernel,
    /// The parameter p.
    pub parameter: Parameter,
    /// beta when p = T, T when p = beta.
    pub other: f64,
    /// The dimension d of the sphere S^{d-1} (2: the circle; d >= 3: axisymmetric densities).
    pub d: usize,
}

impl Family {
    /// (beta, T) at parameter value p.
    pub fn beta_t(&self, p: f64) -> (f64, f64) {
        match self.parameter {
            Parameter::Temperature => (self.other, p),
            Parameter::Beta => (p, self.other),
        }
    }

    /// The coupling c_l / beta (usa) or c_l / (beta c_0) (sa) of mode l at beta: the
    /// uniform state's l-th growth rate is l (l + d - 2) (coupling - T) (docs/MATH.md §17.2).
    pub fn coupling(&self, beta: f64, l: usize) -> f64 {
        let i = scaled_coefficients(self.d, beta, l);
        match self.kernel {
            Kernel::Sa => i[l] / i[0] / beta,
            _ => i[l] * beta.exp() / beta,
        }
    }
}

/// The largest number of modes kept.
const MAX_MODES: usize = 400;

/// e^{-beta} c_l(beta), l = 0 ..= `lmax`: I_l (d = 2) or the Funk–Hecke coefficients (d >= 3).
pub fn scaled_coefficients(d: usize, beta: f64, lmax: usize) -> Vec<f64> {
    if d == 2 {
        let mut i = vec![0.0; lmax + 1];
        scaled_bessel_i(beta, &mut i);
        i
    } else {
        gegenbauer::funk_hecke_scaled(d, beta, lmax)
    }
}

/// The highest mode K: c_K(beta) / c_1(beta) < 1e-16 (at least 8).
pub fn highest_mode(d: usize, beta: f64) -> usize {
    let i = scaled_coefficients(d, beta, MAX_MODES + 1);
    (8..=MAX_MODES)
        .find(|&k| i[k] < 1e-16 * i[1])
        .unwrap_or(MAX_MODES)
}

/// The grid for K modes: on the circle a power of two of angles, at least 512 and 8 K; on
/// S^{d-1} half of that in Gauss nodes (exact for polynomials of degree below 8 K).
pub fn grid_for(d: usize, modes: usize) -> usize {
    let m = (8 * modes).max(512).next_power_of_two();
    if d == 2 {
        m
    } else {
        m / 2
    }
}

/// The self-consistency at one parameter value: the moments' map and its derivatives.
pub struct Evaluation {
    /// F(R, p).
    pub f: DVector<f64>,
    /// dF/dR.
    pub jac: DMatrix<f64>,
    /// dF/dp.
    pub fp: DVector<f64>,
    /// The density on the grid (mass 1 against dtheta on the circle, against the normalised
    /// surface measure on S^{d-1}).
    pub rho: Vec<f64>,
    /// The relative weight of the density's mode M/4 (circle) or M/2 (S^{d-1}): its
    /// resolution on the grid.
    pub tail: f64,
}

/// The self-consistency map of a family for the modes `ks` on a grid of `m` angles.
pub struct SelfConsistency {
    family: Family,
    ks: Vec<usize>,
    m: usize,
    /// b_k at the nodes for each k in ks (rows), j < m: cos(k theta_j) or P_k(u_j).
    cos: Vec<Vec<f64>>,
    /// cos(m/4 theta_j) or the orthonormal p_{m/2}(u_j) = sqrt(N(d, m/2)) P_{m/2}(u_j) (the
    /// resolution probe; with P_{m/2} itself its mean is of order N(d, m/2)^{-1/2} and the probe
    /// never fires in high dimension).
    probe: Vec<f64>,
    /// Quadrature weights of the nodes (sum 1).
    weights: Vec<f64>,
    /// The density's normalisation: 1 / 2 pi (circle, against dtheta) or 1.
    norm: f64,
}

impl SelfConsistency {
    /// The map of `family` for modes `ks` on `m` angles (circle) or Gauss nodes (d >= 3).
    pub fn new(family: Family, ks: Vec<usize>, m: usize) -> Self {
        if family.d != 2 {
            return Self::on_sphere(family, ks, m);
        }
        let theta = |j: usize| 2.0 * PI * j as f64 / m as f64;
        let cos = ks
            .iter()
            .map(|&k| (0..m).map(|j| (k as f64 * theta(j)).cos()).collect())
            .collect();
        let probe = (0..m).map(|j| ((m / 4) as f64 * theta(j)).cos()).collect();
        SelfConsistency {
            family,
            ks,
            m,
            cos,
            probe,
            weights: vec![1.0 / m as f64; m],
            norm: 1.0 / (2.0 * PI),
        }
    }

    /// The map on the m Gauss nodes of S^{d-1}'s axisymmetric functions.
    fn on_sphere(family: Family, ks: Vec<usize>, m: usize) -> Self {
        let d = family.d;
        let (u, w) = gegenbauer::nodes(d, m);
        let total: f64 = w.iter().sum();
        let top = ks.iter().copied().max().unwrap_or(0).max(m / 2);
        let mut p = vec![0.0; top + 1];
        let (mut orthonormal, mut slope) = (vec![0.0; m / 2 + 1], vec![0.0; m / 2 + 1]);
        let mut cos = vec![vec![0.0; m]; ks.len()];
        let mut probe = vec![0.0; m];
        for (j, &x) in u.iter().enumerate() {
            gegenbauer::polynomials(d, top, x, &mut p);
            for (row, &k) in cos.iter_mut().zip(&ks) {
                row[j] = p[k];
            }
            gegenbauer::orthonormal_polynomials(d, m / 2, x, &mut orthonormal, &mut slope);
            probe[j] = orthonormal[m / 2];
        }
        SelfConsistency {
            family,
            ks,
            m,
            cos,
            probe,
            weights: w.iter().map(|x| x / total).collect(),
            norm: 1.0,
        }
    }

    /// The nodes' quadrature weights (sum 1).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The modes.
    pub fn modes(&self) -> &[usize] {
        &self.ks
    }

    /// Grid points.
    pub fn grid(&self) -> usize {
        self.m
    }

    /// The family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The kernel's coefficients at beta times e^{-beta}: (a_k, a_k' for k in ks, a_0, a_0')
    /// (module docs).
    fn coefficients(&self, beta: f64) -> (Vec<f64>, Vec<f64>, f64, f64) {
        let d = self.family.d;
        let top = self.ks.iter().copied().max().unwrap_or(0) + 2;
        let c = scaled_coefficients(d, beta, top);
        if d == 2 {
            let ik = self.ks.iter().map(|&k| 2.0 * c[k]).collect();
            let dik = self.ks.iter().map(|&k| c[k - 1] + c[k + 1]).collect();
            return (ik, dik, c[0], c[1]);
        }
        let (mut a, mut da) = (Vec::new(), Vec::new());
        for &l in &self.ks {
            let n = gegenbauer::dimension(d, l);
            let lf = l as f64;
            let dc =
                ((lf + d as f64 - 2.0) * c[l + 1] + lf * c[l - 1]) / (2.0 * lf + d as f64 - 2.0);
            a.push(n * c[l]);
            da.push(n * dc);
        }
        (a, da, c[0], c[1])
    }

    /// F, its derivatives and the density at (R, p); `None` where the state is no density
    /// (sa: K * rho <= 0 somewhere) or a number is not finite.
    pub fn evaluate(&self, r: &DVector<f64>, p: f64) -> Option<Evaluation> {
        let (beta, t) = self.family.beta_t(p);
        let (ik, dik, i0, i1) = self.coefficients(beta);
        let n = self.ks.len();
        let m = self.m;
        // g on the grid, dg/dR_k = a_k(theta) (row k), dg/dp.
        let mut g = vec![0.0; m];
        let mut dg_dr = vec![vec![0.0; m]; n];
        let mut dg_dp = vec![0.0; m];
        match self.family.kernel {
            Kernel::Sa => {
                let scale = 1.0 / (beta * t);
                let ratio: Vec<f64> = ik.iter().map(|x| x / i0).collect();
                // d/dbeta (a_k / a_0) = (a_k' a_0 - a_k a_0') / a_0^2.
                let d_ratio: Vec<f64> = ik
                    .iter()
                    .zip(&dik)
                    .map(|(a, da)| (da * i0 - a * i1) / (i0 * i0))
                    .collect();
                for j in 0..m {
                    let mut q = 1.0;
                    let mut dq = 0.0;
                    for k in 0..n {
                        q += ratio[k] * r[k] * self.cos[k][j];
                        dq += d_ratio[k] * r[k] * self.cos[k][j];
                    }
                    if q.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                        return None;
                    }
                    g[j] = scale * q.ln();
                    for k in 0..n {
                        dg_dr[k][j] = scale * ratio[k] * self.cos[k][j] / q;
                    }
                    dg_dp[j] = match self.family.parameter {
                        Parameter::Temperature => -g[j] / t,
                        Parameter::Beta => -g[j] / beta + scale * dq / q,
                    };
                }
            }
            _ => {
                let e = beta.exp();
                for k in 0..n {
                    let a = e * ik[k] / (beta * t);
                    // d/dbeta of a_k / (beta T).
                    let da = e / t * (dik[k] / beta - ik[k] / (beta * beta));
                    for j in 0..m {
                        let c = self.cos[k][j];
                        g[j] += a * r[k] * c;
                        dg_dr[k][j] = a * c;
                        dg_dp[j] += match self.family.parameter {
                            Parameter::Temperature => -a * r[k] * c / t,
                            Parameter::Beta => da * r[k] * c,
                        };
                    }
                }
            }
        }
        let top = g.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !top.is_finite() {
            return None;
        }
        let w: Vec<f64> = g
            .iter()
            .zip(&self.weights)
            .map(|(x, q)| (x - top).exp() * q)
            .collect();
        let z: f64 = w.iter().sum();
        let mean = |h: &[f64]| -> f64 { w.iter().zip(h).map(|(a, b)| a * b).sum::<f64>() / z };
        let moments: Vec<f64> = self.cos.iter().map(|c| mean(c)).collect();
        let mut f = DVector::zeros(n);
        let mut jac = DMatrix::identity(n, n);
        let mut fp = DVector::zeros(n);
        for k in 0..n {
            f[k] = r[k] - moments[k];
            // cov(cos k, h) = E[(cos k - m_k) h].
            let centred: Vec<f64> = self.cos[k].iter().map(|c| c - moments[k]).collect();
            let cov = |h: &[f64]| -> f64 {
                w.iter()
                    .zip(&centred)
                    .zip(h)
                    .map(|((a, b), c)| a * b * c)
                    .sum::<f64>()
                    / z
            };
            for i in 0..n {
                jac[(k, i)] -= cov(&dg_dr[i]);
            }
            fp[k] = -cov(&dg_dp);
        }
        let rho: Vec<f64> = g.iter().map(|x| (x - top).exp() * self.norm / z).collect();
        let tail = mean(&self.probe).abs();
        let finite = f
            .iter()
            .chain(jac.iter())
            .chain(fp.iter())
            .all(|x| x.is_finite());
        finite.then_some(Evaluation {
            f,
            jac,
            fp,
            rho,
            tail,
        })
    }
}
