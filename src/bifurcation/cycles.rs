//! Continuation of the periodic orbits born at the Hopf points of a one-parameter continuation
//! and of those `tokdyn predict` finds at the base value of the parameter (sweep file
//! `[continuation] cycles = true`; docs/MATH.md §10.3).
//!
//! The unknowns are y = (u_0..u_{m-1}, T, p) of multiple shooting with a Poincaré-section phase
//! condition ([`crate::bifurcation::periodic`]); the branch is traced by pseudo-arclength in the
//! scaled coordinates (u / sqrt(m), 0.1 T / T_k, p): the corrector solves the shooting system
//! and t_k . S (y - y_k) = ds by Newton, the section passing through u_0 of y_k normal to the
//! flow there.
//!
//! Start: at a Hopf point (p_H, x_H) with J q = i omega q, <q, q> = 1, first Lyapunov
//! coefficient l1 and transversality tau = d tr J / dp along the fixed-point branch, the normal
//! form gives the cycle at p = p_H + dp, sign(dp) = -sign(l1 tau):
//!
//! ```text
//! x(theta) = x*(p) + 2 rho Re(q e^{i theta}),   rho^2 = -(tau dp / 2) / (omega l1),   T = 2 pi / omega,
//! ```
//!
//! corrected at fixed p. A predicted orbit (period T, points at t = i T / m) is corrected at
//! the base value p_0 and followed both ways (two branches, after the Hopf-started ones);
//! it is skipped when a Hopf branch's cycle at p_0 has its period to 1e-6 relative and passes
//! within 1e-6 of its point. A branch ends at the ends of the interval (its last point exactly
//! there), where max |R2| reaches the boundary circle, where it shrinks back onto a Hopf point,
//! where the period grows without bound (HC when the orbit's slowest point is near a saddle,
//! the fitted law T = -a ln|p - p*| + b; SNIC otherwise, T = c |p - p*|^(-1/2)), or after
//! `max_points` points. A fold of cycles (LPC) is where the tangent's p-component changes
//! sign, located by bisection along the arclength (there mu = 1).
//!
//! `cycles.csv`: `branch,<parameter>,period,r2_abs_min,r2_abs_max,multiplier,stable,point`,
//! `multiplier` = exp(integral of tr J) (checked against tr M - 1, the largest difference in
//! summary.json), `stable` = multiplier < 1, `point` = LPC, HC, SNIC or empty.

use std::cell::RefCell;

use nalgebra::{DMatrix, DVector, Matrix2, Vector2};
use num_complex::Complex64;
use serde::Serialize;

use crate::bifurcation::periodic::{
    multipliers, sample, shooting_system, PlanarField, Section, Segment, Unknowns,
};
use crate::observe::progress::Reporter;
use crate::reduced::SecondHarmonic;

use crate::predict::CycleKind;

use super::base::BaseScenario;
use super::continuation::{BranchPoint, Family};
use super::corrector::{self, Step};
use super::spec::ContinuationSpec;
use crate::cells::{csv_text, fmt_f64};

/// Shooting segments per cycle.
const SEGMENTS: usize = 8;
/// Dense samples per segment for min / max |R2|.
const SAMPLES: usize = 64;
/// Newton iterations of the corrector.
const NEWTON_MAX: usize = 10;
/// The start's amplitude 2 rho (in |R2| units) when the interval allows it.
const START_AMPLITUDE: f64 = 0.02;
/// Weight of the relative period in the arclength.
const PERIOD_WEIGHT: f64 = 0.1;
/// A branch whose period exceeds this multiple of 2 pi / omega_H ends (HC or SNIC).
const PERIOD_LIMIT: f64 = 25.0;
/// Periods beyond this multiple of 2 pi / omega_H enter the fitted law.
const LAW_PERIODS: f64 = 2.0;
/// The multiplier check covers the cycles whose monodromy has at most this norm.
const MULTIPLIER_CHECKED: f64 = 1e4;
/// A saddle this close to the orbit's slowest point makes the end homoclinic.
const NEAR_SADDLE: f64 = 0.05;
/// A branch whose p stays fixed to round-off for this many points while the period grows
/// has reached its limit (HC or SNIC).
const FROZEN_POINTS: usize = 5;
/// Fewest points of the fitted law.
const LAW_POINTS: usize = 5;
/// A cycle whose max |R2| reaches 1 - this has reached the boundary circle.
const BOUNDARY_GAP: f64 = 1e-4;
/// An LPC's multiplier is within this of 1.
const LPC_MULTIPLIER: f64 = 1e-3;
/// Bisection steps locating an LPC.
const LOCATE_STEPS: usize = 40;
/// A predicted orbit whose period (relative) and point agree to this with a Hopf branch's
/// cycle at the base value lies on that branch.
const SAME_CYCLE: f64 = 1e-6;
use super::continuation::INTERRUPTED;

/// One cycle of a branch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CyclePoint {
    pub p: f64,
    pub period: f64,
    pub r2_abs_min: f64,
    pub r2_abs_max: f64,
    /// exp(integral of tr J over one period).
    pub multiplier: f64,
    /// tr M - 1 from the monodromy (the check).
    pub monodromy_multiplier: f64,
    /// The Frobenius norm of the monodromy M.
    pub monodromy_norm: f64,
    /// `LPC`, `HC` or `SNIC`.
    pub special: Option<&'static str>,
}

impl CyclePoint {
    /// The multiplier inside the unit circle.
    pub fn stable(&self) -> bool {
        self.multiplier < 1.0
    }
}

/// The fitted law of a branch whose period grows without bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeriodLaw {
    /// `HC` or `SNIC`.
    pub kind: &'static str,
    /// `period = -a ln|p - p*| + b` or `period = a |p - p*|^(-1/2)`.
    pub law: &'static str,
    pub a: f64,
    /// The constant of the HC law (null for SNIC).
    pub b: Option<f64>,
    pub p_star: f64,
    /// The eigenvalues (lambda_s, lambda_u) of the saddle near the orbit (HC).
    pub saddle_eigenvalues: Option<[f64; 2]>,
    /// a in theory (HC): 1 / min(lambda_u, -lambda_s).
    pub a_theory: Option<f64>,
    /// Points fitted.
    pub points: usize,
}

