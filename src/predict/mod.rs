//! The long-term behaviour of the Ott–Antonsen ODE (d = 2 LSA) decided from its phase space
//! (docs/MATH.md §6.1).
//!
//! R' = F(R) = i omega(R) R + (H(R) - conj(H(R)) R^2) / 2 is a planar flow on the closed unit
//! disk whose boundary circle is invariant. `predict` lists its objects and follows the orbit
//! from R(0) to the one it tends to:
//!
//! - fixed points in the disk with the eigenvalues of their Jacobian ([`fixed`]);
//! - zeros of the boundary drift g(phi) with g'(phi*) along the circle and u^T J u across it,
//!   and, when g has no zero, the circle's period and transverse multiplier ([`fixed`]);
//! - periodic orbits as fixed points of a Poincaré return map with the Floquet multiplier
//!   mu = exp(integral of tr J over a period): stable (mu < 1), unstable (mu > 1), neutral; a
//!   neutral family is a centre only when the return map is the identity ([`cycles`]);
//! - the attractor reached from R(0) ([`attractor`]), which gives the label:
//!
//! ```text
//! attracting interior fixed point                         -> interior-point
//! attracting boundary zero (or g = 0 and |R| -> 1)        -> converged-clusters
//! |R| -> 1, g without zeros, circle multiplier < 1        -> rotating-clusters
//! stable (or neutral, or centre-family) cycle, |R| swings -> oscillation
//! the same with |R| constant along it (swing < 1e-3)      -> rotating-interior
//! nothing of this by the horizon                          -> undetermined ("cannot decide: ...")
//! ```
//!
//! The tail classifier is not used.

pub mod attractor;
pub mod cluster_report;
pub mod cycles;
pub mod fixed;
pub(crate) mod orbit;
pub mod report;
pub mod uniform;

use num_complex::Complex64;
use serde::Serialize;

pub use fixed::{
    boundary_circle, boundary_zeros, fixed_points, oa_jacobian, transverse_rate, BoundaryCircle,
    BoundaryZero, FixedPoint, Stability,
};

use crate::classify::Label;
use crate::error::Error;
use crate::observe::order_parameter_r2;
use crate::reduced::SecondHarmonic;
use crate::scenario::{InitKind, Scenario};
use attractor::{follow, Objects, Outcome};
use orbit::Field;

/// The least horizon of a prediction.
pub const MIN_HORIZON: f64 = 2000.0;

/// The horizon of the prediction: the scenario's t_max (t_end when unset), and at least
/// [`MIN_HORIZON`] (the OA ODE is two-dimensional: following it is cheap).
pub fn horizon(scenario: &Scenario) -> f64 {
    scenario
        .time
        .t_end
        .max(scenario.time.t_max)
        .max(MIN_HORIZON)
}

/// R(0) of the OA model for a scenario: r0 e^{i phi0} for a Poisson start, else R2 of the tokens.
pub fn oa_start(scenario: &Scenario) -> Result<Complex64, Error> {
    Ok(if scenario.tokens.init == InitKind::Poisson {
        Complex64::from_polar(scenario.tokens.r0, scenario.tokens.phi0)
    } else {
        order_parameter_r2(&scenario.initial_tokens()?, 2)
    })
}

/// How a periodic orbit behaves under the return map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CycleKind {
    /// Floquet multiplier below 1: nearby orbits approach it.
    Stable,
    /// Multiplier above 1: nearby orbits leave it (drawn from the backward flow).
    Unstable,
    /// Multiplier 1 but the return map is not the identity (an isolated neutral cycle, e.g.
    /// at a fold of cycles).
    Neutral,
    /// One of a family of closed orbits around a centre: the return map is the identity.
    Centre,
}

impl CycleKind {
    /// The word used in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            CycleKind::Stable => "stable",
            CycleKind::Unstable => "unstable",
            CycleKind::Neutral => "neutral",
            CycleKind::Centre => "centre (neutral)",
        }
    }
}

