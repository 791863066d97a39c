//! Order parameters of a token configuration (docs/MATH.md §5).
//!
//! ```text
//! R2 = (1/n) sum_k e^{2 i t_k}        t_k = angle of (x_k1, x_k2); a token on the axis counts as t = 0
//! R1 = |(1/n) sum_k x_k|              one cluster (R1 -> 1) or two antipodal ones (R1 -> 0)
//! s  = (d lambda_max(S) - 1)/(d - 1)  nematic order, S = (1/n) sum_k x_k x_k^T; s = |R2| when d = 2
//! ```
//!
//! Points carrying several tokens each (the cluster model): with fewer points k than dimensions,
//! S = Q^T Q with rows q_i = sqrt(m_i / n) p_i has rank <= k, and its leading eigenpair comes
//! from the k x k matrix G = Q Q^T (docs/MATH.md §5).
//!
//! e^{2 i t} is formed without trigonometry: for (x1, x2) = r (cos t, sin t),
//! e^{2 i t} = (x1^2 - x2^2 + 2 i x1 x2) / r^2.

use nalgebra::{DMatrix, SymmetricEigen};
use num_complex::Complex64;

use crate::parallel::{chunk_count, chunked_sum};

/// The order parameters of one sample.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderParameters {
    /// R2 = (1/n) sum e^{2 i t_k}.
    pub r2: Complex64,
    /// R1 = |(1/n) sum x_k|; `None` for models that do not carry the tokens' signs (`oa`).
    pub r1: Option<f64>,
    /// Nematic order s in [0, 1].
    pub nematic: f64,
    /// Leading eigenvector of S (the cluster axis) when d > 2; in d = 2 the axis is arg R2 / 2.
    pub axis: Option<Vec<f64>>,
}

impl OrderParameters {
    /// Order parameters of a model that knows only R2 in d = 2 (`s = |R2|`, no R1).
    pub fn from_r2(r2: Complex64) -> Self {
        OrderParameters {
            r2,
            r1: None,
            nematic: r2.norm(),
            axis: None,
        }
    }

    /// arg R2 in (-pi, pi] (the documented range; `atan2` can return -pi).
    pub fn r2_arg(&self) -> f64 {
        principal_arg(self.r2)
    }
}

/// arg z in (-pi, pi].
pub fn principal_arg(z: Complex64) -> f64 {
    let a = z.arg();
    if a <= -std::f64::consts::PI {
        std::f64::consts::PI
    } else {
        a
    }
}

/// e^{2 i t} for the angle t of (x1, x2); 1 for a token on the axis (x1 = x2 = 0).
pub fn doubled_phase(x1: f64, x2: f64) -> Complex64 {
    let r2 = x1 * x1 + x2 * x2;
    if r2 == 0.0 {
        Complex64::new(1.0, 0.0)
    } else {
        Complex64::new((x1 * x1 - x2 * x2) / r2, 2.0 * x1 * x2 / r2)
    }
}

/// R2 of tokens (n x d row-major).
///
/// ```
/// use tokdyn::observe::order_parameter_r2;
/// // Two antipodal tokens and one at angle pi/2: e^{0} + e^{2 pi i} + e^{i pi} -> (1 + 1 - 1)/3.
/// let r2 = order_parameter_r2(&[1.0, 0.0, -1.0, 0.0, 0.0, 1.0], 2);
/// assert!((r2.re - 1.0 / 3.0).abs() < 1e-15 && r2.im.abs() < 1e-15);
/// ```
pub fn order_parameter_r2(tokens: &[f64], d: usize) -> Complex64 {
    order_parameters(tokens, d).r2
}

/// All order parameters of tokens (n x d row-major, unit rows), in one deterministic pass.
pub fn order_parameters(tokens: &[f64], d: usize) -> OrderParameters {
    order_parameters_mapped(tokens, d, d, |rows, _| rows)
}

