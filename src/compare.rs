//! `tokdyn compare`: the full model and its three reductions on the same scenario.
//!
//! All four start from the same tokens and are sampled on the same grid. `compare.csv` holds
//! R2 of each (`t,full_re,full_im,phase_re,phase_im,ws_re,ws_im,oa_re,oa_im`); summary.json is
//! the full run's summary with a `compare` object: max over the samples of |R2 - R2_full| for
//! each reduction and the wall time of each model.

use std::fs::File;
use std::io::BufWriter;
use std::time::Instant;

use num_complex::Complex64;
use serde::Serialize;

use crate::classify::classify;
use crate::error::Error;
use crate::integrate::solve;
use crate::observe::{Observer, OrderSeries};
use crate::output::{write_json, write_tokens_csv, StagedDir};
use crate::run::{check_memory, solve_into, RunOptions, Summary};
use crate::scenario::{ModelKind, Scenario};
use crate::simulation;

/// One model's line of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ModelRow {
    pub model: String,
    /// Real unknowns integrated.
    pub unknowns: usize,
    pub seconds: f64,
    /// max |R2 - R2_full| over the samples (0 for the full model).
    pub max_dr2: f64,
}

/// The result of a comparison.
#[derive(Debug, Clone)]
pub struct CompareReport {
    pub dir: std::path::PathBuf,
    pub rows: Vec<ModelRow>,
    pub summary: Summary,
}

#[derive(Serialize)]
struct CompareRow {
    t: f64,
    full_re: f64,
    full_im: f64,
    phase_re: f64,
    phase_im: f64,
    ws_re: f64,
    ws_im: f64,
    oa_re: f64,
    oa_im: f64,
}

fn max_distance(a: &[Complex64], b: &[Complex64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
}

/// Runs full, phase, ws and oa on `scenario` and writes the comparison folder.
pub fn compare(scenario: &Scenario, options: &RunOptions) -> Result<CompareReport, Error> {
    for model in [ModelKind::Phase, ModelKind::Ws, ModelKind::Oa] {
        simulation::second_harmonic(scenario, model)?;
    }
    check_memory(scenario, ModelKind::Full)?;
    let tokens = scenario.initial_tokens()?;
    let target = options.folder(scenario);
    let staged = StagedDir::new(&target).map_err(Error::io(&target))?;

    let full = simulation::build_with_tokens(scenario, ModelKind::Full, tokens.clone())?;
    let started = Instant::now();
    let (solution, full_series, snapshots) = solve_into(scenario, &full, staged.path(), options)?;
    let full_seconds = started.elapsed().as_secs_f64();
    let mut rows = vec![ModelRow {
        model: "full".into(),
        unknowns: full.initial_state.len(),
        seconds: full_seconds,
        max_dr2: 0.0,
    }];
    let mut reduced_series = Vec::new();
    for model in [ModelKind::Phase, ModelKind::Ws, ModelKind::Oa] {
        let sim = simulation::build_with_tokens(scenario, model, tokens.clone())?;
        let mut series = OrderSeries::new();
        let started = Instant::now();
        let sol = solve(
            &sim.problem(),
            sim.method,
            &mut [&mut series as &mut dyn Observer],
        )
        .map_err(Error::io(staged.path()))?;
        let seconds = started.elapsed().as_secs_f64();
        if !sol.status.is_success() {
            return Err(Error::RunFailed {
                name: scenario.name.clone(),
                model: model.to_string(),
                status: sol.status,
            });
        }
        rows.push(ModelRow {
            model: model.to_string(),
            unknowns: sim.initial_state.len(),
            seconds,
            max_dr2: max_distance(&series.r2, &full_series.r2),
        });
        reduced_series.push(series);
    }

    let path = staged.path().join("compare.csv");
    let mut w = csv::Writer::from_writer(BufWriter::new(
        File::create(&path).map_err(Error::io(&path))?,
    ));
    for i in 0..full_series.len() {
        let (p, s, o) = (
            reduced_series[0].r2[i],
            reduced_series[1].r2[i],
            reduced_series[2].r2[i],
        );
        let f = full_series.r2[i];
        w.serialize(CompareRow {
            t: full_series.t[i],
            full_re: f.re,
            full_im: f.im,
            phase_re: p.re,
            phase_im: p.im,
            ws_re: s.re,
            ws_im: s.im,
            oa_re: o.re,
            oa_im: o.im,
        })
        .map_err(|e| Error::io(&path)(std::io::Error::other(e)))?;
    }
    w.flush().map_err(Error::io(&path))?;

    if let Some(tokens) = full.dynamics.tokens(&solution.final_state) {
        let path = staged.path().join("tokens_final.csv");
        write_tokens_csv(&path, &tokens, scenario.model.d).map_err(Error::io(&path))?;
    }
    let classification = classify(&full_series);
    crate::run::draw_run_pictures(
        scenario,
        ModelKind::Full,
        &full_series,
        &snapshots,
        &classification,
        staged.path(),
    )?;
    crate::plot::compare_plot(
        &full_series.t,
        &[
            ("full", &full_series.r2[..]),
            ("phase", &reduced_series[0].r2[..]),
            ("ws", &reduced_series[1].r2[..]),
            ("oa", &reduced_series[2].r2[..]),
        ],
        &format!("{}: full model and its reductions", scenario.name),
        scenario.output.figure,
        staged.path(),
    )
    .map_err(Error::io(staged.path()))?;
    let mut summary = Summary::new(
        scenario,
        ModelKind::Full,
        &solution,
        &classification,
        options,
    );
    summary.compare = Some(serde_json::json!({
        "phase_vs_full": rows[1].max_dr2,
        "ws_vs_full": rows[2].max_dr2,
        "oa_vs_full": rows[3].max_dr2,
        "seconds": {
            "full": rows[0].seconds,
            "phase": rows[1].seconds,
            "ws": rows[2].seconds,
            "oa": rows[3].seconds,
        },
        "unknowns": {
            "full": rows[0].unknowns,
            "phase": rows[1].unknowns,
            "ws": rows[2].unknowns,
            "oa": rows[3].unknowns,
        },
    }));
    let path = staged.path().join("summary.json");
    write_json(&path, &summary).map_err(Error::io(&path))?;
    let dir = staged.commit().map_err(Error::io(&target))?;
    Ok(CompareReport { dir, rows, summary })
}
