//! The outcome of a mean-field run (docs/MATH.md §17): the density solved with the run's
//! observers, labelled by the same classifier from its exact order parameters, and its
//! summary (`mean_field` instead of token clusters, which do not apply to a density).

use crate::classify::{classify, classify_stationary, CertaintyWatch, Classification};
use crate::error::Error;
use crate::mean_field::{self, MeanFieldRun};
use crate::observe::{Observer, OrderSeries};
use crate::output::RunOptions;
use crate::scenario::{ModelKind, Scenario};
use crate::simulation;

use super::Summary;

/// The stationary-state classifier reads fluctuations against 1/sqrt(n); a density has none,
/// so it is read as a very large n.
pub const MEAN_FIELD_TOKENS: usize = 1 << 40;

/// A solved and labelled mean-field run.
pub struct MeanFieldOutcome {
    /// The run: densities, steps, grid.
    pub run: MeanFieldRun,
    /// The order-parameter series.
    pub series: OrderSeries,
    /// The label.
    pub classification: Classification,
    /// summary.json.
    pub summary: Summary,
}

/// The label of a mean-field series: the stationary state under noise, else the long-term
/// behaviour.
pub fn classify_density(scenario: &Scenario, series: &OrderSeries) -> Classification {
    if scenario.noise.is_some() {
        classify_stationary(series, MEAN_FIELD_TOKENS)
    } else {
        classify(series)
    }
}

/// Solves the mean field of `scenario` with the `extra` observers beside the label's watch; a
/// stack of layers (without noise) is labelled as the full model labels it (a looped stack on
/// its stroboscopic series).
pub fn solve_mean_field(
    scenario: &Scenario,
    options: &RunOptions,
    extra: &mut [&mut dyn Observer],
) -> Result<MeanFieldOutcome, Error> {
    let problem = simulation::mean_field_problem(scenario)?;
    let stack = simulation::mean_field_stack(scenario);
    let mut watch = CertaintyWatch::default();
    let run = {
        let mut observers: Vec<&mut dyn Observer> = vec![&mut watch];
        for o in extra.iter_mut() {
            observers.push(&mut **o);
        }
        mean_field::solve_stack(&problem, stack.as_ref(), &mut observers)
            .map_err(Error::io(&scenario.file))?
    };
    let run = MeanFieldRun {
        solution: run
            .solution
            .succeeded(&scenario.name, ModelKind::MeanField)?,
        ..run
    };
    let series = watch.series;
    let (classification, stack) = if scenario.noise.is_none() && stack.is_some() {
        let (c, info) = crate::layers::classify_stack(scenario, &series, &run.solution.boundaries);
        (c, Some(info))
    } else {
        (classify_density(scenario, &series), None)
    };
    let classification = match &run.summary.stop {
        Some(stop) => with_stop(classification, stop, scenario.time.t_end),
        None => classification,
    };
    let mut summary = Summary::new(
        scenario,
        ModelKind::MeanField,
        &run.solution,
        &classification,
        options,
    );
    summary.mean_field = Some(run.summary.clone());
    summary.stack = stack;
    Ok(MeanFieldOutcome {
        run,
        series,
        classification,
        summary,
    })
}

/// A run that stopped before t_end says so in its label's reason (when and why, and the peaks
/// that hold the mass), before the classifier's own reason; the label is the classifier's.
fn with_stop(c: Classification, stop: &mean_field::Stop, t_end: f64) -> Classification {
    let peaks: Vec<String> = stop
        .peaks
        .iter()
        .take(5)
        .map(|p| format!("{:.3} at {:.4}", p.mass, p.theta))
        .collect();
    let reason = format!(
        "the run stopped at t = {:.6} of {t_end}: {}; masses of its peaks: {}; then: {}",
        stop.t,
        stop.reason,
        peaks.join(", "),
        c.reason
    );
    Classification { reason, ..c }
}