/// A periodic orbit of the OA ODE found on a Poincaré section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LimitCycle {
    /// Stable, unstable, neutral or one of a centre's family.
    pub kind: CycleKind,
    /// `oscillation`, or `rotating-interior` when |R| is constant along it (to 1e-3).
    pub label: Label,
    /// The period (time to return to the section).
    pub period: f64,
    /// The Floquet multiplier forward in time, exp(integral of tr J over one period).
    pub multiplier: f64,
    /// Least |R| along the orbit.
    pub r_abs_min: f64,
    /// Largest |R| along the orbit.
    pub r_abs_max: f64,
    /// A point of the orbit (on the section where it was found).
    #[serde(serialize_with = "complex_pair")]
    pub start: Complex64,
    /// [`cycles::ORBIT_POINTS`] points around one period, evenly spaced in time, for drawing.
    #[serde(serialize_with = "complex_list")]
    pub orbit: Vec<Complex64>,
}

/// The points of a cycle around one period, for drawing it as a closed curve.
pub fn cycle_orbit(cycle: &LimitCycle) -> &[Complex64] {
    &cycle.orbit
}

/// Everything `tokdyn predict` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// Fixed points of the OA ODE in the closed unit disk.
    pub fixed_points: Vec<FixedPoint>,
    /// Zeros of g on the boundary circle |R| = 1, with both eigenvalues.
    pub boundary_zeros: Vec<BoundaryZero>,
    /// g vanishes identically: every boundary point is a fixed point.
    pub boundary_continuum: bool,
    /// The boundary circle as a periodic orbit, when g has no zero.
    pub boundary_circle: Option<BoundaryCircle>,
    /// Periodic orbits: the one reached from R(0), if any, and those [`limit_cycles`] finds.
    pub limit_cycles: Vec<LimitCycle>,
    /// R2(0), where the OA orbit starts.
    #[serde(serialize_with = "complex_pair")]
    pub start: Complex64,
    /// Where the orbit from R(0) was when its attractor was decided.
    #[serde(serialize_with = "complex_pair")]
    pub end: Complex64,
    /// How long the orbit from R(0) was followed at most.
    pub horizon: f64,
    /// The predicted label (`undetermined` when the analysis cannot decide).
    pub label: Label,
    /// The object reached and why it gives the label, in words.
    pub reason: String,
}

pub(crate) fn complex_pair<S: serde::Serializer>(z: &Complex64, s: S) -> Result<S::Ok, S::Error> {
    [z.re, z.im].serialize(s)
}

pub(crate) fn complex_pairs<S: serde::Serializer>(
    z: &[Complex64; 2],
    s: S,
) -> Result<S::Ok, S::Error> {
    [[z[0].re, z[0].im], [z[1].re, z[1].im]].serialize(s)
}

fn complex_list<S: serde::Serializer>(z: &[Complex64], s: S) -> Result<S::Ok, S::Error> {
    z.iter()
        .map(|z| [z.re, z.im])
        .collect::<Vec<_>>()
        .serialize(s)
}

/// The label and its reason from where the orbit from R(0) goes.
fn verdict(outcome: &Outcome) -> (Label, String) {
    match outcome {
        Outcome::Point { boundary: false, why, .. } => (
            Label::InteriorPoint,
            format!("the OA flow from R(0) reaches {why}"),
        ),
        Outcome::Point { boundary: true, why, .. } => (
            Label::ConvergedClusters,
            format!("the OA flow from R(0) reaches {why}: two antipodal clusters at rest"),
        ),
        Outcome::Circle(c) => (
            Label::RotatingClusters,
            format!(
                "the OA flow from R(0) reaches |R| = 1, where g has no zero: the clusters rotate with period {:.4} (transverse multiplier {:.4})",
                c.period, c.multiplier
            ),
        ),
        Outcome::Cycle(c) => (
            c.label,
            format!(
                "the OA flow from R(0) {} of period {:.4} (Floquet multiplier {:.6}, |R| in [{:.4}, {:.4}])",
                match c.kind {
                    CycleKind::Centre => "lies on a closed orbit of a centre's family (return map = identity)",
                    CycleKind::Neutral => "reaches a neutral cycle",
                    _ => "reaches a stable limit cycle",
                },
                c.period,
                c.multiplier,
                c.r_abs_min,
                c.r_abs_max
            ),
        ),
        Outcome::Undecided(why) => (Label::Undetermined, why.clone()),
    }
}

