//! Pseudo-arclength continuation of Ott–Antonsen fixed points along one parameter, with fold
//! (saddle-node, `LP`) and Hopf (`H`) detection (sweep file `[continuation]`).
//!
//! A fixed point R of the OA ODE at parameter p solves F(x, p) = 0 with x = (Re R, Im R) and
//! F = (Re R', Im R'), two equations in three unknowns y = (x, p): generically a curve. From a
//! point y_k with unit tangent t_k (the null vector of the 2 x 3 matrix [J | F_p], oriented like
//! t_{k-1}), the predictor is y_k + ds t_k and the corrector solves F(y) = 0, t_k . (y - y_k) = ds
//! by Newton. The step ds adapts (halved when the corrector fails, grown after easy steps, at
//! most `step`). J is `predict::oa_jacobian`; F_p is a central difference in p, each evaluation
//! building the scenario with p set (so p may enter the matrices through any expression).
//!
//! - A fold is where the p-component of the tangent changes sign (the branch turns back); it
//!   is located by bisection on that component along the arclength. (Folds where both
//!   eigenvalues vanish at once, as at v11 = v12 in the paper's case 4, are found too: det J
//!   need not change sign.)
//! - A Hopf point is where tr J changes sign while the eigenvalues are a complex pair on both
//!   sides (tr^2 / 4 < det J); it is located by bisection on tr J.
//!
//! Branches start from the fixed points (`predict::fixed_points`) at `from`, at `to` and at 7
//! values in between, skipping seeds that lie on a branch already traced; a seed inside the
//! interval is continued both ways. A branch stops at the ends of [from, to] (the end point is
//! computed exactly there), where it leaves the closed unit disk, when it closes on itself, or
//! after `max_points` points. Where the boundary circle is a continuum of fixed points (g = 0
//! identically, e.g. V = I), its points are not continued.
//!
//! At every H point the first Lyapunov coefficient l1 is computed (docs/MATH.md §10.1) and
//! given in summary.json's `special_points` (`l1`, null at LP points). With progress on, the
//! continuation reports on stderr like the other long stages (the seed and the points traced).
//!
//! `branches.csv`: `branch,<parameter>,r2_re,r2_im,r2_abs,stable,unstable,point,ev1_re,ev1_im,
//! ev2_re,ev2_im`: `branch` numbers the branches from 1, the parameter column is named after the
//! parameter, `stable` is `true` when both eigenvalues have negative real parts, `unstable`
//! counts the eigenvalues with positive real part, `point` is `LP`, `H` or empty; rows follow
//! each branch in arclength order, the special points in their place.

use std::cell::RefCell;

use nalgebra::{Matrix2, Matrix3, Vector2, Vector3};
use num_complex::Complex64;
use serde::Serialize;
use toml::Value;

use crate::bifurcation::{first_lyapunov, CubicField};
use crate::error::Error;
use crate::observe::progress::Reporter;
use crate::predict::{boundary_zeros, fixed_points, oa_jacobian};
use crate::reduced::SecondHarmonic;
use crate::scenario::{set_value, ModelKind, Scenario};
use crate::simulation;

use super::base::BaseScenario;
use super::corrector::{self, small_step, unit_null_vector};
use super::spec::ContinuationSpec;
use crate::cells::{csv_text, fmt_f64};

/// Seeds inside the interval, besides its ends.
const INNER_SEEDS: usize = 7;
/// Newton iterations of the corrector.
const NEWTON_MAX: usize = 12;
/// Residual and step size the corrector must reach.
const NEWTON_TOL: f64 = 1e-11;
/// Bisection steps locating a special point.
const LOCATE_STEPS: usize = 60;
/// The message of an interrupted continuation (of its fixed points or its cycles).
pub(super) const INTERRUPTED: &str = "interrupted during the continuation";

/// The error of a continuation's message `m` in the section `section` of the sweep file: an
/// interruption, or bad input at that section.
pub(crate) fn section_error<'a>(
    plan: &'a BaseScenario,
    section: &'static str,
) -> impl Fn(String) -> Error + Copy + 'a {
    move |m: String| {
        if m == INTERRUPTED {
            Error::Interrupted("during the continuation".into())
        } else {
            Error::Input(format!("{}: {section}: {m}", plan.file.display()))
        }
    }
}

