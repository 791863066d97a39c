//! The mean field: the tokens' density as n -> infinity (docs/MATH.md §17).
//!
//! ```text
//! d_t rho = - d_theta( rho v[rho] ) + T d_theta^2 rho                      (d = 2, `circle`)
//! v[rho](theta) = < e_theta^perp, sum_heads (1/Z) integral h(beta <x_theta, A x_phi>) V x_phi rho(phi) dphi >
//! ```
//!
//! The density is a Fourier series on a grid of N points (pseudo-spectral: the transport is
//! formed on the grid, the diffusion acts on the modes exactly), stepped by an
//! exponential Runge–Kutta scheme (ETDRK4) with error control by step doubling (`stepper`).
//! Only the modes |k| <= N/3 are kept (the two-thirds rule: the aliases of the product rho v
//! fall on dropped modes). The grid follows the tolerance: when the top third of the kept
//! modes holds more than rtol of their weight, the grid doubles (zero padding is exact); past
//! `max_grid` the run stops, reports the time and the peaks that hold the mass (`peaks`), and
//! keeps its samples up to then.
//!
//! Order parameters are exact integrals of the series: R1 = 2 pi |c_1|, R2 = 2 pi conj(c_2),
//! s = |R2|.
//!
//! In d >= 3 (`sphere`, docs/MATH.md §17.2) the heads are A = a I, V = v I and the density is
//! axisymmetric, a function of u = <x, e>: Gegenbauer modes a_l on m Gauss nodes in u (the
//! grid), the same stepper, grid growth and concentration stop; `R1 = |<u>|` and s from `<u^2>`,
//! exact.

pub mod circle;
pub mod gegenbauer;
pub mod peaks;
pub mod sphere;
pub mod stack;
pub mod start;
pub mod stepper;

use std::f64::consts::PI;
use std::io;
use std::time::{Duration, Instant};

use num_complex::Complex64;
use serde::Serialize;

use crate::integrate::{Solution, Status};
use crate::observe::{Observer, OrderParameters, RunInfo, Sample};

pub use peaks::Peak;
use stack::Schedule;
pub use stack::{MeanFieldLayer, MeanFieldStack};
pub use start::StartDensity;
use stepper::{SpectralSystem, StepResult, Stepper};

/// The attention kernel of the mean field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// h(y) = y.
    Lsa,
    /// h(y) = e^y.
    Usa,
    /// e^y normalised by Z(theta).
    Sa,
}

/// One head on the circle: A and V as 2 x 2 matrices (rows).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanFieldHead {
    /// The score matrix A.
    pub a: [[f64; 2]; 2],
    /// The value matrix V.
    pub v: [[f64; 2]; 2],
}

/// A mean-field problem on the circle (d = 2) or, axisymmetric, on S^{d-1} (d >= 3).
#[derive(Debug, Clone)]
pub struct MeanFieldProblem {
    /// The dimension d (2: the circle; d >= 3: heads A = a I, V = v I given as a I_2, v I_2,
    /// and an axisymmetric start).
    pub d: usize,
    /// The kernel.
    pub kernel: Kernel,
    /// beta.
    pub beta: f64,
    /// The heads (fields add).
    pub heads: Vec<MeanFieldHead>,
    /// The noise temperature T >= 0.
    pub temperature: f64,
    /// The density at t = 0.
    pub start: StartDensity,
    /// Relative tolerance (time steps and the grid's tail).
    pub rtol: f64,
    /// Absolute tolerance of the time steps.
    pub atol: f64,
    /// Final time.
    pub t_end: f64,
    /// Output samples, t = 0 included.
    pub samples: usize,
    /// The starting grid (points); `None`: from the tolerance.
    pub grid: Option<usize>,
    /// The largest grid.
    pub max_grid: usize,
}

/// The default largest grid.
pub const DEFAULT_MAX_GRID: usize = 4096;
/// The largest grid of heads that need quadrature (N^2 stored weights per head).
pub const MAX_QUADRATURE_GRID: usize = 2048;
/// The smallest starting grid (from the tolerance; a given `grid` is taken as it is).
pub const MIN_GRID: usize = 64;
/// The largest grid (Gauss nodes) in d >= 3: the tables of P_l and P_l' hold about 2 m^2 / 3
/// numbers each.
pub const MAX_SPHERE_GRID: usize = 2048;

