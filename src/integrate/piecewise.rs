//! Dynamics that change at given times: a stack of layers, each acting for its own duration.
//!
//! Layer i of a stack with durations tau_0, ..., tau_{L-1} acts on [s_i, s_i + tau_i), with
//! s_0 = 0 and s_{i+1} = s_i + tau_i; a looped stack repeats with period T = sum_i tau_i, so
//! pass p of layer i acts on [p T + s_i, p T + s_i + tau_i). The field is
//!
//! ```text
//! y' = F_i(y)   on layer i's interval,
//! ```
//!
//! piecewise autonomous. The integrator never steps across a boundary: [`SegmentedStepper`]
//! advances each layer's own stepper to the boundary exactly (the last step is shortened to
//! land there), projects the state, records the order parameters there, and starts a fresh
//! stepper with the next layer's field (a new first step, no dense output across the jump).
//! Output samples stay on the global grid.

use std::sync::Arc;

use super::stepper::Stepper;
use super::Counts;
use super::{Dynamics, Method, Status};
use crate::observe::OrderParameters;

/// A stack of layers: one dynamics per layer (the same state space), durations, and whether
/// the stack repeats.
pub struct Piecewise {
    /// One dynamics per layer; layers with the same matrices share one (an `Arc` each).
    layers: Vec<Arc<dyn Dynamics + Send + Sync>>,
    durations: Vec<f64>,
    looped: bool,
}

impl Piecewise {
    /// A stack; `layers` and `durations` have the same non-zero length, durations > 0, and
    /// every layer has the same state space (dimension, manifold, order parameters).
    pub fn new(
        layers: Vec<Box<dyn Dynamics + Send + Sync>>,
        durations: Vec<f64>,
        looped: bool,
    ) -> Self {
        Self::shared(
            layers.into_iter().map(Arc::from).collect(),
            durations,
            looped,
        )
    }

    /// A stack whose layers may share their dynamics (the same `Arc` given for several).
    pub fn shared(
        layers: Vec<Arc<dyn Dynamics + Send + Sync>>,
        durations: Vec<f64>,
        looped: bool,
    ) -> Self {
        debug_assert!(!layers.is_empty() && layers.len() == durations.len());
        Piecewise {
            layers,
            durations,
            looped,
        }
    }

    /// How many distinct dynamics the layers hold.
    pub fn distinct_layers(&self) -> usize {
        let mut seen: Vec<*const ()> = self
            .layers
            .iter()
            .map(|l| Arc::as_ptr(l) as *const ())
            .collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    }

    /// Number of layers in one pass.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether the stack has no layer (never, by construction).
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// Whether the stack repeats for ever.
    pub fn looped(&self) -> bool {
        self.looped
    }

    /// Time of one pass through the stack.
    pub fn period(&self) -> f64 {
        self.durations.iter().sum()
    }

    /// How long layer `i` acts in each pass.
    pub fn duration(&self, i: usize) -> f64 {
        self.durations[i]
    }

    /// The dynamics of layer `i`.
    pub fn layer(&self, i: usize) -> &dyn Dynamics {
        self.layers[i].as_ref()
    }

    /// Segment `k` (k = p L + i: pass p, layer i): its layer, start and end. `None` past the
    /// end of a stack that does not loop.
    fn segment(&self, k: usize, start: f64) -> Option<(usize, f64, f64)> {
        let l = self.layers.len();
        if k >= l && !self.looped {
            return None;
        }
        let i = k % l;
        Some((i, start, start + self.durations[i]))
    }
}

/// Delegates to layer 0 for everything that does not depend on the layer (dimension,
/// projection, order parameters, tokens). `rhs` is layer 0's field: only `SegmentedStepper`
/// (used by [`super::solve`]) switches layers.
impl Dynamics for Piecewise {
    fn dimension(&self) -> usize {
        self.layers[0].dimension()
    }
    fn rhs(&self, y: &[f64], dy: &mut [f64]) {
        self.layers[0].rhs(y, dy)
    }
    fn project(&self, y: &mut [f64]) -> f64 {
        self.layers[0].project(y)
    }
    fn order_parameters(&self, y: &[f64]) -> OrderParameters {
        self.layers[0].order_parameters(y)
    }
    fn tokens<'a>(&self, y: &'a [f64]) -> Option<std::borrow::Cow<'a, [f64]>> {
        self.layers[0].tokens(y)
    }
    fn token_pieces(
        &self,
        y: &[f64],
        f: &mut dyn FnMut(usize, &[f64]) -> std::io::Result<()>,
    ) -> Option<std::io::Result<()>> {
        self.layers[0].token_pieces(y, f)
    }
    fn token_source<'a>(
        &'a self,
        y: &'a [f64],
    ) -> Option<Box<dyn crate::observe::TokenSource + 'a>> {
        self.layers[0].token_source(y)
    }
    fn piecewise(&self) -> Option<&Piecewise> {
        Some(self)
    }
}

