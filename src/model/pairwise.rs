//! The pairwise sums of the `usa` and `sa` fields for one query token, in small dimensions.
//!
//! ```text
//! usa:  f = sum_j exp(z_j) u_j,                               z_j = <q, x_j>
//! sa:   f = sum_j exp(z_j - m) u_j / sum_j exp(z_j - m),      m = max_j z_j
//! ```
//!
//! The tokens x_j and values u_j = V x_j come as columns (coordinate c of every token
//! contiguous). For a chunk of 256 tokens the scores z_j, then their exponentials
//! ([`super::exp`]), then the weighted sums are formed in simple loops over j that run on 4-wide
//! vectors; the sums keep eight partial sums per coordinate, added in a fixed order at the end. The grouping does not depend on threads, so
//! the result is the same for any number of them. On x86-64 with AVX2 and FMA (checked at run
//! time) the kernel is compiled for those instructions.

use super::exp::exp_lane;

/// Largest dimension this kernel serves (larger d goes through blocked matrix products).
pub const MAX_D: usize = 8;
/// Partial sums kept side by side (two 4-wide vectors).
pub(crate) use crate::simd::LANES;
/// Tokens whose scores and weights are formed together (in L1).
pub(crate) const CHUNK: usize = 256;

/// The tokens and values of all n tokens, coordinate by coordinate.
#[derive(Clone, Copy)]
pub struct Columns<'a> {
    /// Coordinate c of token j at c n + j.
    pub tokens: &'a [f64],
    /// Coordinate c of u_j at c n + j.
    pub values: &'a [f64],
    /// Number of columns (tokens).
    pub n: usize,
}

/// Writes into `f` the `usa` sum (`softmax` false) or the `sa` weighted mean for query `q`.
pub fn pairwise_sum(q: &[f64], columns: Columns<'_>, softmax: bool, f: &mut [f64]) {
    pairwise_sum_prefix(q, columns, columns.n, softmax, f)
}

