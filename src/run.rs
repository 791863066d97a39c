//! `tokdyn run`: one scenario, one model, written to an output folder.
//!
//! Files: `order.csv` (streamed, one row per sample), `summary.json` (label, features, counts,
//! provenance), `tokens_final.csv` (when the model carries tokens) and `trajectory.npy` when the
//! scenario's `[output] trajectory = true`; the pictures `order.png`, `tokens.png` (and
//! `tokens.gif` with `[output] animation = true`) and, for d = 2 LSA, `portrait.png`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::classify::metastable::{self, RunClusters};
use crate::classify::{classify, CertaintyWatch, Classification, Features, Label};
use crate::error::Error;
use crate::integrate::Solution;
use crate::model::energy::Energy;
use crate::model::KernelChoice;
use crate::observe::cluster_series::{ClusterSeries, EnergyFn};
use crate::observe::{Observer, OrderSeries, Progress};
use crate::output::{write_json, write_tokens_csv, OrderCsv, ResultKind, StagedDir, TrajectoryNpy};
use crate::plot::{self, TokenSnapshots};
use crate::scenario::{KernelKind, KernelMethodKind, ModelKind, Scenario};
use crate::simulation::{self, Simulation};

/// How a command is run (not part of the scenario).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Output folder; default `output/<name>/`.
    pub out: Option<PathBuf>,
    /// Show progress on stderr for long runs.
    pub progress: bool,
    /// The command line, for provenance.
    pub command_line: Vec<String>,
}

impl RunOptions {
    /// The output folder of `scenario`.
    pub fn folder(&self, scenario: &Scenario) -> PathBuf {
        self.out
            .clone()
            .unwrap_or_else(|| crate::output::default_folder(&scenario.name))
    }
}

/// `summary.json`: typed fields, written as words and numbers only by serde.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The scenario's name.
    pub name: String,
    /// The scenario's description.
    pub description: Option<String>,
    /// The model that ran.
    pub model: ModelKind,
    /// The attention kernel.
    pub kernel: KernelKind,
    /// `spectral` when the spectral kernel evaluated the field, else `direct`.
    pub kernel_method: KernelMethodKind,
    /// The spectral kernel's truncation M (|m|, |l| <= M); null for the direct kernel.
    pub spectral_terms: Option<usize>,
    /// Number of tokens.
    pub n: usize,
    /// Dimension of the tokens.
    pub d: usize,
    /// The label of the long-term behaviour.
    pub label: Label,
    /// Why the classifier chose the label (and, for `undetermined`, what to change).
    pub label_reason: String,
    /// The numbers the label was read from.
    pub features: Features,
    /// The label the scenario expects, if it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect: Option<Label>,
    /// Whether the run showed the expected label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect_met: Option<bool>,
    /// Largest | |x_k| - 1 | of the tokens handed to the observers.
    pub norm_drift_max: f64,
    /// Largest | |x_k| - 1 | the integrator reached between two projections.
    pub norm_drift_step_max: f64,
    /// Evaluations of the vector field.
    pub rhs_evals: u64,
    /// Accepted integrator steps.
    pub accepted_steps: u64,
    /// Rejected integrator steps.
    pub rejected_steps: u64,
    /// Output samples written.
    pub samples: usize,
    /// The scenario's `time.t_end`.
    pub t_end: f64,
    /// Time of the last sample: t_end, or later when the run went on until its label was
    /// certain (at most time.t_max).
    pub t_final: f64,
    /// Wall time of the integration, observers included.
    pub wall_seconds: f64,
    /// The version of tokdyn that ran.
    pub version: String,
    /// The tokens' seed.
    pub seed: u64,
    /// The command line, for provenance.
    pub command_line: Vec<String>,
    /// The scenario file as given.
    pub scenario_file: String,
    /// The scenario after `--set`, with every default and matrix written out.
    pub scenario: toml::Table,
    /// `tokdyn compare`: the reductions against the full model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<crate::compare::CompareSummary>,
    /// For a stack of layers: its size, passes, and what the label was read on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<crate::layers::StackInfo>,
    /// Pre-LN: the range of the stream's norms |x_k| at the last sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_norms: Option<simulation::NormRange>,
    /// The tight clusters (models with tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clusters: Option<crate::classify::metastable::RunClusters>,
    /// The rows of clusters.csv, for the Python module (not written to summary.json).
    #[serde(skip)]
    pub cluster_rows: Vec<crate::observe::cluster_series::ClusterRow>,
}

