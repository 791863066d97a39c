//! `[density]`: the start of the mean field (`run.model = "mean-field"`, docs/MATH.md §17),
//! and the checks of what the mean field can run.
//!
//! ```text
//! [density]
//! init = "uniform" | "poisson" | "von-mises"   default: poisson when tokens.init is, else uniform
//! r0, phi0                                     poisson (default: tokens.r0, tokens.phi0)
//! kappa, mean                                  von-mises: rho ~ e^{kappa cos(theta - mean)}
//! modes = [[k, a, phase], ...]                 adds (1/pi) a cos(k (theta - phase)), k >= 1
//!                                              d >= 3 (axisymmetric, u = <x, e>): init uniform or
//!                                              von-mises (rho ~ e^{kappa u}, no mean), modes
//!                                              [[l, a], ...] add a rho_0 P_l(u) (P_l(1) = 1)
//! grid = N                                     starting grid (default: from the tolerance)
//! max_grid = N                                 largest grid (default 4096)
//! ```

use std::path::Path;

use serde::Deserialize;
use toml::Value;

use super::error::ScenarioError;
use super::kinds::{InitKind, MaskKind, ModelKind, NormalizationKind};
use super::{ModelSpec, RunSpec, TokenSpec};

/// The default largest grid of the mean field.
pub const DEFAULT_MAX_GRID: usize = 4096;
/// The largest grid accepted.
pub const MAX_GRID: usize = 1 << 20;
/// The smallest grid accepted.
pub const MIN_GRID: usize = 8;

/// `[density]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDensity {
    pub init: Option<String>,
    pub r0: Option<f64>,
    pub phi0: Option<f64>,
    pub kappa: Option<f64>,
    pub mean: Option<f64>,
    pub modes: Option<Vec<Vec<f64>>>,
    pub grid: Option<Value>,
    pub max_grid: Option<Value>,
}

/// The shape of the start density.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DensityInit {
    /// Uniform.
    Uniform,
    /// Poisson (wrapped Cauchy in the doubled angle) with R2 = r0 e^{i phi0}.
    Poisson {
        /// |R2(0)|.
        r0: f64,
        /// arg R2(0).
        phi0: f64,
    },
    /// von Mises e^{kappa cos(theta - mean)}.
    VonMises {
        /// kappa >= 0.
        kappa: f64,
        /// The mean direction.
        mean: f64,
    },
}

/// `[density]`, checked (present on every mean-field scenario, with its defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct DensitySpec {
    /// The shape.
    pub init: DensityInit,
    /// Added modes (k, a, phase).
    pub modes: Vec<(u32, f64, f64)>,
    /// The starting grid, when given.
    pub grid: Option<usize>,
    /// The largest grid.
    pub max_grid: usize,
}

fn err(file: &Path, key: &str, message: impl Into<String>) -> ScenarioError {
    ScenarioError::at(file, key, message)
}

fn finite(file: &Path, key: &str, x: f64) -> Result<f64, ScenarioError> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(err(
            file,
            key,
            format!("must be a finite number, found {x}"),
        ))
    }
}

/// A grid size: an integer from MIN_GRID to MAX_GRID.
fn grid_value(file: &Path, key: &str, v: &Value) -> Result<usize, ScenarioError> {
    match v.as_integer().and_then(|i| usize::try_from(i).ok()) {
        Some(n) if (MIN_GRID..=MAX_GRID).contains(&n) => Ok(n),
        _ => Err(err(
            file,
            key,
            format!(
                "must be a positive integer from {MIN_GRID} to {MAX_GRID} (grid points), found {v}"
            ),
        )),
    }
}