/// A periodic orbit `tokdyn predict` finds in the base scenario, where a branch starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PredictedOrbit {
    /// The base value of the parameter.
    pub p: f64,
    pub period: f64,
    /// A point of the orbit.
    pub point: Complex64,
    /// `stable`, `unstable` or `neutral`.
    pub kind: &'static str,
    /// The direction of p the branch leaves in (+1 or -1).
    pub direction: f64,
}

/// One traced cycle branch.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleBranch {
    /// The Hopf point it starts from (`None` for a branch started at a predicted orbit).
    pub hopf: Option<BranchPoint>,
    /// The predicted orbit it starts from (`None` for a branch started at a Hopf point).
    pub predicted: Option<PredictedOrbit>,
    pub points: Vec<CyclePoint>,
    /// How it ended: `interval`, `boundary`, `hopf`, `HC`, `SNIC`, `max_points`, `stalled`.
    pub end: &'static str,
    pub law: Option<PeriodLaw>,
}

/// What the cycle continuation writes.
pub struct Report {
    /// `cycles.csv`.
    pub csv: String,
    pub branches: Vec<CycleBranch>,
    /// summary.json `continuation.cycles`.
    pub summary: serde_json::Value,
}

/// A Hopf point to start from, with the transversality d tr J / dp of its fixed-point branch.
#[derive(Debug, Clone, Copy)]
pub struct HopfStart {
    pub point: BranchPoint,
    pub transversality: f64,
}

/// The Hopf points of the fixed-point branches, in their order.
pub fn hopf_starts(branches: &[Vec<BranchPoint>]) -> Vec<HopfStart> {
    let tr = |b: &BranchPoint| b.eigenvalues[0].re + b.eigenvalues[1].re;
    let mut out = Vec::new();
    for b in branches {
        for (k, pt) in b.iter().enumerate() {
            if pt.special != Some("H") {
                continue;
            }
            let prev = k.checked_sub(1).map(|i| &b[i]).unwrap_or(pt);
            let next = b.get(k + 1).unwrap_or(pt);
            let dp = next.p - prev.p;
            let transversality = if dp != 0.0 {
                (tr(next) - tr(prev)) / dp
            } else {
                f64::NAN
            };
            out.push(HopfStart {
                point: *pt,
                transversality,
            });
        }
    }
    out
}

/// The coefficients as an array.
fn coefficient_array(sh: &SecondHarmonic) -> [Complex64; 6] {
    let c = sh.coefficients();
    [c.0, c.1, c.2, c.3, c.4, c.5]
}

/// The tracer of cycle branches of one family.
struct Tracer<'a> {
    fam: &'a Family<'a>,
    spec: &'a ContinuationSpec,
    progress: Option<RefCell<Ticker>>,
    /// The last field built, by its parameter value.
    cache: RefCell<Option<(f64, PlanarField)>>,
    /// The base value of the parameter when predicted orbits are started there.
    base: Option<f64>,
    /// The cycles of the Hopf branches at `base` (unknowns), to skip the predicted orbits
    /// they already contain.
    at_base: RefCell<Vec<DVector<f64>>>,
}

struct Ticker {
    reporter: Reporter,
    parameter: String,
    branch: usize,
    branches: usize,
    points: usize,
    /// The branch starts at a predicted orbit.
    predicted: bool,
}

/// A corrected cycle: the unknowns, the Jacobian's periodicity rows there, the segments.
#[derive(Clone)]
struct Solved {
    y: DVector<f64>,
    a: DMatrix<f64>,
    segments: Vec<Segment>,
}

