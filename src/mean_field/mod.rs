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

pub mod circle;
pub mod gegenbauer;
pub mod peaks;
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

/// A mean-field problem on the circle.
#[derive(Debug, Clone)]
pub struct MeanFieldProblem {
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
    /// The Fourier coefficients at each sample (FFT order, each on its own grid).
    pub history: Vec<Vec<Complex64>>,
    /// The sample times.
    pub times: Vec<f64>,
}

impl MeanFieldRun {
    /// The densities on the final grid, one row per sample (samples x grid, row-major).
    pub fn densities(&self) -> Vec<f64> {
        let n = self.summary.grid;
        let mut out = Vec::with_capacity(self.history.len() * n);
        for c in &self.history {
            out.extend(circle::synthesize_on(c, n));
        }
        out
    }

    /// The grid angles theta_j = 2 pi j / N of the final grid.
    pub fn grid_points(&self) -> Vec<f64> {
        let n = self.summary.grid;
        (0..n).map(|j| 2.0 * PI * j as f64 / n as f64).collect()
    }
}

/// The exact order parameters of a density with coefficients `c`.
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

/// The starting grid: as given, else the smallest power of two from [`MIN_GRID`] and 16 times
/// the highest added mode (so that the harmonics of every mode reach the tail, where they are
/// seen, before the two-thirds rule drops them) whose tail is within the tolerance (at most
/// `max_grid`).
fn starting_grid(p: &MeanFieldProblem) -> (usize, Vec<Complex64>) {
    let tol = tail_tolerance(p.rtol);
    let top = p
        .start
        .modes
        .iter()
        .map(|m| m.0 as usize)
        .max()
        .unwrap_or(0);
    let least = (16 * top).max(MIN_GRID).next_power_of_two().min(p.max_grid);
    let mut n = p.grid.unwrap_or(least);
    loop {
        let mut c = circle::analyse(&p.start.values(n));
        let tail = circle::tail(&c);
        circle::truncate(&mut c);
        if p.grid.is_some() || tail <= tol || 2 * n > p.max_grid {
            return (n, c);
        }
        n *= 2;
    }
}

/// The largest grid this problem may use.
fn grid_cap(p: &MeanFieldProblem) -> usize {
    let all_conv = p
        .heads
        .iter()
        .all(|h| circle::commutes_with_rotations(&h.a));
    if all_conv {
        p.max_grid
    } else {
        p.max_grid.min(MAX_QUADRATURE_GRID)
    }
}

/// Runs the mean field, handing every sample to the observers (the state is the density on
/// the current grid).
pub fn solve(
    p: &MeanFieldProblem,
    observers: &mut [&mut dyn Observer],
) -> io::Result<MeanFieldRun> {
    let clock = Instant::now();
    let mut observing = Duration::ZERO;
    let (mut n, mut c) = starting_grid(p);
    let grid_start = n;
    let cap = grid_cap(p).max(n);
    let mut system = circle::Circle::new(n, p.kernel, p.beta, &p.heads, p.temperature);
    let kernel = if system.convolution() {
        "convolution"
    } else {
        "quadrature"
    };
    let spacing = p.t_end / (p.samples - 1) as f64;
    let mut stepper = Stepper::new(n, (1e-3 * spacing).min(1e-3), p.rtol, p.atol);
    let tol = tail_tolerance(p.rtol);
    let mut tail_max = circle::tail(&c);
    for o in observers.iter_mut() {
        o.start(&RunInfo {
            samples: p.samples,
            t_end: p.t_end,
        })?;
    }
    let mut history = Vec::with_capacity(p.samples);
    let mut times = Vec::with_capacity(p.samples);
    let observed = Instant::now();
    emit(0, 0.0, &c, observers, &mut history, &mut times)?;
    observing += observed.elapsed();
    let (mut t, mut status, mut stop) = (0.0, Status::Success, None);
    'samples: for i in 1..p.samples {
        let target = if i + 1 == p.samples {
            p.t_end
        } else {
            spacing * i as f64
        };
        while t < target {
            if crate::interrupt::is_requested() {
                status = Status::Interrupted { t };
                break 'samples;
            }
            let left = target - t;
            match stepper.step(&mut system, &mut c, t, left) {
                StepResult::Accepted(h) => {
                    t = if h >= left { target } else { t + h };
                    crate::interrupt::set_clock(t);
                }
                StepResult::Underflow => {
                    status = Status::StepSizeUnderflow { t };
                    break 'samples;
                }
                StepResult::NonFinite => {
                    status = Status::NonFinite { t };
                    break 'samples;
                }
            }
            let tl = circle::tail(&c);
            tail_max = tail_max.max(tl);
            if tl > tol {
                if 2 * n > cap {
                    stop = Some(concentrated(&c, n, cap, t));
                    break 'samples;
                }
                n *= 2;
                c = circle::resample(&c, n);
                system = circle::Circle::new(n, p.kernel, p.beta, &p.heads, p.temperature);
                stepper.resize(n);
            }
        }
        let observed = Instant::now();
        emit(i, t, &c, observers, &mut history, &mut times)?;
        observing += observed.elapsed();
    }
    for o in observers.iter_mut() {
        o.finish()?;
    }
    let solution = Solution {
        status,
        samples: history.len(),
        t_last: times.last().copied().unwrap_or(0.0),
        rhs_evals: stepper.evals,
        accepted_steps: stepper.accepted,
        rejected_steps: stepper.rejected,
        norm_drift_max: 0.0,
        step_drift_max: 0.0,
        final_state: history
            .last()
            .map(|c| circle::synthesize_on(c, n))
            .unwrap_or_default(),
        boundaries: Vec::new(),
        wall: clock.elapsed(),
        observing,
    };
    Ok(MeanFieldRun {
        solution,
        summary: MeanFieldSummary {
            grid: n,
            tail: tail_max,
            stop,
            kernel,
            grid_start,
            temperature: p.temperature,
        },
        history,
        times,
    })
}

/// The stop of a density that concentrated past the largest grid.
fn concentrated(c: &[Complex64], n: usize, cap: usize, t: f64) -> Stop {
    let values = circle::synthesize_on(c, n);
    Stop {
        reason: format!(
            "the density concentrated past the largest grid ({cap} points): the top third of \
             its modes holds more than the tolerance; raise density.max_grid or add noise"
        ),
        t,
        peaks: peaks::peaks(&values),
    }
}

/// Hands one sample to the observers and keeps its coefficients.
fn emit(
    index: usize,
    t: f64,
    c: &[Complex64],
    observers: &mut [&mut dyn Observer],
    history: &mut Vec<Vec<Complex64>>,
    times: &mut Vec<f64>,
) -> io::Result<()> {
    let order = order_parameters(c);
    let values = circle::synthesize_on(c, c.len());
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
    history.push(c.to_vec());
    times.push(t);
    Ok(())
}

/// Advances coefficients `c` of a problem by `dt` on a fixed grid (for tests and benchmarks):
/// returns the number of accepted steps.
pub fn advance_fixed_grid(p: &MeanFieldProblem, c: &mut [Complex64], dt: f64) -> u64 {
    let mut system = circle::Circle::new(c.len(), p.kernel, p.beta, &p.heads, p.temperature);
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
