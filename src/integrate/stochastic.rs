//! Noisy tokens: the stochastic Heun scheme on the sphere for the Stratonovich system
//! (docs/MATH.md, "Noise")
//!
//! ```text
//! dX_k = F_k(X) dt + sqrt(2 T) P_{X_k} o dW_k,        P_x v = v - <x, v> x,
//! ```
//!
//! one step of size h with the increments xi_k = sqrt(2 T h c) N(0, I_d) (c the curvature
//! factor) is the geodesic Heun step of docs/MATH.md §15:
//!
//! ```text
//! eta_k      = P_{X_k} xi_k
//! Y_k        = exp_{X_k}(h F_k(X) + eta_k)                                  (predictor)
//! X_k(t + h) = exp_{X_k}(h/2 (F_k(X) + back(F_k(Y))) + eta_k)               (corrector)
//! ```
//!
//! with exp and back (the transport from Y_k to X_k) from `geodesic.rs`; on the circle
//! it is a step of the angle. The tokens go in blocks of 8 (their sines and cosines
//! together), and a final normalisation removes round-off.
//!
//! Weak order 1 for every d (and for T = 0 the deterministic Heun method, order 2); strong
//! order 1/2 for every d (the projected noise P_x dW does not commute, even on the circle,
//! and no Lévy areas are drawn). The field F is the model's
//! [`Dynamics::rhs`], called as a black box, so every kernel, head, mask and layer applies.
//! The increments come from [`super::gaussian`] by (seed, step, token): the same bytes for any
//! thread count. Steps are at most dt and shorter where the field is fast (§15); the time to
//! the next sample is split into equal steps, so that they land on the samples and on every
//! layer boundary.

use rayon::prelude::*;

use super::gaussian::TokenStream;
use super::geodesic::{sin_cos_lanes, Turn, LANES};
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

/// Buffers of one Heun step (the field at the start and at the predictor, the predictor, and
/// in d >= 3 the predictor's turn of every token, which the corrector's transport reuses).
#[derive(Debug, Default)]
pub struct HeunScratch {
    f0: Vec<f64>,
    f1: Vec<f64>,
    predictor: Vec<f64>,
    turns: Vec<Turn>,
}

/// One geodesic Heun step of size `h` with the increments `xi` (n x d, already scaled);
/// `y` (tokens of unit length) is advanced in place and `xi` is used as scratch. Returns the
/// largest | |x_k| - 1 | before the final normalisation (round-off only: the exponential map
/// stays on the sphere), infinite if a token is not finite.
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
    heun_step_from_field(dynamics, (d, h, None), y, xi, s)
}

/// The increments of step `.1` of a run with the noise `.0`: drawn into `xi` chunk by chunk
/// just before the predictor reads them (one pass over the tokens instead of two).
type Draw<'n> = Option<(&'n NoiseSettings, u64)>;

/// [`heun_step`] with the field at the start already in `s.f0`; with `draw`, the increments
/// are drawn into `xi` here (the same numbers as [`draw_increments`]).
fn heun_step_from_field(
    dynamics: &dyn Dynamics,
    (d, h, draw): (usize, f64, Draw),
    y: &mut [f64],
    xi: &mut [f64],
    s: &mut HeunScratch,
) -> f64 {
    let len = y.len();
    s.f1.resize(len, 0.0);
    s.predictor.resize(len, 0.0);
    if d == 2 {
        return circle_step(dynamics, (h, draw), y, xi, s);
    }
    s.turns.resize(len / d, Turn::ZERO);
    let (x, f0) = (&*y, &s.f0);
    triple_chunks(
        xi,
        &mut s.predictor,
        &mut s.turns,
        d,
        |first, xi, out, turns| {
            let range = first * d..first * d + out.len();
            if let Some((noise, step)) = draw {
                fill_increments(noise, step, h, first, xi);
            }
            predictor(d, h, (&x[range.clone()], &f0[range]), xi, out, turns);
        },
    );
    dynamics.rhs(&s.predictor, &mut s.f1);
    let (f0, xi, turns) = (&s.f0, &*xi, &s.turns);
    pair_chunks(y, &mut s.f1, d, |first, rows, f1| {
        let range = first * d..first * d + rows.len();
        let turns = &turns[first..first + rows.len() / d];
        corrector(d, h, rows, (&f0[range.clone()], f1), &xi[range], turns)
    })
}