/// The order parameters of the tokens that `map` makes from the rows of `source` (rows of
/// `stride` numbers), one chunk at a time: `map(rows, buffer)` returns the chunk's tokens (n_c x d,
/// unit rows), written into `buffer` (TOKENS_PER_CHUNK x d, allocated per chunk) or borrowed.
/// The sums are those of [`order_parameters`], so a model that carries its tokens implicitly
/// (the group model) reports exactly what the full model would.
pub fn order_parameters_mapped<F>(
    source: &[f64],
    stride: usize,
    d: usize,
    map: F,
) -> OrderParameters
where
    F: for<'a> Fn(&'a [f64], &'a mut Vec<f64>) -> &'a [f64] + Sync,
{
    let n = source.len() / stride;
    let upper = d * (d + 1) / 2;
    // Accumulators: [Re R2, Im R2, sum x (d), upper triangle of sum x x^T].
    let width = 2 + d + upper;
    let mut partials = vec![0.0; width * chunk_count(n)];
    let mut sums = vec![0.0; width];
    chunked_sum(
        source,
        stride,
        width,
        &mut partials,
        &mut sums,
        |chunk, acc| {
            let mut buffer = Vec::new();
            let rows = map(chunk, &mut buffer);
            // The same additions in the same order, in AVX2 registers where the CPU has them.
            crate::simd::vectorized(
                #[inline(always)]
                || add_token_sums(rows, d, acc),
            );
        },
    );
    let mut moment = DMatrix::zeros(d, d);
    let mut idx = 2 + d;
    for a in 0..d {
        for b in a..d {
            moment[(a, b)] = sums[idx];
            moment[(b, a)] = sums[idx];
            idx += 1;
        }
    }
    let r2_sum = Complex64::new(sums[0], sums[1]);
    order_parameters_from_sums(n, r2_sum, &sums[2..2 + d], moment)
}

/// acc += [e^{2 i t_k} (re, im), x_k, upper triangle of x_k x_k^T] for each row x_k of `rows`,
/// token after token.
#[inline(always)]
fn add_token_sums(rows: &[f64], d: usize, acc: &mut [f64]) {
    if d == 2 {
        return add_plane_sums(rows, acc);
    }
    for x in rows.chunks_exact(d) {
        let w = doubled_phase(x[0], x[1]);
        acc[0] += w.re;
        acc[1] += w.im;
        for (a, xa) in x.iter().enumerate() {
            acc[2 + a] += xa;
        }
        let mut idx = 2 + d;
        for a in 0..d {
            for (s, xb) in acc[idx..idx + d - a].iter_mut().zip(&x[a..]) {
                *s += x[a] * xb;
            }
            idx += d - a;
        }
    }
}

/// [`add_token_sums`] for d = 2: the same additions in the same order (so the same doubles),
/// the phases of a block of tokens first, side by side in vector lanes (their divisions are
/// independent), then added token after token into seven sums kept in registers.
#[inline(always)]
fn add_plane_sums(rows: &[f64], acc: &mut [f64]) {
    const BLOCK: usize = 16;
    let mut sums = [0.0; 7];
    sums.copy_from_slice(&acc[..7]);
    let (mut re, mut im) = ([0.0; BLOCK], [0.0; BLOCK]);
    for block in rows.chunks(2 * BLOCK) {
        let m = block.len() / 2;
        for (k, x) in block.chunks_exact(2).enumerate() {
            let w = doubled_phase(x[0], x[1]);
            (re[k], im[k]) = (w.re, w.im);
        }
        for (k, x) in block.chunks_exact(2).enumerate().take(m) {
            sums[0] += re[k];
            sums[1] += im[k];
            sums[2] += x[0];
            sums[3] += x[1];
            sums[4] += x[0] * x[0];
            sums[5] += x[0] * x[1];
            sums[6] += x[1] * x[1];
        }
    }
    acc[..7].copy_from_slice(&sums);
}

