//! `tokdyn predict` for usa / sa: predict.json `clusters` (docs/MATH.md §11).
//!
//! - `from_uniform`: the uniform state's fastest unstable mode ([`super::uniform`]) when every
//!   head has A = a I and V = v I and the initial tokens are near uniform, else null;
//! - `merges`: the cluster model's merges `{t, from_count, to_count}` from the scenario's
//!   run: the full model until its tokens sit in tight clusters, the cluster model from there
//!   to t_end (the run of `--model clusters`), then the cluster model on from the clusters at
//!   t_end until one cluster is left or [`HORIZON`] time units have passed.

use std::path::Path;

use serde::Serialize;

use super::uniform::{predict_from_uniform, UniformPrediction};
use crate::classify::metastable::{predicted_merges, HORIZON};
use crate::error::Error;
use crate::observe::cluster_series::{ClusterSeries, Merge};
use crate::scenario::{MaskKind, ModelKind, NormalizationKind, Scenario, ScenarioError};
use crate::simulation;

/// predict.json `clusters`.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterPrediction {
    /// The fastest mode of the uniform state, the rates and the start's moment.
    #[serde(flatten)]
    pub uniform: UniformPrediction,
    /// The cluster model's merges in time order.
    pub merges: Vec<Merge>,
    /// When the cluster model took over from the full model (null: the tokens were never in
    /// tight clusters by t_end, and there are no merges).
    pub formed: Option<f64>,
    /// The count it took over with (0 when it never did).
    pub formed_count: usize,
}

/// The prediction for a usa / sa scenario (one layer, no noise: checked by the caller).
pub fn cluster_prediction(scenario: &Scenario) -> Result<ClusterPrediction, Error> {
    one_free_layer(scenario)?;
    let tokens = scenario.initial_tokens()?;
    let attention = simulation::attention(scenario);
    let uniform = predict_from_uniform(&attention, &tokens);
    let (merges, formed, formed_count) = staircase_merges(scenario, tokens)?;
    Ok(ClusterPrediction {
        uniform,
        merges,
        formed,
        formed_count,
    })
}

/// An error unless the layer is unmasked and post-LN: the cluster model and the uniform
/// state's modes hold only there.
fn one_free_layer(scenario: &Scenario) -> Result<(), Error> {
    let key = if scenario.model.mask != MaskKind::None {
        "model.mask"
    } else if scenario.model.normalization != NormalizationKind::Post {
        "model.normalization"
    } else if scenario.model.position != crate::scenario::PositionSpec::None {
        "model.position"
    } else {
        return Ok(());
    };
    Err(ScenarioError::at(
        &scenario.file,
        key,
        "`predict` for usa / sa needs an unmasked post-LN layer without positions (the cluster model and the uniform state's modes hold only there); use `tokdyn run`",
    )
    .into())
}

/// The merges of the scenario's `--model clusters` run and of the cluster model beyond t_end.
fn staircase_merges(
    scenario: &Scenario,
    tokens: Vec<f64>,
) -> Result<(Vec<Merge>, Option<f64>, usize), Error> {
    let sim = simulation::build_with_tokens(scenario, ModelKind::Clusters, tokens)?;
    let mut series = ClusterSeries::new(scenario.clusters, scenario.model.d, None);
    sim.solve(&mut [&mut series])
        .map_err(Error::io(&scenario.file))?
        .succeeded(&scenario.name, ModelKind::Clusters)?;
    let history = series.history();
    let Some(first) = history.iter().find(|p| p.count > 0) else {
        return Ok((Vec::new(), None, 0));
    };
    let (formed, formed_count) = (first.from, first.count);
    let mut all = series.merges();
    if let (Some(last), Some(t_final)) = (series.last(), series.rows().last().map(|r| r.t)) {
        if last.count > 1 {
            let attention = simulation::attention(scenario);
            let (later, _, _) = predicted_merges(&attention, last, series.rule(), HORIZON);
            all.extend(later.into_iter().map(|m| Merge {
                t: t_final + m.t,
                ..m
            }));
        }
    }
    Ok((all, Some(formed), formed_count))
}

/// The count of the first clustered plateau of the run in `dir` (its summary.json), if any.
pub fn simulated_count(dir: &Path) -> Option<usize> {
    let text = std::fs::read_to_string(dir.join("summary.json")).ok()?;
    let summary: serde_json::Value = serde_json::from_str(&text).ok()?;
    summary["clusters"]["history"]
        .as_array()?
        .iter()
        .filter_map(|p| p["count"].as_u64())
        .find(|&c| c > 0)
        .map(|c| c as usize)
}
