//! Integration on the sphere, sample by sample, with the crate's own Runge–Kutta steppers.
//!
//! A [`Problem`] is a [`Dynamics`] (the vector field and how to read order parameters off a
//! state), an initial state and an output grid t_i = t_end i / (samples - 1). [`solve`] takes a
//! problem, a [`Method`] and observers and returns a [`Solution`] whose [`Status`] says how the
//! run ended.
//!
//! After each output interval the state is projected back onto its manifold (every token onto
//! the unit sphere) and the observers see the sample. The steppers (`stepper.rs`) are the
//! crate's own DOP853 with dense output (the default) and `ode_solvers`' Dopri5 and RK4, run in
//! short bounded pieces; memory is O(state) whatever the number of samples or steps. A stack of
//! layers is integrated layer by layer, landing exactly on every boundary (`piecewise.rs`).

pub(crate) mod dop853;
mod dop853_tableau;
mod flow;
pub mod gaussian;
mod geodesic;
pub mod lyapunov;
mod piecewise;
mod stepper;
pub mod stochastic;

pub use flow::Flow;
pub use lyapunov::{Linearization, LyapunovSettings, Spectrum};
pub use piecewise::{Boundary, Piecewise};
pub use stochastic::NoiseSettings;

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use crate::observe::{Observer, OrderParameters, RunInfo, Sample, TokenSource};

/// A system of autonomous ODEs y' = F(y) whose states carry tokens.
pub trait Dynamics {
    /// Number of real unknowns.
    fn dimension(&self) -> usize;
    /// Writes F(y) into `dy`.
    fn rhs(&self, y: &[f64], dy: &mut [f64]);
    /// Pulls `y` back onto the model's manifold (e.g. every token onto the unit sphere) and
    /// returns how far it was off before (max | |x_k| - 1 |); 0 when there is nothing to do.
    fn project(&self, _y: &mut [f64]) -> f64 {
        0.0
    }
    /// Order parameters of a state.
    fn order_parameters(&self, y: &[f64]) -> OrderParameters;
    /// The tokens (n x d row-major) of a state, when the model carries them.
    fn tokens<'a>(&self, y: &'a [f64]) -> Option<Cow<'a, [f64]>>;
    /// The tokens of a state a piece at a time, for models that make them (the group model):
    /// `f(first, rows)` for consecutive pieces of whole rows, `first` the index of the piece's
    /// first token; `None` when the model does not (use [`Dynamics::tokens`]).
    fn token_pieces(
        &self,
        _y: &[f64],
        _f: &mut dyn FnMut(usize, &[f64]) -> io::Result<()>,
    ) -> Option<io::Result<()>> {
        None
    }
    /// The tokens of a state made on demand ([`TokenSource`]), for models that map their start
    /// tokens (the group model); `None` otherwise.
    fn token_source<'a>(&'a self, _y: &'a [f64]) -> Option<Box<dyn TokenSource + 'a>> {
        None
    }
    /// A stack of layers whose field changes at given times (see [`Piecewise`]); `None` for
    /// an autonomous field.
    fn piecewise(&self) -> Option<&Piecewise> {
        None
    }
    /// The field's derivative along tangent vectors (for Lyapunov exponents, [`lyapunov`]);
    /// `None` when the model does not give it.
    fn linearization(&self) -> Option<&dyn Linearization> {
        None
    }
}

/// Hands the tokens of sample `index` to the observers that want them a piece at a time, when
/// all of them take pieces and the model makes them so (then no n x d copy is made); `None`
/// otherwise. A model that makes its tokens on demand offers them first
/// ([`Observer::sample_source`]); the pieces are made only when an observer still wants them.
fn tokens_in_pieces(
    dynamics: &dyn Dynamics,
    y: &[f64],
    index: usize,
    observers: &mut [&mut dyn Observer],
) -> Option<io::Result<()>> {
    if observers
        .iter()
        .any(|o| o.wants_tokens_at(index) && !o.takes_token_pieces())
    {
        return None;
    }
    let mut served = vec![false; observers.len()];
    if let Some(source) = dynamics.token_source(y) {
        for (o, served) in observers.iter_mut().zip(served.iter_mut()) {
            if o.wants_tokens_at(index) {
                match o.sample_source(index, &*source) {
                    Ok(s) => *served = s,
                    Err(e) => return Some(Err(e)),
                }
            }
        }
        let pending = observers
            .iter()
            .zip(&served)
            .any(|(o, s)| !s && o.wants_tokens_at(index));
        if !pending {
            return Some(Ok(()));
        }
    }
    dynamics.token_pieces(y, &mut |first, rows| {
        for (o, served) in observers.iter_mut().zip(&served) {
            if !served && o.wants_tokens_at(index) {
                o.sample_tokens(index, first, rows)?;
            }
        }
        Ok(())
    })
}

