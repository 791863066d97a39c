//! The map (A, V, beta, heads) -> omega(R), H(R) for d = 2 linear self-attention.
//!
//! A real 2 x 2 matrix M acts on x = (cos t, sin t) <-> z = e^{it} as M x <-> m+ z + m- conj(z),
//!
//! ```text
//! m+ = ((m11 + m22) + i (m21 - m12)) / 2,   m- = ((m11 - m22) + i (m21 + m12)) / 2.
//! ```
//!
//! With a± from A and v± from V (per head):
//!
//! ```text
//! G(R) = a+ v+ R + a+ v- + a- v+ + a- v- conj(R)
//! C(R) = conj(a+) v+ + conj(a-) v- + conj(a+) v- conj(R) + conj(a-) v+ R
//! omega(R) = beta Im C(R),   H(R) = beta G(R)
//! ```
//!
//! Both are affine in R and conj(R), and heads add, so they are stored as three coefficients each.

use nalgebra::DMatrix;
use num_complex::Complex64;

use crate::model::{Attention, Kernel};

/// Why a reduction does not apply.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the reductions need d = 2 and the lsa kernel (a pure second-harmonic field); this model has d = {d} and kernel {kernel:?}")]
pub struct NotSecondHarmonic {
    /// The model's dimension.
    pub d: usize,
    /// The model's kernel.
    pub kernel: Kernel,
}

/// omega(R) = Im(c0 + c1 conj(R) + c2 R) and H(R) = g0 + g1 R + g2 conj(R), beta included.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SecondHarmonic {
    c0: Complex64,
    c1: Complex64,
    c2: Complex64,
    g0: Complex64,
    g1: Complex64,
    g2: Complex64,
}

/// (m+, m-) of a real 2 x 2 matrix.
pub fn complex_parts(m: &DMatrix<f64>) -> (Complex64, Complex64) {
    let (m11, m12, m21, m22) = (m[(0, 0)], m[(0, 1)], m[(1, 0)], m[(1, 1)]);
    (
        Complex64::new(m11 + m22, m21 - m12) * 0.5,
        Complex64::new(m11 - m22, m21 + m12) * 0.5,
    )
}

impl SecondHarmonic {
    /// The coefficients of a d = 2 LSA model.
    ///
    /// ```
    /// use nalgebra::DMatrix;
    /// use num_complex::Complex64;
    /// use tokdyn::model::{Attention, Head, Kernel};
    /// use tokdyn::reduced::SecondHarmonic;
    /// // A = V = I: a+ = v+ = 1, a- = v- = 0, so H(R) = beta R and omega = 0.
    /// let i2 = DMatrix::identity(2, 2);
    /// let att = Attention::new(Kernel::Lsa, 2.0, vec![Head { a: i2.clone(), v: i2 }]);
    /// let sh = SecondHarmonic::new(&att).unwrap();
    /// let r = Complex64::new(0.3, 0.4);
    /// assert!((sh.coupling(r) - r * 2.0).norm() < 1e-15);
    /// assert_eq!(sh.omega(r), 0.0);
    /// ```
    pub fn new(attention: &Attention) -> Result<Self, NotSecondHarmonic> {
        if attention.d() != 2 || attention.kernel != Kernel::Lsa {
            return Err(NotSecondHarmonic {
                d: attention.d(),
                kernel: attention.kernel,
            });
        }
        let zero = Complex64::new(0.0, 0.0);
        let mut sh = SecondHarmonic {
            c0: zero,
            c1: zero,
            c2: zero,
            g0: zero,
            g1: zero,
            g2: zero,
        };
        let beta = attention.beta;
        for head in &attention.heads {
            let (ap, am) = complex_parts(&head.a);
            let (vp, vm) = complex_parts(&head.v);
            sh.g1 += ap * vp * beta;
            sh.g0 += (ap * vm + am * vp) * beta;
            sh.g2 += am * vm * beta;
            sh.c0 += (ap.conj() * vp + am.conj() * vm) * beta;
            sh.c1 += ap.conj() * vm * beta;
            sh.c2 += am.conj() * vp * beta;
        }
        Ok(sh)
    }

    /// The model of given coefficients (c0, c1, c2, g0, g1, g2), as [`SecondHarmonic::coefficients`]
    /// returns them.
    pub fn from_coefficients(c: [Complex64; 6]) -> Self {
        SecondHarmonic {
            c0: c[0],
            c1: c[1],
            c2: c[2],
            g0: c[3],
            g1: c[4],
            g2: c[5],
        }
    }

    /// The coefficients (c0, c1, c2, g0, g1, g2) of omega(R) = Im(c0 + c1 conj(R) + c2 R) and
    /// H(R) = g0 + g1 R + g2 conj(R).
    pub fn coefficients(
        &self,
    ) -> (
        Complex64,
        Complex64,
        Complex64,
        Complex64,
        Complex64,
        Complex64,
    ) {
        (self.c0, self.c1, self.c2, self.g0, self.g1, self.g2)
    }

    /// omega(R) = beta Im C(R), the common rotation frequency of the doubled phases.
    pub fn omega(&self, r: Complex64) -> f64 {
        (self.c0 + self.c1 * r.conj() + self.c2 * r).im
    }

    /// H(R) = beta G(R), the complex coupling.
    pub fn coupling(&self, r: Complex64) -> Complex64 {
        self.g0 + self.g1 * r + self.g2 * r.conj()
    }

    /// The Ott–Antonsen field R' = i omega(R) R + (H(R) - conj(H(R)) R^2) / 2.
    pub fn ott_antonsen_rhs(&self, r: Complex64) -> Complex64 {
        super::riccati_rhs(r, self.omega(r), self.coupling(r))
    }

    /// The drift of the cluster axis on |R| = 1:
    /// g(phi) = omega(e^{i phi}) + Im( H(e^{i phi}) e^{-i phi} ).
    pub fn boundary_drift(&self, phi: f64) -> f64 {
        let r = Complex64::from_polar(1.0, phi);
        self.omega(r) + (self.coupling(r) * r.conj()).im
    }
}
