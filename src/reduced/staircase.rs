//! `--model clusters`: the full model until its tokens sit in tight clusters, then the cluster
//! model of those clusters to the end of the run (docs/MATH.md §11).
//!
//! ```text
//! checks:   c_0 = 0,  c_{j+1} = c_j + max(CHECK_FLOOR, CHECK_GROWTH c_j)   (not the samples)
//! hand-over t_c = the first check with k >= 1 tight clusters (t_c < t_end)
//! merge     the count of the points' tight clusters falls between two checks c_j < c_{j+1}:
//!           the interval is integrated again from c_j with MERGE_REFINEMENT sub-samples,
//!           the merge is at the first sub-sample with the new count
//! rest      max_a |y_a'| <= REST_SPEED at a check and no growing direction (a stable
//!           configuration, one cluster included): the state cannot change; every later
//!           sample is that state
//! ```
//!
//! Both models are read off the integrator's continuous extension ([`Flow`]) at the checks
//! and at the output samples, so the hand-over, the merges and the end do not depend on the
//! output sampling. The checks grow with t, so a run to t = 1e12 costs a few thousand of them;
//! the steps of the integrator grow with the dwell times by themselves. The observers see one
//! run: every sample once, in order, on the scenario's grid, and the hand-over and the merges
//! as [`ClusterEvent`]s at their own times. Tokens that never form tight clusters by t_end
//! make the whole run the full model's.

use std::io;
use std::time::Instant;

use super::clusters::ClusterModel;
use crate::integrate::{solve, Dynamics, Flow, Method, Problem, Solution, Status};
use crate::model::Attention;
use crate::observe::cluster_series::{ClusterEvent, Merge};
use crate::observe::clusters::{detect_clusters, detect_points, ClusterRule, Clustering};
use crate::observe::{Observer, RunInfo, Sample};

/// Smallest spacing of the checks for tight clusters and merges.
pub const CHECK_FLOOR: f64 = 0.05;
/// Spacing of the checks as a fraction of the time reached.
pub const CHECK_GROWTH: f64 = 0.01;
/// Sub-samples of the interval in which a merge was found, to place it.
pub const MERGE_REFINEMENT: usize = 256;
/// The cluster model is at rest when no point moves faster than this.
pub const REST_SPEED: f64 = 1e-12;
/// A real part of the cluster model's Jacobian above this is a growing direction.
pub const UNSTABLE_RATE: f64 = 1e-8;

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
    /// When the cluster model came to rest for good (the later samples repeat its state).
    pub rest: Option<f64>,
}

/// The check after one at `t` (module docs).
pub fn next_check(t: f64) -> f64 {
    t + CHECK_FLOOR.max(CHECK_GROWTH * t)
}

/// The output grid and how far the observers have been fed.
struct Feed<'a, 'b> {
    observers: &'a mut [&'b mut dyn Observer],
    t_end: f64,
    samples: usize,
    /// The next sample to hand out.
    next: usize,
    t_last: f64,
}

impl Feed<'_, '_> {
    fn time(&self, i: usize) -> f64 {
        if i + 1 == self.samples {
            self.t_end
        } else {
            self.t_end * i as f64 / (self.samples - 1) as f64
        }
    }

    fn done(&self) -> bool {
        self.next >= self.samples
    }

    /// The next sample's time.
    fn next_time(&self) -> f64 {
        self.time(self.next)
    }

    /// Hands the flow's state (at run time `t`, the next sample's) to the observers.
    fn hand_out(&mut self, flow: &Flow<'_>) -> io::Result<Result<(), Status>> {
        let order = match flow.order() {
            Ok(o) => o,
            Err(status) => return Ok(Err(status)),
        };
        let t = self.next_time();
        flow.hand_out(self.observers, self.next, t, &order)?;
        self.next += 1;
        self.t_last = t;
        Ok(Ok(()))
    }

    fn event(&mut self, event: ClusterEvent) -> io::Result<()> {
        for o in self.observers.iter_mut() {
            o.clusters_event(&event)?;
        }
        Ok(())
    }
}

