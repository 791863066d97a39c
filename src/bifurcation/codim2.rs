//! Fold and Hopf curves of the Ott–Antonsen fixed points in two parameters, with their
//! codimension-two points (sweep file `[codim2]`; docs/MATH.md §10.2).
//!
//! With x = (Re R, Im R), p = (p1, p2) and y = (x, p) in R^4, a curve is the zero set of the
//! standard extended system G(y) = (F(x, p), g(x, p)) = 0, three equations:
//!
//! ```text
//! fold:  g = det J          Hopf:  g = tr J   (det J > 0: Hopf, det J < 0: neutral saddle)
//! ```
//!
//! traced by pseudo-arclength continuation: from y_k with the unit tangent t_k (the null vector
//! of the 3 x 4 matrix DG, from its cofactors, oriented like t_{k-1}) the corrector solves
//! G(y) = 0, t_k . (y - y_k) = ds by Newton. J and its x-derivatives are exact
//! ([`crate::bifurcation::CubicField`]); the p-derivatives are central differences, each
//! evaluation building the scenario with p set (so p may enter through any expression).
//! Consecutive points are at most `step` apart in R^4, hence in (p1, p2).
//!
//! Test functions between consecutive points, located by bisection along the arclength:
//! on a fold curve tr J (Bogdanov–Takens, BT) and the fold coefficient a = p . B(q, q) / 2
//! (cusp, CP); on the Hopf curve det J (BT: where Hopf turns into neutral saddle) and, where
//! det J > 0, the first Lyapunov coefficient l1 (generalised Hopf, GH).
//!
//! Start points: the folds (LP) and Hopf points (H) of one-parameter continuations along p2 on
//! the lines p1 = const (five lines evenly inside the box, and the base scenario's p1 when it is
//! inside) and along p1 on the lines p2 = const (the same), each corrected onto its curve; the
//! places on those lines where tr J changes sign on a saddle (neutral saddles, which the
//! one-parameter continuation does not report); and every BT point found, which starts the
//! other curve through it. A
//! start already on a traced curve is skipped; every other is traced both ways until the curve
//! leaves the box (its last point exactly on the edge), leaves the closed unit disk, closes, or
//! has `max_points` points each way.

use std::cell::RefCell;

use nalgebra::{Matrix2, Matrix3x4, Matrix4, Vector2, Vector3, Vector4};
use num_complex::Complex64;
use serde::Serialize;
use toml::Value;

use crate::bifurcation::{first_lyapunov, fold_coefficient, CubicField};
use crate::error::Error;
use crate::observe::progress::Reporter;
use crate::reduced::SecondHarmonic;
use crate::scenario::{set_value, ModelKind, Scenario};
use crate::simulation;

use super::base::BaseScenario;
use super::coefficient_model::QuadraticModel;
use super::continuation::{self, BranchPoint};
use super::corrector::{self, small_step, unit_null_vector};
use super::spec::{Codim2Spec, ContinuationSpec, CurveType};
use crate::cells::{csv_text, fmt_f64};

/// Newton iterations of the corrector.
const NEWTON_MAX: usize = 12;
/// Step size the corrector must reach (relative).
const NEWTON_TOL: f64 = 1e-12;
/// Residual a curve point must have.
const RESIDUAL: f64 = 1e-9;
/// Bisection steps locating a special point.
const LOCATE_STEPS: usize = 60;
/// Search lines per parameter inside the box.
const SEARCH_LINES: usize = 5;
/// Most curves traced.
const MAX_CURVES: usize = 64;

/// The OA field as a function of (x, p1, p2).
pub struct Family2<'a> {
    plan: &'a BaseScenario,
    keys: [&'a str; 2],
    /// The coefficients as an exact quadratic in p, when they are one.
    model: Option<QuadraticModel>,
}