/// Why a run stopped before t_end.
#[derive(Debug, Clone, Serialize)]
pub struct Stop {
    /// What happened.
    pub reason: String,
    /// When.
    pub t: f64,
    /// The peaks of the density that hold its mass at that time, heaviest first.
    pub peaks: Vec<Peak>,
}

/// summary.json `mean_field`.
#[derive(Debug, Clone, Serialize)]
pub struct MeanFieldSummary {
    /// Grid points at the end.
    pub grid: usize,
    /// The largest relative weight of the top third of the modes over the run.
    pub tail: f64,
    /// Why the run ended early, or null.
    pub stop: Option<Stop>,
    /// `convolution` (every head's A = a R: FFT) or `quadrature` (N x N weights).
    pub kernel: &'static str,
    /// Grid points at t = 0.
    pub grid_start: usize,
    /// The noise temperature.
    pub temperature: f64,
}

/// A finished mean-field run: the integrator's account, the summary and the densities.
pub struct MeanFieldRun {
    /// Steps, evaluations, times, status.
    pub solution: Solution,
    /// summary.json `mean_field`.
    pub summary: MeanFieldSummary,
    /// The Fourier coefficients at each sample (FFT order, each on its own grid); d >= 3: the
    /// Gegenbauer coefficients a_l (real parts).
    pub history: Vec<Vec<Complex64>>,
    /// The dimension d.
    pub d: usize,
    /// The sample times.
    pub times: Vec<f64>,
}

impl MeanFieldRun {
    /// The densities on the final grid, one row per sample (samples x grid, row-major).
    pub fn densities(&self) -> Vec<f64> {
        let n = self.summary.grid;
        let points = self.grid_points();
        let mut out = Vec::with_capacity(self.history.len() * n);
        for c in &self.history {
            if self.d >= 3 {
                out.extend(sphere::density_on(c, self.d, &points));
            } else {
                out.extend(circle::synthesize_on(c, n));
            }
        }
        out
    }

    /// The grid angles theta_j = 2 pi j / N of the final grid; d >= 3: its Gauss nodes u_k
    /// (ascending).
    pub fn grid_points(&self) -> Vec<f64> {
        let n = self.summary.grid;
        if self.d >= 3 {
            return gegenbauer::nodes(self.d, n).0;
        }
        (0..n).map(|j| 2.0 * PI * j as f64 / n as f64).collect()
    }
}

/// The exact order parameters of an axisymmetric density on S^{d-1} with Gegenbauer
/// coefficients `c`: `R1 = |<u>|`; `S = E[x x^T]` has the eigenvalue `<u^2>` along the axis and
/// (1 - <u^2>) / (d - 1) across, s = (d lambda_max - 1) / (d - 1); R2 is taken as s (the axis
/// does not move).
pub fn sphere_order_parameters(c: &[Complex64], d: usize) -> OrderParameters {
    let (mean, square) = sphere::moments(c, d);
    let df = d as f64;
    let lambda = square.max((1.0 - square) / (df - 1.0));
    let s = ((df * lambda - 1.0) / (df - 1.0)).clamp(0.0, 1.0);
    OrderParameters {
        r2: Complex64::new(s, 0.0),
        r1: Some(mean.abs()),
        nematic: s,
        axis: None,
    }
}

/// The exact order parameters of a density with coefficients `c` on the circle.
pub fn order_parameters(c: &[Complex64]) -> OrderParameters {
    let n = c.len();
    let c1 = if n > 2 {
        c[1]
    } else {
        Complex64::new(0.0, 0.0)
    };
    let c2 = if n > 4 {
        c[2]
    } else {
        Complex64::new(0.0, 0.0)
    };
    let r2 = 2.0 * PI * c2.conj();
    OrderParameters {
        r2,
        r1: Some(2.0 * PI * c1.norm()),
        nematic: r2.norm(),
        axis: None,
    }
}

/// The grid's tail tolerance: the weight of the top third of the modes allowed.
fn tail_tolerance(rtol: f64) -> f64 {
    rtol.max(1e-13)
}

/// The discretised system: the circle's Fourier grid or the sphere's Gauss nodes.
enum System {
    Circle(circle::Circle),
    Sphere(sphere::Axisymmetric),
}

impl SpectralSystem for System {
    fn linear(&self) -> &[f64] {
        match self {
            System::Circle(s) => s.linear(),
            System::Sphere(s) => s.linear(),
        }
    }

