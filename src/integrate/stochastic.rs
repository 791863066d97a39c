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
use super::geodesic::{sin_cos, Turn};
use super::{Counts, Dynamics, Status};
use crate::parallel::TOKENS_PER_CHUNK;
use crate::simd::dot;

/// The settings of the noise: temperature, largest step, seed, token dimension.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseSettings {
    /// T >= 0: each token diffuses on the sphere with diffusion T.
    pub temperature: f64,
    /// The largest step (> 0): `noise.dt`, already capped by the temperature's share of the
    /// step rule (docs/MATH.md §12).
    pub dt: f64,
    /// The smallest step the drift rule may ask for (t_end / the bound on the step count).
    pub min_step: f64,
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

/// One geodesic Heun step of size `h` with the increments `xi` (n x d, already scaled);
/// `y` (tokens of unit length) is advanced in place. Returns the largest | |x_k| - 1 | before
/// the final normalisation (round-off only: the exponential map stays on the sphere).
pub fn heun_step(
    dynamics: &dyn Dynamics,
    d: usize,
    h: f64,
    y: &mut [f64],
    xi: &mut [f64],
    s: &mut HeunScratch,
) -> f64 {
    s.f0.resize(y.len(), 0.0);
    dynamics.rhs(y, &mut s.f0);
    heun_step_from_field(dynamics, d, h, y, xi, s)
}

/// [`heun_step`] with the field at the start already in `s.f0`; `xi` is projected onto the
/// tangent spaces in place.
fn heun_step_from_field(
    dynamics: &dyn Dynamics,
    d: usize,
    h: f64,
    y: &mut [f64],
    xi: &mut [f64],
    s: &mut HeunScratch,
) -> f64 {
    let len = y.len();
    s.f1.resize(len, 0.0);
    s.predictor.resize(len, 0.0);
    let (x, f0) = (&*y, &s.f0);
    pair_chunks(xi, &mut s.predictor, d, |first, xi, out| {
        let range = first * d..first * d + out.len();
        match d {
            2 => circle_predictor(h, &x[range.clone()], &f0[range], xi, out),
            _ => predictor(d, h, &x[range.clone()], &f0[range], xi, out),
        }
        0.0
    });
    dynamics.rhs(&s.predictor, &mut s.f1);
    let (f0, f1, xi, y1) = (&s.f0, &mut s.f1, &*xi, &s.predictor);
    pair_chunks(y, f1, d, |first, rows, f1| {
        let range = first * d..first * d + rows.len();
        match d {
            2 => circle_corrector(
                h,
                rows,
                (&f0[range.clone()], f1),
                &xi[range.clone()],
                &y1[range],
            ),
            _ => corrector(d, h, rows, (&f0[range.clone()], f1), &xi[range]),
        }
    })
}

/// [`predictor`] on the circle (d = 2), by the angle: with x^perp = (-x_2, x_1) and
/// s = <h F_k + eta_k, x^perp>, Y_k = cos s x + sin s x^perp (the exponential map turns the
/// angle by s; one sine and cosine a token, no square root).
fn circle_predictor(h: f64, x: &[f64], f0: &[f64], xi: &mut [f64], out: &mut [f64]) {
    for (((x, f), e), o) in x
        .chunks_exact(2)
        .zip(f0.chunks_exact(2))
        .zip(xi.chunks_exact_mut(2))
        .zip(out.chunks_exact_mut(2))
    {
        let along = x[0] * e[0] + x[1] * e[1];
        e[0] -= along * x[0];
        e[1] -= along * x[1];
        let s = -(h * f[0] + e[0]) * x[1] + (h * f[1] + e[1]) * x[0];
        let (sin, cos) = sin_cos(s.abs(), s * s);
        let sin = if s < 0.0 { -sin } else { sin };
        o[0] = cos * x[0] - sin * x[1];
        o[1] = cos * x[1] + sin * x[0];
    }
}

