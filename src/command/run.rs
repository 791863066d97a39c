//! `tokdyn run`: one scenario, one model, written to an output folder.
//!
//! Files: `order.csv` (streamed, one row per sample), `summary.json` (label, features, counts,
//! provenance), `tokens_final.csv` (when the model carries tokens) and `trajectory.npy` when the
//! scenario's `[output] trajectory = true`; the pictures `order.png`, `tokens.png` (and
//! `tokens.gif` with `[output] animation = true`) and, for d = 2 LSA, `portrait.png`.

use std::path::Path;
use std::time::Instant;

use crate::classify::{CertaintyWatch, Classification};
use crate::error::Error;
use crate::integrate::Solution;
use crate::observe::cluster_series::ClusterSeries;
use crate::observe::{Observer, OrderSeries, Progress};
use crate::outcome::lyapunov::{label_with_exponents, LyapunovSummary};
use crate::outcome::{cluster_series, label_clusters, label_run, RunReport, Summary, Timings};
use crate::output::write_lyapunov_csv;
use crate::output::{
    write_json, write_tokens_csv, OrderCsv, ResultKind, RunOptions, StagedDir, TrajectoryNpy,
};
use crate::plot::{self, TokenSnapshots};
use crate::scenario::{ModelKind, Scenario};
use crate::simulation::{self, Simulation};

use super::portrait::{cycles, portrait_title, PORTRAIT_GUIDE_TIME};

/// Refuses (exit 2) a run whose files would not fit in the free space where `dir` lives:
/// about 200 bytes a sample for order.csv (and compare.csv), plus the trajectory when asked.
pub fn check_disk(scenario: &Scenario, dir: &Path) -> Result<(), Error> {
    let samples = scenario.time.samples as u64;
    let mut need = samples.saturating_mul(200).saturating_add(16 << 20);
    if scenario.output.trajectory {
        let per_sample = (scenario.tokens.n as u64).saturating_mul(scenario.model.d as u64 * 8);
        need = need.saturating_add(samples.saturating_mul(per_sample));
    }
    let what = format!("{}: time.samples", scenario.file.display());
    crate::output::check_free_space(dir, need, &what)
}

/// Solves a simulation with the standard observers writing into `dir` and `extra` observers
/// beside them (the Python module keeps the series and the tokens with them); returns the
/// solution and its series, or the failure.
pub fn solve_into_observed(
    scenario: &Scenario,
    sim: &Simulation,
    dir: &Path,
    options: &RunOptions,
    extra: &mut [&mut dyn Observer],
) -> Result<(Solution, OrderSeries, TokenSnapshots), Error> {
    let order_path = dir.join("order.csv");
    let mut order = OrderCsv::create(&order_path).map_err(Error::io(&order_path))?;
    let mut watch = CertaintyWatch::default();
    let mut progress = Progress::new(&scenario.name, options.progress);
    let mut trajectory = scenario.output.trajectory.then(|| {
        TrajectoryNpy::new(
            &dir.join("trajectory.npy"),
            scenario.tokens.n,
            scenario.model.d,
        )
    });
    let frames = if scenario.output.animation {
        ANIMATION_FRAMES
    } else {
        PICTURE_SNAPSHOTS
    };
    let mut snapshots =
        TokenSnapshots::new(sim.samples, scenario.tokens.n, scenario.model.d, frames).with_times(
            &scenario.output.snapshots,
            sim.samples,
            scenario.time.t_end,
        );
    let mut observers: Vec<&mut dyn Observer> = vec![&mut order, &mut watch, &mut progress];
    if sim.model != ModelKind::Oa {
        observers.push(&mut snapshots);
    }
    if let Some(t) = trajectory.as_mut() {
        observers.push(t);
    }
    for o in extra.iter_mut() {
        observers.push(&mut **o);
    }
    let solution = sim
        .solve(&mut observers)
        .map_err(Error::io(dir))?
        .succeeded(&scenario.name, sim.model)?;
    Ok((solution, watch.series, snapshots))
}

/// Token snapshots kept for `tokens.png`.
const PICTURE_SNAPSHOTS: usize = 6;
/// Frames of `tokens.gif` (when `[output] animation = true`).
const ANIMATION_FRAMES: usize = 80;

/// The title of a run's pictures: name, model, label, and the rates behind it.
pub fn picture_title(scenario: &Scenario, model: ModelKind, c: &Classification) -> String {
    let f = &c.features;
    let mut rates = format!(
        "|R2| final {:.4}, arg R2 rate {:.4}",
        f.r2_abs_final, f.r2_arg_rate
    );
    if let Some(p) = f.period {
        rates.push_str(&format!(", period {p:.3}"));
    }
    if let Some(r) = f.decay_rate {
        rates.push_str(&format!(", decay rate {r:.3e}"));
    }
    format!(
        "{} ({model}, {}, n = {}, d = {}): {}\n{rates}",
        scenario.name, scenario.model.kernel, scenario.tokens.n, scenario.model.d, c.label
    )
}

