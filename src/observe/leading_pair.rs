//! The leading eigenpair of the moment S by a few Lanczos steps, proven to be the leading one by
//! the power sums tr(S^2), tr(S^4) (docs/MATH.md §5.1).
//!
//! ```text
//! q_1 = S e_j / |S e_j|  (j: the largest diagonal entry),
//! q_{m+1} beta_m = S q_m - alpha_m q_m - beta_{m-1} q_{m-1}   (reorthogonalised, twice),
//! T_m = tridiag(beta, alpha, beta),  (theta, u) its top eigenpair,  v = Q_m u / |Q_m u|,
//! r = |S v - theta v|,  theta = v^T S v:  some eigenvalue lambda_j of S is within r of theta;
//! the others hold sum mu^p <= tr(S^p) - lambda_j^p (p even), so every other |mu| <= b_p with
//! b_p = (tr(S^p) - (theta - r)^p)^(1/p), and theta - r > b_p proves lambda_j = lambda_max
//! (simple), |theta - lambda_max| <= r^2 / g,  angle(v, leading eigenvector) <= r / g,
//! g = theta - r - b_p;   p = 2 (tr S^2 = |S|_F^2), else p = 4 (tr S^4 = |S^2|_F^2, one product).
//! ```
//!
//! A clustered state has one dominant eigenvalue (one cluster, two antipodal ones, or a few near
//! each other), and the steps stop after a handful of products with S (O(m d^2)) instead of a full
//! decomposition (O(d^3), about 1 ms at d = 100). When the residual does not fall below
//! [`TOLERANCE`] |S|_F in [`MAX_STEPS`] steps, or the proof fails (nearly isotropic tokens, a few
//! clusters of equal weight far apart), the caller decomposes S in full.

use nalgebra::{DMatrix, DVector, SymmetricEigen};

/// Largest number of Lanczos steps before the full decomposition takes over.
pub const MAX_STEPS: usize = 32;
/// The residual |S v - theta v| accepted, as a multiple of |S|_F: 64 roundings, more than a
/// product with S itself carries in d = 100.
pub const TOLERANCE: f64 = 64.0 * f64::EPSILON;

/// lambda_max(S) and a unit eigenvector for it, when the steps converge and the proof holds;
/// `None` otherwise (module docs). `s` must be symmetric.
pub fn leading_pair(s: &DMatrix<f64>) -> Option<(f64, Vec<f64>)> {
    let d = s.nrows();
    let frobenius = s.norm();
    if d == 0 || !(frobenius > 0.0 && frobenius.is_finite()) {
        return None;
    }
    let j = largest_diagonal(s)?;
    let mut krylov = Krylov::new(s.column(j).into_owned())?;
    let mut power_sums = PowerSums::new(s, frobenius);
    for m in 1..=MAX_STEPS.min(d) {
        let invariant = krylov.extend(s);
        // The Ritz pair after 1, 2, 3, 4 steps, then every fourth.
        if !(invariant || m <= 4 || m % 4 == 0) {
            continue;
        }
        let (v, theta) = krylov.top_ritz_vector()?;
        if let Some(pair) = certified(s, v, &mut power_sums) {
            return Some(pair);
        }
        if invariant || theta <= 0.0 {
            return None;
        }
    }
    None
}

/// The index of the largest diagonal entry of `s` (the last of equal ones), the start of the
/// Lanczos steps and of the inverse iteration; `None` for an empty matrix.
pub fn largest_diagonal(s: &DMatrix<f64>) -> Option<usize> {
    (0..s.nrows()).max_by(|&a, &b| s[(a, a)].total_cmp(&s[(b, b)]))
}

/// tr(S^p) for p = 2 (|S|_F^2) and, when first asked for, p = 4 (|S^2|_F^2).
struct PowerSums<'a> {
    s: &'a DMatrix<f64>,
    second: f64,
    fourth: Option<f64>,
}

impl<'a> PowerSums<'a> {
    fn new(s: &'a DMatrix<f64>, frobenius: f64) -> Self {
        PowerSums {
            s,
            second: frobenius * frobenius,
            fourth: None,
        }
    }

    fn fourth(&mut self) -> f64 {
        *self
            .fourth
            .get_or_insert_with(|| (self.s * self.s).norm_squared())
    }
}

/// Whether an eigenvalue at least `low` exceeds every other eigenvalue in modulus, given
/// sum lambda^p = `sum` (p even): low^p > sum - low^p, with a margin far above the sum's rounding.
fn dominates(low: f64, sum: f64, p: i32) -> bool {
    low > 0.0 && 2.0 * low.powi(p) > sum * (1.0 + 1e-12)
}

/// The pair (theta, v) when its residual is within tolerance and the proof holds: by
/// tr(S^2), else by tr(S^4) (module docs).
fn certified(s: &DMatrix<f64>, v: DVector<f64>, sums: &mut PowerSums) -> Option<(f64, Vec<f64>)> {
    let sv = s * &v;
    let theta = v.dot(&sv);
    let r = (&sv - &v * theta).norm();
    if r > TOLERANCE * sums.second.sqrt() {
        return None;
    }
    let low = theta - r;
    let proven = dominates(low, sums.second, 2) || dominates(low, sums.fourth(), 4);
    proven.then(|| (theta, v.iter().copied().collect()))
}

/// An orthonormal Krylov basis of S and the tridiagonal matrix of S in it.
struct Krylov {
    basis: Vec<DVector<f64>>,
    alpha: Vec<f64>,
    beta: Vec<f64>,
}

