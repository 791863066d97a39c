//! The sweep file: parsing, validation and the grid.
//!
//! ```toml
//! name = "case4-map"
//! description = "..."                    # optional (our extension)
//! scenario = "case4-oscillation.toml"    # relative to this file
//! model = "oa"                           # optional: overrides run.model
//! [axes]                                 # file order; the first is the slowest
//! v11 = { from = 0.0, to = 1.0, steps = 41 }
//! "model.beta" = { from = 0.5, to = 2.0, steps = 4 }
//! # "noise.temperature" = { from = 0.2, to = 0.8, steps = 7, back = true }  # there and back,
//! #                                      each point from the previous one's tokens (`members`)
//! [refine]                               # optional (our extension): boundary refinement
//! tolerance = 1e-3                       # absolute, in axis units, for every refined axis
//! # relative_tolerance = 1e-3            # or: a fraction of each axis' range (the default)
//! # axes = ["v11"]                       # which axes to refine along (default: all with steps >= 2)
//! [continuation]                         # optional (our extension): OA fixed-point branches
//! parameter = "v11"                      # a [params] name or a dotted scenario key
//! from = 0.0
//! to = 1.0
//! cycles = true                          # optional: periodic orbits from the Hopf points
//! [theory]                               # optional (our extension): drawn on regime_map.png
//! boundary = "v11 - v12"                 # the curve where this expression over the axes is 0
//! ```
//!
//! Everything is checked before the first point runs: keys and types of the sweep file, the
//! axes against the base scenario, the base scenario itself, and the scenario at every corner
//! of the grid (so `tokens.n` sweeping into 0 is caught up front). Every problem is one line
//! `FILE: KEY: what is wrong`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Value;

use crate::error::Error;
use crate::scenario::{
    check_name, deserialize_at, parse_toml, set_value, ModelKind, Scenario, ScenarioError,
};
use crate::simulation;
use crate::simulation::check_memory;

use crate::bifurcation::base::BaseScenario;
pub use crate::bifurcation::spec::{Codim2Spec, ContinuationSpec, CurveType};
use crate::bifurcation::stationary::Family as StationaryFamily;
use crate::cells::fmt_f64;

/// The most grid points a sweep may have.
pub const MAX_POINTS: usize = 100_000_000;

/// Scenario keys that hold integers: axis values are rounded to the nearest integer there.
const INTEGER_KEYS: [&str; 4] = ["model.d", "tokens.n", "tokens.seed", "time.samples"];

/// The scenario key of the noise temperature: a sweep over it draws `transition.png`.
pub const TEMPERATURE_KEY: &str = "noise.temperature";

/// Default relative tolerance of boundary refinement (a fraction of the axis range).
pub const DEFAULT_RELATIVE_TOLERANCE: f64 = 1e-3;

/// One axis of the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// The name as written in the sweep file (a params name or a dotted key); the CSV column.
    pub name: String,
    /// The dotted scenario key it sets (`params.v11`, `model.beta`).
    pub key: String,
    /// First value.
    pub from: f64,
    /// Last value.
    pub to: f64,
    /// Number of values.
    pub steps: usize,
    /// Integer key (`tokens.n`, ...): values are rounded to the nearest integer.
    pub integer: bool,
    /// `back = true`: the axis runs from `from` to `to` and back to `from` (2 steps - 1
    /// points), every point started from the previous point's final tokens (a hysteresis
    /// loop, docs/MATH.md §14).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub back: bool,
}

/// The number of at most 12 significant decimal digits, as few as possible, within `tolerance`
/// of `x` (so a grid value computed as 0.2 + 0.1 reads 0.3, not 0.30000000000000004); `x`
/// itself when there is none.
fn shortest_nearby(x: f64, tolerance: f64) -> f64 {
    (1..=12)
        .filter_map(|digits| format!("{:.*e}", digits - 1, x).parse::<f64>().ok())
        .find(|c| (c - x).abs() <= tolerance)
        .unwrap_or(x)
}

impl Axis {
    /// Number of points along the axis: `steps`, or 2 steps - 1 when it goes back.
    pub fn points(&self) -> usize {
        if self.back {
            2 * self.steps - 1
        } else {
            self.steps
        }
    }

    /// Grid value `i`: `from + i (to - from) / (steps - 1)`, `from` when steps = 1, and exactly
    /// `to` for the last one; rounded for integer keys. On the way back (i >= steps), the
    /// value of 2 (steps - 1) - i.
    pub fn value(&self, i: usize) -> f64 {
        let i = if i >= self.steps {
            (2 * (self.steps - 1)).saturating_sub(i)
        } else {
            i
        };
        let x = if self.steps <= 1 || i == 0 {
            self.from
        } else if i + 1 == self.steps {
            self.to
        } else {
            let x = self.from + i as f64 * (self.to - self.from) / (self.steps - 1) as f64;
            shortest_nearby(x, 4.0 * f64::EPSILON * self.from.abs().max(self.to.abs()))
        };
        self.snap(x)
    }

    /// `x` as this axis uses it (rounded to an integer for integer keys).
    pub fn snap(&self, x: f64) -> f64 {
        if self.integer {
            x.round()
        } else {
            x
        }
    }

    /// The TOML value set into the scenario table for `x`.
    pub fn toml_value(&self, x: f64) -> Value {
        if self.integer {
            Value::Integer(x.round() as i64)
        } else {
            Value::Float(x)
        }
    }

    /// The CSV cell of `x`: an integer for integer keys, else the shortest round-trip decimal.
    pub fn cell(&self, x: f64) -> String {
        if self.integer {
            format!("{}", x.round() as i64)
        } else {
            fmt_f64(x)
        }
    }

    /// |to - from|.
    pub fn range(&self) -> f64 {
        (self.to - self.from).abs()
    }
}

/// `[refine]`: boundary refinement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefineSpec {
    /// Per axis (same order as the axes): the bracket to reach, or `None` if the axis is not
    /// refined.
    pub tolerance: Vec<Option<f64>>,
}

/// A checked sweep file, ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The sweep file as given.
    pub file: PathBuf,
    /// The sweep name (the output folder).
    pub name: String,
    /// The optional description.
    pub description: Option<String>,
    /// The base scenario file (resolved against the sweep file's folder).
    pub scenario_file: PathBuf,
    /// Folder that the scenario's relative paths are resolved against.
    pub scenario_dir: PathBuf,
    /// `model` of the sweep file, if given.
    pub model_override: Option<ModelKind>,
    /// The model every point runs.
    pub model: ModelKind,
    /// Where each point's label comes from (`label` of the sweep file).
    pub label_source: LabelSource,
    /// The axes, the first slowest.
    pub axes: Vec<Axis>,
    /// `[refine]`: bisection of label boundaries.
    pub refine: Option<RefineSpec>,
    /// `[continuation]`: OA fixed points along a parameter.
    pub continuation: Option<ContinuationSpec>,
    /// `[codim2]`: fold and Hopf curves in two parameters.
    pub codim2: Option<Codim2Spec>,
    /// `[theory] boundary`: an expression over the axes (and the base `[params]`) whose zero
    /// level `regime_map.png` draws.
    pub theory: Option<String>,
    /// The base scenario's raw table with `run.model` set from the sweep's `model`.
    pub template: toml::Table,
    /// The checked base scenario.
    pub base: Scenario,
}

