//! Advancing a state from one output time to the next.
//!
//! `dop853` (the default) runs on [`super::dop853::Dop853`]: it steps freely, projects every
//! accepted step onto the manifold and writes output times from its dense output, so output
//! times never shorten a step. `dopri5` and `rk4` run on `ode_solvers` one output interval at
//! a time: the adaptive method with sparse output and at most `max_steps` steps per solver
//! object, so the solver's list of accepted states stays bounded; when it is full (at most
//! every 8 steps) the state is projected onto the manifold and the run restarts from there with
//! the last step size. RK4 splits an interval of length L into m = ceil(L / dt) equal steps, so
//! that it lands on the output time.

use std::cell::Cell;

use ode_solvers::dop_shared::IntegrationError;
use ode_solvers::{DVector, Dopri5, OutputType, Rk4, System};

use super::dop853::Dop853;
use super::stochastic::StochasticStepper;
use super::{Counts, Dynamics, Method, Status};

/// Bytes of solver output (accepted states) allowed per solver object.
const OUTPUT_BUDGET_BYTES: usize = 64 << 20;
/// Most steps between two projections onto the manifold.
const MAX_STEPS_BETWEEN_PROJECTIONS: usize = 8;
/// Restarts without progress before the step size counts as underflowed.
const MAX_STALLS: u32 = 20;

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

/// The state of a run between output times, whatever the method.
pub enum Stepper<'a> {
    /// `dop853`: in-place steps and dense output.
    Dense {
        dynamics: &'a dyn Dynamics,
        solver: Box<Dop853>,
    },
    /// `dopri5`, `rk4`: `ode_solvers`, restarted at each output time.
    Restarting(Restarting<'a>),
    /// Noisy tokens: fixed stochastic Heun steps.
    Stochastic(StochasticStepper<'a>),
}

impl<'a> Stepper<'a> {
    /// Starts a run from `y0` (projected onto the manifold) that ends at `t_end`.
    pub fn new(dynamics: &'a dyn Dynamics, method: Method, y0: &[f64], t_end: f64) -> Self {
        Self::continuing(dynamics, method, y0, t_end, 0)
    }

    /// [`Stepper::new`] for a run that has taken `steps_before` steps already (a later layer:
    /// the noise's increments are keyed by the step number from the run's start).
    pub fn continuing(
        dynamics: &'a dyn Dynamics,
        method: Method,
        y0: &[f64],
        t_end: f64,
        steps_before: u64,
    ) -> Self {
        match method {
            Method::StochasticHeun(noise) => {
                Stepper::Stochastic(StochasticStepper::new(dynamics, noise, y0, steps_before))
            }
            Method::Dop853 { rtol, atol } => Stepper::Dense {
                dynamics,
                solver: Box::new(Dop853::new(dynamics, y0, t_end, rtol, atol)),
            },
            Method::Dopri5 { rtol, atol } => Stepper::Restarting(Restarting::new(
                dynamics,
                RestartMethod::Dopri5 { rtol, atol },
                y0,
            )),
            Method::Rk4 { dt } => {
                Stepper::Restarting(Restarting::new(dynamics, RestartMethod::Rk4 { dt }, y0))
            }
        }
    }

    /// Writes the state at time `t` (not before the last output time) into `out`.
    pub fn advance_to(&mut self, t: f64, out: &mut [f64]) -> Result<(), Status> {
        match self {
            Stepper::Dense { dynamics, solver } => {
                while solver.t() < t {
                    if crate::interrupt::is_requested() {
                        return Err(Status::Interrupted { t: solver.t() });
                    }
                    if let Err(t) = solver.step(*dynamics) {
                        return Err(failure_at(*dynamics, solver.y(), t));
                    }
                    crate::interrupt::set_clock(solver.t());
                }
                solver.interpolate(*dynamics, t, out);
                Ok(())
            }
            Stepper::Restarting(r) => r.advance_to(t, out),
            Stepper::Stochastic(s) => s.advance_to(t, out),
        }
    }

    /// Evaluation and step counts so far.
    pub fn counts(&self) -> Counts {
        match self {
            Stepper::Dense { solver, .. } => Counts {
                rhs_evals: solver.evals,
                accepted: solver.accepted,
                rejected: solver.rejected,
            },
            Stepper::Restarting(r) => r.counts(),
            Stepper::Stochastic(s) => s.counts(),
        }
    }

    /// Largest distance from the manifold found before a projection.
    pub fn step_drift_max(&self) -> f64 {
        match self {
            Stepper::Dense { solver, .. } => solver.step_drift_max,
            Stepper::Restarting(r) => r.step_drift_max,
            Stepper::Stochastic(s) => s.step_drift_max(),
        }
    }
}

/// A step that cannot be taken at time `t`: overflow if the state or its field is not
/// finite, else step-size underflow.
fn failure_at(dynamics: &dyn Dynamics, y: &[f64], t: f64) -> Status {
    if field_is_finite(dynamics, y) {
        Status::StepSizeUnderflow { t }
    } else {
        Status::NonFinite { t }
    }
}

/// Whether y and F(y) are finite (one evaluation of the field).
fn field_is_finite(dynamics: &dyn Dynamics, y: &[f64]) -> bool {
    let mut dy = vec![0.0; y.len()];
    dynamics.rhs(y, &mut dy);
    y.iter().chain(&dy).all(|v| v.is_finite())
}

/// The methods that run on `ode_solvers`.
#[derive(Debug, Clone, Copy)]
pub enum RestartMethod {
    Dopri5 { rtol: f64, atol: f64 },
    Rk4 { dt: f64 },
}

/// `ode_solvers` over one output interval at a time.
pub struct Restarting<'a> {
    dynamics: &'a dyn Dynamics,
    method: RestartMethod,
    /// State at `t`.
    y: Vec<f64>,
    t: f64,
    /// Step size handed from one interval to the next (0: let the solver choose).
    h: f64,
    max_steps: u32,
    counts: Counts,
    evals: Cell<u64>,
    step_drift_max: f64,
}

