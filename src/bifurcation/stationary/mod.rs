//! Stationary densities of the mean field on the circle for A = V = I (usa, sa) and their
//! branches in the noise temperature T or in beta (docs/MATH.md §17.6):
//!
//! ```text
//! rho = e^{Phi[rho] / T} / Z,   Phi = (1/beta) K * rho (usa),  (1/beta) log(K * rho) (sa),
//! K * rho(theta) = integral e^{beta cos(theta - phi)} rho(phi) dphi
//! ```
//!
//! - the uniform state rho = 1 / 2 pi (branch 1, |R1| = 0) for every p, unstable exactly where
//!   T < c_1 / beta (usa) or c_1 / (beta c_0) (sa), c_l = I_l(beta): the dispersion relation
//!   lambda_l = l^2 (c_l / beta - T) with c_l falling in l;
//! - its branch point BP at p_c, where that bound is an equality and the one-bump branch leaves
//!   it (`branch_point`);
//! - the one-bump branch (branch 2) from the BP by pseudo-arclength through its folds (LP)
//!   ([`branch`], the self-consistency in [`self_consistency`]), the stability of each of its
//!   states from the spectrum of the linearised operator ([`stability`]).
//!
//! On S^{d-1}, d >= 3 (`Family::d`), the same for axisymmetric densities rho(u), `u = <x, e>`,
//! with the Funk–Hecke coefficients c_l in place of I_l, the growth rates
//! l (l + d - 2)(c_l / beta - T) of the uniform state, the self-consistency in the Gegenbauer
//! moments `R_l = <P_l(u)>` (`|R1| = <u>`) and the stability on axisymmetric perturbations only
//! ([`stability_sphere`]).

pub mod branch;
pub mod report;
pub mod self_consistency;
pub mod stability;
pub mod stability_sphere;

use nalgebra::DVector;

use branch::{End, Solved, Tracer};
use self_consistency::{grid_for, highest_mode, SelfConsistency};
pub use self_consistency::{Family, Parameter};
use stability::Linearised;

/// The largest beta of usa (e^beta must stay finite with room).
pub const MAX_USA_BETA: f64 = 600.0;

/// A point of a branch of stationary densities.
#[derive(Debug, Clone, PartialEq)]
pub struct StatePoint {
    /// The parameter value.
    pub p: f64,
    /// `|R1| = <cos theta>` (d = 2) or `<u> = <x . e>` (d >= 3).
    pub r1: f64,
    /// Every eigenvalue of the linearisation (without the translation mode) in the open left
    /// half-plane.
    pub stable: bool,
    /// `Some("BP")`, `Some("LP")` or `None`.
    pub point: Option<&'static str>,
    /// The largest real part of the spectrum (None on the uniform branch's rows from the
    /// dispersion relation: there it is c_1/beta - T).
    pub rate: f64,
}

/// The branches of one continuation.
#[derive(Debug, Clone)]
pub struct Branches {
    /// Branch 1: the uniform state.
    pub uniform: Vec<StatePoint>,
    /// Branch 2: the one-bump states (empty when the BP is not found).
    pub bump: Vec<StatePoint>,
    /// Why the bump branch ended (`range`, `resolution`, `uniform`, `stalled`, `budget`).
    pub end: Option<&'static str>,
    /// Modes of the self-consistency.
    pub modes: usize,
    /// Its grid of angles.
    pub grid: usize,
}

/// The one-bump state at |R1| = `r1` near the parameter `p_guess`: (p, R_k, rho on the grid).
#[derive(Debug, Clone)]
pub struct State {
    /// The parameter value.
    pub p: f64,
    /// R_1 .. R_K.
    pub moments: Vec<f64>,
    /// rho at theta_j = 2 pi j / M (d = 2) or at the M Gauss nodes u_j of
    /// `mean_field::gegenbauer::nodes` (d >= 3, mean 1 against the normalised surface measure).
    pub rho: Vec<f64>,
    /// The largest real part of the linearisation's spectrum (translation mode excluded).
    pub rate: Option<f64>,
}

/// The self-consistency of a family around parameter values near `p` (modes from beta there).
fn map_near(family: Family, beta: f64) -> SelfConsistency {
    let k = highest_mode(family.d, beta);
    SelfConsistency::new(family, (1..=k).collect(), grid_for(family.d, k))
}