    fn nonlinear(&mut self, c: &[Complex64], out: &mut [Complex64]) {
        match self {
            System::Circle(s) => s.nonlinear(c, out),
            System::Sphere(s) => s.nonlinear(c, out),
        }
    }
}

impl MeanFieldProblem {
    /// The system on a grid of n points (d = 2) or n Gauss nodes (d >= 3).
    fn system(&self, n: usize) -> System {
        self.system_with(n, &self.heads)
    }

    /// The system on a grid of n with the given heads (a layer of a stack).
    fn system_with(&self, n: usize, heads: &[MeanFieldHead]) -> System {
        if self.d >= 3 {
            System::Sphere(sphere::Axisymmetric::new(
                self.d,
                n,
                self.kernel,
                self.beta,
                heads,
                self.temperature,
            ))
        } else {
            System::Circle(circle::Circle::new(
                n,
                self.kernel,
                self.beta,
                heads,
                self.temperature,
            ))
        }
    }

    /// The start's coefficients on a grid of n, before truncation.
    fn start_coefficients(&self, n: usize) -> Vec<Complex64> {
        if self.d >= 3 {
            sphere::start_modes(&self.start, self.d, sphere::top_degree(n))
        } else {
            circle::analyse(&self.start.values(n))
        }
    }

    /// The weight of the top third of the kept modes.
    fn tail(&self, c: &[Complex64]) -> f64 {
        if self.d >= 3 {
            sphere::tail(c)
        } else {
            circle::tail(c)
        }
    }

    /// The coefficients on a grid of n (larger): zero padding.
    fn resample(&self, c: &[Complex64], n: usize) -> Vec<Complex64> {
        if self.d >= 3 {
            sphere::resample(c, n)
        } else {
            circle::resample(c, n)
        }
    }

    /// The exact order parameters of coefficients `c`.
    fn order(&self, c: &[Complex64]) -> OrderParameters {
        if self.d >= 3 {
            sphere_order_parameters(c, self.d)
        } else {
            order_parameters(c)
        }
    }

    /// The density on the grid of n: rho(theta_j) or rho(u_k).
    fn values(&self, c: &[Complex64], n: usize) -> Vec<f64> {
        if self.d >= 3 {
            sphere::density_on(c, self.d, &gegenbauer::nodes(self.d, n).0)
        } else {
            circle::synthesize_on(c, n)
        }
    }
}

/// The starting grid: as given, else the smallest power of two from [`MIN_GRID`] and 16 times
/// the highest added mode (so that the harmonics of every mode reach the tail, where they are
/// seen, before the two-thirds rule drops them) whose tail is within the tolerance (at most
/// `max_grid`), with its tail.
fn starting_grid(p: &MeanFieldProblem, cap: usize) -> (usize, Vec<Complex64>, f64) {
    let tol = tail_tolerance(p.rtol);
    let top = p
        .start
        .modes
        .iter()
        .map(|m| m.0 as usize)
        .max()
        .unwrap_or(0);
    let least = (16 * top).max(MIN_GRID).next_power_of_two().min(cap);
    let mut n = p.grid.unwrap_or(least);
    loop {
        let mut c = p.start_coefficients(n);
        let tail = p.tail(&c);
        if p.d < 3 {
            circle::truncate(&mut c);
        }
        if p.grid.is_some() || tail <= tol || 2 * n > cap {
            return (n, c, tail);
        }
        n *= 2;
    }
}

/// The start's tail on the largest grid when that grid does not resolve it (a von Mises start
/// too narrow, a Poisson start too close to r0 = 1): `(largest grid, tail)`; `None` when it is
/// resolved or the grid is given (a given grid is used as it is).
pub fn unresolved_start(
    p: &MeanFieldProblem,
    stack: Option<&MeanFieldStack>,
) -> Option<Unresolved> {
    if p.grid.is_some() {
        return None;
    }
    let (grid, _, tail) = starting_grid(p, grid_cap(p, &Schedule::new(stack)));
    let tolerance = tail_tolerance(p.rtol);
    (tail > tolerance).then_some(Unresolved {
        grid,
        tail,
        tolerance,
    })
}

/// A start density the largest grid does not resolve.
#[derive(Debug, Clone, Copy)]
pub struct Unresolved {
    /// The largest grid.
    pub grid: usize,
    /// The top third's relative weight there.
    pub tail: f64,
    /// The most it may hold.
    pub tolerance: f64,
}