/// Draws the pictures of a run into `dir`: order, tokens (and the animation when asked for),
/// and for d = 2 LSA the OA phase portrait with the run's R2 path.
pub fn draw_run_pictures(
    scenario: &Scenario,
    model: ModelKind,
    series: &OrderSeries,
    snapshots: &TokenSnapshots,
    c: &Classification,
    dir: &Path,
) -> Result<(), Error> {
    let title = picture_title(scenario, model, c);
    let io = |e| Error::io(dir)(e);
    let figure = scenario.output.figure;
    let view = plot::OrderView {
        window: scenario.output.window,
        period: c.features.period,
        figure,
    };
    // The four pictures are independent: drawn concurrently, each with its own bytes; the
    // first error in the order order, kymograph, tokens, portrait is the one reported. The
    // tokens picture (the longest: its PDF) starts first on this thread, the others are left
    // to the other threads in the order they take them.
    let (tokens, (portrait, (kymograph, order))) = rayon::join(
        || draw_tokens(scenario, series, snapshots, c, &title, dir),
        || {
            rayon::join(
                || draw_portrait(scenario, series, dir),
                || {
                    rayon::join(
                        || draw_kymograph(scenario, snapshots, &title, dir),
                        || plot::order_plot(series, &view, &title, dir),
                    )
                },
            )
        },
    );
    order.and(kymograph).and(tokens).and(portrait).map_err(io)
}

/// `kymograph.*` of a run (nothing when no token was sampled).
fn draw_kymograph(
    scenario: &Scenario,
    snapshots: &TokenSnapshots,
    title: &str,
    dir: &Path,
) -> std::io::Result<()> {
    if snapshots.history().is_empty() {
        return Ok(());
    }
    let (window, figure) = (scenario.output.window, scenario.output.figure);
    plot::kymograph_plot(snapshots.history(), window, title, figure, dir)
}

/// `tokens.*` of a run and `tokens.gif` when asked for (nothing when no token was sampled).
fn draw_tokens(
    scenario: &Scenario,
    series: &OrderSeries,
    snapshots: &TokenSnapshots,
    c: &Classification,
    title: &str,
    dir: &Path,
) -> std::io::Result<()> {
    if snapshots.candidates().is_empty() {
        return Ok(());
    }
    let times = plot::snapshot_times(
        &series.t,
        &series.nematic,
        c.features.period,
        plot::MAX_PANELS,
    );
    plot::tokens_plot(snapshots, &times, title, scenario.output.figure, dir)?;
    if scenario.output.animation {
        plot::tokens_gif(snapshots, title, dir)?;
    }
    Ok(())
}

/// `portrait.*` of a d = 2 LSA run of one layer (the portrait is one layer's flow).
fn draw_portrait(scenario: &Scenario, series: &OrderSeries, dir: &Path) -> std::io::Result<()> {
    if !scenario.model.layers.is_empty() {
        return Ok(());
    }
    let Ok(sh) = simulation::second_harmonic(scenario, ModelKind::Oa) else {
        return Ok(());
    };
    let fixed = plot::portrait::fixed_kinds(&crate::predict::fixed_points(&sh));
    let cycles = cycles(scenario, &sh);
    let title = portrait_title(&scenario.name, true);
    plot::portrait_plot(
        &sh,
        &fixed,
        &cycles,
        &series.r2,
        PORTRAIT_GUIDE_TIME,
        &title,
        scenario.output.figure,
        dir,
    )
}

/// The label of a run; for a stack of layers also writes `layers.csv` into `dir` and reads
/// a looped stack on its stroboscopic series.
pub fn classify_run(
    scenario: &Scenario,
    series: &OrderSeries,
    solution: &Solution,
    dir: &Path,
) -> Result<(Classification, Option<crate::layers::StackInfo>), Error> {
    let (c, stack) = label_run(scenario, series, solution);
    if stack.is_some() {
        let path = dir.join("layers.csv");
        crate::layers::write_layers_csv(&path, &solution.boundaries).map_err(Error::io(&path))?;
    }
    Ok((c, stack))
}

/// Runs `scenario` with its `run.model` and writes the output folder.
pub fn run(scenario: &Scenario, options: &RunOptions) -> Result<RunReport, Error> {
    run_observed(scenario, options, &mut [])
}