impl Krylov {
    fn new(start: DVector<f64>) -> Option<Self> {
        let norm = start.norm();
        (norm > 0.0).then(|| Krylov {
            basis: vec![start / norm],
            alpha: Vec::new(),
            beta: Vec::new(),
        })
    }

    /// One Lanczos step: alpha_m, beta_m and q_{m+1}; true when the basis spans an invariant
    /// subspace (beta_m vanishes: no new direction).
    fn extend(&mut self, s: &DMatrix<f64>) -> bool {
        let q = self.basis.last().expect("a start vector");
        let mut w = s * q;
        let alpha = q.dot(&w);
        for _ in 0..2 {
            for b in &self.basis {
                let c = b.dot(&w);
                w.axpy(-c, b, 1.0);
            }
        }
        let beta = w.norm();
        self.alpha.push(alpha);
        let scale = self.alpha.iter().fold(0.0f64, |m, a| m.max(a.abs()));
        let new_direction = beta > f64::EPSILON * scale;
        if !new_direction || self.basis.len() == w.len() {
            return true;
        }
        self.beta.push(beta);
        self.basis.push(w / beta);
        false
    }

    /// The Ritz vector of the top eigenvalue of T_m (unit) and that eigenvalue.
    fn top_ritz_vector(&self) -> Option<(DVector<f64>, f64)> {
        let m = self.alpha.len();
        let t = DMatrix::from_fn(m, m, |a, b| match a.abs_diff(b) {
            0 => self.alpha[a],
            1 => self.beta[a.min(b)],
            _ => 0.0,
        });
        let eigen = SymmetricEigen::new(t);
        let top = (0..m).max_by(|&a, &b| eigen.eigenvalues[a].total_cmp(&eigen.eigenvalues[b]))?;
        let u = eigen.eigenvectors.column(top);
        let mut v = DVector::zeros(self.basis[0].len());
        for (q, c) in self.basis.iter().zip(u.iter()) {
            v.axpy(*c, q, 1.0);
        }
        let norm = v.norm();
        (norm > 0.0).then(|| (v / norm, eigen.eigenvalues[top]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, StandardNormal};

    /// S of n tokens in k clusters of the given spread around random centres in d dimensions.
    fn moment(rng: &mut ChaCha8Rng, n: usize, d: usize, k: usize, spread: f64) -> DMatrix<f64> {
        let mut gauss = |len: usize| -> Vec<f64> {
            (0..len).map(|_| StandardNormal.sample(&mut *rng)).collect()
        };
        let centres: Vec<Vec<f64>> = (0..k).map(|_| gauss(d)).collect();
        let mut s = DMatrix::zeros(d, d);
        for i in 0..n {
            let g = gauss(d);
            let x: Vec<f64> = (0..d).map(|c| centres[i % k][c] + spread * g[c]).collect();
            let x = DVector::from_vec(x).normalize();
            s += &x * x.transpose() / n as f64;
        }
        s
    }

    #[test]
    fn agrees_with_the_full_decomposition_whenever_it_answers() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut answered = 0;
        for trial in 0..160 {
            let d = [16, 40, 100][trial % 3];
            let k = 1 + (trial / 3) % 4;
            let spread = [0.0, 1e-6, 1e-3, 0.05, 0.3, 3.0][(trial / 12) % 6];
            let s = moment(&mut rng, 60 + trial, d, k, spread);
            let full = SymmetricEigen::new(s.clone());
            let mut order: Vec<usize> = (0..d).collect();
            order.sort_by(|&a, &b| full.eigenvalues[b].total_cmp(&full.eigenvalues[a]));
            let (top, second) = (full.eigenvalues[order[0]], full.eigenvalues[order[1]]);
            let Some((lambda, v)) = leading_pair(&s) else {
                continue;
            };
            answered += 1;
            assert!(
                (lambda - top).abs() <= 32.0 * f64::EPSILON * top,
                "trial {trial}: {lambda} against {top}"
            );
            let e = full.eigenvectors.column(order[0]);
            let c: f64 = e.iter().zip(&v).map(|(a, b)| a * b).sum();
            // |v - sign(c) e| (the sine of a tiny angle through 1 - c^2 would be all rounding).
            let apart = e
                .iter()
                .zip(&v)
                .map(|(a, b)| (b - c.signum() * a).powi(2))
                .sum::<f64>()
                .sqrt();
            assert!(
                apart <= 1e-13 / (top - second),
                "trial {trial}: the axes {apart} apart (gap {})",
                top - second
            );
        }
        // Clustered states (one dominant eigenvalue) are what the steps are for.
        assert!(answered > 80, "answered {answered} of 160");
    }

    #[test]
    fn gives_up_where_the_leading_eigenvalue_is_not_proven() {
        // Isotropic: every eigenvalue 1/d, no proof possible.
        let d = 20;
        assert!(leading_pair(&(DMatrix::identity(d, d) / d as f64)).is_none());
        // Two clusters of equal weight at right angles: a double top eigenvalue.
        let mut s = DMatrix::zeros(d, d);
        s[(0, 0)] = 0.5;
        s[(1, 1)] = 0.5;
        assert!(leading_pair(&s).is_none());
        // One cluster: S = x x^T, found at once.
        let x = DVector::from_fn(d, |i, _| (i as f64 + 1.0).sin()).normalize();
        let (lambda, v) = leading_pair(&(&x * x.transpose())).unwrap();
        assert!((lambda - 1.0).abs() < 1e-15);
        assert!((x.dot(&DVector::from_vec(v)).abs() - 1.0).abs() < 1e-15);
    }
}
