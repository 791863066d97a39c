//! Advancing a state over one output interval with `ode_solvers`.
//!
//! Adaptive methods run with sparse output (no dense-output evaluations) and at most
//! `max_steps` steps per solver object, so the solver's list of accepted states stays bounded;
//! when it is full (at most every 8 steps) the state is projected onto the manifold and the run
//! restarts from there with the last step size. RK4 splits an
//! interval of length L into m = ceil(L / dt) equal steps, so that it lands on the sample time.

use std::cell::Cell;

use ode_solvers::dop_shared::IntegrationError;
use ode_solvers::{DVector, Dop853, Dopri5, OutputType, Rk4, System};

use super::{Dynamics, Method, Status};

/// Bytes of solver output (accepted states) allowed per solver object.
const OUTPUT_BUDGET_BYTES: usize = 64 << 20;
/// Most steps between two projections onto the manifold.
const MAX_STEPS_BETWEEN_PROJECTIONS: usize = 8;
/// Restarts without progress before the step size counts as underflowed.
const MAX_STALLS: u32 = 20;

/// Field-evaluation and step counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    pub rhs_evals: u64,
    pub accepted: u64,
    pub rejected: u64,
}

/// `ode_solvers` wants an owned system; this borrows the dynamics and counts evaluations
/// (the solver's own statistics are lost when it stops with an error).
struct Rhs<'a> {
    dynamics: &'a dyn Dynamics,
    evals: &'a Cell<u64>,
}

impl System<f64, DVector<f64>> for Rhs<'_> {
    fn system(&self, _t: f64, y: &DVector<f64>, dy: &mut DVector<f64>) {
        self.evals.set(self.evals.get() + 1);
        self.dynamics.rhs(y.as_slice(), dy.as_mut_slice());
    }
}

pub struct Stepper<'a> {
    dynamics: &'a dyn Dynamics,
    method: Method,
    /// Step size handed from one interval to the next (0: let the solver choose).
    h: f64,
    max_steps: u32,
    counts: Counts,
    evals: Cell<u64>,
    step_drift_max: f64,
}

impl<'a> Stepper<'a> {
    pub fn new(dynamics: &'a dyn Dynamics, method: Method) -> Self {
        let state_bytes = dynamics.dimension().max(1) * 8;
        let max_steps =
            (OUTPUT_BUDGET_BYTES / state_bytes).clamp(2, MAX_STEPS_BETWEEN_PROJECTIONS) as u32;
        Stepper {
            dynamics,
            method,
            h: 0.0,
            max_steps,
            counts: Counts::default(),
            evals: Cell::new(0),
            step_drift_max: 0.0,
        }
    }

    pub fn counts(&self) -> Counts {
        Counts {
            rhs_evals: self.evals.get(),
            ..self.counts
        }
    }