/// What a continuation writes.
pub struct Report {
    /// `branches.csv`.
    pub csv: String,
    /// The traced branches (for the bifurcation picture).
    pub branches: Vec<Vec<BranchPoint>>,
    /// For summary.json.
    pub summary: serde_json::Value,
}

/// One point of a branch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BranchPoint {
    pub p: f64,
    pub r: Complex64,
    pub eigenvalues: [Complex64; 2],
    /// `Some("LP")` or `Some("H")` for a located special point.
    pub special: Option<&'static str>,
    /// The first Lyapunov coefficient at an H point (docs/MATH.md §10.1), else None.
    pub l1: Option<f64>,
}

impl BranchPoint {
    /// Both eigenvalues in the open left half-plane.
    pub fn stable(&self) -> bool {
        self.eigenvalues.iter().all(|e| e.re < 0.0)
    }

    /// Eigenvalues with positive real part.
    pub fn unstable(&self) -> usize {
        self.eigenvalues.iter().filter(|e| e.re > 0.0).count()
    }
}

/// F(y), J = dF/dx and F_p.
type Linearised = (Vector2<f64>, Matrix2<f64>, Vector2<f64>);

/// The OA field as a function of (x, p).
pub struct Family<'a> {
    plan: &'a BaseScenario,
    key: &'a str,
    /// The coefficients as a function of p, when known without building the scenario.
    fast: Option<&'a Coefficients<'a>>,
    /// Progress on stderr, ticked at every branch point.
    ticker: Option<RefCell<Ticker>>,
}

/// The progress of a continuation: the seed being traced and the points so far.
struct Ticker {
    reporter: Reporter,
    parameter: String,
    seed: usize,
    seeds: usize,
    points: usize,
}

impl Ticker {
    fn show(&mut self, p: f64) {
        let what = format!(
            "seed {} of {}, {} points, {} = {}",
            self.seed + 1,
            self.seeds,
            self.points,
            self.parameter,
            crate::cells::short_number(p)
        );
        let fraction = self.seed as f64 / self.seeds as f64;
        self.reporter.show(fraction, &what);
    }
}

/// The coefficients as a function of the parameter.
pub type Coefficients<'a> = dyn Fn(f64) -> SecondHarmonic + 'a;

impl<'a> Family<'a> {
    /// The family of `plan`'s base scenario along the dotted key `key`.
    pub fn new(plan: &'a BaseScenario, key: &'a str) -> Self {
        Family {
            plan,
            key,
            fast: None,
            ticker: None,
        }
    }

    /// One more point traced, at parameter p.
    fn tick(&self, p: f64) {
        if let Some(t) = &self.ticker {
            let mut t = t.borrow_mut();
            t.points += 1;
            t.show(p);
        }
    }

    /// The second-harmonic coefficients at parameter `p`.
    pub fn coefficients(&self, p: f64) -> Result<SecondHarmonic, String> {
        if let Some(f) = self.fast {
            return Ok(f(p));
        }
        let mut table = self.plan.template.clone();
        set_value(&mut table, self.key, Value::Float(p))?;
        // The coefficients do not depend on the time span: the table is checked over a short
        // one, so that a run's work bound (speed times t_max) does not refuse a far parameter
        // that Newton or the cycle tracer probes.
        if let Some(Value::Table(time)) = table.get_mut("time") {
            time.insert("t_end".into(), Value::Float(1e-6));
            time.remove("t_max");
        }
        let scenario =
            Scenario::from_table(table, &self.plan.scenario_file, &self.plan.scenario_dir)
                .map_err(|e| e.to_string())?;
        simulation::second_harmonic(&scenario, ModelKind::Oa).map_err(|e| e.to_string())
    }

    fn field(sh: &SecondHarmonic, x: Vector2<f64>) -> Vector2<f64> {
        let f = sh.ott_antonsen_rhs(Complex64::new(x[0], x[1]));
        Vector2::new(f.re, f.im)
    }

