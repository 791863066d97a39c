//! `tokdyn predict SCENARIO`: the prediction of [`crate::predict::report`], compared with the
//! scenario's finished run when its folder has one, printed and written as `predict.json`.

use std::path::Path;

use crate::error::Error;
use crate::output::RunOptions;
use crate::predict::report::{report, PredictReport};
use crate::scenario::Scenario;

/// Predicts, compares with a finished run of the same scenario, writes `predict.json`.
pub fn predict_scenario(scenario: &Scenario, options: &RunOptions) -> Result<PredictReport, Error> {
    let dir = options.folder(scenario);
    let mut report = report(scenario, Some(&dir))?;
    write_report(&dir, &mut report)?;
    Ok(report)
}

/// Writes `predict.json` atomically (a temporary file renamed).
fn write_report(dir: &Path, report: &mut PredictReport) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    crate::output::write_json_atomic(&report.path, &*report).map_err(Error::io(&report.path))?;
    report
        .table
        .push_str(&format!("-> {}\n", report.path.display()));
    Ok(())
}

/// `tokdyn predict`: the table, and where `predict.json` went.
pub fn cli(scenario: &Path, sets: &[String], options: &RunOptions) -> Result<(), Error> {
    let report = predict_scenario(&Scenario::load(scenario, sets)?, options)?;
    print!("{}", report.table);
    Ok(())
}
