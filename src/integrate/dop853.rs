//! Dormand–Prince 8(5,3) with its dense output of order 7, stepping in place.
//!
//! One step of size h from (t, y) with k_1 = F(y) (first same as last):
//!
//! ```text
//! k_s   = F(y + h sum_{j<s} a_sj k_j),                s = 2..12
//! y_new = y + h sum_j b_j k_j
//! err   = |h| sqrt( E5 / (m (E5 + 0.01 E3)) ),  E5 = sum_i (sum_j e_j k_ij / sc_i)^2,
//!         E3 = sum_i ((sum_j b_j k_ij - bhh_1 k_1i - bhh_2 k_9i - bhh_3 k_12i) / sc_i)^2,
//!         sc_i = atol + rtol max(|y_i|, |y_new,i|)
//! ```
//!
//! accepted when err <= 1, with the step-size controller of `ode_solvers` (its `Controller`).
//! The algorithm and coefficients are those of `ode_solvers`' `Dop853` (Hairer's DOP853; the
//! coefficients are in `dop853_tableau`, since the crate keeps its tableau private): what
//! differs is the storage. A test holds the two to round-off on the same problem. The
//! crate's solver allocates a new vector for each term of each stage (about ninety per step)
//! and keeps every accepted state; this one holds 16 vectors of the state's size, allocated
//! once, and never allocates while stepping. Vector operations run over fixed blocks of
//! components (in parallel for large states); sums are added block by block in block order, so
//! the result does not depend on the number of threads.
//!
//! After an accepted step, y_new is pulled back onto the manifold ([`Dynamics::project`]) and
//! k_13 = F(y_new) starts the next step. Output between steps uses the continuous extension of
//! order 7 (three more evaluations, k_14..k_16, only for steps that contain an output time):
//!
//! ```text
//! y(t_old + theta h) = r1 + theta (r2 + theta1 (r3 + theta (r4 + theta1 (r5 + theta (r6 + theta1 (r7 + theta r8))))))
//! r1 = y, r2 = y_new - y, r3 = h k_1 - r2, r4 = r2 - h k_13 - r3, r_(i+1) = h sum_j d_ij k_j (i = 4..7)
//! ```
//! with theta1 = 1 - theta.

use ode_solvers::controller::Controller;
use rayon::prelude::*;

use super::dop853_tableau as coefficients;
use super::Dynamics;
use crate::simd::{add_in_lanes, vectorized, LANES};

/// Components per block of the vector operations.
const BLOCK: usize = 4096;
/// Components per piece of a block whose partial sums stay in L1.
const PIECE: usize = 256;
/// From this many components on, the vector operations run in parallel.
const PARALLEL_MIN: usize = 4 * BLOCK;

/// Safety factor, exponent and step-ratio bounds of the controller (Hairer's defaults).
const SAFETY: f64 = 0.9;
const FAC_MIN: f64 = 0.333;
const FAC_MAX: f64 = 6.0;

/// Stages that enter the dense output's rows r5..r8.
const DENSE_STAGES: [usize; 12] = [1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];

/// Stages of the step (k_1..k_12) that enter y_new and the error estimates.
const MAIN_STAGES: [usize; 8] = [1, 6, 7, 8, 9, 10, 11, 12];

/// The DOP853 coefficients, 1-based as in Hairer's code (index 0 unused).
struct Tableau {
    a: [[f64; 17]; 17],
    b: [f64; 13],
    e: [f64; 13],
    bhh: [f64; 4],
    /// d[i][j]: row i = 4..7 of the dense output, stage j = 1..16.
    d: [[f64; 17]; 8],
}

impl Tableau {
    fn new() -> Self {
        let mut t = Tableau {
            a: [[0.0; 17]; 17],
            b: [0.0; 13],
            e: [0.0; 13],
            bhh: [0.0; 4],
            d: [[0.0; 17]; 8],
        };
        for i in 2..=16 {
            for j in 1..i {
                t.a[i][j] = coefficients::A[i - 2][j - 1];
            }
        }
        for i in 1..=12 {
            t.b[i] = coefficients::B[i - 1];
            t.e[i] = coefficients::E[i - 1];
        }
        for i in 1..=3 {
            t.bhh[i] = coefficients::BHH[i - 1];
        }
        for i in 4..=7 {
            for j in 1..=16 {
                t.d[i][j] = coefficients::D[i - 4][j - 1];
            }
        }
        t
    }
}

