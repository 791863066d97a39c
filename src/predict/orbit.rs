//! One orbit of the OA flow with its divergence integral, and its crossings of a section.
//!
//! The state is (Re R, Im R, q) with
//!
//! ```text
//! R' = s F(R),    q' = s tr J(R),
//! ```
//!
//! s = +1 forward in time, -1 backward (unstable objects attract backward). In the plane the
//! Liouville formula gives the area factor of the flow over a time t as exp(q(t)); around a
//! periodic orbit of period T the non-trivial Floquet multiplier is exp(q(T) - q(0))
//! (docs/MATH.md §6.1). The integrator is the crate's DOP853 with its dense output of order 7:
//! a crossing of the line {Re((R - a) conj(n)) = 0} from the negative to the positive side is
//! located inside a step by bisection on the interpolant.

use std::borrow::Cow;

use num_complex::Complex64;

use super::fixed::oa_jacobian;
use crate::integrate::dop853::Dop853;
use crate::integrate::Dynamics;
use crate::observe::OrderParameters;
use crate::reduced::SecondHarmonic;

/// Relative and absolute tolerances of the orbits.
const RTOL: f64 = 1e-11;
const ATOL: f64 = 1e-13;

/// The OA field with the divergence integral, in the direction `sign`.
pub(crate) struct Field {
    pub sh: SecondHarmonic,
    pub sign: f64,
}

impl Dynamics for Field {
    fn dimension(&self) -> usize {
        3
    }
    fn rhs(&self, y: &[f64], dy: &mut [f64]) {
        let r = Complex64::new(y[0], y[1]);
        let f = self.sh.ott_antonsen_rhs(r);
        dy[0] = self.sign * f.re;
        dy[1] = self.sign * f.im;
        dy[2] = self.sign * oa_jacobian(&self.sh, r).trace();
    }
    fn order_parameters(&self, y: &[f64]) -> OrderParameters {
        OrderParameters::from_r2(Complex64::new(y[0], y[1]))
    }
    fn tokens<'a>(&self, _y: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        None
    }
}

/// A line section: the points a + sigma i n, crossed from Re((R - a) conj(n)) < 0 to >= 0.
/// Only crossings with sigma in [lo, hi] count (the part of the line the flow crosses
/// transversally, inside the disk).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Section {
    pub anchor: Complex64,
    pub normal: Complex64,
    pub lo: f64,
    pub hi: f64,
}

impl Section {
    /// The section through `anchor` across the flow there (normal along s F(anchor)), cut to
    /// the segment around `anchor` where the flow crosses it in the positive direction and
    /// |R| <= 1. None at a fixed point.
    pub fn across(field: &Field, anchor: Complex64) -> Option<Section> {
        let f = field.sh.ott_antonsen_rhs(anchor) * field.sign;
        if f.norm() < 1e-12 {
            return None;
        }
        let normal = f / f.norm();
        let s = Section {
            anchor,
            normal,
            lo: 0.0,
            hi: 0.0,
        };
        let transversal = |sigma: f64| {
            let p = s.point(sigma);
            p.norm() <= 1.0 && (field.sh.ott_antonsen_rhs(p) * field.sign * normal.conj()).re > 0.0
        };
        let (lo, hi) = (-end(&transversal, -1.0), end(&transversal, 1.0));
        Some(Section { lo, hi, ..s })
    }

    /// The point at coordinate sigma.
    pub fn point(&self, sigma: f64) -> Complex64 {
        self.anchor + Complex64::i() * self.normal * sigma
    }

    pub fn side(&self, r: Complex64) -> f64 {
        ((r - self.anchor) * self.normal.conj()).re
    }

    pub fn coordinate(&self, r: Complex64) -> f64 {
        ((r - self.anchor) * (Complex64::i() * self.normal).conj()).re
    }
}

/// How far the section stays transversal from its anchor in `direction`: steps of 1e-3 (at
/// most 2), then bisection of the last step to 1e-12.
fn end(transversal: &impl Fn(f64) -> bool, direction: f64) -> f64 {
    let step = 1e-3;
    let mut good = 0.0;
    while good < 2.0 && transversal(direction * (good + step)) {
        good += step;
    }
    let mut bad = good + step;
    while bad - good > 1e-12 {
        let mid = 0.5 * (good + bad);
        if transversal(direction * mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    good
}

/// A crossing of a section: time, place on the section, divergence integral.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Crossing {
    pub t: f64,
    pub sigma: f64,
    pub r: Complex64,
    pub q: f64,
}

/// An orbit being integrated step by step.
pub(crate) struct Orbit<'a> {
    field: &'a Field,
    solver: Dop853,
    prev: [f64; 3],
    prev_t: f64,
    failed: bool,
    /// The next step's crossing is not counted: the step leaves a point on the section.
    skip: bool,
}

impl<'a> Orbit<'a> {
    /// Starts at R = `start` (q = 0) and may run up to `t_limit`.
    pub fn new(field: &'a Field, start: Complex64, t_limit: f64) -> Self {
        let y0 = [start.re, start.im, 0.0];
        Orbit {
            field,
            solver: Dop853::new(field, &y0, t_limit.max(1e-9), RTOL, ATOL),
            prev: y0,
            prev_t: 0.0,
            failed: false,
            skip: true,
        }
    }

    /// Do not count a crossing in the next step (the orbit is on a new section now; round-off
    /// may put it a hair on the negative side).
    pub fn leaving_section(&mut self) {
        self.skip = true;
    }

    /// One accepted step; false when the integration cannot go on (end of time, failure,
    /// non-finite state).
    pub fn step(&mut self) -> bool {
        if self.failed {
            return false;
        }
        let (t, y) = (self.solver.t(), self.solver.y());
        self.prev_t = t;
        self.prev.copy_from_slice(y);
        let ok = self.solver.step(self.field).is_ok()
            && self.solver.t() > t
            && self.solver.y().iter().all(|v| v.is_finite())
            && self.r().norm() < 1.5;
        self.failed = !ok;
        ok
    }

    pub fn t(&self) -> f64 {
        self.solver.t()
    }

    pub fn r(&self) -> Complex64 {
        let y = self.solver.y();
        Complex64::new(y[0], y[1])
    }

    pub fn q(&self) -> f64 {
        self.solver.y()[2]
    }

    /// The state at time t within the last step.
    pub fn at(&mut self, t: f64) -> [f64; 3] {
        let mut out = [0.0; 3];
        self.solver.interpolate(self.field, t, &mut out);
        out
    }

    /// The crossing of `section` in the last step, if it crossed from the negative side to the
    /// non-negative one inside [lo, hi].
    pub fn crossing(&mut self, section: &Section) -> Option<Crossing> {
        let before = section.side(Complex64::new(self.prev[0], self.prev[1]));
        let after = section.side(self.r());
        if std::mem::take(&mut self.skip) || !(before < 0.0 && after >= 0.0) {
            return None;
        }
        let (mut a, mut b) = (self.prev_t, self.t());
        for _ in 0..100 {
            let mid = 0.5 * (a + b);
            if mid <= a || mid >= b {
                break;
            }
            let y = self.at(mid);
            if section.side(Complex64::new(y[0], y[1])) < 0.0 {
                a = mid;
            } else {
                b = mid;
            }
        }
        let y = self.at(b);
        let r = Complex64::new(y[0], y[1]);
        let sigma = section.coordinate(r);
        (section.lo - 1e-9..=section.hi + 1e-9)
            .contains(&sigma)
            .then_some(Crossing {
                t: b,
                sigma,
                r,
                q: y[2],
            })
    }
}
