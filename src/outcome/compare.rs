//! The reductions against the full model (docs/MATH.md §4, §11): which models a scenario is
//! compared with, one model's run from the full model's initial tokens, and the `compare`
//! object of summary.json (max over the samples of |R2 - R2_full|, wall time, unknowns).

use std::path::Path;
use std::time::Instant;

use num_complex::Complex64;
use serde::Serialize;

use super::cluster_series;
use crate::error::Error;
use crate::integrate::solve;
use crate::observe::cluster_series::{ClusterSeries, Merge};
use crate::observe::{Observer, OrderSeries};
use crate::scenario::{ModelKind, Scenario};
use crate::simulation;

/// One model's line of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ModelRow {
    /// The model.
    pub model: ModelKind,
    /// Real unknowns integrated.
    pub unknowns: usize,
    /// Wall time of its run.
    pub seconds: f64,
    /// max |R2 - R2_full| over the samples (0 for the full model).
    pub max_dr2: f64,
}

/// The `compare` object of summary.json: max over the samples of |R2 - R2_full| for each
/// reduction, and the seconds and unknowns of each model (null for a model that did not run).
/// Fields in alphabetical order, the order of the file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareSummary {
    /// max |R2 - R2_full| of the cluster model (usa / sa only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clusters_vs_full: Option<f64>,
    /// max |R2 - R2_full| of the group model.
    pub group_vs_full: Option<f64>,
    /// max |R2 - R2_full| of the Ott–Antonsen equation.
    pub oa_vs_full: Option<f64>,
    /// max |R2 - R2_full| of the phase model.
    pub phase_vs_full: Option<f64>,
    /// Wall time of each model.
    pub seconds: PerModel<f64>,
    /// Real unknowns of each model.
    pub unknowns: PerModel<usize>,
    /// max |R2 - R2_full| of Watanabe–Strogatz.
    pub ws_vs_full: Option<f64>,
    /// usa / sa: the merges of the full model and of the cluster model, side by side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merges: Option<CompareMerges>,
    /// The mean field beside the particles, where it applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_field: Option<super::beside_mean_field::MeanFieldComparison>,
    /// max |R2 - R2_full| of the mean field (without noise, where it applies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_field_vs_full: Option<f64>,
}

/// The merges `{t, from_count, to_count}` of the full model and of the cluster model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareMerges {
    /// The cluster model's.
    pub clusters: Vec<Merge>,
    /// The full model's.
    pub full: Vec<Merge>,
}

/// One number per compared model (null for a model that did not run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerModel<T> {
    /// The cluster model (usa / sa only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clusters: Option<T>,
    /// The full particle model.
    pub full: Option<T>,
    /// The group model.
    pub group: Option<T>,
    /// The Ott–Antonsen equation.
    pub oa: Option<T>,
    /// The phase model.
    pub phase: Option<T>,
    /// Watanabe–Strogatz.
    pub ws: Option<T>,
}

impl<T> PerModel<T> {
    /// `value` of the row of each model.
    pub fn of(rows: &[ModelRow], value: impl Fn(&ModelRow) -> T) -> Self {
        let of = |model: ModelKind| rows.iter().find(|r| r.model == model).map(&value);
        PerModel {
            clusters: of(ModelKind::Clusters),
            full: of(ModelKind::Full),
            group: of(ModelKind::Group),
            oa: of(ModelKind::Oa),
            phase: of(ModelKind::Phase),
            ws: of(ModelKind::Ws),
        }
    }
}

/// The `compare` object of summary.json.
pub fn compare_summary(rows: &[ModelRow]) -> CompareSummary {
    let dr2 = PerModel::of(rows, |r| r.max_dr2);
    CompareSummary {
        clusters_vs_full: dr2.clusters,
        group_vs_full: dr2.group,
        oa_vs_full: dr2.oa,
        phase_vs_full: dr2.phase,
        seconds: PerModel::of(rows, |r| r.seconds),
        unknowns: PerModel::of(rows, |r| r.unknowns),
        ws_vs_full: dr2.ws,
        merges: None,
        mean_field: None,
        mean_field_vs_full: None,
    }
}

/// max over the common samples of |a - b|.
pub fn max_distance(a: &[Complex64], b: &[Complex64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
}

/// The models compared with `full`: the d = 2 reductions and `group` when the scenario is d = 2
/// LSA, `group` alone for LSA in another dimension, the cluster model for usa / sa.
pub fn compared_models(scenario: &Scenario) -> Result<Vec<ModelKind>, Error> {
    if scenario.model.kernel != crate::scenario::KernelKind::Lsa {
        return Ok(vec![ModelKind::Clusters]);
    }
    if scenario.model.d != 2 {
        return Ok(vec![ModelKind::Group]);
    }
    for model in [ModelKind::Phase, ModelKind::Ws, ModelKind::Oa] {
        simulation::second_harmonic(scenario, model)?;
    }
    Ok(vec![
        ModelKind::Phase,
        ModelKind::Ws,
        ModelKind::Oa,
        ModelKind::Group,
    ])
}

/// Runs one model for the comparison: its R2 series and its row.
pub fn run_compared(
    scenario: &Scenario,
    model: ModelKind,
    tokens: &[f64],
    full_series: &OrderSeries,
    dir: &Path,
) -> Result<(ModelRow, OrderSeries, Option<ClusterSeries>), Error> {
    let sim = simulation::build_with_tokens(scenario, model, tokens.to_vec())?;
    let mut series = OrderSeries::new();
    let mut clusters = match model {
        ModelKind::Clusters => cluster_series(scenario, model, None)?,
        _ => None,
    };
    let started = Instant::now();
    let mut observers: Vec<&mut dyn Observer> = vec![&mut series];
    if let Some(c) = clusters.as_mut() {
        observers.push(c);
    }
    let solved = if sim.staircase.is_some() {
        sim.solve(&mut observers)
    } else {
        solve(&sim.problem(), sim.method, &mut observers)
    };
    solved
        .map_err(Error::io(dir))?
        .succeeded(&scenario.name, model)?;
    let seconds = started.elapsed().as_secs_f64();
    let row = ModelRow {
        model,
        unknowns: sim.initial_state.len(),
        seconds,
        max_dr2: max_distance(&series.r2, &full_series.r2),
    };
    Ok((row, series, clusters))
}
