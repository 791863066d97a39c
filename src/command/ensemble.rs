//! `tokdyn run` of a scenario with `[ensemble] runs = N`: the ensemble of [`crate::ensemble`]
//! simulated, then its folder written: `ensemble.csv`, `ensemble_order.csv`, `summary.json`
//! and `ensemble.png` (docs/MATH.md §13).

use std::path::Path;

use crate::ensemble::{ensemble_run_summary, simulate, write_order, write_rows, Ensemble};
use crate::error::Error;
use crate::outcome::RunReport;
use crate::output::{write_json, ResultKind, RunOptions, StagedDir};
use crate::scenario::Scenario;
use crate::simulation;

/// Refuses (exit 2) an ensemble whose files would not fit where `dir` lives: about 120
/// bytes a row of ensemble.csv, 100 a sample of ensemble_order.csv, and the pictures.
pub fn check_disk(scenario: &Scenario, dir: &Path) -> Result<(), Error> {
    let runs = scenario.ensemble.map_or(1, |e| e.runs) as u64;
    let need = runs
        .saturating_mul(120)
        .saturating_add((scenario.time.samples as u64).saturating_mul(100))
        .saturating_add(16 << 20);
    let what = format!("{}: ensemble.runs", scenario.file.display());
    crate::output::check_free_space(dir, need, &what)
}

/// Runs the ensemble of `scenario` (its `run.model`) and writes its folder.
pub fn run(scenario: &Scenario, options: &RunOptions) -> Result<RunReport, Error> {
    let model = scenario.run.model;
    simulation::check_memory(scenario, model)?;
    let target = options.folder(scenario);
    let staged = StagedDir::new(&target, ResultKind::Run)?;
    check_disk(scenario, staged.path())?;
    let ensemble = simulate(scenario, model)?;
    let dir = staged.path();
    write_ensemble_files(scenario, &ensemble, dir)?;
    let summary = ensemble_run_summary(scenario, model, &ensemble, options);
    let path = dir.join("summary.json");
    write_json(&path, &summary).map_err(Error::io(&path))?;
    let dir = staged.commit()?;
    Ok(RunReport {
        dir,
        summary: summary.summary,
    })
}

/// Writes `ensemble.csv`, `ensemble_order.csv` and `ensemble.png` of a simulated ensemble.
pub fn write_ensemble_files(
    scenario: &Scenario,
    ensemble: &Ensemble,
    dir: &Path,
) -> Result<(), Error> {
    let path = dir.join("ensemble.csv");
    write_rows(&path, &ensemble.rows).map_err(Error::io(&path))?;
    let path = dir.join("ensemble_order.csv");
    write_order(&path, &ensemble.order).map_err(Error::io(&path))?;
    crate::plot::ensemble_plot(
        &ensemble_picture(scenario, ensemble),
        scenario.output.figure,
        dir,
    )
    .map_err(Error::io(dir))
}

/// What `ensemble.png` shows, read from the result.
fn ensemble_picture(scenario: &Scenario, e: &Ensemble) -> crate::plot::EnsembleView {
    crate::plot::EnsembleView {
        title: format!(
            "{}: {} runs, n = {}, d = {}{}",
            scenario.name,
            e.summary.runs,
            scenario.tokens.n,
            scenario.model.d,
            scenario
                .noise
                .map(|n| format!(", T = {}", n.temperature))
                .unwrap_or_default()
        ),
        shares: e
            .summary
            .labels
            .iter()
            .map(|(l, s)| (l.to_string(), s.share, s.low, s.high))
            .collect(),
        t: e.order.t.clone(),
        r1: e.order.r1.as_ref().map(|m| (m.mean().to_vec(), m.sd())),
        nematic: (e.order.nematic.mean().to_vec(), e.order.nematic.sd()),
    }
}
