//! Metastable clusters: whether k tight clusters are the final state (docs/MATH.md §11).
//!
//! For the softmax kernels (usa, sa) the k tight clusters at the last sample are handed to the
//! cluster model (`reduced::clusters`: k points with weights n_a / n), which is integrated on
//! from there for up to [`HORIZON`] time units:
//!
//! 1. a merge (two points come within the tight angle, as [`detect_points`] counts them) means
//!    the plateau ends: `metastable-clusters`, ending at t_final + the predicted merge time;
//! 2. no merge: the tangent Jacobian of the cluster model at the state reached is computed
//!    (central differences); an eigenvalue with real part above [`UNSTABLE_RATE`] is a saddle:
//!    `metastable-clusters` with no predicted end; otherwise the configuration is stable:
//!    `converged-clusters` (`rotating-clusters` kept when the axis turns, `oscillation` kept).
//!
//! One tight cluster (k = 1) keeps the label of the order parameters (`interior-point` and
//! `undetermined` become `converged-clusters`); tokens that are not clustered keep it too. An
//! `oscillation` read on a tail in which the last plateau of the counts began is the swing of
//! that merge, not a cycle, and is first taken as no reading. Linear attention (lsa) keeps
//! every label as it is.

use serde::Serialize;

use super::{Classification, Label};
use crate::integrate::{solve, Dynamics, Method, Problem};
use crate::model::{Attention, Kernel};
use crate::observe::cluster_series::{ClusterSeries, Merge};
use crate::observe::clusters::{detect_points, ClusterRule, Clustering};
use crate::observe::{Observer, Sample};
use crate::reduced::clusters::ClusterModel;

/// How far beyond the last sample the cluster model looks for a merge.
pub const HORIZON: f64 = 1e6;
/// Real part of a tangent eigenvalue above which a configuration is a saddle.
pub const UNSTABLE_RATE: f64 = 1e-8;
/// Samples per window of the cluster model's look-ahead (the merge time's resolution is
/// 1 / this of the window, which doubles).
const WINDOW_SAMPLES: usize = 513;

/// Why k tight clusters are not the final state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// The cluster model merges two of them.
    PendingMerge,
    /// The configuration is a saddle of the cluster model.
    Saddle,
}

/// summary.json `clusters.metastable`: the plateau the tokens sit on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Metastability {
    /// Number of tight clusters.
    pub count: usize,
    /// When the plateau began (first sample with this count in its last run).
    pub since: f64,
    /// When the cluster model ends it (the next merge), when it does within the horizon.
    pub until: Option<f64>,
    /// Why it is not the final state.
    pub cause: Cause,
}

/// The merges the cluster model makes from `clusters` within `horizon` (times counted from
/// the configuration's own time 0), and the points' state at the end.
pub fn predicted_merges(
    attention: &Attention,
    clusters: &Clustering,
    rule: ClusterRule,
    horizon: f64,
) -> (Vec<Merge>, Vec<f64>, ClusterModel) {
    let (model, mut state) = ClusterModel::from_clusters(attention.clone(), clusters);
    let mut counter = PointCounts {
        counts: model.counts().to_vec(),
        d: attention.d(),
        rule,
        last: clusters.count,
        offset: 0.0,
        merges: Vec::new(),
    };
    let method = Method::Dop853 {
        rtol: 1e-10,
        atol: 1e-12,
    };
    let (mut t, mut window) = (0.0, 1.0f64);
    while t < horizon && counter.last > 1 {
        let length = window.min(horizon - t);
        let problem = Problem {
            dynamics: &model,
            initial_state: state.clone(),
            t_end: length,
            samples: WINDOW_SAMPLES,
        };
        counter.offset = t;
        match solve(&problem, method, &mut [&mut counter]) {
            Ok(s) if s.status.is_success() => state = s.final_state,
            _ => break,
        }
        t += length;
        window *= 2.0;
    }
    (counter.merges, state, model)
}

/// Counts the clusters of the cluster model's points at every sample.
struct PointCounts {
    counts: Vec<usize>,
    d: usize,
    rule: ClusterRule,
    last: usize,
    offset: f64,
    merges: Vec<Merge>,
}

impl Observer for PointCounts {
    fn sample(&mut self, s: &Sample<'_>) -> std::io::Result<()> {
        let count = detect_points(s.state, &self.counts, self.d, self.rule).count;
        if count > 0 && count < self.last {
            self.merges.push(Merge {
                t: self.offset + s.t,
                from_count: self.last,
                to_count: count,
            });
        }
        if count > 0 {
            self.last = count;
        }
        Ok(())
    }
}

/// Whether the cluster model has a growing direction at `state` (module docs).
pub fn is_saddle(model: &ClusterModel, state: &[f64]) -> bool {
    let m = state.len();
    let h = 1e-5;
    let mut jacobian = nalgebra::DMatrix::zeros(m, m);
    let (mut plus, mut minus) = (vec![0.0; m], vec![0.0; m]);
    let mut y = state.to_vec();
    for j in 0..m {
        y[j] = state[j] + h;
        model.rhs(&y, &mut plus);
        y[j] = state[j] - h;
        model.rhs(&y, &mut minus);
        y[j] = state[j];
        for i in 0..m {
            jacobian[(i, j)] = (plus[i] - minus[i]) / (2.0 * h);
        }
    }
    jacobian
        .complex_eigenvalues()
        .iter()
        .any(|l| l.re > UNSTABLE_RATE)
}

