//! The integrating-factor Dormand–Prince 5(4) pair on spectral coefficients (docs/MATH.md §18):
//!
//! ```text
//! c' = L c + N(c),  L diagonal (the diffusion, -T k^2 or -T l (l + d - 2)), N the transport
//! y_i     = e^{c_i h L} c_n + h sum_{j<i} a_ij e^{(c_i - c_j) h L} N(y_j)
//! c_{n+1} = e^{h L} c_n + h sum_j b_j e^{(1 - c_j) h L} N(y_j)          (order 5, FSAL)
//! error   = h sum_j (b_j - bhat_j) e^{(1 - c_j) h L} N(y_j)            (order 4 against 5)
//! ```
//!
//! The diffusion is solved exactly by the factors e^{s h L}, so the step follows the accuracy of
//! the transport, not the stiffness k^2 T of the top modes. The error is measured as a bound
//! of the density's sup norm: sum_k |error_k| against atol + rtol sum_k |c_k|.

use num_complex::Complex64;

/// Nodes of Dormand–Prince 5(4).
const C: [f64; 7] = [0.0, 0.2, 0.3, 0.8, 8.0 / 9.0, 1.0, 1.0];
/// Its Runge–Kutta matrix (rows 2..7; row 7 is b, first same as last).
const A: [[f64; 6]; 7] = [
    [0.0; 6],
    [0.2, 0.0, 0.0, 0.0, 0.0, 0.0],
    [3.0 / 40.0, 9.0 / 40.0, 0.0, 0.0, 0.0, 0.0],
    [44.0 / 45.0, -56.0 / 15.0, 32.0 / 9.0, 0.0, 0.0, 0.0],
    [
        19372.0 / 6561.0,
        -25360.0 / 2187.0,
        64448.0 / 6561.0,
        -212.0 / 729.0,
        0.0,
        0.0,
    ],
    [
        9017.0 / 3168.0,
        -355.0 / 33.0,
        46732.0 / 5247.0,
        49.0 / 176.0,
        -5103.0 / 18656.0,
        0.0,
    ],
    [
        35.0 / 384.0,
        0.0,
        500.0 / 1113.0,
        125.0 / 192.0,
        -2187.0 / 6784.0,
        11.0 / 84.0,
    ],
];
/// b - bhat (the error weights).
const E: [f64; 7] = [
    71.0 / 57600.0,
    0.0,
    -71.0 / 16695.0,
    71.0 / 1920.0,
    -17253.0 / 339200.0,
    22.0 / 525.0,
    -1.0 / 40.0,
];

/// A semilinear system on spectral coefficients: the diagonal linear part and the rest.
pub trait SpectralSystem {
    /// The diagonal of L (<= 0), one entry per coefficient.
    fn linear(&self) -> &[f64];
    /// Writes N(c) into `out` (same length as `c`).
    fn nonlinear(&mut self, c: &[Complex64], out: &mut [Complex64]);
}

/// The stepper's state between steps: the FSAL stage and the next step size.
pub struct Stepper {
    /// The stages N(y_i), i = 1..7.
    stages: Vec<Vec<Complex64>>,
    /// A stage's argument and the error.
    work: Vec<Complex64>,
    err: Vec<Complex64>,
    /// Whether `stages[0]` holds N(c) of the current state.
    fresh: bool,
    /// The step the controller proposes next.
    pub h: f64,
    /// Relative and absolute tolerances.
    rtol: f64,
    atol: f64,
    /// Evaluations of N, accepted and rejected steps.
    pub evals: u64,
    /// Accepted steps.
    pub accepted: u64,
    /// Rejected steps.
    pub rejected: u64,
    /// e^{s h L} for the distinct s of a step (key s, factors).
    factors: Vec<(f64, Vec<f64>)>,
}

/// What one attempt to advance gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepResult {
    /// Advanced by this much.
    Accepted(f64),
    /// The step fell below round-off of t.
    Underflow,
    /// A stage was not finite.
    NonFinite,
}

impl Stepper {
    /// A stepper for `len` coefficients.
    pub fn new(len: usize, h: f64, rtol: f64, atol: f64) -> Self {
        Stepper {
            stages: vec![vec![Complex64::new(0.0, 0.0); len]; 7],
            work: vec![Complex64::new(0.0, 0.0); len],
            err: vec![Complex64::new(0.0, 0.0); len],
            fresh: false,
            h,
            rtol,
            atol,
            evals: 0,
            accepted: 0,
            rejected: 0,
            factors: Vec::new(),
        }
    }

