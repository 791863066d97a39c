//! The interaction energy of a gradient flow (docs/MATH.md §11).
//!
//! When every head has V = A with A symmetric, the flow is the (projected) gradient ascent of
//!
//! ```text
//! usa, sa:  E = (1 / (2 beta n^2)) sum_heads sum_{i,j} exp(beta <x_i, A x_j>)
//! lsa:      E = (beta / (2 n^2))   sum_heads sum_{i,j} <x_i, A x_j>^2 = (beta / 2) sum_heads tr(A S A S)
//! ```
//!
//! (S = (1/n) sum_j x_j x_j^T; sa divides each token's gradient by the positive factor
//! (1/n) sum_j exp(beta <x_k, A x_j>), which keeps dE/dt >= 0). Elsewhere there is no energy.
//!
//! Cost: lsa O(n d^2). usa / sa on the circle with every A = a I: the Jacobi–Anger expansion
//! exp(x cos u) = sum_m I_m(x) e^{i m u} gives E = (1 / (2 beta)) sum_heads sum_m I_m(beta a)
//! |Z_m|^2 with Z_m = (1/n) sum_k e^{i m t_k}, O(n M) for the M orders above round-off.
//! Otherwise the pair sum, O(n^2 d) in fixed chunks (the same bytes for any thread count),
//! only up to [`PAIR_SUM_MAX_TOKENS`] tokens; above that the energy is not computed.
//!
//! **Large exponents.** When beta <x_i, A x_j> reaches past 709 the terms e^{...} overflow
//! although E may still be a double. Where the plain sum is not finite, E is taken from its
//! logarithm, a log-sum-exp over the rows (each row shifted by its own largest score s_i):
//!
//! ```text
//! ln E = logsumexp_{heads, i} (s_i + ln sum_j e^{beta <x_i, A x_j> - s_i}) - ln(2 beta n^2),
//! ```
//!
//! and E is written when ln E <= ln(f64::MAX); otherwise [`EnergyOutOfRange`] says why it is
//! not (summary.json then carries the reason and clusters.csv leaves the cell empty).

use std::fmt;

use nalgebra::DMatrix;
use num_complex::Complex64;
use rayon::prelude::*;

use super::bessel::scaled_bessel_i;
use super::{Attention, Kernel};
use crate::parallel::{chunk_count, chunked_sum};

/// Largest n for which the O(n^2 d) pair sum is evaluated at every sample.
pub const PAIR_SUM_MAX_TOKENS: usize = 16384;

/// The Jacobi–Anger series on the circle runs only while e^{beta a} is a double; past it the
/// logarithmic pair sum takes over (its orders would grow like beta a).
const CIRCLE_SERIES_MAX_EXPONENT: f64 = 709.0;

/// An energy that is not a finite double.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EnergyOutOfRange {
    /// E = 10^log10 is above the largest double.
    TooLarge {
        /// log10 E.
        log10: f64,
    },
    /// Its logarithm is not computed: more than [`PAIR_SUM_MAX_TOKENS`] tokens at a scale
    /// where only the pair sum applies.
    TooManyTokens,
    /// Not finite even as a logarithm (e.g. 1 / (2 beta) overflows for a subnormal beta).
    NotFinite,
}

impl fmt::Display for EnergyOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnergyOutOfRange::TooLarge { log10 } => write!(
                f,
                "E = 10^{log10:.1} exceeds the largest double (1.8e308)"
            ),
            EnergyOutOfRange::TooManyTokens => write!(
                f,
                "the scores beta <x, A y> pass 709 (e^s overflows) and the logarithmic pair sum is computed only up to n = {PAIR_SUM_MAX_TOKENS}"
            ),
            EnergyOutOfRange::NotFinite => {
                write!(f, "E is not a finite double at this beta and these weights")
            }
        }
    }
}

/// The energy of an attention layer whose flow is a gradient flow.
#[derive(Debug, Clone)]
pub struct Energy {
    kernel: Kernel,
    beta: f64,
    /// The (symmetric) A of each head.
    a: Vec<DMatrix<f64>>,
}

