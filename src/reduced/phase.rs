//! The Kuramoto (phase) model: n scalar ODEs with pure second-harmonic coupling,
//!
//! ```text
//! xi_k' = omega(R) + Im( H(R) e^{-i xi_k} ),   R = (1/n) sum_j e^{i xi_j},   xi_k = 2 t_k.
//! ```
//!
//! Exact for d = 2 LSA. The state is the doubled angles xi_k, unwrapped (never reduced mod
//! 2 pi), so t_k = xi_k / 2 follows the token continuously, sign included.

use std::borrow::Cow;

use num_complex::Complex64;

use super::SecondHarmonic;
use crate::integrate::Dynamics;
use crate::observe::{order_parameters, OrderParameters};
use crate::parallel::{for_each_chunk, ComplexMean};

/// The phase model of n tokens.
pub struct PhaseModel {
    coefficients: SecondHarmonic,
    n: usize,
    mean: ComplexMean,
}

impl PhaseModel {
    /// The phase model for `n` tokens.
    pub fn new(coefficients: SecondHarmonic, n: usize) -> Self {
        PhaseModel {
            coefficients,
            n,
            mean: ComplexMean::new(n),
        }
    }

    /// The state xi_k = 2 t_k of tokens (n x 2 row-major).
    pub fn state_from_tokens(tokens: &[f64]) -> Vec<f64> {
        tokens
            .chunks_exact(2)
            .map(|x| 2.0 * x[1].atan2(x[0]))
            .collect()
    }

    /// R = (1/n) sum e^{i xi_k}.
    pub fn order_r2(&self, xi: &[f64]) -> Complex64 {
        self.mean.mean(xi, 1, |x| Complex64::from_polar(1.0, x[0]))
    }
}

impl Dynamics for PhaseModel {
    fn dimension(&self) -> usize {
        self.n
    }

    fn rhs(&self, xi: &[f64], dxi: &mut [f64]) {
        let r = self.order_r2(xi);
        let omega = self.coefficients.omega(r);
        let h = self.coefficients.coupling(r);
        for_each_chunk(dxi, 1, xi, 1, |out, xi| {
            for (o, x) in out.iter_mut().zip(xi) {
                let (s, c) = x.sin_cos();
                // Im(H e^{-i xi}) = Im H cos xi - Re H sin xi
                *o = omega + h.im * c - h.re * s;
            }
        });
    }

    fn order_parameters(&self, xi: &[f64]) -> OrderParameters {
        let tokens = self.tokens(xi).unwrap_or_default();
        let mut op = order_parameters(&tokens, 2);
        // R2 straight from the phases (identical up to round-off, and what the model uses).
        op.r2 = self.order_r2(xi);
        op
    }

    fn tokens<'a>(&self, xi: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        Some(Cow::Owned(
            xi.iter()
                .flat_map(|x| {
                    let (s, c) = (0.5 * x).sin_cos();
                    [c, s]
                })
                .collect(),
        ))
    }
}
