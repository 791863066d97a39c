//! Metastable clusters: whether k tight clusters are the final state (docs/MATH.md §11).
//!
//! For the softmax kernels (usa, sa) the k tight clusters at the last sample are handed to the
//! cluster model (`reduced::clusters`: k points with weights n_a / n), which is integrated on
//! from there for up to [`HORIZON`] time units, in windows that double, each read at
//! `WINDOW_SAMPLES` times (the look-ahead does not depend on the run's output sampling):
//!
//! 1. a merge (two points come within the tight angle, as `observe::clusters::detect_points` counts them) means
//!    the plateau ends: `metastable-clusters`, ending at t_final + the predicted merge time;
//! 2. no merge, and the points still move over the last window (their fastest speed
//!    max_a |y_a'| above [`MOVING_SPEED`]): the clusters move for ever without merging, which is
//!    not metastable: they are labelled by their motion (`oscillation` and `rotating-clusters`
//!    read by the order parameters are kept; otherwise `rotating-clusters` when the angles
//!    <y_a, y_b> between them stay within [`RIGID`] over the last window, else `oscillation`);
//! 3. no merge and (nearly) at rest: the tangent Jacobian of the cluster model at the state
//!    reached is computed (central differences); an eigenvalue with real part above
//!    [`UNSTABLE_RATE`] is a saddle: `metastable-clusters` with no predicted end; otherwise the
//!    configuration is stable: `converged-clusters` (`rotating-clusters` kept when the axis
//!    turns, `oscillation` kept).
//!
//! One tight cluster (k = 1) keeps a label of motion read by the order parameters
//! (`oscillation`, `rotating-clusters`, `rotating-interior`); otherwise its point is followed
//! for [`ONE_POINT_HORIZON`]: still moving, it circles the sphere (`rotating-clusters`, at the
//! rate of the point, whatever the samples could resolve); at rest, `converged-clusters`.
//! Tokens that are not clustered keep the order parameters' label. An `oscillation` read on a
//! tail in which the last plateau of the counts began is the swing of that merge, not a
//! cycle, and is first taken as no reading. Linear attention (lsa) keeps every label as it is.

use serde::Serialize;

use super::{Classification, Label};
use crate::integrate::{solve, Method, Problem};
use crate::model::{Attention, Kernel};
use crate::observe::cluster_series::{ClusterSeries, Merge};
use crate::observe::clusters::{ClusterRule, Clustering};
use crate::observe::{Observer, Sample};
use crate::reduced::clusters::ClusterModel;
use crate::reduced::staircase::PointCounts;
pub use crate::reduced::staircase::UNSTABLE_RATE;

/// How far beyond the last sample the cluster model looks for a merge.
pub const HORIZON: f64 = 1e6;
/// How far one tight cluster's point is followed to tell rest from motion.
pub const ONE_POINT_HORIZON: f64 = 1e3;
/// The points move (for ever, without merging) when their fastest speed over the
/// look-ahead's last window is above this (radians per unit time).
pub const MOVING_SPEED: f64 = 1e-4;
/// Moving points keep their configuration (a rigid rotation) when no <y_a, y_b> changes by
/// more than this over the last window.
pub const RIGID: f64 = 1e-6;
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

/// How the cluster model's points move over the last window of a look-ahead.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Motion {
    /// The fastest speed max_a |y_a'| seen.
    pub speed: f64,
    /// The mean over the samples of max_a |y_a'| (for one point: its angular rate).
    pub mean_speed: f64,
    /// The largest change of an <y_a, y_b> (a != b).
    pub swing: f64,
}

/// What the cluster model does from a configuration: its merges (times from the
/// configuration's own time 0), the state at the end, the model and its last motion.
pub struct LookAhead {
    /// The merges within the horizon.
    pub merges: Vec<Merge>,
    /// The points at the end.
    pub state: Vec<f64>,
    /// The model.
    pub model: ClusterModel,
    /// The motion over the last window.
    pub motion: Motion,
}

/// The merges the cluster model makes from `clusters` within `horizon` (times counted from
/// the configuration's own time 0), and the points' state at the end.
pub fn predicted_merges(
    attention: &Attention,
    clusters: &Clustering,
    rule: ClusterRule,
    horizon: f64,
) -> (Vec<Merge>, Vec<f64>, ClusterModel) {
    let ahead = look_ahead(attention, clusters, rule, horizon);
    (ahead.merges, ahead.state, ahead.model)
}

/// Follows the cluster model of `clusters` for `horizon` (module docs): until then, or until
/// one cluster is left of several.
pub fn look_ahead(
    attention: &Attention,
    clusters: &Clustering,
    rule: ClusterRule,
    horizon: f64,
) -> LookAhead {
    let (model, mut state) = ClusterModel::from_clusters(attention.clone(), clusters);
    let mut counter = PointCounts::new(
        model.counts().to_vec(),
        attention.d(),
        rule,
        clusters.count,
        0.0,
    );
    let method = Method::Dop853 {
        rtol: 1e-10,
        atol: 1e-12,
    };
    let several = clusters.count > 1;
    let mut motion = Motion::default();
    let (mut t, mut window) = (0.0, 1.0f64);
    while t < horizon && (counter.last > 1 || !several) {
        let length = window.min(horizon - t);
        let problem = Problem {
            dynamics: &model,
            initial_state: state.clone(),
            t_end: length,
            samples: WINDOW_SAMPLES,
        };
        counter.offset = t;
        let mut watch = MotionWatch::new(&model, attention.d());
        match solve(&problem, method, &mut [&mut counter, &mut watch]) {
            Ok(s) if s.status.is_success() => state = s.final_state,
            _ => break,
        }
        motion = watch.motion();
        t += length;
        window *= 2.0;
    }
    LookAhead {
        merges: counter.merges,
        state,
        model,
        motion,
    }
}