impl<'a> Family2<'a> {
    /// The family of `plan`'s base scenario in the two dotted keys.
    pub fn new(plan: &'a BaseScenario, keys: [&'a str; 2]) -> Self {
        Family2 {
            plan,
            keys,
            model: None,
        }
    }

    /// The same family evaluated through its quadratic model over `spec`'s box when the
    /// coefficients are such a quadratic.
    fn with_model(mut self, spec: &Codim2Spec) -> Result<Self, String> {
        let eval = |p: [f64; 2]| {
            let (c0, c1, c2, g0, g1, g2) = self.scenario_coefficients(p)?.coefficients();
            Ok([c0, c1, c2, g0, g1, g2])
        };
        self.model = QuadraticModel::fit(&eval, spec.from, spec.to)?;
        Ok(self)
    }

    /// The second-harmonic coefficients at p.
    pub fn coefficients(&self, p: [f64; 2]) -> Result<SecondHarmonic, String> {
        match &self.model {
            Some(m) => Ok(SecondHarmonic::from_coefficients(m.at(p))),
            None => self.scenario_coefficients(p),
        }
    }

    /// The coefficients of the scenario built at p.
    fn scenario_coefficients(&self, p: [f64; 2]) -> Result<SecondHarmonic, String> {
        let mut table = self.plan.template.clone();
        for (key, v) in self.keys.iter().zip(p) {
            set_value(&mut table, key, Value::Float(v))?;
        }
        let scenario =
            Scenario::from_table(table, &self.plan.scenario_file, &self.plan.scenario_dir)
                .map_err(|e| e.to_string())?;
        simulation::second_harmonic(&scenario, ModelKind::Oa).map_err(|e| e.to_string())
    }

    fn cubic(&self, p: [f64; 2]) -> Result<CubicField, String> {
        Ok(CubicField::new(&self.coefficients(p)?))
    }
}

/// The defining system of one curve type.
struct System<'a> {
    fam: &'a Family2<'a>,
    curve: CurveType,
    /// Progress on stderr, ticked at every curve point.
    progress: Option<&'a RefCell<Progress>>,
}

/// Where the continuation is, for the progress line.
struct Progress {
    reporter: Reporter,
    fraction: f64,
    what: String,
    points: usize,
}

impl Progress {
    fn show(&mut self) {
        let what = format!("{}, {} points", self.what, self.points);
        self.reporter.show(self.fraction, &what);
    }
}

/// G(y) and DG(y).
struct Linearised {
    g: Vector3<f64>,
    dg: Matrix3x4<f64>,
}

fn split(y: &Vector4<f64>) -> (Vector2<f64>, [f64; 2]) {
    (Vector2::new(y[0], y[1]), [y[2], y[3]])
}

