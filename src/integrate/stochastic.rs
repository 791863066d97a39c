//! Noisy tokens: the stochastic Heun scheme on the sphere for the Stratonovich system
//! (docs/MATH.md, "Noise")
//!
//! ```text
//! dX_k = F_k(X) dt + sqrt(2 T) P_{X_k} o dW_k,        P_x v = v - <x, v> x,
//! ```
//!
//! one step of size h with the increments xi_k = sqrt(2 T) (W_k(t + h) - W_k(t)):
//!
//! ```text
//! Y_k     = X_k + h F_k(X) + P_{X_k} xi_k                                   (predictor)
//! Z_k     = X_k + h/2 (F_k(X) + F_k(Y)) + 1/2 (P_{X_k} + P_{Y_k/|Y_k|}) xi_k  (corrector)
//! X_k(t + h) = Z_k / |Z_k|                                                   (back on the sphere)
//! ```
//!
//! Weak order 1 for every d (and for T = 0 the deterministic Heun method, order 2); strong
//! order 1/2 for every d (the projected noise P_x dW does not commute, even on the circle,
//! and no Lévy areas are drawn). The field F is the model's
//! [`Dynamics::rhs`], called as a black box, so every kernel, head, mask and layer applies.
//! The increments come from [`super::gaussian`] by (seed, step, token): the same bytes for any
//! thread count. Each output interval of length L is split into m = ceil(L / dt) equal steps,
//! so that the steps land on the samples and on every layer boundary.

use rayon::prelude::*;

use super::gaussian::TokenStream;
use super::stepper::Counts;
use super::{Dynamics, Status};
use crate::parallel::TOKENS_PER_CHUNK;
use crate::simd::dot;

/// The settings of the noise: temperature, largest step, seed, token dimension.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseSettings {
    /// T >= 0: each token diffuses on the sphere with diffusion T.
    pub temperature: f64,
    /// The largest step (> 0).
    pub dt: f64,
    /// Seed of the Brownian increments.
    pub seed: u64,
    /// Dimension of a token (the state is n x d row-major).
    pub d: usize,
}

/// Buffers of one Heun step (the field at the start and at the predictor, the predictor).
#[derive(Debug, Default)]
pub struct HeunScratch {
    f0: Vec<f64>,
    f1: Vec<f64>,
    predictor: Vec<f64>,
}

/// One stochastic Heun step of size `h` with the increments `xi` (n x d, already scaled by
/// sqrt(2 T)); `y` (tokens of unit length) is advanced in place. Returns the largest
/// | |Z_k| - 1 | before the normalisation.
pub fn heun_step(
    dynamics: &dyn Dynamics,
    d: usize,
    h: f64,
    y: &mut [f64],
    xi: &[f64],
    s: &mut HeunScratch,
) -> f64 {
    let len = y.len();
    s.f0.resize(len, 0.0);
    s.f1.resize(len, 0.0);
    s.predictor.resize(len, 0.0);
    dynamics.rhs(y, &mut s.f0);
    chunks(&mut s.predictor, d, |first, out| {
        let range = first * d..first * d + out.len();
        predictor(
            d,
            h,
            &y[range.clone()],
            &s.f0[range.clone()],
            &xi[range],
            out,
        );
        0.0
    });
    dynamics.rhs(&s.predictor, &mut s.f1);
    let (f0, f1, pred) = (&s.f0, &s.f1, &s.predictor);
    chunks(y, d, |first, rows| {
        let range = first * d..first * d + rows.len();
        corrector(
            d,
            h,
            rows,
            (&f0[range.clone()], &f1[range.clone()]),
            &pred[range.clone()],
            &xi[range],
        )
    })
}

/// Y_k = X_k + h F_k + P_{X_k} xi_k for the rows of one chunk.
fn predictor(d: usize, h: f64, x: &[f64], f0: &[f64], xi: &[f64], out: &mut [f64]) {
    for (((x, f), e), o) in x
        .chunks_exact(d)
        .zip(f0.chunks_exact(d))
        .zip(xi.chunks_exact(d))
        .zip(out.chunks_exact_mut(d))
    {
        let along = dot(x, e);
        for i in 0..d {
            o[i] = x[i] + h * f[i] + (e[i] - along * x[i]);
        }
    }
}

/// The corrector and the normalisation for the rows of one chunk; returns the largest
/// | |Z_k| - 1 |.
fn corrector(
    d: usize,
    h: f64,
    x: &mut [f64],
    (f0, f1): (&[f64], &[f64]),
    pred: &[f64],
    xi: &[f64],
) -> f64 {
    let mut drift: f64 = 0.0;
    for ((((x, a), b), p), e) in x
        .chunks_exact_mut(d)
        .zip(f0.chunks_exact(d))
        .zip(f1.chunks_exact(d))
        .zip(pred.chunks_exact(d))
        .zip(xi.chunks_exact(d))
    {
        let along_x = dot(x, e);
        let p_norm = dot(p, p).sqrt();
        let along_u = dot(p, e) / p_norm;
        for i in 0..d {
            let u = p[i] / p_norm;
            let noise = e[i] - 0.5 * (along_x * x[i] + along_u * u);
            x[i] += 0.5 * h * (a[i] + b[i]) + noise;
        }
        let r = dot(x, x).sqrt();
        drift = drift.max((r - 1.0).abs());
        x.iter_mut().for_each(|v| *v /= r);
    }
    drift
}

