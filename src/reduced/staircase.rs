//! `--model clusters`: the full model until its tokens sit in tight clusters, then the cluster
//! model of those clusters to the end of the run (docs/MATH.md §11).
//!
//! The run keeps the scenario's output grid t_i = t_end i / (samples - 1). The full model is
//! integrated [`FORMATION_WINDOW`] samples at a time; at the end of each window the clusters
//! of the tokens are found ([`detect_clusters`] with the scenario's rule). At the first window
//! end t_c with k >= 1 tight clusters the cluster model (`clusters.rs`) takes over from their
//! centres and weights and runs from t_c to t_end. The observers see one run: every sample
//! once, in order, the times and indices of both parts on the one grid. Tokens that never
//! form tight clusters by t_end make the whole run the full model's.

use std::io;
use std::time::Instant;

use super::clusters::ClusterModel;
use crate::integrate::{solve, Dynamics, Method, Problem, Solution};
use crate::model::Attention;
use crate::observe::clusters::{detect_clusters, ClusterRule};
use crate::observe::{Observer, RunInfo, Sample};

/// Samples of the full model between two looks for tight clusters.
pub const FORMATION_WINDOW: usize = 8;

/// What the cluster model needs beside the full model: the layer and the tight rule.
#[derive(Debug, Clone)]
pub struct ClusterPlan {
    /// The attention layer (one layer).
    pub attention: Attention,
    /// The rule for tight clusters.
    pub rule: ClusterRule,
}

/// The switch of a staircase run, for the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Handover {
    /// When the cluster model took over (None: the clusters never became tight).
    pub t: Option<f64>,
    /// Its number of points.
    pub points: usize,
}

/// Runs the staircase (module docs); the final state is the tokens (n x d), the cluster
/// model's points repeated when it took over.
pub fn solve_staircase(
    full: &dyn Dynamics,
    plan: &ClusterPlan,
    initial: &[f64],
    method: Method,
    (t_end, samples): (f64, usize),
    observers: &mut [&mut dyn Observer],
) -> io::Result<(Solution, Handover)> {
    let started = Instant::now();
    let d = plan.attention.d();
    let spacing = t_end / (samples - 1) as f64;
    let mut relay = Relay {
        inner: observers,
        time_offset: 0.0,
        index_offset: 0,
        skip_first: false,
        started: false,
        info: RunInfo { samples, t_end },
    };
    let mut state = initial.to_vec();
    let mut index = 0;
    let mut total: Option<Solution> = None;
    let mut handover = Handover { t: None, points: 0 };
    while index + 1 < samples {
        let steps = FORMATION_WINDOW.min(samples - 1 - index);
        let end = index + steps;
        let window = if end + 1 == samples {
            t_end - index as f64 * spacing
        } else {
            steps as f64 * spacing
        };
        let problem = Problem {
            dynamics: full,
            initial_state: state.clone(),
            t_end: window,
            samples: steps + 1,
        };
        relay.shift(index as f64 * spacing, index);
        let mut part = solve(&problem, method, &mut [&mut relay])?;
        part.t_last += index as f64 * spacing;
        let ok = part.status.is_success();
        state = part.final_state.clone();
        total = Some(join(total, part));
        index = end;
        if !ok {
            break;
        }
        let tokens = full
            .tokens(&state)
            .map(|x| x.into_owned())
            .unwrap_or_default();
        let clusters = detect_clusters(&tokens, d, plan.rule);
        if clusters.count == 0 || index + 1 >= samples {
            continue;
        }
        // The cluster model from here to t_end.
        let (model, points) = ClusterModel::from_clusters(plan.attention.clone(), &clusters);
        handover = Handover {
            t: Some(index as f64 * spacing),
            points: model.points(),
        };
        let problem = Problem {
            dynamics: &model,
            initial_state: points,
            t_end: t_end - index as f64 * spacing,
            samples: samples - index,
        };
        relay.shift(index as f64 * spacing, index);
        let mut part = solve(&problem, method, &mut [&mut relay])?;
        part.t_last = if part.status.is_success() {
            t_end
        } else {
            part.t_last + index as f64 * spacing
        };
        part.final_state = model
            .tokens(&part.final_state)
            .map(|x| x.into_owned())
            .unwrap_or_default();
        total = Some(join(total, part));
        break;
    }
    for o in relay.inner.iter_mut() {
        o.finish()?;
    }
    let mut solution = total.expect("at least one window ran (samples >= 2)");
    solution.wall = started.elapsed();
    Ok((solution, handover))
}

/// The sample index at which the cluster model takes over, from the count of tight clusters
/// at every sample of a run (`counts[i]` at sample i; the rule of [`solve_staircase`]: the
/// first window end before the last sample with a count >= 1); `None` when it never does.
pub fn handover_index(counts: &[usize]) -> Option<usize> {
    (FORMATION_WINDOW..counts.len().saturating_sub(1))
        .step_by(FORMATION_WINDOW)
        .find(|&i| counts[i] > 0)
}

/// The solution of two consecutive parts of one run.
fn join(first: Option<Solution>, second: Solution) -> Solution {
    let Some(mut a) = first else {
        return second;
    };
    a.status = second.status;
    a.samples += second.samples.saturating_sub(1);
    a.t_last = second.t_last;
    a.rhs_evals += second.rhs_evals;
    a.accepted_steps += second.accepted_steps;
    a.rejected_steps += second.rejected_steps;
    a.norm_drift_max = a.norm_drift_max.max(second.norm_drift_max);
    a.step_drift_max = a.step_drift_max.max(second.step_drift_max);
    a.final_state = second.final_state;
    a
}

/// Hands the samples of the parts of a run to the observers as one run: times and indices
/// shifted, each part's first sample (the previous part's last) skipped, `start` once and
/// `finish` left to the caller.
struct Relay<'a, 'b> {
    inner: &'a mut [&'b mut dyn Observer],
    time_offset: f64,
    index_offset: usize,
    skip_first: bool,
    started: bool,
    info: RunInfo,
}

impl Relay<'_, '_> {
    fn shift(&mut self, time: f64, index: usize) {
        self.time_offset = time;
        self.index_offset = index;
        self.skip_first = index > 0;
    }
}

impl Observer for Relay<'_, '_> {
    fn wants_tokens(&self) -> bool {
        self.inner.iter().any(|o| o.wants_tokens())
    }

    fn wants_tokens_at(&self, index: usize) -> bool {
        self.inner
            .iter()
            .any(|o| o.wants_tokens_at(index + self.index_offset))
    }

    fn start(&mut self, _info: &RunInfo) -> io::Result<()> {
        if !self.started {
            self.started = true;
            for o in self.inner.iter_mut() {
                o.start(&self.info)?;
            }
        }
        Ok(())
    }

    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        if self.skip_first && s.index == 0 {
            return Ok(());
        }
        let index = s.index + self.index_offset;
        let shifted = Sample {
            index,
            // The grid's last time exactly (offset + length may round).
            t: if index + 1 == self.info.samples {
                self.info.t_end
            } else {
                s.t + self.time_offset
            },
            state: s.state,
            order: s.order,
            tokens: s.tokens,
        };
        for o in self.inner.iter_mut() {
            o.sample(&shifted)?;
        }
        Ok(())
    }
}