/// An initial-value problem with its output grid.
pub struct Problem<'a> {
    /// The vector field.
    pub dynamics: &'a dyn Dynamics,
    /// State at t = 0.
    pub initial_state: Vec<f64>,
    /// Final time (> 0).
    pub t_end: f64,
    /// Number of output samples including t = 0 (>= 2).
    pub samples: usize,
}

impl Problem<'_> {
    /// The time of output sample `i`.
    pub fn sample_time(&self, i: usize) -> f64 {
        if i + 1 == self.samples {
            self.t_end
        } else {
            self.t_end * i as f64 / (self.samples - 1) as f64
        }
    }
}

/// The integration method and its settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// Dormand–Prince 8(5,3), adaptive.
    Dop853 {
        /// Relative tolerance.
        rtol: f64,
        /// Absolute tolerance.
        atol: f64,
    },
    /// Dormand–Prince 5(4), adaptive.
    Dopri5 {
        /// Relative tolerance.
        rtol: f64,
        /// Absolute tolerance.
        atol: f64,
    },
    /// Classical Runge–Kutta 4 with the largest step <= dt that divides each output interval.
    Rk4 {
        /// The largest step.
        dt: f64,
    },
    /// Noisy tokens: the stochastic Heun scheme on the sphere ([`stochastic`]), fixed steps.
    StochasticHeun(NoiseSettings),
}

/// Field-evaluation and step counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// Evaluations of the field.
    pub rhs_evals: u64,
    /// Steps accepted.
    pub accepted: u64,
    /// Steps rejected by the error control.
    pub rejected: u64,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Status {
    /// Reached t_end.
    Success,
    /// The state or the field became non-finite (overflow) near time `t`.
    NonFinite {
        /// When.
        t: f64,
    },
    /// The adaptive step size fell below round-off at time `t`.
    StepSizeUnderflow {
        /// When.
        t: f64,
    },
    /// Stopped at time `t` because [`crate::interrupt::request`] was called (a signal).
    Interrupted {
        /// When.
        t: f64,
    },
}

impl Status {
    /// Whether the run reached t_end.
    pub fn is_success(&self) -> bool {
        matches!(self, Status::Success)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Success => write!(f, "success"),
            Status::NonFinite { t } => write!(
                f,
                "the state became non-finite (overflow) at t = {t}; lower beta or the weights' scale"
            ),
            Status::StepSizeUnderflow { t } => write!(
                f,
                "the step size fell below round-off at t = {t} (the flow is too stiff or blows up there)"
            ),
            Status::Interrupted { t } => write!(f, "interrupted at t = {t}"),
        }
    }
}

/// The result of [`solve`].
#[derive(Debug, Clone)]
pub struct Solution {
    /// How the run ended.
    pub status: Status,
    /// Output samples handed to the observers.
    pub samples: usize,
    /// Time of the last sample handed to the observers.
    pub t_last: f64,
    /// Evaluations of the vector field.
    pub rhs_evals: u64,
    /// Accepted steps.
    pub accepted_steps: u64,
    /// Rejected steps.
    pub rejected_steps: u64,
    /// max over the output samples of how far the observed state is off its manifold (for
    /// the full model: max_k | |x_k| - 1 | of the tokens handed to the observers).
    pub norm_drift_max: f64,
    /// The largest distance from the manifold that the integrator accumulated between two
    /// projections (at most 8 steps apart), before projecting.
    pub step_drift_max: f64,
    /// State at the last sample.
    pub final_state: Vec<f64>,
    /// For a stack of layers: the order parameters at t = 0 and at every layer boundary
    /// crossed (empty for an autonomous field).
    pub boundaries: Vec<Boundary>,
    /// Wall time of the integration, observers included.
    pub wall: Duration,
    /// The part of `wall` spent observing: the order parameters at the samples, the tokens
    /// made for the observers and the observers themselves.
    pub observing: Duration,
}

