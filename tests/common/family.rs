//! The two-parameter family of tests/codim2.rs and tests/cycles.rs: lsa in d = 2 with a fixed
//! A and V = [[v11, v12], [V21, V22]], as a scenario text and as OA coefficients.

use nalgebra::DMatrix;
use tokdyn::model::{Attention, Head, Kernel};
use tokdyn::reduced::SecondHarmonic;

/// A random family V = V0 + v11 E11 + v12 E12 (the seed-9 draw of N(0, 0.49) entries, rounded),
/// with a fold curve and a Hopf curve meeting at a BT point near (v11, v12) = (0.22, -0.11).
pub const A: [[f64; 2]; 2] = [[-0.6585, 0.1559], [0.9054, 1.0743]];
pub const V21: f64 = 0.2307;
pub const V22: f64 = -0.1714;

pub fn base(v11: f64, v12: f64) -> String {
    format!(
        r#"
name = "family"
[params]
v11 = {v11}
v12 = {v12}
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = [[{}, {}], [{}, {}]]
V = [["v11", "v12"], [{V21}, {V22}]]
[tokens]
n = 16
init = "poisson"
r0 = 0.3
[time]
t_end = 2.0
samples = 21
"#,
        A[0][0], A[0][1], A[1][0], A[1][1]
    )
}

pub fn coefficients(p1: f64, p2: f64) -> SecondHarmonic {
    let a = DMatrix::from_row_slice(2, 2, &[A[0][0], A[0][1], A[1][0], A[1][1]]);
    let v = DMatrix::from_row_slice(2, 2, &[p1, p2, V21, V22]);
    SecondHarmonic::new(&Attention::new(Kernel::Lsa, 1.0, vec![Head { a, v }])).unwrap()
}
