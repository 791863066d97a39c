//! `tokdyn portrait`: the Ott–Antonsen phase portrait of a d = 2 LSA scenario with the R2 path
//! of its run.
//!
//! The path is read from the run's `order.csv` when the output folder has one (a picture never
//! re-runs a simulation); otherwise the OA equation itself is integrated from R(0) and that path
//! is drawn, which the command says.

use std::fs;
use std::path::{Path, PathBuf};

use num_complex::Complex64;

use crate::error::Error;
use crate::integrate::solve;
use crate::observe::{Observer, OrderSeries};
use crate::output::RunOptions;
use crate::plot;
use crate::predict::fixed_points;
use crate::reduced::SecondHarmonic;
use crate::scenario::{ModelKind, Scenario};
use crate::simulation;

/// How long the portrait's guide trajectories run.
pub const PORTRAIT_GUIDE_TIME: f64 = 30.0;

/// Where the drawn R2 path came from.
#[derive(Debug, Clone, PartialEq)]
pub enum PathSource {
    /// The run's `order.csv` at this path.
    Run(PathBuf),
    /// The OA equation integrated from R(0) (no run was found).
    OttAntonsen,
}

/// The periodic orbits of the OA flow that `predict` finds within its horizon, as curves to
/// draw (docs/MATH.md §6.1).
pub fn cycles(scenario: &Scenario, sh: &SecondHarmonic) -> Vec<plot::portrait::CycleCurve> {
    let mut found = Vec::new();
    crate::predict::limit_cycles(sh, crate::predict::horizon(scenario), &mut found);
    plot::portrait::cycle_curves(&found)
}

/// The title of `portrait.png`, the same from `tokdyn run` and `tokdyn portrait`: the path is the
/// run's (`from_run`) or the OA equation's from R2(0).
pub fn portrait_title(name: &str, from_run: bool) -> String {
    format!(
        "{name}: Ott–Antonsen phase portrait, R2 path of {}",
        if from_run {
            "the run"
        } else {
            "the OA equation from R2(0)"
        }
    )
}

/// The columns of an `order.csv` row that the portrait reads.
#[derive(serde::Deserialize)]
struct R2Sample {
    r2_re: f64,
    r2_im: f64,
}

/// Reads (r2_re, r2_im) from an `order.csv`.
pub fn read_r2_path(path: &std::path::Path) -> Result<Vec<Complex64>, Error> {
    let bad = |e: csv::Error| Error::Input(format!("{}: {e}", path.display()));
    let mut reader = csv::Reader::from_path(path).map_err(bad)?;
    reader
        .deserialize::<R2Sample>()
        .map(|row| row.map(|r| Complex64::new(r.r2_re, r.r2_im)).map_err(bad))
        .collect()
}

/// Draws `portrait.png` / `portrait.svg` into the scenario's output folder.
pub fn portrait(scenario: &Scenario, options: &RunOptions) -> Result<(PathBuf, PathSource), Error> {
    simulation::require_no_noise(scenario, "portrait")?;
    simulation::require_single_layer(scenario, "portrait")?;
    let sh = simulation::second_harmonic(scenario, ModelKind::Oa)?;
    let dir = options.folder(scenario);
    let order = dir.join("order.csv");
    let (path, source) = if order.exists() {
        (read_r2_path(&order)?, PathSource::Run(order))
    } else {
        let sim = simulation::build(scenario, ModelKind::Oa)?;
        let mut series = OrderSeries::new();
        solve(
            &sim.problem(),
            sim.method,
            &mut [&mut series as &mut dyn Observer],
        )
        .map_err(Error::io(&dir))?
        .succeeded(&scenario.name, ModelKind::Oa)?;
        (series.r2, PathSource::OttAntonsen)
    };
    let fixed = plot::portrait::fixed_kinds(&fixed_points(&sh));
    let cycles = cycles(scenario, &sh);
    fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    let staging = tempfile::Builder::new()
        .prefix(".portrait.tmp-")
        .tempdir_in(&dir)
        .map_err(Error::io(&dir))?;
    let title = portrait_title(&scenario.name, matches!(source, PathSource::Run(_)));
    plot::portrait_plot(
        &sh,
        &fixed,
        &cycles,
        &path,
        PORTRAIT_GUIDE_TIME,
        &title,
        scenario.output.figure,
        staging.path(),
    )
    .map_err(Error::io(&dir))?;
    for name in ["portrait.png", "portrait.svg", "portrait.pdf"] {
        let from = staging.path().join(name);
        if from.exists() {
            fs::rename(&from, dir.join(name)).map_err(Error::io(dir.join(name)))?;
        }
    }
    Ok((dir.join("portrait.png"), source))
}

/// `tokdyn portrait`: where the picture is, and where its path came from.
pub fn cli(scenario: &Path, sets: &[String], options: &RunOptions) -> Result<(), Error> {
    let (path, source) = portrait(&Scenario::load(scenario, sets)?, options)?;
    if source == PathSource::OttAntonsen {
        println!("no run found in the output folder: drew the OA path from R2(0)");
    }
    println!("-> {}", path.display());
    Ok(())
}