impl Tracer<'_> {
    fn tick(&self, p: f64) {
        if let Some(t) = &self.progress {
            let mut t = t.borrow_mut();
            t.points += 1;
            let what = format!(
                "cycles from {} {} of {}, {} points, {} = {}",
                if t.predicted { "start" } else { "Hopf point" },
                t.branch + 1,
                t.branches,
                t.points,
                t.parameter,
                crate::cells::short_number(p)
            );
            let fraction = t.branch as f64 / t.branches.max(1) as f64;
            t.reporter.show(fraction, &what);
        }
    }

    /// The field at p with its p-derivative (central differences of the coefficients, exact
    /// up to round-off for coefficients affine in p).
    fn field(&self, p: f64) -> Result<PlanarField, String> {
        if let Some((q, f)) = *self.cache.borrow() {
            if q.to_bits() == p.to_bits() {
                return Ok(f);
            }
        }
        let field = self.build_field(p)?;
        *self.cache.borrow_mut() = Some((p, field));
        Ok(field)
    }

    fn build_field(&self, p: f64) -> Result<PlanarField, String> {
        let h = 1e-6 * p.abs().max(1.0);
        let sh = self.fam.coefficients(p)?;
        let (lo, hi) = (
            coefficient_array(&self.fam.coefficients(p - h)?),
            coefficient_array(&self.fam.coefficients(p + h)?),
        );
        let mut d = [Complex64::new(0.0, 0.0); 6];
        for c in 0..6 {
            d[c] = (hi[c] - lo[c]) / (2.0 * h);
        }
        Ok(PlanarField::new(sh, SecondHarmonic::from_coefficients(d)))
    }

    /// The arclength weights at y.
    fn scale(y: &DVector<f64>) -> DVector<f64> {
        let n = y.len();
        let m = Unknowns::segments(y) as f64;
        DVector::from_fn(n, |i, _| {
            if i < n - 2 {
                1.0 / m.sqrt()
            } else if i == n - 2 {
                PERIOD_WEIGHT / Unknowns::period(y).abs().max(1e-12)
            } else {
                1.0
            }
        })
    }

    /// The section through u_0 of y, normal to the flow there.
    fn section(&self, y: &DVector<f64>) -> Result<Section, String> {
        let field = self.field(Unknowns::parameter(y))?;
        let u0 = Unknowns::point(y, 0);
        Ok(Section {
            point: u0,
            normal: field.f(u0),
        })
    }

    /// Newton on the shooting system and row . y = c from `guess` (the shared corrector; the
    /// convergence is judged on the step in the arclength weights).
    fn correct(
        &self,
        guess: DVector<f64>,
        section: &Section,
        row: &DVector<f64>,
        c: f64,
    ) -> Result<Option<Solved>, String> {
        let n = guess.len();
        let bordered = |y: &DVector<f64>| {
            if crate::interrupt::is_requested() {
                return Err(INTERRUPTED.to_string());
            }
            let field = self.field(Unknowns::parameter(y))?;
            Ok(shooting_system(&field, y, section)
                .map(|(r, a, _)| (a.insert_row(n - 1, 0.0), r.insert_row(n - 1, 0.0))))
        };
        let judge = |step: &DVector<f64>, y: &DVector<f64>| {
            if Unknowns::period(y) <= 0.0 {
                Step::Abandon
            } else if step.component_mul(&Self::scale(y)).norm() < 1e-10 {
                Step::Converged
            } else {
                Step::Again
            }
        };
        let Some(y) = corrector::correct(guess, row, c, NEWTON_MAX, bordered, judge)? else {
            return Ok(None);
        };
        let field = self.field(Unknowns::parameter(&y))?;
        let Some((r, a, segments)) = shooting_system(&field, &y, section) else {
            return Ok(None);
        };
        Ok((r.norm() < 1e-8).then_some(Solved { y, a, segments }))
    }

    /// The unit tangent (in scaled coordinates) at a solved cycle, oriented along `prev`.
    fn tangent(&self, s: &Solved, prev: &DVector<f64>) -> Result<Option<DVector<f64>>, String> {
        let n = s.y.len();
        let scale = Self::scale(&s.y);
        let section = self.section(&s.y)?;
        let mut a = s.a.clone();
        a.row_mut(n - 2).fill(0.0);
        a[(n - 2, 0)] = section.normal[0];
        a[(n - 2, 1)] = section.normal[1];
        for j in 0..n {
            let w = scale[j];
            a.column_mut(j).scale_mut(1.0 / w);
        }
        Ok(corrector::tangent(a.insert_row(n - 1, 0.0), prev))
    }

    /// Period, |R2| range and multiplier of a solved cycle.
    fn measure(&self, s: &Solved) -> Result<Option<CyclePoint>, String> {
        let y = &s.y;
        let p = Unknowns::parameter(y);
        let field = self.field(p)?;
        let Some(orbit) = orbit_samples(&field, y) else {
            return Ok(None);
        };
        let radii: Vec<(f64, f64)> = orbit.iter().map(|(t, x)| (*t, x.norm())).collect();
        let (mu, check, norm) = multipliers(&s.segments);
        let period = Unknowns::period(y);
        if !(mu.is_finite() && radii.iter().all(|r| r.1.is_finite())) {
            // A multiplier beyond the floating-point range ends the branch (nothing non-finite
            // is written).
            return Ok(None);
        }
        Ok(Some(CyclePoint {
            p,
            period,
            r2_abs_min: extremum(&radii, period, false),
            r2_abs_max: extremum(&radii, period, true),
            multiplier: mu,
            monodromy_multiplier: check,
            monodromy_norm: norm,
            special: None,
        }))
    }
}