/// The order parameters of k points (rows of `points`, unit vectors in R^d) carrying `counts[i]`
/// tokens each: those of the n = sum counts tokens, as [`order_parameters`] would give them.
/// With k < d (d > 2) the nematic order and the axis come from G = Q Q^T, k x k, instead of the
/// d x d moment: S = Q^T Q has G's nonzero eigenvalues, and a unit eigenvector v of G for
/// lambda gives S's unit eigenvector Q^T v / sqrt(lambda).
pub fn order_parameters_of_points(points: &[f64], counts: &[usize], d: usize) -> OrderParameters {
    let n: usize = counts.iter().sum();
    let mut r2 = Complex64::new(0.0, 0.0);
    let mut sum_x = vec![0.0; d];
    for (p, &m) in points.chunks_exact(d).zip(counts) {
        let w = m as f64;
        r2 += doubled_phase(p[0], p[1]) * w;
        for (s, x) in sum_x.iter_mut().zip(p) {
            *s += w * x;
        }
    }
    let k = counts.len();
    if d <= 2 || k >= d {
        let mut moment = DMatrix::zeros(d, d);
        for (p, &m) in points.chunks_exact(d).zip(counts) {
            let w = m as f64;
            for i in 0..d {
                for j in 0..d {
                    moment[(i, j)] += w * p[i] * p[j];
                }
            }
        }
        return order_parameters_from_sums(n, r2, &sum_x, moment);
    }
    let inv_n = 1.0 / n as f64;
    let scaled: Vec<f64> = points
        .chunks_exact(d)
        .zip(counts)
        .flat_map(|(p, &m)| {
            let r = (m as f64 * inv_n).sqrt();
            p.iter().map(move |x| r * x)
        })
        .collect();
    let q = DMatrix::from_row_slice(k, d, &scaled);
    let eigen = SymmetricEigen::new(&q * q.transpose());
    let (imax, lambda) = leading(eigen.eigenvalues.as_slice());
    let axis =
        q.transpose() * eigen.eigenvectors.column(imax) / lambda.max(f64::MIN_POSITIVE).sqrt();
    let s = (d as f64 * lambda - 1.0) / (d as f64 - 1.0);
    let r1 = sum_x
        .iter()
        .map(|s| (s * inv_n).powi(2))
        .sum::<f64>()
        .sqrt();
    OrderParameters {
        r2: r2 * inv_n,
        r1: Some(r1),
        nematic: s.clamp(0.0, 1.0),
        axis: Some(axis.iter().copied().collect()),
    }
}

/// The index and value of the largest of `values` (the first of equals).
fn leading(values: &[f64]) -> (usize, f64) {
    values
        .iter()
        .copied()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |best, (i, l)| {
            if l > best.1 {
                (i, l)
            } else {
                best
            }
        })
}

/// The order parameters from the sums over n tokens of e^{2 i t_k}, of x_k and of x_k x_k^T.
pub fn order_parameters_from_sums(
    n: usize,
    r2_sum: Complex64,
    sum_x: &[f64],
    mut moment: DMatrix<f64>,
) -> OrderParameters {
    let inv_n = 1.0 / n as f64;
    let r2 = r2_sum * inv_n;
    let r1 = sum_x
        .iter()
        .map(|s| (s * inv_n).powi(2))
        .sum::<f64>()
        .sqrt();
    moment.scale_mut(inv_n);
    let (nematic, axis) = nematic_order(&moment);
    OrderParameters {
        r2,
        r1: Some(r1),
        nematic,
        axis,
    }
}

/// s = (d lambda_max(S) - 1) / (d - 1), clamped to [0, 1], and the leading eigenvector (d > 2).
fn nematic_order(moment: &DMatrix<f64>) -> (f64, Option<Vec<f64>>) {
    let d = moment.nrows();
    if d == 2 {
        // lambda_max = (tr + sqrt((a - c)^2 + 4 b^2)) / 2 and tr = 1, so s = sqrt((a - c)^2 + 4 b^2).
        let (a, b, c) = (moment[(0, 0)], moment[(0, 1)], moment[(1, 1)]);
        let s = ((a - c).powi(2) + 4.0 * b * b).sqrt();
        return (s.clamp(0.0, 1.0), None);
    }
    let (lambda, axis) = leading_eigenpair(moment);
    let s = (d as f64 * lambda - 1.0) / (d as f64 - 1.0);
    (s.clamp(0.0, 1.0), Some(axis))
}