/// Where stage s (1..16) is stored: k_1..k_12 in slots 0..11, k_13 = F(y_new) in slot 12 and
/// the dense-output stages k_14..k_16 in the slots of k_2..k_4, which no later formula reads.
const fn slot(stage: usize) -> usize {
    match stage {
        1..=13 => stage - 1,
        _ => stage - 13,
    }
}

/// The adaptive integrator and its state.
pub(crate) struct Dop853 {
    rtol: f64,
    atol: f64,
    tab: Tableau,
    controller: Controller<f64>,
    /// Stage derivatives, see [`slot`].
    k: Vec<Vec<f64>>,
    /// State at `t`.
    y: Vec<f64>,
    /// State at the start of the last accepted step (t_old), for the dense output.
    y_old: Vec<f64>,
    /// Argument of the stage being evaluated.
    y_stage: Vec<f64>,
    /// The dense output's rows r5..r8 of the last accepted step, sum_j d_rj k_j (without the
    /// factor h), one after the other: they do not depend on theta, so they are formed once per
    /// step, not once per sample (allocated at the first dense output).
    dense_rows: [Vec<f64>; 4],
    /// Per-block partial sums (two per block) of the error norms.
    partials: Vec<f64>,
    t: f64,
    t_end: f64,
    /// Start and size of the last accepted step.
    t_old: f64,
    h_old: f64,
    /// Size of the next step to try.
    h: f64,
    /// k_13 of the last accepted step is F(y): it becomes k_1 of the next step.
    fsal_pending: bool,
    /// k_14..k_16 of the last accepted step are computed.
    dense_ready: bool,
    /// At least one step has been accepted.
    stepped: bool,
    pub(crate) evals: u64,
    pub(crate) accepted: u64,
    pub(crate) rejected: u64,
    /// Largest distance from the manifold of a step's result before projection.
    pub(crate) step_drift_max: f64,
}

impl Dop853 {
    /// Prepares to integrate from (0, y0) to t_end; evaluates F(y0) and the initial step.
    pub(crate) fn new(
        dynamics: &dyn Dynamics,
        y0: &[f64],
        t_end: f64,
        rtol: f64,
        atol: f64,
    ) -> Self {
        let m = y0.len();
        let alpha = 1.0 / 8.0;
        let mut s = Dop853 {
            rtol,
            atol,
            tab: Tableau::new(),
            controller: Controller::new(alpha, 0.0, FAC_MAX, FAC_MIN, t_end, SAFETY, 1.0),
            k: vec![vec![0.0; m]; 13],
            y: y0.to_vec(),
            y_old: vec![0.0; m],
            y_stage: vec![0.0; m],
            dense_rows: Default::default(),
            partials: vec![0.0; 2 * m.div_ceil(BLOCK).max(1)],
            t: 0.0,
            t_end,
            t_old: 0.0,
            h_old: 0.0,
            h: 0.0,
            fsal_pending: false,
            dense_ready: false,
            stepped: false,
            evals: 0,
            accepted: 0,
            rejected: 0,
            step_drift_max: 0.0,
        };
        s.step_drift_max = dynamics.project(&mut s.y);
        s.eval_at_state(dynamics, 1);
        s.h = s.initial_step(dynamics);
        s
    }

    /// Time of the current state.
    pub(crate) fn t(&self) -> f64 {
        self.t
    }

    /// The current state.
    pub(crate) fn y(&self) -> &[f64] {
        &self.y
    }