impl Tracer<'_> {
    /// Keeps the cycle at the base value of p when the step y0 -> y1 reaches it.
    fn record_base(
        &self,
        y0: &DVector<f64>,
        y1: &DVector<f64>,
        section: &Section,
    ) -> Result<(), String> {
        let Some(base) = self.base else {
            return Ok(());
        };
        let (p0, p1) = (Unknowns::parameter(y0), Unknowns::parameter(y1));
        if p0 == p1 || (base - p0) * (base - p1) > 0.0 || base == p0 {
            return Ok(());
        }
        let guess = y0 + (y1 - y0) * ((base - p0) / (p1 - p0));
        let mut e_p = DVector::zeros(y0.len());
        e_p[y0.len() - 1] = 1.0;
        if let Some(s) = self.correct(guess, section, &e_p, base)? {
            self.at_base.borrow_mut().push(s.y);
        }
        Ok(())
    }

    /// The predicted orbit `o` as shooting unknowns at its parameter: the points of its drawn
    /// orbit at t = i T / m (they are evenly spaced in time), corrected at fixed p.
    fn predicted_cycle(
        &self,
        o: &PredictedOrbit,
        orbit: &[Complex64],
    ) -> Result<Option<Solved>, String> {
        let m = SEGMENTS;
        if orbit.len() < m || !orbit.len().is_multiple_of(m) {
            return Ok(None);
        }
        let mut y = DVector::zeros(2 * m + 2);
        let stride = orbit.len() / m;
        for i in 0..m {
            let u = if i == 0 { o.point } else { orbit[i * stride] };
            y[2 * i] = u.re;
            y[2 * i + 1] = u.im;
        }
        y[2 * m] = o.period;
        y[2 * m + 1] = o.p;
        let section = self.section(&y)?;
        let mut e_p = DVector::zeros(2 * m + 2);
        e_p[2 * m + 1] = 1.0;
        self.correct(y, &section, &e_p, o.p)
    }

    /// Whether the cycle through `point` with `period` at the base value is one of the Hopf
    /// branches' there: the same period to [`SAME_CYCLE`] relative and `point` within
    /// [`SAME_CYCLE`] of that cycle's orbit.
    fn traced(&self, point: Complex64, period: f64) -> Result<bool, String> {
        let x = Vector2::new(point.re, point.im);
        for y in self.at_base.borrow().iter() {
            if (Unknowns::period(y) / period - 1.0).abs() > SAME_CYCLE {
                continue;
            }
            let field = self.field(Unknowns::parameter(y))?;
            if orbit_distance(&field, y, x).is_some_and(|d| d < SAME_CYCLE) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The branch from a predicted orbit in its direction (the first cycle solved there).
    fn predicted_branch(
        &self,
        o: &PredictedOrbit,
        first: &Solved,
    ) -> Result<Result<CycleBranch, Skip>, String> {
        let Some(pt) = self.measure(first)? else {
            return Ok(Err("the predicted cycle could not be measured".into()));
        };
        let n = first.y.len();
        let mut along = DVector::zeros(n);
        along[n - 1] = o.direction;
        let Some(t) = self.tangent(first, &along)? else {
            return Ok(Err(
                "the branch has no tangent at the predicted cycle".into()
            ));
        };
        let reference = START_AMPLITUDE.min(0.5 * amplitude(&first.y));
        let mut branch = self.follow(first.clone(), pt, t, o.period, reference)?;
        branch.predicted = Some(*o);
        Ok(Ok(branch))
    }
}

/// The distance of x from the orbit of y: the nearest chord of the dense samples, then again
/// on samples 64 times finer around the nearest one.
fn orbit_distance(field: &PlanarField, y: &DVector<f64>, x: Vector2<f64>) -> Option<f64> {
    let coarse = orbit_samples(field, y)?;
    let n = coarse.len();
    let k = (0..n).min_by(|&a, &b| {
        (coarse[a].1 - x)
            .norm()
            .total_cmp(&(coarse[b].1 - x).norm())
    })?;
    let (t0, from) = coarse[(k + n - 1) % n];
    let t2 = coarse[(k + 1) % n].0;
    let span = (t2 - t0).rem_euclid(Unknowns::period(y));
    let fine = sample(field, from, span, SAMPLES * SAMPLES)?;
    let chord = |a: Vector2<f64>, b: Vector2<f64>| {
        let d = b - a;
        let s = if d.norm_squared() > 0.0 {
            ((x - a).dot(&d) / d.norm_squared()).clamp(0.0, 1.0)
        } else {
            0.0
        };
        (a + d * s - x).norm()
    };
    fine.windows(2)
        .map(|w| chord(w[0].1, w[1].1))
        .reduce(f64::min)
}

/// The orbit of y sampled densely: (t, x) over one period, in time order.
fn orbit_samples(field: &PlanarField, y: &DVector<f64>) -> Option<Vec<(f64, Vector2<f64>)>> {
    let m = Unknowns::segments(y);
    let tau = Unknowns::period(y) / m as f64;
    let mut out = Vec::new();
    for i in 0..m {
        let offset = tau * i as f64;
        out.extend(
            sample(field, Unknowns::point(y, i), tau, SAMPLES)?
                .into_iter()
                .map(|(t, x)| (offset + t, x)),
        );
    }
    Some(out)
}

/// The largest (or smallest) value of a periodic series (t_k, v_k) over one period, refined
/// by the vertex of the parabola through the extreme sample and its neighbours.
fn extremum(series: &[(f64, f64)], period: f64, largest: bool) -> f64 {
    let n = series.len();
    let sign = if largest { 1.0 } else { -1.0 };
    let k = (0..n)
        .max_by(|&a, &b| (sign * series[a].1).total_cmp(&(sign * series[b].1)))
        .unwrap_or(0);
    let (t0, v0) = series[(k + n - 1) % n];
    let (t1, v1) = series[k];
    let (t2, v2) = series[(k + 1) % n];
    // Unwrap the times around the period.
    let t0 = if t0 > t1 { t0 - period } else { t0 };
    let t2 = if t2 < t1 { t2 + period } else { t2 };
    let (h0, h2) = (t0 - t1, t2 - t1);
    // v(t1 + h) = v1 + b h + c h^2 through the three points.
    let (d0, d2) = ((v0 - v1) / h0, (v2 - v1) / h2);
    let c = (d2 - d0) / (h2 - h0);
    let b = d0 - c * h0;
    if !(c.is_finite() && b.is_finite()) || c * sign >= 0.0 {
        return v1;
    }
    let vertex = v1 - b * b / (4.0 * c);
    // Never further from v1 than the samples allow.
    if (vertex - v1) * sign >= 0.0
        && (vertex - v1).abs() <= (v0 - v1).abs().max((v2 - v1).abs()) + (v1.abs() * 1e-3)
    {
        vertex
    } else {
        v1
    }
}

/// Cycle amplitude of y: the largest distance of a shooting point from their mean.
fn amplitude(y: &DVector<f64>) -> f64 {
    let m = Unknowns::segments(y);
    let mean = (0..m).map(|i| Unknowns::point(y, i)).sum::<Vector2<f64>>() / m as f64;
    (0..m)
        .map(|i| (Unknowns::point(y, i) - mean).norm())
        .fold(0.0, f64::max)
}

/// An eigenvector q of J for i omega with <q, q> = 1.
fn hopf_eigenvector(j: &Matrix2<f64>, omega: f64) -> [Complex64; 2] {
    let iw = Complex64::new(0.0, omega);
    let (a, b, c, d) = (j[(0, 0)], j[(0, 1)], j[(1, 0)], j[(1, 1)]);
    let q = if b.abs() >= c.abs() {
        [Complex64::new(b, 0.0), iw - a]
    } else {
        [iw - d, Complex64::new(c, 0.0)]
    };
    let norm = (q[0].norm_sqr() + q[1].norm_sqr()).sqrt();
    [q[0] / norm, q[1] / norm]
}

/// Why a start was not made.
type Skip = String;

impl Tracer<'_> {
    /// The first cycle near the Hopf point (corrected at fixed p) and the Hopf point as
    /// unknowns (amplitude 0, period 2 pi / omega).
    fn first_cycle(&self, h: &HopfStart) -> Result<Result<(Solved, DVector<f64>), Skip>, String> {
        let (p_h, x_h) = (h.point.p, Vector2::new(h.point.r.re, h.point.r.im));
        let Some(l1) = h.point.l1.filter(|l| *l != 0.0 && l.is_finite()) else {
            return Ok(Err("l1 is not defined there".into()));
        };
        let tau = h.transversality;
        if !(tau.is_finite() && tau != 0.0) {
            return Ok(Err(
                "the eigenvalues cross the imaginary axis with zero speed".into(),
            ));
        }
        let field = self.field(p_h)?;
        let j = field.j(x_h);
        let det = j.determinant();
        if det.is_nan() || det <= 0.0 {
            return Ok(Err("det J <= 0 there".into()));
        }
        let omega = det.sqrt();
        let direction = -(l1 * tau).signum();
        let (lo, hi) = (
            self.spec.from.min(self.spec.to),
            self.spec.from.max(self.spec.to),
        );
        let room = if direction > 0.0 { hi - p_h } else { p_h - lo };
        if room <= 0.0 {
            return Ok(Err("the cycles lie outside the interval".into()));
        }
        // dp from the start amplitude, at most half the room and one step.
        let rate = (tau / 2.0).abs() / (omega * l1.abs());
        let rho_wanted = START_AMPLITUDE / 2.0;
        let dp = (rho_wanted * rho_wanted / rate)
            .min(0.5 * room)
            .min(self.spec.step);
        let rho = (rate * dp).sqrt();
        let p = p_h + direction * dp;
        let field = self.field(p)?;
        let Some(x_eq) = field.equilibrium(x_h) else {
            return Ok(Err(
                "the fixed point was not found beside the Hopf point".into()
            ));
        };
        let q = hopf_eigenvector(&field.j(x_eq), omega);
        let m = SEGMENTS;
        let period = 2.0 * std::f64::consts::PI / omega;
        let mut y = DVector::zeros(2 * m + 2);
        let mut y_h = DVector::zeros(2 * m + 2);
        for i in 0..m {
            let e = Complex64::from_polar(1.0, 2.0 * std::f64::consts::PI * i as f64 / m as f64);
            let u = x_eq + Vector2::new((q[0] * e).re, (q[1] * e).re) * (2.0 * rho);
            y[2 * i] = u[0];
            y[2 * i + 1] = u[1];
            y_h[2 * i] = x_h[0];
            y_h[2 * i + 1] = x_h[1];
        }
        y[2 * m] = period;
        y[2 * m + 1] = p;
        y_h[2 * m] = period;
        y_h[2 * m + 1] = p_h;
        let guess_amplitude = amplitude(&y);
        let u0 = Unknowns::point(&y, 0);
        let section = Section {
            point: u0,
            normal: field.f(u0),
        };
        let mut row = DVector::zeros(2 * m + 2);
        row[2 * m + 1] = 1.0;
        let mut solved = self.correct(y.clone(), &section, &row, p)?;
        if solved.is_none() {
            // Near a generalised Hopf point the cubic normal form misjudges p: fix the
            // amplitude of u_0 along the guess instead and let p follow.
            let d = Unknowns::point(&y, 0) - x_eq;
            let mut row = DVector::zeros(2 * m + 2);
            row[0] = d[0];
            row[1] = d[1];
            let c = d.dot(&Unknowns::point(&y, 0));
            solved = self.correct(y, &section, &row, c)?;
        }
        let Some(s) = solved else {
            return Ok(Err("the first cycle did not converge".into()));
        };
        if amplitude(&s.y) < 0.25 * guess_amplitude {
            return Ok(Err("the first cycle collapsed onto the fixed point".into()));
        }
        Ok(Ok((s, y_h)))
    }

    /// The cycle branch from one Hopf point.
    fn branch(&self, h: &HopfStart) -> Result<Result<CycleBranch, Skip>, String> {
        let (first, y_h) = match self.first_cycle(h)? {
            Ok(v) => v,
            Err(skip) => return Ok(Err(skip)),
        };
        let Some(pt) = self.measure(&first)? else {
            return Ok(Err("the first cycle could not be measured".into()));
        };
        let t_hopf = Unknowns::period(&y_h);
        let start_amplitude = amplitude(&first.y);
        let secant = (&first.y - &y_h).component_mul(&Self::scale(&first.y));
        let Some(t) = self.tangent(&first, &secant)? else {
            return Ok(Err("the branch has no tangent at its first cycle".into()));
        };
        let mut branch = self.follow(first, pt, t, t_hopf, start_amplitude)?;
        branch.hopf = Some(h.point);
        Ok(Ok(branch))
    }

    /// The branch from a solved first cycle `first` (measured: `pt`) along the unit tangent
    /// `t`; `t_ref` is the reference period of the end tests, `start_amplitude` the amplitude
    /// below which a grown branch has shrunk back onto a Hopf point.
    fn follow(
        &self,
        first: Solved,
        pt: CyclePoint,
        mut t: DVector<f64>,
        t_hopf: f64,
        start_amplitude: f64,
    ) -> Result<CycleBranch, String> {
        let mut points = vec![pt];
        let mut current = first;
        let (p_lo, p_hi) = (
            self.spec.from.min(self.spec.to),
            self.spec.from.max(self.spec.to),
        );
        let ds_max = self.spec.step;
        let ds_min = ds_max * 1e-6;
        let mut ds = ds_max;
        let mut grown = false;
        // Consecutive points whose p did not move while the period grew.
        let mut frozen = 0;
        let end = loop {
            if points.len() >= self.spec.max_points {
                break "max_points";
            }
            let y = &current.y;
            let scale = Self::scale(y);
            let pred = y + t.component_div(&scale) * ds;
            let section = self.section(y)?;
            let row = t.component_mul(&scale);
            let c = row.dot(y) + ds;
            let next = self.correct(pred.clone(), &section, &row, c)?;
            let accepted = next.filter(|n| (&n.y - y).component_mul(&scale).norm() <= 3.0 * ds);
            let Some(next) = accepted else {
                ds /= 2.0;
                if ds < ds_min {
                    break "stalled";
                }
                continue;
            };
            self.record_base(y, &next.y, &section)?;
            let p1 = Unknowns::parameter(&next.y);
            if p1 < p_lo || p1 > p_hi {
                let edge = if p1 < p_lo { p_lo } else { p_hi };
                let p0 = Unknowns::parameter(y);
                let frac = (edge - p0) / (p1 - p0);
                let guess = y + (&next.y - y) * frac;
                let mut e_p = DVector::zeros(y.len());
                e_p[y.len() - 1] = 1.0;
                if let Some(s) = self.correct(guess, &section, &e_p, edge)? {
                    if let Some(pt) = self.measure(&s)? {
                        points.push(pt);
                    }
                }
                break "interval";
            }
            let Some(pt) = self.measure(&next)? else {
                break "stalled";
            };
            if pt.r2_abs_max > 1.0 - BOUNDARY_GAP {
                if pt.r2_abs_max <= 1.0 + 1e-9 {
                    points.push(pt);
                }
                break "boundary";
            }
            let Some(t1) = self.tangent(&next, &t)? else {
                break "stalled";
            };
            let k = t.len() - 1;
            if t[k] * t1[k] < 0.0 {
                if let Some(lpc) = self.locate_fold(&current, &t, row.dot(&(&next.y - y)))? {
                    points.push(lpc);
                }
            }
            points.push(pt);
            self.tick(pt.p);
            let a = amplitude(&next.y);
            grown |= a > 2.0 * start_amplitude;
            let last_p = Unknowns::parameter(&current.y);
            let still = (pt.p - last_p).abs() <= 1e-13 * (1.0 + pt.p.abs());
            frozen = if still && pt.period > Unknowns::period(&current.y) {
                frozen + 1
            } else {
                0
            };
            let easy = (&next.y - &pred).component_mul(&scale).norm() < 0.1 * ds;
            current = next;
            t = t1;
            if grown && a < 0.5 * start_amplitude {
                break "hopf";
            }
            if pt.period > PERIOD_LIMIT * t_hopf || frozen >= FROZEN_POINTS {
                break "period";
            }
            if easy {
                ds = (ds * 1.5).min(ds_max);
            }
        };
        let mut branch = CycleBranch {
            hopf: None,
            predicted: None,
            points,
            end,
            law: None,
        };
        let long = branch
            .points
            .last()
            .is_some_and(|p| p.period > 3.0 * t_hopf);
        if matches!(end, "period" | "stalled" | "max_points") && long {
            self.classify_end(&mut branch, &current, t_hopf)?;
        }
        Ok(branch)
    }

    /// Bisection on the tangent's p-component along the arclength from `from` in direction t
    /// over [0, sigma1]: the LPC.
    fn locate_fold(
        &self,
        from: &Solved,
        t: &DVector<f64>,
        sigma1: f64,
    ) -> Result<Option<CyclePoint>, String> {
        let y = &from.y;
        let scale = Self::scale(y);
        let section = self.section(y)?;
        let row = t.component_mul(&scale);
        let k = t.len() - 1;
        let (mut lo, mut hi) = (0.0, sigma1);
        let g_lo = t[k];
        let mut best = None;
        for _ in 0..LOCATE_STEPS {
            let mid = 0.5 * (lo + hi);
            let guess = y + t.component_div(&scale) * mid;
            let Some(s) = self.correct(guess, &section, &row, row.dot(y) + mid)? else {
                break;
            };
            let Some(tm) = self.tangent(&s, t)? else {
                break;
            };
            if tm[k] * g_lo > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
            best = Some(s);
            if (hi - lo).abs() < 1e-12 {
                break;
            }
        }
        let Some(s) = best else {
            return Ok(None);
        };
        // A fold of cycles has mu = 1; a turn of p in round-off (near a homoclinic end) not.
        Ok(self
            .measure(&s)?
            .filter(|pt| (pt.multiplier - 1.0).abs() < LPC_MULTIPLIER)
            .map(|pt| CyclePoint {
                special: Some("LPC"),
                ..pt
            }))
    }

    /// HC or SNIC at the end of a branch whose period grew, with the fitted law.
    fn classify_end(
        &self,
        branch: &mut CycleBranch,
        last: &Solved,
        t_hopf: f64,
    ) -> Result<(), String> {
        let p = Unknowns::parameter(&last.y);
        let field = self.field(p)?;
        let Some(orbit) = orbit_samples(&field, &last.y) else {
            return Ok(());
        };
        let slowest = orbit
            .iter()
            .map(|(_, x)| *x)
            .min_by(|a, b| field.f(*a).norm().total_cmp(&field.f(*b).norm()))
            .unwrap_or(orbit[0].1);
        // A saddle at the orbit's slowest point (not a fixed point far away).
        let saddle = field
            .equilibrium(slowest)
            .filter(|x| (x - slowest).norm() < NEAR_SADDLE)
            .map(|x| field.j(x))
            .filter(|j| j.determinant() < 0.0);
        let fit_points = law_points(&branch.points, t_hopf);
        if fit_points.len() < 4 {
            return Ok(());
        }
        let law = match saddle {
            Some(j) => {
                let disc = (j.trace() * j.trace() / 4.0 - j.determinant()).sqrt();
                homoclinic_law(
                    &fit_points,
                    [j.trace() / 2.0 - disc, j.trace() / 2.0 + disc],
                )
            }
            None => snic_law(&fit_points),
        };
        if let Some(law) = law {
            if let Some(last) = branch.points.last_mut() {
                last.special = Some(law.kind);
            }
            branch.end = law.kind;
            branch.law = Some(law);
        }
        Ok(())
    }
}