impl<'a> Restarting<'a> {
    fn new(dynamics: &'a dyn Dynamics, method: RestartMethod, y0: &[f64]) -> Self {
        let state_bytes = dynamics.dimension().max(1) * 8;
        let max_steps =
            (OUTPUT_BUDGET_BYTES / state_bytes).clamp(2, MAX_STEPS_BETWEEN_PROJECTIONS) as u32;
        let mut r = Restarting {
            dynamics,
            method,
            y: y0.to_vec(),
            t: 0.0,
            h: 0.0,
            max_steps,
            counts: Counts::default(),
            evals: Cell::new(0),
            step_drift_max: 0.0,
        };
        let mut y = std::mem::take(&mut r.y);
        r.projected(&mut y);
        r.y = y;
        r
    }

    /// Advances the state to `t` and writes it into `out`.
    fn advance_to(&mut self, t: f64, out: &mut [f64]) -> Result<(), Status> {
        let mut y = std::mem::take(&mut self.y);
        let result = self.advance(&mut y, self.t, t);
        if result.is_ok() {
            self.projected(&mut y);
            self.t = t;
        }
        out.copy_from_slice(&y);
        self.y = y;
        result
    }

    fn counts(&self) -> Counts {
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
    fn advance(&mut self, y: &mut [f64], t0: f64, t1: f64) -> Result<(), Status> {
        match self.method {
            RestartMethod::Dopri5 { rtol, atol } => self.adaptive(y, t0, t1, rtol, atol),
            RestartMethod::Rk4 { dt } => self.rk4(y, t0, t1 - t0, dt),
        }
    }

    fn adaptive(
        &mut self,
        y: &mut [f64],
        t0: f64,
        t1: f64,
        rtol: f64,
        atol: f64,
    ) -> Result<(), Status> {
        let mut t = t0;
        let mut stalls = 0;
        loop {
            crate::interrupt::set_clock(t);
            if crate::interrupt::is_requested() {
                return Err(Status::Interrupted { t });
            }
            let mut solver = Dopri5::from_param(
                self.rhs(),
                t,
                t1,
                t1 - t,
                DVector::from_column_slice(y),
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
            drop(solver);
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

    /// A step that cannot be taken: overflow if the field is not finite, else underflow.
    fn failure(&mut self, y: &[f64], t: f64) -> Status {
        self.evals.set(self.evals.get() + 1);
        failure_at(self.dynamics, y, t)
    }

    fn field_is_finite(&mut self, y: &[f64]) -> bool {
        self.evals.set(self.evals.get() + 1);
        field_is_finite(self.dynamics, y)
    }

    fn rk4(&mut self, y: &mut [f64], t0: f64, length: f64, dt: f64) -> Result<(), Status> {
        let steps = ((length / dt) - 1e-9).ceil().max(1.0) as u64;
        let h = length / steps as f64;
        let mut remaining = steps;
        while remaining > 0 {
            let t = t0 + (steps - remaining) as f64 * h;
            crate::interrupt::set_clock(t);
            if crate::interrupt::is_requested() {
                return Err(Status::Interrupted { t });
            }
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
        Ok(())
    }
}
