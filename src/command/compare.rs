//! `tokdyn compare`: the full model and its reductions on the same scenario.
//!
//! For d = 2 LSA: full, phase, ws, oa and the group model; for LSA in another dimension: full
//! and group (the other reductions need d = 2). All start from the same tokens and are sampled
//! on the same grid. `compare.csv` holds R2 of each
//! (`t,full_re,full_im,phase_re,phase_im,ws_re,ws_im,oa_re,oa_im,group_re,group_im`, empty for a
//! model that did not run); summary.json is the full run's summary with a `compare` object: max
//! over the samples of |R2 - R2_full| for each model (`<model>_vs_full`, null when it did not
//! run) and the wall time of each model.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::classify::classify;
use crate::ensemble::{ensemble_run_summary, simulate};
use crate::error::Error;
use crate::observe::cluster_series::ClusterSeries;
use crate::observe::OrderSeries;
use crate::outcome::beside_mean_field::{
    beside_rows, distances, mean_field_twin, write_beside_csv, MeanFieldComparison, ParticleOrder,
};
use crate::outcome::mean_field::solve_mean_field;
use crate::outcome::{
    cluster_series, compare_summary, compared_models, label_clusters, max_distance, run_compared,
    CompareMerges, ModelRow, Summary,
};
use crate::output::{
    write_csv_rows, write_json, write_tokens_csv, ResultKind, RunOptions, StagedDir,
};
use crate::scenario::{EnsembleSpec, ModelKind, Scenario};
use crate::simulation;

use super::run::{check_disk, draw_run_pictures, solve_into_observed};

/// The result of a comparison.
#[derive(Debug, Clone)]
pub struct CompareReport {
    /// The output folder.
    pub dir: std::path::PathBuf,
    /// One row per model, full first.
    pub rows: Vec<ModelRow>,
    /// The summary written there.
    pub summary: Summary,
}

/// One line of compare.csv; a model that did not run (d != 2: phase, ws, oa) leaves its
/// columns empty.
#[derive(Serialize)]
struct CompareRow {
    t: f64,
    full_re: f64,
    full_im: f64,
    phase_re: Option<f64>,
    phase_im: Option<f64>,
    ws_re: Option<f64>,
    ws_im: Option<f64>,
    oa_re: Option<f64>,
    oa_im: Option<f64>,
    group_re: Option<f64>,
    group_im: Option<f64>,
}

/// The rows of compare.csv: R2 of every model at every sample.
fn compare_rows<'a>(
    full_series: &'a OrderSeries,
    others: &'a [(ModelKind, OrderSeries)],
) -> impl Iterator<Item = CompareRow> + 'a {
    let of = move |model: ModelKind, i: usize| {
        others
            .iter()
            .find(|(m, _)| *m == model)
            .and_then(|(_, s)| s.r2.get(i).copied())
    };
    (0..full_series.len()).map(move |i| {
        let f = full_series.r2[i];
        let (p, s, o, g) = (
            of(ModelKind::Phase, i),
            of(ModelKind::Ws, i),
            of(ModelKind::Oa, i),
            of(ModelKind::Group, i),
        );
        CompareRow {
            t: full_series.t[i],
            full_re: f.re,
            full_im: f.im,
            phase_re: p.map(|z| z.re),
            phase_im: p.map(|z| z.im),
            ws_re: s.map(|z| z.re),
            ws_im: s.map(|z| z.im),
            oa_re: o.map(|z| z.re),
            oa_im: o.map(|z| z.im),
            group_re: g.map(|z| z.re),
            group_im: g.map(|z| z.im),
        }
    })
}

