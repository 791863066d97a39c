//! The attractor an orbit of the OA flow reaches, by following it and reading its crossings of
//! a section.
//!
//! By Poincaré–Bendixson a bounded orbit of a planar flow tends to a fixed point, a periodic
//! orbit, or a chain of fixed points joined by orbits. The orbit from R(0) is integrated step by
//! step. It has reached
//!
//! - a fixed point that attracts (both eigenvalues with negative real part; for a boundary zero
//!   g'(phi*) < 0 and u^T J u < 0) once it is within [`NEAR`] of it; a boundary zero that
//!   attracts or has an eigenvalue 0 and none positive (the case-4 critical line, approached as
//!   1/t) also once within [`NEAR_ALGEBRAIC`] after approaching it for [`APPROACH_STEPS`]
//!   steps in a row;
//! - the boundary circle without zeros of g (rotating clusters) once 1 - |R| < [`NEAR`] and
//!   the circle's transverse multiplier is below 1;
//! - a periodic orbit when two crossings of the section close to [`cycles::CLOSED`], or when
//!   Newton's method on the return map finds a fixed point sigma* ahead of the crossings with
//!   P moving every sampled point between them towards sigma* (the crossings converge to it).
//!
//! The section is the line across the flow through the orbit's point at the time of anchoring;
//! when the orbit does not come back to it within a waiting time (doubled each time, starting at
//! [`FIRST_WAIT`]), it is anchored again at the orbit's current point. Newton's method is tried
//! at the 1st, 2nd, 4th, 8th ... return. When none of this happens by the horizon the answer is
//! "cannot decide".

use num_complex::Complex64;

use super::cycles::{self, NEUTRAL};
use super::fixed::{transverse_rate, BoundaryCircle, BoundaryZero, FixedPoint};
use super::orbit::{Crossing, Field, Orbit, Section};
use super::LimitCycle;

/// Distance at which an orbit has reached a hyperbolic attractor.
pub const NEAR: f64 = 1e-5;
/// Distance at which an orbit has reached a non-hyperbolic attracting boundary zero.
pub const NEAR_ALGEBRAIC: f64 = 1e-2;
/// Steps in a row that bring the orbit closer to such a zero before it counts as reached.
pub const APPROACH_STEPS: usize = 20;
/// Time the orbit is given to return to a fresh section before it is anchored again.
pub const FIRST_WAIT: f64 = 50.0;
/// Real parts of eigenvalues within this of 0 count as 0.
const ZERO_RATE: f64 = 1e-9;

/// What the phase portrait holds: the objects an orbit may tend to.
pub(crate) struct Objects<'a> {
    pub fixed: &'a [FixedPoint],
    pub zeros: &'a [BoundaryZero],
    pub continuum: bool,
    pub circle: Option<BoundaryCircle>,
}

/// Where an orbit goes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// A fixed point: inside the disk or on the boundary circle; the text says which and why.
    Point {
        r: Complex64,
        boundary: bool,
        why: String,
    },
    /// The boundary circle, g without zeros: rotating clusters.
    Circle(BoundaryCircle),
    /// A periodic orbit (or a member of a centre's family).
    Cycle(LimitCycle),
    /// Nothing decided by the horizon; the text says why.
    Undecided(String),
}

/// Whether `r` has reached an attractor (in the field's direction) that is a point or the
/// boundary circle.
fn reached(
    field: &Field,
    objects: &Objects<'_>,
    r: Complex64,
    approaching: bool,
) -> Option<Outcome> {
    let sign = field.sign;
    for p in objects.fixed.iter().filter(|p| !p.on_boundary) {
        let attracts = p.eigenvalues.iter().all(|e| sign * e.re < -ZERO_RATE);
        if attracts && (r - p.r).norm() < NEAR {
            let [a, b] = p.eigenvalues;
            return Some(Outcome::Point {
                r: p.r,
                boundary: false,
                why: format!(
                    "the attracting interior fixed point R = {:.6}{:+.6}i with eigenvalues {:.4}{:+.4}i, {:.4}{:+.4}i",
                    p.r.re, p.r.im, a.re, a.im, b.re, b.im
                ),
            });
        }
    }
    for z in objects.zeros {
        let d = (r - Complex64::from_polar(1.0, z.phi)).norm();
        let (along, across) = (sign * z.slope, sign * z.transverse);
        let hyperbolic = along < -ZERO_RATE && across < -ZERO_RATE;
        let algebraic = !hyperbolic && along <= ZERO_RATE && across <= ZERO_RATE;
        if (hyperbolic && d < NEAR)
            || ((hyperbolic || algebraic) && approaching && d < NEAR_ALGEBRAIC)
        {
            return Some(Outcome::Point {
                r: Complex64::from_polar(1.0, z.phi),
                boundary: true,
                why: format!(
                    "the zero phi = {:.6} of g on |R| = 1 (eigenvalues {:.4} along the circle, {:.4} across it{})",
                    z.phi,
                    z.slope,
                    z.transverse,
                    if hyperbolic { "" } else { "; not hyperbolic: an algebraic approach" }
                ),
            });
        }
    }
    if 1.0 - r.norm() < NEAR {
        if objects.continuum && sign * transverse_rate(&field.sh, r.arg()) < 0.0 {
            return Some(Outcome::Point {
                r: r / r.norm(),
                boundary: true,
                why: "|R| = 1, where g vanishes identically: every cluster axis is fixed".into(),
            });
        }
        if let Some(c) = objects.circle.filter(|c| sign * c.multiplier.ln() < 0.0) {
            return Some(Outcome::Circle(c));
        }
    }
    None
}

