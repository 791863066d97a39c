//! Boundary refinement: where two neighbouring grid points (along one axis, the other
//! coordinates equal) carry different labels, both real labels (not empty, not `undetermined`),
//! bisect along that axis until the bracket is at most the tolerance.
//!
//! A midpoint with one of the two labels moves that end of the bracket. A midpoint with a third
//! real label splits the segment in two (two boundaries). A midpoint that is `undetermined` or
//! fails stops the bisection of that segment: its row keeps the bracket reached (wider than the
//! tolerance), so `bracket` tells how far a row got. For an integer axis the bisection stops at
//! a bracket of 1.
//!
//! `boundaries.csv` has one row per boundary found:
//! `axis,position,<every axis name>,label_below,label_above,bracket`, where `axis` names the
//! axis bisected, `position` is the middle of the final bracket, the axis columns hold the
//! boundary point in the whole parameter space (the bisected axis' own column repeats
//! `position`), `label_below` / `label_above` are the labels at the lower / upper end of the
//! bracket (by axis value) and `bracket` its width. Rows come axis by axis (file order), then by
//! the index of the lower grid point, then by position.

use rayon::prelude::*;

use crate::error::Error;

use super::row::Outcome;
use super::spec::Plan;
use crate::cells::fmt_f64;

/// Most bisection steps of one segment (a guard; 2^-64 of any range is below round-off).
const MAX_DEPTH: usize = 64;

/// An interval `lo..hi` of one axis whose ends have the labels `label_lo` and `label_hi`, the
/// other coordinates fixed at `coords`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bracket {
    pub axis: usize,
    pub coords: Vec<f64>,
    pub lo: f64,
    pub hi: f64,
    pub label_lo: String,
    pub label_hi: String,
}

/// A pair of neighbouring grid points with different labels (`coords`: the first point's; the
/// bisected coordinate is replaced).
pub type Segment = Bracket;

/// A boundary found: a bracket bisected down to the tolerance (`coords`: its middle).
pub type Boundary = Bracket;

impl Bracket {
    /// Middle of the bracket.
    pub fn position(&self) -> f64 {
        self.lo + (self.hi - self.lo) / 2.0
    }

    /// Width of the bracket.
    pub fn bracket(&self) -> f64 {
        self.hi - self.lo
    }
}

/// A label that refinement can use.
fn real(label: &str) -> bool {
    !label.is_empty() && label != "undetermined"
}

/// The segments to refine, ordered by axis and the index of their first point.
pub fn segments(plan: &Plan, outcomes: &[Outcome]) -> Vec<Segment> {
    let Some(refine) = &plan.refine else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (a, axis) in plan.axes.iter().enumerate() {
        if refine.tolerance[a].is_none() {
            continue;
        }
        for i in 0..outcomes.len() {
            let idx = plan.grid_index(i);
            if idx[a] + 1 >= axis.steps {
                continue;
            }
            let mut next = idx.clone();
            next[a] += 1;
            let j = plan.point_index(&next);
            let (la, lb) = (outcomes[i].label(), outcomes[j].label());
            if !real(la) || !real(lb) || la == lb {
                continue;
            }
            let (xa, xb) = (axis.value(idx[a]), axis.value(next[a]));
            if xa == xb {
                continue;
            }
            let ((lo, label_lo), (hi, label_hi)) = if xa < xb {
                ((xa, la), (xb, lb))
            } else {
                ((xb, lb), (xa, la))
            };
            out.push(Segment {
                axis: a,
                coords: plan.coords(i),
                lo,
                hi,
                label_lo: label_lo.to_string(),
                label_hi: label_hi.to_string(),
            });
        }
    }
    out
}

