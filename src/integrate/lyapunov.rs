//! Lyapunov exponents by the tangent flow with QR re-orthonormalisation (Benettin, Galgani,
//! Giorgilli and Strelcyn 1980; docs/MATH.md §15).
//!
//! The state y and k tangent vectors v_1..v_k move together,
//!
//! ```text
//! y' = F(y),   v_i' = DF(y) v_i,
//! ```
//!
//! integrated as one system by the same DOP853 (error control on both). At the times
//! t_q = q * interval before the transient, at the transient itself and at
//! transient + q * interval after it, the vectors (of length c each, mutually orthogonal since
//! the last such time) are factored V = c Q R by Gram–Schmidt (twice, so that Q is orthogonal
//! to round-off) and replaced by c Q. After the transient the logarithms add up:
//!
//! ```text
//! lambda_i(t_q) = sum over the times t_p in (transient, t_q] of ln R_ii(t_p)  /  (t_q - transient)
//! ```
//!
//! the running estimates of the first k exponents (lambda_1 >= lambda_2 >= ...). The
//! replacement does not restart the stepper: the tangent part of the system is linear, so the
//! stored step (its stages and dense output) is mapped by the same triangular matrix
//! c R^{-1} and stays the step of the mapped solution. On a manifold (tokens on spheres) the
//! vectors start in, and are projected onto, its tangent spaces ([`Linearization`]), so the
//! exponents are those of the flow on the manifold. A stack of layers is followed segment by
//! segment like [`super::solve`] does, the vectors carried across each boundary.

use super::dop853::Dop853;
use super::{Dynamics, Status};
use crate::observe::OrderParameters;

/// The derivative of a field along tangent vectors.
pub trait Linearization {
    /// Dimension of the manifold's tangent spaces (the most exponents there are).
    fn tangent_dimension(&self) -> usize;
    /// Writes F(y) into `dy` and DF(y) v for each tangent vector into `dv`: `v` and `dv` hold
    /// the vectors one after the other, each of the state's length.
    fn field_and_derivatives(&self, y: &[f64], v: &[f64], dy: &mut [f64], dv: &mut [f64]);
    /// Projects the tangent vectors `v` (one after the other) onto the tangent space at `y`.
    fn project_tangents(&self, _y: &[f64], _v: &mut [f64]) {}
}

/// `[lyapunov]`: how many exponents, after which transient, re-orthonormalised how often.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LyapunovSettings {
    /// k, the number of exponents (>= 1, at most the tangent dimension).
    pub exponents: usize,
    /// Time before the logarithms start to count (< t_end).
    pub transient: f64,
    /// Time between two re-orthonormalisations (> 0).
    pub interval: f64,
}

/// The running estimates and the exponents of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Spectrum {
    /// The times of the running estimates (after the transient, one per interval, and t_end).
    pub times: Vec<f64>,
    /// The running estimates lambda_1..lambda_k at each time.
    pub estimates: Vec<Vec<f64>>,
    /// The exponents: the last running estimates.
    pub exponents: Vec<f64>,
    /// For each exponent, max - min of its running estimate over the last half of the times.
    pub spread: Vec<f64>,
    /// The transient.
    pub transient: f64,
    /// The last time (t_end).
    pub t: f64,
}

/// Why the exponents could not be computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LyapunovFailure {
    /// The field (or one layer's field) gives no derivative.
    NoLinearization,
    /// The integration failed (overflow, step size underflow, interrupted).
    Integration(Status),
}

/// The state and k tangent vectors as one system (see the module's formula).
pub struct TangentFlow<'a> {
    base: &'a dyn Dynamics,
    linearization: &'a dyn Linearization,
    k: usize,
}

impl<'a> TangentFlow<'a> {
    /// The tangent flow of `base` with `k` vectors; `None` when `base` has no derivative.
    pub fn new(base: &'a dyn Dynamics, k: usize) -> Option<Self> {
        Some(TangentFlow {
            base,
            linearization: base.linearization()?,
            k,
        })
    }

    fn state_len(&self) -> usize {
        self.base.dimension()
    }
}