/// The points (p, T) of a branch's end that the period law is fitted on, last first: periods
/// beyond LAW_PERIODS T_H whose p is resolved (differs from the last p by more than
/// round-off), from the largest such period down to half of it (at least LAW_POINTS).
fn law_points(points: &[CyclePoint], t_hopf: f64) -> Vec<(f64, f64)> {
    let Some(last) = points.last() else {
        return Vec::new();
    };
    let resolved = |c: &&CyclePoint| (c.p - last.p).abs() > 1e-11 * (1.0 + last.p.abs());
    let candidates: Vec<&CyclePoint> = points
        .iter()
        .rev()
        .filter(resolved)
        .take_while(|c| c.period > LAW_PERIODS * t_hopf)
        .collect();
    let top = candidates.iter().map(|c| c.period).fold(0.0, f64::max);
    let mut out = vec![(last.p, last.period)];
    out.extend(
        candidates
            .iter()
            .enumerate()
            .take_while(|(i, c)| c.period > 0.5 * top || *i < LAW_POINTS)
            .map(|(_, c)| (c.p, c.period)),
    );
    out
}

/// Least squares T = -a ln|p - p*| + b over p* beyond the last point (log-spaced candidates;
/// the last point itself is left out, its p may equal p* to round-off).
fn homoclinic_law(points: &[(f64, f64)], saddle: [f64; 2]) -> Option<PeriodLaw> {
    // points are last first.
    let p_last = points[0].0;
    let points = &points[1..];
    let far = points[points.len() - 1].0;
    let dir = (p_last - far).signum();
    let span = (far - p_last).abs().max(1e-300);
    let mut best: Option<(f64, f64, f64, f64)> = None;
    for j in 0..=200 {
        let p_star = p_last + dir * span * 10f64.powf(-(j as f64) / 10.0);
        let xs: Vec<f64> = points
            .iter()
            .map(|(p, _)| -(p - p_star).abs().ln())
            .collect();
        let ts: Vec<f64> = points.iter().map(|(_, t)| *t).collect();
        let Some((a, b, res)) = line_fit(&xs, &ts) else {
            continue;
        };
        if a > 0.0 && best.is_none_or(|bst| res < bst.3) {
            best = Some((a, b, p_star, res));
        }
    }
    let (a, b, p_star, _) = best?;
    Some(PeriodLaw {
        kind: "HC",
        law: "period = -a ln|p - p*| + b",
        a,
        b: Some(b),
        p_star,
        saddle_eigenvalues: saddle.iter().all(|v| v.is_finite()).then_some(saddle),
        a_theory: Some(1.0 / saddle[1].min(-saddle[0])).filter(|a| a.is_finite()),
        points: points.len(),
    })
}