    /// Applies `map` to the current state, the last step's start and every stored stage
    /// derivative. For a map that is linear in components on which the field is linear (the
    /// tangent vectors of a tangent flow), the step, its first-same-as-last derivative and its
    /// dense output become exactly those of the mapped solution, so stepping goes on unchanged.
    pub(crate) fn map_linear_part(&mut self, map: &mut dyn FnMut(&mut [f64])) {
        map(&mut self.y);
        map(&mut self.y_old);
        for k in &mut self.k {
            map(k);
        }
        if self.dense_ready {
            // The rows from the mapped stages, as if they had been formed after the map.
            self.form_dense_rows();
        }
    }

    /// k_stage = F(y).
    fn eval_at_state(&mut self, dynamics: &dyn Dynamics, stage: usize) {
        dynamics.rhs(&self.y, &mut self.k[slot(stage)]);
        self.evals += 1;
    }

    /// k_stage = F(y_stage).
    fn eval_at_stage_argument(&mut self, dynamics: &dyn Dynamics, stage: usize) {
        dynamics.rhs(&self.y_stage, &mut self.k[slot(stage)]);
        self.evals += 1;
    }

    /// Hairer's starting step: h0 = 0.01 |y|/|f|, refined by one explicit Euler step.
    fn initial_step(&mut self, dynamics: &dyn Dynamics) -> f64 {
        let (rtol, atol) = (self.rtol, self.atol);
        let h_max = self.t_end;
        let scaled = |v: f64, y: f64| {
            let x = v / (atol + y.abs() * rtol);
            x * x
        };
        let d0: f64 = self.y.iter().map(|&y| scaled(y, y)).sum();
        let d1: f64 = self.k[0]
            .iter()
            .zip(&self.y)
            .map(|(&f, &y)| scaled(f, y))
            .sum();
        let h0 = if d0 < 1e-10 || d1 < 1e-10 {
            1e-6
        } else {
            0.01 * (d0 / d1).sqrt()
        }
        .min(h_max);
        for ((s, &y), &f) in self.y_stage.iter_mut().zip(&self.y).zip(&self.k[0]) {
            *s = y + f * h0;
        }
        self.eval_at_stage_argument(dynamics, 2);
        let d2 = self.k[1]
            .iter()
            .zip(&self.k[0])
            .zip(&self.y)
            .map(|((&f1, &f0), &y)| scaled(f1 - f0, y))
            .sum::<f64>()
            .sqrt()
            / h0;
        let h1 = if d1.sqrt().max(d2.abs()) <= 1e-15 {
            1e-6_f64.max(h0.abs() * 1e-3)
        } else {
            (0.01 / d1.sqrt().max(d2)).powf(0.125)
        };
        (100.0 * h0).min(h1.min(h_max))
    }

    /// Takes steps until one is accepted; Err(t) when the step size underflows at time t.
    pub(crate) fn step(&mut self, dynamics: &dyn Dynamics) -> Result<(), f64> {
        if self.fsal_pending {
            self.k.swap(slot(1), slot(13));
            self.fsal_pending = false;
        }
        loop {
            if 0.1 * self.h.abs() <= f64::EPSILON * self.t.abs() || self.h <= 0.0 {
                return Err(self.t);
            }
            let mut h = self.h;
            let last = self.t + 1.01 * h - self.t_end > 0.0;
            if last {
                h = self.t_end - self.t;
            }
            for s in 2..=12 {
                self.stage_argument(s, h);
                self.eval_at_stage_argument(dynamics, s);
            }
            // y_new goes to y_stage.
            let err = self.new_state_and_error(h);
            let mut h_new = 0.0;
            if err.is_finite() && self.controller.accept(err, h, &mut h_new) {
                std::mem::swap(&mut self.y_old, &mut self.y);
                std::mem::swap(&mut self.y, &mut self.y_stage);
                let drift = dynamics.project(&mut self.y);
                self.step_drift_max = self.step_drift_max.max(drift);
                self.eval_at_state(dynamics, 13);
                self.t_old = self.t;
                self.h_old = h;
                self.t = if last { self.t_end } else { self.t + h };
                self.h = h_new;
                self.fsal_pending = true;
                self.dense_ready = false;
                self.stepped = true;
                self.accepted += 1;
                return Ok(());
            }
            if self.accepted >= 1 {
                self.rejected += 1;
            }
            // A non-finite error estimate rejects the step and shrinks it by fac_min.
            self.h = if err.is_finite() { h_new } else { h * FAC_MIN };
        }
    }

