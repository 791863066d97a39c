//! A sample's tokens made on demand by a model that maps its start tokens (docs/MATH.md §2.2).
//!
//! The group model's tokens are y_k = Phi x_k(0) / |Phi x_k(0)|: any one of them costs O(d^2),
//! so an observer that needs a few tokens (the leading ones for the not-yet-clustered test, a
//! subsample for the snapshots) reads those only. In d = 2 the map acts on the doubled angles
//! as an increasing circle map (det Phi > 0), so a histogram of the doubled angles follows from
//! the start tokens' doubled angles sorted once:
//!
//! ```text
//! xi_k(t) = F_t(xi_k(0)),  F_t increasing,  F_t' = det Phi / |Phi u|^2 in [1/kappa, kappa],
//! #{k : xi_k(t) in [e_j, e_{j+1})} = #{k : xi_k(0) in [F_t^{-1}(e_j), F_t^{-1}(e_{j+1}))},
//! F_t^{-1}(e) = the doubled angle of Phi^{-1} (cos e/2, sin e/2),  kappa = cond(Phi).
//! ```

use super::circle_order::CircleOrder;
use super::start_bound::{exact_sign_det, Reading};

/// The doubled angles 2 atan2(x_2, x_1) in [0, 2 pi) of d = 2 start tokens, rounded to f32,
/// with their indices: key = (f32 bits of the angle) << 32 | k, ascending (the bits of a
/// non-negative f32 order as the numbers). `None` when a token is not finite or zero, or there
/// are 2^32 tokens or more.
pub fn sorted_doubled_angles(tokens: &[f64]) -> Option<Vec<u64>> {
    use rayon::prelude::*;
    let n = tokens.len() / 2;
    if n >= u32::MAX as usize {
        return None;
    }
    let keys: Option<Vec<u64>> = tokens
        .par_chunks_exact(2)
        .enumerate()
        .map(|(k, x)| {
            let finite = x[0].is_finite() && x[1].is_finite();
            if !finite || x[0].hypot(x[1]) == 0.0 {
                return None;
            }
            let a = (2.0 * x[1].atan2(x[0])).rem_euclid(std::f64::consts::TAU);
            // Below 2 pi as an f32 too (f32(2 pi) is above 2 pi).
            let a = (a as f32).min(LAST_BELOW_TAU);
            Some((u64::from(a.to_bits()) << 32) | k as u64)
        })
        .collect();
    let mut keys = keys?;
    keys.par_sort_unstable();
    Some(keys)
}

/// The largest f32 below 2 pi (f32(2 pi) is one step above 2 pi).
const LAST_BELOW_TAU: f32 = f32::from_bits(std::f32::consts::TAU.to_bits() - 1);

/// The angle of a key of [`sorted_doubled_angles`].
pub fn key_angle(key: u64) -> f64 {
    f64::from(f32::from_bits((key >> 32) as u32))
}

/// The token index of a key of [`sorted_doubled_angles`].
pub fn key_index(key: u64) -> usize {
    (key & u64::from(u32::MAX)) as usize
}

/// A model's d = 2 tokens as one map of the start tokens: y_k = P x_k / |P x_k|, det P > 0.
#[derive(Debug, Clone, Copy)]
pub struct PlaneMap<'a> {
    /// P row-major: (p11, p12, p21, p22).
    pub p: [f64; 4],
    /// [`sorted_doubled_angles`] of the start tokens x_k.
    pub sorted: &'a [u64],
}

/// A model's d = 2 tokens as one map of the start tokens, with the start tokens and their order
/// by angle (for the clusters by bisection, docs/MATH.md §11.3): y_k = P x_k / |P x_k|. When
/// det P < 0 (its exact sign, [`exact_sign_det`]: a computed Phi whose determinant rounding
/// made negative, the exact one being positive) the map reverses the circle:
/// y_k = (P R)(R x_k) / |.| with the reflection R = diag(1, -1) (the same products, so the same
/// doubles), whose start order is the order read backwards.
#[derive(Debug, Clone, Copy)]
pub struct PlaneOrder<'a> {
    /// The increasing map: P, or P R when det P < 0 (row-major).
    pub p: [f64; 4],
    order: &'a CircleOrder,
    /// The start tokens x_k (n x 2 row-major).
    start: &'a [f64],
    reversed: bool,
}

