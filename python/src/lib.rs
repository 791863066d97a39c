//! `tokdyn._native`: the Rust side of the Python module `tokdyn`.
//!
//! The Python package (`tokdyn/__init__.py`) gives the public API; this module does the work on
//! the tokdyn library. A scenario is a path or a dict with the TOML file's structure; a dict
//! becomes a TOML table and goes through the library's loader, so validation and messages are
//! the command line's. Runs happen in a Rust thread with the GIL released, while the calling
//! thread checks for Ctrl-C every 50 ms and asks the library to stop when it comes. The field
//! is the library's (docs/MATH.md, the full particle system)
//!
//! ```text
//! x_k' = P_k ( sum_heads (1/n) sum_j h(beta <x_k, A x_j>) V x_j ),   P_k y = y - <x_k, y> x_k,
//! ```
//!
//! evaluated once at the given tokens; the order parameters are
//! R2 = (1/n) sum e^{2 i t_k}, R1 = |(1/n) sum x_k| and s = (d lambda_max(S) - 1) / (d - 1).

mod convert;
mod detached;
mod inspect;
mod portrait;
mod record;

use std::path::{Path, PathBuf};

use numpy::{AllowTypeChange, PyArray1, PyArray2, PyArrayLike2, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyComplex, PyDict};

use nalgebra::DMatrix;
use tokdyn::error::Error;
use tokdyn::model::{
    Attention, FactoredHead, Head, Kernel, Mask, Normalization, Position, SphereField,
};
use tokdyn::output::RunOptions;
use tokdyn::scenario::{apply_set, Scenario, ScenarioError};

use convert::{matrix_rows, py_to_toml, sets_to_strings};
use detached::{detached, to_py_err};
use record::{Recorder, Recording};

/// The file name that messages give to a scenario passed as a dict.
const DICT_FILE: &str = "<dict>";

/// Loads a scenario from a path (`str`) or a dict, with `set` overrides applied in order.
fn load_scenario(
    scenario: &Bound<'_, PyAny>,
    sets: Option<&Bound<'_, PyDict>>,
    model: Option<&str>,
) -> PyResult<Scenario> {
    let mut sets = sets_to_strings(sets)?;
    if let Some(m) = model {
        sets.push(format!("run.model={m}"));
    }
    if let Ok(path) = scenario.extract::<PathBuf>() {
        return Scenario::load(&path, &sets).map_err(|e| to_py_err(e.into()));
    }
    let Ok(dict) = scenario.cast::<PyDict>() else {
        return Err(PyValueError::new_err(format!(
            "scenario: expected a path or a dict, got {}",
            scenario.get_type().name()?
        )));
    };
    let file = Path::new(DICT_FILE);
    let toml::Value::Table(mut table) = py_to_toml(dict.as_any(), "")? else {
        return Err(PyValueError::new_err("scenario: expected a dict"));
    };
    for set in &sets {
        apply_set(&mut table, set).map_err(|message| {
            to_py_err(ScenarioError::at(file, format!("--set {}", set.trim()), message).into())
        })?;
    }
    Scenario::from_table(table, file, Path::new("")).map_err(|e| to_py_err(e.into()))
}

/// Options of a command: the output folder and provenance.
fn options(out: Option<PathBuf>, what: &str) -> RunOptions {
    RunOptions {
        out,
        progress: false,
        command_line: vec![format!("python: tokdyn.{what}")],
    }
}

/// `run`: a dict with `summary` (JSON text), `t`, `r2`, `r1`, `nematic`, `tokens` and
/// `trajectory` (or None).
#[pyfunction]
#[pyo3(signature = (scenario, sets=None, model=None, out=None, trajectory=false))]
fn run<'py>(
    py: Python<'py>,
    scenario: &Bound<'py, PyAny>,
    sets: Option<&Bound<'py, PyDict>>,
    model: Option<&str>,
    out: Option<PathBuf>,
    trajectory: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let scenario = load_scenario(scenario, sets, model)?;
    if scenario.run.model == tokdyn::scenario::ModelKind::MeanField {
        return run_density(py, scenario, out);
    }
    let recorder = Recorder::new(&scenario, trajectory).map_err(to_py_err)?;
    let (summary, rec) = detached(py, move || {
        let mut recorder = recorder;
        let opts = options(out.clone(), "run");
        let summary = match out {
            Some(_) => {
                tokdyn::command::run::run_observed(&scenario, &opts, &mut [&mut recorder])?.summary
            }
            None => tokdyn::outcome::run_in_memory(&scenario, &opts, &mut [&mut recorder])?,
        };
        let text = serde_json::to_string(&summary).map_err(|e| Error::Input(e.to_string()))?;
        Ok(((text, summary.cluster_rows), recorder.finish()))
    })?;
    let (summary, cluster_rows) = summary;
    let dict = run_dict(py, summary, rec)?;
    dict.set_item("clusters_series", cluster_columns(py, &cluster_rows)?)?;
    Ok(dict)
}

