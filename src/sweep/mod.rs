//! `tokdyn sweep` and `tokdyn merge`: a scenario over a grid of parameters, one label per point.
//!
//! A sweep file (the README's sweep file, [`spec`]) names a base scenario and axes; every grid point
//! sets the axis values into the base scenario's table, is checked like a scenario file, and
//! runs with an order-parameter series as its observer (no files per point; usa / sa points also
//! count their clusters, `point`); the series is classified. Points run in parallel (rayon) and are written in index order, so `sweep.csv` is
//! byte-identical for any thread count. Every point starts from the scenario's `tokens.seed`:
//! the same initial tokens at every point unless an axis changes them (`tokens.seed`,
//! `tokens.n`, ...), so neighbouring points differ only by the swept parameters.
//!
//! The output folder (default `output/<name>/`) holds:
//!
//! - `sweep.json`: the manifest (grid and base scenario), written first (`store`);
//! - `sweep.progress` (or `shard-K-of-N.progress`): finished points, appended as they finish,
//!   so that `--resume` continues a sweep killed at any moment;
//! - `sweep.csv`: the axis names, then `label,r2_abs_final,r2_abs_tail_min,r2_abs_tail_max,
//!   r2_arg_rate,period,error,t_final,reason,cluster_count`, one row per point, first axis
//!   slowest; a failed point has an empty label and numbers and its message in `error`;
//!   `cluster_count` is the final count of tight clusters (empty for `oa`, which has no tokens,
//!   and for `label = "predict"`);
//! - `summary.json`: counts per label, failed points, timings, provenance;
//! - `boundaries.csv` when the sweep file has `[refine]` (`refine`);
//! - `branches.csv` when it has `[continuation]` (`continuation`), `cycles.csv` with its
//!   `cycles = true` (`cycles`);
//! - `curves.csv` when it has `[codim2]` (`codim2`), and `special_points.json` with either;
//! - `shard-K-of-N.csv` (+ `.json`) for `--shard K/N`; `tokdyn merge DIR` assembles them.
//!
//! Result files are written to a temporary file beside them and renamed, so they are never
//! half-written. The folder itself is a working folder shared by the shards of one sweep (so it
//! is not staged as a whole): it holds one sweep, and an unsharded run of a different sweep
//! (another grid or base scenario) clears the old sweep's files first.

pub(crate) mod members;
pub(crate) mod pictures;
pub(crate) mod point;
pub(crate) mod refine;
pub(crate) mod row;
pub mod spec;
pub(crate) mod stationary;
pub(crate) mod store;
pub(crate) mod transition;

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use crate::bifurcation::{codim2, continuation, cycles};
use crate::error::Error;
use crate::scenario::LABELS;

use crate::cells::csv_text;
use crate::observe::progress::Counter;
use crate::output::{write_atomic, write_json_atomic};
use point::run_point;
use row::Outcome;
use spec::Plan;
use store::{Manifest, ProgressWriter, MANIFEST};

/// How a sweep is run (not part of the sweep file).
#[derive(Debug, Clone, Default)]
pub struct SweepOptions {
    /// Output folder; default `output/<name>/`.
    pub out: Option<PathBuf>,
    /// `K/N` from `--shard` (validated by [`sweep`]).
    pub shard: Option<String>,
    /// Continue an interrupted sweep.
    pub resume: bool,
    /// Show progress on stderr.
    pub progress: bool,
    /// The command line, for provenance.
    pub command_line: Vec<String>,
    /// `--set KEY=VALUE` overrides of the base scenario, in order.
    pub sets: Vec<String>,
}

/// Shard `K` of `N` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, 1-based.
    pub k: usize,
    /// Number of shards.
    pub n: usize,
}

/// Parses `K/N` with 1 <= K <= N.
pub fn parse_shard(text: &str) -> Option<Shard> {
    let (k, n) = text.trim().split_once('/')?;
    let k: usize = k.trim().parse().ok()?;
    let n: usize = n.trim().parse().ok()?;
    (1 <= k && k <= n).then_some(Shard { k, n })
}