impl Plan {
    /// The base scenario's value of a dotted key, when it is a number.
    pub fn base_number(&self, key: &str) -> Option<f64> {
        crate::bifurcation::base::number_at(&self.template, key)
    }

    /// The base scenario as the bifurcation analysis sees it (`[continuation]`, `[codim2]`).
    pub fn base_scenario(&self) -> BaseScenario {
        BaseScenario {
            file: self.file.clone(),
            name: self.name.clone(),
            scenario_file: self.scenario_file.clone(),
            scenario_dir: self.scenario_dir.clone(),
            template: self.template.clone(),
            base: self.base.clone(),
        }
    }

    /// Number of grid points.
    pub fn points(&self) -> usize {
        self.axes.iter().map(Axis::points).product()
    }

    /// The cells its rows have beyond the result columns: `label_share` for an ensemble, the
    /// run statistics (progress and shard files) for a sweep over the temperature.
    pub fn layout(&self) -> super::row::Layout {
        super::row::Layout {
            share: self.base.ensemble.is_some(),
            stats: self.axes.iter().any(|a| a.key == TEMPERATURE_KEY),
        }
    }

    /// Whether the sweep goes there and back, each point from the previous one's tokens.
    pub fn goes_back(&self) -> bool {
        self.axes.iter().any(|a| a.back)
    }

    /// Grid indices (one per axis, the first axis slowest) of point `index`.
    pub fn grid_index(&self, mut index: usize) -> Vec<usize> {
        let mut idx = vec![0; self.axes.len()];
        for (k, axis) in self.axes.iter().enumerate().rev() {
            idx[k] = index % axis.points();
            index /= axis.points();
        }
        idx
    }

    /// Point index of grid indices.
    pub fn point_index(&self, idx: &[usize]) -> usize {
        self.axes
            .iter()
            .zip(idx)
            .fold(0, |acc, (axis, &i)| acc * axis.points() + i)
    }

    /// Axis values of point `index`.
    pub fn coords(&self, index: usize) -> Vec<f64> {
        self.grid_index(index)
            .iter()
            .zip(&self.axes)
            .map(|(&i, a)| a.value(i))
            .collect()
    }

    /// The CSV cells of axis values.
    pub fn coord_cells(&self, coords: &[f64]) -> Vec<String> {
        self.axes
            .iter()
            .zip(coords)
            .map(|(a, &x)| a.cell(x))
            .collect()
    }

    /// The scenario table at given axis values.
    pub fn table_at(&self, coords: &[f64]) -> Result<toml::Table, String> {
        let mut table = self.template.clone();
        for (axis, &x) in self.axes.iter().zip(coords) {
            set_value(&mut table, &axis.key, axis.toml_value(x))?;
        }
        Ok(table)
    }

    /// The checked scenario at given axis values.
    pub fn scenario_at(&self, coords: &[f64]) -> Result<Scenario, ScenarioError> {
        let table = self.table_at(coords).map_err(|m| {
            ScenarioError::at(&self.file, "axes", format!("cannot set an axis value: {m}"))
        })?;
        Scenario::from_table(table, &self.scenario_file, &self.scenario_dir)
    }

    /// The resolved sweep (for summary.json).
    pub fn resolved(&self) -> serde_json::Value {
        let refine = self.refine.as_ref().map(|r| {
            serde_json::json!({
                "tolerance": self.axes.iter().zip(&r.tolerance)
                    .filter_map(|(a, t)| t.map(|t| (a.name.clone(), serde_json::json!(t))))
                    .collect::<serde_json::Map<_, _>>(),
            })
        });
        let mut resolved = serde_json::json!({
            "file": self.file.display().to_string(),
            "name": self.name,
            "description": self.description,
            "scenario": self.scenario_file.display().to_string(),
            "model": self.model.as_str(),
            "axes": self.axes,
            "refine": refine,
            "continuation": self.continuation,
        });
        if let Some(c) = &self.codim2 {
            resolved["codim2"] = serde_json::json!(c);
        }
        if self.label_source != LabelSource::Simulation {
            resolved["label"] = self.label_source.as_str().into();
        }
        resolved
    }
}

/// The raw shape of a sweep file: structure and types only, unknown keys refused; read with
/// the scenario's error mapping, so every message names the file and the full key.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    name: String,
    description: Option<String>,
    scenario: String,
    model: Option<ModelKind>,
    label: Option<String>,
    /// Kept as a table: the axes' order is the file's, and dotted names nest. Required, except
    /// for a continuation of stationary densities (a mean-field base), which has no grid.
    axes: Option<toml::Table>,
    refine: Option<RawRefine>,
    continuation: Option<RawContinuation>,
    codim2: Option<RawCodim2>,
    theory: Option<RawTheory>,
}

/// One axis, `{ from = ..., to = ..., steps = ... }`; `steps` read as `i64` so that 0 gets a
/// message of ours.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAxis {
    from: f64,
    to: f64,
    steps: i64,
    back: Option<bool>,
}

/// `[refine]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRefine {
    tolerance: Option<f64>,
    relative_tolerance: Option<f64>,
    axes: Option<Vec<String>>,
}

/// `[continuation]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContinuation {
    parameter: String,
    from: f64,
    to: f64,
    step: Option<f64>,
    max_points: Option<i64>,
    cycles: Option<bool>,
}

/// `[codim2]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCodim2 {
    parameters: Vec<String>,
    from: Vec<f64>,
    to: Vec<f64>,
    step: Option<f64>,
    curves: Option<Vec<String>>,
    max_points: Option<i64>,
}

/// `[theory]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTheory {
    boundary: Option<String>,
}

/// Shorthand for an error at a key of the sweep file.
fn at(file: &Path, key: &str, message: impl Into<String>) -> Error {
    Error::Scenario(ScenarioError::at(file, key, message))
}

/// `x`, or an error at `key` if it is not finite.
fn finite(file: &Path, key: &str, x: f64) -> Result<f64, Error> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(at(file, key, format!("{x} is not a finite number")))
    }
}

/// `i` as a count, or an error at `key` if it is below `min`.
fn count(file: &Path, key: &str, i: i64, min: i64) -> Result<usize, Error> {
    if i < min {
        return Err(at(
            file,
            key,
            format!("must be an integer >= {min}, found {i}"),
        ));
    }
    usize::try_from(i).map_err(|_| at(file, key, format!("{i} is too large")))
}

/// Whether a dotted scenario key holds an integer.
pub fn is_integer_key(key: &str) -> bool {
    INTEGER_KEYS.contains(&key) || (key.starts_with("model.") && key.ends_with(".seed"))
}