    fn rhs(&self) -> Rhs<'_> {
        Rhs {
            dynamics: self.dynamics,
            evals: &self.evals,
        }
    }

    /// Advances `y` from `t0` to `t1`.
    pub fn advance(&mut self, y: &mut [f64], t0: f64, t1: f64) -> Result<(), Status> {
        match self.method {
            Method::Dop853 { rtol, atol } => self.adaptive(y, t0, t1, rtol, atol, true),
            Method::Dopri5 { rtol, atol } => self.adaptive(y, t0, t1, rtol, atol, false),
            Method::Rk4 { dt } => {
                self.rk4(y, t1 - t0, dt);
                Ok(())
            }
        }
    }

    fn adaptive(
        &mut self,
        y: &mut [f64],
        t0: f64,
        t1: f64,
        rtol: f64,
        atol: f64,
        eighth_order: bool,
    ) -> Result<(), Status> {
        let mut t = t0;
        let mut stalls = 0;
        loop {
            let start = DVector::from_column_slice(y);
            let (result, xs, last) = if eighth_order {
                let mut solver = Dop853::from_param(
                    self.rhs(),
                    t,
                    t1,
                    t1 - t,
                    start,
                    rtol,
                    atol,
                    0.9,
                    0.0,
                    0.333,
                    6.0,
                    t1 - t,
                    self.h,
                    self.max_steps,
                    u32::MAX,
                    OutputType::Sparse,
                );
                let result = solver.integrate();
                let xs = solver.x_out().clone();
                let last = solver.y_out().last().cloned();
                (result, xs, last)
            } else {
                let mut solver = Dopri5::from_param(
                    self.rhs(),
                    t,
                    t1,
                    t1 - t,
                    start,
                    rtol,
                    atol,
                    0.9,
                    0.04,
                    0.2,
                    10.0,
                    t1 - t,
                    self.h,
                    self.max_steps,
                    u32::MAX,
                    OutputType::Sparse,
                );
                let result = solver.integrate();
                let xs = solver.x_out().clone();
                let last = solver.y_out().last().cloned();
                (result, xs, last)
            };
            // Sparse output holds the start and every accepted step.
            let accepted = xs.len().saturating_sub(1) as u64;
            self.counts.accepted += accepted;
            self.counts.rejected += match &result {
                Ok(stats) => u64::from(stats.rejected_steps),
                Err(IntegrationError::MaxNumStepReached { n_step, .. }) => {
                    u64::from(*n_step).saturating_sub(accepted)
                }
                Err(_) => 0,
            };
            let t_new = xs.last().copied().unwrap_or(t);
            if let Some(last) = last {
                y.copy_from_slice(last.as_slice());
            }
            if xs.len() >= 2 {
                let n = xs.len();
                let last_step = xs[n - 1] - xs[n - 2];
                let before = if n >= 3 { xs[n - 2] - xs[n - 3] } else { 0.0 };
                self.h = last_step.max(before);
            }
            match result {
                Ok(_) => return Ok(()),
                Err(IntegrationError::MaxNumStepReached { .. }) if t_new > t => {
                    t = t_new;
                    stalls = 0;
                    self.projected(y);
                }
                Err(IntegrationError::MaxNumStepReached { .. }) => {
                    stalls += 1;
                    self.h = if self.h > 0.0 { self.h * 1e-3 } else { 0.0 };
                    if stalls >= MAX_STALLS || !self.field_is_finite(y) {
                        return Err(self.failure(y, t));
                    }
                }
                Err(IntegrationError::StepSizeUnderflow { x })
                | Err(IntegrationError::StiffnessDetected { x }) => {
                    return Err(self.failure(y, x));
                }
            }
        }
    }

    /// Projects `y` onto the manifold, keeping the largest drift seen.
    pub fn projected(&mut self, y: &mut [f64]) {
        let drift = self.dynamics.project(y);
        self.step_drift_max = self.step_drift_max.max(drift);
    }

    /// Largest distance from the manifold found before a projection.
    pub fn step_drift_max(&self) -> f64 {
        self.step_drift_max
    }

    /// A step that cannot be taken: overflow if the field is not finite, else underflow.
    fn failure(&mut self, y: &[f64], t: f64) -> Status {
        if self.field_is_finite(y) {
            Status::StepSizeUnderflow { t }
        } else {
            Status::NonFinite { t }
        }
    }

    fn field_is_finite(&mut self, y: &[f64]) -> bool {
        let mut dy = vec![0.0; y.len()];
        self.dynamics.rhs(y, &mut dy);
        self.evals.set(self.evals.get() + 1);
        y.iter().chain(&dy).all(|v| v.is_finite())
    }

    fn rk4(&mut self, y: &mut [f64], length: f64, dt: f64) {
        let steps = ((length / dt) - 1e-9).ceil().max(1.0) as u64;
        let h = length / steps as f64;
        let mut remaining = steps;
        while remaining > 0 {
            let chunk = remaining.min(u64::from(self.max_steps));
            // x_end = (chunk - 1/2) h makes Rk4 take exactly `chunk` full steps of h.
            let mut solver = Rk4::new(
                self.rhs(),
                0.0,
                DVector::from_column_slice(y),
                (chunk as f64 - 0.5) * h,
                h,
            );
            let accepted = solver.integrate().map_or(0, |s| s.accepted_steps);
            if let Some(last) = solver.y_out().last() {
                y.copy_from_slice(last.as_slice());
            }
            drop(solver);
            self.counts.accepted += u64::from(accepted);
            remaining -= chunk;
            if remaining > 0 {
                self.projected(y);
            }
        }
    }
}
