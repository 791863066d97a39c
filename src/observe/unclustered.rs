//! A cheap proof that tokens are not in tight clusters, from a few of them (docs/MATH.md §11.1).
//!
//! With the rule of [`super::clusters`] (angle theta) and a margin delta = theta 1e-6:
//!
//! ```text
//! a witness among any subset S of the tokens:
//!   tokens a, b, c of S with angle(a, b) <= theta - delta, angle(b, c) <= theta - delta
//!   and angle(a, c) > theta + delta                    (a, b, c are linked, so one group of
//!                                                        diameter > theta: not clustered)
//!   or more than max(1, ceil(sqrt n)) tokens of S pairwise more than theta + delta apart
//!                                                       (each in its own group: too many groups)
//! ```
//!
//! A clustered state has neither (tokens of one group are at most theta apart, of two groups
//! more than theta apart), so a witness proves that the full detection answers "not clustered";
//! no witness proves nothing, and then the full detection runs. The margin delta keeps the
//! proof valid whatever rounding the full detection's angles carry. The search: d = 2 sorts the
//! angles of S and walks each chain of gaps <= theta - delta from its first token until one
//! is more than theta + delta away, O(m log m); d >= 3 makes one leader pass over S (a token
//! within theta - delta of a leader is linked to it, and is compared with that leader's first
//! and farthest members; a token more than theta + delta from every leader leads a new group),
//! O(m L d) for L leaders.

use super::clusters::{angle_between, ClusterRule};

/// Tokens of S in the d-dimensional search: m d <= this many numbers.
pub const SUBSET_NUMBERS: usize = 1 << 13;

/// The margin delta as a fraction of theta.
const MARGIN: f64 = 1e-6;

/// The number of leading tokens the test looks at: m with m d <= [`SUBSET_NUMBERS`].
pub fn subset_size(d: usize) -> usize {
    (SUBSET_NUMBERS / d.max(1)).max(16)
}

/// Whether the tokens `subset` (m x d row-major, unit rows), taken from n tokens in all,
/// already prove that the n tokens are not clustered under an angle `theta` (module docs).
pub fn surely_not_clustered(subset: &[f64], d: usize, n: usize, theta: f64) -> bool {
    if d < 2 || subset.len() < 3 * d {
        return false;
    }
    let delta = MARGIN * theta;
    let (near, far) = (theta - delta, theta + delta);
    if d == 2 {
        circle_witness(subset, near, far)
    } else {
        leader_witness(subset, d, ClusterRule::max_clusters(n), near, far)
    }
}

/// d = 2: a chain of sorted angles with gaps <= near that reaches a token more than far from
/// its first token.
fn circle_witness(subset: &[f64], near: f64, far: f64) -> bool {
    let mut order: Vec<(f64, usize)> = subset
        .chunks_exact(2)
        .enumerate()
        .map(|(k, x)| (x[1].atan2(x[0]), k))
        .collect();
    order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let m = order.len();
    let row = |i: usize| &subset[order[i % m].1 * 2..order[i % m].1 * 2 + 2];
    // Chains may wrap around: walk from every chain start once more than around the circle.
    let mut start = 0;
    for i in 1..2 * m {
        let linked = angle_between(row(i - 1), row(i)) <= near;
        if !linked {
            start = i;
        } else if angle_between(row(start), row(i)) > far {
            return true;
        }
        if i - start >= m {
            // One chain all around the circle: it reaches beyond far unless far >= pi.
            start = i;
        }
    }
    false
}