/// The branch point p_c of the one-bump branch: c_1/beta = T (usa), c_1/(beta c_0) = T (sa);
/// along beta found by bisection (the coupling is monotone in beta). `None` when there is none.
pub fn branch_point(family: &Family) -> Option<f64> {
    match family.parameter {
        Parameter::Temperature => Some(family.coupling(family.other, 1)),
        Parameter::Beta => {
            let t = family.other;
            let g = |b: f64| family.coupling(b, 1) - t;
            let top = if family.kernel == crate::mean_field::Kernel::Sa {
                1e6
            } else {
                MAX_USA_BETA
            };
            let (mut lo, mut hi) = (1e-8, top);
            let (glo, ghi) = (g(lo), g(hi));
            if (glo * ghi).partial_cmp(&0.0) != Some(std::cmp::Ordering::Less) {
                return None;
            }
            for _ in 0..200 {
                let mid = 0.5 * (lo + hi);
                if (g(mid) < 0.0) == (glo < 0.0) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            Some(0.5 * (lo + hi))
        }
    }
}

/// The uniform state's growth rate of mode 1 at p (positive: unstable).
fn uniform_rate(family: &Family, p: f64) -> f64 {
    let (beta, t) = family.beta_t(p);
    family.coupling(beta, 1) - t
}

/// The largest real part of the linearisation's spectrum at a solved state.
fn rate_of(family: &Family, y: &DVector<f64>, rho: &[f64]) -> Option<f64> {
    let k = y.len() - 1;
    let (beta, t) = family.beta_t(y[k]);
    if family.d != 2 {
        return stability_sphere::leading_rate(family, beta, t, rho, 2 * k + 16);
    }
    Linearised::new(family, beta, t, rho).leading_rate(2 * k + 16)
}

/// The one-bump state with `<cos theta> = r1` (Newton from the branch point's parameter, or
/// from `p_guess`).
pub fn state_at(family: Family, r1: f64, p_guess: Option<f64>) -> Option<State> {
    let p0 = p_guess.or_else(|| branch_point(&family))?;
    let sc = map_near(family, family.beta_t(p0).0);
    let k = sc.modes().len();
    let tracer = Tracer {
        sc: &sc,
        lo: 0.0,
        hi: f64::INFINITY,
        step: 1.0,
        max_points: 1,
    };
    let mut guess = DVector::zeros(k + 1);
    guess[0] = r1;
    guess[k] = p0;
    let mut e1 = DVector::zeros(k + 1);
    e1[0] = 1.0;
    let s = tracer.correct(guess, &e1, r1)?;
    Some(State {
        p: s.y[k],
        moments: s.y.rows(0, k).iter().copied().collect(),
        rate: rate_of(&family, &s.y, &s.eval.rho),
        rho: s.eval.rho,
    })
}

/// The uniform branch over [lo, hi] (every `step`, at most `max_points` rows) with the BP
/// in its place.
fn uniform_branch(
    family: &Family,
    from: f64,
    to: f64,
    step: f64,
    max_points: usize,
    bp: Option<f64>,
) -> Vec<StatePoint> {
    let count = (((to - from).abs() / step).ceil() as usize).clamp(1, max_points.max(2) - 1);
    let mut ps: Vec<f64> = (0..=count)
        .map(|i| from + (to - from) * i as f64 / count as f64)
        .collect();
    let (lo, hi) = (from.min(to), from.max(to));
    let bp = bp.filter(|p| (lo..=hi).contains(p));
    if let Some(p) = bp {
        ps.push(p);
    }
    ps.sort_by(|a, b| {
        if from <= to {
            a.total_cmp(b)
        } else {
            b.total_cmp(a)
        }
    });
    ps.iter()
        .map(|&p| {
            let rate = uniform_rate(family, p);
            StatePoint {
                p,
                r1: 0.0,
                stable: rate < 0.0,
                point: (Some(p) == bp).then_some("BP"),
                rate,
            }
        })
        .collect()
}

fn end_name(end: End) -> &'static str {
    match end {
        End::Range => "range",
        End::Resolution => "resolution",
        End::Uniform => "uniform",
        End::Stalled => "stalled",
        End::Budget => "budget",
    }
}

/// The uniform branch and the one-bump branch of `family` over [from, to] with arclength
/// steps up to `step` (the bump branch is traced from its BP even when the BP lies outside
/// the range; only its points inside the range are kept).
pub fn continue_states(
    family: Family,
    from: f64,
    to: f64,
    step: f64,
    max_points: usize,
) -> Branches {
    let (lo, hi) = (from.min(to), from.max(to));
    let bp = branch_point(&family).filter(|p| p.is_finite() && *p > 0.0);
    let uniform = uniform_branch(&family, from, to, step, max_points, bp);
    let beta_ref = family.beta_t(bp.unwrap_or(hi)).0.max(family.beta_t(hi).0);
    let sc = map_near(family, beta_ref);
    let (modes, grid) = (sc.modes().len(), sc.grid());
    let Some(pc) = bp else {
        return Branches {
            uniform,
            bump: Vec::new(),
            end: None,
            modes,
            grid,
        };
    };
    let tracer = Tracer {
        sc: &sc,
        lo: lo.min(pc),
        hi: hi.max(pc),
        step,
        max_points,
    };
    let mut y0 = DVector::zeros(modes + 1);
    y0[modes] = pc;
    let mut t0 = DVector::zeros(modes + 1);
    t0[0] = 1.0;
    let Some(eval) = sc.evaluate(&y0.rows(0, modes).into_owned(), pc) else {
        return Branches {
            uniform,
            bump: Vec::new(),
            end: Some("stalled"),
            modes,
            grid,
        };
    };
    let start = Solved {
        y: y0,
        eval,
        special: None,
    };
    let (points, end) = tracer.trace(start, t0);
    let mut bump = vec![StatePoint {
        p: pc,
        r1: 0.0,
        stable: false,
        point: None,
        rate: 0.0,
    }];
    bump.extend(points.iter().map(|s| {
        let rate = rate_of(&family, &s.y, &s.eval.rho).unwrap_or(f64::NAN);
        StatePoint {
            p: s.y[modes],
            r1: s.y[0],
            stable: rate < 0.0,
            point: s.special,
            rate,
        }
    }));
    bump.retain(|s| s.p >= lo - 1e-12 * hi.abs() && s.p <= hi + 1e-12 * hi.abs());
    Branches {
        uniform,
        bump,
        end: Some(end_name(end)),
        modes,
        grid,
    }
}
