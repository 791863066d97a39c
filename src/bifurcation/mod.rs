//! Bifurcation analysis of the Ott–Antonsen equation (docs/MATH.md §10): the field as an exact
//! cubic polynomial with its derivatives, the normal-form coefficients of folds and Hopf
//! points ([`normal_form`]), periodic orbits by multiple shooting ([`periodic`]), and the
//! analyses a sweep file asks for ([`spec`]) on its base scenario ([`base`]): the continuation
//! of fixed points in one parameter with their special points (`continuation`), fold and Hopf
//! curves in two (`codim2`, with the quadratic model of the coefficients,
//! `coefficient_model`), the periodic orbits born at Hopf points (`cycles`), and the branches
//! of stationary densities of the mean field (`stationary`, docs/MATH.md §17.6). The four
//! continuations correct their points with one bordered Newton iteration (`corrector`,
//! docs/MATH.md §10.4).

pub mod base;
pub(crate) mod codim2;
pub(crate) mod coefficient_model;
pub(crate) mod continuation;
pub(crate) mod corrector;
pub(crate) mod cycles;
pub mod normal_form;
pub mod periodic;
pub mod spec;
pub mod stationary;

pub use normal_form::{first_lyapunov, fold_coefficient, CubicField};