/// How one part of the run ended.
enum PartEnd {
    /// It reached its end (or the grid's).
    Done,
    /// The full model's tokens became tight at this time.
    Tight(f64, Clustering),
    /// The run failed.
    Failed(Status),
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
    for o in observers.iter_mut() {
        o.start(&RunInfo { samples, t_end })?;
    }
    let mut feed = Feed {
        observers,
        t_end,
        samples,
        next: 0,
        t_last: 0.0,
    };
    let mut handover = Handover {
        t: None,
        points: 0,
        rest: None,
    };
    let mut flow = Flow::new(full, method, initial, t_end);
    let end = formation(&mut flow, full, plan, &mut feed)?;
    let before = feed.next;
    let first =
        |flow: Flow<'_>, status, feed: &Feed| flow.into_solution(status, before, feed.t_last);
    let mut solution = match end {
        PartEnd::Done => first(flow, Status::Success, &feed),
        PartEnd::Failed(status) => first(flow, status, &feed),
        PartEnd::Tight(t_c, clusters) => {
            let part = first(flow, Status::Success, &feed);
            let (model, points) = ClusterModel::from_clusters(plan.attention.clone(), &clusters);
            handover.t = Some(t_c);
            handover.points = model.points();
            feed.event(ClusterEvent::Handover {
                t: t_c,
                count: clusters.count,
            })?;
            let mut flow = Flow::new(&model, method, &points, t_end - t_c);
            crate::interrupt::set_clock_offset(t_c);
            let (status, rest) = cluster_part(&mut flow, &model, t_c, plan, &mut feed, method)?;
            handover.rest = rest;
            let mut second = flow.into_solution(status, feed.next - before, feed.t_last);
            second.final_state = model
                .tokens(&second.final_state)
                .map(|x| x.into_owned())
                .unwrap_or_default();
            join(part, second)
        }
    };
    for o in feed.observers.iter_mut() {
        o.finish()?;
    }
    solution.wall = started.elapsed();
    Ok((solution, handover))
}

/// The full model from t = 0, sample by sample, until its tokens are tight at a check.
fn formation(
    flow: &mut Flow<'_>,
    full: &dyn Dynamics,
    plan: &ClusterPlan,
    feed: &mut Feed<'_, '_>,
) -> io::Result<PartEnd> {
    let d = plan.attention.d();
    let mut check = 0.0;
    while !feed.done() {
        if crate::interrupt::is_requested() {
            return Ok(PartEnd::Failed(Status::Interrupted { t: feed.t_last }));
        }
        let t = feed.next_time().min(check);
        if let Err(status) = flow.advance_to(t) {
            return Ok(PartEnd::Failed(status));
        }
        if t == feed.next_time() {
            if let Err(status) = feed.hand_out(flow)? {
                return Ok(PartEnd::Failed(status));
            }
        }
        if t == check {
            check = next_check(t);
            let tokens = full.tokens(flow.state()).unwrap_or_default();
            let clusters = detect_clusters(&tokens, d, plan.rule);
            if clusters.count > 0 && t < feed.t_end && !feed.done() {
                return Ok(PartEnd::Tight(t, clusters));
            }
        }
    }
    Ok(PartEnd::Done)
}

/// The cluster model from the hand-over at `t_c` to t_end (its flow counts time from t_c):
/// the samples, the merges as events, and the end at rest. Returns the status and when the
/// model came to rest.
fn cluster_part(
    flow: &mut Flow<'_>,
    model: &ClusterModel,
    t_c: f64,
    plan: &ClusterPlan,
    feed: &mut Feed<'_, '_>,
    method: Method,
) -> io::Result<(Status, Option<f64>)> {
    let d = plan.attention.d();
    let mut watch = MergeWatch {
        count: model.points(),
        t: t_c,
        state: flow.state().to_vec(),
        saddle_at: None,
    };
    let mut check = t_c;
    while !feed.done() {
        if crate::interrupt::is_requested() {
            return Ok((Status::Interrupted { t: feed.t_last }, None));
        }
        let t = feed.next_time().min(check).max(t_c);
        if let Err(status) = flow.advance_to(t - t_c) {
            return Ok((shifted(status, t_c), None));
        }
        let at_check = t >= check;
        if at_check {
            check = next_check(t);
            for m in watch.merges_until(model, flow.state(), t, (d, plan.rule), method) {
                feed.event(ClusterEvent::Merge(m))?;
            }
            if watch.at_rest(model, flow.state()) {
                let status = constant_to_the_end(flow, feed)?;
                return Ok((status, Some(t)));
            }
        }
        if t == feed.next_time() {
            if let Err(status) = feed.hand_out(flow)? {
                return Ok((shifted(status, t_c), None));
            }
        }
    }
    Ok((Status::Success, None))
}

/// Hands the flow's state to every sample left: the model is at rest and cannot change.
fn constant_to_the_end(flow: &Flow<'_>, feed: &mut Feed<'_, '_>) -> io::Result<Status> {
    while !feed.done() {
        if let Err(status) = feed.hand_out(flow)? {
            return Ok(status);
        }
    }
    Ok(Status::Success)
}