/// The shard of this run: `--shard K/N`, else from a Slurm job array (K = ID - MIN + 1, or
/// (ID - MIN) / STEP + 1 with `SLURM_ARRAY_TASK_STEP`, N = `SLURM_ARRAY_TASK_COUNT`), else none.
pub fn resolve_shard(
    file: &Path,
    option: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Shard>, Error> {
    if let Some(text) = option {
        return parse_shard(text).map(Some).ok_or_else(|| {
            Error::Input(format!(
                "{}: --shard: `{}` is not K/N with 1 <= K <= N (e.g. --shard 2/8)",
                file.display(),
                text.escape_debug()
            ))
        });
    }
    let Some(id) = env("SLURM_ARRAY_TASK_ID") else {
        return Ok(None);
    };
    let number = |name: &str, value: Option<String>| -> Result<i64, Error> {
        let value = value.ok_or_else(|| {
            Error::Input(format!(
                "{}: {name}: not set, but SLURM_ARRAY_TASK_ID is (a Slurm job array); pass --shard K/N",
                file.display()
            ))
        })?;
        value.trim().parse().map_err(|_| {
            Error::Input(format!(
                "{}: {name}: `{}` is not an integer",
                file.display(),
                value.escape_debug()
            ))
        })
    };
    let id = number("SLURM_ARRAY_TASK_ID", Some(id))?;
    let min = number("SLURM_ARRAY_TASK_MIN", env("SLURM_ARRAY_TASK_MIN"))?;
    let count = number("SLURM_ARRAY_TASK_COUNT", env("SLURM_ARRAY_TASK_COUNT"))?;
    let step = match env("SLURM_ARRAY_TASK_STEP") {
        Some(s) => number("SLURM_ARRAY_TASK_STEP", Some(s))?,
        None => 1,
    };
    let k = if step >= 1 && (id - min) % step == 0 {
        (id - min) / step + 1
    } else {
        0
    };
    if count < 1 || k < 1 || k > count {
        return Err(Error::Input(format!(
            "{}: SLURM_ARRAY_TASK_ID: task {id} of an array with MIN = {min}, COUNT = {count}, STEP = {step} gives no shard K/N with 1 <= K <= N; pass --shard K/N",
            file.display()
        )));
    }
    Ok(Some(Shard {
        k: k as usize,
        n: count as usize,
    }))
}

/// `summary.json` of a sweep (or of a merge).
#[derive(Debug, Serialize)]
struct Summary {
    name: String,
    description: Option<String>,
    sweep_file: Option<String>,
    scenario_file: Option<String>,
    model: String,
    axes: Vec<String>,
    points: usize,
    /// Points computed by this invocation.
    computed: usize,
    /// Points taken from a progress file or shard files (`--resume`).
    reused: usize,
    counts: BTreeMap<String, usize>,
    failed_points: usize,
    /// Indices of the failed points (at most 1000).
    failed: Vec<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refine: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    continuation: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    codim2: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    merged_from: Option<Vec<String>>,
    wall_seconds: f64,
    threads: usize,
    version: String,
    command_line: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sweep: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scenario: Option<toml::Table>,
}

/// Counts per label (every label, zeros included) and the failed indices.
fn tally<'a>(
    rows: impl Iterator<Item = (usize, &'a Outcome)>,
) -> (BTreeMap<String, usize>, usize, Vec<usize>) {
    let mut counts: BTreeMap<String, usize> = LABELS.iter().map(|l| (l.to_string(), 0)).collect();
    let mut failed = Vec::new();
    let mut failed_count = 0;
    for (i, o) in rows {
        if o.failed() {
            failed_count += 1;
            if failed.len() < 1000 {
                failed.push(i);
            }
        } else {
            *counts.entry(o.label().to_string()).or_default() += 1;
        }
    }
    (counts, failed_count, failed)
}

/// Files of a sweep folder that belong to one sweep (removed when a different sweep starts
/// there).
fn is_sweep_file(name: &str) -> bool {
    matches!(
        name,
        "sweep.csv"
            | "summary.json"
            | "boundaries.csv"
            | "branches.csv"
            | "curves.csv"
            | "special_points.json"
            | "sweep.progress"
            | "transition.csv"
    ) || (name.starts_with("shard-")
        && (name.ends_with(".csv") || name.ends_with(".json") || name.ends_with(".progress")))
}

/// The error of a sweep stopped by a signal after `done` of `todo` points of this run.
fn interrupted(done: usize, todo: usize, progress: &Path) -> Error {
    Error::Interrupted(format!(
        "after {done} of the {todo} points of this run; {} keeps them: run again with --resume to continue",
        progress.display()
    ))
}

fn clear_old_sweep(dir: &Path) -> Result<(), Error> {
    for entry in fs::read_dir(dir).map_err(Error::io(dir))? {
        let entry = entry.map_err(Error::io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_sweep_file(&name) && entry.path().is_file() {
            fs::remove_file(entry.path()).map_err(Error::io(entry.path()))?;
        }
    }
    Ok(())
}

/// The progress file and what it holds; the writer that continues it.
struct Bookkeeping {
    writer: ProgressWriter,
    grid: HashMap<usize, Outcome>,
    refine: HashMap<Vec<String>, Outcome>,
}

fn open_progress(
    plan: &Plan,
    path: &Path,
    fingerprint: &str,
    resume: bool,
) -> Result<Bookkeeping, Error> {
    if resume {
        let shape = (plan.axes.len(), plan.layout());
        let found = store::read_progress(path, fingerprint, shape, plan.points())
            .map_err(Error::io(path))?;
        if let Some(p) = found {
            let writer = ProgressWriter::resume(path, p.valid_len, plan.layout())
                .map_err(Error::io(path))?;
            return Ok(Bookkeeping {
                writer,
                grid: p.grid,
                refine: p.refine,
            });
        }
    }
    let writer =
        ProgressWriter::create(path, fingerprint, plan.layout()).map_err(Error::io(path))?;
    Ok(Bookkeeping {
        writer,
        grid: HashMap::new(),
        refine: HashMap::new(),
    })
}

/// Runs a sweep file; returns the output folder.
pub fn sweep(path: &Path, options: &SweepOptions) -> Result<PathBuf, Error> {
    let env = |name: &str| std::env::var(name).ok();
    sweep_with_env(path, options, &env)
}

/// [`sweep`] with the environment given (for tests of the Slurm variables).
pub fn sweep_with_env(
    path: &Path,
    options: &SweepOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, Error> {
    let started = Instant::now();
    let shard = resolve_shard(path, options.shard.as_deref(), env)?;
    let plan = spec::load_with_sets(path, &options.sets)?;
    if plan.goes_back() && shard.is_some() {
        return Err(members::not_shardable(&plan, path));
    }
    // Stationary densities of a mean-field base: branches, no grid.
    if stationary::family(&plan).is_some() && plan.axes.is_empty() {
        return stationary::run(&plan, options, shard.is_some(), started);
    }
    // Every input, continuation included, is checked before the first point.
    if let Some(c) = &plan.continuation {
        continuation::check(&plan.base_scenario(), c)?;
    }
    // The two-parameter curves come first: a continuation that cannot start says so before
    // the grid's long work.
    let curves = codim2_before_grid(&plan, shard.is_some(), options.progress)?;
    // So do the branches and their cycles (a cycle continuation without a Hopf point to
    // start from is refused here).
    let continued = match shard {
        None => continue_branches(&plan, options.progress)?,
        Some(_) => None,
    };
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| crate::output::default_folder(&plan.name));
    let dir = crate::output::resolve_out(&out)?;
    let _locks = store::FolderLocks::acquire(&dir, shard.map(|s| (s.k, s.n)))?;
    members::check_disk(&plan, &dir)?;
    crate::output::check_replaceable(&dir, crate::output::ResultKind::Sweep)?;
    let (manifest, fingerprint) = claim_folder(&plan, &dir, shard, options)?;

    let progress_path = match shard {
        Some(s) => dir.join(format!("shard-{}-of-{}.progress", s.k, s.n)),
        None => dir.join("sweep.progress"),
    };
    let Bookkeeping {
        writer,
        grid: mut known,
        refine: refine_cache,
    } = open_progress(&plan, &progress_path, &fingerprint, options.resume)?;
    if options.resume && shard.is_none() {
        reuse_shard_points(&dir, &manifest, &mut known)?;
    }
    let points = plan.points();
    let mine: Vec<usize> = match shard {
        Some(s) => (s.k - 1..points).step_by(s.n).collect(),
        None => (0..points).collect(),
    };
    let mut todo: Vec<usize> = mine
        .iter()
        .copied()
        .filter(|i| !known.contains_key(i))
        .collect();
    if plan.goes_back() && !todo.is_empty() {
        // A chain continues from the previous point's tokens, which no file keeps: again.
        todo = mine.clone();
    }
    let title = match shard {
        Some(s) => format!("{} {}/{}", plan.name, s.k, s.n),
        None => plan.name.clone(),
    };
    let book = Book::new(writer, &title, "points", todo.len(), options.progress);
    let (computed, writer) = if plan.goes_back() {
        follow_grid(&plan, &todo, book, &progress_path)?
    } else {
        compute_grid(&plan, &todo, book, &progress_path)?
    };
    let n_computed = computed.len();
    for (i, o) in computed {
        known.insert(i, o);
    }
    let rows: Vec<(usize, Outcome)> = mine
        .iter()
        .map(|&i| {
            (
                i,
                known.remove(&i).unwrap_or_else(|| Outcome::failure("lost")),
            )
        })
        .collect();
    let mut summary = grid_summary(&plan, &rows, n_computed, options);
    if let Some(s) = shard {
        return write_shard(&plan, &dir, s, &rows, summary, started);
    }

    // sweep.csv first, so the grid is safe even if refinement is interrupted.
    let axis_names: Vec<String> = plan.axes.iter().map(|a| a.name.clone()).collect();
    let sweep_csv = dir.join("sweep.csv");
    let layout = plan.layout();
    let text = csv_text(
        &store::sweep_columns(&axis_names, layout),
        rows.iter().map(|(i, o)| {
            let mut r = plan.coord_cells(&plan.coords(*i));
            r.extend(o.row_cells(layout));
            r
        }),
    );
    write_atomic(&sweep_csv, text.as_bytes()).map_err(Error::io(&sweep_csv))?;

    let boundaries_path = dir.join("boundaries.csv");
    let mut boundary_points: Vec<Vec<f64>> = Vec::new();
    if plan.refine.is_some() {
        boundary_points = refine_boundaries(
            &plan,
            &rows,
            writer,
            options.progress,
            &refine_cache,
            &boundaries_path,
            &mut summary,
        )?;
    } else if boundaries_path.exists() {
        fs::remove_file(&boundaries_path).map_err(Error::io(&boundaries_path))?;
    }
    let (traced, cycle_branches) = write_branches(&dir, continued, &mut summary)?;
    write_codim2(&plan, &dir, &traced, curves.as_ref(), &mut summary)?;

    let outcomes: Vec<(Vec<f64>, &Outcome)> =
        rows.iter().map(|(i, o)| (plan.coords(*i), o)).collect();
    let traced_curves = curves.as_ref().map_or(&[][..], |r| r.curves.as_slice());
    pictures::draw(
        &plan,
        &outcomes,
        &boundary_points,
        &traced,
        &cycle_branches,
        traced_curves,
        &dir,
    )?;
    transition::write(&plan, &outcomes, &dir)?;

    summary.wall_seconds = started.elapsed().as_secs_f64();
    let json = dir.join("summary.json");
    write_json_atomic(&json, &summary).map_err(Error::io(&json))?;
    Ok(dir)
}

/// Writes the manifest of `plan` into `dir`, after checking that the folder holds no other
/// sweep (or clearing it, for an unsharded run without `--resume`): the manifest and its
/// fingerprint.
fn claim_folder(
    plan: &Plan,
    dir: &Path,
    shard: Option<Shard>,
    options: &SweepOptions,
) -> Result<(Manifest, String), Error> {
    let resume = options.resume;
    let manifest_lock = crate::output::OutputLock::wait(&dir.join(".manifest.lock"))?;
    let manifest = Manifest::new(plan, options.progress);
    let text = manifest.text();
    let fingerprint = Manifest::fingerprint(&text);
    let manifest_path = dir.join(MANIFEST);
    let same = match Manifest::read(dir) {
        Ok(Some((_, old))) => Some(old == text),
        Ok(None) => None,
        Err(e) => {
            return Err(Error::Input(format!(
                "{e}; this folder is not a tokdyn sweep folder: use another --out"
            )))
        }
    };
    match (same, shard) {
        (Some(true), _) => {}
        (Some(false), _) if resume => {
            return Err(Error::Input(format!(
                "{}: cannot resume: it holds a different sweep (the grid, the base scenario or the version changed); run without --resume to start over, or use another --out",
                manifest_path.display()
            )))
        }
        (Some(false), Some(_)) => {
            return Err(Error::Input(format!(
                "{}: holds a different sweep (the grid, the base scenario or the version changed); shards of one sweep must share their folder with nothing else: use another --out, or remove the folder",
                manifest_path.display()
            )))
        }
        // No manifest: nothing to clear (result files are replaced at the end, and a progress
        // file without our fingerprint is ignored).
        (None, _) => {}
        (Some(false), None) => clear_old_sweep(dir)?,
    }
    write_atomic(&manifest_path, text.as_bytes()).map_err(Error::io(&manifest_path))?;
    drop(manifest_lock);
    Ok((manifest, fingerprint))
}

/// Points of shard runs of the same sweep count as finished too (`--resume` unsharded).
fn reuse_shard_points(
    dir: &Path,
    manifest: &Manifest,
    known: &mut HashMap<usize, Outcome>,
) -> Result<(), Error> {
    for (_, _, file) in store::shard_files(dir).map_err(Error::io(dir))? {
        if let Ok(rows) = store::read_shard(&file, manifest) {
            for (i, o) in rows {
                known.entry(i).or_insert(o);
            }
        }
    }
    Ok(())
}

/// The progress file's writer and the progress monitor, shared by the parallel points.
struct Book {
    writer: ProgressWriter,
    monitor: Counter,
}

impl Book {
    fn new(
        writer: ProgressWriter,
        title: &str,
        unit: &'static str,
        total: usize,
        progress: bool,
    ) -> Self {
        Book {
            writer,
            monitor: Counter::new(title, unit, total as u64, progress),
        }
    }
}

/// Computes the points `todo` in parallel; each finished point is appended to the progress
/// file. Returns the finished points (in `todo` order) and the writer.
fn compute_grid(
    plan: &Plan,
    todo: &[usize],
    book: Book,
    progress_path: &Path,
) -> Result<(Vec<(usize, Outcome)>, ProgressWriter), Error> {
    let book = Mutex::new(book);
    // The first failure to record a point stops the others from starting.
    let failure: Mutex<Option<io::Error>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    let computed: Vec<(usize, Outcome)> = todo
        .par_iter()
        .with_max_len(1)
        .filter_map(|&i| {
            if stop.load(Ordering::Relaxed) || crate::interrupt::is_requested() {
                return None;
            }
            let outcome = run_point(plan, &plan.coords(i));
            // A point stopped by an interruption is not a result: not recorded.
            if crate::interrupt::is_requested() {
                return None;
            }
            let mut book = book.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = book.writer.grid(i, &outcome) {
                stop.store(true, Ordering::Relaxed);
                failure
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(e);
                return None;
            }
            book.monitor.inc();
            Some((i, outcome))
        })
        .collect();
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(Error::Io {
            path: progress_path.to_path_buf(),
            source: e,
        });
    }
    let Book {
        writer,
        mut monitor,
    } = book.into_inner().unwrap_or_else(|e| e.into_inner());
    monitor.finish();
    if crate::interrupt::is_requested() {
        return Err(interrupted(computed.len(), todo.len(), progress_path));
    }
    Ok((computed, writer))
}

/// Computes the points `todo` of a sweep that goes back, one after the other (each from the
/// previous point's tokens, [`members::follow`]), appending each to the progress file.
fn follow_grid(
    plan: &Plan,
    todo: &[usize],
    mut book: Book,
    progress_path: &Path,
) -> Result<(Vec<(usize, Outcome)>, ProgressWriter), Error> {
    let mut record = |i: usize, outcome: &Outcome| -> Result<(), Error> {
        book.writer
            .grid(i, outcome)
            .map_err(Error::io(progress_path))?;
        book.monitor.inc();
        Ok(())
    };
    let computed = members::follow(plan, todo, &mut record)?;
    let Book {
        writer,
        mut monitor,
    } = book;
    monitor.finish();
    if crate::interrupt::is_requested() {
        return Err(interrupted(computed.len(), todo.len(), progress_path));
    }
    Ok((computed, writer))
}

/// `summary.json` of the grid (refinement, continuation and timing are added later).
fn grid_summary(
    plan: &Plan,
    rows: &[(usize, Outcome)],
    computed: usize,
    options: &SweepOptions,
) -> Summary {
    let (counts, failed_count, failed) = tally(rows.iter().map(|(i, o)| (*i, o)));
    Summary {
        name: plan.name.clone(),
        description: plan.description.clone(),
        sweep_file: Some(plan.file.display().to_string()),
        scenario_file: Some(plan.scenario_file.display().to_string()),
        model: plan.model.to_string(),
        axes: plan.axes.iter().map(|a| a.name.clone()).collect(),
        points: plan.points(),
        computed,
        reused: rows.len() - computed,
        counts,
        failed_points: failed_count,
        failed,
        shard: None,
        refine: None,
        continuation: None,
        codim2: None,
        merged_from: None,
        wall_seconds: 0.0,
        threads: rayon::current_num_threads(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: options.command_line.clone(),
        sweep: Some(plan.resolved()),
        scenario: Some(plan.base.resolved.clone()),
    }
}

/// Writes `shard-K-of-N.csv` and its `.json` summary.
fn write_shard(
    plan: &Plan,
    dir: &Path,
    s: Shard,
    rows: &[(usize, Outcome)],
    mut summary: Summary,
    started: Instant,
) -> Result<PathBuf, Error> {
    let axis_names: Vec<String> = plan.axes.iter().map(|a| a.name.clone()).collect();
    let path = dir.join(store::shard_file(s.k, s.n));
    let layout = plan.layout();
    let text = csv_text(
        &store::shard_columns(&axis_names, layout),
        rows.iter().map(|(i, o)| {
            let mut r = vec![i.to_string()];
            r.extend(plan.coord_cells(&plan.coords(*i)));
            r.extend(o.record_cells(layout));
            r
        }),
    );
    write_atomic(&path, text.as_bytes()).map_err(Error::io(&path))?;
    summary.shard = Some(format!("{}/{}", s.k, s.n));
    summary.points = rows.len();
    summary.wall_seconds = started.elapsed().as_secs_f64();
    let json = dir.join(format!("shard-{}-of-{}.json", s.k, s.n));
    write_json_atomic(&json, &summary).map_err(Error::io(&json))?;
    Ok(dir.to_path_buf())
}

/// Bisects the boundaries between differently labelled neighbours (`[refine]`), writes
/// `boundaries.csv` and its summary; returns the boundary points for the regime map.
fn refine_boundaries(
    plan: &Plan,
    rows: &[(usize, Outcome)],
    writer: ProgressWriter,
    progress: bool,
    cache: &HashMap<Vec<String>, Outcome>,
    boundaries_path: &Path,
    summary: &mut Summary,
) -> Result<Vec<Vec<f64>>, Error> {
    let outcomes: Vec<Outcome> = rows.iter().map(|(_, o)| o.clone()).collect();
    let segments = refine::segments(plan, &outcomes);
    let runs = AtomicUsize::new(0);
    let reused = AtomicUsize::new(0);
    let title = format!("{} refine", plan.name);
    let book = Mutex::new(Book::new(
        writer,
        &title,
        "boundaries",
        segments.len(),
        progress,
    ));
    let compute = |coords: &[f64]| -> Result<Outcome, Error> {
        let key = plan.coord_cells(coords);
        if let Some(o) = cache.get(&key) {
            reused.fetch_add(1, Ordering::Relaxed);
            return Ok(o.clone());
        }
        let outcome = run_point(plan, coords);
        if crate::interrupt::is_requested() {
            return Err(Error::Interrupted(
                "during boundary refinement; the progress file keeps the finished points: --resume continues".into(),
            ));
        }
        runs.fetch_add(1, Ordering::Relaxed);
        let mut book = book.lock().unwrap_or_else(|e| e.into_inner());
        book.writer
            .refine(&key, &outcome)
            .map_err(Error::io(book.writer.path()))?;
        Ok(outcome)
    };
    let done = || book.lock().unwrap_or_else(|e| e.into_inner()).monitor.inc();
    let boundaries = refine::refine_all(plan, &segments, &compute, &done)?;
    let boundary_points = boundaries
        .iter()
        .map(|b| {
            let mut c = b.coords.clone();
            c[b.axis] = b.position();
            c
        })
        .collect();
    book.lock()
        .unwrap_or_else(|e| e.into_inner())
        .monitor
        .finish();
    let text = csv_text(
        &refine::columns(plan),
        boundaries.iter().map(|b| refine::row(plan, b)),
    );
    write_atomic(boundaries_path, text.as_bytes()).map_err(Error::io(boundaries_path))?;
    let tolerance = plan.refine.as_ref().map(|r| {
        plan.axes
            .iter()
            .zip(&r.tolerance)
            .filter_map(|(a, t)| t.map(|t| (a.name.clone(), serde_json::json!(t))))
            .collect::<serde_json::Map<_, _>>()
    });
    let unresolved = boundaries
        .iter()
        .filter(|b| {
            let tol = plan.refine.as_ref().and_then(|r| r.tolerance[b.axis]);
            let integer_done = plan.axes[b.axis].integer && b.bracket() <= 1.0;
            !integer_done && tol.is_some_and(|t| b.bracket() > t)
        })
        .count();
    summary.refine = Some(serde_json::json!({
        "tolerance": tolerance,
        "segments": segments.len(),
        "boundaries": boundaries.len(),
        "unresolved": unresolved,
        "runs": runs.load(Ordering::Relaxed),
        "reused_runs": reused.load(Ordering::Relaxed),
    }));
    Ok(boundary_points)
}

/// The continued fixed points and, with `cycles = true`, their cycles.
struct Continued {
    branches: continuation::Report,
    cycles: Option<cycles::Report>,
}

/// Continues the OA fixed points (`[continuation]`) and their cycles; a cycle continuation
/// with no Hopf point to start from is an input error (exit 2).
fn continue_branches(plan: &Plan, progress: bool) -> Result<Option<Continued>, Error> {
    let Some(c) = &plan.continuation else {
        return Ok(None);
    };
    let base = plan.base_scenario();
    let branches = continuation::run(&base, c, progress)?;
    if !c.cycles {
        return Ok(Some(Continued {
            branches,
            cycles: None,
        }));
    }
    let fam = continuation::Family::new(&base, &c.key);
    let input = continuation::section_error(&base, "continuation.cycles");
    let predicted = cycles::predicted_orbits(&base, &fam, c).map_err(input)?;
    if !cycles::has_start(&branches.branches, &predicted) {
        return Err(Error::Input(format!(
            "{}: continuation.cycles: no Hopf point on the fixed-point branches of {} in [{}, {}] and no periodic orbit of predict at the base value: no periodic orbit to start from",
            plan.file.display(),
            c.parameter,
            c.from.min(c.to),
            c.from.max(c.to)
        )));
    }
    let report = cycles::run(
        &fam,
        c,
        &branches.branches,
        &predicted,
        progress,
        &plan.name,
    )
    .map_err(input)?;
    Ok(Some(Continued {
        branches,
        cycles: Some(report),
    }))
}

/// Writes `branches.csv` and `cycles.csv` (or removes stale ones); the branches and cycles
/// for the pictures.
#[allow(clippy::type_complexity)]
fn write_branches(
    dir: &Path,
    continued: Option<Continued>,
    summary: &mut Summary,
) -> Result<
    (
        Vec<Vec<continuation::BranchPoint>>,
        Vec<cycles::CycleBranch>,
    ),
    Error,
> {
    let branches_path = dir.join("branches.csv");
    let cycles_path = dir.join("cycles.csv");
    let remove = |path: &Path| -> Result<(), Error> {
        if path.exists() {
            fs::remove_file(path).map_err(Error::io(path))?;
        }
        Ok(())
    };
    let Some(continued) = continued else {
        remove(&branches_path)?;
        remove(&cycles_path)?;
        return Ok((Vec::new(), Vec::new()));
    };
    let report = continued.branches;
    write_atomic(&branches_path, report.csv.as_bytes()).map_err(Error::io(&branches_path))?;
    let mut json = report.summary;
    let mut cycle_branches = Vec::new();
    match continued.cycles {
        Some(c) => {
            write_atomic(&cycles_path, c.csv.as_bytes()).map_err(Error::io(&cycles_path))?;
            json["cycles"] = c.summary;
            cycle_branches = c.branches;
        }
        None => remove(&cycles_path)?,
    }
    summary.continuation = Some(json);
    Ok((report.branches, cycle_branches))
}

/// `[codim2]`'s curves (not for a shard, which writes no curves); a curve that cannot start
/// is reported on stderr at once and in summary.json at the end.
fn codim2_before_grid(
    plan: &Plan,
    shard: bool,
    progress: bool,
) -> Result<Option<codim2::Report>, Error> {
    let Some(c) = plan.codim2.as_ref().filter(|_| !shard) else {
        return Ok(None);
    };
    let base = plan.base_scenario();
    codim2::check(&base, c)?;
    let report = codim2::run(&base, c, progress)?;
    if let Some(m) = report.summary["message"].as_str() {
        eprintln!("warning: {}: codim2: {m}", plan.file.display());
    }
    Ok(Some(report))
}

/// Writes `curves.csv` and `special_points.json` (or removes stale ones).
fn write_codim2(
    plan: &Plan,
    dir: &Path,
    branches: &[Vec<continuation::BranchPoint>],
    curves: Option<&codim2::Report>,
    summary: &mut Summary,
) -> Result<(), Error> {
    let curves_path = dir.join("curves.csv");
    let special_path = dir.join("special_points.json");
    match curves {
        Some(report) => {
            write_atomic(&curves_path, report.csv.as_bytes()).map_err(Error::io(&curves_path))?;
            summary.codim2 = Some(report.summary.clone());
        }
        None if curves_path.exists() => {
            fs::remove_file(&curves_path).map_err(Error::io(&curves_path))?
        }
        None => {}
    }
    let one = plan
        .continuation
        .as_ref()
        .map(|c| (c.parameter.as_str(), branches));
    let two = plan
        .codim2
        .as_ref()
        .zip(curves)
        .map(|(c, r)| (c, r.specials.as_slice()));
    if one.is_none() && two.is_none() {
        if special_path.exists() {
            fs::remove_file(&special_path).map_err(Error::io(&special_path))?;
        }
        return Ok(());
    }
    let records = codim2::special_records(one, two);
    write_json_atomic(&special_path, &records).map_err(Error::io(&special_path))
}

/// Compact listing of indices: `3, 7, 10-12` (at most `limit` items, then `...`).
fn ranges(indices: &[usize], limit: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let mut j = i;
        while j + 1 < indices.len() && indices[j + 1] == indices[j] + 1 {
            j += 1;
        }
        parts.push(if j > i {
            format!("{}-{}", indices[i], indices[j])
        } else {
            indices[i].to_string()
        });
        i = j + 1;
    }
    if parts.len() > limit {
        parts.truncate(limit);
        parts.push("...".into());
    }
    parts.join(", ")
}

/// Assembles shard files in `dir` into `sweep.csv`; returns its path.
pub fn merge(dir: &Path) -> Result<PathBuf, Error> {
    let started = Instant::now();
    let _locks = match dir.is_dir() {
        true => Some(store::FolderLocks::acquire(dir, None)?),
        false => None,
    };
    let (manifest, _) = Manifest::read(dir).map_err(Error::Input)?.ok_or_else(|| {
        Error::Input(format!(
            "{}: {MANIFEST}: missing (not a sweep folder: `tokdyn sweep --shard K/N` writes it)",
            dir.display()
        ))
    })?;
    let files = store::shard_files(dir).map_err(Error::io(dir))?;
    if files.is_empty() {
        return Err(Error::Input(format!(
            "{}: shard-K-of-N.csv: no shard files in the folder",
            dir.display()
        )));
    }
    let shards = read_shards(&manifest, &files)?;
    let missing: Vec<usize> = (0..manifest.points)
        .filter(|&i| shards.slots[i].is_none())
        .collect();
    if !missing.is_empty() {
        return Err(missing_points(dir, &manifest, &files, &missing));
    }
    let rows: Vec<(usize, Outcome)> = shards
        .slots
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            (
                i,
                s.map(|(o, _)| o)
                    .unwrap_or_else(|| Outcome::failure("lost")),
            )
        })
        .collect();
    let path = dir.join("sweep.csv");
    let layout = manifest.layout();
    let text = csv_text(
        &manifest.columns,
        rows.iter().map(|(i, o)| {
            let mut r = manifest.coord_cells(*i);
            r.extend(o.row_cells(layout));
            r
        }),
    );
    write_atomic(&path, text.as_bytes()).map_err(Error::io(&path))?;
    let (counts, failed_points, failed) = tally(rows.iter().map(|(i, o)| (*i, o)));
    let summary = Summary {
        name: manifest.name.clone(),
        description: None,
        sweep_file: None,
        scenario_file: None,
        model: manifest.model.clone(),
        axes: manifest.axes.iter().map(|a| a.axis.name.clone()).collect(),
        points: manifest.points,
        computed: 0,
        reused: manifest.points,
        counts,
        failed_points,
        failed,
        shard: None,
        refine: None,
        continuation: None,
        codim2: None,
        merged_from: Some(shards.names),
        wall_seconds: shards.wall_seconds + started.elapsed().as_secs_f64(),
        threads: rayon::current_num_threads(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: std::env::args().collect(),
        sweep: None,
        scenario: None,
    };
    let json = dir.join("summary.json");
    write_json_atomic(&json, &summary).map_err(Error::io(&json))?;
    Ok(path)
}

