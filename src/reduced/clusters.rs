//! The cluster model: k weighted points that move as the tokens of k tight clusters
//! (docs/MATH.md §11).
//!
//! ```text
//! y_a' = P_{y_a} f_a,   f_a = sum_heads sum_b w_b h(beta <y_a, A y_b>) V y_b        (lsa, usa)
//!                       f_a = sum_heads sum_b w_b e^{beta <y_a, A y_b>} V y_b
//!                                 / sum_b w_b e^{beta <y_a, A y_b>}                 (sa)
//! ```
//!
//! with w_a = n_a / n: the full model with the tokens of each cluster put at one point. Two
//! points at one place move as one point of the summed weight, so the state keeps its k points
//! for the whole run; when two come within [`MERGE_ANGLE`] they are merged, both put at their
//! weighted mean direction (in [`Dynamics::project`], after every output interval). The tokens
//! of a state are the points repeated n_a times (n x d), so every observer sees what the full
//! model with exact clusters would show.

use std::borrow::Cow;

use crate::integrate::Dynamics;
use crate::model::{Attention, Kernel};
use crate::observe::clusters::{angle_between, Clustering};
use crate::observe::order::order_parameters_of_points;
use crate::observe::OrderParameters;

/// Points closer than this (radians) are merged into one.
pub const MERGE_ANGLE: f64 = 1e-9;

/// k weighted points on the sphere obeying the full model's kernel.
pub struct ClusterModel {
    attention: Attention,
    /// Tokens per point (n_a); their sum is n.
    counts: Vec<usize>,
    d: usize,
    /// Per head: A^T and V, row-major d x d.
    a_t: Vec<Vec<f64>>,
    v: Vec<Vec<f64>>,
}

impl ClusterModel {
    /// The model of points with `counts` tokens each, for the layer `attention`.
    pub fn new(attention: Attention, counts: Vec<usize>) -> Self {
        let d = attention.d();
        let row_major = |m: &nalgebra::DMatrix<f64>| -> Vec<f64> {
            (0..d)
                .flat_map(|i| (0..d).map(move |j| (i, j)))
                .map(|(i, j)| m[(i, j)])
                .collect()
        };
        let a_t = attention
            .heads
            .iter()
            .map(|h| row_major(&h.a.transpose()))
            .collect();
        let v = attention.heads.iter().map(|h| row_major(&h.v)).collect();
        ClusterModel {
            attention,
            counts,
            d,
            a_t,
            v,
        }
    }

    /// The model and its initial state (the centres) for the clusters of a configuration.
    pub fn from_clusters(attention: Attention, clusters: &Clustering) -> (Self, Vec<f64>) {
        let state = clusters.centres.concat();
        (ClusterModel::new(attention, clusters.sizes.clone()), state)
    }

    /// Number of points k.
    pub fn points(&self) -> usize {
        self.counts.len()
    }

    /// Tokens per point.
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    fn n(&self) -> usize {
        self.counts.iter().sum::<usize>().max(1)
    }

    /// M x for a row-major d x d matrix.
    fn apply(m: &[f64], x: &[f64], out: &mut [f64]) {
        for (o, row) in out.iter_mut().zip(m.chunks_exact(x.len())) {
            *o = row.iter().zip(x).map(|(a, b)| a * b).sum();
        }
    }