impl<'a> PlaneOrder<'a> {
    /// The order of the map P (row-major) of the start tokens `start` ordered by `order`;
    /// `None` when det P is zero or an entry is not finite, or the tokens are not the order's.
    pub fn new(p: [f64; 4], order: &'a CircleOrder, start: &'a [f64]) -> Option<Self> {
        let det = exact_sign_det(&p);
        if !(det.is_finite() && p.iter().all(|v| v.is_finite())) || det == 0.0 {
            return None;
        }
        if start.len() != 2 * order.len() {
            return None;
        }
        let reversed = det < 0.0;
        let p = if reversed {
            [p[0], -p[1], p[2], -p[3]]
        } else {
            p
        };
        Some(PlaneOrder {
            p,
            order,
            start,
            reversed,
        })
    }

    /// What the bisection reads at position q of a sample `source` of this map: its token's
    /// angle atan2(y_2, y_1) (the double the pass over the tokens takes), its start token's
    /// angle and stretch |fl(P x)| / |x| (docs/MATH.md §11.4).
    pub fn read(&self, source: &dyn TokenSource, q: usize) -> Reading {
        let mut y = [0.0; 2];
        source.rows(self.token(q), &mut y);
        let x = self.start_token(q);
        let p = self.p;
        let image = [p[0] * x[0] + p[1] * x[1], p[2] * x[0] + p[3] * x[1]];
        Reading {
            angle: y[1].atan2(y[0]),
            start: x[1].atan2(x[0]),
            stretch: image[0].hypot(image[1]) / x[0].hypot(x[1]),
        }
    }

    /// The start token at position p as the increasing map takes it: x, or R x when reversed.
    pub fn start_token(&self, p: usize) -> [f64; 2] {
        let k = self.token(p);
        let x = [self.start[2 * k], self.start[2 * k + 1]];
        if self.reversed {
            [x[0], -x[1]]
        } else {
            x
        }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The token at position p of the increasing map's start order.
    pub fn token(&self, p: usize) -> usize {
        if self.reversed {
            self.order.token(self.order.len() - 1 - p)
        } else {
            self.order.token(p)
        }
    }

    /// The position of token k in that order.
    pub fn position(&self, k: usize) -> usize {
        if self.reversed {
            self.order.len() - 1 - self.order.position(k)
        } else {
            self.order.position(k)
        }
    }
}

/// A sample's tokens, made when asked for.
pub trait TokenSource: Sync {
    /// Number of tokens.
    fn n(&self) -> usize;
    /// Their dimension.
    fn d(&self) -> usize;
    /// Tokens first, first + 1, ... into `out` (as many whole rows as fit and exist): the same
    /// numbers as the model's pieces.
    fn rows(&self, first: usize, out: &mut [f64]);
    /// The tokens as one map of the start tokens in d = 2, when the model has it.
    fn plane_map(&self) -> Option<PlaneMap<'_>>;
    /// The tokens as one map of the start tokens in d = 2 with the start tokens' order by angle,
    /// when the model has them (default: none).
    fn plane_order(&self) -> Option<PlaneOrder<'_>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_doubled_angle_and_keep_the_index() {
        let angles = [3.0, -1.0, 0.5, 1.5, -3.1, 0.0];
        let tokens: Vec<f64> = angles
            .iter()
            .flat_map(|t: &f64| [t.cos(), t.sin()])
            .collect();
        let keys = sorted_doubled_angles(&tokens).unwrap();
        let mut expected: Vec<(f64, usize)> = angles
            .iter()
            .enumerate()
            .map(|(k, t)| ((2.0 * t).rem_euclid(std::f64::consts::TAU), k))
            .collect();
        expected.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (key, (a, k)) in keys.iter().zip(&expected) {
            assert_eq!(key_index(*key), *k);
            assert!((key_angle(*key) - a).abs() < 1e-6);
        }
        assert!(sorted_doubled_angles(&[0.0, 0.0, 1.0, 0.0]).is_none());
        assert!(sorted_doubled_angles(&[f64::NAN, 0.0]).is_none());
    }
}