/// The label of a run with tight clusters (module docs); `c` is the order parameters' label.
/// Returns the label and, for metastable clusters, the plateau.
pub fn refine(
    c: Classification,
    attention: Option<&Attention>,
    clusters: &ClusterSeries,
) -> (Classification, Option<Metastability>) {
    let (Some(attention), Some(last)) = (attention, clusters.last()) else {
        return (c, None);
    };
    if attention.kernel == Kernel::Lsa || last.count == 0 {
        return (c, None);
    }
    let since = plateau_start(clusters);
    let c = without_merge_swing(c, since);
    if last.count == 1 {
        return match c.label {
            Label::InteriorPoint | Label::Undetermined => {
                let reason = format!(
                    "all tokens in one tight cluster (diameter {:.2e} <= {}) since t = {since}; {}",
                    last.diameter.unwrap_or(0.0),
                    clusters.rule().threshold,
                    c.reason
                );
                (relabel(c, Label::ConvergedClusters, reason), None)
            }
            _ => (c, None),
        };
    }
    let t_final = clusters.rows().last().map_or(0.0, |r| r.t);
    let (merges, state, model) = predicted_merges(attention, last, clusters.rule(), HORIZON);
    let cause = if let Some(first) = merges.first() {
        Some((Cause::PendingMerge, Some(t_final + first.t)))
    } else if is_saddle(&model, &state) {
        Some((Cause::Saddle, None))
    } else {
        None
    };
    let k = last.count;
    match cause {
        Some((cause, until)) => {
            let end = match until {
                Some(t) => format!("the cluster model merges two of them at t = {t:.4}"),
                None => format!(
                    "the configuration is a saddle of the cluster model (no merge within {HORIZON:e})"
                ),
            };
            let reason = format!(
                "{k} tight clusters (sizes {:?}, diameter {:.2e}) since t = {since}; {end}",
                last.sizes,
                last.diameter.unwrap_or(0.0)
            );
            let m = Metastability {
                count: k,
                since,
                until,
                cause,
            };
            (relabel(c, Label::MetastableClusters, reason), Some(m))
        }
        None => {
            let label = match c.label {
                Label::Oscillation | Label::RotatingClusters => c.label,
                Label::RotatingInterior => Label::RotatingClusters,
                _ => Label::ConvergedClusters,
            };
            let reason = format!(
                "{k} tight clusters (sizes {:?}) since t = {since}, a stable configuration of the cluster model; {}",
                last.sizes, c.reason
            );
            (relabel(c, label, reason), None)
        }
    }
}

/// The first time of the last plateau of the counts.
fn plateau_start(clusters: &ClusterSeries) -> f64 {
    crate::observe::cluster_series::plateaus(clusters.rows())
        .last()
        .map_or(0.0, |p| p.from)
}

fn relabel(mut c: Classification, label: Label, reason: String) -> Classification {
    c.label = label;
    c.reason = reason;
    c
}

/// The order parameters' reading with the swing of the last merge taken out: tight clusters
/// keep s within their squared diameters of its value, so an `oscillation` read on a tail in
/// which the last plateau of the counts began is that merge (and the rounding after it), not
/// a cycle; it becomes no reading (`undetermined`, without period), which the clusters decide.
fn without_merge_swing(mut c: Classification, since: f64) -> Classification {
    if c.label != Label::Oscillation || since <= c.features.tail_start {
        return c;
    }
    c.reason = format!(
        "the swing of s in the tail (from {:.4}) was the merge at t = {since}, not a cycle",
        c.features.nematic_tail_min
    );
    (c.features.period, c.features.amplitude) = (None, None);
    c.label = Label::Undetermined;
    c
}

/// summary.json `clusters`: the clusters of the run and, when they are metastable, the plateau.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunClusters {
    /// Count, sizes, diameter, separation, threshold, history and merges.
    #[serde(flatten)]
    pub summary: crate::observe::cluster_series::ClusterSummary,
    /// The plateau of a `metastable-clusters` label (null otherwise).
    pub metastable: Option<Metastability>,
}

/// The label a run gives from its clusters: [`refine`], then for the cluster model
/// (`cluster_model`) [`without_handover`].
pub fn refine_run(
    c: Classification,
    attention: Option<&Attention>,
    clusters: &ClusterSeries,
    cluster_model: bool,
) -> (Classification, Option<Metastability>) {
    let (c, metastable) = refine(c, attention, clusters);
    let c = if cluster_model {
        without_handover(c, clusters)
    } else {
        c
    };
    (c, metastable)
}

/// The label of a `--model clusters` run whose tokens never formed tight clusters by t_end
/// (the cluster model never took over, `reduced::staircase::handover_index`): `undetermined`,
/// saying so, with the full model's label in the reason; any other run's label unchanged.
pub fn without_handover(c: Classification, clusters: &ClusterSeries) -> Classification {
    let counts: Vec<usize> = clusters.rows().iter().map(|r| r.count).collect();
    if crate::reduced::staircase::handover_index(&counts).is_some() {
        return c;
    }
    let t_end = clusters.rows().last().map_or(0.0, |r| r.t);
    let reason = format!(
        "the cluster model never took over: the tokens formed no tight clusters (diameter <= {}) by t = {t_end}, so the whole run is the full model's, which says {} ({}); run longer or raise clusters.threshold",
        clusters.rule().threshold,
        c.label,
        c.reason
    );
    relabel(c, Label::Undetermined, reason)
}