/// The geodesic Heun step on the circle (d = 2), by the angle.
fn circle_step(
    dynamics: &dyn Dynamics,
    (h, draw): (f64, Draw),
    y: &mut [f64],
    xi: &mut [f64],
    s: &mut HeunScratch,
) -> f64 {
    let (x, f0) = (&*y, &s.f0);
    pair_chunks(xi, &mut s.predictor, 2, |first, xi, out| {
        let range = 2 * first..2 * first + out.len();
        if let Some((noise, step)) = draw {
            fill_increments(noise, step, h, first, xi);
        }
        circle_predictor(h, &x[range.clone()], &f0[range], xi, out);
        0.0
    });
    dynamics.rhs(&s.predictor, &mut s.f1);
    let (f1, parts, y1) = (&s.f1, &*xi, &s.predictor);
    chunks(y, 2, |first, rows| {
        let range = 2 * first..2 * first + rows.len();
        circle_corrector(
            h,
            rows,
            &f1[range.clone()],
            &parts[range.clone()],
            &y1[range],
        )
    })
}

/// Signed angles of a block: (sin s, cos s) from [`sin_cos_lanes`] on |s|.
#[inline(always)]
fn signed_sin_cos(angle: &[f64; LANES]) -> ([f64; LANES], [f64; LANES]) {
    let (r, r2) = (angle.map(f64::abs), angle.map(|s| s * s));
    let (mut sin, cos) = sin_cos_lanes(&r, &r2);
    for (v, s) in sin.iter_mut().zip(angle) {
        if *s < 0.0 {
            *v = -*v;
        }
    }
    (sin, cos)
}

/// [`predictor`] on the circle (d = 2), by the angle: with x^perp = (-x_2, x_1) and
/// s = <h F_k + eta_k, x^perp>, Y_k = cos s x + sin s x^perp (the exponential map turns the
/// angle by s; one sine and cosine a token, no square root). The tokens go in blocks of
/// [`LANES`] (the sines and cosines of a block together). The row of `xi` keeps what the
/// corrector needs of the start: (<F_k(X), x^perp>, <eta_k, x^perp>).
fn circle_predictor(h: f64, x: &[f64], f0: &[f64], xi: &mut [f64], out: &mut [f64]) {
    crate::simd::vectorized(
        #[inline(always)]
        || {
            for (((x, f), e), o) in x
                .chunks(2 * LANES)
                .zip(f0.chunks(2 * LANES))
                .zip(xi.chunks_mut(2 * LANES))
                .zip(out.chunks_mut(2 * LANES))
            {
                let mut angle = [0.0; LANES];
                for (l, s) in angle.iter_mut().enumerate().take(x.len() / 2) {
                    let (x, f, e) = (
                        &x[2 * l..2 * l + 2],
                        &f[2 * l..2 * l + 2],
                        &mut e[2 * l..2 * l + 2],
                    );
                    let along = x[0] * e[0] + x[1] * e[1];
                    e[0] -= along * x[0];
                    e[1] -= along * x[1];
                    *s = -(h * f[0] + e[0]) * x[1] + (h * f[1] + e[1]) * x[0];
                    let at_x = -f[0] * x[1] + f[1] * x[0];
                    let noise = -e[0] * x[1] + e[1] * x[0];
                    e[0] = at_x;
                    e[1] = noise;
                }
                let (sin, cos) = signed_sin_cos(&angle);
                for (l, (x, o)) in x.chunks_exact(2).zip(o.chunks_exact_mut(2)).enumerate() {
                    o[0] = cos[l] * x[0] - sin[l] * x[1];
                    o[1] = cos[l] * x[1] + sin[l] * x[0];
                }
            }
        },
    )
}

/// [`corrector`] on the circle: the transport back along the circle keeps angular velocities,
/// so the corrector turns x by s = h/2 (<F_k(X), x^perp> + <F_k(Y), y^perp>) + <eta_k, x^perp>
/// (`parts` holds the first and last term from the predictor), then normalises; returns the
/// largest | |X_k| - 1 | before the normalisation, infinite if a token is not finite.
fn circle_corrector(h: f64, x: &mut [f64], f1: &[f64], parts: &[f64], y: &[f64]) -> f64 {
    crate::simd::vectorized(
        #[inline(always)]
        || {
            let mut drift = [0.0; LANES];
            for (((x, b), p), y) in x
                .chunks_mut(2 * LANES)
                .zip(f1.chunks(2 * LANES))
                .zip(parts.chunks(2 * LANES))
                .zip(y.chunks(2 * LANES))
            {
                let mut angle = [0.0; LANES];
                for (l, s) in angle.iter_mut().enumerate().take(x.len() / 2) {
                    let (b, p, y) = (
                        &b[2 * l..2 * l + 2],
                        &p[2 * l..2 * l + 2],
                        &y[2 * l..2 * l + 2],
                    );
                    let at_y = -b[0] * y[1] + b[1] * y[0];
                    *s = 0.5 * h * (p[0] + at_y) + p[1];
                }
                let (sin, cos) = signed_sin_cos(&angle);
                for (l, x) in x.chunks_exact_mut(2).enumerate() {
                    let n0 = cos[l] * x[0] - sin[l] * x[1];
                    let n1 = cos[l] * x[1] + sin[l] * x[0];
                    let r = (n0 * n0 + n1 * n1).sqrt();
                    let off = off_the_sphere(r);
                    drift[l] = if off > drift[l] { off } else { drift[l] };
                    x[0] = n0 / r;
                    x[1] = n1 / r;
                }
            }
            drift.iter().fold(0.0, |a, &b| if b > a { b } else { a })
        },
    )
}