/// Runs full and the models it is compared with on `scenario` and writes the comparison
/// folder: full, phase, ws, oa and group for d = 2 LSA; full and group for LSA in another d.
pub fn compare(scenario: &Scenario, options: &RunOptions) -> Result<CompareReport, Error> {
    if scenario.noise.is_some() {
        return compare_noisy(scenario, options);
    }
    let models = compared_models(scenario)?;
    simulation::check_memory(scenario, ModelKind::Full)?;
    let tokens = scenario.initial_tokens()?;
    let target = options.folder(scenario);
    let staged = StagedDir::new(&target, ResultKind::Run)?;
    check_disk(scenario, staged.path())?;

    let full = simulation::build_with_tokens(scenario, ModelKind::Full, tokens.clone())?;
    let started = Instant::now();
    let mut full_clusters = cluster_series(scenario, ModelKind::Full, Some(staged.path()))?;
    let mut extra: Vec<&mut dyn crate::observe::Observer> = Vec::new();
    if let Some(c) = full_clusters.as_mut() {
        extra.push(c);
    }
    let (solution, full_series, snapshots) =
        solve_into_observed(scenario, &full, staged.path(), options, &mut extra)?;
    let full_seconds = started.elapsed().as_secs_f64();
    let mut rows = vec![ModelRow {
        model: ModelKind::Full,
        unknowns: full.initial_state.len(),
        seconds: full_seconds,
        max_dr2: 0.0,
    }];
    let mut others = Vec::new();
    let mut model_clusters = None;
    for model in models {
        let (row, series, clusters) =
            run_compared(scenario, model, &tokens, &full_series, staged.path())?;
        rows.push(row);
        others.push((model, series));
        model_clusters = model_clusters.or(clusters);
    }
    let beside = match mean_field_twin(scenario) {
        Ok(twin) => Some(mean_field_beside(
            &twin,
            options,
            &ParticleOrder::of_run(&full_series),
            scenario.tokens.n,
            staged.path(),
        )?),
        Err(_) => None,
    };
    if let Some((comparison, series)) = &beside {
        rows.push(ModelRow {
            model: ModelKind::MeanField,
            unknowns: comparison.grid,
            seconds: comparison.seconds,
            max_dr2: max_distance(&series.r2, &full_series.r2),
        });
    }
    let path = staged.path().join("compare.csv");
    let written = match (&full_clusters, &model_clusters) {
        (Some(f), Some(c)) => {
            let model = others.iter().find(|(m, _)| *m == ModelKind::Clusters);
            let rows = cluster_compare_rows(&full_series, model.map(|(_, s)| s), (f, c));
            write_csv_rows(&path, rows)
        }
        _ => write_csv_rows(&path, compare_rows(&full_series, &others)),
    };
    written.map_err(Error::io(&path))?;

    if let Some(tokens) = full.dynamics.tokens(&solution.final_state) {
        let path = staged.path().join("tokens_final.csv");
        write_tokens_csv(&path, &tokens, scenario.model.d).map_err(Error::io(&path))?;
    }
    let (classification, cluster_summary) = label_clusters(
        scenario,
        ModelKind::Full,
        classify(&full_series),
        &full_clusters,
    );
    draw_run_pictures(
        scenario,
        ModelKind::Full,
        &full_series,
        &snapshots,
        &classification,
        staged.path(),
    )?;
    let mut lines = vec![("full", &full_series.r2[..])];
    lines.extend(
        others
            .iter()
            .map(|(model, series)| (model.as_str(), &series.r2[..])),
    );
    if let Some((_, series)) = &beside {
        lines.push((ModelKind::MeanField.as_str(), &series.r2[..]));
    }
    crate::plot::compare_plot(
        &full_series.t,
        &lines,
        scenario.output.window,
        classification.features.period,
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
    let mut compared = compare_summary(&rows);
    if let Some((comparison, _)) = beside {
        compared.mean_field_vs_full = rows
            .iter()
            .find(|r| r.model == ModelKind::MeanField)
            .map(|r| r.max_dr2);
        compared.mean_field = Some(comparison);
    }
    summary.compare = Some(compared);
    summary.clusters = cluster_summary;
    if let (Some(compare), Some(f), Some(c)) =
        (summary.compare.as_mut(), &full_clusters, &model_clusters)
    {
        compare.merges = Some(CompareMerges {
            clusters: crate::observe::cluster_series::merges(c.rows()),
            full: crate::observe::cluster_series::merges(f.rows()),
        });
    }
    let path = staged.path().join("summary.json");
    write_json(&path, &summary).map_err(Error::io(&path))?;
    let dir = staged.commit()?;
    Ok(CompareReport { dir, rows, summary })
}

/// Runs the mean field of `twin` (the token scenario's density) in memory, writes
/// `compare_mean_field.csv` beside `particles` and hands back the comparison and the density's
/// series.
fn mean_field_beside(
    twin: &Scenario,
    options: &RunOptions,
    particles: &ParticleOrder,
    tokens: usize,
    dir: &Path,
) -> Result<(MeanFieldComparison, OrderSeries), Error> {
    let started = Instant::now();
    let outcome = solve_mean_field(twin, options, &mut [])?;
    let seconds = started.elapsed().as_secs_f64();
    let rows = beside_rows(particles, &outcome.series);
    let path = dir.join("compare_mean_field.csv");
    write_beside_csv(&path, &rows).map_err(Error::io(&path))?;
    let (max_r1_distance, max_r1_z) = distances(&rows, 0);
    let (max_nematic_distance, max_nematic_z) = distances(&rows, 1);
    let summary = &outcome.run.summary;
    let comparison = MeanFieldComparison {
        grid: summary.grid,
        max_nematic_distance,
        max_nematic_z,
        max_r1_distance,
        max_r1_z,
        runs: particles.runs,
        samples: rows.len(),
        seconds,
        stop: summary
            .stop
            .as_ref()
            .map(|s| format!("{} (t = {})", s.reason, s.t)),
        tokens,
    };
    Ok((comparison, outcome.series))
}

/// `compare` of a noisy scenario: an ensemble of the particles (`[ensemble] runs`, default
/// [`NOISY_RUNS`]) beside the mean field, whose diffusion is the same noise. Writes the
/// ensemble's files (ensemble.csv, ensemble_order.csv, ensemble.png), compare_mean_field.csv
/// and summary.json with `ensemble` and `compare.mean_field`.
fn compare_noisy(scenario: &Scenario, options: &RunOptions) -> Result<CompareReport, Error> {
    let twin = mean_field_twin(scenario).map_err(|e| {
        Error::Input(format!(
            "{}: noise.temperature: `compare` of a noisy scenario runs the mean field beside an ensemble of the particles, and the mean field does not apply here ({e}); use `tokdyn run` for noisy tokens",
            scenario.file.display()
        ))
    })?;
    let mut particles = scenario.clone();
    particles.ensemble = Some(
        particles
            .ensemble
            .unwrap_or(EnsembleSpec { runs: NOISY_RUNS }),
    );
    simulation::check_memory(&particles, ModelKind::Full)?;
    let target = options.folder(scenario);
    let staged = StagedDir::new(&target, ResultKind::Run)?;
    super::ensemble::check_disk(&particles, staged.path())?;
    let started = Instant::now();
    let ensemble = simulate(&particles, ModelKind::Full)?;
    let seconds = started.elapsed().as_secs_f64();
    let dir = staged.path();
    let r1 = ensemble.order.r1.as_ref().ok_or_else(|| {
        Error::Input(format!(
            "{}: run.model: the particles have no R1 to compare with the mean field",
            scenario.file.display()
        ))
    })?;
    let runs = ensemble.summary.runs;
    let s = &ensemble.order.nematic;
    let beside = ParticleOrder::of_ensemble(
        &ensemble.order.t,
        (r1.mean(), &r1.sd()),
        (s.mean(), &s.sd()),
        runs,
    );
    let (comparison, _) = mean_field_beside(&twin, options, &beside, scenario.tokens.n, dir)?;
    super::ensemble::write_ensemble_files(&particles, &ensemble, dir)?;
    let mut summary = ensemble_run_summary(&particles, ModelKind::Full, &ensemble, options);
    let mut compared = compare_summary(&[]);
    compared.mean_field = Some(comparison);
    summary.summary.compare = Some(compared);
    let path = dir.join("summary.json");
    write_json(&path, &summary).map_err(Error::io(&path))?;
    let dir = staged.commit()?;
    let rows = vec![ModelRow {
        model: ModelKind::Full,
        unknowns: scenario.tokens.n * scenario.model.d,
        seconds,
        max_dr2: 0.0,
    }];
    Ok(CompareReport {
        dir,
        rows,
        summary: summary.summary,
    })
}

/// Runs of the particles beside the mean field when a noisy scenario has no `[ensemble]`.
pub const NOISY_RUNS: usize = 16;

/// One line of compare.csv for usa / sa: R2 and the cluster count of full and of the cluster
/// model.
#[derive(Serialize)]
struct ClusterCompareRow {
    t: f64,
    full_re: f64,
    full_im: f64,
    clusters_re: Option<f64>,
    clusters_im: Option<f64>,
    full_count: Option<usize>,
    clusters_count: Option<usize>,
}

/// The rows of compare.csv for usa / sa (`t,full_re,full_im,clusters_re,clusters_im,full_count,clusters_count`);
/// `model`: the cluster model's series; `counts`: the cluster counts of full and of the model.
fn cluster_compare_rows<'a>(
    full_series: &'a OrderSeries,
    model: Option<&'a OrderSeries>,
    (full_clusters, model_clusters): (&'a ClusterSeries, &'a ClusterSeries),
) -> impl Iterator<Item = ClusterCompareRow> + 'a {
    (0..full_series.len()).map(move |i| {
        let f = full_series.r2[i];
        let c = model.and_then(|s| s.r2.get(i).copied());
        ClusterCompareRow {
            t: full_series.t[i],
            full_re: f.re,
            full_im: f.im,
            clusters_re: c.map(|z| z.re),
            clusters_im: c.map(|z| z.im),
            full_count: full_clusters.rows().get(i).map(|r| r.count),
            clusters_count: model_clusters.rows().get(i).map(|r| r.count),
        }
    })
}