impl Dynamics for TangentFlow<'_> {
    fn dimension(&self) -> usize {
        self.state_len() * (1 + self.k)
    }

    fn rhs(&self, y: &[f64], dy: &mut [f64]) {
        let m = self.state_len();
        let (x, v) = y.split_at(m);
        let (dx, dv) = dy.split_at_mut(m);
        self.linearization.field_and_derivatives(x, v, dx, dv);
    }

    fn project(&self, y: &mut [f64]) -> f64 {
        let m = self.state_len();
        let (x, v) = y.split_at_mut(m);
        let drift = self.base.project(x);
        self.linearization.project_tangents(x, v);
        drift
    }

    fn order_parameters(&self, y: &[f64]) -> OrderParameters {
        self.base.order_parameters(&y[..self.state_len()])
    }

    fn tokens<'b>(&self, _y: &'b [f64]) -> Option<std::borrow::Cow<'b, [f64]>> {
        None
    }
}

/// The re-orthonormalisation times of the module's formula, one after the other.
struct Schedule {
    settings: LyapunovSettings,
    t_end: f64,
    /// How many times come before the transient.
    before: usize,
    next: usize,
    done: bool,
}

impl Schedule {
    fn new(settings: LyapunovSettings, t_end: f64) -> Self {
        let before = ((settings.transient / settings.interval).ceil() as usize).saturating_sub(1);
        Schedule {
            settings,
            t_end,
            before,
            next: 0,
            done: false,
        }
    }

    /// The next time, and whether it is the transient (where the sums start).
    fn peek(&self) -> Option<(f64, bool)> {
        if self.done {
            return None;
        }
        let s = &self.settings;
        if self.next < self.before {
            return Some(((self.next + 1) as f64 * s.interval, false));
        }
        let q = self.next - self.before;
        let t = (s.transient + q as f64 * s.interval).min(self.t_end);
        Some((t, q == 0))
    }

    fn advance(&mut self, t: f64) {
        self.next += 1;
        self.done = t >= self.t_end;
    }
}

/// The logarithms summed since the transient and the running estimates.
struct Benettin {
    k: usize,
    /// The tangent vectors' length c.
    scale: f64,
    sums: Vec<f64>,
    counting: bool,
    transient: f64,
    times: Vec<f64>,
    estimates: Vec<Vec<f64>>,
    /// Scratch: the state at a re-orthonormalisation time.
    at: Vec<f64>,
}

impl Benettin {
    /// Factors the tangent vectors of `solver` at time `t` (local time `local`), replaces them by
    /// c Q and, after the transient, adds ln R_ii and records the running estimates.
    fn reorthonormalise(
        &mut self,
        flow: &TangentFlow<'_>,
        solver: &mut Dop853,
        (t, local): (f64, f64),
        starts_sums: bool,
    ) -> Result<(), Status> {
        let m = flow.state_len();
        self.at.resize(flow.dimension(), 0.0);
        let mut at = std::mem::take(&mut self.at);
        solver.interpolate(flow, local, &mut at);
        let (x, v) = at.split_at_mut(m);
        flow.linearization.project_tangents(x, v);
        let r = gram_schmidt(v, m, self.k);
        self.at = at;
        let diagonal: Vec<f64> = (0..self.k).map(|i| r[i * self.k + i]).collect();
        if diagonal.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            return Err(Status::NonFinite { t });
        }
        let map = scaled_inverse(&r, self.k, self.scale);
        let k = self.k;
        solver.map_linear_part(&mut |y| multiply_right(&mut y[m..], m, k, &map));
        if starts_sums {
            self.counting = true;
            return Ok(());
        }
        if self.counting {
            for (s, r) in self.sums.iter_mut().zip(&diagonal) {
                *s += (r / self.scale).ln();
            }
            let elapsed = t - self.transient;
            self.times.push(t);
            self.estimates
                .push(self.sums.iter().map(|s| s / elapsed).collect());
        }
        Ok(())
    }

    fn into_spectrum(self, t_end: f64) -> Spectrum {
        let exponents = self.estimates.last().cloned().unwrap_or_default();
        let t_last = self.times.last().copied().unwrap_or(t_end);
        let half = self.transient + 0.5 * (t_last - self.transient);
        let spread = (0..self.k)
            .map(|i| {
                let tail = self
                    .times
                    .iter()
                    .zip(&self.estimates)
                    .filter(|(t, _)| **t >= half)
                    .map(|(_, e)| e[i]);
                let (lo, hi) = tail.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                    (lo.min(v), hi.max(v))
                });
                if hi >= lo {
                    hi - lo
                } else {
                    0.0
                }
            })
            .collect();
        Spectrum {
            times: self.times,
            estimates: self.estimates,
            exponents,
            spread,
            transient: self.transient,
            t: t_last,
        }
    }
}

