//! One grid point: set the axis values into the template table, check the scenario, build the
//! simulation, solve it with an order-parameter series as its observer (no files), and
//! classify. usa / sa points also count their clusters at every sample and are labelled as
//! `tokdyn run` labels them (docs/MATH.md §11); a sweep over `model.beta` keeps every point's
//! plateaus for `cluster_diagram.png`; `cluster_count` is read on the final tokens.

use crate::classify::CertaintyWatch;
use crate::observe::cluster_series::{plateaus, ClusterSeries};
use crate::observe::Observer;
use crate::simulation;

use super::row::{one_line, Outcome, PointStats};
use super::spec::{LabelSource, Plan};

/// Runs the point at axis values `coords`; a failure of this point is an [`Outcome`] too.
pub fn run_point(plan: &Plan, coords: &[f64]) -> Outcome {
    let scenario = match plan.scenario_at(coords) {
        Ok(s) => s,
        Err(e) => return Outcome::failure(&e.to_string()),
    };
    if plan.label_source == LabelSource::Predict {
        return predicted_point(&scenario);
    }
    if scenario.ensemble.is_some() {
        return super::members::ensemble_point(&scenario, plan.model, None).0;
    }
    let sim = match simulation::build(&scenario, plan.model) {
        Ok(sim) => sim,
        Err(e) => return Outcome::failure(&e.to_string()),
    };
    let mut watch = CertaintyWatch::default();
    // The clusters at every sample: for the label of a softmax kernel (as `tokdyn run` gives
    // it) and the diagram of a sweep over beta.
    let softmax = scenario.model.kernel != crate::scenario::KernelKind::Lsa;
    let mut history = (softmax || super::pictures::draws_cluster_diagram(plan))
        .then(|| ClusterSeries::new(scenario.clusters, scenario.model.d, None));
    let failed = |why: &dyn std::fmt::Display| {
        Outcome::failure(&format!("the {} run failed: {why}", plan.model))
    };
    let mut observers: Vec<&mut dyn Observer> = vec![&mut watch];
    if let Some(h) = history.as_mut() {
        observers.push(h);
    }
    let solved = match sim.solve(&mut observers) {
        Ok(solution) => solution.succeeded(&scenario.name, plan.model),
        Err(e) => return failed(&e),
    };
    let solution = match solved {
        Ok(solution) => solution,
        // The point's reason does not name the scenario: the row says where.
        Err(crate::error::Error::RunFailed { status, .. }) => return failed(&status),
        Err(e) => return failed(&e),
    };
    let cluster_count = final_cluster_count(&scenario, &sim, &solution.final_state);
    let series = watch.series;
    if series.len() < 2 {
        return Outcome::failure("the run produced fewer than two samples");
    }
    let c = crate::outcome::classify_series(&scenario, &series);
    let c = match &history {
        Some(series) if softmax => label_by_clusters(&scenario, plan.model, c, series),
        _ => c,
    };
    let c = match crate::outcome::lyapunov::label_with_exponents(&scenario, plan.model, c, &series)
    {
        Ok((c, _)) => c,
        Err(crate::error::Error::RunFailed { status, .. }) => return failed(&status),
        Err(e) => return failed(&e),
    };
    let f = &c.features;
    Outcome {
        r2_abs_final: Some(f.r2_abs_final),
        r2_abs_tail_min: Some(f.r2_abs_tail_min),
        r2_abs_tail_max: Some(f.r2_abs_tail_max),
        r2_arg_rate: Some(f.r2_arg_rate),
        period: f.period,
        t_final: Some(solution.t_last),
        cluster_count,
        cluster_history: history.map(|h| plateaus(h.rows())),
        stats: Some(PointStats {
            r1_mean: f.r1_abs_mean.or(f.r1_abs_final),
            r1_sd: f.r1_abs_mean.or(f.r1_abs_final).map(|_| 0.0),
            nematic_mean: f.nematic_mean.unwrap_or(f.nematic_final),
            nematic_sd: 0.0,
        }),
        ..Outcome::labelled(Some(c.label), one_line(&c.reason))
    }
}

/// The label refined by the clusters, as `tokdyn run` refines it (docs/MATH.md §11).
fn label_by_clusters(
    scenario: &crate::scenario::Scenario,
    model: crate::scenario::ModelKind,
    c: crate::classify::Classification,
    series: &ClusterSeries,
) -> crate::classify::Classification {
    crate::classify::metastable::refine_run(
        c,
        simulation::cluster_attention(scenario).as_ref(),
        series,
        model == crate::scenario::ModelKind::Clusters,
    )
    .0
}

/// The count of tight clusters of the final tokens under the scenario's `[clusters]` rule
/// (what the run's summary.json `clusters.count` says); `None` for a model without tokens.
fn final_cluster_count(
    scenario: &crate::scenario::Scenario,
    sim: &simulation::Simulation,
    state: &[f64],
) -> Option<usize> {
    let d = scenario.model.d;
    let tokens = sim.dynamics.tokens(state)?;
    let directions = crate::observe::clusters::directions(&tokens, d);
    Some(crate::observe::clusters::detect_clusters(&directions, d, scenario.clusters).count)
}

/// A point labelled by the OA analysis (`label = "predict"`): the label and reason of
/// `tokdyn predict`; the simulation's numbers stay empty (none was run).
fn predicted_point(scenario: &crate::scenario::Scenario) -> Outcome {
    match crate::predict::report::prediction(scenario) {
        Ok(p) => Outcome::labelled(Some(p.label), one_line(&p.reason)),
        Err(e) => Outcome::failure(&format!("the prediction failed: {e}")),
    }
}