/// Collects the axes of `[axes]` in file order; dotted TOML keys (`model.beta = {...}`) nest, so
/// a table whose values are all tables is descended into.
fn collect_axes(
    file: &Path,
    prefix: &str,
    table: &toml::Table,
    out: &mut Vec<(String, toml::Table)>,
) -> Result<(), Error> {
    for (key, value) in table {
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Value::Table(t) if !t.is_empty() && t.values().all(Value::is_table) => {
                collect_axes(file, &name, t, out)?
            }
            Value::Table(t) => out.push((name, t.clone())),
            other => {
                return Err(at(
                    file,
                    &format!("axes.{name}"),
                    format!(
                        "expected a table {{ from = ..., to = ..., steps = ... }}, found a TOML {}",
                        other.type_str()
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// Resolves an axis or parameter name to the dotted scenario key it sets, checking that the
/// base scenario accepts it. `what` is the sweep-file key for messages.
fn resolve_key(
    file: &Path,
    what: &str,
    name: &str,
    template: &toml::Table,
    scenario_file: &Path,
) -> Result<String, Error> {
    let params: Vec<String> = template
        .get("params")
        .and_then(Value::as_table)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    let param = name
        .strip_prefix("params.")
        .or((!name.contains('.')).then_some(name));
    if let Some(p) = param {
        if !params.iter().any(|q| q == p) {
            let listing = if params.is_empty() {
                "it has no [params]".to_string()
            } else {
                format!("params are: {}", params.join(", "))
            };
            return Err(at(
                file,
                what,
                format!(
                    "unknown axis `{name}`: {} has no [params] entry `{p}` ({listing}); a scenario key must be dotted, e.g. model.beta",
                    scenario_file.display()
                ),
            ));
        }
        return Ok(format!("params.{p}"));
    }
    let mut probe = template.clone();
    set_value(&mut probe, name, Value::Float(0.0))
        .map_err(|m| at(file, what, format!("unknown axis `{name}`: {m}")))?;
    Ok(name.to_string())
}

/// Reads and checks a sweep file.
pub fn load(path: &Path) -> Result<Plan, Error> {
    load_with_sets(path, &[])
}

/// Reads and checks a sweep file whose base scenario gets the `--set KEY=VALUE` overrides,
/// in order, before the sweep's `model` and axes.
pub fn load_with_sets(path: &Path, sets: &[String]) -> Result<Plan, Error> {
    let text = crate::input::read_text(path, crate::input::TOML_LIMIT)
        .map_err(|e| ScenarioError::file(path, e))?;
    let table = parse_toml(&text, path)?;
    from_table_with_sets(&table, path, sets)
}

/// Checks a parsed sweep file.
pub fn from_table(table: &toml::Table, file: &Path) -> Result<Plan, Error> {
    from_table_with_sets(table, file, &[])
}

/// Checks a parsed sweep file, with overrides of the base scenario.
pub fn from_table_with_sets(
    table: &toml::Table,
    file: &Path,
    sets: &[String],
) -> Result<Plan, Error> {
    let raw: RawSweep = deserialize_at(Value::Table(table.clone()), file, "")?;
    check_name(&raw.name, file)?;
    if let Some(text) = &raw.description {
        crate::scenario::check_description(text).map_err(|m| at(file, "description", m))?;
    }
    let (scenario_file, scenario_dir, mut template) = read_base(file, &raw.scenario, sets)?;
    if let Some(model) = raw.model {
        set_value(&mut template, "run.model", Value::String(model.to_string()))
            .map_err(|m| at(file, "model", m))?;
    }
    let base = Scenario::from_table(template.clone(), &scenario_file, &scenario_dir)?;
    let model = base.run.model;
    let label_source = label_source(file, raw.label.as_deref(), &base, model)?;
    let stationary_only = model == ModelKind::MeanField && raw.continuation.is_some();
    let axes = match &raw.axes {
        Some(table) => read_axes(file, table, &template, &scenario_file)?,
        None if stationary_only => Vec::new(),
        None => return Err(at(file, "axes", "missing (required key)")),
    };
    let refine = raw
        .refine
        .map(|r| refine_spec(file, r, &axes))
        .transpose()?;
    let continuation = raw
        .continuation
        .map(|c| continuation_spec(file, c, &template, &scenario_file, &base))
        .transpose()?;
    let codim2 = raw
        .codim2
        .map(|c| codim2_spec(file, c, &template, &scenario_file, &base))
        .transpose()?;
    let theory = theory_spec(file, raw.theory, &axes, &base)?;

    let plan = Plan {
        file: file.to_path_buf(),
        name: raw.name,
        description: raw.description,
        scenario_file,
        scenario_dir,
        model_override: raw.model,
        model,
        label_source,
        axes,
        refine,
        continuation,
        codim2,
        theory,
        template,
        base,
    };
    check_back(&plan)?;
    if !plan.axes.is_empty() {
        check_corners(&plan)?;
    }
    Ok(plan)
}

/// The base scenario (`scenario`, relative to the sweep file) as a raw table with the `--set`
/// overrides applied: (its file, its folder, the table).
fn read_base(
    file: &Path,
    scenario_rel: &str,
    sets: &[String],
) -> Result<(PathBuf, PathBuf, toml::Table), Error> {
    if scenario_rel.is_empty() {
        return Err(at(
            file,
            "scenario",
            "is empty (give the base scenario file)",
        ));
    }
    let sweep_dir = file.parent().unwrap_or(Path::new(""));
    let scenario_file = sweep_dir.join(scenario_rel);
    let scenario_text =
        crate::input::read_text(&scenario_file, crate::input::TOML_LIMIT).map_err(|e| {
            at(
                file,
                "scenario",
                format!(
                    "cannot read {}: {}",
                    scenario_file.display(),
                    e.trim_start_matches("cannot read: ")
                ),
            )
        })?;
    let scenario_dir = scenario_file
        .parent()
        .unwrap_or(Path::new(""))
        .to_path_buf();
    let mut template = parse_toml(&scenario_text, &scenario_file)?;
    for set in sets {
        crate::scenario::apply_set(&mut template, set).map_err(|message| {
            ScenarioError::at(&scenario_file, format!("--set {}", set.trim()), message)
        })?;
    }
    Ok((scenario_file, scenario_dir, template))
}

/// `[axes]`: each axis's key resolved in the base scenario, its range checked.
fn read_axes(
    file: &Path,
    axes_table: &toml::Table,
    template: &toml::Table,
    scenario_file: &Path,
) -> Result<Vec<Axis>, Error> {
    if axes_table.is_empty() {
        return Err(at(file, "axes", "needs at least one axis"));
    }
    let mut raw_axes = Vec::new();
    collect_axes(file, "", axes_table, &mut raw_axes)?;
    let mut axes: Vec<Axis> = Vec::with_capacity(raw_axes.len());
    for (name, spec) in raw_axes {
        let prefix = format!("axes.{name}");
        let key = resolve_key(file, &prefix, &name, template, scenario_file)?;
        if let Some(other) = axes.iter().find(|a| a.key == key) {
            return Err(at(
                file,
                &prefix,
                format!("sets {key}, which axis `{}` sets already", other.name),
            ));
        }
        let raw: RawAxis = deserialize_at(Value::Table(spec), file, &prefix)?;
        let from = finite(file, &format!("{prefix}.from"), raw.from)?;
        let to = finite(file, &format!("{prefix}.to"), raw.to)?;
        let steps = count(file, &format!("{prefix}.steps"), raw.steps, 1)?;
        if steps > MAX_POINTS {
            return Err(at(
                file,
                &format!("{prefix}.steps"),
                format!("{steps} steps: the grid may have at most {MAX_POINTS} points"),
            ));
        }
        let integer = is_integer_key(&key);
        if integer && (from.abs() > 9.0e15 || to.abs() > 9.0e15) {
            return Err(at(
                file,
                &prefix,
                format!("{key} holds an integer; from and to must be below 9e15 in size"),
            ));
        }
        if integer && (from.fract() != 0.0 || to.fract() != 0.0) {
            return Err(at(
                file,
                &prefix,
                format!(
                    "{key} holds an integer; from and to must be whole numbers, found from = {from}, to = {to}"
                ),
            ));
        }
        let axis = Axis {
            name,
            key,
            from,
            to,
            steps,
            integer,
            back: raw.back.unwrap_or(false),
        };
        check_grid_finite(file, &prefix, &axis)?;
        axes.push(axis);
    }
    axes.iter()
        .try_fold(1usize, |acc, a| acc.checked_mul(a.points()))
        .filter(|&p| p <= MAX_POINTS)
        .ok_or_else(|| {
            at(
                file,
                "axes",
                format!("the grid has more than {MAX_POINTS} points"),
            )
        })?;
    Ok(axes)
}

/// Refuses an axis whose grid has a point that is not finite (`to - from` overflows), before
/// any point runs.
fn check_grid_finite(file: &Path, prefix: &str, axis: &Axis) -> Result<(), Error> {
    // Every value is from + i (to - from) / (steps - 1), i < steps: finite when the ends and
    // (steps - 1) (to - from) are, so a huge grid is not walked point by point (1e8 points
    // took minutes before the first progress line).
    let span = axis.steps.saturating_sub(1) as f64 * (axis.to - axis.from);
    if axis.from.is_finite() && axis.to.is_finite() && span.is_finite() {
        return Ok(());
    }
    let bad = (0..axis.steps).find(|&i| !axis.value(i).is_finite());
    match bad {
        None => Ok(()),
        Some(i) => Err(at(
            file,
            prefix,
            format!(
                "grid point {i} of {} is {} (to - from = {} overflows); narrow the range",
                axis.steps,
                axis.value(i),
                axis.to - axis.from
            ),
        )),
    }
}

/// `label` of the sweep file: where each point's label comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LabelSource {
    /// The classifier of the point's simulation (the default).
    #[default]
    Simulation,
    /// The analysis of the OA phase space (`tokdyn predict`), without a simulation.
    Predict,
}

impl LabelSource {
    /// The word of the sweep file.
    pub fn as_str(self) -> &'static str {
        match self {
            LabelSource::Simulation => "simulation",
            LabelSource::Predict => "predict",
        }
    }
}

/// Reads `label`; `"predict"` needs what the OA analysis reads: model = "oa", d = 2,
/// kernel = "lsa", one layer.
fn label_source(
    file: &Path,
    word: Option<&str>,
    base: &Scenario,
    model: ModelKind,
) -> Result<LabelSource, Error> {
    let source = match word {
        None | Some("simulation") => LabelSource::Simulation,
        Some("predict") => LabelSource::Predict,
        Some(other) => {
            return Err(at(
                file,
                "label",
                format!(
                    "\"{}\" is not a label source (use \"simulation\" or \"predict\")",
                    other.escape_debug()
                ),
            ))
        }
    };
    if source == LabelSource::Predict {
        let m = &base.model;
        let analysable = model == ModelKind::Oa
            && m.d == 2
            && m.kernel == crate::scenario::KernelKind::Lsa
            && m.layers.is_empty();
        if !analysable {
            return Err(at(
                file,
                "label",
                format!(
                    "\"predict\" analyses the OA model of d = 2, kernel = \"lsa\", one layer; this sweep runs model = \"{model}\" with d = {}, kernel = \"{}\"{}",
                    m.d,
                    m.kernel,
                    if m.layers.is_empty() { "" } else { " and a stack of layers" }
                ),
            ));
        }
    }
    Ok(source)
}

/// The variables of a theory expression at axis values: the base `[params]`, with the axes
/// that are params set to `coords`.
pub fn theory_params(axes: &[Axis], base: &Scenario, coords: &[f64]) -> Vec<(String, f64)> {
    let mut params = base.params.clone();
    for (axis, &x) in axes.iter().zip(coords) {
        if let Some(name) = axis.key.strip_prefix("params.") {
            match params.iter_mut().find(|(p, _)| p == name) {
                Some(p) => p.1 = x,
                None => params.push((name.to_string(), x)),
            }
        }
    }
    params
}

/// `[theory]`: `boundary = "expression"`, checked by evaluating it at the first grid point.
fn theory_spec(
    file: &Path,
    raw: Option<RawTheory>,
    axes: &[Axis],
    base: &Scenario,
) -> Result<Option<String>, Error> {
    let Some(text) = raw.and_then(|t| t.boundary) else {
        return Ok(None);
    };
    let first: Vec<f64> = axes.iter().map(|a| a.value(0)).collect();
    crate::scenario::evaluate_expression(&text, &theory_params(axes, base, &first))
        .map_err(|m| at(file, "theory.boundary", m))?;
    Ok(Some(text))
}

/// `[refine]`: one tolerance (absolute, or relative to each axis' range) per refined axis.
fn refine_spec(file: &Path, raw: RawRefine, axes: &[Axis]) -> Result<RefineSpec, Error> {
    if raw.tolerance.is_some() && raw.relative_tolerance.is_some() {
        return Err(at(
            file,
            "refine.relative_tolerance",
            "give tolerance (absolute) or relative_tolerance, not both",
        ));
    }
    for (key, v) in [
        ("refine.tolerance", raw.tolerance),
        ("refine.relative_tolerance", raw.relative_tolerance),
    ] {
        if let Some(v) = v {
            if finite(file, key, v)? <= 0.0 {
                return Err(at(file, key, format!("must be > 0, found {v}")));
            }
        }
    }
    if let Some(names) = &raw.axes {
        for (i, name) in names.iter().enumerate() {
            check_refined_axis(file, &format!("refine.axes[{i}]"), name, axes)?;
        }
    }
    let tolerance = axes
        .iter()
        .map(|a| {
            let chosen = match &raw.axes {
                Some(names) => names.contains(&a.name),
                None => a.steps >= 2,
            };
            if !chosen || a.range() == 0.0 {
                return None;
            }
            Some(raw.tolerance.unwrap_or_else(|| {
                raw.relative_tolerance.unwrap_or(DEFAULT_RELATIVE_TOLERANCE) * a.range()
            }))
        })
        .collect();
    Ok(RefineSpec { tolerance })
}

/// An entry of `refine.axes`: an axis with at least two steps.
fn check_refined_axis(file: &Path, key: &str, name: &str, axes: &[Axis]) -> Result<(), Error> {
    match axes.iter().find(|a| a.name == name) {
        None => Err(at(
            file,
            key,
            format!(
                "`{name}` is not an axis (axes are: {})",
                axes.iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
        Some(a) if a.steps < 2 => Err(at(
            file,
            key,
            format!("axis `{name}` has steps = 1: nothing to refine"),
        )),
        Some(_) => Ok(()),
    }
}

/// Largest |from|, |to| of a continuation: beyond it differences of parameter values overflow.
const MAX_CONTINUATION_VALUE: f64 = 1e100;

/// Smallest arclength step of a continuation relative to the size of its parameters' values
/// (the largest |from|, |to| and range): below it a step could not move a parameter in double
/// precision, or would need more than 1e9 steps to cross the range.
pub const MIN_RELATIVE_STEP: f64 = 1e-9;

/// Refuses a continuation step below [`MIN_RELATIVE_STEP`] times the scale of `values` (the
/// ends of the range or box).
fn check_step_moves(file: &Path, key: &str, step: f64, values: &[f64]) -> Result<(), Error> {
    let ends = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let range = values
        .chunks_exact(2)
        .fold(0.0f64, |m, p| m.max((p[1] - p[0]).abs()));
    let least = MIN_RELATIVE_STEP * ends.max(range);
    if step >= least {
        return Ok(());
    }
    Err(at(
        file,
        key,
        format!(
            "{step:e} is below {MIN_RELATIVE_STEP:e} of the parameters' scale {:e} (at least {least:e}): such a continuation would not move in double precision or would not end",
            ends.max(range)
        ),
    ))
}

/// `[continuation]`: a real parameter of an OA-analysable base, a finite range, a step.
fn continuation_spec(
    file: &Path,
    raw: RawContinuation,
    template: &toml::Table,
    scenario_file: &Path,
    base: &Scenario,
) -> Result<ContinuationSpec, Error> {
    let key = resolve_key(
        file,
        "continuation.parameter",
        &raw.parameter,
        template,
        scenario_file,
    )?;
    if is_integer_key(&key) {
        return Err(at(
            file,
            "continuation.parameter",
            format!("{key} holds an integer; continuation needs a real parameter"),
        ));
    }
    let from = finite(file, "continuation.from", raw.from)?;
    let to = finite(file, "continuation.to", raw.to)?;
    if from == to {
        return Err(at(file, "continuation.to", "must differ from `from`"));
    }
    for (key, value) in [("continuation.from", from), ("continuation.to", to)] {
        if value.abs() > MAX_CONTINUATION_VALUE {
            return Err(at(
                file,
                key,
                format!(
                    "{value} is out of range: continuation values must lie within +-{MAX_CONTINUATION_VALUE:e}"
                ),
            ));
        }
    }
    let step = match raw.step {
        Some(v) => finite(file, "continuation.step", v)?,
        None => (to - from).abs() / 200.0,
    };
    if step <= 0.0 {
        return Err(at(
            file,
            "continuation.step",
            format!("must be > 0, found {step}"),
        ));
    }
    check_step_moves(file, "continuation.step", step, &[from, to])?;
    let max_points = match raw.max_points {
        Some(i) => count(file, "continuation.max_points", i, 2)?,
        None => 10_000,
    };
    let stationary = if base.run.model == ModelKind::MeanField {
        Some(stationary_family(file, &key, from, to, base)?)
    } else {
        None
    };
    if stationary.is_none() {
        oa_analysable(file, base)?;
    }
    Ok(ContinuationSpec {
        parameter: raw.parameter,
        key,
        from,
        to,
        step,
        max_points,
        cycles: raw.cycles.unwrap_or(false),
        stationary,
    })
}

/// A continuation of OA fixed points needs an OA-analysable base.
fn oa_analysable(file: &Path, base: &Scenario) -> Result<(), Error> {
    simulation::second_harmonic(base, ModelKind::Oa).map_err(|e| {
        at(
            file,
            "continuation",
            format!(
                "continues Ott-Antonsen fixed points, which needs d = 2 and kernel = \"lsa\" ({})",
                e.message()
            ),
        )
    })?;
    Ok(())
}

/// The family of stationary densities of a mean-field base (docs/MATH.md §17.6): one head
/// with A = V = I, usa or sa, any d (d >= 3: axisymmetric densities), the parameter `noise.temperature` or `model.beta` over
/// positive values (and a positive temperature when beta is followed).
fn stationary_family(
    file: &Path,
    key: &str,
    from: f64,
    to: f64,
    base: &Scenario,
) -> Result<StationaryFamily, Error> {
    use crate::bifurcation::stationary::{Parameter, MAX_USA_BETA};
    use crate::mean_field::Kernel;
    let what = "continuation";
    let model = &base.model;
    let kernel = match model.kernel {
        crate::scenario::KernelKind::Usa => Kernel::Usa,
        crate::scenario::KernelKind::Sa => Kernel::Sa,
        crate::scenario::KernelKind::Lsa => {
            return Err(at(
                file,
                what,
                "stationary densities are continued for kernel = \"usa\" or \"sa\" (model.kernel is \"lsa\": its Poisson densities follow the OA equation; continue with model = \"oa\")",
            ))
        }
    };
    let identity = |m: &nalgebra::DMatrix<f64>| {
        m.nrows() == m.ncols()
            && (m - nalgebra::DMatrix::identity(m.nrows(), m.ncols())).amax() == 0.0
    };
    if model.heads.len() != 1 || !identity(&model.heads[0].a) || !identity(&model.heads[0].v) {
        return Err(at(
            file,
            what,
            "stationary densities are continued for one head with A = V = I (the base's model.heads / model.A / model.V differ): other A and V have no stationary self-consistency of this form",
        ));
    }
    let parameter = match key {
        TEMPERATURE_KEY => Parameter::Temperature,
        "model.beta" => Parameter::Beta,
        other => {
            return Err(at(
                file,
                "continuation.parameter",
                format!("on a mean-field base the parameter is \"noise.temperature\" or \"model.beta\", found {other}"),
            ))
        }
    };
    for (k, v) in [("continuation.from", from), ("continuation.to", to)] {
        let too_big = parameter == Parameter::Beta && kernel == Kernel::Usa && v > MAX_USA_BETA;
        if v <= 0.0 || too_big {
            return Err(at(
                file,
                k,
                format!(
                    "must be > 0{} for stationary densities, found {v}",
                    if too_big {
                        format!(" and <= {MAX_USA_BETA} (usa: e^beta)")
                    } else {
                        String::new()
                    }
                ),
            ));
        }
    }
    let other = match parameter {
        Parameter::Temperature => {
            if kernel == Kernel::Usa && model.beta > MAX_USA_BETA {
                return Err(at(file, "model.beta", format!("must be <= {MAX_USA_BETA} for the stationary densities of usa (e^beta), found {}", model.beta)));
            }
            model.beta
        }
        Parameter::Beta => {
            let t = base.noise.map_or(0.0, |n| n.temperature);
            if t <= 0.0 {
                return Err(at(file, "noise.temperature", format!("must be > 0 to continue stationary densities in model.beta (a noiseless density concentrates into Dirac masses), found {t}")));
            }
            t
        }
    };
    if model.d > MAX_STATIONARY_D {
        return Err(at(file, "model.d", format!("stationary densities are followed for d <= {MAX_STATIONARY_D}: beyond, a concentrated bump needs more quadrature than the continuation's grid gives and its stability is not reliable (`run --model mean-field` has no such bound), found {}", model.d)));
    }
    Ok(StationaryFamily {
        kernel,
        parameter,
        other,
        d: model.d,
    })
}

/// The largest d of a stationary-density continuation: the stability of the bump states was
/// checked against the time stepper up to d = 20; from d = 30 on the continuation's fixed grid
/// of Gauss nodes does not resolve a concentrated bump's linearisation.
const MAX_STATIONARY_D: usize = 20;

/// `[codim2]`: two distinct real parameters of an OA-analysable base, a box of positive size
/// in both, a step > 0, curve types `fold` and `hopf`.
fn codim2_spec(
    file: &Path,
    raw: RawCodim2,
    template: &toml::Table,
    scenario_file: &Path,
    base: &Scenario,
) -> Result<Codim2Spec, Error> {
    let pair = |key: &str, n: usize| -> Result<(), Error> {
        if n == 2 {
            Ok(())
        } else {
            Err(at(
                file,
                key,
                format!("needs two entries (one per parameter), found {n}"),
            ))
        }
    };
    pair("codim2.parameters", raw.parameters.len())?;
    pair("codim2.from", raw.from.len())?;
    pair("codim2.to", raw.to.len())?;
    let mut keys = Vec::new();
    for (i, name) in raw.parameters.iter().enumerate() {
        let what = format!("codim2.parameters[{i}]");
        let key = resolve_key(file, &what, name, template, scenario_file)?;
        if is_integer_key(&key) {
            return Err(at(
                file,
                &what,
                format!("{key} holds an integer; continuation needs a real parameter"),
            ));
        }
        keys.push(key);
    }
    if keys[0] == keys[1] {
        return Err(at(
            file,
            "codim2.parameters[1]",
            format!("sets {}, which parameters[0] sets already", keys[1]),
        ));
    }
    let mut from = [0.0; 2];
    let mut to = [0.0; 2];
    for i in 0..2 {
        from[i] = finite(file, &format!("codim2.from[{i}]"), raw.from[i])?;
        to[i] = finite(file, &format!("codim2.to[{i}]"), raw.to[i])?;
        for (key, v) in [("from", from[i]), ("to", to[i])] {
            if v.abs() > MAX_CONTINUATION_VALUE {
                return Err(at(
                    file,
                    &format!("codim2.{key}[{i}]"),
                    format!(
                        "{v} is out of range: values must lie within +-{MAX_CONTINUATION_VALUE:e}"
                    ),
                ));
            }
        }
        if from[i] == to[i] {
            return Err(at(
                file,
                &format!("codim2.to[{i}]"),
                format!("the box has zero size: to[{i}] = from[{i}] = {}", from[i]),
            ));
        }
    }
    let step = match raw.step {
        Some(v) => finite(file, "codim2.step", v)?,
        None => (to[0] - from[0]).hypot(to[1] - from[1]) / 200.0,
    };
    if step <= 0.0 {
        return Err(at(
            file,
            "codim2.step",
            format!("must be > 0, found {step}"),
        ));
    }
    check_step_moves(file, "codim2.step", step, &[from[0], to[0], from[1], to[1]])?;
    let mut curves = Vec::new();
    for (i, word) in raw
        .curves
        .unwrap_or_else(|| vec!["fold".into(), "hopf".into()])
        .iter()
        .enumerate()
    {
        let c = match word.as_str() {
            "fold" => CurveType::Fold,
            "hopf" => CurveType::Hopf,
            other => {
                return Err(at(
                    file,
                    &format!("codim2.curves[{i}]"),
                    format!(
                        "\"{}\" is not a curve (use \"fold\" or \"hopf\")",
                        other.escape_debug()
                    ),
                ))
            }
        };
        if !curves.contains(&c) {
            curves.push(c);
        }
    }
    if curves.is_empty() {
        return Err(at(
            file,
            "codim2.curves",
            "names no curve (use [\"fold\", \"hopf\"])",
        ));
    }
    let max_points = match raw.max_points {
        Some(i) => count(file, "codim2.max_points", i, 2)?,
        None => 5000,
    };
    simulation::second_harmonic(base, ModelKind::Oa).map_err(|e| {
        at(
            file,
            "codim2",
            format!(
                "continues Ott-Antonsen fixed points, which needs d = 2 and kernel = \"lsa\" ({})",
                e.message()
            ),
        )
    })?;
    Ok(Codim2Spec {
        parameters: [raw.parameters[0].clone(), raw.parameters[1].clone()],
        keys: [keys[0].clone(), keys[1].clone()],
        from,
        to,
        step,
        curves,
        max_points,
    })
}

/// The grid corners to check: all 2^k corners for up to 12 axes, otherwise each axis's ends
/// with the others at `from`.
fn corners(plan: &Plan) -> Vec<Vec<f64>> {
    let k = plan.axes.len();
    let ends: Vec<[f64; 2]> = plan
        .axes
        .iter()
        .map(|a| [a.value(0), a.value(a.steps - 1)])
        .collect();
    let mut out = Vec::new();
    if k <= 12 {
        for mask in 0..(1usize << k) {
            let c: Vec<f64> = (0..k).map(|j| ends[j][(mask >> j) & 1]).collect();
            if !out.contains(&c) {
                out.push(c);
            }
        }
    } else {
        let base: Vec<f64> = ends.iter().map(|e| e[0]).collect();
        out.push(base.clone());
        for j in 0..k {
            let mut c = base.clone();
            c[j] = ends[j][1];
            out.push(c);
        }
    }
    out
}

/// Checks the scenario (and that its simulation can be built and fits in memory) at every
/// corner of the grid.
fn check_corners(plan: &Plan) -> Result<(), Error> {
    let concurrency = rayon::current_num_threads().min(plan.points()).max(1);
    for corner in corners(plan) {
        let described = plan
            .axes
            .iter()
            .zip(&corner)
            .map(|(a, &x)| format!("{} = {}", a.name, a.cell(x)))
            .collect::<Vec<_>>()
            .join(", ");
        // The axis to blame: the one whose key the scenario names, else the first not at `from`.
        let blame = |key: Option<&str>| -> String {
            let axis = key
                .and_then(|k| plan.axes.iter().find(|a| a.key == k))
                .or_else(|| {
                    plan.axes
                        .iter()
                        .zip(&corner)
                        .find(|(a, &x)| x != a.value(0))
                        .map(|(a, _)| a)
                })
                .unwrap_or(&plan.axes[0]);
            format!("axes.{}", axis.name)
        };
        let scenario = plan.scenario_at(&corner).map_err(|e| {
            at(
                &plan.file,
                &blame(e.key()),
                format!("at the grid corner ({described}) the scenario is invalid: {e}"),
            )
        })?;
        check_memory_parallel(plan, &scenario, concurrency).map_err(|e| {
            at(
                &plan.file,
                &blame(Some("tokens.n")),
                format!("at the grid corner ({described}): {e}"),
            )
        })?;
        simulation::build(&scenario, plan.model).map_err(|e| {
            at(
                &plan.file,
                &blame(e.key()),
                format!("at the grid corner ({described}) the scenario cannot run: {e}"),
            )
        })?;
    }
    Ok(())
}

/// `check_memory` for `concurrency` points at once.
fn check_memory_parallel(
    plan: &Plan,
    scenario: &Scenario,
    concurrency: usize,
) -> Result<(), String> {
    check_memory(scenario, plan.model).map_err(|e| e.to_string())?;
    let need = simulation::memory_estimate(scenario, plan.model).saturating_mul(concurrency as u64);
    if let Some(available) = simulation::memory_available() {
        if need > available {
            return Err(format!(
                "{concurrency} points at once need about {:.1} GiB, more than the {:.1} GiB available; lower RAYON_NUM_THREADS",
                need as f64 / (1u64 << 30) as f64,
                available as f64 / (1u64 << 30) as f64
            ));
        }
    }
    Ok(())
}

/// Checks a sweep with an axis that goes back: one axis of a real key with at least two
/// steps, the full model, no refinement, continuation or curves, simulated labels.
fn check_back(plan: &Plan) -> Result<(), Error> {
    let Some(axis) = plan.axes.iter().find(|a| a.back) else {
        return Ok(());
    };
    let key = format!("axes.{}.back", axis.name);
    let refuse = |why: String| -> Result<(), Error> {
        Err(Error::Scenario(ScenarioError::at(&plan.file, &key, why)))
    };
    if plan.axes.len() != 1 {
        return refuse(format!(
            "a sweep that goes back is one chain of points: it must have one axis, found {}",
            plan.axes.len()
        ));
    }
    if axis.integer || axis.steps < 2 {
        return refuse(format!(
            "goes back along a real key with steps >= 2; {} has {}{}",
            axis.key,
            if axis.integer { "integer values, " } else { "" },
            format_args!("steps = {}", axis.steps)
        ));
    }
    if plan.model != ModelKind::Full {
        return refuse(format!(
            "each point starts from the previous point's tokens, which needs model = \"full\", found \"{}\"",
            plan.model
        ));
    }
    let extra = [
        ("[refine]", plan.refine.is_some()),
        ("[continuation]", plan.continuation.is_some()),
        ("[codim2]", plan.codim2.is_some()),
        (
            "label = \"predict\"",
            plan.label_source != LabelSource::Simulation,
        ),
    ];
    if let Some((what, _)) = extra.iter().find(|(_, on)| *on) {
        return refuse(format!("a sweep that goes back cannot have {what}"));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn grid_values_read_as_their_shortest_decimal() {
        let axis = |from: f64, to: f64, steps: usize| Axis {
            name: "v11".into(),
            key: "params.v11".into(),
            from,
            to,
            steps,
            integer: false,
            back: false,
        };
        let a = axis(0.2, 0.5, 4);
        assert_eq!(a.value(1).to_string(), "0.3");
        assert_eq!(a.value(2).to_string(), "0.4");
        let b = axis(0.0, 1.0, 41);
        for i in 0..41 {
            // Within a few ulps of the formula, and printed with at most 5 digits.
            let exact = i as f64 / 40.0;
            assert!((b.value(i) - exact).abs() <= 4.0 * f64::EPSILON);
            assert!(b.value(i).to_string().len() <= 6, "{}", b.value(i));
        }
        // Values with no short decimal nearby stay as computed.
        let c = axis(0.0, 1.0, 4);
        assert_eq!(c.value(1), 1.0 / 3.0);
    }

    /// A small case-4 base scenario for the sweep files of the tests here and in `refine`.
    pub(crate) const BASE: &str = r#"
name = "base"
[params]
v11 = 0.2
v12 = 1.0
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = "identity"
V = [["v11", "v12"], ["-v12", "-v11"]]
[tokens]
n = 16
init = "poisson"
seed = 1
r0 = 0.3
[time]
t_end = 5.0
samples = 51
"#;

    fn plan(sweep: &str) -> Result<Plan, Error> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("base.toml"), BASE).unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(&path, sweep).unwrap();
        load(&path)
    }

    fn message(sweep: &str) -> String {
        plan(sweep).unwrap_err().to_string()
    }

    const HEAD: &str = "name = \"s\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n";

    #[test]
    fn grid_values_and_indices() {
        let p = plan(&format!(
            "{HEAD}[axes]\nv11 = {{ from = 0.0, to = 1.0, steps = 5 }}\nmodel.beta = {{ from = 2, to = 2, steps = 1 }}\ntokens.n = {{ from = 10, to = 20, steps = 4 }}\n"
        ))
        .unwrap();
        assert_eq!(p.axes.len(), 3);
        assert_eq!(p.axes[0].key, "params.v11");
        assert_eq!(p.axes[1].name, "model.beta");
        assert!(p.axes[2].integer && !p.axes[0].integer);
        assert_eq!(p.points(), 20);
        assert_eq!(p.coords(0), vec![0.0, 2.0, 10.0]);
        assert_eq!(p.coords(1), vec![0.0, 2.0, 13.0]);
        assert_eq!(p.coords(2), vec![0.0, 2.0, 17.0]);
        assert_eq!(p.coords(4), vec![0.25, 2.0, 10.0]);
        assert_eq!(p.coords(19), vec![1.0, 2.0, 20.0]);
        for i in 0..20 {
            assert_eq!(p.point_index(&p.grid_index(i)), i);
        }
        assert_eq!(p.axes[2].cell(13.0), "13");
        assert_eq!(p.axes[0].cell(0.25), "0.25");
        assert_eq!(p.axes[0].cell(1.0), "1.0");
        let s = p.scenario_at(&p.coords(6)).unwrap();
        assert_eq!(s.tokens.n, 17);
        assert_eq!(s.params[0], ("v11".to_string(), 0.25));
        assert_eq!(s.run.model, ModelKind::Oa);
    }

    #[test]
    fn formula_of_the_grid() {
        let a = Axis {
            name: "x".into(),
            key: "params.x".into(),
            from: 0.1,
            to: 0.7,
            steps: 7,
            integer: false,
            back: false,
        };
        for i in 0..6 {
            assert_eq!(a.value(i), 0.1 + i as f64 * (0.7 - 0.1) / 6.0);
        }
        assert_eq!(a.value(6), 0.7);
        let one = Axis { steps: 1, ..a };
        assert_eq!(one.value(0), 0.1);
    }

    #[test]
    fn errors_name_file_and_key() {
        let m = message(&format!(
            "{HEAD}[axes]\nv13 = {{ from = 0, to = 1, steps = 3 }}\n"
        ));
        assert!(m.contains("s.toml: axes.v13: unknown axis"), "{m}");
        let m = message(&format!(
            "{HEAD}[axes]\nv11 = {{ from = 0, to = 1, steps = 0 }}\n"
        ));
        assert!(m.contains("axes.v11.steps: must be an integer >= 1"), "{m}");
        let m = message(&format!(
            "{HEAD}[axes]\nv11 = {{ from = 0, to = 1, steps = 2.5 }}\n"
        ));
        assert!(m.contains("axes.v11.steps"), "{m}");
        let m = message(&format!(
            "{HEAD}[axes]\nv11 = {{ from = 0, to = inf, steps = 2 }}\n"
        ));
        assert!(m.contains("axes.v11.to: inf is not a finite number"), "{m}");
        let m = message(&format!("{HEAD}[axes]\nv11 = {{ from = 0, steps = 2 }}\n"));
        assert!(m.contains("axes.v11.to: missing"), "{m}");
        let m = message(&format!(
            "{HEAD}[axes]\nv11 = {{ from = 0, to = 1, step = 2 }}\n"
        ));
        assert!(m.contains("axes.v11.step: unknown key"), "{m}");
        let m = message(&format!(
            "{HEAD}colour = 1\n[axes]\nv11 = {{ from = 0, to = 1, steps = 2 }}\n"
        ));
        assert!(m.contains("s.toml: colour: unknown key"), "{m}");
        let m = message(&format!(
            "{HEAD}[axes]\nmodel.betta = {{ from = 0, to = 1, steps = 2 }}\n"
        ));
        assert!(m.contains("axes.model.betta: unknown axis"), "{m}");
        let m = message(&format!("{HEAD}[axes]\n"));
        assert!(m.contains("s.toml: axes: needs at least one axis"), "{m}");
        let m = message("name = \"s\"\nscenario = \"nope.toml\"\n[axes]\nv11 = { from = 0, to = 1, steps = 2 }\n");
        assert!(m.contains("s.toml: scenario: cannot read"), "{m}");
        let m = message(&format!("{HEAD}[axes]\nv11 = {{ from = 0, to = 1, steps = 2 }}\nparams.v11 = {{ from = 0, to = 1, steps = 2 }}\n"));
        assert!(m.contains("axes.params.v11: sets params.v11"), "{m}");
        let m = message("name = \"s\"\nscenario = \"base.toml\"\nmodel = \"kuramoto\"\n[axes]\nv11 = { from = 0, to = 1, steps = 2 }\n");
        assert!(m.contains("s.toml: model: unknown model"), "{m}");
        // Sections are read by serde: unknown keys and wrong types name the full key.
        let axis = "[axes]\nv11 = { from = 0, to = 1, steps = 2 }\n";
        let m = message(&format!("{HEAD}{axis}[refine]\ntol = 1\n"));
        assert!(m.contains("s.toml: refine.tol: unknown key"), "{m}");
        let m = message(&format!(
            "{HEAD}{axis}[continuation]\nparameter = \"v11\"\nfrom = \"a\"\nto = 1\n"
        ));
        assert!(m.contains("s.toml: continuation.from: invalid type"), "{m}");
        assert!(m.contains("expected a number"), "{m}");
        let m = message(&format!(
            "{HEAD}{axis}[continuation]\nparameter = \"v11\"\nfrom = 0\n"
        ));
        assert!(
            m.contains("s.toml: continuation.to: missing (required key)"),
            "{m}"
        );
        let m = message(&format!("{HEAD}{axis}[refine]\naxes = [\"v11\", 3]\n"));
        assert!(m.contains("s.toml: refine.axes[1]: invalid type"), "{m}");
        let m = message(&format!("{HEAD}theory = 3\n{axis}"));
        assert!(
            m.contains("s.toml: theory: invalid type: integer `3`, expected a table"),
            "{m}"
        );
        // The name rule is the scenario's.
        let m = message(&format!("name = \"S 1\"\nscenario = \"base.toml\"\n{axis}"));
        assert!(
            m.contains("s.toml: name: \"S 1\" is not a valid name"),
            "{m}"
        );
    }

    #[test]
    fn corners_are_checked() {
        let m = message(&format!(
            "{HEAD}[axes]\ntokens.n = {{ from = 10, to = 0, steps = 3 }}\n"
        ));
        assert!(
            m.contains("s.toml: axes.tokens.n: at the grid corner (tokens.n = 0)"),
            "{m}"
        );
        assert!(
            m.contains("base.toml: tokens.n: must be an integer >= 1"),
            "{m}"
        );
        let m = message(&format!("{HEAD}[axes]\nv11 = {{ from = 0, to = 1, steps = 2 }}\nmodel.d = {{ from = 2, to = 3, steps = 2 }}\n"));
        assert!(
            m.contains("s.toml: axes.model.d: at the grid corner"),
            "{m}"
        );
        let m = message(&format!(
            "{HEAD}[axes]\ntokens.r0 = {{ from = 0, to = 1, steps = 3 }}\n"
        ));
        assert!(
            m.contains("axes.tokens.r0: at the grid corner (tokens.r0 = 1.0)"),
            "{m}"
        );
    }

    #[test]
    fn refine_tolerances() {
        let p = plan(&format!(
            "{HEAD}[axes]\nv11 = {{ from = 0, to = 2, steps = 3 }}\nv12 = {{ from = 1, to = 1, steps = 1 }}\n[refine]\n"
        ))
        .unwrap();
        assert_eq!(p.refine.unwrap().tolerance, vec![Some(2e-3), None]);
        let p = plan(&format!(
            "{HEAD}[axes]\nv11 = {{ from = 0, to = 2, steps = 3 }}\n[refine]\ntolerance = 0.01\n"
        ))
        .unwrap();
        assert_eq!(p.refine.unwrap().tolerance, vec![Some(0.01)]);
        let m = message(&format!(
            "{HEAD}[axes]\nv11 = {{ from = 0, to = 2, steps = 3 }}\n[refine]\naxes = [\"v12\"]\n"
        ));
        assert!(m.contains("refine.axes[0]: `v12` is not an axis"), "{m}");
    }
}