impl Energy {
    /// The energy of `attention`, when every head has V = A symmetric and beta != 0
    /// (and beta > 0 for the exponential kernels); `None` otherwise.
    pub fn of_attention(attention: &Attention) -> Option<Energy> {
        let gradient = attention
            .heads
            .iter()
            .all(|h| h.a == h.v && h.a == h.a.transpose());
        let beta_ok = match attention.kernel {
            Kernel::Lsa => attention.beta != 0.0,
            Kernel::Usa | Kernel::Sa => attention.beta > 0.0,
        };
        (gradient && beta_ok && attention.beta.is_finite()).then(|| Energy {
            kernel: attention.kernel,
            beta: attention.beta,
            a: attention.heads.iter().map(|h| h.a.clone()).collect(),
        })
    }

    /// Whether [`Energy::value`] is computed for n tokens in d dimensions.
    pub fn computable(&self, n: usize, d: usize) -> bool {
        self.kernel == Kernel::Lsa
            || (d == 2 && self.circle_scales().is_some())
            || n <= PAIR_SUM_MAX_TOKENS
    }

    /// E of the tokens (n x d row-major, unit rows), or why it is not a finite double: the
    /// plain sums first, their logarithm where they overflow (module docs).
    pub fn value(&self, tokens: &[f64], d: usize) -> Result<f64, EnergyOutOfRange> {
        let plain = match self.kernel {
            Kernel::Lsa => self.linear(tokens, d),
            Kernel::Usa | Kernel::Sa => match self.circle_scales() {
                Some(scales) if d == 2 && self.circle_series_fits(&scales) => {
                    self.circle_series(tokens, &scales)
                }
                _ => self.pair_sum(tokens, d),
            },
        };
        if plain.is_finite() {
            return Ok(plain);
        }
        if self.kernel == Kernel::Lsa {
            return Err(EnergyOutOfRange::NotFinite);
        }
        let n = tokens.len() / d;
        if n > PAIR_SUM_MAX_TOKENS {
            return Err(EnergyOutOfRange::TooManyTokens);
        }
        let log = self.log_pair_sum(tokens, d);
        match log {
            l if l <= f64::MAX.ln() => Ok(l.exp()),
            l if l.is_finite() => Err(EnergyOutOfRange::TooLarge {
                log10: l / std::f64::consts::LN_10,
            }),
            _ => Err(EnergyOutOfRange::NotFinite),
        }
    }

    /// Whether every head's beta |a| stays where e^{beta |a|} is a double.
    fn circle_series_fits(&self, scales: &[f64]) -> bool {
        scales
            .iter()
            .all(|a| (self.beta * a).abs() <= CIRCLE_SERIES_MAX_EXPONENT)
    }

    /// The a of every head when each A is a multiple a I of the 2 x 2 identity.
    fn circle_scales(&self) -> Option<Vec<f64>> {
        self.a
            .iter()
            .map(|a| {
                (a.nrows() == 2 && a[(0, 1)] == 0.0 && a[(1, 0)] == 0.0 && a[(0, 0)] == a[(1, 1)])
                    .then_some(a[(0, 0)])
            })
            .collect()
    }

    /// (beta / 2) sum_heads tr(A S A S).
    fn linear(&self, tokens: &[f64], d: usize) -> f64 {
        let n = (tokens.len() / d).max(1);
        let mut s = DMatrix::zeros(d, d);
        for x in tokens.chunks_exact(d) {
            for a in 0..d {
                for b in 0..d {
                    s[(a, b)] += x[a] * x[b];
                }
            }
        }
        s /= n as f64;
        let total: f64 = self
            .a
            .iter()
            .map(|a| {
                let as_ = a * &s;
                (&as_ * &as_).trace()
            })
            .sum();
        0.5 * self.beta * total
    }

