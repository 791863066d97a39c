//! `[ensemble] runs = N`: the scenario run N times, run i with the token seed
//! `tokens.seed + i` and the noise seed `noise.seed + i` (docs/MATH.md, "Ensembles").
//!
//! Every run is exactly the single run of the scenario with those seeds (same field, same
//! integrator, same classifier). Runs go in parallel over the cores in batches and are folded
//! in run order, so every output has the same bytes for any thread count. Outputs (in the
//! run's folder):
//!
//! - `ensemble.csv`: `run,seed,label,cluster_count,r2_abs_final,nematic_final,r1_abs_final,t_final`,
//!   one row per run (`seed` is the token seed);
//! - `ensemble_order.csv`: `t,r1_mean,r1_sd,nematic_mean,nematic_sd` on the sample grid up to
//!   t_end (mean and sample standard deviation over the runs);
//! - `summary.json`: the summary of run 0, with `label` the most frequent label and
//!   `ensemble` = `{runs, labels: {label: {count, share, low, high}}, cluster_count: {min,
//!   median, max}}` (Wilson 95% intervals; `cluster_count` null while no run counts clusters);
//! - `ensemble.png` (+ `.svg`, `.pdf`): the shares with their intervals and the mean order
//!   parameters with a one-sd band.

pub mod mean_field;
pub mod stats;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;

use crate::classify::metastable::RunClusters;
use crate::classify::{Classification, Label};
use crate::error::Error;
use crate::integrate::Solution;
use crate::observe::OrderSeries;
use crate::outcome::Summary;
use crate::output::RunOptions;
use crate::scenario::{ModelKind, Scenario};
use crate::simulation;
use stats::{count_quantiles, label_shares, most_frequent, CountQuantiles, LabelShare};

/// The header of `ensemble.csv`.
pub const ENSEMBLE_COLUMNS: &str =
    "run,seed,label,cluster_count,r2_abs_final,nematic_final,r1_abs_final,t_final";
/// The header of `ensemble_order.csv`.
pub const ORDER_COLUMNS: &str = "t,r1_mean,r1_sd,nematic_mean,nematic_sd";

/// One run of an ensemble: its seed and what it ended in.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// Index of the run, from 0.
    pub run: usize,
    /// Its token seed (`tokens.seed + run`).
    pub seed: u64,
    /// Its label.
    pub label: Label,
    /// Tight clusters at the last sample, when the model counts them.
    pub cluster_count: Option<usize>,
    /// |R2| at the last sample.
    pub r2_abs_final: f64,
    /// s at the last sample.
    pub nematic_final: f64,
    /// |R1| at the last sample (none for the OA model).
    pub r1_abs_final: Option<f64>,
    /// The time the run reached.
    pub t_final: f64,
    /// The tail average of |R1| (noisy runs) or |R1| at the end.
    pub r1_abs_mean: Option<f64>,
    /// The tail average of s (noisy runs) or s at the end.
    pub nematic_mean: f64,
    /// Every number its label was read from.
    pub features: crate::classify::Features,
    /// Why its label.
    pub reason: String,
}

/// summary.json `ensemble`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnsembleSummary {
    /// Number of runs.
    pub runs: usize,
    /// The labels that occurred: count, share and Wilson 95% interval.
    pub labels: BTreeMap<&'static str, LabelShare>,
    /// Quantiles of the cluster count (null when no run counts clusters).
    pub cluster_count: Option<CountQuantiles>,
}

/// The mean and spread of the order parameters over the runs, sample by sample.
#[derive(Debug, Clone, Default)]
pub struct OrderMoments {
    /// Sample times (the grid up to t_end).
    pub t: Vec<f64>,
    /// |R1| (none when a run has no R1).
    pub r1: Option<stats::SeriesMoments>,
    /// s.
    pub nematic: stats::SeriesMoments,
}

/// An ensemble's result: one row per run, the statistics, and run 0 in full.
pub struct Ensemble {
    /// The rows, in run order.
    pub rows: Vec<RunRow>,
    /// Mean and spread over time.
    pub order: OrderMoments,
    /// The label statistics.
    pub summary: EnsembleSummary,
    /// The most frequent label.
    pub label: Label,
    /// Its share of the runs.
    pub label_share: f64,
    /// Run 0: its solution, classification and clusters (for the summary).
    pub first: (Solution, Classification, Option<RunClusters>),
    /// Every run's final state, in run order, when asked for ([`simulate_from`]).
    pub finals: Option<Vec<Vec<f64>>>,
}

