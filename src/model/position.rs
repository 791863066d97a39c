//! Token positions in the attention scores: RoPE and ALiBi (docs/MATH.md §16).
//!
//! Token k has position p_k = k (its order, from 0). For a head with d_h-dimensional queries
//! q_k and keys kappa_j (the factored field's `q_k = (beta / sqrt(d_h)) Q^T x_k`,
//! `kappa_j = K^T x_j`):
//!
//! ```text
//! RoPE:   s_kj = <R(p_k omega) q_k, R(p_j omega) kappa_j> = q_k^T R((p_j - p_k) omega) kappa_j
//!         R(theta) rotates each pair (i, i + d_h/2) by theta_i, omega_i = base^(-2 i / d_h)
//! ALiBi:  s_kj = <q_k, kappa_j> - m |p_k - p_j|        (j <= k under the causal mask)
//! ```
//!
//! RoPE rotates every query and key once (O(n d_h) per head and evaluation), so the pair sums
//! run unchanged in the tiled kernels. ALiBi's bias is not of low rank without the mask, so its
//! sums run here token by token (each token's sum in a fixed order, so the bytes do not depend
//! on the threads): lsa weights s_kj and usa weights e^{s_kj} averaged over the tokens attended
//! to, sa the softmax of s_kj over them (shifted by its maximum).

use rayon::prelude::*;

use super::Kernel;
use crate::simd::dot;

/// How token positions enter the scores.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Position {
    /// No positions: the tokens are exchangeable.
    #[default]
    None,
    /// Rotary embeddings with frequencies base^(-2i/d_h).
    Rope {
        /// The frequency base (10000 in most models).
        base: f64,
    },
    /// Linear biases -m_h |p_k - p_j|, one slope per head.
    Alibi {
        /// One slope per head (heads given by A first, then heads given by factors).
        slopes: Vec<f64>,
    },
}

impl Position {
    /// The standard ALiBi slopes 2^(-8h/H), h = 1..H.
    pub fn standard_slopes(heads: usize) -> Vec<f64> {
        (1..=heads)
            .map(|h| (-8.0 * h as f64 / heads as f64).exp2())
            .collect()
    }

    /// Whether there are positions at all.
    pub fn is_none(&self) -> bool {
        *self == Position::None
    }
}

/// cos and sin of p_k omega_i for every token k and pair i (n x d_h/2 each).
pub(crate) struct RopeTable {
    d_h: usize,
    cos: Vec<f64>,
    sin: Vec<f64>,
}

impl RopeTable {
    /// The table for n tokens of width d_h (even) with frequency base `base`.
    pub(crate) fn new(n: usize, d_h: usize, base: f64) -> Self {
        let half = d_h / 2;
        let omega: Vec<f64> = (0..half)
            .map(|i| base.powf(-2.0 * i as f64 / d_h as f64))
            .collect();
        let mut cos = Vec::with_capacity(n * half);
        let mut sin = Vec::with_capacity(n * half);
        for k in 0..n {
            for w in &omega {
                let (s, c) = (k as f64 * w).sin_cos();
                cos.push(c);
                sin.push(s);
            }
        }
        RopeTable { d_h, cos, sin }
    }

    /// The width d_h this table rotates.
    pub(crate) fn d_h(&self) -> usize {
        self.d_h
    }

    /// Rotates each row r_k (n x d_h row-major) by R(p_k omega): for each pair (i, i + d_h/2),
    /// (a, b) -> (a cos - b sin, b cos + a sin).
    pub(crate) fn rotate(&self, rows: &mut [f64]) {
        let (e, half) = (self.d_h, self.d_h / 2);
        rows.par_chunks_mut(e * 256)
            .enumerate()
            .for_each(|(block, chunk)| {
                for (t, r) in chunk.chunks_exact_mut(e).enumerate() {
                    let k = block * 256 + t;
                    let (c, s) = (
                        &self.cos[k * half..(k + 1) * half],
                        &self.sin[k * half..(k + 1) * half],
                    );
                    let (lo, hi) = r.split_at_mut(half);
                    for i in 0..half {
                        let (a, b) = (lo[i], hi[i]);
                        lo[i] = a * c[i] - b * s[i];
                        hi[i] = b * c[i] + a * s[i];
                    }
                }
            });
    }
}