/// The largest grid this problem may use.
fn grid_cap(p: &MeanFieldProblem, schedule: &Schedule) -> usize {
    if p.d >= 3 {
        return p.max_grid.min(MAX_SPHERE_GRID);
    }
    let all_conv = schedule
        .all_heads(p)
        .all(|h| circle::commutes_with_rotations(&h.a));
    if all_conv {
        p.max_grid
    } else {
        p.max_grid.min(MAX_QUADRATURE_GRID)
    }
}

/// What the run did: its samples, end and stop.
struct Progress {
    history: Vec<Vec<Complex64>>,
    times: Vec<f64>,
    status: Status,
    stop: Option<Stop>,
    tail_max: f64,
    n: usize,
}

/// Runs the mean field, handing every sample to the observers (the state is the density on
/// the current grid).
pub fn solve(
    p: &MeanFieldProblem,
    observers: &mut [&mut dyn Observer],
) -> io::Result<MeanFieldRun> {
    solve_stack(p, None, observers)
}

/// [`solve`] with the heads of `stack` (when given) instead of the problem's: each layer's
/// field acts for its duration (`stack`); `solution.boundaries` holds the order parameters at
/// t = 0 and at every layer boundary.
pub fn solve_stack(
    p: &MeanFieldProblem,
    stack: Option<&MeanFieldStack>,
    observers: &mut [&mut dyn Observer],
) -> io::Result<MeanFieldRun> {
    let clock = Instant::now();
    let mut schedule = Schedule::new(stack);
    let cap = grid_cap(p, &schedule);
    let (n, c, _) = starting_grid(p, cap);
    let grid_start = n;
    let mut system = p.system_with(n, schedule.heads(p));
    let kernel = match &system {
        System::Circle(_)
            if schedule
                .all_heads(p)
                .all(|h| circle::commutes_with_rotations(&h.a)) =>
        {
            "convolution"
        }
        System::Circle(_) => "quadrature",
        System::Sphere(_) => "funk-hecke",
    };
    schedule.begin(p.order(&c));
    let spacing = p.t_end / (p.samples - 1) as f64;
    let mut stepper = Stepper::new(c.len(), (1e-3 * spacing).min(1e-3), p.rtol, p.atol);
    for o in observers.iter_mut() {
        o.start(&RunInfo {
            samples: p.samples,
            t_end: p.t_end,
        })?;
    }
    let mut observing = Duration::ZERO;
    let run = march(
        p,
        (n, c),
        cap.max(n),
        (&mut system, &mut schedule),
        &mut stepper,
        observers,
        &mut observing,
    )?;
    for o in observers.iter_mut() {
        o.finish()?;
    }
    let solution = Solution {
        status: run.status,
        samples: run.history.len(),
        t_last: run.times.last().copied().unwrap_or(0.0),
        rhs_evals: stepper.evals,
        accepted_steps: stepper.accepted,
        rejected_steps: stepper.rejected,
        norm_drift_max: 0.0,
        step_drift_max: 0.0,
        final_state: run
            .history
            .last()
            .map(|c| p.values(c, run.n))
            .unwrap_or_default(),
        boundaries: schedule.boundaries,
        wall: clock.elapsed(),
        observing,
    };
    Ok(MeanFieldRun {
        solution,
        summary: MeanFieldSummary {
            grid: run.n,
            tail: run.tail_max,
            stop: run.stop,
            kernel,
            grid_start,
            temperature: p.temperature,
        },
        history: run.history,
        times: run.times,
        d: p.d.max(2),
    })
}