/// T^-2 = k (p - p*) by least squares: T = a |p - p*|^(-1/2), a = 1 / sqrt|k|.
fn snic_law(points: &[(f64, f64)]) -> Option<PeriodLaw> {
    let xs: Vec<f64> = points.iter().map(|(p, _)| *p).collect();
    let ys: Vec<f64> = points.iter().map(|(_, t)| t.powi(-2)).collect();
    let (k, c, _) = line_fit(&xs, &ys)?;
    if k == 0.0 {
        return None;
    }
    Some(PeriodLaw {
        kind: "SNIC",
        law: "period = a |p - p*|^(-1/2)",
        a: 1.0 / k.abs().sqrt(),
        b: None,
        p_star: -c / k,
        saddle_eigenvalues: None,
        a_theory: None,
        points: points.len(),
    })
}

/// y = k x + c by least squares: (k, c, residual sum of squares).
fn line_fit(xs: &[f64], ys: &[f64]) -> Option<(f64, f64, f64)> {
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx.is_nan() || sxx <= 0.0 {
        return None;
    }
    let k = sxy / sxx;
    let c = my - k * mx;
    let res = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (y - k * x - c).powi(2))
        .sum();
    (k.is_finite() && c.is_finite()).then_some((k, c, res))
}

/// Whether a traced branch ended at (shrank onto) the Hopf point h.
fn ended_at(branches: &[CycleBranch], h: &BranchPoint, tol: f64) -> bool {
    branches.iter().any(|b| {
        b.end == "hopf"
            && b.points.last().is_some_and(|pt| (pt.p - h.p).abs() < tol)
            && b.hopf.is_some_and(|start| (start.p - h.p).abs() > 0.0)
    })
}

