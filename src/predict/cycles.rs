//! Periodic orbits of the OA flow from the Poincaré return map of a line section.
//!
//! On a segment the flow crosses transversally, the return map P(sigma) (the place of the next
//! crossing in the same direction) is increasing, so the crossings of one orbit are monotone and
//! converge to the first fixed point of P ahead of them (Poincaré–Bendixson). A fixed point
//! sigma* is a periodic orbit of period T; its derivative is the Floquet multiplier
//!
//! ```text
//! P'(sigma) = exp(q) (F(x0) . n) / (F(x1) . n),    mu = P'(sigma*) = exp(integral_0^T tr J dt),
//! ```
//!
//! x0 = the start on the section, x1 = its return, q the divergence integral along the way
//! (docs/MATH.md §6.1). Newton's method on P(sigma) - sigma uses this derivative. A cycle is
//! stable for mu < 1 - [`NEUTRAL`], unstable above 1 + [`NEUTRAL`], neutral otherwise; a neutral
//! cycle belongs to a centre's family only when P(sigma) = sigma to [`IDENTITY`] all along the
//! section (a slow spiral has mu close to 1 but moves by (mu - 1) sigma per turn).

use num_complex::Complex64;

use super::orbit::{Crossing, Field, Orbit, Section};
use super::{CycleKind, LimitCycle};
use crate::classify::{Label, SETTLED};

/// A multiplier within this of 1 is neutral.
pub const NEUTRAL: f64 = 1e-6;
/// The return map is the identity when it moves no sampled point by more than this.
pub const IDENTITY: f64 = 1e-8;
/// Two crossings closer than this close the orbit.
pub const CLOSED: f64 = 1e-9;
/// Points drawn around one period of a cycle.
pub const ORBIT_POINTS: usize = 200;

/// The return of a point of the section.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Return {
    pub sigma: f64,
    pub period: f64,
    /// Divergence integral (in the field's direction) over the return.
    pub q: f64,
    pub r: Complex64,
}

/// P(sigma): the next crossing of the section from its point sigma, within `t_limit`.
pub(crate) fn return_map(
    field: &Field,
    section: &Section,
    sigma: f64,
    t_limit: f64,
) -> Option<Return> {
    let mut orbit = Orbit::new(field, section.point(sigma), t_limit);
    while orbit.step() {
        if let Some(c) = orbit.crossing(section) {
            return Some(Return {
                sigma: c.sigma,
                period: c.t,
                q: c.q,
                r: c.r,
            });
        }
    }
    None
}

/// P'(sigma) from the divergence integral and the flow across the section at both ends.
pub(crate) fn derivative(
    field: &Field,
    section: &Section,
    from: Complex64,
    to: Complex64,
    q: f64,
) -> f64 {
    let across =
        |r: Complex64| (field.sh.ott_antonsen_rhs(r) * field.sign * section.normal.conj()).re;
    q.exp() * across(from) / across(to)
}

/// Newton's method on P(sigma) - sigma from `sigma`, kept inside the section; the fixed point
/// and its return when |P(sigma) - sigma| < [`CLOSED`].
pub(crate) fn refine(
    field: &Field,
    section: &Section,
    mut sigma: f64,
    t_limit: f64,
) -> Option<(f64, Return)> {
    for _ in 0..30 {
        let ret = return_map(field, section, sigma, t_limit)?;
        let f = ret.sigma - sigma;
        if f.abs() < CLOSED {
            return Some((sigma, ret));
        }
        let slope = derivative(field, section, section.point(sigma), ret.r, ret.q) - 1.0;
        if slope.abs() < 1e-14 {
            return None;
        }
        let next = (sigma - f / slope).clamp(section.lo, section.hi);
        if next == sigma {
            return None;
        }
        sigma = next;
    }
    None
}

/// Whether P moves every point strictly between `from` and `to` in the direction of `to`
/// (sampled at six points): then the crossings starting at `from` converge to `to`.
pub(crate) fn moves_towards(
    field: &Field,
    section: &Section,
    from: f64,
    to: f64,
    t_limit: f64,
) -> bool {
    let direction = (to - from).signum();
    (1..=6).all(|k| {
        let sigma = from + (to - from) * k as f64 / 7.0;
        return_map(field, section, sigma, t_limit)
            .is_some_and(|ret| (ret.sigma - sigma) * direction > 0.0)
    })
}

/// Whether the return map is the identity to [`IDENTITY`] on the section (seven points
/// spread over it, 5% in from its ends).
pub(crate) fn is_identity(field: &Field, section: &Section, t_limit: f64) -> bool {
    let (lo, hi) = (section.lo, section.hi);
    let margin = 0.05 * (hi - lo);
    (0..7).all(|k| {
        let sigma = lo + margin + (hi - lo - 2.0 * margin) * k as f64 / 6.0;
        return_map(field, section, sigma, t_limit)
            .is_some_and(|ret| (ret.sigma - sigma).abs() < IDENTITY)
    })
}