/// A failure of the cluster model's flow at its own time, as a time of the run.
fn shifted(status: Status, t_c: f64) -> Status {
    match status {
        Status::NonFinite { t } => Status::NonFinite { t: t + t_c },
        Status::StepSizeUnderflow { t } => Status::StepSizeUnderflow { t: t + t_c },
        Status::Interrupted { t } => Status::Interrupted { t: t + t_c },
        Status::Success => Status::Success,
    }
}

/// The cluster model's count of tight clusters at the last check, and the state there.
struct MergeWatch {
    count: usize,
    t: f64,
    state: Vec<f64>,
    /// The count at which the state at rest was found to be a saddle (not tried again).
    saddle_at: Option<usize>,
}

impl MergeWatch {
    /// The merges between the last check and this one (at `t`, `state`), placed by
    /// integrating the interval again finely; moves the watch to this check.
    fn merges_until(
        &mut self,
        model: &ClusterModel,
        state: &[f64],
        t: f64,
        (d, rule): (usize, ClusterRule),
        method: Method,
    ) -> Vec<Merge> {
        let count = detect_points(state, model.counts(), d, rule).count;
        let mut found = Vec::new();
        if count > 0 && count < self.count {
            found = placed_merges(
                model,
                (&self.state, self.t),
                t,
                self.count,
                (d, rule),
                method,
            );
            if found.last().map(|m| m.to_count) != Some(count) {
                found.push(Merge {
                    t,
                    from_count: found.last().map_or(self.count, |m| m.to_count),
                    to_count: count,
                });
            }
        }
        if count > 0 {
            self.count = count;
        }
        self.t = t;
        self.state.clear();
        self.state.extend_from_slice(state);
        found
    }

    /// Whether the model is at rest at `state` in a configuration without a growing
    /// direction (module docs).
    fn at_rest(&mut self, model: &ClusterModel, state: &[f64]) -> bool {
        if model.speed(state) > REST_SPEED || self.saddle_at == Some(self.count) {
            return false;
        }
        if model.has_growing_direction(state, UNSTABLE_RATE) {
            self.saddle_at = Some(self.count);
            return false;
        }
        true
    }
}

/// The merges of the cluster model from `(from, t0)` to `t1`, at the sub-samples of a fine
/// grid where its count of tight clusters falls below the last one (`count` at t0).
fn placed_merges(
    model: &ClusterModel,
    (from, t0): (&[f64], f64),
    t1: f64,
    count: usize,
    (d, rule): (usize, ClusterRule),
    method: Method,
) -> Vec<Merge> {
    let mut counter = PointCounts::new(model.counts().to_vec(), d, rule, count, t0);
    let problem = Problem {
        dynamics: model,
        initial_state: from.to_vec(),
        t_end: t1 - t0,
        samples: MERGE_REFINEMENT + 1,
    };
    // A failure here leaves the merge at the check (the caller's fallback).
    let _ = solve(&problem, method, &mut [&mut counter]);
    counter.merges
}

/// Counts the tight clusters of the cluster model's points at every sample and keeps the
/// merges (times offset by `offset`).
pub struct PointCounts {
    counts: Vec<usize>,
    d: usize,
    rule: ClusterRule,
    /// The count at the last sample with one.
    pub last: usize,
    /// Added to the samples' times.
    pub offset: f64,
    /// The merges so far.
    pub merges: Vec<Merge>,
}

impl PointCounts {
    /// A counter for points with `counts` tokens each, starting from `last` clusters.
    pub fn new(counts: Vec<usize>, d: usize, rule: ClusterRule, last: usize, offset: f64) -> Self {
        PointCounts {
            counts,
            d,
            rule,
            last,
            offset,
            merges: Vec::new(),
        }
    }
}

impl Observer for PointCounts {
    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
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

/// The solution of two consecutive parts of one run (each counts its own samples).
fn join(mut a: Solution, second: Solution) -> Solution {
    a.status = second.status;
    a.samples += second.samples;
    if second.samples > 0 {
        a.t_last = second.t_last;
    }
    a.rhs_evals += second.rhs_evals;
    a.accepted_steps += second.accepted_steps;
    a.rejected_steps += second.rejected_steps;
    a.norm_drift_max = a.norm_drift_max.max(second.norm_drift_max);
    a.step_drift_max = a.step_drift_max.max(second.step_drift_max);
    a.final_state = second.final_state;
    a.observing += second.observing;
    a
}
