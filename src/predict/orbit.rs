//! One orbit of the OA flow with its divergence integral, and its crossings of a section: the
//! one integration of periodic orbits, for `tokdyn predict` (return maps) and for the multiple
//! shooting of `bifurcation::periodic` (with the variational equations).
//!
//! The state is (Re R, Im R, q), or with the variational equations (Re R, Im R, Phi, w, q), with
//!
//! ```text
//! R' = s F(R),   Phi' = s J(R) Phi, Phi(0) = I,   w' = s (J(R) w + F_p(R)), w(0) = 0,
//! q' = s tr J(R),
//! ```
//!
//! s = +1 forward in time, -1 backward (unstable objects attract backward). In the plane the
//! Liouville formula gives the area factor of the flow over a time t as exp(q(t)); around a
//! periodic orbit of period T the non-trivial Floquet multiplier is exp(q(T) - q(0))
//! (docs/MATH.md §6.1). The integrator is the crate's DOP853 with its dense output of order 7:
//! a crossing of the line {Re((R - a) conj(n)) = 0} from the negative to the positive side is
//! located inside a step by bisection on the interpolant.

use std::borrow::Cow;

use nalgebra::{Matrix2, Vector2};
use num_complex::Complex64;

use super::fixed::oa_jacobian;
use crate::integrate::dop853::Dop853;
use crate::integrate::Dynamics;
use crate::observe::OrderParameters;
use crate::reduced::SecondHarmonic;

/// Relative and absolute tolerances of the orbits.
const RTOL: f64 = 1e-11;
const ATOL: f64 = 1e-13;

/// The OA field with the divergence integral, in the direction `sign`, and with the
/// variational equations when `variational` holds F_p (the field of the coefficients'
/// derivative in the parameter p).
pub(crate) struct Field {
    pub sh: SecondHarmonic,
    pub sign: f64,
    pub variational: Option<SecondHarmonic>,
}

/// The most components of a state: R (2), Phi (4), w (2), q.
const MAX_DIMENSION: usize = 9;

impl Field {
    /// The field of `sh` in the direction `sign`, without variational equations.
    pub fn new(sh: SecondHarmonic, sign: f64) -> Self {
        Field {
            sh,
            sign,
            variational: None,
        }
    }

    /// The state at R = `start` with q = 0 (and Phi = I, w = 0).
    fn initial_state(&self, start: Complex64) -> Vec<f64> {
        if self.variational.is_some() {
            vec![start.re, start.im, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
        } else {
            vec![start.re, start.im, 0.0]
        }
    }
}

impl Dynamics for Field {
    fn dimension(&self) -> usize {
        if self.variational.is_some() {
            MAX_DIMENSION
        } else {
            3
        }
    }
    fn rhs(&self, y: &[f64], dy: &mut [f64]) {
        let r = Complex64::new(y[0], y[1]);
        let f = self.sh.ott_antonsen_rhs(r);
        let j = oa_jacobian(&self.sh, r);
        dy[0] = self.sign * f.re;
        dy[1] = self.sign * f.im;
        if let Some(dsh) = &self.variational {
            let phi = Matrix2::new(y[2], y[4], y[3], y[5]);
            let dphi = j * phi;
            let fp = dsh.ott_antonsen_rhs(r);
            let dw = j * Vector2::new(y[6], y[7]) + Vector2::new(fp.re, fp.im);
            dy[2] = self.sign * dphi[(0, 0)];
            dy[3] = self.sign * dphi[(1, 0)];
            dy[4] = self.sign * dphi[(0, 1)];
            dy[5] = self.sign * dphi[(1, 1)];
            dy[6] = self.sign * dw[0];
            dy[7] = self.sign * dw[1];
        }
        dy[y.len() - 1] = self.sign * j.trace();
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
    prev: [f64; MAX_DIMENSION],
    prev_t: f64,
    failed: bool,
    /// The next step's crossing is not counted: the step leaves a point on the section.
    skip: bool,
    /// The orbit fails when |R| reaches this.
    bound: f64,
    /// The orbit fails after this many accepted steps.
    max_steps: u64,
}

impl<'a> Orbit<'a> {
    /// Starts at R = `start` (q = 0) and may run up to `t_limit`; it fails where |R| >= 1.5.
    pub fn new(field: &'a Field, start: Complex64, t_limit: f64) -> Self {
        let mut orbit = Self::until(field, start, t_limit.max(1e-9), u64::MAX);
        orbit.bound = 1.5;
        orbit
    }

    /// Starts at R = `start` (q = 0, Phi = I, w = 0) and runs to `t_end` at most, in at most
    /// `max_steps` accepted steps, wherever R goes.
    pub fn until(field: &'a Field, start: Complex64, t_end: f64, max_steps: u64) -> Self {
        let y0 = field.initial_state(start);
        let mut prev = [0.0; MAX_DIMENSION];
        prev[..y0.len()].copy_from_slice(&y0);
        Orbit {
            field,
            solver: Dop853::new(field, &y0, t_end, RTOL, ATOL),
            prev,
            prev_t: 0.0,
            failed: false,
            skip: true,
            bound: f64::INFINITY,
            max_steps,
        }
    }

    /// Do not count a crossing in the next step (the orbit is on a new section now; round-off
    /// may put it a hair on the negative side).
    pub fn leaving_section(&mut self) {
        self.skip = true;
    }

    /// One accepted step; false when the integration cannot go on (end of time, failure,
    /// non-finite state, |R| at the bound, too many steps).
    pub fn step(&mut self) -> bool {
        if self.failed {
            return false;
        }
        let (t, y) = (self.solver.t(), self.solver.y());
        self.prev_t = t;
        self.prev[..y.len()].copy_from_slice(y);
        let ok = self.solver.step(self.field).is_ok()
            && self.solver.accepted <= self.max_steps
            && self.solver.t() > t
            && self.solver.y().iter().all(|v| v.is_finite())
            && self.r().norm() < self.bound;
        self.failed = !ok;
        ok
    }

    /// The state now: R, then Phi and w (with the variational equations), then q.
    pub fn y(&self) -> &[f64] {
        self.solver.y()
    }

    pub fn t(&self) -> f64 {
        self.solver.t()
    }

    pub fn r(&self) -> Complex64 {
        let y = self.solver.y();
        Complex64::new(y[0], y[1])
    }

    pub fn q(&self) -> f64 {
        let y = self.solver.y();
        y[y.len() - 1]
    }

    /// The state at time t within the last step (its first `dimension` components).
    pub fn at(&mut self, t: f64) -> [f64; MAX_DIMENSION] {
        let mut out = [0.0; MAX_DIMENSION];
        let n = self.field.dimension();
        self.solver.interpolate(self.field, t, &mut out[..n]);
        out
    }

    /// R and q at time t within the last step.
    fn r_q_at(&mut self, t: f64) -> (Complex64, f64) {
        let y = self.at(t);
        let n = self.field.dimension();
        (Complex64::new(y[0], y[1]), y[n - 1])
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
            if section.side(self.r_q_at(mid).0) < 0.0 {
                a = mid;
            } else {
                b = mid;
            }
        }
        let (r, q) = self.r_q_at(b);
        let sigma = section.coordinate(r);
        (section.lo - 1e-9..=section.hi + 1e-9)
            .contains(&sigma)
            .then_some(Crossing { t: b, sigma, r, q })
    }
}