/// Applies `f(first_token, rows)` to fixed chunks of [`TOKENS_PER_CHUNK`] rows of `data`, in
/// parallel when there is more than one, and returns the largest value it returns.
fn chunks<F>(data: &mut [f64], d: usize, f: F) -> f64
where
    F: Fn(usize, &mut [f64]) -> f64 + Sync + Send,
{
    let width = TOKENS_PER_CHUNK * d;
    if data.len() <= width {
        return f(0, data);
    }
    data.par_chunks_mut(width)
        .enumerate()
        .map(|(c, rows)| f(c * TOKENS_PER_CHUNK, rows))
        .reduce(|| 0.0, f64::max)
}

/// Writes the increments xi_k = sqrt(2 T h) N(0, I_d) of step `step` for every token.
pub fn draw_increments(noise: &NoiseSettings, step: u64, h: f64, xi: &mut [f64]) {
    let d = noise.d;
    let scale = (2.0 * noise.temperature * h).sqrt();
    chunks(xi, d, |first, rows| {
        for (i, row) in rows.chunks_exact_mut(d).enumerate() {
            TokenStream::new(noise.seed, step, (first + i) as u64).fill_normals(scale, row);
        }
        0.0
    });
}

/// A noisy run between output times: fixed steps of at most `dt`, counted from the run's
/// start (the step number keys the increments).
pub struct StochasticStepper<'a> {
    dynamics: &'a dyn Dynamics,
    noise: NoiseSettings,
    y: Vec<f64>,
    t: f64,
    /// Steps taken before this stepper (earlier layers) and by it.
    step: u64,
    xi: Vec<f64>,
    scratch: HeunScratch,
    counts: Counts,
    step_drift_max: f64,
}

impl<'a> StochasticStepper<'a> {
    /// Starts from `y0` (projected onto the sphere); the first step is number `first_step`.
    pub fn new(
        dynamics: &'a dyn Dynamics,
        noise: NoiseSettings,
        y0: &[f64],
        first_step: u64,
    ) -> Self {
        let mut y = y0.to_vec();
        let drift = dynamics.project(&mut y);
        StochasticStepper {
            dynamics,
            noise,
            xi: vec![0.0; y.len()],
            y,
            t: 0.0,
            step: first_step,
            scratch: HeunScratch::default(),
            counts: Counts::default(),
            step_drift_max: drift,
        }
    }

    /// Advances to time `t` (not before the current one) and writes the state into `out`.
    pub fn advance_to(&mut self, t: f64, out: &mut [f64]) -> Result<(), Status> {
        let length = t - self.t;
        if length > 0.0 {
            let steps = ((length / self.noise.dt) - 1e-9).ceil().max(1.0) as u64;
            let h = length / steps as f64;
            for i in 0..steps {
                let now = self.t + i as f64 * h;
                crate::interrupt::set_clock(now);
                if crate::interrupt::is_requested() {
                    return Err(Status::Interrupted { t: now });
                }
                draw_increments(&self.noise, self.step, h, &mut self.xi);
                let drift = heun_step(
                    self.dynamics,
                    self.noise.d,
                    h,
                    &mut self.y,
                    &self.xi,
                    &mut self.scratch,
                );
                self.step += 1;
                self.counts.accepted += 1;
                self.counts.rhs_evals += 2;
                if !drift.is_finite() || self.y.iter().any(|v| !v.is_finite()) {
                    out.copy_from_slice(&self.y);
                    return Err(Status::NonFinite { t: now + h });
                }
                self.step_drift_max = self.step_drift_max.max(drift);
            }
            self.t = t;
        }
        out.copy_from_slice(&self.y);
        Ok(())
    }

    /// Evaluation and step counts so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Steps taken so far, counted from the run's start.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// Largest | |Z_k| - 1 | before a normalisation.
    pub fn step_drift_max(&self) -> f64 {
        self.step_drift_max
    }
}