    /// y_stage = y + h sum_{j<s} a_sj k_j.
    fn stage_argument(&mut self, s: usize, h: f64) {
        let terms = StageTerms::new(&self.tab, s, h);
        combine(&mut self.y_stage, &self.y, &terms, &self.k);
    }

    /// Writes y_new = y + h sum_j b_j k_j into `y_stage` and returns the scaled error.
    fn new_state_and_error(&mut self, h: f64) -> f64 {
        let tab = &self.tab;
        let (rtol, atol) = (self.rtol, self.atol);
        let k = &self.k;
        let y = &self.y;
        let m = y.len();
        let blocks = |(block, (out, sums)): (usize, (&mut [f64], &mut [f64]))| {
            vectorized(
                #[inline(always)]
                || {
                    let start = block * BLOCK;
                    let mut e5 = [0.0; LANES];
                    let mut e3 = [0.0; LANES];
                    for (piece, out) in out.chunks_mut(PIECE).enumerate() {
                        let from = start + piece * PIECE;
                        let range = from..from + out.len();
                        let len = out.len();
                        // sum_j b_j k_j and sum_j e_j k_j, stage by stage.
                        let mut increment = [0.0; PIECE];
                        let mut estimate = [0.0; PIECE];
                        for s in MAIN_STAGES {
                            let (b, e) = (tab.b[s], tab.e[s]);
                            let stage = &k[slot(s)][range.clone()];
                            let pairs = increment[..len].iter_mut().zip(&mut estimate[..len]);
                            for ((inc, est), &v) in pairs.zip(stage) {
                                *inc += v * b;
                                *est += v * e;
                            }
                        }
                        let k1 = &k[slot(1)][range.clone()];
                        let k9 = &k[slot(9)][range.clone()];
                        let k12 = &k[slot(12)][range.clone()];
                        let y = &y[range];
                        // The squared scaled errors replace the sums they come from.
                        for i in 0..len {
                            let y_new = y[i] + increment[i] * h;
                            out[i] = y_new;
                            let sc = atol + y[i].abs().max(y_new.abs()) * rtol;
                            let bhh = increment[i]
                                - k1[i] * tab.bhh[1]
                                - k9[i] * tab.bhh[2]
                                - k12[i] * tab.bhh[3];
                            estimate[i] = (estimate[i] / sc) * (estimate[i] / sc);
                            increment[i] = (bhh / sc) * (bhh / sc);
                        }
                        add_in_lanes(&mut e5, &estimate[..len]);
                        add_in_lanes(&mut e3, &increment[..len]);
                    }
                    sums[0] = e5.iter().sum();
                    sums[1] = e3.iter().sum();
                },
            )
        };
        let partials = &mut self.partials[..2 * m.div_ceil(BLOCK).max(1)];
        if m >= PARALLEL_MIN {
            self.y_stage
                .par_chunks_mut(BLOCK)
                .zip(partials.par_chunks_mut(2))
                .enumerate()
                .for_each(blocks);
        } else {
            self.y_stage
                .chunks_mut(BLOCK)
                .zip(partials.chunks_mut(2))
                .enumerate()
                .for_each(blocks);
        }
        let (mut e5, mut e3) = (0.0, 0.0);
        for sums in partials.chunks(2) {
            e5 += sums[0];
            e3 += sums[1];
        }
        let mut denominator = e5 + 0.01 * e3;
        if denominator <= 0.0 {
            denominator = 1.0;
        }
        h.abs() * e5 * (1.0 / (denominator * m as f64)).sqrt()
    }