impl System<'_> {
    fn tick(&self) {
        if let Some(p) = self.progress {
            let mut p = p.borrow_mut();
            p.points += 1;
            p.show();
        }
    }

    /// g(J): det J (fold) or tr J (Hopf).
    fn test(&self, j: &Matrix2<f64>) -> f64 {
        match self.curve {
            CurveType::Fold => j.determinant(),
            CurveType::Hopf => j.trace(),
        }
    }

    /// dg along dJ.
    fn test_derivative(&self, j: &Matrix2<f64>, dj: &Matrix2<f64>) -> f64 {
        match self.curve {
            CurveType::Fold => {
                j[(1, 1)] * dj[(0, 0)] - j[(0, 1)] * dj[(1, 0)] - j[(1, 0)] * dj[(0, 1)]
                    + j[(0, 0)] * dj[(1, 1)]
            }
            CurveType::Hopf => dj.trace(),
        }
    }

    fn linearise(&self, y: &Vector4<f64>) -> Result<Linearised, String> {
        let (x, p) = split(y);
        let cf = self.fam.cubic(p)?;
        let f = cf.field(x);
        let j = cf.jacobian(x);
        let mut dg = Matrix3x4::zeros();
        for k in 0..2 {
            dg[(0, k)] = j[(0, k)];
            dg[(1, k)] = j[(1, k)];
            dg[(2, k)] = self.test_derivative(&j, &cf.jacobian_derivative(x, k));
        }
        for i in 0..2 {
            let h = 1e-6 * p[i].abs().max(1.0);
            let (mut up, mut down) = (p, p);
            up[i] += h;
            down[i] -= h;
            let (cu, cd) = (self.fam.cubic(up)?, self.fam.cubic(down)?);
            let fp = (cu.field(x) - cd.field(x)) / (2.0 * h);
            dg[(0, 2 + i)] = fp[0];
            dg[(1, 2 + i)] = fp[1];
            dg[(2, 2 + i)] = (self.test(&cu.jacobian(x)) - self.test(&cd.jacobian(x))) / (2.0 * h);
        }
        Ok(Linearised {
            g: Vector3::new(f[0], f[1], self.test(&j)),
            dg,
        })
    }

    /// |G(y)| (the residual of the defining system).
    fn residual(&self, y: &Vector4<f64>) -> Result<f64, String> {
        let (x, p) = split(y);
        let cf = self.fam.cubic(p)?;
        let f = cf.field(x);
        Ok(Vector3::new(f[0], f[1], self.test(&cf.jacobian(x))).norm())
    }

    /// The unit tangent at y (null vector of DG by cofactors); None where DG is singular.
    fn tangent(&self, y: &Vector4<f64>) -> Result<Option<Vector4<f64>>, String> {
        let dg = self.linearise(y)?.dg;
        let mut t = Vector4::zeros();
        for i in 0..4 {
            let cols: Vec<usize> = (0..4).filter(|&c| c != i).collect();
            let m = nalgebra::Matrix3::from_fn(|r, c| dg[(r, cols[c])]);
            t[i] = if i % 2 == 0 { 1.0 } else { -1.0 } * m.determinant();
        }
        let scale = dg.row(0).norm() * dg.row(1).norm() * dg.row(2).norm();
        Ok(unit_null_vector(t, scale, 1e-12))
    }

    /// Newton on G(y) = 0, n . y = c from `guess` (the shared corrector).
    fn correct(
        &self,
        guess: Vector4<f64>,
        n: Vector4<f64>,
        c: f64,
    ) -> Result<Option<Vector4<f64>>, String> {
        let bordered = |y: &Vector4<f64>| -> Result<_, String> {
            let lin = self.linearise(y)?;
            let m = Matrix4::from_fn(|r, col| if r < 3 { lin.dg[(r, col)] } else { 0.0 });
            Ok(Some((m, Vector4::new(lin.g[0], lin.g[1], lin.g[2], 0.0))))
        };
        let judge = small_step(NEWTON_TOL);
        let Some(y) = corrector::correct(guess, &n, c, NEWTON_MAX, bordered, judge)? else {
            return Ok(None);
        };
        Ok((self.residual(&y)? < RESIDUAL).then_some(y))
    }

    /// The test functions at y: (BT test, CP or GH test) and the fold's null vector.
    fn tests(
        &self,
        y: &Vector4<f64>,
        orient: Vector2<f64>,
    ) -> Result<(f64, Option<f64>, Vector2<f64>), String> {
        let (x, p) = split(y);
        let cf = self.fam.cubic(p)?;
        let j = cf.jacobian(x);
        Ok(match self.curve {
            CurveType::Fold => match fold_coefficient(&cf, x, orient) {
                Some((a, q)) => (j.trace(), Some(a), q),
                None => (j.trace(), None, orient),
            },
            CurveType::Hopf => (j.determinant(), first_lyapunov(&cf, x), orient),
        })
    }

    /// The curve point at y.
    fn point(&self, y: &Vector4<f64>, special: Option<&'static str>) -> Result<CurvePoint, String> {
        let (x, p) = split(y);
        let cf = self.fam.cubic(p)?;
        let j = cf.jacobian(x);
        let kind = match self.curve {
            CurveType::Fold => CurveKind::Fold,
            _ if special == Some("BT") || j.determinant() > 0.0 => CurveKind::Hopf,
            _ => CurveKind::NeutralSaddle,
        };
        let l1 = match (self.curve, special) {
            (CurveType::Hopf, Some("GH")) | (CurveType::Hopf, None) => first_lyapunov(&cf, x),
            _ => None,
        };
        Ok(CurvePoint {
            p,
            r: Complex64::new(x[0], x[1]),
            kind,
            special,
            eigenvalues: eigenvalues(&j),
            l1: if kind == CurveKind::Hopf { l1 } else { None },
        })
    }
}

fn eigenvalues(j: &Matrix2<f64>) -> [Complex64; 2] {
    let tr = j.trace();
    let disc = Complex64::new(tr * tr / 4.0 - j.determinant(), 0.0).sqrt();
    [tr / 2.0 + disc, tr / 2.0 - disc]
}

/// What a row of `curves.csv` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurveKind {
    /// det J = 0.
    Fold,
    /// tr J = 0, det J > 0.
    Hopf,
    /// tr J = 0, det J < 0.
    NeutralSaddle,
}

impl CurveKind {
    /// The word of `curves.csv`.
    pub fn as_str(self) -> &'static str {
        match self {
            CurveKind::Fold => "fold",
            CurveKind::Hopf => "hopf",
            CurveKind::NeutralSaddle => "neutral-saddle",
        }
    }
}

