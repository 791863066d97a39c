//! Lyapunov exponents (docs/MATH.md §"Lyapunov exponents"): the field's derivative against
//! finite differences of the field, the Benettin driver against a linear flow's eigenvalues, at
//! a fixed point against the eigenvalues of a Jacobian made by finite differences, the sum of
//! all exponents against the time average of the divergence, the chaotic scenario with two
//! tolerances, and the `[lyapunov]` section's contract.

use std::borrow::Cow;

use nalgebra::DMatrix;
use tokdyn::integrate::lyapunov::spectrum;
use tokdyn::integrate::{Dynamics, Linearization, LyapunovSettings};
use tokdyn::model::{Attention, FactoredHead, Head, Kernel, Mask, Normalization, SphereField};
use tokdyn::observe::OrderParameters;

/// A reproducible matrix with entries uniform in [-1, 1).
fn matrix(rows: usize, cols: usize, seed: u64) -> DMatrix<f64> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    DMatrix::from_fn(rows, cols, |_, _| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    })
}

fn unit_tokens(n: usize, d: usize, seed: u64) -> Vec<f64> {
    let m = matrix(n, d, seed);
    let mut x = Vec::with_capacity(n * d);
    for k in 0..n {
        let row: Vec<f64> = (0..d).map(|c| m[(k, c)]).collect();
        let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        x.extend(row.iter().map(|v| v / r));
    }
    x
}

/// The tangent part of `v` at the unit tokens `x`.
fn tangent(x: &[f64], v: &mut [f64], d: usize) {
    for (vk, xk) in v.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
        let c: f64 = vk.iter().zip(xk).map(|(a, b)| a * b).sum();
        vk.iter_mut().zip(xk).for_each(|(a, b)| *a -= c * b);
    }
}

/// DF(x) v by central differences of the production field (an independent code path).
fn difference_quotient(field: &SphereField, x: &[f64], v: &[f64], h: f64) -> Vec<f64> {
    let plus: Vec<f64> = x.iter().zip(v).map(|(a, b)| a + h * b).collect();
    let minus: Vec<f64> = x.iter().zip(v).map(|(a, b)| a - h * b).collect();
    let (mut fp, mut fm) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    field.eval(&plus, &mut fp);
    field.eval(&minus, &mut fm);
    fp.iter().zip(&fm).map(|(a, b)| (a - b) / (2.0 * h)).collect()
}

fn attention(kernel: Kernel, d: usize, factored: bool, seed: u64) -> Attention {
    let heads = vec![
        Head {
            a: matrix(d, d, seed),
            v: matrix(d, d, seed + 1),
        },
        Head {
            a: matrix(d, d, seed + 2),
            v: matrix(d, d, seed + 3),
        },
    ];
    let att = Attention::new(kernel, 1.3, heads);
    if !factored {
        return att;
    }
    let dh = 2;
    att.with_factored(vec![FactoredHead {
        q: matrix(d, dh, seed + 4),
        k: matrix(d, dh, seed + 5),
        v: matrix(d, dh, seed + 6),
        o: matrix(dh, d, seed + 7),
    }])
}