/// Checks what the mean field needs of the model and the start, and `[density]`; `None` for
/// other models (their `[density]`, if any, is not read).
pub fn density_spec(
    raw: Option<&RawDensity>,
    file: &Path,
    (model, tokens, run): (&ModelSpec, &TokenSpec, &RunSpec),
) -> Result<Option<DensitySpec>, ScenarioError> {
    if run.model != ModelKind::MeanField {
        return Ok(None);
    }
    check_model(model, file)?;
    if raw.is_none() && matches!(tokens.init, InitKind::File | InitKind::Embedding) {
        return Err(err(
            file,
            "tokens.init",
            format!(
                "the mean field starts from a density, not from tokens; tokens.init = \"{}\" needs a [density] table (init = \"uniform\" | \"poisson\" | \"von-mises\")",
                tokens.init
            ),
        ));
    }
    let empty = RawDensity::default();
    let raw = raw.unwrap_or(&empty);
    let init = match raw.init.as_deref() {
        None if tokens.init == InitKind::Poisson => "poisson",
        None => "uniform",
        Some(w) => w,
    };
    let init = match init {
        "uniform" => DensityInit::Uniform,
        "poisson" => {
            let r0 = finite(file, "density.r0", raw.r0.unwrap_or(tokens.r0))?;
            if !(0.0..1.0).contains(&r0) {
                return Err(err(
                    file,
                    "density.r0",
                    format!("must be in [0, 1), found {r0}"),
                ));
            }
            let phi0 = finite(file, "density.phi0", raw.phi0.unwrap_or(tokens.phi0))?;
            DensityInit::Poisson { r0, phi0 }
        }
        "von-mises" => {
            let kappa = finite(file, "density.kappa", raw.kappa.unwrap_or(0.0))?;
            if kappa < 0.0 {
                return Err(err(
                    file,
                    "density.kappa",
                    format!("must be >= 0, found {kappa}"),
                ));
            }
            let mean = finite(file, "density.mean", raw.mean.unwrap_or(0.0))?;
            DensityInit::VonMises { kappa, mean }
        }
        other => {
            return Err(err(
                file,
                "density.init",
                format!("unknown density `{other}` (valid: uniform, poisson, von-mises)"),
            ))
        }
    };
    let modes = modes(raw.modes.as_deref().unwrap_or(&[]), file)?;
    let max_grid = match &raw.max_grid {
        Some(v) => grid_value(file, "density.max_grid", v)?,
        None => DEFAULT_MAX_GRID,
    };
    let grid = match &raw.grid {
        Some(v) => {
            let g = grid_value(file, "density.grid", v)?;
            if g > max_grid {
                return Err(err(
                    file,
                    "density.grid",
                    format!("must be at most density.max_grid = {max_grid}, found {g}"),
                ));
            }
            Some(g)
        }
        None => None,
    };
    let spec = DensitySpec {
        init,
        modes,
        grid,
        max_grid,
    };
    if model.d >= 3 {
        check_axisymmetric(&spec, file, model.d)?;
    }
    Ok(Some(spec))
}

/// `density.modes`: rows [k, a] or [k, a, phase], k an integer >= 1, a and phase finite.
fn modes(rows: &[Vec<f64>], file: &Path) -> Result<Vec<(u32, f64, f64)>, ScenarioError> {
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let key = format!("density.modes[{i}]");
            if !(2..=3).contains(&row.len()) || row.iter().any(|x| !x.is_finite()) {
                return Err(err(
                    file,
                    &key,
                    "must be [k, a] or [k, a, phase] with finite numbers",
                ));
            }
            let k = row[0];
            if k.fract() != 0.0 || !(1.0..=65536.0).contains(&k) {
                return Err(err(
                    file,
                    &key,
                    format!("k must be an integer from 1 to 65536, found {k}"),
                ));
            }
            Ok((k as u32, row[1], row.get(2).copied().unwrap_or(0.0)))
        })
        .collect()
}

/// What the mean field cannot run: a mask, pre-LN, positions; in d >= 3, A or V (of any
/// layer, factored heads formed) not a multiple of I.
fn check_model(model: &ModelSpec, file: &Path) -> Result<(), ScenarioError> {
    let refuse = |key: &str, why: &str| Err(err(file, key, format!("the mean-field model {why}")));
    if model.mask != MaskKind::None {
        return refuse(
            "model.mask",
            "is the density of exchangeable tokens: a mask orders them (use model.mask = \"none\")",
        );
    }
    if model.normalization != NormalizationKind::Post {
        return refuse(
            "model.normalization",
            "moves tokens on the sphere (post-LN): use normalization = \"post\"",
        );
    }
    if model.position != super::position::PositionSpec::None {
        return refuse(
            "model.position",
            "is the density of exchangeable tokens: positions order them (remove model.position)",
        );
    }
    if model.d >= 3 {
        if model.layers.is_empty() {
            check_scalar_heads(&model.heads, &model.factored, "model", model.d, file)?;
        }
        for (i, l) in model.layers.iter().enumerate() {
            let key = format!("model.layers[{i}]");
            check_scalar_heads(&l.heads, &l.factored, &key, model.d, file)?;
        }
    }
    Ok(())
}

