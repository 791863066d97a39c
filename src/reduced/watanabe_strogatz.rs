//! The Watanabe–Strogatz reduction: three real unknowns for any n.
//!
//! Every w_k = e^{i xi_k} obeys the same Riccati equation, so the flow is a Moebius map of the
//! initial phases w_k0:
//!
//! ```text
//! w_k(t) = (e^{i psi} w_k0 + Z) / (1 + conj(Z) e^{i psi} w_k0),
//! Z' = i omega Z + (H - conj(H) Z^2) / 2,   psi' = omega + Im(H conj(Z)),   Z(0) = 0, psi(0) = 0,
//! ```
//!
//! with omega = omega(R), H = H(R) and R the mean of the w_k (O(n) per evaluation). The state is
//! (Re Z, Im Z, psi).
//!
//! The tokens follow continuously: for |Z| < 1 the change of arg w_k since t = 0 is
//! psi + arg(1 + Z e^{-i psi} conj(w_k0)) - arg(1 + conj(Z) e^{i psi} w_k0), both arguments
//! principal, so t_k(t) = t_k(0) + (that change) / 2 keeps the sign of every token.

use std::borrow::Cow;

use num_complex::Complex64;

use super::{riccati_rhs, SecondHarmonic};
use crate::integrate::Dynamics;
use crate::observe::{order_parameters, OrderParameters};
use crate::parallel::ComplexMean;

/// The Watanabe–Strogatz system of n tokens in d = 2.
pub struct WatanabeStrogatz {
    coefficients: SecondHarmonic,
    /// Initial token angles t_k(0).
    angles: Vec<f64>,
    /// w_k0 = e^{2 i t_k(0)}, interleaved (re, im).
    initial_phases: Vec<f64>,
    mean: ComplexMean,
}

impl WatanabeStrogatz {
    /// The WS system whose constants are the initial tokens (n x 2 row-major, unit rows).
    pub fn new(coefficients: SecondHarmonic, tokens: &[f64]) -> Self {
        let angles: Vec<f64> = tokens.chunks_exact(2).map(|x| x[1].atan2(x[0])).collect();
        let initial_phases = angles
            .iter()
            .flat_map(|t| {
                let (s, c) = (2.0 * t).sin_cos();
                [c, s]
            })
            .collect();
        WatanabeStrogatz {
            coefficients,
            mean: ComplexMean::new(angles.len()),
            angles,
            initial_phases,
        }
    }

    /// The initial state: Z = 0, psi = 0.
    pub fn initial_state() -> Vec<f64> {
        vec![0.0; 3]
    }

    /// R = (1/n) sum_k M(w_k0) for the state (Re Z, Im Z, psi).
    pub fn order_r2(&self, state: &[f64]) -> Complex64 {
        let z = Complex64::new(state[0], state[1]);
        let rotation = Complex64::from_polar(1.0, state[2]);
        self.mean.mean(&self.initial_phases, 2, |w| {
            let u = rotation * Complex64::new(w[0], w[1]);
            (u + z) / (1.0 + z.conj() * u)
        })
    }
}

impl Dynamics for WatanabeStrogatz {
    fn dimension(&self) -> usize {
        3
    }

    fn rhs(&self, state: &[f64], out: &mut [f64]) {
        let r = self.order_r2(state);
        let omega = self.coefficients.omega(r);
        let h = self.coefficients.coupling(r);
        let z = Complex64::new(state[0], state[1]);
        let dz = riccati_rhs(z, omega, h);
        out[0] = dz.re;
        out[1] = dz.im;
        out[2] = omega + (h * z.conj()).im;
    }

    fn order_parameters(&self, state: &[f64]) -> OrderParameters {
        let tokens = self.tokens(state).unwrap_or_default();
        let mut op = order_parameters(&tokens, 2);
        op.r2 = self.order_r2(state);
        op
    }

    fn tokens<'a>(&self, state: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        let z = Complex64::new(state[0], state[1]);
        let psi = state[2];
        let rotation = Complex64::from_polar(1.0, psi);
        let tokens = self
            .angles
            .iter()
            .zip(self.initial_phases.chunks_exact(2))
            .flat_map(|(t0, w)| {
                let w0 = Complex64::new(w[0], w[1]);
                let change = psi + (1.0 + z * rotation.conj() * w0.conj()).arg()
                    - (1.0 + z.conj() * rotation * w0).arg();
                let (s, c) = (t0 + 0.5 * change).sin_cos();
                [c, s]
            })
            .collect();
        Some(Cow::Owned(tokens))
    }
}
