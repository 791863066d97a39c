//! `transition.csv` and `transition.png`: a sweep whose one varying axis is
//! `noise.temperature`, read as a phase transition (docs/MATH.md §14).
//!
//! ```text
//! transition.csv: temperature,leg,label,label_share,r1_mean,r1_sd,nematic_mean,nematic_sd,mean_field_r1
//!   leg = out (from -> to) | back (the return of an axis with back = true)
//!   r1_mean, nematic_mean: mean over the point's runs of each run's tail average of |R1|, s
//!   (sd: sample standard deviation over the runs, 0 for one run)
//!   mean_field_r1: the ordered stationary |R1| of the mean field at that temperature (usa on
//!   the circle with A = V = I; empty where the mean field does not hold, and for sa)
//! ```
//!
//! The picture draws the mean |R1| (and the mean s, lighter) against T with one-sd bars, the
//! return leg in its own colour and the area between the legs shaded (the hysteresis loop),
//! the mean-field branch on a fine grid and the critical temperature T_c as a dashed line.

use std::path::Path;

use super::row::Outcome;
use super::spec::{Plan, TEMPERATURE_KEY};
use crate::cells::{csv_text, fmt_opt};
use crate::ensemble::mean_field::MeanField;
use crate::error::Error;
use crate::output::write_atomic;
use crate::plot::transition::{TransitionPoint, TransitionView};

/// The header of `transition.csv`.
pub const COLUMNS: [&str; 9] = [
    "temperature",
    "leg",
    "label",
    "label_share",
    "r1_mean",
    "r1_sd",
    "nematic_mean",
    "nematic_sd",
    "mean_field_r1",
];

/// Points of the drawn mean-field branch.
const CURVE_POINTS: usize = 201;

/// The temperature axis, when it is the sweep's only varying axis.
fn temperature_axis(plan: &Plan) -> Option<usize> {
    let varying: Vec<usize> = (0..plan.axes.len())
        .filter(|&a| plan.axes[a].points() > 1)
        .collect();
    match varying.as_slice() {
        [a] if plan.axes[*a].key == TEMPERATURE_KEY => Some(*a),
        _ => None,
    }
}

/// The mean-field |R1| at each of `ts` (any order, repeats allowed), when the mean field holds
/// for usa: the branch is followed over the distinct temperatures in ascending order.
fn branch_at(mean_field: Option<MeanField>, ts: &[f64]) -> Vec<Option<f64>> {
    let mut distinct = ts.to_vec();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    let Some(r) = mean_field.and_then(|m| m.ordered_branch(&distinct)) else {
        return vec![None; ts.len()];
    };
    ts.iter()
        .map(|t| {
            let k = distinct.partition_point(|d| d.total_cmp(t).is_lt());
            r.get(k).copied()
        })
        .collect()
}

/// Writes `transition.csv` and `transition.png` for a sweep over the temperature (nothing
/// for other sweeps).
pub fn write(plan: &Plan, outcomes: &[(Vec<f64>, &Outcome)], dir: &Path) -> Result<(), Error> {
    let Some(a) = temperature_axis(plan) else {
        return Ok(());
    };
    let steps = plan.axes[a].steps;
    let mean_field = MeanField::of(&plan.base);
    let ts: Vec<f64> = outcomes.iter().map(|(c, _)| c[a]).collect();
    let branch = branch_at(mean_field, &ts);
    let points: Vec<TransitionPoint> = outcomes
        .iter()
        .enumerate()
        .map(|(i, (c, o))| TransitionPoint {
            temperature: c[a],
            back: i >= steps,
            label: o.label,
            label_share: o.label_share,
            r1: o.stats.and_then(|s| s.r1_mean.zip(s.r1_sd)),
            nematic: o.stats.map(|s| (s.nematic_mean, s.nematic_sd)),
        })
        .collect();
    let path = dir.join("transition.csv");
    let text = csv_text(
        &COLUMNS,
        points.iter().zip(&branch).map(|(p, b)| row(p, *b)),
    );
    write_atomic(&path, text.as_bytes()).map_err(Error::io(&path))?;
    let view = view(plan, points, mean_field);
    crate::plot::transition_plot(&view, plan.base.output.figure, dir).map_err(Error::io(dir))
}

/// One row of `transition.csv`.
fn row(p: &TransitionPoint, mean_field_r1: Option<f64>) -> Vec<String> {
    vec![
        fmt_opt(Some(p.temperature)),
        if p.back { "back" } else { "out" }.into(),
        p.label.map(|l| l.as_str().to_string()).unwrap_or_default(),
        fmt_opt(p.label_share),
        fmt_opt(p.r1.map(|r| r.0)),
        fmt_opt(p.r1.map(|r| r.1)),
        fmt_opt(p.nematic.map(|s| s.0)),
        fmt_opt(p.nematic.map(|s| s.1)),
        fmt_opt(mean_field_r1),
    ]
}

/// What the picture shows: the points, the mean-field branch on a fine grid and T_c.
fn view(
    plan: &Plan,
    points: Vec<TransitionPoint>,
    mean_field: Option<MeanField>,
) -> TransitionView {
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
            (l.min(p.temperature), h.max(p.temperature))
        });
    let grid: Vec<f64> = (0..CURVE_POINTS)
        .map(|i| lo + (hi - lo) * i as f64 / (CURVE_POINTS - 1) as f64)
        .collect();
    let curve: Vec<(f64, f64)> = branch_at(mean_field, &grid)
        .into_iter()
        .zip(&grid)
        .filter_map(|(r, t)| r.map(|r| (*t, r)))
        .collect();
    let runs = plan.base.ensemble.map_or(1, |e| e.runs);
    let b = &plan.base;
    TransitionView {
        title: format!(
            "{}: {} kernel, beta = {}, n = {}, d = {}, {runs} run{} a point",
            plan.name,
            b.model.kernel,
            crate::cells::short_number(b.model.beta),
            b.tokens.n,
            b.model.d,
            if runs == 1 { "" } else { "s" }
        ),
        points,
        curve,
        critical: mean_field.map(|m| (m.critical_temperature(), m.kernel)),
    }
}