impl Summary {
    /// The summary of a finished run.
    pub fn new(
        scenario: &Scenario,
        model: ModelKind,
        solution: &Solution,
        classification: &Classification,
        options: &RunOptions,
    ) -> Self {
        let label = classification.label;
        let choice = simulation::kernel_choice(scenario, model).unwrap_or(KernelChoice::Direct);
        Summary {
            name: scenario.name.clone(),
            description: scenario.description.clone(),
            model,
            kernel: scenario.model.kernel,
            kernel_method: match choice {
                KernelChoice::Direct => KernelMethodKind::Direct,
                KernelChoice::Spectral { .. } => KernelMethodKind::Spectral,
            },
            spectral_terms: choice.terms(),
            n: scenario.tokens.n,
            d: scenario.model.d,
            expect_met: scenario.expect.map(|e| e == label),
            expect: scenario.expect,
            label,
            label_reason: classification.reason.clone(),
            features: classification.features.clone(),
            norm_drift_max: solution.norm_drift_max,
            norm_drift_step_max: solution.step_drift_max,
            rhs_evals: solution.rhs_evals,
            accepted_steps: solution.accepted_steps,
            rejected_steps: solution.rejected_steps,
            samples: solution.samples,
            t_end: scenario.time.t_end,
            t_final: solution.t_last,
            wall_seconds: solution.wall.as_secs_f64(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            seed: scenario.tokens.seed,
            command_line: options.command_line.clone(),
            scenario_file: scenario.file.display().to_string(),
            scenario: scenario.resolved.clone(),
            compare: None,
            stack: None,
            stream_norms: simulation::stream_norms(scenario, model, &solution.final_state),
            clusters: None,
            cluster_rows: Vec::new(),
        }
    }
}

/// The label of the run whose output folder is `dir` (read from its summary.json), if there is
/// one.
pub fn read_label(dir: &Path) -> Option<Label> {
    /// The part of summary.json read back.
    #[derive(serde::Deserialize)]
    struct Labelled {
        label: Label,
    }
    let text = std::fs::read_to_string(dir.join("summary.json")).ok()?;
    serde_json::from_str::<Labelled>(&text)
        .ok()
        .map(|s| s.label)
}

/// What a finished run hands back.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The output folder.
    pub dir: PathBuf,
    /// The summary written there.
    pub summary: Summary,
}

/// Refuses, before allocating, a run that cannot fit in memory.
pub fn check_memory(scenario: &Scenario, model: ModelKind) -> Result<(), Error> {
    let need = simulation::memory_estimate(scenario, model);
    if let Some(available) = simulation::memory_available() {
        if need > available {
            return Err(Error::Input(format!(
                "{}: tokens.n: n = {}, d = {} needs about {:.1} GiB with the {model} model, more than the {:.1} GiB available",
                scenario.file.display(),
                scenario.tokens.n,
                scenario.model.d,
                need as f64 / (1u64 << 30) as f64,
                available as f64 / (1u64 << 30) as f64
            )));
        }
    }
    Ok(())
}

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

/// Solves a simulation with the standard observers writing into `dir`; returns the solution
/// and its series, or the failure.
pub fn solve_into(
    scenario: &Scenario,
    sim: &Simulation,
    dir: &Path,
    options: &RunOptions,
) -> Result<(Solution, OrderSeries, TokenSnapshots), Error> {
    solve_into_observed(scenario, sim, dir, options, &mut [])
}

/// [`solve_into`] with `extra` observers beside the standard ones (the Python module keeps the
/// series and the tokens with them).
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
    let cycles = crate::portrait::cycles(scenario, &sh);
    let title = crate::portrait::portrait_title(&scenario.name, true);
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
    if scenario.noise.is_some() {
        return Ok((classify_series(scenario, series), None));
    }
    if scenario.model.layers.is_empty() {
        return Ok((classify(series), None));
    }
    let path = dir.join("layers.csv");
    crate::layers::write_layers_csv(&path, &solution.boundaries).map_err(Error::io(&path))?;
    let (c, info) = crate::layers::classify_stack(scenario, series, &solution.boundaries);
    Ok((c, Some(info)))
}

/// The label of a run's series: the stationary state under noise, else the long-term
/// behaviour.
pub fn classify_series(scenario: &Scenario, series: &OrderSeries) -> Classification {
    if scenario.noise.is_some() {
        crate::classify::classify_stationary(series, scenario.tokens.n)
    } else {
        classify(series)
    }
}

