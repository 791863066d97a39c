//! The pair sums of the tangent flow for one query token, by columns (docs/MATH.md §15.1).
//!
//! For query token k, its scores s_kj (with ALiBi's bias), weights w_kj over the c_k tokens it
//! sees and, along tangent vector i, ds_kj = <dq_k, kappa_j> + <q_k, dkappa_j>:
//!
//! ```text
//! a_k          = sum_j w_kj u_j
//! usa:  da_k   = sum_j (w_kj ds_kj) u_j + sum_j w_kj du_j
//! sa:   da_k   = sum_j (w_kj ds_kj) u_j - (sum_j w_kj ds_kj) a_k + sum_j w_kj du_j
//! lsa:  da_k   = (sum_j ds_kj u_j + sum_j s_kj du_j) / c_k
//! ```
//!
//! The keys kappa_j, values u_j and their variations come as columns (coordinate c of every
//! token contiguous). The scores of the state are formed once per query token; then, for chunks
//! of `CHUNK` tokens (kept in L1), the unnormalised weights (e^{s - max} for sa, e^s for usa,
//! s for lsa) and every sum of the field and of each vector, each one pass over the chunk into
//! `LANES` partial sums; the softmax's denominator (sa) or c_k divides them at the end. The
//! order of every sum is fixed, so the result does not depend on the number of threads.

use super::exp::{exp_in_place, exp_shifted_sum};
use super::pairwise::{dot_in_lanes, scores, CHUNK};
use super::Kernel;
use crate::simd::{add_in_lanes, vectorized, LANES};

/// One head's keys, values and their variations along each vector, by columns.
pub(super) struct HeadColumns {
    /// Coordinate c of kappa_j at c n + j (m coordinates).
    pub key: Vec<f64>,
    /// Coordinate c of u_j at c n + j (p coordinates).
    pub val: Vec<f64>,
    /// The keys' variation along each vector, as `key`.
    pub dkey: Vec<Vec<f64>>,
    /// The values' variation along each vector, as `val`.
    pub dval: Vec<Vec<f64>>,
    /// Tokens.
    pub n: usize,
}

impl HeadColumns {
    /// The columns of rows `key` (n x m), `val` (n x p) and of their variations.
    pub fn of(
        (key, dkey): (&[f64], &[Vec<f64>]),
        (val, dval): (&[f64], &[Vec<f64>]),
        n: usize,
    ) -> Self {
        HeadColumns {
            key: transpose(key, n),
            val: transpose(val, n),
            dkey: dkey.iter().map(|v| transpose(v, n)).collect(),
            dval: dval.iter().map(|v| transpose(v, n)).collect(),
            n,
        }
    }
}

/// The rows of `rows` (n of them) as columns.
fn transpose(rows: &[f64], n: usize) -> Vec<f64> {
    let width = rows.len() / n.max(1);
    let mut out = vec![0.0; rows.len()];
    for (j, row) in rows.chunks_exact(width).enumerate() {
        for (c, x) in row.iter().enumerate() {
            out[c * n + j] = *x;
        }
    }
    out
}

/// Per-thread buffers of one query token's sums.
#[derive(Default)]
pub(super) struct TokenScratch {
    scores: Vec<f64>,
    /// The unnormalised weights of one chunk of tokens.
    weights: Vec<f64>,
    /// ds_kj (then w_kj ds_kj) of one chunk.
    ds: Vec<f64>,
    /// The partial sums: a's p, then for each vector S1's p, S2's p and the mean.
    acc: Vec<[f64; LANES]>,
}

/// One query token k: the queries (n x m rows) and their variations along each vector, how
/// many tokens it sees, the ALiBi slope.
pub(super) struct Query<'a> {
    pub q: &'a [f64],
    pub dq: &'a [Vec<f64>],
    pub m: usize,
    pub k: usize,
    pub count: usize,
    pub slope: Option<f64>,
}

/// Writes a_k and da_k along each vector (p numbers each, one after the other) into `out`
/// (the module's formula).
pub(super) fn token_sums(
    kernel: Kernel,
    cols: &HeadColumns,
    query: &Query<'_>,
    s: &mut TokenScratch,
    out: &mut [f64],
) {
    vectorized(
        #[inline(always)]
        || token_sums_inner(kernel, cols, query, s, out),
    )
}