/// The points of a sweep's shard files, each with the file it came from.
struct Shards {
    /// Point i's outcome and the index of its file, when some file holds it.
    slots: Vec<Option<(Outcome, usize)>>,
    /// The shard files' names.
    names: Vec<String>,
    /// The shards' wall times added up.
    wall_seconds: f64,
}

/// What `merge` reads from a shard's `.json` summary.
#[derive(serde::Deserialize)]
struct ShardSummary {
    #[serde(default)]
    wall_seconds: f64,
}

/// Reads every shard file; a point in two files is an error.
fn read_shards(manifest: &Manifest, files: &[(usize, usize, PathBuf)]) -> Result<Shards, Error> {
    let mut shards = Shards {
        slots: vec![None; manifest.points],
        names: Vec::new(),
        wall_seconds: 0.0,
    };
    for (f, (_, _, path)) in files.iter().enumerate() {
        let rows = store::read_shard(path, manifest).map_err(Error::Input)?;
        for (i, o) in rows {
            if let Some((_, other)) = &shards.slots[i] {
                return Err(Error::Input(format!(
                    "{}: index: point {i} is also in {} (shard files of different splits? remove the stale ones)",
                    path.display(),
                    files[*other].2.display()
                )));
            }
            shards.slots[i] = Some((o, f));
        }
        shards.names.push(
            path.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
        );
        let json = path.with_extension("json");
        if let Ok(text) = fs::read_to_string(&json) {
            if let Ok(summary) = serde_json::from_str::<ShardSummary>(&text) {
                shards.wall_seconds += summary.wall_seconds;
            }
        }
    }
    Ok(shards)
}