/// The fastest speed and the swing of the angles between the points over one window.
struct MotionWatch<'a> {
    model: &'a ClusterModel,
    d: usize,
    speed: f64,
    speed_sum: f64,
    samples: usize,
    low: Vec<f64>,
    high: Vec<f64>,
}

impl<'a> MotionWatch<'a> {
    fn new(model: &'a ClusterModel, d: usize) -> Self {
        MotionWatch {
            model,
            d,
            speed: 0.0,
            speed_sum: 0.0,
            samples: 0,
            low: Vec::new(),
            high: Vec::new(),
        }
    }

    fn motion(&self) -> Motion {
        let swing = self
            .low
            .iter()
            .zip(&self.high)
            .map(|(l, h)| h - l)
            .fold(0.0, f64::max);
        Motion {
            speed: self.speed,
            mean_speed: self.speed_sum / self.samples.max(1) as f64,
            swing,
        }
    }
}

impl Observer for MotionWatch<'_> {
    fn sample(&mut self, s: &Sample<'_>) -> std::io::Result<()> {
        let speed = self.model.speed(s.state);
        self.speed = self.speed.max(speed);
        self.speed_sum += speed;
        self.samples += 1;
        let points: Vec<&[f64]> = s.state.chunks_exact(self.d).collect();
        let mut pair = 0;
        for a in 0..points.len() {
            for b in a + 1..points.len() {
                let dot: f64 = points[a].iter().zip(points[b]).map(|(x, y)| x * y).sum();
                if pair == self.low.len() {
                    self.low.push(dot);
                    self.high.push(dot);
                }
                self.low[pair] = self.low[pair].min(dot);
                self.high[pair] = self.high[pair].max(dot);
                pair += 1;
            }
        }
        Ok(())
    }
}

/// Whether the cluster model has a growing direction at `state` (module docs).
pub fn is_saddle(model: &ClusterModel, state: &[f64]) -> bool {
    model.has_growing_direction(state, UNSTABLE_RATE)
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
        return (
            one_cluster(c, attention, last, clusters.rule(), since),
            None,
        );
    }
    let t_final = clusters.rows().last().map_or(0.0, |r| r.t);
    let ahead = look_ahead(attention, last, clusters.rule(), HORIZON);
    let k = last.count;
    if ahead.merges.is_empty() && ahead.motion.speed > MOVING_SPEED {
        return (moving_clusters(c, last, since, ahead.motion), None);
    }
    let cause = if let Some(first) = ahead.merges.first() {
        Some((Cause::PendingMerge, Some(t_final + first.t)))
    } else if is_saddle(&ahead.model, &ahead.state) {
        Some((Cause::Saddle, None))
    } else {
        None
    };
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

/// The label of k >= 2 tight clusters that move for ever without merging: their motion
/// (module docs, 2).
fn moving_clusters(
    c: Classification,
    last: &Clustering,
    since: f64,
    motion: Motion,
) -> Classification {
    let rigid = motion.swing <= RIGID;
    let label = match c.label {
        Label::Oscillation | Label::RotatingClusters => c.label,
        Label::RotatingInterior => Label::RotatingClusters,
        _ if rigid => Label::RotatingClusters,
        _ => Label::Oscillation,
    };
    let how = if rigid {
        "turn together, the angles between them fixed".to_string()
    } else {
        format!(
            "swing against each other (a cosine between two of them changes by {:.3})",
            motion.swing
        )
    };
    let reason = format!(
        "{} tight clusters (sizes {:?}) since t = {since} move for ever without merging (the cluster model: no merge within {HORIZON:e}, the points {how}, speed up to {:.3e}), not metastable; {}",
        last.count, last.sizes, motion.speed, c.reason
    );
    relabel(c, label, reason)
}

/// The label of one tight cluster (module docs).
fn one_cluster(
    c: Classification,
    attention: &Attention,
    last: &Clustering,
    rule: ClusterRule,
    since: f64,
) -> Classification {
    if !matches!(
        c.label,
        Label::InteriorPoint | Label::Undetermined | Label::ConvergedClusters
    ) {
        return c;
    }
    let motion = look_ahead(attention, last, rule, ONE_POINT_HORIZON).motion;
    let diameter = last.diameter.unwrap_or(0.0);
    if motion.speed > MOVING_SPEED {
        let reason = format!(
            "all tokens in one tight cluster (diameter {diameter:.2e} <= {}) since t = {since}, which circles the sphere: its centre moves at {:.4} rad per unit time on average (up to {:.4}) in the cluster model, read at its own resolution, not the samples'; {}",
            rule.threshold, motion.mean_speed, motion.speed, c.reason
        );
        return relabel(c, Label::RotatingClusters, reason);
    }
    if c.label == Label::ConvergedClusters {
        return c;
    }
    let reason = format!(
        "all tokens in one tight cluster (diameter {diameter:.2e} <= {}) since t = {since}; {}",
        rule.threshold, c.reason
    );
    relabel(c, Label::ConvergedClusters, reason)
}

/// The first time of the last plateau of the counts.
fn plateau_start(clusters: &ClusterSeries) -> f64 {
    clusters.history().last().map_or(0.0, |p| p.from)
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
/// (the cluster model never took over: no hand-over in the series): `undetermined`,
/// saying so, with the full model's label in the reason; any other run's label unchanged.
pub fn without_handover(c: Classification, clusters: &ClusterSeries) -> Classification {
    if clusters.handover().is_some() {
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