    /// (1 / (2 beta)) sum_heads sum_m I_m(beta a) |Z_m|^2 on the circle.
    fn circle_series(&self, tokens: &[f64], scales: &[f64]) -> f64 {
        let n = (tokens.len() / 2).max(1) as f64;
        let mut total = 0.0;
        for &a in scales {
            let x = (self.beta * a).abs();
            let orders = (x + 12.0 * x.sqrt() + 40.0).ceil() as usize;
            let mut scaled = vec![0.0; orders + 1];
            scaled_bessel_i(x, &mut scaled);
            let sign: f64 = if self.beta * a < 0.0 { -1.0 } else { 1.0 };
            let mut sum = 0.0;
            for (m, i_m) in scaled.iter().enumerate() {
                let z: Complex64 = tokens
                    .chunks_exact(2)
                    .map(|p| Complex64::new(p[0], p[1]).powu(m as u32))
                    .sum::<Complex64>()
                    / n;
                let weight = if m == 0 { 1.0 } else { 2.0 } * sign.powi(m as i32);
                sum += weight * i_m * z.norm_sqr();
            }
            // e^{-x} I_m(x) was summed: restore e^{x}.
            total += sum * x.exp();
        }
        total / (2.0 * self.beta)
    }

    /// (1 / (2 beta n^2)) sum_heads sum_{i,j} exp(beta <x_i, A x_j>), in fixed chunks.
    fn pair_sum(&self, tokens: &[f64], d: usize) -> f64 {
        let n = tokens.len() / d;
        let mut total = 0.0;
        for a in &self.a {
            // q_j = beta A x_j, then sum_i sum_j exp(<x_i, q_j>).
            let q = scores_matrix(a, self.beta, tokens, d);
            let mut partials = vec![0.0; chunk_count(n)];
            let mut out = [0.0];
            chunked_sum(tokens, d, 1, &mut partials, &mut out, |rows, acc| {
                for x in rows.chunks_exact(d) {
                    for qj in q.chunks_exact(d) {
                        let dot: f64 = x.iter().zip(qj).map(|(u, v)| u * v).sum();
                        acc[0] += dot.exp();
                    }
                }
            });
            total += out[0];
        }
        total / (2.0 * self.beta * (n as f64) * (n as f64))
    }

    /// ln E by the row-shifted log-sum-exp of the module docs (beta > 0); each row is summed
    /// in order, so the value is the same for any thread count.
    fn log_pair_sum(&self, tokens: &[f64], d: usize) -> f64 {
        let n = tokens.len() / d;
        let mut rows: Vec<f64> = Vec::with_capacity(n * self.a.len());
        for a in &self.a {
            let q = scores_matrix(a, self.beta, tokens, d);
            let head: Vec<f64> = tokens
                .par_chunks_exact(d)
                .map(|x| {
                    let scores: Vec<f64> = q
                        .chunks_exact(d)
                        .map(|qj| x.iter().zip(qj).map(|(u, v)| u * v).sum())
                        .collect();
                    log_sum_exp(&scores)
                })
                .collect();
            rows.extend(head);
        }
        log_sum_exp(&rows) - (2.0 * self.beta).ln() - 2.0 * (n as f64).ln()
    }
}

/// q_j = beta A x_j for every token (n x d row-major).
fn scores_matrix(a: &DMatrix<f64>, beta: f64, tokens: &[f64], d: usize) -> Vec<f64> {
    tokens
        .chunks_exact(d)
        .flat_map(|x| {
            let x = nalgebra::DVector::from_column_slice(x);
            (a * x * beta).iter().copied().collect::<Vec<_>>()
        })
        .collect()
}