    /// Writes the state at time `t` (within the last accepted step) into `out`.
    pub(crate) fn interpolate(&mut self, dynamics: &dyn Dynamics, t: f64, out: &mut [f64]) {
        if t >= self.t || !self.stepped {
            out.copy_from_slice(&self.y);
            return;
        }
        if !self.dense_ready {
            self.dense_stages(dynamics);
        }
        let h = self.h_old;
        let theta = (t - self.t_old) / h;
        let dense = DenseStep {
            k: &self.k,
            rows: &self.dense_rows,
            y_old: &self.y_old,
            y_new: &self.y,
            h,
            theta,
        };
        let fill = |(block, out): (usize, &mut [f64])| {
            vectorized(
                #[inline(always)]
                || dense.fill(block * BLOCK, out),
            )
        };
        if out.len() >= PARALLEL_MIN {
            out.par_chunks_mut(BLOCK).enumerate().for_each(fill);
        } else {
            out.chunks_mut(BLOCK).enumerate().for_each(fill);
        }
    }

    /// k_14..k_16 of the last accepted step (from y_old).
    fn dense_stages(&mut self, dynamics: &dyn Dynamics) {
        let h = self.h_old;
        for s in 14..=16 {
            let terms = StageTerms::new(&self.tab, s, h);
            combine(&mut self.y_stage, &self.y_old, &terms, &self.k);
            self.eval_at_stage_argument(dynamics, s);
        }
        self.form_dense_rows();
        self.dense_ready = true;
    }

    /// dense_rows = (sum_j d_rj k_j for r = 5..8), from zero, stage after stage in
    /// [`DENSE_STAGES`] order, block by block.
    fn form_dense_rows(&mut self) {
        let m = self.y.len();
        for row in &mut self.dense_rows {
            row.resize(m, 0.0);
        }
        let (tab, k) = (&self.tab, &self.k);
        let form = |(block, ((r5, r6), (r7, r8))): (usize, RowBlocks)| {
            vectorized(
                #[inline(always)]
                || {
                    for (r, out) in [r5, r6, r7, r8].into_iter().enumerate() {
                        let range = block * BLOCK..block * BLOCK + out.len();
                        out.fill(0.0);
                        for s in DENSE_STAGES {
                            let coefficient = tab.d[r + 4][s];
                            for (o, &v) in out.iter_mut().zip(&k[slot(s)][range.clone()]) {
                                *o += v * coefficient;
                            }
                        }
                    }
                },
            )
        };
        let [r5, r6, r7, r8] = &mut self.dense_rows;
        if m >= PARALLEL_MIN {
            (r5.par_chunks_mut(BLOCK).zip(r6.par_chunks_mut(BLOCK)))
                .zip(r7.par_chunks_mut(BLOCK).zip(r8.par_chunks_mut(BLOCK)))
                .enumerate()
                .for_each(form);
        } else {
            (r5.chunks_mut(BLOCK).zip(r6.chunks_mut(BLOCK)))
                .zip(r7.chunks_mut(BLOCK).zip(r8.chunks_mut(BLOCK)))
                .enumerate()
                .for_each(form);
        }
    }
}

/// One block of each of the four dense-output rows.
type RowBlocks<'a> = (
    (&'a mut [f64], &'a mut [f64]),
    (&'a mut [f64], &'a mut [f64]),
);

/// The non-zero terms h a_sj k_j of stage s: coefficients and slots.
struct StageTerms {
    coefficients: [f64; 16],
    slots: [usize; 16],
    len: usize,
}

impl StageTerms {
    fn new(tab: &Tableau, s: usize, h: f64) -> Self {
        let mut terms = StageTerms {
            coefficients: [0.0; 16],
            slots: [0; 16],
            len: 0,
        };
        for j in 1..s {
            let a = tab.a[s][j];
            if a != 0.0 {
                terms.coefficients[terms.len] = h * a;
                terms.slots[terms.len] = slot(j);
                terms.len += 1;
            }
        }
        terms
    }
}

/// The continuous extension of the last accepted step at one theta.
struct DenseStep<'a> {
    k: &'a [Vec<f64>],
    rows: &'a [Vec<f64>; 4],
    y_old: &'a [f64],
    y_new: &'a [f64],
    h: f64,
    theta: f64,
}

