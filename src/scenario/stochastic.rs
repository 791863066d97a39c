//! `[noise]` and `[ensemble]`: the temperature of the noisy tokens (docs/MATH.md, "Noise") and the
//! number of runs over consecutive seeds.
//!
//! ```text
//! [noise]                 dX_k = F_k dt + sqrt(2 T) P_{X_k} o dW_k
//! temperature = T         T >= 0, finite
//! seed = s                default: tokens.seed
//! dt = h                  largest step, 0 < h <= sample spacing; default min(0.01, spacing)
//!
//! [ensemble]
//! runs = N                1 <= N <= MAX_RUNS: seeds (tokens and noise) s, s + 1, ..., s + N - 1
//! ```

use std::path::Path;

use serde::Deserialize;
use toml::Value;

use super::error::ScenarioError;
use super::kinds::ModelKind;
use super::{RunSpec, TimeSpec, TokenSpec};

/// The default largest noise step (capped at the sample spacing).
pub const DEFAULT_NOISE_DT: f64 = 0.01;
/// The temperature's share of the step rule: a step lets a lone token's <X, X_0> decay by at
/// most this much, (d - 1) T h <= TEMPERATURE_TURN (docs/MATH.md §12).
pub const TEMPERATURE_TURN: f64 = 0.05;
/// Most steps a noisy run may take to reach t_end (as many as `rk4` may).
pub const MAX_NOISE_STEPS: f64 = 1e9;
/// Most runs of an ensemble (each run's row and its order series are kept in memory).
pub const MAX_RUNS: usize = 100_000;

/// `[noise]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNoise {
    pub temperature: f64,
    pub seed: Option<i64>,
    pub dt: Option<f64>,
}

/// `[ensemble]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEnsemble {
    pub runs: i64,
}

/// `[noise]`, checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseSpec {
    /// The temperature T >= 0 (each token diffuses on the sphere with diffusion T).
    pub temperature: f64,
    /// Seed of the Brownian increments.
    pub seed: u64,
    /// The largest step of the stochastic integrator, as written (or its default).
    pub dt: f64,
    /// The largest step the integrator takes: `dt`, at most TEMPERATURE_TURN / ((d - 1) T).
    pub largest_step: f64,
}

/// The largest step of a noisy run in dimension `d`: `dt`, and (d - 1) T h <= TEMPERATURE_TURN.
pub fn largest_step(dt: f64, temperature: f64, d: usize) -> f64 {
    let by_temperature = TEMPERATURE_TURN / ((d as f64 - 1.0).max(1.0) * temperature);
    dt.min(by_temperature)
}

/// `[ensemble]`, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnsembleSpec {
    /// Number of runs, 1 ..= [`MAX_RUNS`].
    pub runs: usize,
}

/// Checks `[noise]`: T, the step against the sample spacing, the seed, and the model (only
/// `full` has tokens that diffuse).
pub fn noise_spec(
    raw: Option<&RawNoise>,
    file: &Path,
    (tokens, time, run): (&TokenSpec, &TimeSpec, &RunSpec),
    d: usize,
) -> Result<Option<NoiseSpec>, ScenarioError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let err = |key: &str, message: String| ScenarioError::at(file, key, message);
    let t = raw.temperature;
    if !(t.is_finite() && t >= 0.0) {
        return Err(err(
            "noise.temperature",
            format!("must be a finite number >= 0, found {t}"),
        ));
    }
    if !matches!(run.model, ModelKind::Full | ModelKind::MeanField) {
        return Err(err(
            "noise.temperature",
            format!(
                "noise moves the tokens of the full model only; run.model = \"{}\" is a \
                 deterministic reduced model (remove [noise] or run --model full)",
                run.model
            ),
        ));
    }
    let spacing = time.t_end / (time.samples - 1) as f64;
    let dt = match raw.dt {
        Some(dt) if !(dt.is_finite() && dt > 0.0) => {
            return Err(err(
                "noise.dt",
                format!("must be a finite number > 0, found {dt}"),
            ))
        }
        Some(dt) if dt > spacing * (1.0 + 1e-12) => {
            return Err(err(
                "noise.dt",
                format!(
                "must be at most the sample spacing t_end / (samples - 1) = {spacing}, found {dt}"
            ),
            ))
        }
        Some(dt) => dt,
        None => DEFAULT_NOISE_DT.min(spacing),
    };
    let largest = largest_step(dt, t, d);
    let steps = (time.t_end / largest).ceil();
    // The mean field takes the temperature into its diffusion: no noise steps.
    if steps > MAX_NOISE_STEPS && run.model != ModelKind::MeanField {
        return Err(err(
            "noise.dt",
            format!(
                "the noisy run needs {steps:.2e} steps of at most {largest:e} to reach t_end = {} (dt = {dt:e}, and (d - 1) T dt <= {TEMPERATURE_TURN}); at most {MAX_NOISE_STEPS:e}: raise noise.dt or shorten time.t_end",
                time.t_end
            ),
        ));
    }
    let seed = match raw.seed {
        None => tokens.seed,
        Some(s) => u64::try_from(s)
            .map_err(|_| err("noise.seed", format!("must be an integer >= 0, found {s}")))?,
    };
    Ok(Some(NoiseSpec {
        temperature: t,
        seed,
        dt,
        largest_step: largest,
    }))
}

/// Checks `[ensemble]`: 1 <= runs <= [`MAX_RUNS`], and the last seeds still fit.
pub fn ensemble_spec(
    raw: Option<&RawEnsemble>,
    file: &Path,
    tokens: &TokenSpec,
    noise: Option<&NoiseSpec>,
) -> Result<Option<EnsembleSpec>, ScenarioError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let runs = match usize::try_from(raw.runs) {
        Ok(r) if (1..=MAX_RUNS).contains(&r) => r,
        _ => {
            return Err(ScenarioError::at(
                file,
                "ensemble.runs",
                format!(
                    "must be an integer from 1 to {MAX_RUNS} (every run's row and order series are kept), found {}",
                    raw.runs
                ),
            ))
        }
    };
    let largest = tokens.seed.max(noise.map_or(0, |n| n.seed));
    if largest
        .checked_add(runs as u64 - 1)
        .is_none_or(|s| s > i64::MAX as u64)
    {
        return Err(ScenarioError::at(
            file,
            "ensemble.runs",
            format!("the seeds {largest} + {runs} - 1 overflow a 63-bit integer"),
        ));
    }
    Ok(Some(EnsembleSpec { runs }))
}

/// `[noise]` as resolved (every default filled in).
pub fn noise_table(noise: &NoiseSpec) -> toml::Table {
    let mut table = toml::Table::new();
    table.insert("temperature".into(), Value::Float(noise.temperature));
    table.insert("seed".into(), Value::Integer(noise.seed as i64));
    table.insert("dt".into(), Value::Float(noise.dt));
    table
}

/// `[ensemble]` as resolved.
pub fn ensemble_table(ensemble: &EnsembleSpec) -> toml::Table {
    let mut table = toml::Table::new();
    table.insert("runs".into(), Value::Integer(ensemble.runs as i64));
    table
}
