//! The peaks of a density on the circle and the mass each holds (docs/MATH.md §17): the grid
//! is cut at its local minima, and each basin's trapezoid mass is given to its maximum.

use std::f64::consts::PI;

use serde::Serialize;

/// One peak of a density.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Peak {
    /// Where it is (radians, in [0, 2 pi)).
    pub theta: f64,
    /// The mass of its basin (between the neighbouring minima).
    pub mass: f64,
}

/// Peaks that hold more than this share of the mass are reported.
pub const PEAK_MASS: f64 = 1e-3;

/// The peaks of grid values (theta_j = 2 pi j / N) holding at least [`PEAK_MASS`], heaviest
/// first (at most 64).
pub fn peaks(values: &[f64]) -> Vec<Peak> {
    let n = values.len();
    if n == 0 {
        return Vec::new();
    }
    let dq = 2.0 * PI / n as f64;
    let at = |i: isize| values[i.rem_euclid(n as isize) as usize];
    // Start at a global minimum, then walk once around, cutting at local minima.
    let start = (0..n)
        .min_by(|&a, &b| values[a].total_cmp(&values[b]))
        .unwrap_or(0) as isize;
    let mut found = Vec::new();
    let (mut mass, mut top, mut top_at) = (0.0, f64::NEG_INFINITY, start);
    for s in 0..n as isize {
        let i = start + s;
        let v = at(i);
        let is_min = s > 0 && v <= at(i - 1) && v < at(i + 1);
        if is_min {
            found.push((top_at, mass));
            (mass, top, top_at) = (0.0, f64::NEG_INFINITY, i);
        }
        mass += v * dq;
        if v > top {
            (top, top_at) = (v, i);
        }
    }
    found.push((top_at, mass));
    let mut peaks: Vec<Peak> = found
        .into_iter()
        .filter(|&(_, m)| m >= PEAK_MASS)
        .map(|(i, m)| Peak {
            theta: i.rem_euclid(n as isize) as f64 * dq,
            mass: m,
        })
        .collect();
    peaks.sort_by(|a, b| b.mass.total_cmp(&a.mass));
    peaks.truncate(64);
    peaks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_bumps_share_the_mass() {
        let n = 512;
        let v: Vec<f64> = (0..n)
            .map(|j| {
                let t = 2.0 * PI * j as f64 / n as f64;
                (20.0 * ((t - 1.0).cos() - 1.0)).exp() * 3.0
                    + (20.0 * ((t - 4.0).cos() - 1.0)).exp()
            })
            .collect();
        let total: f64 = v.iter().sum::<f64>() * 2.0 * PI / n as f64;
        let v: Vec<f64> = v.iter().map(|x| x / total).collect();
        let p = peaks(&v);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            (p[0].mass - 0.75).abs() < 1e-3 && (p[1].mass - 0.25).abs() < 1e-3,
            "{p:?}"
        );
        assert!(
            (p[0].theta - 1.0).abs() < 0.02 && (p[1].theta - 4.0).abs() < 0.02,
            "{p:?}"
        );
    }
}