/// Integrates `problem` with `method`, calling the observers at every output sample.
///
/// Returns an error only when an observer fails (I/O); a run that fails numerically returns a
/// [`Solution`] with a [`Status`] other than success and the samples up to the failure, which
/// [`Solution::succeeded`] turns into an error.
///
/// ```
/// use std::borrow::Cow;
/// use tokdyn::integrate::{solve, Dynamics, Method, Problem};
/// use tokdyn::observe::{OrderParameters, OrderSeries};
/// use num_complex::Complex64;
///
/// /// y' = -y, whose "order parameter" is y itself.
/// struct Decay;
/// impl Dynamics for Decay {
///     fn dimension(&self) -> usize { 1 }
///     fn rhs(&self, y: &[f64], dy: &mut [f64]) { dy[0] = -y[0] }
///     fn order_parameters(&self, y: &[f64]) -> OrderParameters {
///         OrderParameters::from_r2(Complex64::new(y[0], 0.0))
///     }
///     fn tokens<'a>(&self, _y: &'a [f64]) -> Option<Cow<'a, [f64]>> { None }
/// }
/// let problem = Problem { dynamics: &Decay, initial_state: vec![1.0], t_end: 2.0, samples: 5 };
/// let mut series = OrderSeries::new();
/// let method = Method::Dop853 { rtol: 1e-12, atol: 1e-14 };
/// let solution = solve(&problem, method, &mut [&mut series]).unwrap();
/// assert!(solution.status.is_success());
/// assert!((series.r2[4].re - (-2.0f64).exp()).abs() < 1e-11);
/// ```
pub fn solve(
    problem: &Problem<'_>,
    method: Method,
    observers: &mut [&mut dyn Observer],
) -> io::Result<Solution> {
    solve_until(problem, method, observers, problem.t_end)
}

/// How much later than the last checkpoint the next one comes (a factor on t).
pub const CHECKPOINT_GROWTH: f64 = 1.25;

/// Like [`solve`], but when `t_max > t_end` the run goes on past `t_end` with the same stepper
/// and the same sample spacing, up to `t_max` at most, and stops at the first checkpoint
/// (t_end, then each [`CHECKPOINT_GROWTH`] times later) where an observer says it has seen
/// enough ([`Observer::enough`]).
pub fn solve_until(
    problem: &Problem<'_>,
    method: Method,
    observers: &mut [&mut dyn Observer],
    t_max: f64,
) -> io::Result<Solution> {
    let started = Instant::now();
    let dynamics = problem.dynamics;
    let grid = OutputGrid::new(problem, t_max);
    let mut y = problem.initial_state.clone();
    let mut stepper = piecewise::SegmentedStepper::new(dynamics, method, &y, grid.horizon);
    let info = RunInfo {
        samples: problem.samples,
        t_end: problem.t_end,
    };
    for o in observers.iter_mut() {
        o.start(&info)?;
    }
    let mut progress = RunProgress {
        status: Status::Success,
        samples: 0,
        t_last: 0.0,
        drift_max: 0.0,
        observing: Duration::ZERO,
    };
    let mut next_check = problem.t_end;
    for i in 0..grid.total {
        let t = grid.time(i);
        if crate::interrupt::is_requested() {
            progress.status = Status::Interrupted { t: progress.t_last };
            break;
        }
        let sampled = advance_to_sample(dynamics, &mut stepper, (i, t), &mut y, &mut progress);
        let order = match sampled {
            Ok(order) => order,
            Err(failure) => {
                progress.status = failure;
                break;
            }
        };
        let observed = Instant::now();
        hand_out_sample(dynamics, observers, i, t, &y, &order)?;
        progress.observing += observed.elapsed();
        progress.samples += 1;
        progress.t_last = t;
        if grid.extended && i + 1 >= problem.samples && t >= next_check {
            next_check = t * CHECKPOINT_GROWTH;
            if observers.iter_mut().any(|o| o.enough()) {
                break;
            }
        }
    }
    for o in observers.iter_mut() {
        o.finish()?;
    }
    Ok(progress.into_solution(stepper, y, started))
}