/// `run` of the mean field: the dict of `run` with `density` (samples x grid) and
/// `density_grid` (the grid angles); no tokens, no clusters.
fn run_density<'py>(
    py: Python<'py>,
    scenario: tokdyn::scenario::Scenario,
    out: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let recorder = Recorder::new(&scenario, false).map_err(to_py_err)?;
    let ((summary, grid, values), rec) = detached(py, move || {
        let mut recorder = recorder;
        let opts = options(out.clone(), "run");
        let (summary, grid, values) = match out {
            Some(_) => {
                let (report, d) =
                    tokdyn::command::run::run_mean_field(&scenario, &opts, &mut [&mut recorder])?;
                (report.summary, d.grid, d.values)
            }
            None => {
                let o = tokdyn::outcome::mean_field::solve_mean_field(
                    &scenario,
                    &opts,
                    &mut [&mut recorder],
                )?;
                (o.summary, o.run.grid_points(), o.run.densities())
            }
        };
        let text = serde_json::to_string(&summary).map_err(|e| Error::Input(e.to_string()))?;
        Ok(((text, grid, values), recorder.finish()))
    })?;
    let dict = run_dict(py, summary, rec)?;
    let n = grid.len().max(1);
    let samples = values.len() / n;
    dict.set_item(
        "density",
        PyArray1::from_vec(py, values).reshape([samples, n])?,
    )?;
    dict.set_item("density_grid", PyArray1::from_vec(py, grid))?;
    dict.set_item("clusters_series", py.None())?;
    Ok(dict)
}

/// The columns of clusters.csv as numpy arrays (empty cells NaN); None without rows.
fn cluster_columns<'py>(
    py: Python<'py>,
    rows: &[tokdyn::observe::cluster_series::ClusterRow],
) -> PyResult<Bound<'py, PyAny>> {
    if rows.is_empty() {
        return Ok(py.None().into_bound(py));
    }
    let column = |f: &dyn Fn(&tokdyn::observe::cluster_series::ClusterRow) -> Option<f64>| {
        rows.iter()
            .map(|r| f(r).unwrap_or(f64::NAN))
            .collect::<Vec<f64>>()
    };
    let dict = PyDict::new(py);
    dict.set_item("t", PyArray1::from_vec(py, column(&|r| Some(r.t))))?;
    let counts: Vec<i64> = rows.iter().map(|r| r.count as i64).collect();
    dict.set_item("count", PyArray1::from_vec(py, counts))?;
    dict.set_item("largest", PyArray1::from_vec(py, column(&|r| r.largest)))?;
    dict.set_item("diameter", PyArray1::from_vec(py, column(&|r| r.diameter)))?;
    dict.set_item(
        "separation",
        PyArray1::from_vec(py, column(&|r| r.separation)),
    )?;
    dict.set_item("energy", PyArray1::from_vec(py, column(&|r| r.energy)))?;
    Ok(dict.into_any())
}

/// The dict handed back by `run`.
fn run_dict<'py>(py: Python<'py>, summary: String, rec: Recording) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("summary", summary)?;
    dict.set_item("t", PyArray1::from_vec(py, rec.t))?;
    dict.set_item("r2", PyArray1::from_vec(py, rec.r2))?;
    dict.set_item("r1", PyArray1::from_vec(py, rec.r1))?;
    dict.set_item("nematic", PyArray1::from_vec(py, rec.nematic))?;
    let (n, d) = (rec.n, rec.d);
    match rec.tokens {
        Some(tokens) => dict.set_item("tokens", PyArray1::from_vec(py, tokens).reshape([n, d])?)?,
        None => dict.set_item("tokens", py.None())?,
    }
    match rec.trajectory {
        Some(tr) => {
            let samples = tr.len() / (n * d).max(1);
            dict.set_item(
                "trajectory",
                PyArray1::from_vec(py, tr).reshape([samples, n, d])?,
            )?
        }
        None => dict.set_item("trajectory", py.None())?,
    }
    Ok(dict)
}