/// From this dimension on, the leading eigenpair of S is first sought by Lanczos steps
/// ([`super::leading_pair`]); below it the full decomposition costs little.
pub const LANCZOS_FROM_D: usize = 16;

/// lambda_max(S) and its unit eigenvector: by a few Lanczos steps when d >= [`LANCZOS_FROM_D`]
/// and they prove their answer, else by the full decomposition.
fn leading_eigenpair(moment: &DMatrix<f64>) -> (f64, Vec<f64>) {
    if moment.nrows() >= LANCZOS_FROM_D {
        if let Some(pair) = super::leading_pair::leading_pair(moment) {
            return pair;
        }
    }
    if moment.nrows() >= LANCZOS_FROM_D {
        if let Some(pair) = leading_by_inverse_iteration(moment) {
            return pair;
        }
    }
    let eigen = SymmetricEigen::new(moment.clone());
    let (imax, lambda) = leading(eigen.eigenvalues.as_slice());
    (
        lambda,
        eigen.eigenvectors.column(imax).iter().copied().collect(),
    )
}

/// lambda_max(S) from the eigenvalues alone (the tridiagonal QR steps without accumulating
/// eigenvectors) and its unit eigenvector by two steps of inverse iteration, v <- (S - mu I)^-1 v
/// / |.| with mu = lambda_max (1 + 8 eps) just above the spectrum (so S - mu I is regular), from
/// the column of S with the largest diagonal entry: each step shrinks the other components by
/// (mu - lambda_max) / (mu - lambda_2) (docs/MATH.md §5.1). About 2 d^3 operations against the
/// full decomposition's 9 d^3; `None` when a solve fails (then the full decomposition answers).
fn leading_by_inverse_iteration(moment: &DMatrix<f64>) -> Option<(f64, Vec<f64>)> {
    let d = moment.nrows();
    let (_, lambda) = leading(moment.symmetric_eigenvalues().as_slice());
    let mu = lambda + 8.0 * f64::EPSILON * lambda.abs().max(moment.norm());
    let lu = (moment - DMatrix::identity(d, d) * mu).lu();
    let j = super::leading_pair::largest_diagonal(moment)?;
    let mut v = moment.column(j).into_owned();
    for _ in 0..2 {
        let norm = v.norm();
        if !(norm > 0.0 && norm.is_finite()) {
            return None;
        }
        v /= norm;
        v = lu.solve(&v)?;
    }
    let norm = v.norm();
    (norm > 0.0 && norm.is_finite()).then(|| (lambda, (v / norm).iter().copied().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn circle(angles: &[f64]) -> Vec<f64> {
        angles.iter().flat_map(|t| [t.cos(), t.sin()]).collect()
    }

    #[test]
    fn inverse_iteration_gives_the_full_decompositions_leading_pair() {
        // Moments of nearly isotropic tokens (the case the Lanczos proof leaves to it) and of
        // a few clusters, d from 16 to 100: lambda_max to rounding, the axis to its conditioning.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for (trial, d) in [16, 30, 100, 100].into_iter().cycle().take(12).enumerate() {
            let n = 3 * d;
            let mut tokens: Vec<f64> = (0..n * d).map(|_| uniform()).collect();
            if trial % 2 == 1 {
                // Three clusters: every token pulled towards one of three directions.
                for (k, x) in tokens.chunks_exact_mut(d).enumerate() {
                    x[k % 3] += 3.0;
                }
            }
            for x in tokens.chunks_exact_mut(d) {
                let r = x.iter().map(|v| v * v).sum::<f64>().sqrt();
                x.iter_mut().for_each(|v| *v /= r);
            }
            let x = DMatrix::from_row_slice(n, d, &tokens);
            let moment = x.transpose() * &x / n as f64;
            let (lambda, v) = leading_by_inverse_iteration(&moment).expect("regular");
            let eigen = SymmetricEigen::new(moment.clone());
            let mut values: Vec<f64> = eigen.eigenvalues.iter().copied().collect();
            values.sort_by(|a, b| b.total_cmp(a));
            assert!(
                (lambda - values[0]).abs() <= 1e-14,
                "trial {trial}: {lambda} {}",
                values[0]
            );
            let v = nalgebra::DVector::from_vec(v);
            let residual = (&moment * &v - &v * lambda).norm();
            assert!(
                residual <= 1e-13 * moment.norm(),
                "trial {trial}: residual {residual:e}"
            );
            let (imax, _) = leading(eigen.eigenvalues.as_slice());
            let along = eigen.eigenvectors.column(imax).dot(&v).abs();
            let gap = values[0] - values[1];
            assert!(
                1.0 - along <= 1e-24 / (gap * gap) + 1e-14,
                "trial {trial}: {along} gap {gap:e}"
            );
        }
    }

    #[test]
    fn the_triangle_four_tokens_at_a_time_is_token_after_token_to_the_bit() {
        for (d, n) in [(3, 1), (3, 9), (7, 13), (100, 11)] {
            let rows: Vec<f64> = (0..n * d).map(|i| (i as f64 * 0.71).sin()).collect();
            let width = 2 + d + d * (d + 1) / 2;
            let start: Vec<f64> = (0..width).map(|i| (i as f64 * 0.3).cos()).collect();
            let mut fast = start.clone();
            add_token_sums(&rows, d, &mut fast);
            let mut plain = start;
            for x in rows.chunks_exact(d) {
                let w = doubled_phase(x[0], x[1]);
                plain[0] += w.re;
                plain[1] += w.im;
                let mut idx = 2;
                for xa in x {
                    plain[idx] += xa;
                    idx += 1;
                }
                for a in 0..d {
                    for xb in &x[a..] {
                        plain[idx] += x[a] * xb;
                        idx += 1;
                    }
                }
            }
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fast), bits(&plain), "d {d}, n {n}");
        }
    }

    #[test]
    fn the_plane_sums_are_the_general_loop_to_the_bit() {
        // Rows of any length (a block and a remainder), a zero row, rows off the circle.
        let rows: Vec<f64> = (0..2 * 53)
            .map(|i| {
                if i == 14 || i == 15 {
                    0.0
                } else {
                    (i as f64 * 0.37).sin() * 1.3
                }
            })
            .collect();
        let start = [0.25, -0.5, 1.0, 2.0, 0.125, -1.0, 3.0];
        let mut plane = start;
        add_plane_sums(&rows, &mut plane);
        let mut general = start;
        for x in rows.chunks_exact(2) {
            let w = doubled_phase(x[0], x[1]);
            let terms = [
                w.re,
                w.im,
                x[0],
                x[1],
                x[0] * x[0],
                x[0] * x[1],
                x[1] * x[1],
            ];
            for (s, t) in general.iter_mut().zip(terms) {
                *s += t;
            }
        }
        assert_eq!(plane.map(f64::to_bits), general.map(f64::to_bits));
    }

    #[test]
    fn r2_matches_the_trigonometric_definition() {
        let angles: Vec<f64> = (0..101).map(|k| (k as f64 * 0.731).sin() * 3.0).collect();
        let op = order_parameters(&circle(&angles), 2);
        let expected: Complex64 = angles
            .iter()
            .map(|t| Complex64::from_polar(1.0, 2.0 * t))
            .sum::<Complex64>()
            / angles.len() as f64;
        assert!((op.r2 - expected).norm() < 1e-14);
        assert!((op.nematic - expected.norm()).abs() < 1e-14);
        let mean: (f64, f64) = angles
            .iter()
            .fold((0.0, 0.0), |acc, t| (acc.0 + t.cos(), acc.1 + t.sin()));
        let r1 = (mean.0.powi(2) + mean.1.powi(2)).sqrt() / angles.len() as f64;
        assert!((op.r1.unwrap() - r1).abs() < 1e-14);
    }

    #[test]
    fn two_antipodal_clusters_have_full_nematic_order_and_no_polar_order() {
        let d = 5;
        let axis = [0.1, -0.5, 0.3, 0.7, 0.2];
        let norm = axis.iter().map(|v: &f64| v * v).sum::<f64>().sqrt();
        let mut tokens = Vec::new();
        for k in 0..10 {
            let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
            tokens.extend(axis.iter().map(|v| sign * v / norm));
        }
        let op = order_parameters(&tokens, d);
        assert!((op.nematic - 1.0).abs() < 1e-12);
        assert!(op.r1.unwrap() < 1e-15);
        let e = op.axis.unwrap();
        let overlap: f64 = e.iter().zip(axis).map(|(a, b)| a * b / norm).sum();
        assert!((overlap.abs() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn uniform_state_in_high_dimension_has_no_nematic_order() {
        // The 2d coordinate directions +-e_c: S = I/d exactly, so s = 0.
        let d = 6;
        let mut tokens = vec![0.0; 2 * d * d];
        for c in 0..d {
            tokens[(2 * c) * d + c] = 1.0;
            tokens[(2 * c + 1) * d + c] = -1.0;
        }
        assert!(order_parameters(&tokens, d).nematic < 1e-14);
    }

    #[test]
    fn arg_is_in_the_half_open_interval() {
        let op = OrderParameters::from_r2(Complex64::new(-0.5, -0.0));
        assert_eq!(op.r2_arg(), std::f64::consts::PI);
        assert_eq!(doubled_phase(0.0, 0.0), Complex64::new(1.0, 0.0));
    }

    /// Points with token counts against the tokens themselves (each point repeated), through
    /// the d x d moment: the k x k route (k < d) and the d x d one (k >= d) agree with it.
    #[test]
    fn points_with_counts_are_their_tokens() {
        let unit = |v: Vec<f64>| {
            let size = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            v.into_iter().map(|x| x / size).collect::<Vec<f64>>()
        };
        for (k, d) in [(1, 5), (2, 3), (3, 7), (4, 100), (6, 4), (5, 5)] {
            let points: Vec<f64> = (0..k)
                .flat_map(|i| unit((0..d).map(|j| ((i * d + j) as f64 * 1.37).sin()).collect()))
                .collect();
            let counts: Vec<usize> = (0..k).map(|i| 1 + (i * 7) % 5).collect();
            let tokens: Vec<f64> = points
                .chunks_exact(d)
                .zip(&counts)
                .flat_map(|(p, &m)| std::iter::repeat_n(p, m).flatten().copied())
                .collect();
            let got = order_parameters_of_points(&points, &counts, d);
            let want = order_parameters(&tokens, d);
            let what = format!("k = {k}, d = {d}");
            assert!((got.nematic - want.nematic).abs() < 1e-13, "{what}");
            assert!((got.r1.unwrap() - want.r1.unwrap()).abs() < 1e-14, "{what}");
            assert!((got.r2 - want.r2).norm() < 1e-14, "{what}");
            if d > 2 {
                let (a, b) = (got.axis.unwrap(), want.axis.unwrap());
                let dot: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
                let size: f64 = a.iter().map(|x| x * x).sum();
                assert!((dot.abs() - 1.0).abs() < 1e-12, "{what}: axis {dot}");
                assert!((size - 1.0).abs() < 1e-13, "{what}");
            }
        }
        // One point: every token on its axis.
        let one = order_parameters_of_points(&unit(vec![1.0, 2.0, 3.0, 4.0]), &[9], 4);
        assert!((one.nematic - 1.0).abs() < 1e-14);
    }
}