/// The kind of a cycle from its forward multiplier (and, when neutral, the centre test).
pub(crate) fn kind(multiplier: f64, identity: impl FnOnce() -> bool) -> CycleKind {
    if multiplier < 1.0 - NEUTRAL {
        CycleKind::Stable
    } else if multiplier > 1.0 + NEUTRAL {
        CycleKind::Unstable
    } else if identity() {
        CycleKind::Centre
    } else {
        CycleKind::Neutral
    }
}

/// [`ORBIT_POINTS`] points of the periodic orbit through `start`, evenly spaced in time over
/// one period (forward in time), and the least and largest |R| along it (at the points and at
/// every step of the integrator).
pub(crate) fn sample_orbit(
    field: &Field,
    start: Complex64,
    period: f64,
) -> (Vec<Complex64>, f64, f64) {
    let forward = Field::new(field.sh, 1.0);
    let mut orbit = Orbit::new(&forward, start, period);
    let mut points = vec![start];
    let (mut lo, mut hi) = (start.norm(), start.norm());
    let mut k = 1;
    while k < ORBIT_POINTS && orbit.step() {
        (lo, hi) = (lo.min(orbit.r().norm()), hi.max(orbit.r().norm()));
        while k < ORBIT_POINTS && (k as f64) * period / ORBIT_POINTS as f64 <= orbit.t() {
            let y = orbit.at(k as f64 * period / ORBIT_POINTS as f64);
            let r = Complex64::new(y[0], y[1]);
            (lo, hi) = (lo.min(r.norm()), hi.max(r.norm()));
            points.push(r);
            k += 1;
        }
    }
    (points, lo, hi)
}

/// A periodic orbit through `start` with its period and divergence integral in the field's
/// direction.
pub(crate) fn cycle(
    field: &Field,
    start: Complex64,
    period: f64,
    q: f64,
    kind: CycleKind,
) -> LimitCycle {
    let (orbit, lo, hi) = sample_orbit(field, start, period);
    LimitCycle {
        kind,
        label: if hi - lo < SETTLED {
            Label::RotatingInterior
        } else {
            Label::Oscillation
        },
        period,
        multiplier: (field.sign * q).exp(),
        r_abs_min: lo,
        r_abs_max: hi,
        start,
        orbit,
    }
}

/// The cycle closed by two successive crossings of one orbit (|sigma_1 - sigma_0| < CLOSED).
pub(crate) fn closed(
    field: &Field,
    section: &Section,
    a: &Crossing,
    b: &Crossing,
    t_limit: f64,
) -> LimitCycle {
    let q = b.q - a.q;
    let multiplier = (field.sign * q).exp();
    let k = kind(multiplier, || is_identity(field, section, t_limit));
    cycle(field, b.r, b.t - a.t, q, k)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::predict::predict;
    use crate::scenario::{ModelKind, Scenario};

    /// The large limit cycle of d = 2 LSA with A, V Gaussian of seeds 19 and 126.
    fn seed_19_126() -> SecondHarmonic {
        let text = r#"
name = "seed-19-126"
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = { random = "gaussian", seed = 19 }
V = { random = "gaussian", seed = 126 }
[tokens]
n = 64
init = "poisson"
r0 = 0.3
[time]
t_end = 100.0
samples = 11
"#;
        let s = Scenario::from_toml_str(text, Path::new("t.toml"), Path::new("."), &[]).unwrap();
        crate::simulation::second_harmonic(&s, ModelKind::Oa).unwrap()
    }

    use crate::reduced::SecondHarmonic;

    #[test]
    fn the_multiplier_is_the_slope_of_the_return_map() {
        let sh = seed_19_126();
        let p = predict(&sh, Complex64::from_polar(0.3, 0.0), 3000.0);
        assert_eq!(p.label, Label::Oscillation, "{}", p.reason);
        let c = &p.limit_cycles[0];
        assert_eq!(c.kind, CycleKind::Stable);
        // The minima of |R2| of a long simulation are 221.4 apart (tests/labels.rs).
        assert!((c.period / 221.4 - 1.0).abs() < 0.02, "period {}", c.period);
        let field = Field::new(sh, 1.0);
        // The section through the point of the cycle farthest from the boundary (the cycle
        // passes within 1e-6 of a boundary saddle).
        let inner = c
            .orbit
            .iter()
            .min_by(|a, b| a.norm().total_cmp(&b.norm()))
            .unwrap();
        let section = Section::across(&field, *inner).unwrap();
        let h = 1e-5;
        let p = |s: f64| {
            return_map(&field, &section, s, 10.0 * c.period)
                .unwrap()
                .sigma
        };
        let slope = (p(h) - p(-h)) / (2.0 * h);
        assert!(
            (slope - c.multiplier).abs() < 1e-6 + 1e-3 * c.multiplier,
            "finite differences {slope} vs exp(integral of tr J) {}",
            c.multiplier
        );
        // The drawn orbit is closed: P(0) = 0 on the section through its point (to 1e-6: the
        // saddle passage amplifies the 1e-9 of the cycle's start).
        assert!(
            p(0.0).abs() < 1e-6,
            "P(0) = {}, slope {slope}, mu {}",
            p(0.0),
            c.multiplier
        );
    }
}