#[inline(always)]
fn token_sums_inner(
    kernel: Kernel,
    cols: &HeadColumns,
    query: &Query<'_>,
    s: &mut TokenScratch,
    out: &mut [f64],
) {
    let (n, count, m, k) = (cols.n, query.count, query.m, query.k);
    let (p, kv) = (cols.val.len() / n, query.dq.len());
    let q = &query.q[k * m..(k + 1) * m];
    s.scores.resize(count, 0.0);
    scores(q, &cols.key, n, 0..count, &mut s.scores);
    add_bias(query.slope, k, &mut s.scores);
    let top = match kernel {
        Kernel::Sa => s.scores.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        _ => 0.0,
    };
    s.acc.clear();
    s.acc.resize(p + kv * (2 * p + 1), [0.0; LANES]);
    let mut total = 0.0;
    for start in (0..count).step_by(CHUNK) {
        let range = start..(start + CHUNK).min(count);
        total += chunk_weights(kernel, &s.scores[range.clone()], top, &mut s.weights);
        for c in 0..p {
            let column = &cols.val[c * n + range.start..c * n + range.end];
            dot_in_lanes(&mut s.acc[c], &s.weights, column);
        }
        for i in 0..kv {
            let dq = &query.dq[i][k * m..(k + 1) * m];
            chunk_tangent_sums(kernel, cols, (q, dq), (i, range.clone()), s);
        }
    }
    // sa: the softmax's denominator; usa and lsa: c_k.
    let norm = if kernel == Kernel::Sa {
        total
    } else {
        count as f64
    };
    let sum = |acc: &[f64; LANES]| acc.iter().sum::<f64>() / norm;
    let (a, da) = out.split_at_mut(p);
    for (ac, acc) in a.iter_mut().zip(&s.acc) {
        *ac = sum(acc);
    }
    for (i, dai) in da.chunks_exact_mut(p).enumerate() {
        let base = p + i * (2 * p + 1);
        let mean = if kernel == Kernel::Sa {
            sum(&s.acc[base + 2 * p])
        } else {
            0.0
        };
        for (c, dac) in dai.iter_mut().enumerate() {
            *dac = sum(&s.acc[base + c]) - mean * a[c] + sum(&s.acc[base + p + c]);
        }
    }
}

/// The unnormalised weights of the scores of one chunk into `w`: e^{s - top} (sa), e^s (usa),
/// s (lsa); returns their sum for sa (0 otherwise).
#[inline(always)]
fn chunk_weights(kernel: Kernel, scores: &[f64], top: f64, w: &mut Vec<f64>) -> f64 {
    w.clear();
    w.extend_from_slice(scores);
    match kernel {
        Kernel::Lsa => 0.0,
        Kernel::Usa => {
            exp_in_place(w);
            0.0
        }
        Kernel::Sa => exp_shifted_sum(w, top),
    }
}

/// Adds one chunk of tokens (`range`) to vector i's partial sums of S1 = sum_j w_kj ds_kj u_j,
/// S2 = sum_j w_kj du_j and sum_j w_kj ds_kj (unnormalised w; lsa: S1 = sum_j ds_kj u_j,
/// S2 = sum_j s_kj du_j).
#[inline(always)]
fn chunk_tangent_sums(
    kernel: Kernel,
    cols: &HeadColumns,
    (q, dq): (&[f64], &[f64]),
    (i, range): (usize, std::ops::Range<usize>),
    s: &mut TokenScratch,
) {
    let (n, len) = (cols.n, range.len());
    let p = cols.val.len() / n;
    // ds_kj = <dq_k, kappa_j> + <q_k, dkappa_j>.
    s.ds.resize(len, 0.0);
    scores(dq, &cols.key, n, range.clone(), &mut s.ds);
    let dkey = &cols.dkey[i];
    for (c, &qc) in q.iter().enumerate() {
        let column = &dkey[c * n + range.start..c * n + range.end];
        s.ds.iter_mut().zip(column).for_each(|(x, k)| *x += qc * k);
    }
    let second = if kernel == Kernel::Lsa {
        &s.scores[range.clone()]
    } else {
        // w_kj ds_kj in place of ds_kj.
        s.ds.iter_mut().zip(&s.weights).for_each(|(x, w)| *x *= w);
        &s.weights[..]
    };
    let base = p + i * (2 * p + 1);
    let (dval, acc) = (&cols.dval[i], &mut s.acc[base..base + 2 * p + 1]);
    for c in 0..p {
        let columns = c * n + range.start..c * n + range.end;
        dot_in_lanes(&mut acc[c], &s.ds, &cols.val[columns.clone()]);
        dot_in_lanes(&mut acc[p + c], second, &dval[columns]);
    }
    add_in_lanes(&mut acc[2 * p], &s.ds);
}

/// ALiBi: s_kj <- s_kj - m |k - j| for the scores of query token k (j from 0).
pub(super) fn add_bias(slope: Option<f64>, k: usize, scores: &mut [f64]) {
    if let Some(m) = slope {
        for (j, s) in scores.iter_mut().enumerate() {
            *s -= m * (k as f64 - j as f64).abs();
        }
    }
}