/// The scenario of run `i`: token and noise seeds moved on by `i`.
pub fn member(scenario: &Scenario, i: usize) -> Scenario {
    let mut s = scenario.clone();
    s.tokens.seed += i as u64;
    if let Some(noise) = &mut s.noise {
        noise.seed += i as u64;
    }
    s.ensemble = None;
    s
}

/// Runs one member in memory (from `start` when given, else from its scenario's tokens): its
/// row, its series (up to t_end), solution and label.
fn run_member(
    scenario: &Scenario,
    model: ModelKind,
    i: usize,
    start: Option<&Vec<f64>>,
) -> Result<
    (
        RunRow,
        OrderSeries,
        Solution,
        Classification,
        Option<RunClusters>,
    ),
    Error,
> {
    let s = member(scenario, i);
    let sim = match start {
        Some(tokens) => simulation::build_with_tokens(&s, model, tokens.clone())?,
        None => simulation::build(&s, model)?,
    };
    let mut watch = crate::classify::CertaintyWatch::default();
    let mut clusters = crate::outcome::cluster_series(&s, model, None)?;
    let mut observers: Vec<&mut dyn crate::observe::Observer> = vec![&mut watch];
    if let Some(c) = clusters.as_mut() {
        observers.push(c);
    }
    let solution = sim
        .solve(&mut observers)
        .map_err(Error::io(&s.file))?
        .succeeded(
            &format!("{} (run {i}, seed {})", s.name, s.tokens.seed),
            model,
        )?;
    let series = watch.series;
    let (c, cluster_summary) = crate::outcome::label_clusters(
        &s,
        model,
        crate::outcome::label_run(&s, &series, &solution).0,
        &clusters,
    );
    let (c, _) = crate::outcome::lyapunov::label_with_exponents(&s, model, c, &series)?;
    let f = &c.features;
    let row = RunRow {
        run: i,
        seed: s.tokens.seed,
        label: c.label,
        cluster_count: cluster_summary.as_ref().map(|r| r.summary.count),
        r2_abs_final: f.r2_abs_final,
        nematic_final: f.nematic_final,
        r1_abs_final: f.r1_abs_final,
        t_final: solution.t_last,
        r1_abs_mean: f.r1_abs_mean.or(f.r1_abs_final),
        nematic_mean: f.nematic_mean.unwrap_or(f.nematic_final),
        features: f.clone(),
        reason: c.reason.clone(),
    };
    Ok((row, series, solution, c, cluster_summary))
}

/// Runs the ensemble of `scenario` with `model` in memory.
pub fn simulate(scenario: &Scenario, model: ModelKind) -> Result<Ensemble, Error> {
    simulate_from(scenario, model, None, false)
}

/// [`simulate`], run i started from `starts[i]` when given (else from its seed's tokens),
/// keeping every run's final state when `keep_finals`.
pub fn simulate_from(
    scenario: &Scenario,
    model: ModelKind,
    starts: Option<&[Vec<f64>]>,
    keep_finals: bool,
) -> Result<Ensemble, Error> {
    let runs = scenario.ensemble.map_or(1, |e| e.runs);
    if starts.is_some_and(|s| s.len() != runs) {
        return Err(Error::Input(format!(
            "{}: ensemble.runs: {runs} runs, but {} start states",
            scenario.file.display(),
            starts.map_or(0, <[_]>::len)
        )));
    }
    let samples = scenario.time.samples;
    let batch = (rayon::current_num_threads() * 4).max(8);
    let mut rows = Vec::with_capacity(runs);
    let mut order = OrderMoments::default();
    let mut first = None;
    let mut finals = keep_finals.then(|| Vec::with_capacity(runs));
    let mut start = 0;
    while start < runs {
        if crate::interrupt::is_requested() {
            return Err(Error::Interrupted(format!("after {start} of {runs} runs")));
        }
        let end = (start + batch).min(runs);
        let done: Vec<_> = (start..end)
            .into_par_iter()
            .map(|i| run_member(scenario, model, i, starts.map(|s| &s[i])))
            .collect();
        for result in done {
            let (row, series, solution, c, clusters) = result?;
            fold_series(&mut order, &series, samples);
            if let Some(f) = finals.as_mut() {
                f.push(solution.final_state.clone());
            }
            if row.run == 0 {
                first = Some((solution, c, clusters));
            }
            rows.push(row);
        }
        start = end;
    }
    let labels: Vec<Label> = rows.iter().map(|r| r.label).collect();
    let counts: Vec<usize> = rows.iter().filter_map(|r| r.cluster_count).collect();
    let (label, label_share) = most_frequent(&labels).unwrap_or((Label::Undetermined, 0.0));
    Ok(Ensemble {
        summary: EnsembleSummary {
            runs,
            labels: label_shares(&labels),
            cluster_count: count_quantiles(&counts),
        },
        rows,
        order,
        label,
        label_share,
        first: first.expect("run 0 is in the first batch"),
        finals,
    })
}