/// Steps from t = 0 to t_end sample by sample, doubling the grid when its tail passes the
/// tolerance, stopping when it would pass `cap`; no step crosses a layer boundary of the
/// schedule, where the field changes.
fn march(
    p: &MeanFieldProblem,
    (mut n, mut c): (usize, Vec<Complex64>),
    cap: usize,
    (system, schedule): (&mut System, &mut Schedule),
    stepper: &mut Stepper,
    observers: &mut [&mut dyn Observer],
    observing: &mut Duration,
) -> io::Result<Progress> {
    let spacing = p.t_end / (p.samples - 1) as f64;
    let tol = tail_tolerance(p.rtol);
    let mut run = Progress {
        history: Vec::with_capacity(p.samples),
        times: Vec::with_capacity(p.samples),
        status: Status::Success,
        stop: None,
        tail_max: p.tail(&c),
        n,
    };
    let observed = Instant::now();
    emit(p, 0, 0.0, &c, observers, &mut run)?;
    *observing += observed.elapsed();
    let mut t = 0.0;
    'samples: for i in 1..p.samples {
        let target = if i + 1 == p.samples {
            p.t_end
        } else {
            spacing * i as f64
        };
        while t < target {
            if crate::interrupt::is_requested() {
                run.status = Status::Interrupted { t };
                break 'samples;
            }
            stack::cross_if_reached(p, schedule, system, (n, &c), &mut t);
            if target - t <= 4.0 * f64::EPSILON * t.abs().max(1.0) {
                // A boundary within round-off before the sample.
                t = target;
                break;
            }
            let stop = target.min(schedule.next());
            let left = stop - t;
            match stepper.step(system, &mut c, t, left) {
                StepResult::Accepted(h) => {
                    t = if h >= left { stop } else { t + h };
                    crate::interrupt::set_clock(t);
                }
                StepResult::Underflow => {
                    run.status = Status::StepSizeUnderflow { t };
                    break 'samples;
                }
                StepResult::NonFinite => {
                    run.status = Status::NonFinite { t };
                    break 'samples;
                }
            }
            let tl = p.tail(&c);
            run.tail_max = run.tail_max.max(tl);
            if tl > tol {
                if 2 * n > cap {
                    run.stop = Some(concentrated(p, &c, n, cap, t));
                    break 'samples;
                }
                n *= 2;
                run.n = n;
                c = p.resample(&c, n);
                *system = p.system_with(n, schedule.heads(p));
                stepper.resize(c.len());
            }
            stack::cross_if_reached(p, schedule, system, (n, &c), &mut t);
        }
        stack::cross_if_reached(p, schedule, system, (n, &c), &mut t);
        let observed = Instant::now();
        emit(p, i, t, &c, observers, &mut run)?;
        *observing += observed.elapsed();
    }
    Ok(run)
}

/// The stop of a density that concentrated past the largest grid.
fn concentrated(p: &MeanFieldProblem, c: &[Complex64], n: usize, cap: usize, t: f64) -> Stop {
    let peaks = if p.d >= 3 {
        sphere::peaks(c, p.d, n)
    } else {
        peaks::peaks(&circle::synthesize_on(c, n))
    };
    Stop {
        reason: format!(
            "the density concentrated past the largest grid ({cap} points): the top third of \
             its modes holds more than the tolerance; raise density.max_grid or add noise"
        ),
        t,
        peaks,
    }
}

/// Hands one sample to the observers and keeps its coefficients.
fn emit(
    p: &MeanFieldProblem,
    index: usize,
    t: f64,
    c: &[Complex64],
    observers: &mut [&mut dyn Observer],
    run: &mut Progress,
) -> io::Result<()> {
    let order = p.order(c);
    let values = p.values(c, run.n);
    let sample = Sample {
        index,
        t,
        state: &values,
        order: &order,
        tokens: None,
    };
    for o in observers.iter_mut() {
        o.sample(&sample)?;
    }
    run.history.push(c.to_vec());
    run.times.push(t);
    Ok(())
}

/// Advances coefficients `c` of a problem by `dt` on a fixed grid (for tests and benchmarks):
/// returns the number of accepted steps. d >= 3: the grid is `p.grid` (else [`MIN_GRID`]) and
/// `c` must hold its L + 1 coefficients (else nothing is done).
pub fn advance_fixed_grid(p: &MeanFieldProblem, c: &mut [Complex64], dt: f64) -> u64 {
    let n = if p.d >= 3 {
        let m = p.grid.unwrap_or(MIN_GRID);
        if sphere::top_degree(m) + 1 != c.len() {
            return 0;
        }
        m
    } else {
        c.len()
    };
    let mut system = p.system(n);
    let mut stepper = Stepper::new(c.len(), 1e-4, p.rtol, p.atol);
    let mut t = 0.0;
    while t < dt {
        match stepper.step(&mut system as &mut dyn SpectralSystem, c, t, dt - t) {
            StepResult::Accepted(h) => t = if h >= dt - t { dt } else { t + h },
            _ => break,
        }
    }
    stepper.accepted
}