/// `tokdyn compare`: a table of the models.
pub fn cli(scenario: &Path, sets: &[String], options: &RunOptions) -> Result<(), Error> {
    let report = compare(&Scenario::load(scenario, sets)?, options)?;
    println!(
        "{:<10} {:>9} {:>10} {:>12}",
        "model", "unknowns", "seconds", "max |dR2|"
    );
    for r in &report.rows {
        println!(
            "{:<10} {:>9} {:>10.4} {:>12.3e}",
            r.model.as_str(),
            r.unknowns,
            r.seconds,
            r.max_dr2
        );
    }
    if let Some(m) = report
        .summary
        .compare
        .as_ref()
        .and_then(|c| c.mean_field.as_ref())
    {
        let z = |z: Option<f64>| {
            z.map(|z| format!(" ({z:.2} standard errors)"))
                .unwrap_or_default()
        };
        println!(
            "mean field (grid {}, {:.4} s) beside {} run(s) of {} tokens: max |d|R1|| = {:.3e}{}, max |ds| = {:.3e}{}",
            m.grid, m.seconds, m.runs, m.tokens, m.max_r1_distance, z(m.max_r1_z), m.max_nematic_distance, z(m.max_nematic_z)
        );
    }
    println!("-> {}", report.dir.display());
    Ok(())
}
