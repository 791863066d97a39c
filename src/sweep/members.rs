//! Sweep points that are ensembles, and sweeps that go there and back (docs/MATH.md,
//! "Ensembles in sweeps and hysteresis").
//!
//! ```text
//! point with [ensemble] runs = N:  the N runs of `tokdyn run` at the point's scenario (seeds
//!     s, s + 1, ..., s + N - 1), label = the most frequent run label (ties: the first of
//!     converged-clusters, rotating-clusters, oscillation, interior-point, rotating-interior,
//!     undetermined, metastable-clusters), label_share = count / N; the other numbers (and
//!     cluster_count) are those of the first run with that label; r1_mean, r1_sd, nematic_mean, nematic_sd = mean and
//!     sample sd over the runs of each run's tail average of |R1| and s
//! axis { from = a, to = b, steps = m, back = true }:  the points a -> b -> a (2 m - 1 of
//!     them, in this order), run j of point i started from run j's final tokens at point i - 1
//!     (point 0 from the scenario's tokens; after a failed point, again from them)
//! ```
//!
//! A sweep that goes back is a chain: it has one axis, runs the full model, and is neither
//! sharded nor refined; `--resume` reuses its rows only when all of them are done (the
//! progress file keeps the rows, not the tokens the next point starts from).

use std::path::Path;

use crate::ensemble::{self, Ensemble};
use crate::error::Error;
use crate::scenario::{ModelKind, Scenario, ScenarioError};

use super::row::{one_line, Outcome, PointStats};
use super::spec::Plan;

/// The mean and the sample standard deviation (0 for one value) of `values`.
fn mean_sd(values: &[f64]) -> (f64, f64) {
    let m = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / m;
    let k = values.len().saturating_sub(1).max(1) as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / k;
    (mean, var.max(0.0).sqrt())
}

/// The point's outcome read from its ensemble.
pub fn ensemble_outcome(e: &Ensemble) -> Outcome {
    let Some(row) = e.rows.iter().find(|r| r.label == e.label) else {
        return Outcome::failure("the ensemble has no runs");
    };
    let r1: Option<Vec<f64>> = e.rows.iter().map(|r| r.r1_abs_mean).collect();
    let r1 = r1.map(|v| mean_sd(&v));
    let s: Vec<f64> = e.rows.iter().map(|r| r.nematic_mean).collect();
    let (nematic_mean, nematic_sd) = mean_sd(&s);
    let f = &row.features;
    let reason = format!(
        "the most frequent label of {} runs (share {:.4}); run {}: {}",
        e.rows.len(),
        e.label_share,
        row.run,
        row.reason
    );
    let mut o = Outcome::labelled(Some(e.label), one_line(&reason));
    o.r2_abs_final = Some(f.r2_abs_final);
    o.r2_abs_tail_min = Some(f.r2_abs_tail_min);
    o.r2_abs_tail_max = Some(f.r2_abs_tail_max);
    o.r2_arg_rate = Some(f.r2_arg_rate);
    o.period = f.period;
    o.t_final = Some(row.t_final);
    o.cluster_count = row.cluster_count;
    o.label_share = Some(e.label_share);
    o.stats = Some(PointStats {
        r1_mean: r1.map(|r| r.0),
        r1_sd: r1.map(|r| r.1),
        nematic_mean,
        nematic_sd,
    });
    o
}

/// Runs the ensemble of a point's scenario (from `starts` when given): its outcome.
pub fn ensemble_point(
    scenario: &Scenario,
    model: ModelKind,
    starts: Option<&[Vec<f64>]>,
) -> (Outcome, Option<Vec<Vec<f64>>>) {
    ensemble_point_keeping(scenario, model, starts, false)
}

/// [`ensemble_point`] with every run's final tokens too when `keep` (for the next point).
fn ensemble_point_keeping(
    scenario: &Scenario,
    model: ModelKind,
    starts: Option<&[Vec<f64>]>,
    keep: bool,
) -> (Outcome, Option<Vec<Vec<f64>>>) {
    match ensemble::simulate_from(scenario, model, starts, keep) {
        Ok(mut e) => {
            let finals = e.finals.take();
            (ensemble_outcome(&e), finals)
        }
        Err(Error::RunFailed { status, .. }) => (
            Outcome::failure(&format!("the {model} run failed: {status}")),
            None,
        ),
        Err(e) => (Outcome::failure(&e.to_string()), None),
    }
}

/// Runs the points `todo` of a sweep that goes back, in order, each from the previous
/// point's final tokens; `record` sees every finished point. Stops (without the point) when
/// an interruption is requested.
pub fn follow(
    plan: &Plan,
    todo: &[usize],
    record: &mut dyn FnMut(usize, &Outcome) -> Result<(), Error>,
) -> Result<Vec<(usize, Outcome)>, Error> {
    let mut starts: Option<Vec<Vec<f64>>> = None;
    let mut out = Vec::with_capacity(todo.len());
    for &i in todo {
        if crate::interrupt::is_requested() {
            break;
        }
        let (outcome, finals) = match plan.scenario_at(&plan.coords(i)) {
            Ok(s) => ensemble_point_keeping(&s, plan.model, starts.as_deref(), true),
            Err(e) => (Outcome::failure(&e.to_string()), None),
        };
        if crate::interrupt::is_requested() {
            break;
        }
        starts = finals;
        record(i, &outcome)?;
        out.push((i, outcome));
    }
    Ok(out)
}

/// Bytes a point of an ensemble sweep may need on disk: its `sweep.csv` row, its progress
/// line and its shard row (about 400 bytes each, generously), the transition row.
const POINT_BYTES: u64 = 1600;

/// Refuses (exit 2) an ensemble sweep, or a sweep over the temperature, whose files would
/// not fit where `dir` lives: [`POINT_BYTES`] a point and the pictures.
pub fn check_disk(plan: &Plan, dir: &Path) -> Result<(), Error> {
    let layout = plan.layout();
    if !layout.share && !layout.stats {
        return Ok(());
    }
    let need = (plan.points() as u64)
        .saturating_mul(POINT_BYTES)
        .saturating_add(16 << 20);
    let what = format!("{}: axes", plan.file.display());
    crate::output::check_free_space(dir, need, &what)
}

/// The error for `--shard` (or a Slurm array) on a sweep that goes back.
pub fn not_shardable(plan: &Plan, file: &Path) -> Error {
    let name = plan
        .axes
        .iter()
        .find(|a| a.back)
        .map_or("", |a| a.name.as_str());
    Error::Scenario(ScenarioError::at(
        file,
        format!("axes.{name}.back"),
        "a sweep that goes back is one chain (each point starts from the previous one's tokens) and cannot be sharded; run it without --shard",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::spec::Axis;

    #[test]
    fn an_axis_that_goes_back_retraces_its_values() {
        let a = Axis {
            name: "T".into(),
            key: "noise.temperature".into(),
            from: 0.2,
            to: 0.8,
            steps: 4,
            integer: false,
            back: true,
        };
        assert_eq!(a.points(), 7);
        let v: Vec<f64> = (0..7).map(|i| a.value(i)).collect();
        assert_eq!(v, [0.2, 0.4, 0.6, 0.8, 0.6, 0.4, 0.2]);
        let (m, sd) = mean_sd(&[1.0, 3.0]);
        assert_eq!((m, sd), (2.0, 2f64.sqrt()));
        assert_eq!(mean_sd(&[5.0]), (5.0, 0.0));
    }
}