/// How long the portrait's guide trajectories run.
pub const PORTRAIT_GUIDE_TIME: f64 = 30.0;

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
    check_memory(scenario, model)?;
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
    let (classification, stack) = classify_run(scenario, &series, &solution, staged.path())?;
    let (classification, cluster_summary) =
        label_clusters(scenario, model, classification, &clusters);
    // The pictures and tokens_final.csv are independent: written concurrently, a picture's
    // error reported first.
    let path = staged.path().join("tokens_final.csv");
    let (pictures, tokens) = rayon::join(
        || {
            draw_run_pictures(
                scenario,
                model,
                &series,
                &snapshots,
                &classification,
                staged.path(),
            )
        },
        || {
            write_final_tokens(
                &path,
                &*sim.dynamics,
                &solution.final_state,
                scenario.model.d,
            )
        },
    );
    pictures?;
    tokens.map_err(Error::io(&path))?;
    draw_clusters(scenario, model, &clusters, &classification, staged.path())?;
    let mut summary = Summary::new(scenario, model, &solution, &classification, options);
    summary.stack = stack;
    summary.clusters = cluster_summary;
    summary.cluster_rows = clusters.map(|c| c.rows().to_vec()).unwrap_or_default();
    let path = staged.path().join("summary.json");
    write_json(&path, &summary).map_err(Error::io(&path))?;
    let dir = staged.commit()?;
    Ok(RunReport { dir, summary })
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

/// Runs `scenario` with its `run.model` without writing anything: the `extra` observers see
/// every sample (the Python module keeps the series, tokens and trajectory with them) and the
/// summary that `run` would write is returned.
pub fn run_in_memory(
    scenario: &Scenario,
    options: &RunOptions,
    extra: &mut [&mut dyn Observer],
) -> Result<Summary, Error> {
    let model = scenario.run.model;
    check_memory(scenario, model)?;
    let sim = simulation::build(scenario, model)?;
    let mut watch = CertaintyWatch::default();
    let mut clusters = cluster_series(scenario, model, None)?;
    let mut observers: Vec<&mut dyn Observer> = vec![&mut watch];
    for o in extra.iter_mut() {
        observers.push(&mut **o);
    }
    if let Some(c) = clusters.as_mut() {
        observers.push(c);
    }
    let solution = sim
        .solve(&mut observers)
        .map_err(Error::io(&scenario.file))?
        .succeeded(&scenario.name, sim.model)?;
    let (classification, cluster_summary) = label_clusters(
        scenario,
        model,
        classify_series(scenario, &watch.series),
        &clusters,
    );
    let mut summary = Summary::new(scenario, model, &solution, &classification, options);
    summary.clusters = cluster_summary;
    summary.cluster_rows = clusters.map(|c| c.rows().to_vec()).unwrap_or_default();
    Ok(summary)
}

/// The clusters observer of a run whose model has tokens (not `oa`), writing `clusters.csv`
/// into `dir` when given; the energy column is filled where the flow has one (one layer,
/// V = A symmetric, docs/MATH.md §11).
pub fn cluster_series(
    scenario: &Scenario,
    model: ModelKind,
    dir: Option<&Path>,
) -> Result<Option<ClusterSeries>, Error> {
    if model == ModelKind::Oa {
        return Ok(None);
    }
    let d = scenario.model.d;
    let energy = if simulation::one_free_sphere_layer(scenario) {
        Energy::of_attention(&simulation::attention(scenario))
            .filter(|e| e.computable(scenario.tokens.n, d))
    } else {
        None
    };
    let energy = energy.map(|e| -> EnergyFn { Box::new(move |x: &[f64]| e.value(x, d)) });
    let series = ClusterSeries::new(scenario.clusters, d, energy);
    Ok(Some(match dir {
        Some(dir) => {
            let path = dir.join("clusters.csv");
            series.with_csv(&path).map_err(Error::io(&path))?
        }
        None => series,
    }))
}

/// The label refined by the clusters (docs/MATH.md §11; `--model clusters`: `undetermined` when
/// the cluster model never took over) and summary.json `clusters`.
pub fn label_clusters(
    scenario: &Scenario,
    model: ModelKind,
    c: Classification,
    clusters: &Option<ClusterSeries>,
) -> (Classification, Option<RunClusters>) {
    let Some(series) = clusters else {
        return (c, None);
    };
    let (c, metastable) = metastable::refine_run(
        c,
        simulation::cluster_attention(scenario).as_ref(),
        series,
        model == ModelKind::Clusters,
    );
    let summary = series.summary().map(|summary| RunClusters {
        summary,
        metastable,
    });
    (c, summary)
}