/// One point of a curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    /// (p1, p2).
    pub p: [f64; 2],
    /// The fixed point R2.
    pub r: Complex64,
    /// fold, hopf or neutral-saddle.
    pub kind: CurveKind,
    /// `BT`, `CP` or `GH` at a located codimension-two point.
    pub special: Option<&'static str>,
    /// The eigenvalues of J.
    pub eigenvalues: [Complex64; 2],
    /// The first Lyapunov coefficient on the Hopf part.
    pub l1: Option<f64>,
}

/// One traced curve.
#[derive(Debug, Clone)]
pub struct Curve {
    /// fold or hopf (its defining system).
    pub curve: CurveType,
    /// The points in arclength order, special points in their place.
    pub points: Vec<CurvePoint>,
    /// The regular points as y = (x, p), for the "already traced" test.
    ys: Vec<Vector4<f64>>,
}

/// What `[codim2]` writes.
pub struct Report {
    /// `curves.csv`.
    pub csv: String,
    /// The curves (for the picture).
    pub curves: Vec<Curve>,
    /// The codimension-two points, each once (for special_points.json).
    pub specials: Vec<CurvePoint>,
    /// For summary.json.
    pub summary: serde_json::Value,
}

/// One direction of a curve: the points after the start, their y, whether the curve closed.
type Half = (Vec<CurvePoint>, Vec<Vector4<f64>>, bool);

/// Traces from y0 along t0; the points after y0 and their y, and whether the curve closed.
fn trace(
    sys: &System<'_>,
    spec: &Codim2Spec,
    y0: Vector4<f64>,
    t0: Vector4<f64>,
) -> Result<Half, Error> {
    let lo = [spec.from[0].min(spec.to[0]), spec.from[1].min(spec.to[1])];
    let hi = [spec.from[0].max(spec.to[0]), spec.from[1].max(spec.to[1])];
    let (ds_max, ds_min) = (spec.step, spec.step * 1e-6);
    let mut ds = ds_max;
    let (mut y, mut t) = (y0, t0);
    let mut orient = Vector2::new(1.0, 0.0);
    let (mut test_a, mut test_b, q0) = sys.tests(&y, orient).map_err(Error::Input)?;
    orient = q0;
    let mut out = Vec::new();
    let mut ys = Vec::new();
    while out.len() < spec.max_points {
        if crate::interrupt::is_requested() {
            return Err(Error::Interrupted(
                "during the two-parameter continuation".into(),
            ));
        }
        let pred = y + t * ds;
        let next = sys.correct(pred, t, t.dot(&y) + ds).map_err(Error::Input)?;
        let y1 = match next {
            Some(y1) if (y1 - y).norm() <= 2.0 * ds && (y1 - y).rows(2, 2).norm() <= spec.step => {
                y1
            }
            _ => {
                ds /= 2.0;
                if ds < ds_min {
                    break;
                }
                continue;
            }
        };
        let Some(mut t1) = sys.tangent(&y1).map_err(Error::Input)? else {
            break;
        };
        if t1.dot(&t) < 0.0 {
            t1 = -t1;
        }
        if let Some(end) = box_exit(&y, &y1, lo, hi) {
            let (k, bound, frac) = end;
            let mut n = Vector4::zeros();
            n[2 + k] = 1.0;
            if let Some(ye) = sys
                .correct(y + (y1 - y) * frac, n, bound)
                .map_err(Error::Input)?
            {
                if ye[0].hypot(ye[1]) <= 1.0 + 1e-9 && (ye - y).norm() <= 2.0 * ds {
                    out.push(sys.point(&ye, None).map_err(Error::Input)?);
                    ys.push(ye);
                }
            }
            break;
        }
        if y1[0].hypot(y1[1]) > 1.0 + 1e-9 {
            break;
        }
        let (a1, b1, q1) = sys.tests(&y1, orient).map_err(Error::Input)?;
        let sigma1 = t.dot(&(y1 - y));
        let located = if test_a * a1 < 0.0 {
            let g = |ys: &Vector4<f64>| Ok(sys.tests(ys, orient)?.0);
            locate(sys, &y, &t, sigma1, &g)?.map(|ys| (ys, "BT"))
        } else if let (Some(b0), Some(b1v)) = (test_b, b1) {
            if b0 * b1v < 0.0 {
                let g = |ys: &Vector4<f64>| Ok(sys.tests(ys, orient)?.1.unwrap_or(f64::NAN));
                let name = match sys.curve {
                    CurveType::Fold => "CP",
                    CurveType::Hopf => "GH",
                };
                locate(sys, &y, &t, sigma1, &g)?.map(|ys| (ys, name))
            } else {
                None
            }
        } else {
            None
        };
        if let Some((ys_, name)) = located {
            out.push(sys.point(&ys_, Some(name)).map_err(Error::Input)?);
        }
        out.push(sys.point(&y1, None).map_err(Error::Input)?);
        ys.push(y1);
        sys.tick();
        // Closed: the step passed by the start.
        if out.len() > 3 && segment_distance(&y0, &y, &y1) < 0.05 * ds_max.max(ds) {
            return Ok((out, ys, true));
        }
        let easy = (y1 - pred).norm() < 0.1 * ds;
        y = y1;
        t = t1;
        test_a = a1;
        test_b = b1;
        orient = q1;
        if easy {
            ds = (ds * 1.5).min(ds_max);
        }
    }
    Ok((out, ys, false))
}