/// The tokens and weights of one ALiBi head's sums.
pub(crate) struct BiasedPairs<'a> {
    /// q_k, n x key_d.
    pub query: &'a [f64],
    /// kappa_j, n x key_d.
    pub keys: &'a [f64],
    /// w_j, n x value_d.
    pub values: &'a [f64],
    pub key_d: usize,
    pub value_d: usize,
}

/// F_k (n x value_d into `out`) with ALiBi scores s_kj = <q_k, kappa_j> - m |k - j| over the
/// tokens j that k attends to (j <= k when `causal`), weighted by the kernel: lsa s_kj / count,
/// usa e^{s_kj} / count (count = k + 1 under the mask, n without), sa the softmax of s_kj.
pub(crate) fn alibi_sums(
    pairs: BiasedPairs<'_>,
    kernel: Kernel,
    causal: bool,
    slope: f64,
    out: &mut [f64],
) {
    let (e, dv) = (pairs.key_d, pairs.value_d);
    let n = pairs.query.len() / e.max(1);
    let score = |k: usize, j: usize| {
        dot(
            &pairs.query[k * e..(k + 1) * e],
            &pairs.keys[j * e..(j + 1) * e],
        ) - slope * (k as f64 - j as f64).abs()
    };
    let one_token = |(k, f): (usize, &mut [f64])| {
        let count = if causal { k + 1 } else { n };
        f.fill(0.0);
        let shift = match kernel {
            Kernel::Sa => (0..count)
                .map(|j| score(k, j))
                .fold(f64::NEG_INFINITY, f64::max),
            _ => 0.0,
        };
        let mut total = 0.0;
        for j in 0..count {
            let s = score(k, j);
            let w = match kernel {
                Kernel::Lsa => s,
                Kernel::Usa => s.exp(),
                Kernel::Sa => (s - shift).exp(),
            };
            total += w;
            let u = &pairs.values[j * dv..(j + 1) * dv];
            f.iter_mut().zip(u).for_each(|(fa, ua)| *fa += w * ua);
        }
        let scale = match kernel {
            Kernel::Sa => 1.0 / total,
            _ => 1.0 / count as f64,
        };
        f.iter_mut().for_each(|v| *v *= scale);
    };
    out[..n * dv]
        .par_chunks_mut(dv)
        .enumerate()
        .with_min_len(16)
        .for_each(one_token);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_slopes_are_powers_of_two() {
        assert_eq!(Position::standard_slopes(8)[0], 0.5);
        assert_eq!(Position::standard_slopes(8)[7], 1.0 / 256.0);
        assert_eq!(Position::standard_slopes(4)[1], 1.0 / 16.0);
    }

    #[test]
    fn rotations_keep_lengths_and_compose_to_the_relative_angle() {
        // <R(p_k) q, R(p_j) kappa> = q^T R(p_j - p_k) kappa: the rotated product of tokens 3 and
        // 7 equals the product of token 0's q with kappa rotated by 4 steps.
        let (n, e, base) = (9, 6, 10.0);
        let table = RopeTable::new(n, e, base);
        let q: Vec<f64> = (0..e).map(|i| (i as f64 * 0.7).sin() + 0.3).collect();
        let kappa: Vec<f64> = (0..e).map(|i| (i as f64 * 1.3).cos() - 0.2).collect();
        let mut rows = vec![0.0; n * e];
        rows[3 * e..4 * e].copy_from_slice(&q);
        rows[7 * e..8 * e].copy_from_slice(&kappa);
        rows[4 * e..5 * e].copy_from_slice(&kappa);
        table.rotate(&mut rows);
        let rotated = dot(&rows[3 * e..4 * e], &rows[7 * e..8 * e]);
        // q at position 0 (unrotated) against kappa at position 4.
        let relative = dot(&q, &rows[4 * e..5 * e]);
        assert!(
            (rotated - relative).abs() < 1e-13,
            "{rotated} vs {relative}"
        );
        assert!((dot(&rows[3 * e..4 * e], &rows[3 * e..4 * e]) - dot(&q, &q)).abs() < 1e-13);
        // Not the unrotated product (the test could fail).
        assert!((rotated - dot(&q, &kappa)).abs() > 1e-3);
    }
}