/// [`run`] with `extra` observers that see every sample beside the output files.
pub fn run_observed(
    scenario: &Scenario,
    options: &RunOptions,
    extra: &mut [&mut dyn Observer],
) -> Result<RunReport, Error> {
    let model = scenario.run.model;
    simulation::check_memory(scenario, model)?;
    if model == ModelKind::MeanField {
        return run_mean_field(scenario, options, extra).map(|(report, _)| report);
    }
    let sim = simulation::build(scenario, model)?;
    let target = options.folder(scenario);
    let staged = StagedDir::new(&target, ResultKind::Run)?;
    check_disk(scenario, staged.path())?;
    let mut clusters = cluster_series(scenario, model, Some(staged.path()))?;
    let (solution, series, snapshots) = {
        let mut observers: Vec<&mut dyn Observer> = Vec::new();
        for o in extra.iter_mut() {
            observers.push(&mut **o);
        }
        if let Some(c) = clusters.as_mut() {
            observers.push(c);
        }
        solve_into_observed(scenario, &sim, staged.path(), options, &mut observers)?
    };
    let mut timings = Timings::of(&solution);
    let labelled = Instant::now();
    let (classification, stack) = classify_run(scenario, &series, &solution, staged.path())?;
    let (classification, cluster_summary) =
        label_clusters(scenario, model, classification, &clusters);
    timings.observers += labelled.elapsed().as_secs_f64();
    let exponents = Instant::now();
    let (classification, spectrum) =
        label_with_exponents(scenario, model, classification, &series)?;
    timings.flow += exponents.elapsed().as_secs_f64();
    let written = Instant::now();
    if let (Some(s), Some(spec)) = (&spectrum, &scenario.lyapunov) {
        let path = staged.path().join("lyapunov.csv");
        write_lyapunov_csv(&path, &s.times, &s.estimates, spec.exponents)
            .map_err(Error::io(&path))?;
    }
    timings.writing += written.elapsed().as_secs_f64();
    // The pictures and tokens_final.csv are independent: written concurrently, a picture's
    // error reported first; each side counts its own wall time.
    let path = staged.path().join("tokens_final.csv");
    let ((pictures, drawing), (tokens, writing)) = rayon::join(
        || {
            timed(|| {
                draw_run_pictures(
                    scenario,
                    model,
                    &series,
                    &snapshots,
                    &classification,
                    staged.path(),
                )
            })
        },
        || {
            timed(|| {
                write_final_tokens(
                    &path,
                    &*sim.dynamics,
                    &solution.final_state,
                    scenario.model.d,
                )
            })
        },
    );
    pictures?;
    tokens.map_err(Error::io(&path))?;
    let (clusters_drawn, clusters_drawing) =
        timed(|| draw_clusters(scenario, model, &clusters, &classification, staged.path()));
    clusters_drawn?;
    timings.pictures += drawing + clusters_drawing;
    timings.writing += writing;
    let mut summary = Summary::new(scenario, model, &solution, &classification, options);
    summary.timings = timings;
    summary.stack = stack;
    summary.clusters = cluster_summary;
    summary.lyapunov = spectrum.as_ref().map(LyapunovSummary::of);
    summary.cluster_rows = clusters.map(|c| c.rows().to_vec()).unwrap_or_default();
    let path = staged.path().join("summary.json");
    write_json(&path, &summary).map_err(Error::io(&path))?;
    let dir = staged.commit()?;
    Ok(RunReport { dir, summary })
}

/// The value of `f` and the wall seconds it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let started = Instant::now();
    let value = f();
    (value, started.elapsed().as_secs_f64())
}