/// d >= 3: every head's A and V (a factored head's A = Q K^T / sqrt(d_h), V = (V O)^T) must
/// be multiples of I (to 1e-12 relative), so that an axisymmetric density stays axisymmetric.
/// `at` is the key of the layer (`model` or `model.layers[i]`).
fn check_scalar_heads(
    heads: &[super::HeadSpec],
    factored: &[super::FactorSpec],
    at: &str,
    d: usize,
    file: &Path,
) -> Result<(), ScenarioError> {
    let scalar = |m: &nalgebra::DMatrix<f64>| {
        let c = m[(0, 0)];
        let tol = 1e-12 * c.abs().max(1.0);
        (0..m.nrows()).all(|i| {
            (0..m.ncols()).all(|j| (m[(i, j)] - if i == j { c } else { 0.0 }).abs() <= tol)
        })
    };
    let formed = factored.iter().map(|f| {
        let scale = 1.0 / (f.q.ncols() as f64).sqrt();
        ((&f.q * f.k.transpose()) * scale, (&f.v * &f.o).transpose())
    });
    let pairs: Vec<_> = heads
        .iter()
        .map(|h| (h.a.clone(), h.v.clone()))
        .chain(formed)
        .collect();
    for (i, (a, v)) in pairs.iter().enumerate() {
        for (m, name) in [(a, "A"), (v, "V")] {
            if scalar(m) {
                continue;
            }
            let key = if i >= heads.len() {
                format!("{at}.heads (factored head {}: its {name})", i - heads.len())
            } else if pairs.len() == 1 {
                format!("{at}.{name}")
            } else {
                format!("{at}.heads[{i}].{name}")
            };
            return Err(err(
                file,
                &key,
                format!(
                    "the mean-field model in d = {d} needs A and V multiples of the identity (a I, v I: the axisymmetric problem); use d = 2 for other matrices"
                ),
            ));
        }
    }
    Ok(())
}

/// d >= 3: the start must be axisymmetric about the axis e (u = <x, e>): uniform or von Mises
/// with mean 0 (rho ~ e^{kappa u}), modes [l, a] without a phase.
fn check_axisymmetric(spec: &DensitySpec, file: &Path, d: usize) -> Result<(), ScenarioError> {
    match spec.init {
        DensityInit::Poisson { .. } => {
            return Err(err(
                file,
                "density.init",
                format!("poisson is a density on the circle (d = 2); in d = {d} the start is axisymmetric: init = \"uniform\" or \"von-mises\" (rho ~ e^{{kappa u}})"),
            ))
        }
        DensityInit::VonMises { mean, .. } if mean != 0.0 => {
            return Err(err(
                file,
                "density.mean",
                format!("in d = {d} the von Mises start is rho ~ e^{{kappa u}} about the axis (u = <x, e>): remove mean, found {mean}"),
            ))
        }
        _ => {}
    }
    if let Some(i) = spec.modes.iter().position(|m| m.2 != 0.0) {
        return Err(err(
            file,
            &format!("density.modes[{i}]"),
            format!("in d = {d} a mode is [l, a] (a times the degree-l Gegenbauer polynomial in u): it has no phase, found {}", spec.modes[i].2),
        ));
    }
    Ok(())
}

/// `[density]` as resolved.
pub fn density_table(spec: &DensitySpec) -> toml::Table {
    let mut t = toml::Table::new();
    match spec.init {
        DensityInit::Uniform => {
            t.insert("init".into(), Value::String("uniform".into()));
        }
        DensityInit::Poisson { r0, phi0 } => {
            t.insert("init".into(), Value::String("poisson".into()));
            t.insert("r0".into(), Value::Float(r0));
            t.insert("phi0".into(), Value::Float(phi0));
        }
        DensityInit::VonMises { kappa, mean } => {
            t.insert("init".into(), Value::String("von-mises".into()));
            t.insert("kappa".into(), Value::Float(kappa));
            t.insert("mean".into(), Value::Float(mean));
        }
    }
    let modes = spec
        .modes
        .iter()
        .map(|&(k, a, p)| {
            Value::Array(vec![
                Value::Integer(k as i64),
                Value::Float(a),
                Value::Float(p),
            ])
        })
        .collect();
    t.insert("modes".into(), Value::Array(modes));
    if let Some(g) = spec.grid {
        t.insert("grid".into(), Value::Integer(g as i64));
    }
    t.insert("max_grid".into(), Value::Integer(spec.max_grid as i64));
    t
}
