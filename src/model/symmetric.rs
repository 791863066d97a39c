//! The exponential kernels for a symmetric bilinear form: one exponential per pair of tokens.
//!
//! ```text
//! w_kj = exp(beta <x_k, A x_j>) = w_jk   when A = A^T,
//! s_k  = sum_j w_kj u_j,   t_k = sum_j w_kj
//! ```
//!
//! (`usa`: f_k = s_k / n; `sa`: f_k = s_k / t_k, unshifted, which the caller allows only when
//! every |beta <x_k, A x_j>| is small enough for exp to stay finite.) The tokens are cut into
//! at most [`MAX_BLOCKS`] blocks of consecutive indices. Block I sums, for each of its tokens k,
//! over its own block (every pair, both orders) and over every later block J > I; each weight of
//! a later block is also added, times u_k, to token j's entry in block I's mirror buffer. A
//! token's total is then its own sums plus the mirror entries of the blocks before it, added in
//! block order. Blocks run in parallel, each one sequentially, so the result does not depend on
//! the number of threads. About half the exponentials of the plain kernel, at the price of
//! mirror buffers of (d + 1) n numbers per block.

use rayon::prelude::*;

use super::exp::exp_lane;
use super::pairwise::{dot_in_lanes, scores, Columns, CHUNK, LANES, MAX_D};
use crate::simd::add_in_lanes;

/// Most blocks of tokens (bounds the mirror buffers to MAX_BLOCKS (d + 1) n numbers).
pub const MAX_BLOCKS: usize = 16;
/// Fewest tokens in a block.
const MIN_BLOCK: usize = 256;

/// Tokens per block for n tokens.
pub fn block_tokens(n: usize) -> usize {
    n.div_ceil(MAX_BLOCKS).max(MIN_BLOCK).min(n.max(1))
}

/// Numbers of scratch [`symmetric_sums`] needs for n tokens in d dimensions.
pub fn scratch_len(n: usize, d: usize) -> usize {
    let blocks = n.div_ceil(block_tokens(n)).max(1);
    blocks * (d + 1) * n + n * (d + 1)
}