/// Fixed points, boundary zeros, and the label of the attractor the OA flow reaches from
/// R(0) = `start` within `horizon` (other limit cycles: [`limit_cycles`], which costs more).
pub fn predict(sh: &SecondHarmonic, start: Complex64, horizon: f64) -> Prediction {
    let space = PhaseSpace::of(sh);
    let field = Field::new(*sh, 1.0);
    let (outcome, end) = follow(&field, &space.objects(), start, horizon);
    let (label, reason) = verdict(&outcome);
    let limit_cycles = match outcome {
        Outcome::Cycle(c) => vec![c],
        _ => Vec::new(),
    };
    Prediction {
        fixed_points: space.fixed,
        boundary_zeros: space.zeros,
        boundary_continuum: space.continuum,
        boundary_circle: space.circle,
        limit_cycles,
        start,
        end,
        horizon,
        label,
        reason,
    }
}

/// Periodic orbits reached from a ring of starts (radii 0.2, 0.5, 0.8, 0.95, four angles
/// each) forward in time (stable, neutral and centre cycles) and backward (unstable ones),
/// added to `known` when new.
pub fn limit_cycles(sh: &SecondHarmonic, horizon: f64, known: &mut Vec<LimitCycle>) {
    ring_cycles(sh, &PhaseSpace::of(sh).objects(), horizon, known);
}

impl Prediction {
    /// Adds to `limit_cycles` the periodic orbits [`limit_cycles`] finds, from this
    /// prediction's own fixed points and boundary objects (not computed again).
    pub fn add_limit_cycles(&mut self, sh: &SecondHarmonic) {
        let objects = Objects {
            fixed: &self.fixed_points,
            zeros: &self.boundary_zeros,
            continuum: self.boundary_continuum,
            circle: self.boundary_circle,
        };
        ring_cycles(sh, &objects, self.horizon, &mut self.limit_cycles);
    }
}

/// The fixed points in the disk, the zeros of g on the boundary circle (or whether it is a
/// continuum of them) and, without zeros, the boundary circle as a periodic orbit.
struct PhaseSpace {
    fixed: Vec<FixedPoint>,
    zeros: Vec<BoundaryZero>,
    continuum: bool,
    circle: Option<BoundaryCircle>,
}

impl PhaseSpace {
    fn of(sh: &SecondHarmonic) -> Self {
        let fixed = fixed_points(sh);
        let (zeros, continuum) = boundary_zeros(sh);
        let circle = (zeros.is_empty() && !continuum)
            .then(|| boundary_circle(sh))
            .flatten();
        PhaseSpace {
            fixed,
            zeros,
            continuum,
            circle,
        }
    }

    /// The objects an orbit may reach.
    fn objects(&self) -> Objects<'_> {
        Objects {
            fixed: &self.fixed,
            zeros: &self.zeros,
            continuum: self.continuum,
            circle: self.circle,
        }
    }
}

/// The ring search of [`limit_cycles`] among the given phase-space objects.
fn ring_cycles(sh: &SecondHarmonic, objects: &Objects, horizon: f64, known: &mut Vec<LimitCycle>) {
    for sign in [1.0, -1.0] {
        let field = Field::new(*sh, sign);
        for radius in [0.2, 0.5, 0.8, 0.95] {
            for m in 0..4 {
                let s0 =
                    Complex64::from_polar(radius, std::f64::consts::TAU * m as f64 / 4.0 + 0.1);
                if let (Outcome::Cycle(c), _) = follow(&field, objects, s0, horizon) {
                    if !known.iter().any(|k| same_cycle(k, &c)) {
                        known.push(c);
                    }
                }
            }
        }
    }
}