/// d >= 3: one leader pass over the subset (module docs).
fn leader_witness(subset: &[f64], d: usize, cap: usize, near: f64, far: f64) -> bool {
    let row = |k: usize| &subset[k * d..(k + 1) * d];
    // Each group: its leader, first member and the member farthest from the leader so far.
    let mut groups: Vec<(usize, usize, usize, f64)> = Vec::new();
    for k in 0..subset.len() / d {
        let mut joined = false;
        let mut apart = true;
        for g in groups.iter_mut() {
            let a = angle_between(row(g.0), row(k));
            if a <= near {
                // k is linked to the leader, as are the group's members.
                let witness =
                    angle_between(row(g.1), row(k)) > far || angle_between(row(g.2), row(k)) > far;
                if witness {
                    return true;
                }
                if g.1 == g.0 {
                    g.1 = k;
                }
                if a > g.3 {
                    (g.2, g.3) = (k, a);
                }
                joined = true;
                break;
            }
            apart &= a > far;
        }
        if !joined && apart {
            if groups.len() == cap {
                return true;
            }
            groups.push((k, k, k, 0.0));
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::clusters::{detect_clusters, ClusterRule};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, StandardNormal};

    fn unit(rng: &mut ChaCha8Rng, d: usize) -> Vec<f64> {
        let v: Vec<f64> = (0..d).map(|_| StandardNormal.sample(rng)).collect();
        let r = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        v.into_iter().map(|x| x / r).collect()
    }

    /// n tokens: k random centres, each token a centre plus `spread` times a Gaussian.
    fn cloud(rng: &mut ChaCha8Rng, n: usize, d: usize, k: usize, spread: f64) -> Vec<f64> {
        let centres: Vec<Vec<f64>> = (0..k).map(|_| unit(rng, d)).collect();
        (0..n)
            .flat_map(|i| {
                let g = unit(rng, d);
                let v: Vec<f64> = centres[i % k]
                    .iter()
                    .zip(&g)
                    .map(|(c, g)| c + spread * g)
                    .collect();
                let r = v.iter().map(|x| x * x).sum::<f64>().sqrt();
                v.into_iter().map(|x| x / r).collect::<Vec<f64>>()
            })
            .collect()
    }

    /// Pairwise single linkage over all pairs, the slow independent way: whether clustered.
    fn clustered_by_pairs(tokens: &[f64], d: usize, theta: f64) -> bool {
        let n = tokens.len() / d;
        let row = |k: usize| &tokens[k * d..(k + 1) * d];
        let angle = |i: usize, j: usize| {
            let c: f64 = row(i).iter().zip(row(j)).map(|(a, b)| a * b).sum();
            c.clamp(-1.0, 1.0).acos()
        };
        let mut label: Vec<usize> = (0..n).collect();
        loop {
            let mut changed = false;
            for i in 0..n {
                for j in 0..n {
                    if angle(i, j) <= theta && label[j] < label[i] {
                        label[i] = label[j];
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let wide = (0..n).any(|i| (0..n).any(|j| label[i] == label[j] && angle(i, j) > theta));
        let mut groups = label.clone();
        groups.sort_unstable();
        groups.dedup();
        !wide && groups.len() <= ClusterRule::max_clusters(n)
    }

    #[test]
    fn a_witness_agrees_with_the_full_linkage() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let (mut proved, mut clustered) = (0, 0);
        for trial in 0..240 {
            let d = 2 + trial % 3;
            let k = 1 + trial % 4;
            let n = 40 + (trial * 13) % 150;
            let spread = [0.0, 0.01, 0.03, 0.08, 0.5, 3.0][trial % 6];
            let tokens = cloud(&mut rng, n, d, k, spread);
            let theta = [0.1, 0.25][trial % 2];
            let by_pairs = clustered_by_pairs(&tokens, d, theta);
            let rule = ClusterRule::new(theta).unwrap();
            let full = detect_clusters(&tokens, d, rule).count > 0;
            // The first m tokens (all of them, or a part).
            let m = [n, n / 2, 20][trial % 3];
            let witness = surely_not_clustered(&tokens[..m * d], d, n, theta);
            if witness {
                assert!(
                    !by_pairs && !full,
                    "trial {trial}: d = {d}, k = {k}, n = {n}"
                );
                proved += 1;
            }
            clustered += by_pairs as usize;
        }
        // Both kinds occurred, and most unclustered states were proved so.
        assert!(clustered > 40, "{clustered}");
        assert!(
            proved > (240 - clustered) / 2,
            "{proved} of {}",
            240 - clustered
        );
    }

    #[test]
    fn uniform_tokens_are_proved_unclustered_from_a_few() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for d in [2, 3, 6] {
            let n = 20_000;
            let tokens: Vec<f64> = (0..n).flat_map(|_| unit(&mut rng, d)).collect();
            let m = subset_size(d).min(n);
            assert!(surely_not_clustered(&tokens[..m * d], d, n, 0.1), "d = {d}");
            assert_eq!(detect_clusters(&tokens, d, ClusterRule::default()).count, 0);
        }
        // Tight clusters: never a witness, whatever the subset.
        let tokens = cloud(&mut rng, 5000, 3, 4, 0.005);
        for m in [10, 100, 5000] {
            assert!(!surely_not_clustered(&tokens[..m * 3], 3, 5000, 0.1));
        }
        assert_eq!(detect_clusters(&tokens, 3, ClusterRule::default()).count, 4);
    }
}