#[cfg(test)]
mod tests {
    use nalgebra::DMatrix;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, StandardNormal};

    use super::*;
    use crate::model::{Attention, Head, Kernel, SphereField};

    /// A usa field with A = I and a rotating V, for a drift that is not a gradient.
    fn field(n: usize, d: usize) -> SphereField {
        let mut v = DMatrix::identity(d, d);
        v[(0, 1)] = 0.7;
        v[(1, 0)] = -0.7;
        let head = Head {
            a: DMatrix::identity(d, d),
            v,
        };
        SphereField::new(Attention::new(Kernel::Usa, 1.0, vec![head]), n)
    }

    fn tokens(n: usize, d: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
        let mut x: Vec<f64> = (0..n * d).map(|_| StandardNormal.sample(rng)).collect();
        for row in x.chunks_exact_mut(d) {
            let r = dot(row, row).sqrt();
            row.iter_mut().for_each(|v| *v /= r);
        }
        x
    }

    /// Integrates with `coarse` fine increments summed per step; returns the final tokens.
    fn path(
        f: &SphereField,
        d: usize,
        x0: &[f64],
        fine: &[Vec<f64>],
        h: f64,
        coarse: usize,
    ) -> Vec<f64> {
        let mut y = x0.to_vec();
        let mut s = HeunScratch::default();
        for group in fine.chunks(coarse) {
            let mut xi = vec![0.0; y.len()];
            for step in group {
                xi.iter_mut().zip(step).for_each(|(a, b)| *a += b);
            }
            heun_step(f, d, h * coarse as f64, &mut y, &xi, &mut s);
        }
        y
    }

    /// Mean over tokens of |X_h - X_ref| at t = 1 for steps h = 2^k / 256 against the path of
    /// step 1/256 with the same Brownian increments; returns the least-squares slope of
    /// log error against log h.
    fn strong_order(d: usize) -> f64 {
        let (n, fine_steps, t, temperature) = (64, 512, 1.0, 0.5);
        let mut rng = ChaCha8Rng::seed_from_u64(11 + d as u64);
        let f = field(n, d);
        let x0 = tokens(n, d, &mut rng);
        let h = t / fine_steps as f64;
        let scale = (2.0 * temperature * h).sqrt();
        let fine: Vec<Vec<f64>> = (0..fine_steps)
            .map(|_| {
                (0..n * d)
                    .map(|_| {
                        let z: f64 = StandardNormal.sample(&mut rng);
                        scale * z
                    })
                    .collect::<Vec<f64>>()
            })
            .collect();
        let reference = path(&f, d, &x0, &fine, h, 1);
        let (mut lx, mut ly) = (Vec::new(), Vec::new());
        for coarse in [8, 16, 32, 64] {
            let y = path(&f, d, &x0, &fine, h, coarse);
            let error = y
                .chunks_exact(d)
                .zip(reference.chunks_exact(d))
                .map(|(a, b)| {
                    a.iter()
                        .zip(b)
                        .map(|(p, q)| (p - q) * (p - q))
                        .sum::<f64>()
                        .sqrt()
                })
                .sum::<f64>()
                / n as f64;
            lx.push((h * coarse as f64).ln());
            ly.push(error.ln());
        }
        let mx = lx.iter().sum::<f64>() / 4.0;
        let my = ly.iter().sum::<f64>() / 4.0;
        let sxy: f64 = lx.iter().zip(&ly).map(|(a, b)| (a - mx) * (b - my)).sum();
        let sxx: f64 = lx.iter().map(|a| (a - mx) * (a - mx)).sum();
        sxy / sxx
    }

    #[test]
    fn strong_order_is_one_half() {
        // The noise P_x dW does not commute (even on the circle, where the angle is driven by
        // -sin(theta) dW_1 + cos(theta) dW_2): order 1/2 against the same W.
        for d in [2, 3] {
            let order = strong_order(d);
            assert!(
                (0.35..0.7).contains(&order),
                "d = {d}: strong order {order}"
            );
        }
    }

    #[test]
    fn steps_keep_every_token_on_the_sphere() {
        let (n, d) = (50, 4);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let f = field(n, d);
        let mut y = tokens(n, d, &mut rng);
        let noise = NoiseSettings {
            temperature: 2.0,
            dt: 0.05,
            seed: 1,
            d,
        };
        let mut stepper = StochasticStepper::new(&f, noise, &y, 0);
        stepper.advance_to(20.0, &mut y).unwrap();
        for row in y.chunks_exact(d) {
            assert!((dot(row, row).sqrt() - 1.0).abs() < 1e-15);
        }
        assert_eq!(stepper.steps(), 400);
    }

    #[test]
    fn zero_temperature_is_the_deterministic_heun_method_of_order_two() {
        // Without noise the scheme is Heun's method followed by a projection: halving the step
        // quarters the error against a fine solution.
        let (n, d) = (16, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let f = field(n, d);
        let x0 = tokens(n, d, &mut rng);
        let run = |dt: f64| {
            let noise = NoiseSettings {
                temperature: 0.0,
                dt,
                seed: 0,
                d,
            };
            let mut y = x0.clone();
            StochasticStepper::new(&f, noise, &x0, 0)
                .advance_to(1.0, &mut y)
                .unwrap();
            y
        };
        let reference = run(1.0 / 4096.0);
        let error = |y: Vec<f64>| {
            y.iter()
                .zip(&reference)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max)
        };
        let (e1, e2) = (error(run(0.05)), error(run(0.025)));
        let ratio = e1 / e2;
        assert!((3.3..4.8).contains(&ratio), "{e1} / {e2} = {ratio}");
    }
}