/// Runs a command that writes a folder, into `out` or a temporary folder, and returns the
/// text of the named files of that folder.
fn into_folder(
    py: Python<'_>,
    out: Option<PathBuf>,
    files: &'static [&'static str],
    command: impl FnOnce(&Path) -> Result<PathBuf, Error> + Send + 'static,
) -> PyResult<Vec<String>> {
    detached(py, move || {
        let temp;
        let target = match out {
            Some(dir) => dir,
            None => {
                temp = tempfile::tempdir().map_err(Error::io(std::env::temp_dir()))?;
                temp.path().join("result")
            }
        };
        let dir = command(&target)?;
        // A name starting with `?` is optional: an empty text when the file is absent.
        files
            .iter()
            .map(|f| {
                let (optional, name) = match f.strip_prefix('?') {
                    Some(name) => (true, name),
                    None => (false, *f),
                };
                let path = dir.join(name);
                match std::fs::read_to_string(&path) {
                    Err(e) if optional && e.kind() == std::io::ErrorKind::NotFound => {
                        Ok(String::new())
                    }
                    text => text.map_err(Error::io(&path)),
                }
            })
            .collect()
    })
}

/// `compare`: (summary.json text, compare.csv text).
#[pyfunction]
#[pyo3(signature = (scenario, sets=None, out=None))]
fn compare(
    py: Python<'_>,
    scenario: &Bound<'_, PyAny>,
    sets: Option<&Bound<'_, PyDict>>,
    out: Option<PathBuf>,
) -> PyResult<(String, String)> {
    let scenario = load_scenario(scenario, sets, None)?;
    let mut texts = into_folder(py, out, &["summary.json", "compare.csv"], move |dir| {
        Ok(
            tokdyn::command::compare::compare(&scenario, &options(Some(dir.into()), "compare"))?
                .dir,
        )
    })?;
    let csv = texts.pop().unwrap_or_default();
    Ok((texts.pop().unwrap_or_default(), csv))
}

/// `ensemble`: the texts of summary.json, ensemble.csv and ensemble_order.csv of the
/// scenario's `[ensemble]` (`ensemble.runs` set by the caller), run as `tokdyn run` does.
#[pyfunction]
#[pyo3(signature = (scenario, sets=None, model=None, out=None))]
fn ensemble(
    py: Python<'_>,
    scenario: &Bound<'_, PyAny>,
    sets: Option<&Bound<'_, PyDict>>,
    model: Option<&str>,
    out: Option<PathBuf>,
) -> PyResult<Vec<String>> {
    let scenario = load_scenario(scenario, sets, model)?;
    let files = &["summary.json", "ensemble.csv", "ensemble_order.csv"];
    into_folder(py, out, files, move |dir| {
        let opts = options(Some(dir.into()), "run");
        Ok(tokdyn::command::ensemble::run(&scenario, &opts)?.dir)
    })
}

/// `sweep`: the texts of summary.json, sweep.csv, branches.csv, curves.csv,
/// special_points.json and cycles.csv (empty when the sweep has none: a continuation of
/// stationary densities has no grid, so no sweep.csv).
#[pyfunction]
#[pyo3(signature = (sweep, sets=None, out=None))]
fn sweep(
    py: Python<'_>,
    sweep: PathBuf,
    sets: Option<&Bound<'_, PyDict>>,
    out: Option<PathBuf>,
) -> PyResult<Vec<String>> {
    let sets = sets_to_strings(sets)?;
    let files = &[
        "summary.json",
        "?sweep.csv",
        "?branches.csv",
        "?curves.csv",
        "?special_points.json",
        "?cycles.csv",
    ];
    into_folder(py, out, files, move |dir| {
        let opts = tokdyn::sweep::SweepOptions {
            out: Some(dir.into()),
            command_line: vec!["python: tokdyn.sweep".into()],
            sets,
            ..Default::default()
        };
        tokdyn::sweep::sweep(&sweep, &opts)
    })
}

/// `predict`: the JSON text of predict.json (without a simulated label).
#[pyfunction]
#[pyo3(signature = (scenario, sets=None))]
fn predict(
    py: Python<'_>,
    scenario: &Bound<'_, PyAny>,
    sets: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let scenario = load_scenario(scenario, sets, None)?;
    detached(py, move || {
        let report = tokdyn::predict::report::report(&scenario, None)?;
        serde_json::to_string(&report).map_err(|e| Error::Input(e.to_string()))
    })
}