/// Adds one run's |R1| and s (the first `samples` samples) to the moments.
fn fold_series(order: &mut OrderMoments, series: &OrderSeries, samples: usize) {
    let len = samples.min(series.len());
    if order.t.is_empty() {
        order.t = series.t[..len].to_vec();
        order.r1 = Some(stats::SeriesMoments::default());
    }
    let r1: Option<Vec<f64>> = series.r1[..len].iter().copied().collect();
    match r1 {
        Some(r1) if order.r1.is_some() => order.r1.as_mut().unwrap().add(&r1),
        _ => order.r1 = None,
    }
    order.nematic.add(&series.nematic[..len]);
}

/// A number as the shortest decimal that reads back; empty for none.
fn cell(x: Option<f64>) -> String {
    x.map(|v| ryu::Buffer::new().format(v).to_string())
        .unwrap_or_default()
}

/// Writes `ensemble.csv`.
pub fn write_rows(path: &Path, rows: &[RunRow]) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(w, "{ENSEMBLE_COLUMNS}")?;
    for r in rows {
        writeln!(
            w,
            "{},{},{},{},{},{},{},{}",
            r.run,
            r.seed,
            r.label,
            r.cluster_count.map(|c| c.to_string()).unwrap_or_default(),
            cell(Some(r.r2_abs_final)),
            cell(Some(r.nematic_final)),
            cell(r.r1_abs_final),
            cell(Some(r.t_final)),
        )?;
    }
    w.flush()
}

/// Writes `ensemble_order.csv`.
pub fn write_order(path: &Path, order: &OrderMoments) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(w, "{ORDER_COLUMNS}")?;
    let r1_sd = order.r1.as_ref().map(|m| m.sd());
    let s_sd = order.nematic.sd();
    for (i, t) in order.t.iter().enumerate() {
        writeln!(
            w,
            "{},{},{},{},{}",
            cell(Some(*t)),
            cell(order.r1.as_ref().map(|m| m.mean()[i])),
            cell(r1_sd.as_ref().map(|sd| sd[i])),
            cell(Some(order.nematic.mean()[i])),
            cell(Some(s_sd[i])),
        )?;
    }
    w.flush()
}

/// summary.json of an ensemble: run 0's summary (with the most frequent label) and
/// `ensemble`.
#[derive(Debug, Clone, Serialize)]
pub struct EnsembleRunSummary {
    /// Run 0's summary, its label replaced by the most frequent one.
    #[serde(flatten)]
    pub summary: Summary,
    /// The statistics over the runs.
    pub ensemble: EnsembleSummary,
}

/// The summary of run 0 with the ensemble's most frequent label and its statistics.
pub fn ensemble_run_summary(
    scenario: &Scenario,
    model: ModelKind,
    ensemble: &Ensemble,
    options: &RunOptions,
) -> EnsembleRunSummary {
    let (solution, c, clusters) = &ensemble.first;
    let mut summary = Summary::new(scenario, model, solution, c, options);
    summary.clusters = clusters.clone();
    summary.label = ensemble.label;
    summary.label_reason = format!(
        "the most frequent label of {} runs (share {:.4}); run 0: {} ({})",
        ensemble.summary.runs, ensemble.label_share, c.label, c.reason
    );
    summary.expect_met = scenario.expect.map(|e| e == ensemble.label);
    EnsembleRunSummary {
        summary,
        ensemble: ensemble.summary.clone(),
    }
}
