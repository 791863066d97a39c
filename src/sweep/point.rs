//! One grid point: set the axis values into the template table, check the scenario, build the
//! simulation, solve it with an order-parameter series as the only observer (no files), and
//! classify.

use crate::classify::{classify, CertaintyWatch};
use crate::simulation;

use super::format::{fmt_f64, fmt_opt};
use super::spec::{LabelSource, Plan};

/// The result columns of `sweep.csv`, after the axis names.
pub const RESULT_COLUMNS: [&str; 9] = [
    "label",
    "r2_abs_final",
    "r2_abs_tail_min",
    "r2_abs_tail_max",
    "r2_arg_rate",
    "period",
    "error",
    "t_final",
    "reason",
];

/// The result cells of one point, formatted once (see [`RESULT_COLUMNS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub cells: Vec<String>,
}

impl Outcome {
    /// A failed point: empty label and numbers, the message in `error`.
    pub fn failure(message: &str) -> Self {
        let mut cells = vec![String::new(); RESULT_COLUMNS.len()];
        cells[6] = one_line(message);
        if cells[6].is_empty() {
            cells[6] = "failed".into();
        }
        Outcome { cells }
    }

    /// Rebuilds an outcome from stored cells; `None` if they are not a valid outcome.
    pub fn from_cells(cells: &[String]) -> Option<Self> {
        if cells.len() != RESULT_COLUMNS.len() {
            return None;
        }
        let label_ok = cells[0].is_empty() || crate::scenario::LABELS.contains(&cells[0].as_str());
        (label_ok && cells[0].is_empty() != cells[6].is_empty()).then(|| Outcome {
            cells: cells.to_vec(),
        })
    }

    /// The label (empty for a failed point).
    pub fn label(&self) -> &str {
        &self.cells[0]
    }

    /// Whether the point's run failed.
    pub fn failed(&self) -> bool {
        !self.cells[6].is_empty()
    }
}

/// A message on one line: its lines trimmed and joined by "; ".
pub fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Runs the point at axis values `coords`; a failure of this point is an [`Outcome`] too.
pub fn run_point(plan: &Plan, coords: &[f64]) -> Outcome {
    let scenario = match plan.scenario_at(coords) {
        Ok(s) => s,
        Err(e) => return Outcome::failure(&e.to_string()),
    };
    if plan.label_source == LabelSource::Predict {
        return predicted_point(&scenario);
    }
    let sim = match simulation::build(&scenario, plan.model) {
        Ok(sim) => sim,
        Err(e) => return Outcome::failure(&e.to_string()),
    };
    let mut watch = CertaintyWatch::default();
    let solution = match sim.solve(&mut [&mut watch]) {
        Ok(solution) => solution,
        Err(e) => return Outcome::failure(&format!("the {} run failed: {e}", plan.model)),
    };
    if !solution.status.is_success() {
        return Outcome::failure(&format!(
            "the {} run failed: {}",
            plan.model, solution.status
        ));
    }
    let series = watch.series;
    if series.len() < 2 {
        return Outcome::failure("the run produced fewer than two samples");
    }
    let c = classify(&series);
    let f = &c.features;
    Outcome {
        cells: vec![
            c.label.as_str().to_string(),
            fmt_f64(f.r2_abs_final),
            fmt_f64(f.r2_abs_tail_min),
            fmt_f64(f.r2_abs_tail_max),
            fmt_f64(f.r2_arg_rate),
            fmt_opt(f.period),
            String::new(),
            fmt_f64(solution.t_last),
            one_line(&c.reason),
        ],
    }
}

/// A point labelled by the OA analysis (`label = "predict"`): the label and reason of
/// `tokdyn predict`; the simulation's numbers stay empty (none was run).
fn predicted_point(scenario: &crate::scenario::Scenario) -> Outcome {
    match crate::predict::command::prediction(scenario) {
        Ok(p) => {
            let mut cells = vec![String::new(); RESULT_COLUMNS.len()];
            cells[0] = p.label.to_string();
            cells[8] = one_line(&p.reason);
            Outcome { cells }
        }
        Err(e) => Outcome::failure(&format!("the prediction failed: {e}")),
    }
}
