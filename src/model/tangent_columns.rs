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
//! token contiguous), so that each sum over j is one pass over contiguous numbers kept in
//! `LANES` partial sums: the scores, weights and exponentials of the state are formed once per
//! query token and shared by the field and every tangent vector. The order of every sum is
//! fixed, so the result does not depend on the number of threads.

use super::exp::{exp_in_place, exp_shifted_sum};
use super::pairwise::{dot_in_lanes, scores};
use super::Kernel;
use crate::simd::{vectorized, LANES};

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
    weights: Vec<f64>,
    ds: Vec<f64>,
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
    let p = cols.val.len() / n;
    let q = &query.q[k * m..(k + 1) * m];
    s.scores.resize(count, 0.0);
    s.weights.resize(count, 0.0);
    s.ds.resize(count, 0.0);
    scores(q, &cols.key, n, 0..count, &mut s.scores);
    add_bias(query.slope, k, &mut s.scores);
    weights(kernel, &s.scores, &mut s.weights);
    let (a, da) = out.split_at_mut(p);
    for (c, ac) in a.iter_mut().enumerate() {
        *ac = lane_dot(&s.weights, &cols.val[c * n..c * n + count]);
    }
    for (i, dai) in da.chunks_exact_mut(p).enumerate() {
        let dq = &query.dq[i][k * m..(k + 1) * m];
        sums_by_passes(kernel, cols, (q, dq), i, s, (a, dai));
    }
}

/// Along vector i: ds_kj, then each sum of the module's formula, one pass over j each (a loop
/// fusing them all for small m = p was slower: its sums did not stay in vector registers).
#[inline(always)]
fn sums_by_passes(
    kernel: Kernel,
    cols: &HeadColumns,
    (q, dq): (&[f64], &[f64]),
    i: usize,
    s: &mut TokenScratch,
    (a, da): (&[f64], &mut [f64]),
) {
    let (n, count) = (cols.n, s.scores.len());
    // ds_kj = <dq_k, kappa_j> + <q_k, dkappa_j>.
    scores(dq, &cols.key, n, 0..count, &mut s.ds);
    let dkey = &cols.dkey[i];
    for (c, &qc) in q.iter().enumerate() {
        let column = &dkey[c * n..c * n + count];
        s.ds.iter_mut().zip(column).for_each(|(x, k)| *x += qc * k);
    }
    let dval = &cols.dval[i];
    if kernel == Kernel::Lsa {
        let inv = 1.0 / count as f64;
        for (c, dac) in da.iter_mut().enumerate() {
            let range = c * n..c * n + count;
            let first = lane_dot(&s.ds, &cols.val[range.clone()]);
            *dac = (first + lane_dot(&s.scores, &dval[range])) * inv;
        }
        return;
    }
    // w_kj ds_kj in place of ds_kj.
    s.ds.iter_mut().zip(&s.weights).for_each(|(x, w)| *x *= w);
    let mean = if kernel == Kernel::Sa {
        let mut acc = [0.0; LANES];
        crate::simd::add_in_lanes(&mut acc, &s.ds);
        acc.iter().sum()
    } else {
        0.0
    };
    for (c, dac) in da.iter_mut().enumerate() {
        let range = c * n..c * n + count;
        let first = lane_dot(&s.ds, &cols.val[range.clone()]);
        *dac = first - mean * a[c] + lane_dot(&s.weights, &dval[range]);
    }
}

/// The weights w_kj of the scores: s / c_k (lsa), e^s / c_k (usa), the softmax (sa).
#[inline(always)]
fn weights(kernel: Kernel, scores: &[f64], w: &mut [f64]) {
    w.copy_from_slice(scores);
    let count = scores.len() as f64;
    match kernel {
        Kernel::Lsa => w.iter_mut().for_each(|x| *x /= count),
        Kernel::Usa => {
            exp_in_place(w);
            w.iter_mut().for_each(|x| *x /= count);
        }
        Kernel::Sa => {
            let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let total = exp_shifted_sum(w, top);
            w.iter_mut().for_each(|x| *x /= total);
        }
    }
}

/// sum_j a_j b_j in `LANES` partial sums, added in lane order.
#[inline(always)]
fn lane_dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; LANES];
    dot_in_lanes(&mut acc, a, b);
    acc.iter().sum()
}

/// ALiBi: s_kj <- s_kj - m |k - j| for the scores of query token k (j from 0).
pub(super) fn add_bias(slope: Option<f64>, k: usize, scores: &mut [f64]) {
    if let Some(m) = slope {
        for (j, s) in scores.iter_mut().enumerate() {
            *s -= m * (k as f64 - j as f64).abs();
        }
    }
}