/// The order parameters at a layer boundary (or at t = 0).
#[derive(Debug, Clone, PartialEq)]
pub struct Boundary {
    /// Time of the boundary.
    pub t: f64,
    /// Completed passes through the stack (0 at t = 0).
    pub pass: usize,
    /// Layers completed in the current pass (0 at the start of a pass; at the end of pass p
    /// the row has pass = p + 1, layer = 0).
    pub layer: usize,
    /// The order parameters there.
    pub order: OrderParameters,
}

/// A stepper over a [`Piecewise`] stack (or a single autonomous field).
pub struct SegmentedStepper<'a> {
    stack: Option<&'a Piecewise>,
    method: Method,
    current: Stepper<'a>,
    /// Segment time the current stepper was last advanced to, and the state there (stacks
    /// only): a sample on a boundary is not integrated twice.
    reached: f64,
    reached_y: Vec<f64>,
    /// Whether the end of the current segment is in `boundaries` already.
    end_recorded: bool,
    /// Segment index k (pass k / L, layer k % L), its start and end.
    k: usize,
    start: f64,
    end: f64,
    /// Counts and drift of the finished segments.
    done: Counts,
    drift: f64,
    /// Order parameters at t = 0 and at every boundary crossed so far.
    pub boundaries: Vec<Boundary>,
    scratch: Vec<f64>,
}

impl<'a> SegmentedStepper<'a> {
    /// A stepper from `y0` at t = 0; layered when `dynamics` is a [`Piecewise`] stack.
    pub fn new(dynamics: &'a dyn Dynamics, method: Method, y0: &[f64], t_end: f64) -> Self {
        let stack = dynamics.piecewise();
        let (field, end, horizon) = match stack {
            Some(s) => (s.layer(0), s.durations[0], s.durations[0]),
            None => (dynamics, f64::INFINITY, t_end),
        };
        crate::interrupt::set_clock_offset(0.0);
        let current = Stepper::new(field, method, y0, horizon);
        let mut boundaries = Vec::new();
        if let Some(s) = stack {
            let mut y = y0.to_vec();
            s.project(&mut y);
            boundaries.push(Boundary {
                t: 0.0,
                pass: 0,
                layer: 0,
                order: s.order_parameters(&y),
            });
        }
        SegmentedStepper {
            stack,
            method,
            current,
            reached: 0.0,
            reached_y: Vec::new(),
            end_recorded: false,
            k: 0,
            start: 0.0,
            end,
            done: Counts::default(),
            drift: 0.0,
            boundaries,
            scratch: Vec::new(),
        }
    }

    /// Writes the state at time `t` (not before the last output time) into `out`, crossing
    /// every layer boundary on the way exactly.
    pub fn advance_to(&mut self, t: f64, out: &mut [f64]) -> Result<(), Status> {
        while let Some(stack) = self.stack.filter(|_| t > self.end) {
            self.scratch.resize(out.len(), 0.0);
            let mut y = std::mem::take(&mut self.scratch);
            let local_end = self.end - self.start;
            if self.reached == local_end && self.reached_y.len() == y.len() {
                y.copy_from_slice(&self.reached_y);
            } else if let Err(status) = self.current.advance_to(local_end, &mut y) {
                out.copy_from_slice(&y);
                self.scratch = y;
                return Err(shifted(status, self.start));
            }
            stack.project(&mut y);
            self.record_end(stack, &y);
            self.k += 1;
            self.end_recorded = false;
            // Past the end of a stack that does not loop (validation forbids it), the last
            // layer goes on acting rather than the run failing.
            let (i, start, end) = stack.segment(self.k, self.end).unwrap_or((
                stack.len() - 1,
                self.end,
                f64::INFINITY,
            ));
            let horizon = if end.is_finite() { end - start } else { 1e300 };
            crate::interrupt::set_clock_offset(start);
            let steps_before = self.counts().accepted;
            let finished =
                Stepper::continuing(stack.layer(i), self.method, &y, horizon, steps_before);
            let old = std::mem::replace(&mut self.current, finished);
            self.add_done(&old);
            self.start = start;
            self.end = end;
            self.reached = 0.0;
            self.scratch = y;
        }
        let local = t - self.start;
        self.current
            .advance_to(local, out)
            .map_err(|s| shifted(s, self.start))?;
        if let Some(stack) = self.stack {
            self.reached = local;
            self.reached_y.clear();
            self.reached_y.extend_from_slice(out);
            if local == self.end - self.start {
                let mut y = std::mem::take(&mut self.reached_y);
                stack.project(&mut y);
                self.record_end(stack, &y);
                self.reached_y = y;
            }
        }
        Ok(())
    }

    /// Records the order parameters at the end of the current segment (once).
    fn record_end(&mut self, stack: &Piecewise, y: &[f64]) {
        if self.end_recorded {
            return;
        }
        self.end_recorded = true;
        let l = stack.len();
        let layer = (self.k + 1) % l;
        let order = stack.order_parameters(y);
        self.boundaries.push(Boundary {
            t: self.end,
            pass: (self.k + 1) / l,
            layer,
            // The stroboscopic series (pass ends) needs the axis to tell a turning axis in
            // d > 2; the other boundaries drop it.
            order: if layer == 0 {
                order
            } else {
                without_axis(order)
            },
        });
    }