/// Checks that cycles can start: some fixed-point branch has a Hopf point, or `predict`
/// found a periodic orbit at the base value.
pub fn has_start(branches: &[Vec<BranchPoint>], predicted: &[Predicted]) -> bool {
    !hopf_starts(branches).is_empty() || !predicted.is_empty()
}

/// A periodic orbit of `tokdyn predict` at the base value, with its drawn points.
#[derive(Debug, Clone)]
pub struct Predicted {
    /// Direction 0 (set per branch).
    pub orbit: PredictedOrbit,
    /// Points evenly spaced in time over one period, the first the orbit's point.
    pub points: Vec<Complex64>,
}

/// The isolated periodic orbits (not a centre's family) `tokdyn predict` finds for the base
/// scenario, when the base value of the parameter lies in the interval.
pub fn predicted_orbits(
    plan: &BaseScenario,
    fam: &Family<'_>,
    spec: &ContinuationSpec,
) -> Result<Vec<Predicted>, String> {
    let Some(p0) = plan.base_number(&spec.key) else {
        return Ok(Vec::new());
    };
    if !(spec.from.min(spec.to)..=spec.from.max(spec.to)).contains(&p0) {
        return Ok(Vec::new());
    }
    let sh = fam.coefficients(p0)?;
    let start = crate::predict::oa_start(&plan.base).map_err(|e| e.to_string())?;
    let mut prediction = crate::predict::predict(&sh, start, crate::predict::horizon(&plan.base));
    prediction.add_limit_cycles(&sh);
    Ok(prediction
        .limit_cycles
        .iter()
        .filter(|c| c.kind != CycleKind::Centre)
        .map(|c| Predicted {
            orbit: PredictedOrbit {
                p: p0,
                period: c.period,
                point: c.start,
                kind: c.kind.as_str(),
                direction: 0.0,
            },
            points: c.orbit.clone(),
        })
        .collect())
}

