//! Exact and approximate reductions of d = 2 linear self-attention (docs/MATH.md §3).
//!
//! With x = (cos t, sin t), xi_k = 2 t_k and R = R2 = (1/n) sum_j e^{i xi_j}, the full LSA flow
//! is exactly a Kuramoto model with pure second-harmonic coupling,
//!
//! ```text
//! xi_k' = omega(R) + Im( H(R) e^{-i xi_k} ),
//! ```
//!
//! where omega and H depend on the weights through [`SecondHarmonic`]. Every w_k = e^{i xi_k}
//! obeys the same Riccati equation w' = i omega w + (H - conj(H) w^2) / 2, so the flow acts by
//! Moebius maps of the initial phases (Watanabe–Strogatz, three real unknowns), and on the
//! Poisson (wrapped Cauchy) manifold R itself obeys one complex ODE (Ott–Antonsen).
//!
//! [`group`] is the exact reduction of LSA in any dimension (Watanabe–Strogatz is its d = 2
//! case): the tokens are x_k(t) = Phi(t) x_k(0) / |Phi(t) x_k(0)| with one d x d matrix flow
//! Phi' = M Phi.

pub mod clusters;
pub mod coefficients;
pub mod group;
pub(crate) mod moebius;
pub mod ott_antonsen;
pub mod phase;
pub mod staircase;
pub mod watanabe_strogatz;

pub use coefficients::SecondHarmonic;
pub use group::GroupFlow;
pub use ott_antonsen::OttAntonsen;
pub use phase::PhaseModel;
pub use watanabe_strogatz::WatanabeStrogatz;

use num_complex::Complex64;

/// The Riccati right-hand side shared by every reduction:
/// w' = i omega w + (H - conj(H) w^2) / 2.
///
/// ```
/// use num_complex::Complex64;
/// use tokdyn::reduced::riccati_rhs;
/// // With H = 0 the phases rotate at omega.
/// let w = Complex64::new(0.6, 0.8);
/// assert_eq!(riccati_rhs(w, 2.0, Complex64::new(0.0, 0.0)), Complex64::new(0.0, 2.0) * w);
/// ```
pub fn riccati_rhs(w: Complex64, omega: f64, h: Complex64) -> Complex64 {
    Complex64::new(0.0, omega) * w + (h - h.conj() * w * w) * 0.5
}