/// [`pairwise_sum`] over the first `count` tokens only (the causal mask: j < count).
pub fn pairwise_sum_prefix(
    q: &[f64],
    columns: Columns<'_>,
    count: usize,
    softmax: bool,
    f: &mut [f64],
) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx2_fma() {
        // SAFETY: the CPU supports the features this function is compiled for.
        unsafe { pairwise_sum_avx2(q, columns, count, softmax, f) };
        return;
    }
    pairwise_sum_lanes::<false>(q, columns, count, softmax, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn pairwise_sum_avx2(q: &[f64], columns: Columns<'_>, count: usize, softmax: bool, f: &mut [f64]) {
    pairwise_sum_lanes::<true>(q, columns, count, softmax, f)
}

/// z_j = <q, x_j> for the tokens of `range`, into `z`.
#[inline(always)]
pub(crate) fn scores(
    q: &[f64],
    tokens: &[f64],
    n: usize,
    range: std::ops::Range<usize>,
    z: &mut [f64],
) {
    let z = &mut z[..range.len()];
    for (c, &qc) in q.iter().enumerate() {
        let x = &tokens[c * n + range.start..c * n + range.end];
        if c == 0 {
            for (zj, &xj) in z.iter_mut().zip(x) {
                *zj = qc * xj;
            }
        } else {
            for (zj, &xj) in z.iter_mut().zip(x) {
                *zj += qc * xj;
            }
        }
    }
}

/// acc[l] += sum of w_j v_j over j = l mod LANES.
#[inline(always)]
pub(crate) fn dot_in_lanes(acc: &mut [f64; LANES], w: &[f64], v: &[f64]) {
    let mut pairs = w.chunks_exact(LANES).zip(v.chunks_exact(LANES));
    for (w, v) in &mut pairs {
        for l in 0..LANES {
            acc[l] += w[l] * v[l];
        }
    }
    let tail = w.len() - w.len() % LANES;
    for (l, (wj, vj)) in w[tail..].iter().zip(&v[tail..]).enumerate() {
        acc[l] += wj * vj;
    }
}

#[inline(always)]
fn pairwise_sum_lanes<const FUSED: bool>(
    q: &[f64],
    columns: Columns<'_>,
    count: usize,
    softmax: bool,
    f: &mut [f64],
) {
    let d = q.len();
    let Columns { tokens, values, n } = columns;
    let count = count.min(n);
    let mut z = [0.0; CHUNK];
    let shift = if softmax {
        let mut m = [f64::NEG_INFINITY; LANES];
        for start in (0..count).step_by(CHUNK) {
            let range = start..(start + CHUNK).min(count);
            let len = range.len();
            scores(q, tokens, n, range, &mut z);
            for (i, &zj) in z[..len].iter().enumerate() {
                let l = i % LANES;
                m[l] = if zj > m[l] { zj } else { m[l] };
            }
        }
        m.into_iter().fold(f64::NEG_INFINITY, f64::max)
    } else {
        0.0
    };
    let mut sums = [[0.0; LANES]; MAX_D];
    let mut total = [0.0; LANES];
    for start in (0..count).step_by(CHUNK) {
        let range = start..(start + CHUNK).min(count);
        let len = range.len();
        scores(q, tokens, n, range.clone(), &mut z);
        let w = &mut z[..len];
        for wj in w.iter_mut() {
            *wj = exp_lane::<FUSED>(*wj - shift);
        }
        for (c, sum) in sums.iter_mut().enumerate().take(d) {
            dot_in_lanes(sum, w, &values[c * n + range.start..c * n + range.end]);
        }
        if softmax {
            for (i, wj) in w.iter().enumerate() {
                total[i % LANES] += wj;
            }
        }
    }
    let scale = if softmax {
        1.0 / total.iter().sum::<f64>()
    } else {
        1.0
    };
    for (c, fc) in f.iter_mut().enumerate() {
        *fc = sums[c].iter().sum::<f64>() * scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_orthogonal_tokens() {
        // Tokens (1, 0) and (0, 1), values equal to the tokens, query (0.5, 0).
        let cols = Columns {
            tokens: &[1.0, 0.0, 0.0, 1.0],
            values: &[1.0, 0.0, 0.0, 1.0],
            n: 2,
        };
        let mut f = [0.0; 2];
        pairwise_sum(&[0.5, 0.0], cols, false, &mut f);
        assert!((f[0] - 0.5f64.exp()).abs() < 1e-15 && (f[1] - 1.0).abs() < 1e-15);
    }

    #[test]
    fn matches_the_sums_written_out() {
        for (n, d) in [(1, 1), (7, 2), (8, 3), (29, 5), (64, 8)] {
            let tokens: Vec<f64> = (0..n * d).map(|i| (i as f64 * 0.37).sin()).collect();
            let values: Vec<f64> = (0..n * d).map(|i| (i as f64 * 0.11).cos()).collect();
            let q: Vec<f64> = (0..d).map(|c| 1.5 - c as f64 * 0.4).collect();
            let columns = Columns {
                tokens: &tokens,
                values: &values,
                n,
            };
            let z: Vec<f64> = (0..n)
                .map(|j| (0..d).map(|c| q[c] * tokens[c * n + j]).sum())
                .collect();
            let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            for softmax in [false, true] {
                let mut f = vec![0.0; d];
                pairwise_sum(&q, columns, softmax, &mut f);
                let shift = if softmax { m } else { 0.0 };
                let total: f64 = z.iter().map(|zj| (zj - shift).exp()).sum();
                for c in 0..d {
                    let sum: f64 = (0..n)
                        .map(|j| (z[j] - shift).exp() * values[c * n + j])
                        .sum();
                    let expected = if softmax { sum / total } else { sum };
                    assert!(
                        (f[c] - expected).abs() < 1e-13 * (1.0 + expected.abs()),
                        "n {n} d {d} softmax {softmax}: {} vs {expected}",
                        f[c]
                    );
                }
            }
        }
    }
}
