//! The plane tokens in d > 3 are drawn in: the two leading principal axes of the tokens'
//! second-moment matrix (docs/MATH.md, pictures), with their shares of the trace.

use nalgebra::{DMatrix, SymmetricEigen};

/// Above this dimension the principal axes come from the Gram matrix of at most this many
/// tokens instead of the d x d second-moment matrix.
const DENSE_MAX: usize = 256;

/// The two leading principal axes of tokens (n x d row-major), their shares of the trace, and a
/// deterministic sign (largest component positive).
///
/// For d <= 256 the eigenvectors of the second-moment matrix (1/n) X^T X; above, those of the
/// Gram matrix (1/m) X X^T of at most 256 evenly spread tokens (same nonzero spectrum, axes
/// X^T u normalised), so d up to 16384 costs little.
pub(crate) fn principal_axes(tokens: &[f64], d: usize) -> (Vec<f64>, Vec<f64>, (f64, f64)) {
    let unit = |i: usize| -> Vec<f64> { (0..d).map(|k| if k == i { 1.0 } else { 0.0 }).collect() };
    let fallback = (unit(0), unit(1.min(d.saturating_sub(1))), (0.0, 0.0));
    let n = tokens.len() / d.max(1);
    if d < 2 || n == 0 || !tokens.iter().all(|v| v.is_finite()) {
        return fallback;
    }
    let stride = if d > DENSE_MAX {
        n.div_ceil(DENSE_MAX)
    } else {
        1
    };
    let rows: Vec<f64> = tokens
        .chunks_exact(d)
        .step_by(stride)
        .flatten()
        .copied()
        .collect();
    let m = rows.len() / d;
    let x = DMatrix::from_row_slice(m, d, &rows);
    let (values, vectors): (Vec<f64>, Vec<Vec<f64>>) = if d <= DENSE_MAX {
        let eig = SymmetricEigen::new(x.transpose() * &x / m as f64);
        let vecs = (0..d)
            .map(|i| eig.eigenvectors.column(i).iter().copied().collect())
            .collect();
        (eig.eigenvalues.iter().copied().collect(), vecs)
    } else {
        let eig = SymmetricEigen::new(&x * x.transpose() / m as f64);
        let vecs = (0..m)
            .map(|i| {
                let v = x.transpose() * eig.eigenvectors.column(i);
                let norm = v.norm();
                if norm > 0.0 {
                    (v / norm).iter().copied().collect()
                } else {
                    vec![0.0; d]
                }
            })
            .collect();
        (eig.eigenvalues.iter().copied().collect(), vecs)
    };
    let trace: f64 = rows.iter().map(|v| v * v).sum::<f64>() / m as f64;
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[j].total_cmp(&values[i]).then(i.cmp(&j)));
    let signed = |v: &Vec<f64>| -> Vec<f64> {
        let big = v
            .iter()
            .copied()
            .fold(0.0f64, |acc, x| if x.abs() > acc.abs() { x } else { acc });
        if big < 0.0 {
            v.iter().map(|x| -x).collect()
        } else {
            v.clone()
        }
    };
    let share = |i: usize| {
        if trace > 0.0 {
            (values[i] / trace).clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let e1 = signed(&vectors[order[0]]);
    // With one token the Gram matrix has one axis; any orthogonal direction will do.
    let e2 = match order.get(1) {
        Some(&i) if vectors[i].iter().any(|v| *v != 0.0) => signed(&vectors[i]),
        _ => {
            let k = (0..d)
                .min_by(|&a, &b| e1[a].abs().total_cmp(&e1[b].abs()))
                .unwrap_or(0);
            let mut v = unit(k);
            let c = v[k] * e1[k];
            for (vi, ei) in v.iter_mut().zip(&e1) {
                *vi -= c * ei;
            }
            let norm = v.iter().map(|a| a * a).sum::<f64>().sqrt();
            v.iter().map(|a| a / norm.max(1e-300)).collect()
        }
    };
    let s2 = order.get(1).map(|&i| share(i)).unwrap_or(0.0);
    (e1, e2, (share(order[0]), s2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::dot;

    #[test]
    fn principal_axes_find_the_token_plane() {
        // Tokens in the (x2, x4) plane of R^5, mostly along x4.
        let d = 5;
        let mut tokens = Vec::new();
        for k in 0..40 {
            // Pairs +-a, so the second moment is diagonal.
            let a = 0.3 * (k as f64 * 0.7).sin() * if k % 2 == 0 { 1.0 } else { -1.0 };
            for a in [a, -a] {
                let mut x = vec![0.0; d];
                x[1] = a.sin();
                x[3] = a.cos();
                tokens.extend(x);
            }
        }
        let (e1, e2, share) = principal_axes(&tokens, d);
        assert!((e1[3] - 1.0).abs() < 1e-9, "{e1:?}");
        assert!((e2[1].abs() - 1.0).abs() < 1e-9, "{e2:?}");
        assert!(share.0 > 0.9 && share.0 + share.1 > 1.0 - 1e-9);
        let (e1, _, _) = principal_axes(&[], 4);
        assert_eq!(e1, vec![1.0, 0.0, 0.0, 0.0]);
        // High dimension: the Gram-matrix path finds the same plane.
        let d = 600;
        let mut tokens = Vec::new();
        for k in 0..700 {
            let a = 0.4 * (k as f64 * 0.37).sin();
            let mut x = vec![0.0; d];
            x[17] = a.sin();
            x[400] = a.cos();
            tokens.extend(x);
        }
        let (e1, e2, share) = principal_axes(&tokens, d);
        assert!((e1[400] - 1.0).abs() < 1e-4, "{}", e1[400]);
        assert!((e2[17].abs() - 1.0).abs() < 1e-2, "{}", e2[17]);
        assert!(share.0 > 0.9 && share.1 > 0.0);
        // One token in high dimension: two orthonormal axes.
        let one: Vec<f64> = (0..d).map(|i| if i == 3 { 1.0 } else { 0.0 }).collect();
        let (e1, e2, _) = principal_axes(&one, d);
        assert!((e1[3] - 1.0).abs() < 1e-12);
        assert!(dot(&e1, &e2).abs() < 1e-12 && (dot(&e2, &e2) - 1.0).abs() < 1e-12);
    }
}