    /// F(y), J = dF/dx and F_p at y = (x, p).
    fn linearise(&self, y: Vector3<f64>) -> Result<Linearised, String> {
        let x = Vector2::new(y[0], y[1]);
        let p = y[2];
        let sh = self.coefficients(p)?;
        let f = Self::field(&sh, x);
        let j = oa_jacobian(&sh, Complex64::new(x[0], x[1]));
        let h = 1e-6 * p.abs().max(1.0);
        let fp = (Self::field(&self.coefficients(p + h)?, x)
            - Self::field(&self.coefficients(p - h)?, x))
            / (2.0 * h);
        Ok((f, j, fp))
    }

    /// The unit tangent at y (null vector of [J | F_p]); `None` where the curve is singular.
    fn tangent(&self, y: Vector3<f64>) -> Result<Option<Vector3<f64>>, String> {
        let (_, j, fp) = self.linearise(y)?;
        let r1 = Vector3::new(j[(0, 0)], j[(0, 1)], fp[0]);
        let r2 = Vector3::new(j[(1, 0)], j[(1, 1)], fp[1]);
        Ok(unit_null_vector(
            r1.cross(&r2),
            r1.norm() * r2.norm(),
            1e-10,
        ))
    }

    /// Newton on F(y) = 0, n . y = c from `guess` (the shared corrector).
    fn correct(
        &self,
        guess: Vector3<f64>,
        n: Vector3<f64>,
        c: f64,
    ) -> Result<Option<Vector3<f64>>, String> {
        let bordered = |y: &Vector3<f64>| -> Result<_, String> {
            let (f, j, fp) = self.linearise(*y)?;
            let m = Matrix3::new(
                j[(0, 0)],
                j[(0, 1)],
                fp[0],
                j[(1, 0)],
                j[(1, 1)],
                fp[1],
                0.0,
                0.0,
                0.0,
            );
            Ok(Some((m, Vector3::new(f[0], f[1], 0.0))))
        };
        let judge = small_step(NEWTON_TOL);
        let Some(y) = corrector::correct(guess, &n, c, NEWTON_MAX, bordered, judge)? else {
            return Ok(None);
        };
        let (f, _, _) = self.linearise(y)?;
        Ok((f.norm() < 1e-9).then_some(y))
    }

    /// The branch point at y.
    fn point(&self, y: Vector3<f64>, special: Option<&'static str>) -> Result<BranchPoint, String> {
        let sh = self.coefficients(y[2])?;
        let r = Complex64::new(y[0], y[1]);
        let l1 = (special == Some("H"))
            .then(|| first_lyapunov(&CubicField::new(&sh), Vector2::new(y[0], y[1])))
            .flatten();
        Ok(BranchPoint {
            p: y[2],
            r,
            eigenvalues: eigenvalues(&oa_jacobian(&sh, r)),
            special,
            l1,
        })
    }

    /// det J and tr J at y.
    fn det_tr(&self, y: Vector3<f64>) -> Result<(f64, f64), String> {
        let (_, j, _) = self.linearise(y)?;
        Ok((j.determinant(), j.trace()))
    }
}

fn eigenvalues(j: &Matrix2<f64>) -> [Complex64; 2] {
    let tr = j.trace();
    let det = j.determinant();
    let disc = Complex64::new(tr * tr / 4.0 - det, 0.0).sqrt();
    [tr / 2.0 + disc, tr / 2.0 - disc]
}

/// One traced branch.
struct Traced {
    points: Vec<BranchPoint>,
    /// (p, x) of the regular points, for the "already traced" test of later seeds.
    ys: Vec<Vector3<f64>>,
}