/// Two cycles are the same when one's start lies on the other's orbit (within the largest
/// spacing of its points) and their periods agree to 1e-2 (the period of a cycle that passes
/// near a saddle is sensitive to where it was closed).
fn same_cycle(a: &LimitCycle, b: &LimitCycle) -> bool {
    let spacing = a
        .orbit
        .windows(2)
        .map(|w| (w[1] - w[0]).norm())
        .fold(0.0f64, f64::max);
    (a.period - b.period).abs() < 1e-2 * a.period.max(1.0)
        && a.orbit.iter().any(|p| (p - b.start).norm() <= spacing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Attention, Head, Kernel};
    use nalgebra::DMatrix;

    fn sh(a: [f64; 4], v: [f64; 4]) -> SecondHarmonic {
        let m = |x: [f64; 4]| DMatrix::from_row_slice(2, 2, &x);
        SecondHarmonic::new(&Attention::new(
            Kernel::Lsa,
            1.0,
            vec![Head { a: m(a), v: m(v) }],
        ))
        .unwrap()
    }

    #[test]
    fn jacobian_matches_finite_differences() {
        let s = sh([0.3, -1.1, 0.7, 0.4], [0.9, 0.2, -0.5, 0.6]);
        let r = Complex64::new(0.3, -0.2);
        let j = oa_jacobian(&s, r);
        let h = 1e-6;
        for (col, dr) in [(0, Complex64::new(h, 0.0)), (1, Complex64::new(0.0, h))] {
            let d = (s.ott_antonsen_rhs(r + dr) - s.ott_antonsen_rhs(r - dr)) / (2.0 * h);
            assert!((j[(0, col)] - d.re).abs() < 1e-8 && (j[(1, col)] - d.im).abs() < 1e-8);
        }
    }

    #[test]
    fn every_fixed_point_is_a_zero_and_the_boundary_ones_are_zeros_of_g() {
        let s = sh([0.6, -0.9, 0.4, 0.2], [0.9, 0.2, -0.5, 0.6]);
        let fps = fixed_points(&s);
        assert!(!fps.is_empty());
        let (zeros, continuum) = boundary_zeros(&s);
        assert!(!continuum);
        for p in &fps {
            assert!(s.ott_antonsen_rhs(p.r).norm() < 1e-11);
            if p.on_boundary {
                assert!(zeros
                    .iter()
                    .any(|z| (Complex64::from_polar(1.0, z.phi) - p.r).norm() < 1e-6));
            }
        }
        for z in &zeros {
            assert!(s.boundary_drift(z.phi).abs() < 1e-10);
        }
    }

    #[test]
    fn boundary_zeros_have_both_eigenvalues_of_the_boundary_fixed_points() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        for _ in 0..20 {
            let s = sh(
                [next(), next(), next(), next()],
                [next(), next(), next(), next()],
            );
            let fps = fixed_points(&s);
            for z in &boundary_zeros(&s).0 {
                let j = oa_jacobian(&s, Complex64::from_polar(1.0, z.phi));
                assert!((z.transverse - (j.trace() - z.slope)).abs() < 1e-6);
                let Some(p) = fps
                    .iter()
                    .find(|p| (Complex64::from_polar(1.0, z.phi) - p.r).norm() < 1e-6)
                else {
                    continue;
                };
                if z.slope.abs() > 1e-6 && z.transverse.abs() > 1e-6 {
                    assert_eq!(z.attracting, p.is_stable(), "{z:?} {p:?}");
                }
            }
        }
    }

    #[test]
    fn with_v_identity_every_antipodal_pair_is_fixed() {
        // V = I: two antipodal clusters on any axis are stationary, so g vanishes identically.
        let s = sh([0.6, -0.9, 0.4, 0.2], [1.0, 0.0, 0.0, 1.0]);
        assert!(boundary_zeros(&s).1);
    }

    #[test]
    fn case1_interior_point_and_clustering() {
        // V = I, A with negative definite symmetric part: a stable interior fixed point.
        let interior = sh([-0.5, 0.3, -0.3, -0.4], [1.0, 0.0, 0.0, 1.0]);
        let p = predict(&interior, Complex64::new(0.3, 0.1), 200.0);
        assert_eq!(p.label, Label::InteriorPoint, "{}", p.reason);
        // tr A > 0: clustering.
        let clusters = sh([1.0, -0.5, 0.8, 0.3], [1.0, 0.0, 0.0, 1.0]);
        let p = predict(&clusters, Complex64::new(0.3, 0.1), 200.0);
        assert_eq!(p.label, Label::ConvergedClusters, "{}", p.reason);
    }

    #[test]
    fn case4_oscillation_is_a_centre_family() {
        let s = sh([1.0, 0.0, 0.0, 1.0], [0.2, 1.0, -1.0, -0.2]);
        let p = predict(&s, Complex64::new(0.3, 0.0), 2000.0);
        assert_eq!(p.label, Label::Oscillation, "{}", p.reason);
        assert_eq!(p.limit_cycles[0].kind, CycleKind::Centre, "{}", p.reason);
    }
}