/// The first `settings.exponents` Lyapunov exponents of `dynamics` from `y0` over [0, t_end],
/// integrated by DOP853 at tolerances `(rtol, atol)`.
pub fn spectrum(
    dynamics: &dyn Dynamics,
    y0: &[f64],
    t_end: f64,
    settings: LyapunovSettings,
    (rtol, atol): (f64, f64),
) -> Result<Spectrum, LyapunovFailure> {
    let k = settings.exponents;
    let first = segment_field(dynamics, 0);
    let first_flow = TangentFlow::new(first, k).ok_or(LyapunovFailure::NoLinearization)?;
    let mut y = initial_state(&first_flow, y0);
    let mut benettin = Benettin {
        k,
        scale: tangent_scale(y0),
        sums: vec![0.0; k],
        counting: false,
        transient: settings.transient,
        times: Vec::new(),
        estimates: Vec::new(),
        at: Vec::new(),
    };
    let m = y0.len();
    orthonormalise(&mut y[m..], m, k, benettin.scale);
    let mut schedule = Schedule::new(settings, t_end);
    let (mut segment, mut start) = (0, 0.0);
    while schedule.peek().is_some() {
        let field = segment_field(dynamics, segment);
        let flow = TangentFlow::new(field, k).ok_or(LyapunovFailure::NoLinearization)?;
        let end = segment_end(dynamics, segment, start, t_end);
        let mut solver = Dop853::new(&flow, &y, end - start, rtol, atol);
        run_segment(
            &flow,
            &mut solver,
            &mut schedule,
            &mut benettin,
            (start, end),
        )
        .map_err(LyapunovFailure::Integration)?;
        y.copy_from_slice(solver.y());
        segment += 1;
        start = end;
    }
    Ok(benettin.into_spectrum(t_end))
}

/// Steps `solver` through one segment [start, end], re-orthonormalising at every scheduled
/// time inside it.
fn run_segment(
    flow: &TangentFlow<'_>,
    solver: &mut Dop853,
    schedule: &mut Schedule,
    benettin: &mut Benettin,
    (start, end): (f64, f64),
) -> Result<(), Status> {
    let local_end = end - start;
    loop {
        while let Some((t, starts_sums)) = schedule.peek() {
            let local = t - start;
            if local > solver.t() {
                break;
            }
            benettin.reorthonormalise(flow, solver, (t, local), starts_sums)?;
            schedule.advance(t);
        }
        if schedule.peek().is_none() || solver.t() >= local_end {
            return Ok(());
        }
        if crate::interrupt::is_requested() {
            return Err(Status::Interrupted {
                t: start + solver.t(),
            });
        }
        solver
            .step(flow)
            .map_err(|t| Status::StepSizeUnderflow { t: start + t })?;
        if solver.y().iter().any(|v| !v.is_finite()) {
            return Err(Status::NonFinite {
                t: start + solver.t(),
            });
        }
    }
}

/// The field acting on segment `i` (a stack's layer, or the field itself).
fn segment_field(dynamics: &dyn Dynamics, i: usize) -> &dyn Dynamics {
    match dynamics.piecewise() {
        Some(stack) => {
            let layer = if stack.looped() {
                i % stack.len()
            } else {
                i.min(stack.len() - 1)
            };
            stack.layer(layer)
        }
        None => dynamics,
    }
}

/// The end of segment `i` starting at `start` (t_end for a field without layers; past the end
/// of a stack that does not loop, its last layer acts to t_end).
fn segment_end(dynamics: &dyn Dynamics, i: usize, start: f64, t_end: f64) -> f64 {
    match dynamics.piecewise() {
        Some(stack) if stack.looped() || i + 1 < stack.len() => {
            (start + stack.duration(i % stack.len())).min(t_end)
        }
        _ => t_end,
    }
}

/// The tangent vectors' length: the state's norm (so that their entries have the size of the
/// state's, and the error control treats both alike), 1 for a zero state.
fn tangent_scale(y0: &[f64]) -> f64 {
    let norm = y0.iter().map(|v| v * v).sum::<f64>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        norm
    } else {
        1.0
    }
}

/// The projected start and k pseudo-random tangent vectors (a fixed sequence, so runs repeat).
fn initial_state(flow: &TangentFlow<'_>, y0: &[f64]) -> Vec<f64> {
    let m = y0.len();
    let mut y = vec![0.0; m * (1 + flow.k)];
    y[..m].copy_from_slice(y0);
    flow.base.project(&mut y[..m]);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for v in &mut y[m..] {
        *v = uniform(&mut seed);
    }
    let (x, v) = y.split_at_mut(m);
    flow.linearization.project_tangents(x, v);
    y
}