/// Traces from `y0` in the direction of `t0`; returns the points after y0 (y0 excluded) and
/// their y.
fn trace(
    fam: &Family<'_>,
    spec: &ContinuationSpec,
    y0: Vector3<f64>,
    t0: Vector3<f64>,
    budget: usize,
) -> Result<(Vec<BranchPoint>, Vec<Vector3<f64>>), String> {
    let (p_lo, p_hi) = (spec.from.min(spec.to), spec.from.max(spec.to));
    let ds_max = spec.step;
    let ds_min = spec.step * 1e-5;
    let mut ds = ds_max;
    let (mut y, mut t) = (y0, t0);
    let (mut det, mut tr) = fam.det_tr(y)?;
    let mut out = Vec::new();
    let mut ys = Vec::new();
    while out.len() < budget {
        if crate::interrupt::is_requested() {
            return Err(INTERRUPTED.to_string());
        }
        let pred = y + t * ds;
        let Some(y1) = fam.correct(pred, t, t.dot(&y) + ds)? else {
            ds /= 2.0;
            if ds < ds_min {
                break;
            }
            continue;
        };
        if (y1 - y).norm() > 3.0 * ds {
            // Jumped to another branch: smaller step.
            ds /= 2.0;
            if ds < ds_min {
                break;
            }
            continue;
        }
        let Some(mut t1) = fam.tangent(y1)? else {
            break;
        };
        if t1.dot(&t) < 0.0 {
            t1 = -t1;
        }
        // Left the interval: finish exactly at its end.
        if y1[2] < p_lo || y1[2] > p_hi {
            let end = if y1[2] < p_lo { p_lo } else { p_hi };
            let frac = (end - y[2]) / (y1[2] - y[2]);
            let guess = y + (y1 - y) * frac;
            if let Some(ye) = fam.correct(guess, Vector3::new(0.0, 0.0, 1.0), end)? {
                if ye[0].hypot(ye[1]) <= 1.0 + 1e-9 {
                    out.push(fam.point(ye, None)?);
                    ys.push(ye);
                }
            }
            break;
        }
        // Left the closed unit disk.
        if y1[0].hypot(y1[1]) > 1.0 + 1e-9 {
            break;
        }
        let (det1, tr1) = fam.det_tr(y1)?;
        // Special points between y and y1, located along the arclength from y.
        let sigma1 = t.dot(&(y1 - y));
        if t[2] * t1[2] < 0.0 {
            let tp = |ys: Vector3<f64>| -> Result<f64, String> {
                Ok(fam
                    .tangent(ys)?
                    .map_or(0.0, |u| if u.dot(&t) < 0.0 { -u[2] } else { u[2] }))
            };
            if let Some(ys_) = locate(fam, y, t, sigma1, &tp)? {
                out.push(fam.point(ys_, Some("LP"))?);
            }
        } else if tr * tr1 < 0.0 && tr * tr / 4.0 < det && tr1 * tr1 / 4.0 < det1 {
            let trace = |ys: Vector3<f64>| -> Result<f64, String> { Ok(fam.det_tr(ys)?.1) };
            if let Some(ys_) = locate(fam, y, t, sigma1, &trace)? {
                out.push(fam.point(ys_, Some("H"))?);
            }
        }
        out.push(fam.point(y1, None)?);
        ys.push(y1);
        fam.tick(y1[2]);
        // Closed curve: back at the start.
        if out.len() > 3 && (y1 - y0).norm() < 0.5 * ds {
            break;
        }
        let easy = (y1 - pred).norm() < 0.1 * ds;
        y = y1;
        t = t1;
        det = det1;
        tr = tr1;
        if easy {
            ds = (ds * 1.5).min(ds_max);
        }
    }
    Ok((out, ys))
}

/// Bisection on the sign of `g` at the corrected points along the arclength sigma in
/// [0, sigma1] from y along t.
fn locate(
    fam: &Family<'_>,
    y: Vector3<f64>,
    t: Vector3<f64>,
    sigma1: f64,
    g: &dyn Fn(Vector3<f64>) -> Result<f64, String>,
) -> Result<Option<Vector3<f64>>, String> {
    let at = |mid: f64| -> Result<_, String> {
        let Some(ym) = fam.correct(y + t * mid, t, t.dot(&y) + mid)? else {
            return Ok(None);
        };
        Ok(Some((ym, g(ym)?)))
    };
    corrector::bisect_arclength(sigma1, g(y)?, LOCATE_STEPS, at, |_| false)
}

