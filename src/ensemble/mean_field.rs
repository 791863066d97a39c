//! The mean-field (n -> infinity) picture of the noisy circle model with A = V = I
//! (docs/MATH.md §12, "Mean-field stability", and §14): where the uniform state loses
//! stability, and the ordered stationary branch that the transition picture draws.
//!
//! ```text
//! usa: rho_t = T rho_tt - (rho Phi_t)_t,  Phi(t) = (1/beta) int e^{beta cos(t - p)} rho(p) dp
//!      = const + sum_k c_k R_k cos(k t),  c_k = 2 I_k(beta) / beta  (beta = 0: c_1 = 1, else 0)
//!      (R_k = int cos(k p) rho(p) dp for a density symmetric about 0)
//! uniform state stable iff T > T_c = c_1 / 2 = I_1(beta) / beta   (sa: / I_0(beta))
//! stationary states: rho = exp(Phi / T) / Z; beta = 0: R_1 = r with r = I_1(r / T) / I_0(r / T),
//!      on the branch r = I_1(x) / I_0(x), T = r / x for x > 0
//! beta > 0: R <- moments of exp(Phi[R] / T) on a grid of 256 angles, from the previous
//!      (colder) temperature's state: the ordered branch as long as it is stable; at or above
//!      T_c an |R1| below 0.02 counts as 0 (the iteration slows down algebraically there)
//! ```
//!
//! The `sa` kernel's field is not a gradient: only its T_c is drawn.

use crate::model::bessel::scaled_bessel_i;
use crate::model::Kernel;
use crate::scenario::Scenario;
use crate::simulation;

/// Harmonics kept in the stationary density (I_k(beta) / I_1(beta) < 1e-16 beyond for
/// beta <= 5).
const HARMONICS: usize = 24;
/// At or above T_c, an ordered |R1| below this is the uniform state not yet reached by the
/// iteration (which slows down algebraically there).
const VANISHED: f64 = 0.02;
/// Angles of the grid the densities are integrated on.
const GRID: usize = 256;

/// What the mean field says about a sweep's scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanField {
    /// The kernel (usa or sa).
    pub kernel: Kernel,
    /// Inverse temperature beta.
    pub beta: f64,
}

impl MeanField {
    /// The mean field of `scenario` when it holds: d = 2, one plain layer with one head,
    /// A = V = I, kernel usa or sa.
    pub fn of(scenario: &Scenario) -> Option<MeanField> {
        if scenario.model.d != 2 || !scenario.model.layers.is_empty() {
            return None;
        }
        let attention = simulation::attention(scenario).formed();
        let identity = nalgebra::DMatrix::<f64>::identity(2, 2);
        let near = |m: &nalgebra::DMatrix<f64>| (m - &identity).amax() < 1e-12;
        let [head] = attention.heads.as_slice() else {
            return None;
        };
        let kernel = attention.kernel;
        let fits = matches!(kernel, Kernel::Usa | Kernel::Sa)
            && attention.is_plain()
            && near(&head.a)
            && near(&head.v);
        fits.then_some(MeanField {
            kernel,
            beta: attention.beta,
        })
    }

    /// The temperature below which the uniform state is unstable.
    pub fn critical_temperature(&self) -> f64 {
        let [i0, i1] = bessel_i01(self.beta);
        let usa = if self.beta == 0.0 {
            0.5
        } else {
            i1 / self.beta
        };
        match self.kernel {
            Kernel::Sa => usa / i0,
            _ => usa,
        }
    }

    /// The ordered stationary |R1| at each temperature of `temperatures` (ascending), 0 where
    /// only the uniform state is left; `None` for sa (no free energy to follow).
    pub fn ordered_branch(&self, temperatures: &[f64]) -> Option<Vec<f64>> {
        if self.kernel != Kernel::Usa {
            return None;
        }
        let c = couplings(self.beta);
        let tc = self.critical_temperature();
        let mut r = vec![0.0; HARMONICS + 1];
        r[1] = 0.99;
        Some(
            temperatures
                .iter()
                .map(|&t| {
                    if t <= 0.0 {
                        r = vec![1.0; HARMONICS + 1];
                        return 1.0;
                    }
                    if r[1] < 1e-6 {
                        return 0.0;
                    }
                    r = stationary(&c, t, r.clone());
                    // At and above T_c a vanishing branch converges only algebraically.
                    if r[1] < 1e-6 || (t >= tc && r[1] < VANISHED) {
                        r[1] = 0.0;
                    }
                    r[1]
                })
                .collect(),
        )
    }
}