    /// The unprojected field f_a of head h at point a (added into `f`).
    fn head_field(&self, h: usize, y: &[f64], a: usize, f: &mut [f64]) {
        let d = self.d;
        let beta = self.attention.beta;
        let n = self.n() as f64;
        let ya = &y[a * d..(a + 1) * d];
        let mut q = vec![0.0; d];
        Self::apply(&self.a_t[h], ya, &mut q);
        let scores: Vec<f64> = (0..self.points())
            .map(|b| {
                let yb = &y[b * d..(b + 1) * d];
                beta * q.iter().zip(yb).map(|(u, v)| u * v).sum::<f64>()
            })
            .collect();
        let shift = match self.attention.kernel {
            Kernel::Sa => scores.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            _ => 0.0,
        };
        let mut total = 0.0;
        let mut sum = vec![0.0; d];
        for (b, &s) in scores.iter().enumerate() {
            let w = self.counts[b] as f64 / n;
            let h_value = match self.attention.kernel {
                Kernel::Lsa => s,
                Kernel::Usa => s.exp(),
                Kernel::Sa => (s - shift).exp(),
            };
            total += w * h_value;
            for (acc, v) in sum.iter_mut().zip(&y[b * d..(b + 1) * d]) {
                *acc += w * h_value * v;
            }
        }
        if self.attention.kernel == Kernel::Sa && total > 0.0 {
            sum.iter_mut().for_each(|v| *v /= total);
        }
        let mut vy = vec![0.0; d];
        Self::apply(&self.v[h], &sum, &mut vy);
        for (fi, v) in f.iter_mut().zip(vy) {
            *fi += v;
        }
    }

    /// The fastest point's speed max_a |y_a'| at `state`.
    pub fn speed(&self, state: &[f64]) -> f64 {
        let mut dy = vec![0.0; state.len()];
        self.rhs(state, &mut dy);
        dy.chunks_exact(self.d)
            .map(|v| v.iter().map(|x| x * x).sum::<f64>().sqrt())
            .fold(0.0, f64::max)
    }

    /// Whether the model has a direction growing faster than `rate` at `state`: an eigenvalue
    /// of its Jacobian (central differences of step 1e-5) with real part above `rate`. At a
    /// rest point this is a saddle; elsewhere the eigenvalues say nothing about stability.
    pub fn has_growing_direction(&self, state: &[f64], rate: f64) -> bool {
        let m = state.len();
        let h = 1e-5;
        let mut jacobian = nalgebra::DMatrix::zeros(m, m);
        let (mut plus, mut minus) = (vec![0.0; m], vec![0.0; m]);
        let mut y = state.to_vec();
        for j in 0..m {
            y[j] = state[j] + h;
            self.rhs(&y, &mut plus);
            y[j] = state[j] - h;
            self.rhs(&y, &mut minus);
            y[j] = state[j];
            for i in 0..m {
                jacobian[(i, j)] = (plus[i] - minus[i]) / (2.0 * h);
            }
        }
        jacobian.complex_eigenvalues().iter().any(|l| l.re > rate)
    }

    /// Puts every group of points closer than [`MERGE_ANGLE`] at their weighted mean direction.
    fn merge_close_points(&self, y: &mut [f64]) {
        let d = self.d;
        let k = self.points();
        for a in 0..k {
            for b in a + 1..k {
                let (ya, yb) = (&y[a * d..(a + 1) * d], &y[b * d..(b + 1) * d]);
                let angle = angle_between(ya, yb);
                if angle > MERGE_ANGLE || angle == 0.0 {
                    continue;
                }
                let (wa, wb) = (self.counts[a] as f64, self.counts[b] as f64);
                let mut mean: Vec<f64> = ya.iter().zip(yb).map(|(p, q)| wa * p + wb * q).collect();
                let norm = mean.iter().map(|v| v * v).sum::<f64>().sqrt();
                if norm > 0.0 {
                    mean.iter_mut().for_each(|v| *v /= norm);
                    y[a * d..(a + 1) * d].copy_from_slice(&mean);
                    y[b * d..(b + 1) * d].copy_from_slice(&mean);
                }
            }
        }
    }
}

impl Dynamics for ClusterModel {
    fn dimension(&self) -> usize {
        self.points() * self.d
    }