/// A number in [-1, 1) from the splitmix64 sequence.
fn uniform(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// Replaces the k vectors (each of length m, one after the other) by orthogonal vectors of
/// length `scale` spanning the same nested subspaces.
fn orthonormalise(v: &mut [f64], m: usize, k: usize, scale: f64) {
    gram_schmidt(v, m, k);
    v.iter_mut().for_each(|x| *x *= scale);
}

/// Modified Gram–Schmidt, twice: V = Q R with Q's columns orthonormal (written over V) and R
/// upper triangular with a positive diagonal (k x k, row-major).
fn gram_schmidt(v: &mut [f64], m: usize, k: usize) -> Vec<f64> {
    let mut r = vec![0.0; k * k];
    for _pass in 0..2 {
        let mut pass = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..i {
                let (done, rest) = v.split_at_mut(i * m);
                let qj = &done[j * m..(j + 1) * m];
                let vi = &mut rest[..m];
                let c = dot(qj, vi);
                vi.iter_mut().zip(qj).for_each(|(a, b)| *a -= c * b);
                pass[j * k + i] = c;
            }
            let vi = &mut v[i * m..(i + 1) * m];
            let norm = dot(vi, vi).sqrt();
            pass[i * k + i] = norm;
            vi.iter_mut().for_each(|a| *a /= norm);
        }
        // R = pass * R (the second pass factors the first pass's Q).
        r = if r.iter().all(|x| *x == 0.0) {
            pass
        } else {
            multiply_upper(&pass, &r, k)
        };
    }
    r
}

/// The product of two upper triangular k x k matrices (row-major).
fn multiply_upper(a: &[f64], b: &[f64], k: usize) -> Vec<f64> {
    let mut c = vec![0.0; k * k];
    for i in 0..k {
        for j in i..k {
            c[i * k + j] = (i..=j).map(|l| a[i * k + l] * b[l * k + j]).sum();
        }
    }
    c
}

/// scale R^{-1} for an upper triangular R (row-major, positive diagonal).
fn scaled_inverse(r: &[f64], k: usize, scale: f64) -> Vec<f64> {
    let mut inv = vec![0.0; k * k];
    for j in 0..k {
        // Column j of R^{-1} by back substitution of R x = e_j.
        for i in (0..=j).rev() {
            let rhs = if i == j { 1.0 } else { 0.0 };
            let s: f64 = (i + 1..=j).map(|l| r[i * k + l] * inv[l * k + j]).sum();
            inv[i * k + j] = (rhs - s) / r[i * k + i];
        }
    }
    inv.iter_mut().for_each(|x| *x *= scale);
    inv
}

/// V <- V T for the k vectors V (one after the other, length m) and T upper triangular.
fn multiply_right(v: &mut [f64], m: usize, k: usize, t: &[f64]) {
    // Column j of V T needs the old columns 0..=j: go from the last column down.
    for j in (0..k).rev() {
        let (before, rest) = v.split_at_mut(j * m);
        let vj = &mut rest[..m];
        let tjj = t[j * k + j];
        vj.iter_mut().for_each(|x| *x *= tjj);
        for i in 0..j {
            let c = t[i * k + j];
            if c != 0.0 {
                let vi = &before[i * m..(i + 1) * m];
                vj.iter_mut().zip(vi).for_each(|(a, b)| *a += c * b);
            }
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gram_schmidt_factors_and_the_inverse_undoes_it() {
        let (m, k) = (7, 3);
        let mut seed = 5;
        let v: Vec<f64> = (0..m * k).map(|_| uniform(&mut seed)).collect();
        let mut q = v.clone();
        let r = gram_schmidt(&mut q, m, k);
        // Q R = V.
        for j in 0..k {
            for c in 0..m {
                let qr: f64 = (0..=j).map(|i| q[i * m + c] * r[i * k + j]).sum();
                assert!((qr - v[j * m + c]).abs() < 1e-14);
            }
        }
        // V (R^{-1}) = Q.
        let mut w = v.clone();
        multiply_right(&mut w, m, k, &scaled_inverse(&r, k, 1.0));
        assert!(w.iter().zip(&q).all(|(a, b)| (a - b).abs() < 1e-13));
    }
}