    fn add_done(&mut self, old: &Stepper<'_>) {
        let c = old.counts();
        self.done.rhs_evals += c.rhs_evals;
        self.done.accepted += c.accepted;
        self.done.rejected += c.rejected;
        self.drift = self.drift.max(old.step_drift_max());
    }

    /// Evaluation and step counts so far, over all segments.
    pub fn counts(&self) -> Counts {
        let c = self.current.counts();
        Counts {
            rhs_evals: self.done.rhs_evals + c.rhs_evals,
            accepted: self.done.accepted + c.accepted,
            rejected: self.done.rejected + c.rejected,
        }
    }

    /// Largest distance from the manifold found before a projection, over all segments.
    pub fn step_drift_max(&self) -> f64 {
        self.drift.max(self.current.step_drift_max())
    }
}

/// The order parameters a boundary inside a pass keeps: the cluster axis (d numbers) is
/// dropped (`layers.csv` does not use it; only the pass ends feed the stroboscopic series).
fn without_axis(mut order: OrderParameters) -> OrderParameters {
    order.axis = None;
    order
}

/// A failure status with its time moved from segment time to run time.
fn shifted(status: Status, start: f64) -> Status {
    match status {
        Status::NonFinite { t } => Status::NonFinite { t: t + start },
        Status::StepSizeUnderflow { t } => Status::StepSizeUnderflow { t: t + start },
        Status::Interrupted { t } => Status::Interrupted { t: t + start },
        #[allow(unreachable_patterns)]
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use num_complex::Complex64;

    use super::*;
    use crate::integrate::{solve, Problem};
    use crate::observe::OrderSeries;

    /// y' = rate: piecewise linear across a stack, a closed form to check against.
    struct Drift(f64);
    impl Dynamics for Drift {
        fn dimension(&self) -> usize {
            1
        }
        fn rhs(&self, _y: &[f64], dy: &mut [f64]) {
            dy[0] = self.0;
        }
        fn order_parameters(&self, y: &[f64]) -> OrderParameters {
            OrderParameters::from_r2(Complex64::new(y[0], 0.0))
        }
        fn tokens<'a>(&self, _y: &'a [f64]) -> Option<Cow<'a, [f64]>> {
            None
        }
    }

    /// y(t) for rates (1, -2) with durations (1, 0.5), looped: +1 then -1 per pass of 1.5.
    fn exact(t: f64) -> f64 {
        let pass = (t / 1.5).floor();
        let s = t - 1.5 * pass;
        if s <= 1.0 {
            s
        } else {
            1.0 - 2.0 * (s - 1.0)
        }
    }

    fn stack(looped: bool) -> Piecewise {
        Piecewise::new(
            vec![Box::new(Drift(1.0)), Box::new(Drift(-2.0))],
            vec![1.0, 0.5],
            looped,
        )
    }

    #[test]
    fn boundaries_are_hit_exactly_and_samples_follow_the_closed_form() {
        for method in [
            Method::Dop853 {
                rtol: 1e-10,
                atol: 1e-12,
            },
            Method::Dopri5 {
                rtol: 1e-10,
                atol: 1e-12,
            },
            Method::Rk4 { dt: 0.1 },
        ] {
            let s = stack(true);
            let problem = Problem {
                dynamics: &s,
                initial_state: vec![0.0],
                t_end: 7.0,
                samples: 15,
            };
            let mut series = OrderSeries::new();
            let sol = solve(&problem, method, &mut [&mut series]).unwrap();
            assert!(sol.status.is_success());
            for (t, r) in series.t.iter().zip(&series.r2) {
                assert!(
                    (r.re - exact(*t)).abs() < 1e-12,
                    "{method:?} t = {t}: {}",
                    r.re
                );
            }
            // t = 0, then 1, 1.5, 2.5, 3, ..., 6.5 (nine boundaries up to t = 7).
            let times: Vec<f64> = sol.boundaries.iter().map(|b| b.t).collect();
            assert_eq!(times, [0.0, 1.0, 1.5, 2.5, 3.0, 4.0, 4.5, 5.5, 6.0, 7.0]);
            for b in &sol.boundaries {
                assert!((b.order.r2.re - exact(b.t)).abs() < 1e-12, "{b:?}");
                assert_eq!(
                    (b.pass, b.layer),
                    ((b.t / 1.5) as usize, usize::from(b.t % 1.5 == 1.0))
                );
            }
        }
    }

    #[test]
    fn past_the_end_of_a_stack_the_last_layer_goes_on() {
        let s = stack(false);
        let problem = Problem {
            dynamics: &s,
            initial_state: vec![0.0],
            t_end: 2.0,
            samples: 5,
        };
        let sol = solve(
            &problem,
            Method::Dop853 {
                rtol: 1e-10,
                atol: 1e-12,
            },
            &mut [],
        )
        .unwrap();
        assert!(sol.status.is_success());
        assert!((sol.final_state[0] - (1.0 - 2.0 * 1.0)).abs() < 1e-12);
    }
}
