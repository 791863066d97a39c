//! The Ott–Antonsen reduction: one complex ODE for R = R2,
//!
//! ```text
//! R' = i omega(R) R + (H(R) - conj(H(R)) R^2) / 2.
//! ```
//!
//! Exact in the continuum limit when the density of the doubled angles is wrapped Cauchy
//! (Poisson kernel) centred at R(0); for n tokens on that manifold the error is O(|Z|^n). The
//! state is (Re R, Im R); the model carries no tokens, so R1 is not defined for it.

use std::borrow::Cow;

use num_complex::Complex64;

use super::SecondHarmonic;
use crate::integrate::Dynamics;
use crate::observe::OrderParameters;

/// The OA ODE.
///
/// ```
/// use num_complex::Complex64;
/// use nalgebra::DMatrix;
/// use tokdyn::integrate::Dynamics;
/// use tokdyn::model::{Attention, Head, Kernel};
/// use tokdyn::reduced::{OttAntonsen, SecondHarmonic};
/// let i2 = DMatrix::identity(2, 2);
/// let sh = SecondHarmonic::new(&Attention::new(Kernel::Lsa, 1.0, vec![Head { a: i2.clone(), v: i2 }])).unwrap();
/// // A = V = I: R' = (R - |R|^2 R) / 2, radial growth towards |R| = 1.
/// let mut dr = [0.0; 2];
/// OttAntonsen::new(sh).rhs(&[0.5, 0.0], &mut dr);
/// assert!((dr[0] - 0.5 * (0.5 - 0.125)).abs() < 1e-15 && dr[1].abs() < 1e-15);
/// ```
pub struct OttAntonsen {
    coefficients: SecondHarmonic,
}

impl OttAntonsen {
    /// The OA ODE of a second-harmonic model.
    pub fn new(coefficients: SecondHarmonic) -> Self {
        OttAntonsen { coefficients }
    }
}

impl Dynamics for OttAntonsen {
    fn dimension(&self) -> usize {
        2
    }

    fn rhs(&self, state: &[f64], out: &mut [f64]) {
        let dr = self
            .coefficients
            .ott_antonsen_rhs(Complex64::new(state[0], state[1]));
        out[0] = dr.re;
        out[1] = dr.im;
    }

    fn order_parameters(&self, state: &[f64]) -> OrderParameters {
        OrderParameters::from_r2(Complex64::new(state[0], state[1]))
    }

    fn tokens<'a>(&self, _state: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        None
    }
}