/// Writes s_k (n x d, row-major) into `sums` and, when asked, t_k into `totals`, for the queries
/// q_k = beta A^T x_k (n x d, row-major) of a symmetric A.
///
/// `scratch` holds at least [`scratch_len`] numbers. (An example by hand: the test
/// `two_orthogonal_tokens`.)
pub fn symmetric_sums(
    queries: &[f64],
    columns: Columns<'_>,
    sums: &mut [f64],
    totals: Option<&mut [f64]>,
    scratch: &mut [f64],
) {
    let with_totals = totals.is_some();
    let n = columns.n;
    let d = queries.len() / n.max(1);
    let width = d + 1;
    let bt = block_tokens(n);
    let blocks = n.div_ceil(bt).max(1);
    let (mirrors, own) = scratch[..scratch_len(n, d)].split_at_mut(blocks * width * n);
    let block = |(index, (mirror, own)): (usize, (&mut [f64], &mut [f64]))| {
        let start = index * bt;
        let block = Block {
            rows: start..(start + bt).min(n),
            mirror,
            own,
        };
        #[cfg(target_arch = "x86_64")]
        if crate::simd::has_avx2_fma() {
            // SAFETY: the CPU supports the features this function is compiled for.
            unsafe { block_row_avx2(queries, columns, block, with_totals) };
            return;
        }
        block_row::<false>(queries, columns, block, with_totals);
    };
    mirrors
        .par_chunks_mut(width * n)
        .zip(own.par_chunks_mut(width * bt))
        .enumerate()
        .with_max_len(1)
        .for_each(block);
    // s_j = own sums + the mirror entries of the blocks before j's, in block order.
    let mirrors = &*mirrors;
    let own = &*own;
    let gather = |width_used: usize, jb: usize, j: usize, out: &mut [f64]| {
        out.copy_from_slice(&own[j * width..j * width + width_used]);
        for earlier in 0..jb {
            let mirror = &mirrors[earlier * width * n..(earlier + 1) * width * n];
            for (c, o) in out.iter_mut().enumerate() {
                *o += mirror[c * n + j];
            }
        }
    };
    sums.par_chunks_mut(d * bt).enumerate().for_each(|(jb, s)| {
        for (offset, s) in s.chunks_exact_mut(d).enumerate() {
            gather(d, jb, jb * bt + offset, s);
        }
    });
    if let Some(totals) = totals {
        totals.par_chunks_mut(bt).enumerate().for_each(|(jb, t)| {
            for (offset, t) in t.iter_mut().enumerate() {
                let j = jb * bt + offset;
                let mut v = own[j * width + d];
                for earlier in 0..jb {
                    v += mirrors[earlier * width * n + d * n + j];
                }
                *t = v;
            }
        });
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn block_row_avx2(queries: &[f64], columns: Columns<'_>, block: Block<'_>, with_totals: bool) {
    block_row::<true>(queries, columns, block, with_totals)
}

/// One block's work: its tokens `rows`, its mirror buffer ((d + 1) n numbers) and its own
/// sums ((d + 1) numbers per token).
struct Block<'a> {
    rows: std::ops::Range<usize>,
    mirror: &'a mut [f64],
    own: &'a mut [f64],
}

/// The sums of the tokens of one block over their own block and all later tokens, and the
/// mirrored weights of the later tokens (mirror[c n + j], c = d for the totals).
#[inline(always)]
fn block_row<const FUSED: bool>(
    queries: &[f64],
    columns: Columns<'_>,
    block: Block<'_>,
    with_totals: bool,
) {
    let Block { rows, mirror, own } = block;
    let Columns { tokens, values, n } = columns;
    let d = queries.len() / n;
    let width = d + 1;
    let end = rows.end;
    for c in 0..width {
        mirror[c * n + end..(c + 1) * n].fill(0.0);
    }
    let mut z = [0.0; CHUNK];
    for k in rows.clone() {
        let q = &queries[k * d..(k + 1) * d];
        let uk: [f64; MAX_D] = std::array::from_fn(|c| if c < d { values[c * n + k] } else { 0.0 });
        let mut acc = [[0.0; LANES]; MAX_D];
        let mut total = [0.0; LANES];
        let mut from = rows.start;
        while from < n {
            let to = (from + CHUNK).min(n).min(if from < end { end } else { n });
            let len = to - from;
            scores(q, tokens, n, from..to, &mut z);
            let w = &mut z[..len];
            for wj in w.iter_mut() {
                *wj = exp_lane::<FUSED>(*wj);
            }
            for (c, a) in acc.iter_mut().enumerate().take(d) {
                dot_in_lanes(a, w, &values[c * n + from..c * n + to]);
            }
            if with_totals {
                add_in_lanes(&mut total, w);
            }
            if from >= end {
                for (c, &u) in uk.iter().enumerate().take(d) {
                    let m = &mut mirror[c * n + from..c * n + to];
                    for (mj, wj) in m.iter_mut().zip(w.iter()) {
                        *mj += wj * u;
                    }
                }
                if with_totals {
                    let m = &mut mirror[d * n + from..d * n + to];
                    for (mj, wj) in m.iter_mut().zip(w.iter()) {
                        *mj += wj;
                    }
                }
            }
            from = to;
        }
        let out = &mut own[(k - rows.start) * width..(k - rows.start + 1) * width];
        for c in 0..d {
            out[c] = acc[c].iter().sum();
        }
        out[d] = total.iter().sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_orthogonal_tokens() {
        // Tokens (1, 0) and (0, 1), A = I, beta = 1: q_k = x_k, w = [[e, 1], [1, e]].
        let x = [1.0, 0.0, 0.0, 1.0];
        let cols = Columns {
            tokens: &[1.0, 0.0, 0.0, 1.0],
            values: &[1.0, 0.0, 0.0, 1.0],
            n: 2,
        };
        let (mut sums, mut totals) = (vec![0.0; 4], vec![0.0; 2]);
        let mut scratch = vec![0.0; scratch_len(2, 2)];
        symmetric_sums(&x, cols, &mut sums, Some(&mut totals), &mut scratch);
        let e = 1f64.exp();
        assert!((sums[0] - e).abs() < 1e-15 && (sums[1] - 1.0).abs() < 1e-15);
        assert!((totals[1] - (1.0 + e)).abs() < 1e-15);
    }

    #[test]
    fn matches_the_double_sum_for_any_thread_count() {
        for (n, d) in [(1, 2), (37, 2), (700, 3), (5000, 2)] {
            let tokens: Vec<f64> = (0..n * d).map(|i| (i as f64 * 0.37).sin()).collect();
            let values: Vec<f64> = (0..n * d).map(|i| (i as f64 * 0.11).cos()).collect();
            // A symmetric: A = [[0.8, 0.3, ..], [0.3, -0.5, ..], ..] as q_k = A x_k.
            let a = |r: usize, c: usize| if r == c { 0.8 - 0.6 * r as f64 } else { 0.3 };
            let x = |j: usize, c: usize| tokens[c * n + j];
            let queries: Vec<f64> = (0..n)
                .flat_map(|k| (0..d).map(move |r| (0..d).map(|c| a(r, c) * x(k, c)).sum::<f64>()))
                .collect();
            let columns = Columns {
                tokens: &tokens,
                values: &values,
                n,
            };
            let run = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let (mut s, mut t) = (vec![0.0; n * d], vec![0.0; n]);
                let mut scratch = vec![f64::NAN; scratch_len(n, d)];
                pool.install(|| {
                    symmetric_sums(&queries, columns, &mut s, Some(&mut t), &mut scratch)
                });
                (s, t)
            };
            let (s, t) = run(1);
            assert_eq!((s.clone(), t.clone()), run(3));
            for k in (0..n).step_by(n / 17 + 1) {
                let w: Vec<f64> = (0..n)
                    .map(|j| {
                        (0..d)
                            .map(|c| queries[k * d + c] * x(j, c))
                            .sum::<f64>()
                            .exp()
                    })
                    .collect();
                let total: f64 = w.iter().sum();
                assert!((t[k] - total).abs() < 1e-12 * total, "n {n} k {k}");
                for c in 0..d {
                    let expected: f64 = (0..n).map(|j| w[j] * values[c * n + j]).sum();
                    assert!(
                        (s[k * d + c] - expected).abs() < 1e-12 * total,
                        "n {n} k {k}"
                    );
                }
            }
        }
    }
}
