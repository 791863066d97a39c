//! Pseudo-arclength continuation of the self-consistency F(R, p) = 0 (docs/MATH.md §17.6).
//!
//! y = (R, p). From y_k with unit tangent t_k (the null vector of [F_R | F_p], found from
//! [F_R F_p; t_{k-1}^T] t = e_last), the predictor is y_k + ds t_k and Newton solves
//! F(y) = 0, t_k . (y - y_k) = ds with the dense matrix [F_R F_p; t_k^T] (nalgebra LU). The
//! step halves when Newton fails or jumps, grows after easy steps, and is at most the sweep's
//! `step`. A fold (LP) is where the p-component of the tangent changes sign; it is located by
//! bisection along the arclength on that component. The bump branch starts at the branch
//! point of the uniform state (R = 0, p = p_c) along the kernel direction e_1 (pitchfork).

use std::convert::Infallible;

use nalgebra::{DMatrix, DVector};

use crate::bifurcation::corrector::{self, small_step};

use super::self_consistency::{Evaluation, SelfConsistency};

/// Newton iterations of the corrector.
const NEWTON_MAX: usize = 30;
/// Bisection steps locating a fold.
const LOCATE_STEPS: usize = 60;
/// The largest relative weight of the density's mode M/4 on the grid (else the branch stops:
/// the density is sharper than the grid resolves).
pub const TAIL_MAX: f64 = 1e-13;

/// A point of the traced branch: y = (R, p) and its density.
pub struct Solved {
    /// (R_k for the modes, p).
    pub y: DVector<f64>,
    /// The evaluation at y.
    pub eval: Evaluation,
    /// `Some("LP")` at a located fold.
    pub special: Option<&'static str>,
}

/// Why a branch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// At an end of the parameter range.
    Range,
    /// The density became sharper than the grid resolves.
    Resolution,
    /// Back at the uniform state (R_1 <= 0).
    Uniform,
    /// The corrector failed with the smallest step.
    Stalled,
    /// `max_points` reached.
    Budget,
}

/// The continuation of one branch.
pub struct Tracer<'a> {
    /// The self-consistency.
    pub sc: &'a SelfConsistency,
    /// The range of p: lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// Largest arclength step.
    pub step: f64,
    /// Most points.
    pub max_points: usize,
}

impl Tracer<'_> {
    fn split(y: &DVector<f64>) -> (DVector<f64>, f64) {
        let n = y.len() - 1;
        (y.rows(0, n).into_owned(), y[n])
    }

    fn eval(&self, y: &DVector<f64>) -> Option<Evaluation> {
        let (r, p) = Self::split(y);
        if !(p.is_finite() && p > 0.0) {
            return None;
        }
        self.sc.evaluate(&r, p)
    }

    /// The augmented matrix [F_R F_p; 0] (the corrector writes the last row).
    fn augmented(e: &Evaluation) -> DMatrix<f64> {
        let k = e.f.len();
        let mut a = DMatrix::zeros(k + 1, k + 1);
        a.view_mut((0, 0), (k, k)).copy_from(&e.jac);
        a.view_mut((0, k), (k, 1)).copy_from(&e.fp);
        a
    }

    /// Newton on F(y) = 0, n . y = c from `guess` (the shared corrector).
    pub fn correct(&self, guess: DVector<f64>, n: &DVector<f64>, c: f64) -> Option<Solved> {
        let k = guess.len() - 1;
        let bordered = |y: &DVector<f64>| -> Result<_, Infallible> {
            Ok(self.eval(y).map(|e| {
                let mut rhs = DVector::zeros(k + 1);
                rhs.rows_mut(0, k).copy_from(&e.f);
                (Self::augmented(&e), rhs)
            }))
        };
        let y = corrector::correct(guess, n, c, NEWTON_MAX, bordered, small_step(1e-13))
            .ok()
            .flatten()?;
        let e = self.eval(&y)?;
        (e.f.norm() < 1e-10).then_some(Solved {
            y,
            eval: e,
            special: None,
        })
    }

    /// The unit tangent at a solved point, oriented along `prev`.
    pub fn tangent(&self, s: &Solved, prev: &DVector<f64>) -> Option<DVector<f64>> {
        corrector::tangent(Self::augmented(&s.eval), prev)
    }

    /// Traces from the solved point `start` along `t0`; returns the points after it (folds
    /// located in their place) and why the branch ended.
    pub fn trace(&self, start: Solved, t0: DVector<f64>) -> (Vec<Solved>, End) {
        let ds_max = self.step;
        let ds_min = self.step * 1e-6;
        let mut ds = ds_max;
        let last = start.y.len() - 1;
        let (mut y, mut t) = (start.y, t0);
        let mut out = Vec::new();
        loop {
            if out.len() >= self.max_points {
                return (out, End::Budget);
            }
            let pred = &y + &t * ds;
            let c = t.dot(&y) + ds;
            let next = self
                .correct(pred.clone(), &t, c)
                .filter(|s| (&s.y - &y).norm() <= 3.0 * ds);
            let Some(s1) = next else {
                ds /= 2.0;
                if ds < ds_min {
                    return (out, End::Stalled);
                }
                continue;
            };
            let Some(t1) = self.tangent(&s1, &t) else {
                return (out, End::Stalled);
            };
            let p1 = s1.y[last];
            if p1 < self.lo || p1 > self.hi {
                let end = if p1 < self.lo { self.lo } else { self.hi };
                let frac = (end - y[last]) / (p1 - y[last]);
                let guess = &y + (&s1.y - &y) * frac;
                let mut e = DVector::zeros(last + 1);
                e[last] = 1.0;
                if let Some(se) = self.correct(guess, &e, end) {
                    out.push(se);
                }
                return (out, End::Range);
            }
            if s1.y[0] <= 0.0 {
                return (out, End::Uniform);
            }
            if s1.eval.tail > TAIL_MAX {
                return (out, End::Resolution);
            }
            if t[last] * t1[last] < 0.0 {
                if let Some(mut fold) = self.locate_fold(&y, &t, t.dot(&(&s1.y - &y))) {
                    fold.special = Some("LP");
                    out.push(fold);
                }
            }
            let easy = (&s1.y - &pred).norm() < 0.1 * ds;
            y = s1.y.clone();
            t = t1;
            out.push(s1);
            if easy {
                ds = (ds * 1.5).min(ds_max);
            }
        }
    }

    /// Bisection on the tangent's p-component along the arclength sigma in [0, sigma1] from y
    /// along t.
    fn locate_fold(&self, y: &DVector<f64>, t: &DVector<f64>, sigma1: f64) -> Option<Solved> {
        let last = y.len() - 1;
        let tp = |s: &Solved| self.tangent(s, t).map(|u| u[last]);
        let (mut lo, mut hi) = (0.0, sigma1);
        let mut g_lo = t[last];
        let mut best = None;
        for _ in 0..LOCATE_STEPS {
            let mid = 0.5 * (lo + hi);
            let s = self.correct(y + t * mid, t, t.dot(y) + mid)?;
            let g = tp(&s)?;
            best = Some(s);
            if g == 0.0 {
                break;
            }
            if g * g_lo < 0.0 {
                hi = mid;
            } else {
                lo = mid;
                g_lo = g;
            }
            if (hi - lo).abs() < 1e-15 * (1.0 + sigma1.abs()) {
                break;
            }
        }
        best
    }
}