/// Whether (p, x) lies on a traced branch (within `tol`, by linear interpolation in p between
/// consecutive points, or near a point).
fn on_branch(branches: &[Traced], y: Vector3<f64>, tol: f64) -> bool {
    branches.iter().any(|b| {
        b.ys.iter().any(|q| (q - y).norm() < tol)
            || b.ys.windows(2).any(|w| {
                let (a, c) = (w[0], w[1]);
                let d = c - a;
                let len2 = d.norm_squared();
                if len2 == 0.0 {
                    return false;
                }
                let s = ((y - a).dot(&d) / len2).clamp(0.0, 1.0);
                (a + d * s - y).norm() < tol
            })
    })
}

/// The parameter values branches start from: `from`, `to` and [`INNER_SEEDS`] in between.
fn seeds(spec: &ContinuationSpec) -> Vec<f64> {
    let mut seeds_p = vec![spec.from, spec.to];
    for k in 1..=INNER_SEEDS {
        seeds_p.push(spec.from + (spec.to - spec.from) * k as f64 / (INNER_SEEDS + 1) as f64);
    }
    seeds_p
}

/// Checks, before the sweep's first point, that the scenario is valid at every seed of the
/// continuation and that its Ott-Antonsen coefficients are finite there (exit 2 otherwise).
pub fn check(plan: &BaseScenario, spec: &ContinuationSpec) -> Result<(), Error> {
    let fail = |m: String| {
        Error::Input(format!(
            "{}: continuation: {}",
            plan.file.display(),
            crate::input::clip(&m, 300)
        ))
    };
    let fam = Family::new(plan, &spec.key);
    for p in seeds(spec) {
        if !p.is_finite() {
            return Err(fail(format!(
                "the range from..to gives {p}, not a finite value"
            )));
        }
        let sh = fam
            .coefficients(p)
            .map_err(|m| fail(format!("at {} = {p}: {m}", spec.parameter)))?;
        let finite = [Vector2::new(0.3, 0.2), Vector2::new(-0.5, 0.4)]
            .into_iter()
            .all(|x| Family::field(&sh, x).iter().all(|v| v.is_finite()));
        if !finite {
            return Err(fail(format!(
                "at {} = {p} the Ott-Antonsen coefficients are not finite",
                spec.parameter
            )));
        }
    }
    Ok(())
}

/// Continues the OA fixed points of the base scenario along `spec.parameter`; with
/// `progress`, reports the seeds done on stderr like the other long stages.
pub fn run(plan: &BaseScenario, spec: &ContinuationSpec, progress: bool) -> Result<Report, Error> {
    run_with(plan, spec, progress, None)
}

/// [`run`] with the coefficients given as a function of the parameter (`fast`), when the
/// caller has them without building the scenario.
pub fn run_with(
    plan: &BaseScenario,
    spec: &ContinuationSpec,
    progress: bool,
    fast: Option<&Coefficients<'_>>,
) -> Result<Report, Error> {
    let fail = section_error(plan, "continuation");
    let ticker = progress.then(|| {
        RefCell::new(Ticker {
            reporter: Reporter::new(&format!("{} continuation", plan.name)),
            parameter: spec.parameter.clone(),
            seed: 0,
            seeds: seeds(spec).len(),
            points: 0,
        })
    });
    let fam = Family {
        fast,
        ticker,
        ..Family::new(plan, &spec.key)
    };
    let branches = trace_all(&fam, spec).map_err(fail)?;
    if let Some(t) = &fam.ticker {
        t.borrow_mut().reporter.finish();
    }
    Ok(report(spec, &branches))
}