/// Where the chord y -> y1 leaves the box first: (parameter index, the bound, fraction).
fn box_exit(
    y: &Vector4<f64>,
    y1: &Vector4<f64>,
    lo: [f64; 2],
    hi: [f64; 2],
) -> Option<(usize, f64, f64)> {
    let mut best: Option<(usize, f64, f64)> = None;
    for k in 0..2 {
        let v = y1[2 + k];
        let bound = if v < lo[k] {
            lo[k]
        } else if v > hi[k] {
            hi[k]
        } else {
            continue;
        };
        let d = y1[2 + k] - y[2 + k];
        let frac = if d == 0.0 {
            1.0
        } else {
            (bound - y[2 + k]) / d
        };
        if best.is_none_or(|b| frac < b.2) {
            best = Some((k, bound, frac.clamp(0.0, 1.0)));
        }
    }
    best
}

/// Distance of z from the segment [a, b].
fn segment_distance(z: &Vector4<f64>, a: &Vector4<f64>, b: &Vector4<f64>) -> f64 {
    let d = b - a;
    let len2 = d.norm_squared();
    if len2 == 0.0 {
        return (z - a).norm();
    }
    let s = ((z - a).dot(&d) / len2).clamp(0.0, 1.0);
    (a + d * s - z).norm()
}

type TestFn<'a> = dyn Fn(&Vector4<f64>) -> Result<f64, String> + 'a;

/// Bisection on the sign of g at corrected points along the arclength in [0, sigma1].
fn locate(
    sys: &System<'_>,
    y: &Vector4<f64>,
    t: &Vector4<f64>,
    sigma1: f64,
    g: &TestFn<'_>,
) -> Result<Option<Vector4<f64>>, Error> {
    let at = |mid: f64| -> Result<_, String> {
        let Some(ym) = sys.correct(y + t * mid, *t, t.dot(y) + mid)? else {
            return Ok(None);
        };
        Ok(Some((ym, g(&ym)?)))
    };
    let g0 = g(y).map_err(Error::Input)?;
    corrector::bisect_arclength(sigma1, g0, LOCATE_STEPS, at, |g| !g.is_finite())
        .map_err(Error::Input)
}

/// A start point: y on the curve of `curve`, found on a search line.
#[derive(Debug, Clone, Copy)]
struct Seed {
    curve: CurveType,
    y: Vector4<f64>,
    /// The parameter held fixed on its search line (0 or 1).
    line: usize,
}

/// The values of the search lines of parameter k: evenly inside the box and the base value.
fn line_values(spec: &Codim2Spec, k: usize, base: Option<f64>) -> Vec<f64> {
    let (a, b) = (spec.from[k], spec.to[k]);
    let mut v: Vec<f64> = (1..=SEARCH_LINES)
        .map(|i| a + (b - a) * i as f64 / (SEARCH_LINES + 1) as f64)
        .collect();
    if let Some(x) = base.filter(|x| (a.min(b)..=a.max(b)).contains(x)) {
        if !v.contains(&x) {
            v.insert(0, x);
        }
    }
    v
}