/// The error for points no shard file holds, naming the absent shard files when all present
/// files are of one split.
fn missing_points(
    dir: &Path,
    manifest: &Manifest,
    files: &[(usize, usize, PathBuf)],
    missing: &[usize],
) -> Error {
    let ns: Vec<usize> = files.iter().map(|(_, n, _)| *n).collect();
    let hint = if ns.iter().all(|&n| n == ns[0]) {
        let n = ns[0];
        let absent: Vec<String> = (1..=n)
            .filter(|k| !files.iter().any(|(fk, _, _)| fk == k))
            .map(|k| store::shard_file(k, n))
            .collect();
        if absent.is_empty() {
            String::new()
        } else {
            format!(" (missing: {})", absent.join(", "))
        }
    } else {
        String::new()
    };
    Error::Input(format!(
        "{}: shard files: {} of {} points are missing: {}{hint}",
        dir.display(),
        missing.len(),
        manifest.points,
        ranges(missing, 20)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_specs() {
        assert_eq!(parse_shard("2/8"), Some(Shard { k: 2, n: 8 }));
        assert_eq!(parse_shard("1/1"), Some(Shard { k: 1, n: 1 }));
        for bad in ["3/2", "0/2", "2", "a/b", "1/0", "-1/2", ""] {
            assert_eq!(parse_shard(bad), None, "{bad}");
        }
        let e = resolve_shard(Path::new("s.toml"), Some("3/2"), &|_| None).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("s.toml: --shard: `3/2`"), "{e}");
    }

    #[test]
    fn slurm_arrays_give_shards() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let f = Path::new("s.toml");
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_MIN", "3"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert_eq!(
            resolve_shard(f, None, &e).unwrap(),
            Some(Shard { k: 3, n: 4 })
        );
        // --shard wins.
        assert_eq!(
            resolve_shard(f, Some("1/2"), &e).unwrap(),
            Some(Shard { k: 1, n: 2 })
        );
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "10"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_COUNT", "6"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
        ]);
        assert_eq!(
            resolve_shard(f, None, &e).unwrap(),
            Some(Shard { k: 6, n: 6 })
        );
        let e = env(&[("SLURM_ARRAY_TASK_ID", "1")]);
        let err = resolve_shard(f, None, &e).unwrap_err().to_string();
        assert!(err.contains("SLURM_ARRAY_TASK_MIN: not set"), "{err}");
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "9"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert!(resolve_shard(f, None, &e).is_err());
        assert_eq!(resolve_shard(f, None, &|_| None).unwrap(), None);
    }

    #[test]
    fn index_ranges() {
        assert_eq!(ranges(&[1, 2, 3, 7, 9, 10], 10), "1-3, 7, 9-10");
        assert_eq!(ranges(&[1, 3, 5], 2), "1, 3, ...");
    }
}