/// Traces a branch through every fixed point found at the seed parameters (once per branch).
fn trace_all(fam: &Family<'_>, spec: &ContinuationSpec) -> Result<Vec<Traced>, String> {
    let direction = (spec.to - spec.from).signum();
    let mut branches: Vec<Traced> = Vec::new();
    let tol = (spec.step * 0.5).max(1e-6);
    let all = seeds(spec);
    for (k, p) in all.iter().copied().enumerate() {
        if let Some(t) = &fam.ticker {
            let mut t = t.borrow_mut();
            t.seed = k;
            t.show(p);
        }
        let sh = fam.coefficients(p)?;
        let continuum = boundary_zeros(&sh).1;
        for fp in fixed_points(&sh) {
            if continuum && fp.on_boundary {
                continue;
            }
            let y0 = Vector3::new(fp.r.re, fp.r.im, p);
            if on_branch(&branches, y0, tol) {
                continue;
            }
            let Some(t0) = fam.tangent(y0)? else {
                continue;
            };
            // Forward: towards `to` (from `from`), backward from `to`; inner seeds both ways.
            let forward = if t0[2] * direction >= 0.0 { t0 } else { -t0 };
            branches.push(trace_from(fam, spec, p, y0, forward)?);
        }
    }
    Ok(branches)
}

/// The branch through the seed `y0` at parameter `p`, in the order of the parameter's range.
fn trace_from(
    fam: &Family<'_>,
    spec: &ContinuationSpec,
    p: f64,
    y0: Vector3<f64>,
    forward: Vector3<f64>,
) -> Result<Traced, String> {
    let first = fam.point(y0, None)?;
    let mut points;
    let mut ys;
    if p == spec.from {
        let (pts, yv) = trace(fam, spec, y0, forward, spec.max_points)?;
        points = vec![first];
        points.extend(pts);
        ys = vec![y0];
        ys.extend(yv);
    } else if p == spec.to {
        let (pts, yv) = trace(fam, spec, y0, -forward, spec.max_points)?;
        points = vec![first];
        points.extend(pts);
        ys = vec![y0];
        ys.extend(yv);
        points.reverse();
        ys.reverse();
    } else {
        let half = spec.max_points / 2;
        let (mut back, mut back_y) = trace(fam, spec, y0, -forward, half)?;
        let (fwd, fwd_y) = trace(fam, spec, y0, forward, half)?;
        back.reverse();
        back_y.reverse();
        points = back;
        points.push(first);
        points.extend(fwd);
        ys = back_y;
        ys.push(y0);
        ys.extend(fwd_y);
    }
    Ok(Traced { points, ys })
}

/// `branches.csv`, the summary and the branches for the picture.
fn report(spec: &ContinuationSpec, branches: &[Traced]) -> Report {
    let columns = {
        let mut c = vec!["branch".to_string(), spec.parameter.clone()];
        c.extend(
            [
                "r2_re", "r2_im", "r2_abs", "stable", "unstable", "point", "ev1_re", "ev1_im",
                "ev2_re", "ev2_im",
            ]
            .map(String::from),
        );
        c
    };
    let mut rows = Vec::new();
    let mut specials = Vec::new();
    for (b, branch) in branches.iter().enumerate() {
        for pt in &branch.points {
            rows.push(vec![
                (b + 1).to_string(),
                fmt_f64(pt.p),
                fmt_f64(pt.r.re),
                fmt_f64(pt.r.im),
                fmt_f64(pt.r.norm()),
                pt.stable().to_string(),
                pt.unstable().to_string(),
                pt.special.unwrap_or("").to_string(),
                fmt_f64(pt.eigenvalues[0].re),
                fmt_f64(pt.eigenvalues[0].im),
                fmt_f64(pt.eigenvalues[1].re),
                fmt_f64(pt.eigenvalues[1].im),
            ]);
            if let Some(kind) = pt.special {
                specials.push(Special {
                    point: kind,
                    branch: b + 1,
                    parameter: pt.p,
                    r2_re: pt.r.re,
                    r2_im: pt.r.im,
                    l1: pt.l1,
                });
            }
        }
    }
    let summary = serde_json::json!({
        "parameter": spec.parameter,
        "from": spec.from,
        "to": spec.to,
        "step": spec.step,
        "branches": branches.len(),
        "points": rows.len(),
        "special_points": specials,
    });
    Report {
        csv: csv_text(&columns, rows),
        branches: branches.iter().map(|b| b.points.clone()).collect(),
        summary,
    }
}

#[derive(Serialize)]
struct Special {
    point: &'static str,
    branch: usize,
    parameter: f64,
    r2_re: f64,
    r2_im: f64,
    /// l1 at H points (null at LP).
    l1: Option<f64>,
}