#[test]
fn the_derivative_matches_finite_differences_for_every_kernel_head_mask_and_norm() {
    let (n, d) = (7, 3);
    for kernel in [Kernel::Lsa, Kernel::Usa, Kernel::Sa] {
        for factored in [false, true] {
            for mask in [Mask::None, Mask::Causal] {
                for norm in [Normalization::Post, Normalization::Pre] {
                    let att = attention(kernel, d, factored, 3)
                        .with_mask(mask)
                        .with_normalization(norm);
                    let field = SphereField::new(att, n);
                    let mut x = unit_tokens(n, d, 17);
                    if norm == Normalization::Pre {
                        // A stream off the sphere: the derivative sees 1 / |x_k|.
                        x.iter_mut().enumerate().for_each(|(i, v)| *v *= 1.0 + 0.1 * (i % 5) as f64);
                    }
                    let mut vs = Vec::new();
                    for s in 0..2 {
                        let mut v = unit_tokens(n, d, 40 + s);
                        if norm == Normalization::Post {
                            tangent(&x, &mut v, d);
                        }
                        vs.extend(v);
                    }
                    let lin = field.linearization().expect("the full model has a derivative");
                    let (mut dy, mut dv) = (vec![0.0; n * d], vec![0.0; 2 * n * d]);
                    lin.field_and_derivatives(&x, &vs, &mut dy, &mut dv);
                    let mut f = vec![0.0; n * d];
                    field.eval(&x, &mut f);
                    let field_error = dy.iter().zip(&f).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                    assert!(field_error < 1e-12, "{kernel:?} F differs by {field_error:e}");
                    for s in 0..2 {
                        let v = &vs[s * n * d..(s + 1) * n * d];
                        let expected = difference_quotient(&field, &x, v, 1e-5);
                        let got = &dv[s * n * d..(s + 1) * n * d];
                        let scale = expected.iter().fold(1e-3, |m: f64, v| m.max(v.abs()));
                        let err = got.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                        assert!(
                            err < 1e-7 * scale,
                            "{kernel:?} factored {factored} {mask:?} {norm:?}: DF v off by {err:e} (scale {scale:e})"
                        );
                    }
                }
            }
        }
    }
}

/// y' = B y in R^4 with B = P diag(lambda) P^{-1}: its exponents are the lambda, sorted.
struct Linear {
    b: DMatrix<f64>,
}

impl Dynamics for Linear {
    fn dimension(&self) -> usize {
        self.b.nrows()
    }
    fn rhs(&self, y: &[f64], dy: &mut [f64]) {
        let out = &self.b * nalgebra::DVector::from_column_slice(y);
        dy.copy_from_slice(out.as_slice());
    }
    fn order_parameters(&self, _y: &[f64]) -> OrderParameters {
        OrderParameters::from_r2(num_complex::Complex64::new(0.0, 0.0))
    }
    fn tokens<'a>(&self, _y: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        None
    }
    fn linearization(&self) -> Option<&dyn Linearization> {
        Some(self)
    }
}

impl Linearization for Linear {
    fn tangent_dimension(&self) -> usize {
        self.b.nrows()
    }
    fn field_and_derivatives(&self, y: &[f64], v: &[f64], dy: &mut [f64], dv: &mut [f64]) {
        self.rhs(y, dy);
        let m = y.len();
        for (vi, dvi) in v.chunks_exact(m).zip(dv.chunks_exact_mut(m)) {
            self.rhs(vi, dvi);
        }
    }
}

#[test]
fn a_linear_flow_has_its_eigenvalues_as_exponents() {
    let lambdas = [0.3, -0.1, -0.5, -1.2];
    let p = matrix(4, 4, 9) + DMatrix::identity(4, 4) * 2.0;
    let b = &p * DMatrix::from_diagonal(&nalgebra::DVector::from_row_slice(&lambdas))
        * p.clone().try_inverse().unwrap();
    let flow = Linear { b };
    let settings = LyapunovSettings {
        exponents: 4,
        transient: 5.0,
        interval: 0.7,
    };
    let s = spectrum(&flow, &[1.0, 0.5, -0.2, 0.1], 400.0, settings, (1e-10, 1e-12)).unwrap();
    assert_eq!(s.exponents.len(), 4);
    for (got, want) in s.exponents.iter().zip(lambdas) {
        // The start's share of each direction decays like 1 / (t - transient).
        assert!((got - want).abs() < 0.02, "{:?} vs {lambdas:?}", s.exponents);
    }
    assert_eq!(s.times.len(), s.estimates.len());
    assert!((s.t - 400.0).abs() < 1e-9);
    assert!((s.times[0] - 5.7).abs() < 1e-9, "{}", s.times[0]);
}