/// Follows the orbit of `field` from `start` up to `horizon`: where it goes, and where it was
/// when that was decided.
pub(crate) fn follow(
    field: &Field,
    objects: &Objects<'_>,
    start: Complex64,
    horizon: f64,
) -> (Outcome, Complex64) {
    if field.sh.ott_antonsen_rhs(start).norm() < 1e-13 {
        let boundary = (start.norm() - 1.0).abs() < 1e-9;
        let why = "R(0) itself, a fixed point".to_string();
        return (
            Outcome::Point {
                r: start,
                boundary,
                why,
            },
            start,
        );
    }
    let mut orbit = Orbit::new(field, start, horizon);
    let mut follower = Follower::new(field, start);
    let (mut last_distance, mut approach) = (f64::INFINITY, 0);
    while orbit.step() {
        let r = orbit.r();
        let distance = nearest_zero_distance(objects, r);
        approach = if distance < last_distance {
            approach + 1
        } else {
            0
        };
        last_distance = distance;
        if let Some(o) = reached(field, objects, r, approach >= APPROACH_STEPS) {
            return (o, r);
        }
        if let Some(o) = follower.after_step(&mut orbit, horizon) {
            return (on_the_circle(o, objects), r);
        }
    }
    let r = orbit.r();
    let why = if orbit.t() < horizon * (1.0 - 1e-12) {
        format!(
            "cannot decide: the OA orbit from R(0) could not be integrated past t = {:.6}",
            orbit.t()
        )
    } else {
        format!(
            "cannot decide: by t = {horizon} the OA orbit from R(0) neither reaches a fixed point or the boundary circle nor closes on a cycle of the return map (a period beyond the horizon, or a very slow approach); R = {:.6}{:+.6}i there",
            r.re, r.im
        )
    };
    (Outcome::Undecided(why), r)
}

/// A cycle found on |R| = 1 is the boundary circle itself.
fn on_the_circle(outcome: Outcome, objects: &Objects<'_>) -> Outcome {
    match (outcome, objects.circle) {
        (Outcome::Cycle(c), Some(circle)) if c.r_abs_min > 1.0 - NEAR => Outcome::Circle(circle),
        (Outcome::Cycle(c), None) if c.r_abs_min > 1.0 - NEAR => Outcome::Undecided(
            "cannot decide: the orbit from R(0) winds along |R| = 1 through zeros of g that do not attract (a cycle of saddle connections)".into(),
        ),
        (o, _) => o,
    }
}

fn nearest_zero_distance(objects: &Objects<'_>, r: Complex64) -> f64 {
    objects
        .zeros
        .iter()
        .map(|z| (r - Complex64::from_polar(1.0, z.phi)).norm())
        .fold(f64::INFINITY, f64::min)
}

/// The section and the crossings of the followed orbit.
struct Follower<'a> {
    field: &'a Field,
    section: Option<Section>,
    crossings: Vec<Crossing>,
    anchored_at: f64,
    wait: f64,
}

impl<'a> Follower<'a> {
    fn new(field: &'a Field, start: Complex64) -> Self {
        let mut f = Follower {
            field,
            section: None,
            crossings: Vec::new(),
            anchored_at: 0.0,
            wait: FIRST_WAIT,
        };
        f.anchor(start, 0.0, 0.0);
        f
    }

    fn anchor(&mut self, r: Complex64, t: f64, q: f64) {
        self.section = Section::across(self.field, r);
        self.crossings = vec![Crossing {
            t,
            sigma: 0.0,
            r,
            q,
        }];
        self.anchored_at = t;
    }

    /// Reads the last step: a crossing, perhaps a cycle; re-anchors when the wait is over.
    fn after_step(&mut self, orbit: &mut Orbit<'_>, horizon: f64) -> Option<Outcome> {
        let last = self.crossings.last().map_or(self.anchored_at, |c| c.t);
        if let Some(section) = self.section {
            if let Some(c) = orbit.crossing(&section) {
                self.crossings.push(c);
                return self.analyse(&section, horizon - orbit.t());
            }
        }
        if orbit.t() - last > self.wait {
            self.wait *= 2.0;
            self.anchor(orbit.r(), orbit.t(), orbit.q());
            orbit.leaving_section();
        }
        None
    }

    /// A cycle closed by the last two crossings, or found ahead of them by Newton's method.
    fn analyse(&self, section: &Section, budget: f64) -> Option<Outcome> {
        let k = self.crossings.len() - 1;
        let (a, b) = (&self.crossings[k - 1], &self.crossings[k]);
        let field = self.field;
        let t_limit = (8.0 * (b.t - a.t))
            .max(FIRST_WAIT)
            .min(budget.max(FIRST_WAIT));
        if (b.sigma - a.sigma).abs() < cycles::CLOSED {
            return Some(Outcome::Cycle(cycles::closed(
                field, section, a, b, t_limit,
            )));
        }
        if !k.is_power_of_two() {
            return None;
        }
        let slope = cycles::derivative(field, section, a.r, b.r, b.q - a.q);
        if slope >= 1.0 {
            return None;
        }
        let guess = a.sigma + (b.sigma - a.sigma) / (1.0 - slope);
        if !(section.lo..=section.hi).contains(&guess) {
            return None;
        }
        let (sigma, ret) = cycles::refine(field, section, guess, t_limit)?;
        let ahead = (sigma - b.sigma) * (b.sigma - a.sigma) > 0.0;
        let converges = ret.q.exp() <= 1.0 + NEUTRAL;
        if !(ahead && converges && cycles::moves_towards(field, section, b.sigma, sigma, t_limit)) {
            return None;
        }
        let multiplier = (field.sign * ret.q).exp();
        let kind = cycles::kind(multiplier, || cycles::is_identity(field, section, t_limit));
        Some(Outcome::Cycle(cycles::cycle(
            field,
            section.point(sigma),
            ret.period,
            ret.q,
            kind,
        )))
    }
}