/// The LP and H points of one-parameter continuations on the search lines.
fn search(
    plan: &BaseScenario,
    fam: &Family2<'_>,
    spec: &Codim2Spec,
    progress: Option<&RefCell<Progress>>,
) -> Result<Vec<Seed>, Error> {
    let mut seeds = Vec::new();
    let lines: Vec<(usize, f64)> = (0..2)
        .flat_map(|k| {
            line_values(spec, k, plan.base_number(&spec.keys[k]))
                .into_iter()
                .map(move |v| (k, v))
        })
        .collect();
    for (n, &(k, value)) in lines.iter().enumerate() {
        if crate::interrupt::is_requested() {
            return Err(Error::Interrupted("during the two-parameter search".into()));
        }
        if let Some(p) = progress {
            let mut p = p.borrow_mut();
            p.fraction = 0.3 * n as f64 / lines.len() as f64;
            p.what = format!("search line {} of {}", n + 1, lines.len());
            p.show();
        }
        let other = 1 - k;
        let mut line_plan = plan.clone();
        set_value(&mut line_plan.template, &spec.keys[k], Value::Float(value))
            .map_err(Error::Input)?;
        let line = ContinuationSpec {
            parameter: spec.parameters[other].clone(),
            key: spec.keys[other].clone(),
            from: spec.from[other],
            to: spec.to[other],
            step: (spec.to[other] - spec.from[other]).abs() / 100.0,
            max_points: 2000,
            cycles: false,
            stationary: None,
        };
        let fast = fam.model.map(|m| {
            move |q: f64| {
                let mut p = [value; 2];
                p[other] = q;
                SecondHarmonic::from_coefficients(m.at(p))
            }
        });
        let report = continuation::run_with(
            &line_plan,
            &line,
            false,
            fast.as_ref().map(|f| f as &continuation::Coefficients<'_>),
        )?;
        for b in &report.branches {
            seeds.extend(neutral_saddles(b, spec, k, value));
        }
        for pt in report.branches.iter().flatten() {
            let curve = match pt.special {
                Some("LP") => CurveType::Fold,
                Some("H") => CurveType::Hopf,
                _ => continue,
            };
            if !spec.curves.contains(&curve) {
                continue;
            }
            let mut y = Vector4::new(pt.r.re, pt.r.im, 0.0, 0.0);
            y[2 + k] = value;
            y[2 + other] = pt.p;
            seeds.push(Seed { curve, y, line: k });
        }
    }
    Ok(seeds)
}

/// Where tr J changes sign between consecutive saddle points of a branch (a neutral saddle,
/// which the one-parameter continuation does not report): the midpoints, as Hopf-curve seeds.
fn neutral_saddles(branch: &[BranchPoint], spec: &Codim2Spec, k: usize, value: f64) -> Vec<Seed> {
    if !spec.curves.contains(&CurveType::Hopf) {
        return Vec::new();
    }
    let saddle = |b: &BranchPoint| b.eigenvalues[0].re * b.eigenvalues[1].re < 0.0;
    let trace = |b: &BranchPoint| b.eigenvalues[0].re + b.eigenvalues[1].re;
    branch
        .windows(2)
        .filter(|w| saddle(&w[0]) && saddle(&w[1]) && trace(&w[0]) * trace(&w[1]) < 0.0)
        .map(|w| {
            let r = (w[0].r + w[1].r) / 2.0;
            let mut y = Vector4::new(r.re, r.im, 0.0, 0.0);
            y[2 + k] = value;
            y[3 - k] = (w[0].p + w[1].p) / 2.0;
            Seed {
                curve: CurveType::Hopf,
                y,
                line: k,
            }
        })
        .collect()
}

/// Whether y lies on a traced curve of the same type (within `tol`).
fn on_curve(curves: &[Curve], curve: CurveType, y: &Vector4<f64>, tol: f64) -> bool {
    curves.iter().filter(|c| c.curve == curve).any(|c| {
        c.ys.iter().any(|q| (q - y).norm() < tol)
            || c.ys
                .windows(2)
                .any(|w| segment_distance(y, &w[0], &w[1]) < tol)
    })
}

/// Checks, before the sweep's first point, that the family is valid at the box's corners.
pub fn check(plan: &BaseScenario, spec: &Codim2Spec) -> Result<(), Error> {
    let fam = Family2::new(plan, [&spec.keys[0], &spec.keys[1]]);
    for p1 in [spec.from[0], spec.to[0]] {
        for p2 in [spec.from[1], spec.to[1]] {
            let sh = fam.coefficients([p1, p2]).map_err(|m| {
                Error::Input(format!(
                    "{}: codim2: at {} = {p1}, {} = {p2}: {}",
                    plan.file.display(),
                    spec.parameters[0],
                    spec.parameters[1],
                    crate::input::clip(&m, 300)
                ))
            })?;
            let f = CubicField::new(&sh);
            if !f
                .field(Vector2::new(0.3, 0.2))
                .iter()
                .all(|v| v.is_finite())
            {
                return Err(Error::Input(format!(
                    "{}: codim2: at {} = {p1}, {} = {p2} the Ott-Antonsen coefficients are not finite",
                    plan.file.display(),
                    spec.parameters[0],
                    spec.parameters[1]
                )));
            }
        }
    }
    Ok(())
}

/// Traces the fold and Hopf curves of `spec` (progress on stderr when `progress`).
pub fn run(plan: &BaseScenario, spec: &Codim2Spec, progress: bool) -> Result<Report, Error> {
    let progress = progress.then(|| {
        RefCell::new(Progress {
            reporter: Reporter::new(&format!("{} codim2", plan.name)),
            fraction: 0.0,
            what: String::new(),
            points: 0,
        })
    });
    let fam = Family2::new(plan, [&spec.keys[0], &spec.keys[1]])
        .with_model(spec)
        .map_err(Error::Input)?;
    let seeds = search(plan, &fam, spec, progress.as_ref())?;
    let mut curves: Vec<Curve> = Vec::new();
    let tol = 0.25 * spec.step;
    let mut n = 0;
    let mut queue: std::collections::VecDeque<(Seed, bool)> =
        seeds.iter().map(|s| (*s, false)).collect();
    while let Some((seed, corrected)) = queue.pop_front() {
        n += 1;
        if curves.len() >= MAX_CURVES {
            break;
        }
        if let Some(p) = &progress {
            let mut p = p.borrow_mut();
            p.fraction = 0.3 + 0.7 * (n as f64 / seeds.len().max(1) as f64).min(1.0);
            p.what = format!("start {n} of {}, {} curves", seeds.len(), curves.len());
            p.show();
        }
        let sys = System {
            fam: &fam,
            curve: seed.curve,
            progress: progress.as_ref(),
        };
        let y0 = if corrected {
            Some(seed.y)
        } else {
            start(&sys, &seed).map_err(Error::Input)?
        };
        let Some(y0) = y0 else {
            continue;
        };
        if on_curve(&curves, seed.curve, &y0, tol) {
            continue;
        }
        if let Some(c) = trace_both(&sys, spec, y0)? {
            // A BT point starts the other curve through it.
            for pt in c.points.iter().filter(|p| p.special == Some("BT")) {
                let other = match c.curve {
                    CurveType::Fold => CurveType::Hopf,
                    CurveType::Hopf => CurveType::Fold,
                };
                if spec.curves.contains(&other) {
                    let y = Vector4::new(pt.r.re, pt.r.im, pt.p[0], pt.p[1]);
                    let seed = Seed {
                        curve: other,
                        y,
                        line: 0,
                    };
                    queue.push_back((seed, true));
                }
            }
            curves.push(c);
        }
    }
    if let Some(p) = &progress {
        p.borrow_mut().reporter.finish();
    }
    Ok(report(spec, curves, seeds.is_empty()))
}

/// The seed corrected onto its curve (its search line's parameter held).
fn start(sys: &System<'_>, seed: &Seed) -> Result<Option<Vector4<f64>>, String> {
    for k in [seed.line, 1 - seed.line] {
        let mut n = Vector4::zeros();
        n[2 + k] = 1.0;
        if let Some(y) = sys.correct(seed.y, n, seed.y[2 + k])? {
            if (y - seed.y).norm() < 0.05 {
                return Ok(Some(y));
            }
        }
    }
    Ok(None)
}

/// The curve through y0, traced both ways (once when it closes).
fn trace_both(
    sys: &System<'_>,
    spec: &Codim2Spec,
    y0: Vector4<f64>,
) -> Result<Option<Curve>, Error> {
    let Some(t0) = sys.tangent(&y0).map_err(Error::Input)? else {
        return Ok(None);
    };
    // Orient the first direction towards increasing p1 (then p2), so the order is stable.
    let t0 = if t0[2] < 0.0 || (t0[2] == 0.0 && t0[3] < 0.0) {
        -t0
    } else {
        t0
    };
    let first = sys.point(&y0, None).map_err(Error::Input)?;
    let (fwd, fwd_y, closed) = trace(sys, spec, y0, t0)?;
    let (mut points, mut ys) = (Vec::new(), Vec::new());
    if !closed {
        let (mut back, mut back_y, _) = trace(sys, spec, y0, -t0)?;
        back.reverse();
        back_y.reverse();
        points = back;
        ys = back_y;
    }
    points.push(first);
    ys.push(y0);
    points.extend(fwd);
    ys.extend(fwd_y);
    if closed {
        points.push(first);
    }
    Ok(Some(Curve {
        curve: sys.curve,
        points,
        ys,
    }))
}

/// The codimension-two points, each once (a BT point lies on both curves).
pub(crate) fn unique_specials(curves: &[Curve]) -> Vec<CurvePoint> {
    let mut out: Vec<CurvePoint> = Vec::new();
    for pt in curves.iter().flat_map(|c| &c.points) {
        let Some(name) = pt.special else { continue };
        let near = |q: &CurvePoint| {
            q.special == Some(name)
                && (q.p[0] - pt.p[0]).hypot(q.p[1] - pt.p[1]) + (q.r - pt.r).norm() < 1e-5
        };
        if !out.iter().any(near) {
            out.push(*pt);
        }
    }
    out
}

fn report(spec: &Codim2Spec, curves: Vec<Curve>, no_start: bool) -> Report {
    let columns: Vec<String> = [
        "curve",
        "kind",
        &spec.parameters[0],
        &spec.parameters[1],
        "r2_re",
        "r2_im",
        "point",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows = curves.iter().enumerate().flat_map(|(c, curve)| {
        curve.points.iter().map(move |pt| {
            vec![
                (c + 1).to_string(),
                pt.kind.as_str().to_string(),
                fmt_f64(pt.p[0]),
                fmt_f64(pt.p[1]),
                fmt_f64(pt.r.re),
                fmt_f64(pt.r.im),
                pt.special.unwrap_or("").to_string(),
            ]
        })
    });
    let csv = csv_text(&columns, rows);
    let specials = unique_specials(&curves);
    let count = |name: &str| specials.iter().filter(|s| s.special == Some(name)).count();
    let message = if curves.is_empty() {
        Some(if no_start {
            "no fold or Hopf point found on the search lines: the continuation cannot start (curves.csv is empty)".to_string()
        } else {
            "fold or Hopf points were found but no curve could be continued from them (curves.csv is empty)".to_string()
        })
    } else {
        None
    };
    let summary = serde_json::json!({
        "parameters": spec.parameters,
        "from": spec.from,
        "to": spec.to,
        "step": spec.step,
        "curves": curves.len(),
        "points": curves.iter().map(|c| c.points.len()).sum::<usize>(),
        "special_points": { "BT": count("BT"), "CP": count("CP"), "GH": count("GH") },
        "message": message,
    });
    Report {
        csv,
        curves,
        specials,
        summary,
    }
}

/// One record of `special_points.json`.
#[derive(Debug, Clone, Serialize)]
pub struct SpecialRecord {
    /// BT, CP, GH, LP or H.
    #[serde(rename = "type")]
    pub kind: String,
    /// The parameter values by name.
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// R2 as [re, im].
    pub r2: [f64; 2],
    /// The eigenvalues as [[re, im], [re, im]].
    pub eigenvalues: [[f64; 2]; 2],
    /// l1 at H and GH points, else null.
    pub l1: Option<f64>,
}

fn record(
    kind: &str,
    names: &[&str],
    values: &[f64],
    r: Complex64,
    ev: &[Complex64; 2],
    l1: Option<f64>,
) -> SpecialRecord {
    SpecialRecord {
        kind: kind.to_string(),
        parameters: names
            .iter()
            .zip(values)
            .map(|(n, v)| (n.to_string(), serde_json::json!(v)))
            .collect(),
        r2: [r.re, r.im],
        eigenvalues: [[ev[0].re, ev[0].im], [ev[1].re, ev[1].im]],
        l1,
    }
}

/// `special_points.json`: the one-parameter continuation's LP and H points, then the
/// codimension-two points.
pub fn special_records(
    branches: Option<(&str, &[Vec<BranchPoint>])>,
    codim2: Option<(&Codim2Spec, &[CurvePoint])>,
) -> Vec<SpecialRecord> {
    let mut out = Vec::new();
    if let Some((name, branches)) = branches {
        for pt in branches.iter().flatten() {
            if let Some(kind) = pt.special {
                out.push(record(kind, &[name], &[pt.p], pt.r, &pt.eigenvalues, pt.l1));
            }
        }
    }
    if let Some((spec, points)) = codim2 {
        let names = [spec.parameters[0].as_str(), spec.parameters[1].as_str()];
        for pt in points {
            let l1 = if pt.special == Some("GH") {
                pt.l1
            } else {
                None
            };
            out.push(record(
                pt.special.unwrap_or(""),
                &names,
                &pt.p,
                pt.r,
                &pt.eigenvalues,
                l1,
            ));
        }
    }
    out
}