/// | r - 1 | for a token of length r before its normalisation; infinite when r is not a
/// positive finite number (the normalised token is finite exactly when r is).
#[inline(always)]
fn off_the_sphere(r: f64) -> f64 {
    if r > 0.0 && r < f64::INFINITY {
        (r - 1.0).abs()
    } else {
        f64::INFINITY
    }
}

/// For the rows of one chunk: eta_k = P_{X_k} xi_k (in place) and
/// Y_k = exp_{X_k}(h F_k + eta_k), in blocks of [`LANES`] tokens (their sines and cosines
/// together); the turns go to `turns` for the corrector.
fn predictor(
    d: usize,
    h: f64,
    (x, f0): (&[f64], &[f64]),
    xi: &mut [f64],
    out: &mut [f64],
    turns: &mut [Turn],
) {
    let width = LANES * d;
    for ((((x, f), e), o), turns) in x
        .chunks(width)
        .zip(f0.chunks(width))
        .zip(xi.chunks_mut(width))
        .zip(out.chunks_mut(width))
        .zip(turns.chunks_mut(LANES))
    {
        let (mut r, mut r2) = ([0.0; LANES], [0.0; LANES]);
        for (l, ((x, f), (e, v))) in x
            .chunks_exact(d)
            .zip(f.chunks_exact(d))
            .zip(e.chunks_exact_mut(d).zip(o.chunks_exact_mut(d)))
            .enumerate()
        {
            let along = dot(x, e);
            for i in 0..d {
                e[i] -= along * x[i];
                v[i] = h * f[i] + e[i];
            }
            r2[l] = dot(v, v);
            r[l] = r2[l].sqrt();
        }
        let (sin, cos) = sin_cos_lanes(&r, &r2);
        for (l, ((x, v), turn)) in x
            .chunks_exact(d)
            .zip(o.chunks_exact_mut(d))
            .zip(turns.iter_mut())
            .enumerate()
        {
            *turn = Turn::with(r[l], r2[l], sin[l], cos[l]);
            turn.exp_in_place(x, v);
        }
    }
}