/// Continues the cycles from every Hopf point of `fixed` (the branches of `fam` along
/// `spec.parameter`), then from every orbit of `predicted` not on those branches, both ways.
pub fn run(
    fam: &Family<'_>,
    spec: &ContinuationSpec,
    fixed: &[Vec<BranchPoint>],
    predicted: &[Predicted],
    progress: bool,
    title: &str,
) -> Result<Report, String> {
    let starts = hopf_starts(fixed);
    let tracer = Tracer {
        fam,
        spec,
        progress: progress.then(|| {
            RefCell::new(Ticker {
                reporter: Reporter::new(&format!("{title} cycles")),
                parameter: spec.parameter.clone(),
                branch: 0,
                branches: starts.len(),
                points: 0,
                predicted: false,
            })
        }),
        cache: RefCell::new(None),
        base: predicted.first().map(|o| o.orbit.p),
        at_base: RefCell::new(Vec::new()),
    };
    let mut branches: Vec<CycleBranch> = Vec::new();
    let mut skipped = Vec::new();
    for (k, h) in starts.iter().enumerate() {
        if let Some(t) = &tracer.progress {
            t.borrow_mut().branch = k;
        }
        if ended_at(&branches, &h.point, 10.0 * spec.step) {
            skipped.push(serde_json::json!({
                "parameter": h.point.p,
                "reason": "the cycles of an earlier Hopf point end here",
            }));
            continue;
        }
        match tracer.branch(h)? {
            Ok(b) => branches.push(b),
            Err(reason) => skipped.push(serde_json::json!({
                "parameter": h.point.p,
                "reason": reason,
            })),
        }
    }
    for (k, o) in predicted.iter().enumerate() {
        if let Some(t) = &tracer.progress {
            let mut t = t.borrow_mut();
            (t.branch, t.branches, t.predicted) = (k, predicted.len(), true);
        }
        let not_started = |reason: &str| {
            serde_json::json!({
                "parameter": o.orbit.p,
                "period": o.orbit.period,
                "reason": reason,
            })
        };
        let Some(first) = tracer.predicted_cycle(&o.orbit, &o.points)? else {
            skipped.push(not_started(
                "predict's orbit did not converge as a shooting solution",
            ));
            continue;
        };
        if tracer.traced(o.orbit.point, Unknowns::period(&first.y))? {
            continue;
        }
        for direction in [1.0, -1.0] {
            let start = PredictedOrbit {
                direction,
                ..o.orbit
            };
            match tracer.predicted_branch(&start, &first)? {
                Ok(b) => branches.push(b),
                Err(reason) => skipped.push(not_started(&reason)),
            }
        }
    }
    if let Some(t) = &tracer.progress {
        t.borrow_mut().reporter.finish();
    }
    Ok(report(spec, &branches, skipped))
}

/// `cycles.csv` and the summary.
fn report(
    spec: &ContinuationSpec,
    branches: &[CycleBranch],
    skipped: Vec<serde_json::Value>,
) -> Report {
    let mut columns = vec!["branch".to_string(), spec.parameter.clone()];
    columns.extend(
        [
            "period",
            "r2_abs_min",
            "r2_abs_max",
            "multiplier",
            "stable",
            "point",
        ]
        .map(String::from),
    );
    let mut rows = Vec::new();
    let mut check: f64 = 0.0;
    for (b, branch) in branches.iter().enumerate() {
        for pt in &branch.points {
            // Where tr M is a meaningful check (its error grows with the norm of M).
            if pt.monodromy_norm <= MULTIPLIER_CHECKED {
                let d =
                    (pt.multiplier - pt.monodromy_multiplier).abs() / (1.0 + pt.multiplier.abs());
                check = check.max(d);
            }
            rows.push(vec![
                (b + 1).to_string(),
                fmt_f64(pt.p),
                fmt_f64(pt.period),
                fmt_f64(pt.r2_abs_min),
                fmt_f64(pt.r2_abs_max),
                fmt_f64(pt.multiplier),
                pt.stable().to_string(),
                pt.special.unwrap_or("").to_string(),
            ]);
        }
    }
    let list: Vec<serde_json::Value> = branches
        .iter()
        .enumerate()
        .map(|(b, br)| {
            let mut entry = serde_json::json!({
                "branch": b + 1,
                "hopf": br.hopf.map(|h| serde_json::json!({
                    "parameter": h.p,
                    "r2": [h.r.re, h.r.im],
                    "l1": h.l1,
                    "criticality": if h.l1.is_some_and(|l| l > 0.0) { "subcritical" } else { "supercritical" },
                })),
                "points": br.points.len(),
                "end": br.end,
                "law": br.law,
            });
            if let Some(o) = br.predicted {
                entry["predicted"] = serde_json::json!({
                    "parameter": o.p,
                    "period": o.period,
                    "r2": [o.point.re, o.point.im],
                    "kind": o.kind,
                    "direction": if o.direction > 0.0 { "up" } else { "down" },
                });
            }
            entry
        })
        .collect();
    let summary = serde_json::json!({
        "branches": branches.len(),
        "points": rows.len(),
        "segments": SEGMENTS,
        "multiplier_check": check,
        "list": list,
        "not_started": skipped,
    });
    Report {
        csv: csv_text(&columns, rows),
        branches: branches.to_vec(),
        summary,
    }
}