impl DenseStep<'_> {
    /// Writes components start.. of y(t_old + theta h) into `out`.
    #[inline(always)]
    fn fill(&self, start: usize, out: &mut [f64]) {
        let [r5, r6, r7, r8] = self.rows;
        for (offset, o) in out.iter_mut().enumerate() {
            let i = start + offset;
            *o = self.formula(i, [r5[i], r6[i], r7[i], r8[i]]);
        }
    }

    /// y_i(theta) from the sums sum_j d_rj k_j of rows r5..r8.
    #[inline(always)]
    fn formula(&self, i: usize, rows: [f64; 4]) -> f64 {
        let (h, theta) = (self.h, self.theta);
        let theta1 = 1.0 - theta;
        let r1 = self.y_old[i];
        let r2 = self.y_new[i] - r1;
        let r3 = h * self.k[slot(1)][i] - r2;
        let r4 = r2 - h * self.k[slot(13)][i] - r3;
        let [r5, r6, r7, r8] = rows.map(|r| h * r);
        let inner = r5 + theta * (r6 + theta1 * (r7 + theta * r8));
        r1 + theta * (r2 + theta1 * (r3 + theta * (r4 + theta1 * inner)))
    }
}

/// out = base + sum_t h a_t k_t, term by term in order, block by block.
fn combine(out: &mut [f64], base: &[f64], terms: &StageTerms, k: &[Vec<f64>]) {
    let coefficients = &terms.coefficients[..terms.len];
    let slots = &terms.slots[..terms.len];
    let fill = |(block, out): (usize, &mut [f64])| {
        vectorized(
            #[inline(always)]
            || {
                // Piece by piece, so that the piece being summed stays in L1.
                for (piece, out) in out.chunks_mut(PIECE).enumerate() {
                    let start = block * BLOCK + piece * PIECE;
                    let range = start..start + out.len();
                    out.copy_from_slice(&base[range.clone()]);
                    for (&c, &s) in coefficients.iter().zip(slots) {
                        for (o, &v) in out.iter_mut().zip(&k[s][range.clone()]) {
                            *o += v * c;
                        }
                    }
                }
            },
        )
    };
    if out.len() >= PARALLEL_MIN {
        out.par_chunks_mut(BLOCK).enumerate().for_each(fill);
    } else {
        out.chunks_mut(BLOCK).enumerate().for_each(fill);
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use ode_solvers::{DVector, OutputType, System};

    use super::*;
    use crate::observe::OrderParameters;

    /// Three coupled oscillators with a cubic term (no manifold, nothing to project).
    struct Nonlinear;

    fn nonlinear_rhs(y: &[f64], dy: &mut [f64]) {
        dy[0] = y[1];
        dy[1] = -y[0] - 0.3 * y[0] * y[0] * y[0] + 0.1 * (y[2] - y[0]);
        dy[2] = y[3];
        dy[3] = -2.0 * y[2] + 0.1 * (y[0] - y[2]) - 0.05 * y[3];
        dy[4] = -0.5 * y[4] + y[0] * y[2];
    }

    impl Dynamics for Nonlinear {
        fn dimension(&self) -> usize {
            5
        }
        fn rhs(&self, y: &[f64], dy: &mut [f64]) {
            nonlinear_rhs(y, dy)
        }
        fn order_parameters(&self, _y: &[f64]) -> OrderParameters {
            OrderParameters::from_r2(num_complex::Complex64::new(0.0, 0.0))
        }
        fn tokens<'a>(&self, _y: &'a [f64]) -> Option<Cow<'a, [f64]>> {
            None
        }
    }

    impl System<f64, DVector<f64>> for Nonlinear {
        fn system(&self, _t: f64, y: &DVector<f64>, dy: &mut DVector<f64>) {
            nonlinear_rhs(y.as_slice(), dy.as_mut_slice())
        }
    }

    const Y0: [f64; 5] = [1.0, 0.0, 0.5, 0.2, 0.1];

    #[test]
    fn tableau_meets_the_order_conditions() {
        let tab = Tableau::new();
        // Nodes from the row sums (c_i = sum_j a_ij), then the quadrature conditions of order 8:
        // sum_i b_i c_i^(q-1) = 1/q.
        let mut c = [0.0; 17];
        for (i, ci) in c.iter_mut().enumerate().take(13).skip(2) {
            *ci = tab.a[i][1..i].iter().sum();
        }
        for q in 1..=8 {
            let sum: f64 = (1..=12).map(|i| tab.b[i] * c[i].powi(q - 1)).sum();
            assert!((sum - 1.0 / f64::from(q)).abs() < 1e-14, "order {q}: {sum}");
        }
        // The error weights annihilate constants (both estimates vanish for y' = 1).
        assert!((1..=12).map(|i| tab.e[i]).sum::<f64>().abs() < 1e-14);
        // The storage plan (see `slot`) needs stages 2..5 unused after the main stages.
        for s in [2, 3, 4, 5] {
            assert_eq!(tab.b[s], 0.0);
            assert_eq!(tab.e[s], 0.0);
            for row in 4..=7 {
                assert_eq!(tab.d[row][s], 0.0);
            }
            for late in 14..=16 {
                assert_eq!(tab.a[late][s], 0.0);
            }
        }
    }

    #[test]
    fn matches_ode_solvers_dop853_step_for_step() {
        let (t_end, rtol, atol) = (30.0, 1e-10, 1e-12);
        let mut ours = Dop853::new(&Nonlinear, &Y0, t_end, rtol, atol);
        let mut times = vec![0.0];
        while ours.t() < t_end {
            ours.step(&Nonlinear).unwrap();
            times.push(ours.t());
        }
        let mut reference = ode_solvers::Dop853::from_param(
            Nonlinear,
            0.0,
            t_end,
            t_end,
            DVector::from_column_slice(&Y0),
            rtol,
            atol,
            SAFETY,
            0.0,
            FAC_MIN,
            FAC_MAX,
            t_end,
            0.0,
            1_000_000,
            u32::MAX,
            OutputType::Sparse,
        );
        let stats = reference.integrate().unwrap();
        let xs = reference.x_out();
        assert_eq!(ours.accepted, u64::from(stats.accepted_steps));
        assert_eq!(ours.rejected, u64::from(stats.rejected_steps));
        assert_eq!(times.len(), xs.len());
        for (a, b) in times.iter().zip(xs) {
            assert!((a - b).abs() < 1e-12 * t_end, "{a} vs {b}");
        }
        let last = reference.y_out().last().unwrap();
        for (a, b) in ours.y().iter().zip(last.iter()) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
    }

    #[test]
    fn dense_output_is_of_high_order() {
        // y' = i y (a rotation): the exact state is known at every time.
        struct Rotation;
        impl Dynamics for Rotation {
            fn dimension(&self) -> usize {
                2
            }
            fn rhs(&self, y: &[f64], dy: &mut [f64]) {
                dy[0] = -y[1];
                dy[1] = y[0];
            }
            fn order_parameters(&self, _y: &[f64]) -> OrderParameters {
                OrderParameters::from_r2(num_complex::Complex64::new(0.0, 0.0))
            }
            fn tokens<'a>(&self, _y: &'a [f64]) -> Option<Cow<'a, [f64]>> {
                None
            }
        }
        let worst = |rtol: f64| {
            let mut s = Dop853::new(&Rotation, &[1.0, 0.0], 20.0, rtol, rtol * 1e-2);
            let mut out = [0.0; 2];
            let mut worst: f64 = 0.0;
            for i in 1..=400 {
                let t = 0.05 * f64::from(i);
                while s.t() < t {
                    s.step(&Rotation).unwrap();
                }
                s.interpolate(&Rotation, t, &mut out);
                worst = worst.max((out[0] - t.cos()).abs().max((out[1] - t.sin()).abs()));
            }
            (worst, s.h_old)
        };
        let (loose, h_loose) = worst(1e-6);
        let (tight, _) = worst(1e-10);
        // Errors follow the tolerance, and the interpolant is as good as the steps (not
        // merely the linear interpolation error h^2 / 8 between them).
        assert!(loose < 1e-5 && tight < 1e-9, "{loose} {tight}");
        assert!(loose < 1e-2 * h_loose * h_loose, "{loose} vs h = {h_loose}");
    }
}