/// The corrector for the rows of one chunk: with v_k = h F_k(X) + eta_k (the predictor's
/// step, whose turn is in `turns`), X_k <- exp_{X_k}(h/2 (F_k(X) + back(F_k(Y))) + eta_k),
/// then normalised; returns the largest | |X_k| - 1 | before the normalisation, infinite if a
/// token is not finite. `f1` is overwritten.
fn corrector(
    d: usize,
    h: f64,
    x: &mut [f64],
    (f0, f1): (&[f64], &mut [f64]),
    eta: &[f64],
    turns: &[Turn],
) -> f64 {
    let mut v = [0.0; MAX_STACK_D];
    let mut heap = Vec::new();
    let v = row_buffer(d, &mut v, &mut heap);
    let mut drift: f64 = 0.0;
    let width = LANES * d;
    for ((((x, a), b), e), turns) in x
        .chunks_mut(width)
        .zip(f0.chunks(width))
        .zip(f1.chunks_mut(width))
        .zip(eta.chunks(width))
        .zip(turns.chunks(LANES))
    {
        let (mut r, mut r2) = ([0.0; LANES], [0.0; LANES]);
        for (l, (((x, a), b), e)) in x
            .chunks_exact(d)
            .zip(a.chunks_exact(d))
            .zip(b.chunks_exact_mut(d))
            .zip(e.chunks_exact(d))
            .enumerate()
        {
            for i in 0..d {
                v[i] = h * a[i] + e[i];
            }
            turns[l].transport_back(x, v, b);
            // b becomes the corrector's step, then (below) the new token before it replaces x.
            for i in 0..d {
                b[i] = 0.5 * h * (a[i] + b[i]) + e[i];
            }
            r2[l] = dot(b, b);
            r[l] = r2[l].sqrt();
        }
        let (sin, cos) = sin_cos_lanes(&r, &r2);
        for (l, (x, b)) in x.chunks_exact_mut(d).zip(b.chunks_exact_mut(d)).enumerate() {
            Turn::with(r[l], r2[l], sin[l], cos[l]).exp_in_place(x, b);
            let r = dot(b, b).sqrt();
            let off = off_the_sphere(r);
            drift = if off > drift { off } else { drift };
            for (xi, bi) in x.iter_mut().zip(b.iter()) {
                *xi = bi / r;
            }
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

/// Applies `f(first_token, a_rows, b_rows, turns)` to matching chunks of [`TOKENS_PER_CHUNK`]
/// tokens of `a`, `b` (d numbers a token) and `turns` (one a token), in parallel when there is
/// more than one.
fn triple_chunks<F>(a: &mut [f64], b: &mut [f64], turns: &mut [Turn], d: usize, f: F)
where
    F: Fn(usize, &mut [f64], &mut [f64], &mut [Turn]) + Sync + Send,
{
    let width = TOKENS_PER_CHUNK * d;
    if a.len() <= width {
        return f(0, a, b, turns);
    }
    a.par_chunks_mut(width)
        .zip(b.par_chunks_mut(width))
        .zip(turns.par_chunks_mut(TOKENS_PER_CHUNK))
        .enumerate()
        .for_each(|(c, ((a, b), t))| f(c * TOKENS_PER_CHUNK, a, b, t));
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
    chunks(xi, noise.d, |first, rows| {
        fill_increments(noise, step, h, first, rows);
        0.0
    });
}

/// [`draw_increments`] for the rows of the tokens `first`, `first + 1`, ...
fn fill_increments(noise: &NoiseSettings, step: u64, h: f64, first: usize, rows: &mut [f64]) {
    let (d, t) = (noise.d, noise.temperature);
    let scale = (2.0 * t * h * curvature_factor(d, t, h)).sqrt();
    for (i, row) in rows.chunks_exact_mut(d).enumerate() {
        TokenStream::new(noise.seed, step, (first + i) as u64).fill_normals(scale, row);
    }
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
        let drift = heun_step_from_field(
            self.dynamics,
            (d, h, Some((&self.noise, self.step))),
            &mut self.y,
            &mut self.xi,
            &mut self.scratch,
        );
        self.step += 1;
        self.counts.accepted += 1;
        self.counts.rhs_evals += 2;
        let last = h >= t - self.t;
        self.t = if last { t } else { self.t + h };
        // The step's drift is infinite exactly when a token is not finite.
        if !drift.is_finite() {
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

    /// The geodesic Heun step token by token, written plainly (one `Turn::of` per stage, the
    /// predictor's turn computed again in the corrector): the reference of the blocked step.
    fn plain_step(f: &SphereField, d: usize, h: f64, x: &mut [f64], xi: &[f64]) {
        let n = x.len();
        let (mut f0, mut f1, mut y, mut eta) =
            (vec![0.0; n], vec![0.0; n], vec![0.0; n], xi.to_vec());
        f.rhs(x, &mut f0);
        for k in 0..n / d {
            let r = k * d..k * d + d;
            let (x, e) = (&x[r.clone()], &mut eta[r.clone()]);
            let along = dot(x, e);
            let v: Vec<f64> = (0..d)
                .map(|i| {
                    e[i] -= along * x[i];
                    h * f0[k * d + i] + e[i]
                })
                .collect();
            Turn::of(&v).exp(x, &v, &mut y[r]);
        }
        f.rhs(&y, &mut f1);
        for k in 0..n / d {
            let r = k * d..k * d + d;
            let (a, b, e) = (&f0[r.clone()], &mut f1[r.clone()], &eta[r.clone()]);
            let x = &mut x[r];
            let v: Vec<f64> = (0..d).map(|i| h * a[i] + e[i]).collect();
            Turn::of(&v).transport_back(x, &v, b);
            let v: Vec<f64> = (0..d).map(|i| 0.5 * h * (a[i] + b[i]) + e[i]).collect();
            let mut z = vec![0.0; d];
            Turn::of(&v).exp(x, &v, &mut z);
            let norm = dot(&z, &z).sqrt();
            x.iter_mut().zip(&z).for_each(|(a, b)| *a = b / norm);
        }
    }

    #[test]
    fn the_blocked_step_gives_the_bits_of_the_plain_one_in_d_3_and_5() {
        // 37 tokens: blocks of LANES and a partial one; T h large enough that some turns take
        // 7 and 9 Taylor terms and a few go to libm (r > 1).
        let n = 37;
        for d in [3, 5] {
            let mut rng = ChaCha8Rng::seed_from_u64(21 + d as u64);
            let f = field(n, d);
            let x0 = tokens(n, d, &mut rng);
            let xi: Vec<f64> = (0..n * d)
                .map(|_| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    0.5 * z
                })
                .collect();
            let mut plain = x0.clone();
            plain_step(&f, d, 0.05, &mut plain, &xi);
            let mut blocked = x0.clone();
            let mut noise = xi.clone();
            heun_step(
                &f,
                d,
                0.05,
                &mut blocked,
                &mut noise,
                &mut HeunScratch::default(),
            );
            assert_eq!(plain, blocked, "d = {d}");
        }
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