/// Tokens n x d (float32 or float64, any order) as a row-major vector, checked.
fn tokens_of(
    x: &PyArrayLike2<'_, f64, AllowTypeChange>,
    what: &str,
) -> PyResult<(Vec<f64>, usize, usize)> {
    let view = x.as_array();
    let (n, d) = view.dim();
    if n == 0 || d < 2 {
        return Err(PyValueError::new_err(format!(
            "{what}: expected n x d tokens with n >= 1 and d >= 2, got shape ({n}, {d})"
        )));
    }
    let data: Vec<f64> = view.iter().copied().collect();
    if let Some(i) = data.iter().position(|v| !v.is_finite()) {
        return Err(PyValueError::new_err(format!(
            "{what}[{}][{}]: not a finite number",
            i / d,
            i % d
        )));
    }
    Ok((data, n, d))
}

/// `field`: x' at the tokens X for the heads (A[h], V[h]) and the factored heads
/// (Q, K, V, O), under `mask` ("none" | "causal") and `normalization` ("post" | "pre" |
/// "peri" | "ngpt", with `ngpt_alpha`), with RoPE (`rope_base`) or ALiBi (`alibi_slopes`, one
/// per head: the heads given by A first) positions.
#[pyfunction]
#[pyo3(signature = (x, a, v, factors, kernel="lsa", beta=1.0, mask="none", normalization="post", ngpt_alpha=1.0, rope_base=None, alibi_slopes=None))]
#[allow(clippy::too_many_arguments)]
fn field<'py>(
    py: Python<'py>,
    x: PyArrayLike2<'py, f64, AllowTypeChange>,
    a: Vec<PyArrayLike2<'py, f64, AllowTypeChange>>,
    v: Vec<PyArrayLike2<'py, f64, AllowTypeChange>>,
    factors: Vec<Vec<PyArrayLike2<'py, f64, AllowTypeChange>>>,
    kernel: &str,
    beta: f64,
    mask: &str,
    normalization: &str,
    ngpt_alpha: f64,
    rope_base: Option<f64>,
    alibi_slopes: Option<Vec<f64>>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (tokens, n, d) = tokens_of(&x, "X")?;
    let kernel = match kernel {
        "lsa" => Kernel::Lsa,
        "usa" => Kernel::Usa,
        "sa" => Kernel::Sa,
        other => {
            return Err(PyValueError::new_err(format!(
                "kernel: `{}` is not one of lsa, usa, sa",
                other.escape_debug()
            )))
        }
    };
    if !beta.is_finite() {
        return Err(PyValueError::new_err("beta: not a finite number"));
    }
    if (a.is_empty() && factors.is_empty()) || a.len() != v.len() {
        return Err(PyValueError::new_err(format!(
            "A, V: expected one A and one V per head (at least one head), got {} A and {} V",
            a.len(),
            v.len()
        )));
    }
    let mask = match mask {
        "none" => Mask::None,
        "causal" => Mask::Causal,
        other => {
            return Err(PyValueError::new_err(format!(
                "mask: `{}` is not one of none, causal",
                other.escape_debug()
            )))
        }
    };
    let normalization = match normalization {
        "post" => Normalization::Post,
        "pre" => Normalization::Pre,
        "peri" => Normalization::Peri,
        "ngpt" => Normalization::Ngpt,
        other => {
            return Err(PyValueError::new_err(format!(
                "normalization: `{}` is not one of post, pre, peri, ngpt",
                other.escape_debug()
            )))
        }
    };
    let factored = factors
        .iter()
        .enumerate()
        .map(|(h, f)| factored_head(f, d, h))
        .collect::<PyResult<Vec<_>>>()?;
    let mut heads = Vec::with_capacity(a.len());
    for (h, (a, v)) in a.iter().zip(&v).enumerate() {
        heads.push(Head {
            a: matrix_rows(&a.as_array(), d, &format!("A[{h}]"))?,
            v: matrix_rows(&v.as_array(), d, &format!("V[{h}]"))?,
        });
    }
    if !(ngpt_alpha.is_finite() && ngpt_alpha > 0.0) {
        return Err(PyValueError::new_err(format!(
            "ngpt_alpha: must be a finite number > 0, got {ngpt_alpha}"
        )));
    }
    let position = position_of(rope_base, alibi_slopes, &heads, &factored, d)?;
    let dx = py.detach(move || {
        let attention = Attention::new(kernel, beta, heads)
            .with_factored(factored)
            .with_mask(mask)
            .with_normalization(normalization)
            .with_ngpt_alpha(ngpt_alpha)
            .with_position(position);
        let field = SphereField::new(attention, n);
        let mut dx = vec![0.0; n * d];
        field.eval(&tokens, &mut dx);
        dx
    });
    PyArray1::from_vec(py, dx).reshape([n, d])
}

