//! Start densities of the mean field on the circle (docs/MATH.md §17):
//!
//! ```text
//! uniform     rho = 1 / (2 pi)
//! poisson     rho = (1 - r0^2) / (2 pi |1 - c e^{-2 i theta}|^2),  c = r0 e^{i phi0}   (R2 = c)
//! von-mises   rho = e^{kappa cos(theta - mean)} / (2 pi I_0(kappa))
//! modes       rho += (1/pi) a cos(k (theta - phase)) for each [k, a, phase]
//! ```
//!
//! The von Mises density is normalised on the grid itself (its trapezoid sum is exact once the
//! grid resolves it), so the mass is 1 to round-off on every grid.

use std::f64::consts::PI;

/// The shape of a start density before its added modes (the scenario's `[density] init`).
pub use crate::scenario::DensityInit as Shape;

/// A start density: a shape and added cosine modes `(k, a, phase)`.
#[derive(Debug, Clone, PartialEq)]
pub struct StartDensity {
    /// The shape.
    pub shape: Shape,
    /// Added modes (1/pi) a cos(k (theta - phase)), k >= 1.
    pub modes: Vec<(u32, f64, f64)>,
}

impl StartDensity {
    /// The shape's value at theta, not normalised for von Mises (e^{kappa (cos - 1)}).
    fn shape_value(&self, theta: f64) -> f64 {
        match self.shape {
            Shape::Uniform => 1.0 / (2.0 * PI),
            Shape::Poisson { r0, phi0 } => {
                let z = num_complex::Complex64::from_polar(r0, phi0 - 2.0 * theta);
                (1.0 - r0 * r0) / (2.0 * PI * (1.0 - z).norm_sqr())
            }
            Shape::VonMises { kappa, mean } => (kappa * ((theta - mean).cos() - 1.0)).exp(),
        }
    }

    /// The density on N grid points theta_j = 2 pi j / N, of mass 1 on that grid.
    pub fn values(&self, n: usize) -> Vec<f64> {
        let theta = |j: usize| 2.0 * PI * j as f64 / n as f64;
        let mut v: Vec<f64> = (0..n).map(|j| self.shape_value(theta(j))).collect();
        if let Shape::VonMises { .. } = self.shape {
            let mass: f64 = v.iter().sum::<f64>() * 2.0 * PI / n as f64;
            v.iter_mut().for_each(|x| *x /= mass);
        }
        for (j, x) in v.iter_mut().enumerate() {
            for &(k, a, phase) in &self.modes {
                *x += a / PI * (k as f64 * (theta(j) - phase)).cos();
            }
        }
        v
    }

    /// The smallest value on a fine grid (a density must not be negative).
    pub fn minimum(&self) -> f64 {
        let top = self.modes.iter().map(|m| m.0 as usize).max().unwrap_or(0);
        let n = (16 * top).clamp(4096, 1 << 20);
        self.values(n).into_iter().fold(f64::INFINITY, f64::min)
    }
}
