//! A run's state at any time, from the integrator's continuous extension (docs/MATH.md §11).
//!
//! ```text
//! y(t) for increasing t:  the stepper steps freely and t is read off its dense output
//!                         (dop853) or reached by a restart (dopri5, rk4), then projected
//!                         onto the manifold, as at an output sample
//! ```
//!
//! [`solve`](super::solve) reads the state only at the output grid; a [`Flow`] lets a caller
//! look at other times too (the staircase's checks for tight clusters and merges), so what it
//! finds does not depend on the output sampling. The caller hands samples to the observers
//! with [`Flow::hand_out`], exactly as `solve` does.

use std::io;

use super::piecewise::SegmentedStepper;
use super::{hand_out_sample, Dynamics, Method, Solution, Status};
use crate::observe::{Observer, OrderParameters};

/// The state of one run, advanced to increasing times.
pub struct Flow<'a> {
    dynamics: &'a dyn Dynamics,
    stepper: SegmentedStepper<'a>,
    y: Vec<f64>,
    t: f64,
    drift_max: f64,
    /// Time spent on order parameters and observers (see [`Solution::observing`]).
    observing: std::cell::Cell<std::time::Duration>,
}

impl<'a> Flow<'a> {
    /// A run of `dynamics` from `y0` at t = 0 that ends at `horizon` at the latest.
    pub fn new(dynamics: &'a dyn Dynamics, method: Method, y0: &[f64], horizon: f64) -> Self {
        let mut y = y0.to_vec();
        dynamics.project(&mut y);
        Flow {
            dynamics,
            stepper: SegmentedStepper::new(dynamics, method, y0, horizon),
            y,
            t: 0.0,
            drift_max: 0.0,
            observing: Default::default(),
        }
    }

    /// The time reached.
    pub fn t(&self) -> f64 {
        self.t
    }

    /// The state at [`Flow::t`] (on the manifold).
    pub fn state(&self) -> &[f64] {
        &self.y
    }

    /// Advances to `t` (not before [`Flow::t`]); the failure when the state stops being finite
    /// or the steps underflow.
    pub fn advance_to(&mut self, t: f64) -> Result<(), Status> {
        if t > self.t {
            self.stepper.advance_to(t, &mut self.y)?;
            if self.y.iter().any(|v| !v.is_finite()) {
                return Err(Status::NonFinite { t });
            }
            self.t = t;
        }
        // Pull the state onto the manifold (the dense output is off it by the interpolation
        // error), then measure how far it is as observed.
        self.dynamics.project(&mut self.y);
        self.drift_max = self.drift_max.max(self.dynamics.project(&mut self.y));
        Ok(())
    }

    /// The order parameters of the state reached, or the failure when they are not finite.
    pub fn order(&self) -> Result<OrderParameters, Status> {
        let observed = std::time::Instant::now();
        let order = self.dynamics.order_parameters(&self.y);
        self.observing
            .set(self.observing.get() + observed.elapsed());
        let finite =
            order.r2.re.is_finite() && order.r2.im.is_finite() && order.nematic.is_finite();
        if finite {
            Ok(order)
        } else {
            Err(Status::NonFinite { t: self.t })
        }
    }

    /// Hands the state reached to the observers as sample `index` at time `t` (the run's own
    /// time, which may be offset from the flow's).
    pub fn hand_out(
        &self,
        observers: &mut [&mut dyn Observer],
        index: usize,
        t: f64,
        order: &OrderParameters,
    ) -> io::Result<()> {
        let observed = std::time::Instant::now();
        let handed = hand_out_sample(self.dynamics, observers, index, t, &self.y, order);
        self.observing
            .set(self.observing.get() + observed.elapsed());
        handed
    }

    /// The solution of this flow: `status`, `samples` handed out, the last at `t_last`.
    pub fn into_solution(self, status: Status, samples: usize, t_last: f64) -> Solution {
        let counts = self.stepper.counts();
        Solution {
            status,
            samples,
            t_last,
            rhs_evals: counts.rhs_evals,
            accepted_steps: counts.accepted,
            rejected_steps: counts.rejected,
            norm_drift_max: self.drift_max,
            step_drift_max: self.stepper.step_drift_max(),
            final_state: self.y,
            boundaries: Vec::new(),
            wall: std::time::Duration::ZERO,
            observing: self.observing.get(),
        }
    }
}