/// ln sum_i e^{v_i}, shifted by the largest v_i (in order).
fn log_sum_exp(values: &[f64]) -> f64 {
    let top = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !top.is_finite() {
        return top;
    }
    top + values.iter().map(|v| (v - top).exp()).sum::<f64>().ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Head;

    fn circle(angles: &[f64]) -> Vec<f64> {
        angles.iter().flat_map(|t| [t.cos(), t.sin()]).collect()
    }

    fn direct(kernel: Kernel, beta: f64, a: &DMatrix<f64>, tokens: &[f64], d: usize) -> f64 {
        let n = tokens.len() / d;
        let mut sum = 0.0;
        for xi in tokens.chunks_exact(d) {
            for xj in tokens.chunks_exact(d) {
                let y = nalgebra::DVector::from_column_slice(xj);
                let ay = a * y;
                let dot: f64 = xi.iter().zip(ay.iter()).map(|(u, v)| u * v).sum();
                sum += match kernel {
                    Kernel::Lsa => beta * beta * dot * dot,
                    _ => (beta * dot).exp(),
                };
            }
        }
        sum / (2.0 * beta * (n * n) as f64)
    }

    #[test]
    fn every_evaluation_matches_the_double_sum() {
        let angles: Vec<f64> = (0..37).map(|k| (k as f64 * 1.37).sin() * 2.5).collect();
        let tokens = circle(&angles);
        for (kernel, a) in [
            (Kernel::Usa, 1.0),
            (Kernel::Sa, -0.7),
            (Kernel::Lsa, 1.3),
            (Kernel::Usa, 3.0),
        ] {
            let m = DMatrix::identity(2, 2) * a;
            let att = Attention::new(
                kernel,
                2.5,
                vec![Head {
                    a: m.clone(),
                    v: m.clone(),
                }],
            );
            let e = Energy::of_attention(&att).unwrap();
            let want = direct(kernel, 2.5, &m, &tokens, 2);
            assert!(
                (e.value(&tokens, 2).unwrap() - want).abs() < 1e-12 * want.abs(),
                "{kernel:?}"
            );
            assert!(
                (e.pair_sum(&tokens, 2) - want).abs() < 1e-12 * want.abs() || kernel == Kernel::Lsa
            );
        }
    }

    fn identity_energy(kernel: Kernel, beta: f64, d: usize) -> Energy {
        let i = DMatrix::identity(d, d);
        let head = Head { a: i.clone(), v: i };
        Energy::of_attention(&Attention::new(kernel, beta, vec![head])).unwrap()
    }

    #[test]
    fn large_exponents_give_the_closed_form_or_say_why_not() {
        // Two antipodal clusters of equal size, A = V = I: E = (e^beta + e^-beta) / (4 beta),
        // whose terms overflow from beta = 709.8 while E stays a double up to about 716.
        let mut angles = vec![0.3; 10];
        angles.extend([0.3 + std::f64::consts::PI; 10]);
        for (d, beta) in [(2, 712.0), (2, 715.0), (3, 713.0)] {
            let tokens: Vec<f64> = circle(&angles)
                .chunks_exact(2)
                .flat_map(|p| {
                    let mut x = p.to_vec();
                    x.resize(d, 0.0);
                    x
                })
                .collect();
            for kernel in [Kernel::Usa, Kernel::Sa] {
                let e = identity_energy(kernel, beta, d).value(&tokens, d).unwrap();
                let log_want = beta - (4.0 * beta).ln(); // e^-beta is far below round-off
                assert!(
                    (e.ln() - log_want).abs() < 1e-12 * log_want,
                    "d = {d}, beta = {beta}: {e:e}"
                );
            }
        }
        // Past the largest double: the reason carries log10 E = (beta - ln(2 beta)) / ln 10
        // (one cluster), and nothing is allocated in proportion to beta.
        let tokens = circle(&[1.0; 8]);
        for beta in [1e3, 1e10, 1e300] {
            let got = identity_energy(Kernel::Sa, beta, 2).value(&tokens, 2);
            let want = (beta - (2.0 * beta).ln()) / std::f64::consts::LN_10;
            match got {
                Err(EnergyOutOfRange::TooLarge { log10 }) => {
                    assert!((log10 - want).abs() <= 1e-12 * want, "{log10} vs {want}")
                }
                other => panic!("beta = {beta}: {other:?}"),
            }
        }
        // A subnormal beta: 1 / (2 beta) overflows.
        let got = identity_energy(Kernel::Usa, 5e-324, 2).value(&tokens, 2);
        assert!(got.is_err(), "{got:?}");
    }

    #[test]
    fn no_energy_without_a_symmetric_v_equal_to_a() {
        let a = DMatrix::from_row_slice(2, 2, &[1.0, 0.5, 0.0, 1.0]);
        let att = Attention::new(Kernel::Usa, 1.0, vec![Head { a: a.clone(), v: a }]);
        assert!(Energy::of_attention(&att).is_none());
        let i = DMatrix::identity(2, 2);
        let att = Attention::new(
            Kernel::Usa,
            1.0,
            vec![Head {
                a: i.clone(),
                v: i * 2.0,
            }],
        );
        assert!(Energy::of_attention(&att).is_none());
    }
}
