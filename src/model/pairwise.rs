//! The pairwise sums of the `usa` and `sa` fields for one query token, in small dimensions.
//!
//! ```text
//! usa:  f = sum_j exp(z_j) u_j,                               z_j = <q, x_j>
//! sa:   f = sum_j exp(z_j - m) u_j / sum_j exp(z_j - m),      m = max_j z_j
//! ```
//!
//! The tokens x_j and values u_j = V x_j come as columns (coordinate c of every token
//! contiguous), so that eight consecutive j fill two 4-wide vectors: the scores, their
//! exponentials ([`super::exp`]) and the weighted sums run on vectors with eight partial sums per
//! coordinate, added in a fixed order at the end. The grouping does not depend on threads, so
//! the result is the same for any number of them. On x86-64 with AVX2 and FMA (checked at run
//! time) the kernel is compiled for those instructions.

use super::exp::exp_lane;

/// Largest dimension this kernel serves (larger d goes through blocked matrix products).
pub const MAX_D: usize = 8;
/// Token pairs processed together.
const LANES: usize = 8;

/// The tokens and values of all n tokens, coordinate by coordinate.
#[derive(Clone, Copy)]
pub struct Columns<'a> {
    /// Coordinate c of token j at c n + j.
    pub tokens: &'a [f64],
    /// Coordinate c of u_j at c n + j.
    pub values: &'a [f64],
    pub n: usize,
}

/// Writes into `f` the `usa` sum (`softmax` false) or the `sa` weighted mean for query `q`.
///
/// ```
/// use tokdyn::model::pairwise::{pairwise_sum, Columns};
/// // Two tokens (1, 0) and (0, 1), values equal to the tokens, query (0.5, 0).
/// let cols = Columns { tokens: &[1.0, 0.0, 0.0, 1.0], values: &[1.0, 0.0, 0.0, 1.0], n: 2 };
/// let mut f = [0.0; 2];
/// pairwise_sum(&[0.5, 0.0], cols, false, &mut f);
/// assert!((f[0] - 0.5f64.exp()).abs() < 1e-15 && (f[1] - 1.0).abs() < 1e-15);
/// ```
pub fn pairwise_sum(q: &[f64], columns: Columns<'_>, softmax: bool, f: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if super::exp::has_avx2_fma() {
        // SAFETY: the CPU supports the features this function is compiled for.
        unsafe { pairwise_sum_avx2(q, columns, softmax, f) };
        return;
    }
    pairwise_sum_lanes::<false>(q, columns, softmax, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn pairwise_sum_avx2(q: &[f64], columns: Columns<'_>, softmax: bool, f: &mut [f64]) {
    pairwise_sum_lanes::<true>(q, columns, softmax, f)
}

/// z_j = <q, x_j> for the LANES tokens from `start`.
#[inline(always)]
fn scores(q: &[f64], tokens: &[f64], n: usize, start: usize) -> [f64; LANES] {
    let mut z = [0.0; LANES];
    for (c, &qc) in q.iter().enumerate() {
        let x = &tokens[c * n + start..c * n + start + LANES];
        for l in 0..LANES {
            z[l] += qc * x[l];
        }
    }
    z
}

/// z_j = <q, x_j> for one token.
#[inline(always)]
fn score(q: &[f64], tokens: &[f64], n: usize, j: usize) -> f64 {
    let mut z = 0.0;
    for (c, &qc) in q.iter().enumerate() {
        z += qc * tokens[c * n + j];
    }
    z
}

#[inline(always)]
fn pairwise_sum_lanes<const FUSED: bool>(
    q: &[f64],
    columns: Columns<'_>,
    softmax: bool,
    f: &mut [f64],
) {
    let d = q.len();
    let Columns { tokens, values, n } = columns;
    let full = n - n % LANES;
    let shift = if softmax {
        let mut m = [f64::NEG_INFINITY; LANES];
        for start in (0..full).step_by(LANES) {
            let z = scores(q, tokens, n, start);
            for l in 0..LANES {
                m[l] = if z[l] > m[l] { z[l] } else { m[l] };
            }
        }
        let tail = (full..n).map(|j| score(q, tokens, n, j));
        m.into_iter().chain(tail).fold(f64::NEG_INFINITY, f64::max)
    } else {
        0.0
    };
    let mut sums = [[0.0; LANES]; MAX_D];
    let mut total = [0.0; LANES];
    for start in (0..full).step_by(LANES) {
        let mut w = scores(q, tokens, n, start);
        for wl in w.iter_mut() {
            *wl = exp_lane::<FUSED>(*wl - shift);
        }
        for (c, sum) in sums.iter_mut().enumerate().take(d) {
            let u = &values[c * n + start..c * n + start + LANES];
            for l in 0..LANES {
                sum[l] += w[l] * u[l];
            }
        }
        for l in 0..LANES {
            total[l] += w[l];
        }
    }
    let mut tail_total = 0.0;
    let mut tail_sums = [0.0; MAX_D];
    for j in full..n {
        let w = exp_lane::<FUSED>(score(q, tokens, n, j) - shift);
        tail_total += w;
        for (c, sum) in tail_sums.iter_mut().enumerate().take(d) {
            *sum += w * values[c * n + j];
        }
    }
    let scale = if softmax {
        1.0 / (total.iter().sum::<f64>() + tail_total)
    } else {
        1.0
    };
    for (c, fc) in f.iter_mut().enumerate() {
        *fc = (sums[c].iter().sum::<f64>() + tail_sums[c]) * scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
