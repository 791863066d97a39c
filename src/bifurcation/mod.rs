//! Bifurcation analysis of the Ott–Antonsen equation (docs/MATH.md §10): the field as an exact
//! cubic polynomial with its derivatives, the normal-form coefficients of folds and Hopf
//! points ([`normal_form`]), and periodic orbits by multiple shooting ([`periodic`]). The
//! continuation of curves in one and two parameters and of periodic orbits lives with the
//! sweep that asks for it (`sweep::continuation`, `sweep::codim2`, `sweep::cycles`).

pub mod normal_form;
pub mod periodic;

pub use normal_form::{first_lyapunov, fold_coefficient, CubicField};
