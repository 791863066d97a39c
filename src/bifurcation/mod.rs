//! Bifurcation analysis of the Ott–Antonsen equation (docs/MATH.md §10): the field as an exact
//! cubic polynomial with its derivatives, and the normal-form coefficients of folds and Hopf
//! points ([`normal_form`]). The continuation of curves in one and two parameters and of
//! periodic orbits lives with the sweep that asks for it (`sweep::continuation`,
//! `sweep::codim2`).

pub mod normal_form;

pub use normal_form::{first_lyapunov, fold_coefficient, CubicField};