/// `--model mean-field`: order.csv (streamed), density.npy, density_grid.csv, order.png,
/// density.png, layers.csv for a stack and summary.json with `mean_field`; also hands back the densities (samples x
/// grid, row-major) and the grid (for the Python module).
pub fn run_mean_field(
    scenario: &Scenario,
    options: &RunOptions,
    extra: &mut [&mut dyn Observer],
) -> Result<(RunReport, MeanFieldDensities), Error> {
    // Bad input (a negative start density) before any folder is made.
    simulation::mean_field_problem(scenario)?;
    let target = options.folder(scenario);
    let staged = StagedDir::new(&target, ResultKind::Run)?;
    check_disk(scenario, staged.path())?;
    let dir = staged.path();
    let order_path = dir.join("order.csv");
    let mut order = OrderCsv::create(&order_path).map_err(Error::io(&order_path))?;
    let mut progress = Progress::new(&scenario.name, options.progress);
    let outcome = {
        let mut observers: Vec<&mut dyn Observer> = vec![&mut order, &mut progress];
        for o in extra.iter_mut() {
            observers.push(&mut **o);
        }
        crate::outcome::mean_field::solve_mean_field(scenario, options, &mut observers)?
    };
    let run = &outcome.run;
    let (grid, samples) = (run.summary.grid, run.history.len());
    let values = run.densities();
    let written = Instant::now();
    let path = dir.join("density.npy");
    crate::output::write_density_npy(&path, samples, grid, &values).map_err(Error::io(&path))?;
    let path = dir.join("density_grid.csv");
    let header = if run.d >= 3 { "u" } else { "theta" };
    crate::output::write_density_grid_csv(&path, header, &run.grid_points())
        .map_err(Error::io(&path))?;
    if !run.solution.boundaries.is_empty() {
        let path = dir.join("layers.csv");
        crate::layers::write_layers_csv(&path, &run.solution.boundaries)
            .map_err(Error::io(&path))?;
    }
    let writing = written.elapsed().as_secs_f64();
    let drawn = Instant::now();
    let title = picture_title(scenario, ModelKind::MeanField, &outcome.classification);
    let view = plot::OrderView {
        window: scenario.output.window,
        period: outcome.classification.features.period,
        figure: scenario.output.figure,
    };
    plot::order_plot(&outcome.series, &view, &title, dir).map_err(Error::io(dir))?;
    let nodes = run.grid_points();
    let density = plot::density::DensityView {
        times: &run.times,
        grid,
        values: &values,
        sphere: (run.d >= 3).then(|| {
            (
                nodes.as_slice(),
                crate::mean_field::gegenbauer::sphere_area(run.d),
            )
        }),
    };
    plot::density::density_plot(&density, &title, scenario.output.figure, dir)
        .map_err(Error::io(dir))?;
    let mut summary = outcome.summary;
    summary.timings.pictures += drawn.elapsed().as_secs_f64();
    summary.timings.writing += writing;
    let path = dir.join("summary.json");
    write_json(&path, &summary).map_err(Error::io(&path))?;
    let dir = staged.commit()?;
    let densities = MeanFieldDensities {
        grid: run.grid_points(),
        values,
    };
    Ok((RunReport { dir, summary }, densities))
}

/// The densities of a mean-field run on its final grid.
pub struct MeanFieldDensities {
    /// The grid angles.
    pub grid: Vec<f64>,
    /// rho at each sample on the grid (samples x grid, row-major).
    pub values: Vec<f64>,
}

/// `clusters.*` of a run whose tokens were in tight clusters at some sample.
fn draw_clusters(
    scenario: &Scenario,
    model: ModelKind,
    clusters: &Option<ClusterSeries>,
    c: &Classification,
    dir: &Path,
) -> Result<(), Error> {
    let title = picture_title(scenario, model, c);
    match clusters
        .as_ref()
        .and_then(|s| plot::clusters::ClustersView::of(s, &title))
    {
        Some(view) => plot::clusters::clusters_plot(&view, scenario.output.figure, dir)
            .map_err(Error::io(dir)),
        None => Ok(()),
    }
}

/// Writes `tokens_final.csv` when the model carries tokens, a piece at a time where the model
/// makes them (the group model: no n x d copy).
fn write_final_tokens(
    path: &Path,
    dynamics: &(dyn crate::integrate::Dynamics + Sync),
    state: &[f64],
    d: usize,
) -> std::io::Result<()> {
    let mut csv = None;
    let fed = dynamics.token_pieces(state, &mut |_, rows| {
        let w = match &mut csv {
            Some(w) => w,
            None => csv.insert(crate::output::TokensCsv::create(path, d)?),
        };
        w.rows(rows)
    });
    match (fed, csv) {
        (Some(fed), Some(w)) => fed.and_then(|_| w.finish()),
        (Some(fed), None) => fed.and_then(|_| crate::output::TokensCsv::create(path, d)?.finish()),
        (None, _) => match dynamics.tokens(state) {
            Some(tokens) => write_tokens_csv(path, &tokens, d),
            None => Ok(()),
        },
    }
}

/// `tokdyn run`: the label line, and whether the scenario's `expect` was met.
pub fn cli(
    scenario: &Path,
    model: Option<String>,
    mut sets: Vec<String>,
    options: &RunOptions,
) -> Result<(), Error> {
    let changed = !sets.is_empty();
    if let Some(m) = model {
        sets.push(format!("run.model={m}"));
    }
    let scenario = Scenario::load(scenario, &sets)?;
    let report = if scenario.ensemble.is_some() {
        super::ensemble::run(&scenario, options)?
    } else {
        run(&scenario, options)?
    };
    let s = &report.summary;
    println!(
        "{}: {} ({}) in {:.2} s, {} field evaluations -> {}",
        s.name,
        s.label,
        s.label_reason,
        s.wall_seconds,
        s.rhs_evals,
        report.dir.display()
    );
    // `expect` speaks of the scenario as written: with --set it may no longer apply.
    if let (Some(expect), Some(false)) = (&s.expect, s.expect_met) {
        if changed {
            println!("(the scenario as written expects {expect}; --set changed it)");
        } else {
            println!("expected {expect}, got {}", s.label);
        }
    }
    Ok(())
}