/// I_0(x) and I_1(x), x >= 0.
fn bessel_i01(x: f64) -> [f64; 2] {
    let mut out = [0.0; 2];
    scaled_bessel_i(x, &mut out);
    out.map(|v| v * x.exp())
}

/// c_k = 2 I_k(beta) / beta for k = 0 ..= HARMONICS (beta = 0: c_1 = 1, the others 0).
fn couplings(beta: f64) -> Vec<f64> {
    let mut c = vec![0.0; HARMONICS + 1];
    if beta == 0.0 {
        c[1] = 1.0;
        return c;
    }
    let mut scaled = vec![0.0; HARMONICS + 1];
    scaled_bessel_i(beta, &mut scaled);
    for (ck, s) in c.iter_mut().zip(&scaled) {
        *ck = 2.0 * s * beta.exp() / beta;
    }
    c[0] = 0.0;
    c
}

/// Iterates R <- moments of exp(Phi[R] / T) from `r` until it settles (at most 20 000 times).
fn stationary(c: &[f64], t: f64, mut r: Vec<f64>) -> Vec<f64> {
    let angles: Vec<f64> = (0..GRID)
        .map(|i| std::f64::consts::TAU * i as f64 / GRID as f64)
        .collect();
    let mut phi = vec![0.0; GRID];
    for _ in 0..20_000 {
        for (p, a) in phi.iter_mut().zip(&angles) {
            *p = (1..c.len())
                .map(|k| c[k] * r[k] * (k as f64 * a).cos())
                .sum();
        }
        let top = phi.iter().copied().fold(f64::MIN, f64::max);
        let w: Vec<f64> = phi.iter().map(|p| ((p - top) / t).exp()).collect();
        let z: f64 = w.iter().sum();
        let next: Vec<f64> = (0..c.len())
            .map(|k| {
                let k = k as f64;
                w.iter()
                    .zip(&angles)
                    .map(|(w, a)| w * (k * a).cos())
                    .sum::<f64>()
                    / z
            })
            .collect();
        let change = (next[1] - r[1]).abs();
        r = next;
        if change < 1e-12 || r[1] < 1e-7 {
            break;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Kuramoto root by its parametrisation: T = r / x with r = I_1(x) / I_0(x).
    fn kuramoto_at(x: f64) -> (f64, f64) {
        let [i0, i1] = bessel_i01(x);
        let r = i1 / i0;
        (r / x, r)
    }

    #[test]
    fn the_kuramoto_branch_solves_its_self_consistency_and_vanishes_above_one_half() {
        let mf = MeanField {
            kernel: Kernel::Usa,
            beta: 0.0,
        };
        assert_eq!(mf.critical_temperature(), 0.5);
        let pts: Vec<(f64, f64)> = [8.0, 3.0, 1.5, 0.6].map(kuramoto_at).to_vec();
        let ts: Vec<f64> = pts.iter().map(|p| p.0).chain([0.55, 0.8]).collect();
        let r = mf.ordered_branch(&ts).unwrap();
        for (k, (t, expected)) in pts.iter().enumerate() {
            assert!(
                (r[k] - expected).abs() < 1e-6,
                "T = {t}: {} vs {expected}",
                r[k]
            );
        }
        assert_eq!(&r[4..], &[0.0, 0.0]);
    }

    #[test]
    fn critical_temperatures_are_the_bessel_ratios() {
        let usa = MeanField {
            kernel: Kernel::Usa,
            beta: 1.0,
        };
        assert!((usa.critical_temperature() - 0.565_159_103_992_485).abs() < 1e-12);
        let sa = MeanField {
            kernel: Kernel::Sa,
            beta: 1.0,
        };
        let i0 = 1.266_065_877_752_008_4;
        assert!((sa.critical_temperature() - 0.565_159_103_992_485 / i0).abs() < 1e-12);
        assert!(sa.ordered_branch(&[0.1]).is_none());
        // Just below T_c the usa branch is ordered, just above it is not.
        let tc = usa.critical_temperature();
        let r = usa.ordered_branch(&[0.3, 0.9 * tc, 1.1 * tc]).unwrap();
        assert!(r[0] > 0.5 && r[1] > 0.05 && r[2] == 0.0, "{r:?}");
    }
}