    fn rhs(&self, y: &[f64], dy: &mut [f64]) {
        let d = self.d;
        let unit: Vec<f64> = y
            .chunks_exact(d)
            .flat_map(|p| {
                let r = p.iter().map(|v| v * v).sum::<f64>().sqrt();
                p.iter().map(move |v| v / r)
            })
            .collect();
        for a in 0..self.points() {
            let mut f = vec![0.0; d];
            for h in 0..self.attention.heads.len() {
                self.head_field(h, &unit, a, &mut f);
            }
            let ya = &unit[a * d..(a + 1) * d];
            let radial: f64 = ya.iter().zip(&f).map(|(u, v)| u * v).sum();
            for ((out, fi), yi) in dy[a * d..(a + 1) * d].iter_mut().zip(&f).zip(ya) {
                *out = fi - radial * yi;
            }
        }
    }

    fn project(&self, y: &mut [f64]) -> f64 {
        let mut drift: f64 = 0.0;
        for p in y.chunks_exact_mut(self.d) {
            let r = p.iter().map(|v| v * v).sum::<f64>().sqrt();
            drift = drift.max((r - 1.0).abs());
            if r > 0.0 {
                p.iter_mut().for_each(|v| *v /= r);
            }
        }
        self.merge_close_points(y);
        drift
    }

    fn order_parameters(&self, y: &[f64]) -> OrderParameters {
        order_parameters_of_points(y, &self.counts, self.d)
    }

    fn tokens<'a>(&self, y: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        let d = self.d;
        let mut out = Vec::with_capacity(self.n() * d);
        for (p, &m) in y.chunks_exact(d).zip(&self.counts) {
            for _ in 0..m {
                out.extend_from_slice(p);
            }
        }
        Some(Cow::Owned(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Head, SphereField};
    use nalgebra::DMatrix;

    fn attention(kernel: Kernel, d: usize) -> Attention {
        let a = DMatrix::from_fn(d, d, |i, j| {
            if i == j {
                1.0
            } else {
                0.1 * (i + 2 * j) as f64
            }
        });
        let v = DMatrix::from_fn(d, d, |i, j| {
            if i == j {
                0.8
            } else {
                0.05 * (i as f64 - j as f64)
            }
        });
        Attention::new(kernel, 1.7, vec![Head { a, v }])
    }

    #[test]
    fn equals_the_full_model_with_the_tokens_of_each_cluster_at_one_point() {
        for kernel in [Kernel::Lsa, Kernel::Usa, Kernel::Sa] {
            let d = 3;
            let points = [0.3, -0.2, 0.9, -0.5, 0.4, 0.1, 0.0, 1.0, -0.6];
            let mut y: Vec<f64> = points.to_vec();
            for p in y.chunks_exact_mut(d) {
                let r = p.iter().map(|v| v * v).sum::<f64>().sqrt();
                p.iter_mut().for_each(|v| *v /= r);
            }
            let counts = vec![4, 1, 2];
            let model = ClusterModel::new(attention(kernel, d), counts.clone());
            let mut dy = vec![0.0; 9];
            model.rhs(&y, &mut dy);
            let tokens = model.tokens(&y).unwrap().into_owned();
            let field = SphereField::new(attention(kernel, d), 7);
            let mut dx = vec![0.0; 21];
            field.eval(&tokens, &mut dx);
            let mut row = 0;
            for (a, &m) in counts.iter().enumerate() {
                for _ in 0..m {
                    for c in 0..d {
                        assert!(
                            (dx[row * d + c] - dy[a * d + c]).abs() < 1e-12,
                            "{kernel:?}"
                        );
                    }
                    row += 1;
                }
            }
            let full = crate::observe::order_parameters(&tokens, d);
            let reduced = model.order_parameters(&y);
            assert!((full.r2 - reduced.r2).norm() < 1e-14);
            assert!((full.nematic - reduced.nematic).abs() < 1e-14);
        }
    }

    #[test]
    fn points_that_meet_are_merged_at_their_weighted_mean() {
        let model = ClusterModel::new(attention(Kernel::Sa, 2), vec![3, 1]);
        let e: f64 = 1e-10;
        let mut y = vec![1.0, 0.0, e.cos(), e.sin()];
        model.project(&mut y);
        assert_eq!(&y[0..2], &y[2..4]);
        assert!((y[1].atan2(y[0]) - e / 4.0).abs() < 1e-20);
    }
}