/// The output times of a run: the problem's grid, continued with the same spacing up to
/// `t_max` when the run may go on past t_end.
struct OutputGrid {
    t_end: f64,
    samples: usize,
    t_max: f64,
    /// Whether the run may go on past t_end.
    extended: bool,
    /// The last time the stepper may reach.
    horizon: f64,
    /// Most samples the run can hand out.
    total: usize,
}

impl OutputGrid {
    fn new(problem: &Problem<'_>, t_max: f64) -> Self {
        let spacing = problem.t_end / (problem.samples.max(2) - 1) as f64;
        let extended = t_max > problem.t_end && spacing > 0.0;
        OutputGrid {
            t_end: problem.t_end,
            samples: problem.samples,
            t_max,
            extended,
            horizon: if extended { t_max } else { problem.t_end },
            total: if extended {
                ((t_max / spacing + 1e-9).floor() as usize + 1).max(problem.samples)
            } else {
                problem.samples
            },
        }
    }

    /// The time of sample `i` (the problem's own grid up to t_end).
    fn time(&self, i: usize) -> f64 {
        if i + 1 == self.samples {
            self.t_end
        } else if i < self.samples {
            self.t_end * i as f64 / (self.samples - 1) as f64
        } else {
            (self.t_end * i as f64 / (self.samples - 1) as f64).min(self.t_max)
        }
    }
}

/// How far a run has come: its status, the samples handed out and the largest drift seen.
struct RunProgress {
    status: Status,
    samples: usize,
    t_last: f64,
    drift_max: f64,
    observing: Duration,
}

impl RunProgress {
    /// The [`Solution`] of a run that ended here.
    fn into_solution(
        self,
        mut stepper: piecewise::SegmentedStepper<'_>,
        final_state: Vec<f64>,
        started: Instant,
    ) -> Solution {
        let counts = stepper.counts();
        Solution {
            status: self.status,
            samples: self.samples,
            t_last: self.t_last,
            rhs_evals: counts.rhs_evals,
            accepted_steps: counts.accepted,
            rejected_steps: counts.rejected,
            norm_drift_max: self.drift_max,
            step_drift_max: stepper.step_drift_max(),
            final_state,
            boundaries: std::mem::take(&mut stepper.boundaries),
            wall: started.elapsed(),
            observing: self.observing,
        }
    }
}

/// Advances `y` to sample `i` at time `t` (sample 0 is the initial state), projects it onto
/// the manifold (raising the progress's `drift_max` to its distance from it as observed) and
/// reads its order parameters (timed as observing); returns them, or the failure.
fn advance_to_sample(
    dynamics: &dyn Dynamics,
    stepper: &mut piecewise::SegmentedStepper<'_>,
    (i, t): (usize, f64),
    y: &mut [f64],
    progress: &mut RunProgress,
) -> Result<OrderParameters, Status> {
    if i > 0 {
        stepper.advance_to(t, y)?;
        if y.iter().any(|v| !v.is_finite()) {
            return Err(Status::NonFinite { t });
        }
    }
    // Pull the output onto the manifold (the dense output of dop853 is off it by the
    // interpolation error).
    dynamics.project(y);
    // Distance from the manifold of the state as observed (after projection).
    progress.drift_max = progress.drift_max.max(dynamics.project(y));
    let observed = Instant::now();
    let order = dynamics.order_parameters(y);
    progress.observing += observed.elapsed();
    if !(order.r2.re.is_finite() && order.r2.im.is_finite() && order.nematic.is_finite()) {
        return Err(Status::NonFinite { t });
    }
    Ok(order)
}

/// Hands sample `i` to every observer (with the tokens when one of them wants them).
fn hand_out_sample(
    dynamics: &dyn Dynamics,
    observers: &mut [&mut dyn Observer],
    i: usize,
    t: f64,
    y: &[f64],
    order: &OrderParameters,
) -> io::Result<()> {
    let tokens = if observers.iter().any(|o| o.wants_tokens_at(i)) {
        match tokens_in_pieces(dynamics, y, i, observers) {
            Some(fed) => fed.map(|_| None)?,
            None => dynamics.tokens(y),
        }
    } else {
        None
    };
    let sample = Sample {
        index: i,
        t,
        state: y,
        order,
        tokens: tokens.as_deref(),
    };
    for o in observers.iter_mut() {
        o.sample(&sample)?;
    }
    Ok(())
}