/// Bisects one segment; `compute` runs (or looks up) the point at given coordinates.
pub fn refine_segment(
    plan: &Plan,
    segment: &Segment,
    compute: &(dyn Fn(&[f64]) -> Result<Outcome, Error> + Sync),
) -> Result<Vec<Boundary>, Error> {
    let tol = plan
        .refine
        .as_ref()
        .and_then(|r| r.tolerance[segment.axis])
        .unwrap_or(0.0);
    let mut out = Vec::new();
    bisect(
        plan,
        segment.axis,
        segment.coords.clone(),
        (segment.lo, segment.label_lo.clone()),
        (segment.hi, segment.label_hi.clone()),
        tol,
        0,
        compute,
        &mut out,
    )?;
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn bisect(
    plan: &Plan,
    a: usize,
    mut coords: Vec<f64>,
    (mut lo, label_lo): (f64, String),
    (mut hi, label_hi): (f64, String),
    tol: f64,
    mut depth: usize,
    compute: &(dyn Fn(&[f64]) -> Result<Outcome, Error> + Sync),
    out: &mut Vec<Boundary>,
) -> Result<(), Error> {
    let axis = &plan.axes[a];
    while hi - lo > tol && depth < MAX_DEPTH {
        let mid = if axis.integer {
            ((lo + hi) / 2.0).floor()
        } else {
            lo + (hi - lo) / 2.0
        };
        if mid <= lo || mid >= hi {
            break;
        }
        depth += 1;
        coords[a] = mid;
        let outcome = compute(&coords)?;
        let label = outcome.label();
        if label == label_lo {
            lo = mid;
        } else if label == label_hi {
            hi = mid;
        } else if real(label) {
            let label = label.to_string();
            bisect(
                plan,
                a,
                coords.clone(),
                (lo, label_lo),
                (mid, label.clone()),
                tol,
                depth,
                compute,
                out,
            )?;
            return bisect(
                plan,
                a,
                coords,
                (mid, label),
                (hi, label_hi),
                tol,
                depth,
                compute,
                out,
            );
        } else {
            break;
        }
    }
    coords[a] = lo + (hi - lo) / 2.0;
    out.push(Boundary {
        axis: a,
        coords,
        lo,
        hi,
        label_lo,
        label_hi,
    });
    Ok(())
}

/// Refines every segment, in parallel; boundaries in segment order. `done` is called once per
/// finished segment.
pub fn refine_all(
    plan: &Plan,
    segments: &[Segment],
    compute: &(dyn Fn(&[f64]) -> Result<Outcome, Error> + Sync),
    done: &(dyn Fn() + Sync),
) -> Result<Vec<Boundary>, Error> {
    let parts: Vec<Vec<Boundary>> = segments
        .par_iter()
        .with_max_len(1)
        .map(|s| {
            let r = refine_segment(plan, s, compute);
            done();
            r
        })
        .collect::<Result<_, _>>()?;
    Ok(parts.into_iter().flatten().collect())
}

/// The header of `boundaries.csv`.
pub fn columns(plan: &Plan) -> Vec<String> {
    let mut c = vec!["axis".to_string(), "position".to_string()];
    c.extend(plan.axes.iter().map(|a| a.name.clone()));
    c.extend(["label_below", "label_above", "bracket"].map(String::from));
    c
}

/// One row of `boundaries.csv`.
pub fn row(plan: &Plan, b: &Boundary) -> Vec<String> {
    let position = fmt_f64(b.position());
    let mut r = vec![plan.axes[b.axis].name.clone(), position.clone()];
    for (k, axis) in plan.axes.iter().enumerate() {
        r.push(if k == b.axis {
            position.clone()
        } else {
            axis.cell(b.coords[k])
        });
    }
    r.push(b.label_lo.clone());
    r.push(b.label_hi.clone());
    r.push(fmt_f64(b.bracket()));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::row::RESULT_COLUMNS;
    use crate::sweep::spec;
    use crate::sweep::spec::tests::BASE;

    fn plan(axes: &str, refine: &str) -> Plan {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("base.toml"), BASE).unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(
            &path,
            format!("name = \"s\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\n{axes}\n[refine]\n{refine}\n"),
        )
        .unwrap();
        spec::load(&path).unwrap()
    }

    fn outcome(label: &str) -> Outcome {
        let mut cells = vec![String::new(); RESULT_COLUMNS.len()];
        if label.is_empty() {
            cells[6] = "failed".into();
        } else {
            cells[0] = label.into();
        }
        Outcome::from_cells(&cells).unwrap()
    }

    /// The rule labelling the first coordinate by bands: the label of the first cut it is
    /// below, "converged-clusters" above every cut.
    fn bands(cuts: &'static [(f64, &'static str)]) -> impl Fn(&[f64]) -> &'static str + Sync {
        move |c: &[f64]| {
            cuts.iter()
                .find(|(cut, _)| c[0] < *cut)
                .map_or("converged-clusters", |(_, label)| *label)
        }
    }

    /// Labels by a rule on the coordinates, counting the runs.
    fn run_all(
        plan: &Plan,
        rule: &(dyn Fn(&[f64]) -> &'static str + Sync),
    ) -> (Vec<Boundary>, usize) {
        let outcomes: Vec<Outcome> = (0..plan.points())
            .map(|i| outcome(rule(&plan.coords(i))))
            .collect();
        let segs = segments(plan, &outcomes);
        let runs = std::sync::atomic::AtomicUsize::new(0);
        let compute = |c: &[f64]| -> Result<Outcome, Error> {
            runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(outcome(rule(c)))
        };
        let b = refine_all(plan, &segs, &compute, &|| {}).unwrap();
        (b, runs.into_inner())
    }

    #[test]
    fn bisects_a_diagonal_to_the_tolerance_along_both_axes() {
        let p = plan(
            "v11 = { from = 0.0, to = 1.0, steps = 5 }\nv12 = { from = 0.1, to = 0.9, steps = 3 }",
            "tolerance = 1e-4",
        );
        let rule = |c: &[f64]| {
            if c[0] < c[1] {
                "oscillation"
            } else {
                "converged-clusters"
            }
        };
        let (b, runs) = run_all(&p, &rule);
        // v11 crosses v12 = 0.1, 0.5, 0.9; v12 crosses v11 = 0.25, 0.5, 0.75 (not 0 or 1).
        assert_eq!(b.iter().filter(|b| b.axis == 0).count(), 3);
        assert_eq!(b.iter().filter(|b| b.axis == 1).count(), 3, "{b:?}");
        for x in &b {
            assert!(x.bracket() <= 1e-4, "{x:?}");
            assert!((x.coords[0] - x.coords[1]).abs() <= 0.5e-4 + 1e-15, "{x:?}");
            assert_eq!(x.coords[x.axis], x.position());
            let (below, above) = if x.axis == 0 {
                ("oscillation", "converged-clusters")
            } else {
                ("converged-clusters", "oscillation")
            };
            assert_eq!((x.label_lo.as_str(), x.label_hi.as_str()), (below, above));
        }
        assert!(runs < 6 * 14, "{runs}");
        let row = row(&p, &b[0]);
        assert_eq!(
            columns(&p),
            [
                "axis",
                "position",
                "v11",
                "v12",
                "label_below",
                "label_above",
                "bracket"
            ]
        );
        assert_eq!(row[0], "v11");
        assert_eq!(row[1], row[2]);
        assert_eq!(row[3], "0.1");
    }

    #[test]
    fn a_third_label_splits_and_undetermined_stops() {
        let p = plan(
            "v11 = { from = 0.0, to = 1.0, steps = 2 }",
            "relative_tolerance = 1e-3",
        );
        let rule = bands(&[(0.3, "oscillation"), (0.6, "interior-point")]);
        let (b, _) = run_all(&p, &rule);
        assert_eq!(b.len(), 2, "{b:?}");
        assert!((b[0].position() - 0.3).abs() < 1e-3 && b[0].label_hi == "interior-point");
        assert!((b[1].position() - 0.6).abs() < 1e-3 && b[1].label_lo == "interior-point");

        let rule = bands(&[(0.4, "oscillation"), (0.45, "undetermined")]);
        let (b, _) = run_all(&p, &rule);
        assert_eq!(b.len(), 1);
        assert!(
            b[0].bracket() > 1e-3,
            "stopped at the undetermined point: {b:?}"
        );
        assert!(b[0].lo <= 0.4 && b[0].hi >= 0.45);

        // Failed or undetermined grid points are not refined.
        let rule = |c: &[f64]| if c[0] < 0.5 { "" } else { "converged-clusters" };
        assert!(run_all(&p, &rule).0.is_empty());
    }

    #[test]
    fn integer_axes_stop_at_a_bracket_of_one() {
        let p = plan("tokens.n = { from = 10, to = 100, steps = 2 }", "");
        let rule = bands(&[(37.0, "oscillation")]);
        let (b, _) = run_all(&p, &rule);
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].lo, b[0].hi), (36.0, 37.0));
    }
}