    /// Resizes for a new number of coefficients (after the grid grew); the next step starts
    /// by evaluating N afresh.
    pub fn resize(&mut self, len: usize) {
        for s in &mut self.stages {
            s.resize(len, Complex64::new(0.0, 0.0));
        }
        self.work.resize(len, Complex64::new(0.0, 0.0));
        self.err.resize(len, Complex64::new(0.0, 0.0));
        self.fresh = false;
    }

    /// e^{s h L} for the step size of this attempt (cached per attempt).
    fn factor(&mut self, s: f64, h: f64, l: &[f64]) -> usize {
        if let Some(i) = self.factors.iter().position(|(k, _)| *k == s) {
            return i;
        }
        let f = l.iter().map(|&lk| (lk * s * h).exp()).collect();
        self.factors.push((s, f));
        self.factors.len() - 1
    }

    /// Advances `c` from `t` by at most `limit` with the error within the tolerances; retries
    /// with smaller steps until it is.
    pub fn step(
        &mut self,
        system: &mut dyn SpectralSystem,
        c: &mut [Complex64],
        t: f64,
        limit: f64,
    ) -> StepResult {
        if !self.fresh {
            system.nonlinear(c, &mut self.stages[0]);
            self.evals += 1;
            self.fresh = true;
        }
        loop {
            let h = self.h.min(limit);
            if h <= 4.0 * f64::EPSILON * t.abs().max(limit) {
                return StepResult::Underflow;
            }
            let (norm, finite) = self.attempt(system, c, h);
            if !finite {
                // A non-finite stage: shrink hard, give up once the step is round-off.
                self.rejected += 1;
                self.h = h * 0.1;
                if self.h <= 4.0 * f64::EPSILON * t.abs().max(1.0) {
                    return StepResult::NonFinite;
                }
                continue;
            }
            let factor = (0.9 * norm.powf(-0.2)).clamp(0.2, 5.0);
            if norm <= 1.0 {
                // c <- y_7 (kept in `work`), N(c) <- stage 7.
                c.copy_from_slice(&self.work);
                self.stages.swap(0, 6);
                self.accepted += 1;
                if h == self.h || factor < 1.0 {
                    self.h = h * factor;
                } else {
                    // A step cut short by `limit` does not shrink the next one.
                    self.h = self.h.max(h * factor);
                }
                return StepResult::Accepted(h);
            }
            self.rejected += 1;
            self.h = h * factor.min(1.0);
        }
    }

    /// One attempt with step `h`: the new state in `work`, the stages, and the error norm.
    fn attempt(&mut self, system: &mut dyn SpectralSystem, c: &[Complex64], h: f64) -> (f64, bool) {
        let l = system.linear().to_vec();
        self.factors.clear();
        for i in 1..7 {
            let fi = self.factor(C[i], h, &l);
            let mut parts = Vec::with_capacity(i);
            for (j, &cj) in C.iter().enumerate().take(i) {
                if A[i][j] != 0.0 {
                    parts.push((j, self.factor(C[i] - cj, h, &l)));
                }
            }
            for k in 0..c.len() {
                let mut y = c[k] * self.factors[fi].1[k];
                for &(j, f) in &parts {
                    y += self.stages[j][k] * (h * A[i][j] * self.factors[f].1[k]);
                }
                self.work[k] = y;
            }
            let (done, rest) = self.stages.split_at_mut(i);
            let _ = done;
            system.nonlinear(&self.work, &mut rest[0]);
            self.evals += 1;
            if !rest[0].iter().all(|z| z.re.is_finite() && z.im.is_finite()) {
                return (f64::INFINITY, false);
            }
        }
        // work = y_7 = c_{n+1} (the last stage's argument); the error from the stages.
        let mut parts = Vec::with_capacity(7);
        for (j, &cj) in C.iter().enumerate() {
            if E[j] != 0.0 {
                parts.push((j, self.factor(1.0 - cj, h, &l)));
            }
        }
        let (mut err_sum, mut size) = (0.0, 0.0);
        for k in 0..c.len() {
            let mut e = Complex64::new(0.0, 0.0);
            for &(j, f) in &parts {
                e += self.stages[j][k] * (h * E[j] * self.factors[f].1[k]);
            }
            self.err[k] = e;
            err_sum += e.norm();
            size += c[k].norm().max(self.work[k].norm());
        }
        let norm = err_sum / (self.atol + self.rtol * size);
        (norm, norm.is_finite())
    }
}
