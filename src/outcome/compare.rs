//! The `compare` object of summary.json: how far each reduction's R2 strays from the full
//! model's (docs/MATH.md §4, the reductions), with each model's wall time and unknowns.

use serde::Serialize;

use crate::observe::cluster_series::Merge;
use crate::scenario::ModelKind;

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
    }
}
