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

use std::f64::consts::PI;

use nalgebra::{DMatrix, DVector};

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
    /// uniform state's l-th growth rate is l^2 (coupling - T) (docs/MATH.md §17.2).
    pub fn coupling(&self, beta: f64, l: usize) -> f64 {
        let mut i = vec![0.0; l + 1];
        scaled_bessel_i(beta, &mut i);
        match self.kernel {
            Kernel::Sa => i[l] / i[0] / beta,
            _ => i[l] * beta.exp() / beta,
        }
    }
}

/// The largest number of modes kept.
const MAX_MODES: usize = 400;

/// The highest mode K: I_K(beta) / I_1(beta) < 1e-16 (at least 8).
pub fn highest_mode(beta: f64) -> usize {
    let mut i = vec![0.0; MAX_MODES + 2];
    scaled_bessel_i(beta, &mut i);
    (8..=MAX_MODES)
        .find(|&k| i[k] < 1e-16 * i[1])
        .unwrap_or(MAX_MODES)
}

/// The grid of angles for K modes: a power of two, at least 512 and 8 K.
pub fn grid_for(modes: usize) -> usize {
    (8 * modes).max(512).next_power_of_two()
}

/// The self-consistency at one parameter value: the moments' map and its derivatives.
pub struct Evaluation {
    /// F(R, p).
    pub f: DVector<f64>,
    /// dF/dR.
    pub jac: DMatrix<f64>,
    /// dF/dp.
    pub fp: DVector<f64>,
    /// The density on the grid (mass 1).
    pub rho: Vec<f64>,
    /// The relative weight of the density's mode M/4 (its resolution on the grid).
    pub tail: f64,
}

/// The self-consistency map of a family for the modes `ks` on a grid of `m` angles.
pub struct SelfConsistency {
    family: Family,
    ks: Vec<usize>,
    m: usize,
    /// cos(k theta_j) for each k in ks (rows), j < m.
    cos: Vec<Vec<f64>>,
    /// cos(m/4 theta_j) (the resolution probe).
    probe: Vec<f64>,
}

impl SelfConsistency {
    /// The map of `family` for modes `ks` on `m` angles.
    pub fn new(family: Family, ks: Vec<usize>, m: usize) -> Self {
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
        }
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

    /// Scaled Bessel values at beta for the modes: (e^{-beta} I_k, e^{-beta} I_k' for k in ks,
    /// e^{-beta} I_0, e^{-beta} I_1), with I_k' = (I_{k-1} + I_{k+1}) / 2.
    fn bessel(&self, beta: f64) -> (Vec<f64>, Vec<f64>, f64, f64) {
        let top = self.ks.iter().copied().max().unwrap_or(0) + 2;
        let mut i = vec![0.0; top + 1];
        scaled_bessel_i(beta, &mut i);
        let ik = self.ks.iter().map(|&k| i[k]).collect();
        let dik = self
            .ks
            .iter()
            .map(|&k| 0.5 * (i[k - 1] + i[k + 1]))
            .collect();
        (ik, dik, i[0], i[1])
    }

    /// F, its derivatives and the density at (R, p); `None` where the state is no density
    /// (sa: K * rho <= 0 somewhere) or a number is not finite.
    pub fn evaluate(&self, r: &DVector<f64>, p: f64) -> Option<Evaluation> {
        let (beta, t) = self.family.beta_t(p);
        let (ik, dik, i0, i1) = self.bessel(beta);
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
                // d/dbeta (I_k / I_0) = (I_k' I_0 - I_k I_1) / I_0^2.
                let d_ratio: Vec<f64> = ik
                    .iter()
                    .zip(&dik)
                    .map(|(a, da)| (da * i0 - a * i1) / (i0 * i0))
                    .collect();
                for j in 0..m {
                    let mut q = 1.0;
                    let mut dq = 0.0;
                    for k in 0..n {
                        q += 2.0 * ratio[k] * r[k] * self.cos[k][j];
                        dq += 2.0 * d_ratio[k] * r[k] * self.cos[k][j];
                    }
                    if q.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                        return None;
                    }
                    g[j] = scale * q.ln();
                    for k in 0..n {
                        dg_dr[k][j] = scale * 2.0 * ratio[k] * self.cos[k][j] / q;
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
                    let a = 2.0 * e * ik[k] / (beta * t);
                    // d/dbeta of 2 I_k / (beta T).
                    let da = 2.0 * e / t * (dik[k] / beta - ik[k] / (beta * beta));
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
        let w: Vec<f64> = g.iter().map(|x| (x - top).exp()).collect();
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
        let scale = m as f64 / (2.0 * PI * z);
        let rho: Vec<f64> = w.iter().map(|x| x * scale).collect();
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
