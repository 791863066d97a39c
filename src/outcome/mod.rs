//! The outcome of one run of a scenario, as data (nothing here writes a folder):
//!
//! - its label: the classifier's (docs/MATH.md §6), read on the stationary state under noise
//!   (§12) and refined by the tight clusters (§11: `metastable-clusters`, the cluster model's
//!   hand-over);
//! - the clusters observer that feeds that refinement (`clusters.csv`'s rows, with the energy
//!   where the flow is a gradient flow);
//! - `summary.json`'s content ([`Summary`]) and the `compare` object in it.
//!
//! It lies above the stages it assembles (simulation, integrate, observe, classify) and below
//! the commands, which write it into output folders, and the ensembles, which fold many runs.

pub mod beside_mean_field;
mod compare;
pub mod lyapunov;
pub mod mean_field;
mod summary;

pub use compare::{
    compare_summary, compared_models, max_distance, run_compared, CompareMerges, CompareSummary,
    ModelRow, PerModel,
};
pub use summary::{RunReport, Summary, Timings};

use std::path::Path;

use crate::classify::metastable::{self, RunClusters};
use crate::classify::{classify, CertaintyWatch, Classification};
use crate::error::Error;
use crate::integrate::Solution;
use crate::layers::StackInfo;
use crate::model::energy::Energy;
use crate::observe::cluster_series::{ClusterSeries, EnergyFn};
use crate::observe::{Observer, OrderSeries};
use crate::output::RunOptions;
use crate::scenario::{ModelKind, Scenario};
use crate::simulation;

/// The label of a run's series: the stationary state under noise, else the long-term
/// behaviour.
pub fn classify_series(scenario: &Scenario, series: &OrderSeries) -> Classification {
    if scenario.noise.is_some() {
        crate::classify::classify_stationary(series, scenario.tokens.n)
    } else {
        classify(series)
    }
}

/// The label of a run: [`classify_series`], or for a stack of layers (without noise) the
/// stack's reading (a looped stack on its stroboscopic series), with the stack's summary.
pub fn label_run(
    scenario: &Scenario,
    series: &OrderSeries,
    solution: &Solution,
) -> (Classification, Option<StackInfo>) {
    if scenario.noise.is_some() || scenario.model.layers.is_empty() {
        return (classify_series(scenario, series), None);
    }
    let (c, info) = crate::layers::classify_stack(scenario, series, &solution.boundaries);
    (c, Some(info))
}

/// Runs `scenario` with its `run.model` without writing anything: the `extra` observers see
/// every sample (the Python module keeps the series, tokens and trajectory with them) and the
/// summary that `run` would write is returned.
pub fn run_in_memory(
    scenario: &Scenario,
    options: &RunOptions,
    extra: &mut [&mut dyn Observer],
) -> Result<Summary, Error> {
    let model = scenario.run.model;
    simulation::check_memory(scenario, model)?;
    if model == ModelKind::MeanField {
        return Ok(mean_field::solve_mean_field(scenario, options, extra)?.summary);
    }
    let sim = simulation::build(scenario, model)?;
    let mut watch = CertaintyWatch::default();
    let mut clusters = cluster_series(scenario, model, None)?;
    let mut observers: Vec<&mut dyn Observer> = vec![&mut watch];
    for o in extra.iter_mut() {
        observers.push(&mut **o);
    }
    if let Some(c) = clusters.as_mut() {
        observers.push(c);
    }
    let solution = sim
        .solve(&mut observers)
        .map_err(Error::io(&scenario.file))?
        .succeeded(&scenario.name, sim.model)?;
    let (classification, stack) = label_run(scenario, &watch.series, &solution);
    let (classification, cluster_summary) =
        label_clusters(scenario, model, classification, &clusters);
    let (classification, spectrum) =
        lyapunov::label_with_exponents(scenario, model, classification, &watch.series)?;
    let mut summary = Summary::new(scenario, model, &solution, &classification, options);
    summary.stack = stack;
    summary.clusters = cluster_summary;
    summary.lyapunov = spectrum.as_ref().map(lyapunov::LyapunovSummary::of);
    summary.cluster_rows = clusters.map(|c| c.rows().to_vec()).unwrap_or_default();
    Ok(summary)
}

/// The clusters observer of a run whose model has tokens (not `oa`), writing `clusters.csv`
/// into `dir` when given; the energy column is filled where the flow has one (one layer,
/// V = A symmetric, docs/MATH.md §11).
pub fn cluster_series(
    scenario: &Scenario,
    model: ModelKind,
    dir: Option<&Path>,
) -> Result<Option<ClusterSeries>, Error> {
    if model == ModelKind::Oa {
        return Ok(None);
    }
    let d = scenario.model.d;
    let energy = if simulation::one_free_sphere_layer(scenario) {
        Energy::of_attention(&simulation::attention(scenario))
            .filter(|e| e.computable(scenario.tokens.n, d))
    } else {
        None
    };
    let energy = energy.map(|e| -> EnergyFn {
        Box::new(move |x: &[f64]| e.value(x, d).map_err(|why| why.to_string()))
    });
    let series = ClusterSeries::new(scenario.clusters, d, energy);
    Ok(Some(match dir {
        Some(dir) => {
            let path = dir.join("clusters.csv");
            series.with_csv(&path).map_err(Error::io(&path))?
        }
        None => series,
    }))
}

/// The label refined by the clusters (docs/MATH.md §11; `--model clusters`: `undetermined` when
/// the cluster model never took over) and summary.json `clusters`.
pub fn label_clusters(
    scenario: &Scenario,
    model: ModelKind,
    c: Classification,
    clusters: &Option<ClusterSeries>,
) -> (Classification, Option<RunClusters>) {
    let Some(series) = clusters else {
        return (c, None);
    };
    let (c, metastable) = metastable::refine_run(
        c,
        simulation::cluster_attention(scenario).as_ref(),
        series,
        model == ModelKind::Clusters,
    );
    let summary = series.summary().map(|summary| RunClusters {
        summary,
        metastable,
    });
    (c, summary)
}