/// RoPE (`rope_base` > 1, every head's d_h even; a head given by A has d_h = d) or ALiBi (one
/// finite slope >= 0 per head), or none.
fn position_of(
    rope_base: Option<f64>,
    alibi_slopes: Option<Vec<f64>>,
    heads: &[Head],
    factored: &[FactoredHead],
    d: usize,
) -> PyResult<Position> {
    let widths: Vec<usize> = heads
        .iter()
        .map(|_| d)
        .chain(factored.iter().map(FactoredHead::d_h))
        .collect();
    match (rope_base, alibi_slopes) {
        (Some(_), Some(_)) => Err(PyValueError::new_err(
            "position: give either rope or alibi, not both",
        )),
        (None, None) => Ok(Position::None),
        (Some(base), None) => {
            if !(base.is_finite() && base > 1.0) {
                return Err(PyValueError::new_err(format!(
                    "position.rope.base: must be a finite number > 1, got {base}"
                )));
            }
            if let Some(odd) = widths.iter().find(|w| *w % 2 == 1) {
                return Err(PyValueError::new_err(format!(
                    "position.rope: RoPE needs an even head width d_h, a head has d_h = {odd}"
                )));
            }
            Ok(Position::Rope { base })
        }
        (None, Some(slopes)) => {
            if slopes.len() != widths.len() {
                return Err(PyValueError::new_err(format!(
                    "position.alibi.slopes: {} slopes for {} heads (one per head)",
                    slopes.len(),
                    widths.len()
                )));
            }
            if slopes.iter().any(|m| !(m.is_finite() && *m >= 0.0)) {
                return Err(PyValueError::new_err(
                    "position.alibi.slopes: each slope must be a finite number >= 0",
                ));
            }
            Ok(Position::Alibi { slopes })
        }
    }
}

/// One factored head from [Q, K, V, O]: Q, K, V d x d_h and O d_h x d, d_h dividing d.
fn factored_head(
    f: &[PyArrayLike2<'_, f64, AllowTypeChange>],
    d: usize,
    h: usize,
) -> PyResult<FactoredHead> {
    if f.len() != 4 {
        return Err(PyValueError::new_err(format!(
            "heads[{h}]: expected the four factors Q, K, V, O, got {}",
            f.len()
        )));
    }
    let d_h = f[0].as_array().dim().1;
    if d_h == 0 || !d.is_multiple_of(d_h) {
        return Err(PyValueError::new_err(format!(
            "heads[{h}].Q: d_h = {d_h} (its columns) does not divide d = {d}"
        )));
    }
    let shaped = |i: usize, name: &str, rows: usize, cols: usize| {
        let view = f[i].as_array();
        let what = format!("heads[{h}].{name}");
        if view.dim() != (rows, cols) {
            return Err(PyValueError::new_err(format!(
                "{what}: expected a {rows} x {cols} matrix, got shape {:?}",
                view.dim()
            )));
        }
        if view.iter().any(|v| !v.is_finite()) {
            return Err(PyValueError::new_err(format!("{what}: not finite")));
        }
        Ok(DMatrix::from_fn(rows, cols, |r, c| view[[r, c]]))
    };
    Ok(FactoredHead {
        q: shaped(0, "Q", d, d_h)?,
        k: shaped(1, "K", d, d_h)?,
        v: shaped(2, "V", d, d_h)?,
        o: shaped(3, "O", d_h, d)?,
    })
}

/// `order_parameters`: a dict with `r2` (complex), `r1`, `nematic` and `axis` (d > 2).
#[pyfunction]
fn order_parameters<'py>(
    py: Python<'py>,
    x: PyArrayLike2<'py, f64, AllowTypeChange>,
) -> PyResult<Bound<'py, PyDict>> {
    let (tokens, _, d) = tokens_of(&x, "X")?;
    let order = py.detach(move || tokdyn::observe::order_parameters(&tokens, d));
    let dict = PyDict::new(py);
    dict.set_item("r2", PyComplex::from_doubles(py, order.r2.re, order.r2.im))?;
    dict.set_item("r1", order.r1)?;
    dict.set_item("nematic", order.nematic)?;
    match order.axis {
        Some(axis) => dict.set_item("axis", PyArray1::from_vec(py, axis))?,
        None => dict.set_item("axis", py.None())?,
    }
    Ok(dict)
}

/// The version of the tokdyn library inside.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(ensemble, m)?)?;
    m.add_function(wrap_pyfunction!(sweep, m)?)?;
    m.add_function(wrap_pyfunction!(predict, m)?)?;
    m.add_function(wrap_pyfunction!(field, m)?)?;
    m.add_function(wrap_pyfunction!(order_parameters, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(portrait::portrait, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