/// [`corrector`] on the circle: the transport back along the circle keeps angular velocities,
/// so the corrector turns x by s = h/2 (<F_k(X), x^perp> + <F_k(Y), y^perp>) + <eta_k, x^perp>,
/// then normalises; returns the largest | |X_k| - 1 | before the normalisation.
fn circle_corrector(
    h: f64,
    x: &mut [f64],
    (f0, f1): (&[f64], &[f64]),
    eta: &[f64],
    y: &[f64],
) -> f64 {
    let mut drift: f64 = 0.0;
    for ((((x, a), b), e), y) in x
        .chunks_exact_mut(2)
        .zip(f0.chunks_exact(2))
        .zip(f1.chunks_exact(2))
        .zip(eta.chunks_exact(2))
        .zip(y.chunks_exact(2))
    {
        let at_x = -a[0] * x[1] + a[1] * x[0];
        let at_y = -b[0] * y[1] + b[1] * y[0];
        let noise = -e[0] * x[1] + e[1] * x[0];
        let s = 0.5 * h * (at_x + at_y) + noise;
        let (sin, cos) = sin_cos(s.abs(), s * s);
        let sin = if s < 0.0 { -sin } else { sin };
        let n0 = cos * x[0] - sin * x[1];
        let n1 = cos * x[1] + sin * x[0];
        let r = (n0 * n0 + n1 * n1).sqrt();
        drift = drift.max((r - 1.0).abs());
        x[0] = n0 / r;
        x[1] = n1 / r;
    }
    drift
}

/// For the rows of one chunk: eta_k = P_{X_k} xi_k (in place) and
/// Y_k = exp_{X_k}(h F_k + eta_k).
fn predictor(d: usize, h: f64, x: &[f64], f0: &[f64], xi: &mut [f64], out: &mut [f64]) {
    let mut v = [0.0; MAX_STACK_D];
    let mut heap = Vec::new();
    let v = row_buffer(d, &mut v, &mut heap);
    for (((x, f), e), o) in x
        .chunks_exact(d)
        .zip(f0.chunks_exact(d))
        .zip(xi.chunks_exact_mut(d))
        .zip(out.chunks_exact_mut(d))
    {
        let along = dot(x, e);
        for i in 0..d {
            e[i] -= along * x[i];
            v[i] = h * f[i] + e[i];
        }
        Turn::of(v).exp(x, v, o);
    }
}

/// The corrector for the rows of one chunk: with v_k = h F_k(X) + eta_k (the predictor's
/// step), X_k <- exp_{X_k}(h/2 (F_k(X) + back(F_k(Y))) + eta_k), then normalised; returns the
/// largest | |X_k| - 1 | before the normalisation. `f1` is overwritten.
fn corrector(d: usize, h: f64, x: &mut [f64], (f0, f1): (&[f64], &mut [f64]), eta: &[f64]) -> f64 {
    let mut v = [0.0; MAX_STACK_D];
    let mut heap = Vec::new();
    let v = row_buffer(d, &mut v, &mut heap);
    let mut drift: f64 = 0.0;
    for (((x, a), b), e) in x
        .chunks_exact_mut(d)
        .zip(f0.chunks_exact(d))
        .zip(f1.chunks_exact_mut(d))
        .zip(eta.chunks_exact(d))
    {
        for i in 0..d {
            v[i] = h * a[i] + e[i];
        }
        Turn::of(v).transport_back(x, v, b);
        for i in 0..d {
            v[i] = 0.5 * h * (a[i] + b[i]) + e[i];
        }
        // b is free again: the new token goes there before it replaces x.
        Turn::of(v).exp(x, v, b);
        let r = dot(b, b).sqrt();
        drift = drift.max((r - 1.0).abs());
        for (xi, bi) in x.iter_mut().zip(b.iter()) {
            *xi = bi / r;
        }
    }
    drift
}

/// Token dimensions whose step vector lives on the stack.
const MAX_STACK_D: usize = 16;

/// A buffer of d numbers: the stack array when d is small, else `heap` resized.
fn row_buffer<'b>(
    d: usize,
    stack: &'b mut [f64; MAX_STACK_D],
    heap: &'b mut Vec<f64>,
) -> &'b mut [f64] {
    if d <= MAX_STACK_D {
        &mut stack[..d]
    } else {
        heap.resize(d, 0.0);
        &mut heap[..]
    }
}

/// Applies `f(first_token, a_rows, b_rows)` to matching chunks of [`TOKENS_PER_CHUNK`] rows of
/// `a` and `b` (same length), in parallel when there is more than one, and returns the largest
/// value it returns.
fn pair_chunks<F>(a: &mut [f64], b: &mut [f64], d: usize, f: F) -> f64
where
    F: Fn(usize, &mut [f64], &mut [f64]) -> f64 + Sync + Send,
{
    let width = TOKENS_PER_CHUNK * d;
    if a.len() <= width {
        return f(0, a, b);
    }
    a.par_chunks_mut(width)
        .zip(b.par_chunks_mut(width))
        .enumerate()
        .map(|(c, (a, b))| f(c * TOKENS_PER_CHUNK, a, b))
        .reduce(|| 0.0, f64::max)
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

/// The drift's share of the step rule: a step turns no token by more than this angle through
/// the field (h max_k |F_k| <= DRIFT_TURN).
pub const DRIFT_TURN: f64 = 0.05;

/// The variance factor of the geodesic noise step that gives the step's angle r the mean
/// square of Brownian motion on S^{d-1} to second order in T h (the curvature pulls it in):
/// E r^2 = 2 (d - 1) T h (1 - (d - 2) T h / 3) + O((T h)^3).
fn curvature_factor(d: usize, temperature: f64, h: f64) -> f64 {
    (1.0 - (d as f64 - 2.0) * temperature * h / 3.0).max(0.25)
}

/// Writes the increments xi_k = sqrt(2 T h c) N(0, I_d) of step `step` for every token, c the
/// `curvature_factor`.
pub fn draw_increments(noise: &NoiseSettings, step: u64, h: f64, xi: &mut [f64]) {
    let d = noise.d;
    let t = noise.temperature;
    let scale = (2.0 * t * h * curvature_factor(d, t, h)).sqrt();
    chunks(xi, d, |first, rows| {
        for (i, row) in rows.chunks_exact_mut(d).enumerate() {
            TokenStream::new(noise.seed, step, (first + i) as u64).fill_normals(scale, row);
        }
        0.0
    });
}

/// The largest |F_k| over the tokens.
fn largest_speed(f: &[f64], d: usize) -> f64 {
    f.chunks_exact(d)
        .map(|row| dot(row, row))
        .fold(0.0, f64::max)
        .sqrt()
}

/// The step towards `remaining` time left: the largest step allowed by `dt` and the drift
/// (never below `min_step`), shortened so that a whole number of equal steps ends the interval.
fn next_step(noise: &NoiseSettings, speed: f64, remaining: f64) -> f64 {
    let by_drift = if speed > 0.0 {
        DRIFT_TURN / speed
    } else {
        f64::INFINITY
    };
    let wanted = noise.dt.min(by_drift).max(noise.min_step);
    let steps = ((remaining / wanted) - 1e-9).ceil().max(1.0);
    remaining / steps
}

/// A noisy run between output times: steps of at most `dt` (shorter where the field is fast),
/// counted from the run's start (the step number keys the increments).
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
        while self.t < t {
            crate::interrupt::set_clock(self.t);
            if crate::interrupt::is_requested() {
                return Err(Status::Interrupted { t: self.t });
            }
            let result = self.step_towards(t);
            if let Err(status) = result {
                out.copy_from_slice(&self.y);
                return Err(status);
            }
        }
        out.copy_from_slice(&self.y);
        Ok(())
    }

    /// One step: the field at the state, the step from it and the time left to `t`, the
    /// increments, the geodesic Heun step; lands exactly on `t` with the last one.
    fn step_towards(&mut self, t: f64) -> Result<(), Status> {
        let d = self.noise.d;
        self.scratch.f0.resize(self.y.len(), 0.0);
        self.dynamics.rhs(&self.y, &mut self.scratch.f0);
        let h = next_step(&self.noise, largest_speed(&self.scratch.f0, d), t - self.t);
        draw_increments(&self.noise, self.step, h, &mut self.xi);
        let drift = heun_step_from_field(
            self.dynamics,
            d,
            h,
            &mut self.y,
            &mut self.xi,
            &mut self.scratch,
        );
        self.step += 1;
        self.counts.accepted += 1;
        self.counts.rhs_evals += 2;
        let last = h >= t - self.t;
        self.t = if last { t } else { self.t + h };
        if !drift.is_finite() || self.y.iter().any(|v| !v.is_finite()) {
            return Err(Status::NonFinite { t: self.t });
        }
        self.step_drift_max = self.step_drift_max.max(drift);
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
            heun_step(f, d, h * coarse as f64, &mut y, &mut xi, &mut s);
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
        // Against the same W in R^d the noise P_x dW does not commute, even on the circle
        // (the angle is driven by -sin(theta) dW_1 + cos(theta) dW_2, whose law, not whose
        // path, is that of an additive noise): order 1/2, no Levy areas are drawn.
        for d in [2, 3] {
            let order = strong_order(d);
            assert!(
                (0.35..0.7).contains(&order),
                "d = {d}: strong order {order}"
            );
        }
    }

    #[test]
    fn on_the_circle_a_step_of_any_size_turns_the_angle_by_the_tangent_increment() {
        // Zero field: theta <- theta + <e_theta^perp, xi> exactly, however large T h (here the
        // increments have standard deviation 3 rad), which is Brownian motion's exact law.
        let n = 64;
        let f = SphereField::new(
            Attention::new(
                Kernel::Usa,
                1.0,
                vec![Head {
                    a: DMatrix::identity(2, 2),
                    v: DMatrix::zeros(2, 2),
                }],
            ),
            n,
        );
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let x0 = tokens(n, 2, &mut rng);
        let mut xi: Vec<f64> = (0..2 * n)
            .map(|_| {
                let z: f64 = StandardNormal.sample(&mut rng);
                3.0 * z
            })
            .collect();
        let turn: Vec<f64> = x0
            .chunks_exact(2)
            .zip(xi.chunks_exact(2))
            .map(|(x, e)| -x[1] * e[0] + x[0] * e[1])
            .collect();
        let mut y = x0.clone();
        heun_step(&f, 2, 1.0, &mut y, &mut xi, &mut HeunScratch::default());
        for ((x, y), a) in x0.chunks_exact(2).zip(y.chunks_exact(2)).zip(turn) {
            let expected = x[1].atan2(x[0]) + a;
            assert!((y[0] - expected.cos()).abs() < 1e-13, "{y:?} vs {expected}");
            assert!((y[1] - expected.sin()).abs() < 1e-13, "{y:?} vs {expected}");
        }
    }

    #[test]
    fn the_step_lands_on_the_sample_and_keeps_to_the_drift_rule_and_its_floor() {
        let noise = NoiseSettings {
            temperature: 1.0,
            dt: 0.01,
            min_step: 1e-4,
            seed: 0,
            d: 3,
        };
        // Slow field: equal steps of at most dt that end the interval.
        let h = next_step(&noise, 0.1, 0.105);
        assert_eq!(h, 0.105 / 11.0);
        // Fast field: h |F| <= DRIFT_TURN.
        let h = next_step(&noise, 50.0, 0.1);
        assert!(h * 50.0 <= DRIFT_TURN && h * 50.0 > 0.9 * DRIFT_TURN, "{h}");
        // Faster than the floor allows: the floor (the bound on the step count) wins.
        let h = next_step(&noise, 1e9, 0.1);
        assert!((h - 1e-4).abs() < 1e-12, "{h}");
        // Less time left than a step: one step to the sample.
        assert_eq!(next_step(&noise, 0.0, 0.003), 0.003);
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
            min_step: 0.0,
            seed: 1,
            d,
        };
        let mut stepper = StochasticStepper::new(&f, noise, &y, 0);
        stepper.advance_to(20.0, &mut y).unwrap();
        for row in y.chunks_exact(d) {
            assert!((dot(row, row).sqrt() - 1.0).abs() < 1e-15);
        }
        // The field of this usa head turns tokens by at most |V| e^beta ~ 3.3 per unit time:
        // 0.05 / 3.3 > 0.0125, so the drift rule shortens the 0.05 steps at most 4 times.
        assert!(
            (400..=1600).contains(&stepper.steps()),
            "{}",
            stepper.steps()
        );
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
                min_step: dt,
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
