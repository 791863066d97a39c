//! `[lyapunov]`: the first k Lyapunov exponents of the run (docs/MATH.md §15).
//!
//! ```text
//! [lyapunov]
//! exponents = k     1 <= k <= n (d - 1) (pre- and peri-LN: n d), default 1
//! transient = t0    0 <= t0 < t_end, default t_end / 10
//! interval = h      h > 0, at most MAX_INTERVALS intervals in t_end, default 1
//! ```

use std::path::Path;

use serde::Deserialize;
use toml::Value;

use super::error::ScenarioError;
use super::kinds::ModelKind;
use super::{ModelSpec, RunSpec, TimeSpec, TokenSpec};

/// Most re-orthonormalisation intervals in a run (each leaves a row of `lyapunov.csv`).
pub const MAX_INTERVALS: f64 = 1e7;

/// `[lyapunov]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLyapunov {
    pub exponents: Option<i64>,
    pub transient: Option<f64>,
    pub interval: Option<f64>,
}

/// `[lyapunov]`, checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LyapunovSpec {
    /// k, how many exponents.
    pub exponents: usize,
    /// When the logarithms start to count.
    pub transient: f64,
    /// Time between two re-orthonormalisations.
    pub interval: f64,
}

impl LyapunovSpec {
    /// The defaults (one exponent, transient t_end / 10, interval 1): what a run computes by
    /// itself when its tail swings without a period.
    pub fn default_for(t_end: f64) -> Self {
        LyapunovSpec {
            exponents: 1,
            transient: t_end / 10.0,
            interval: 1.0,
        }
    }
}

/// The dimension of the tangent spaces: n (d - 1) on the spheres, n d for a pre- or peri-LN stream.
pub fn tangent_dimension(model: &ModelSpec, tokens: &TokenSpec) -> usize {
    if !model.normalization.on_sphere() {
        tokens.n.saturating_mul(model.d)
    } else {
        tokens.n.saturating_mul(model.d.saturating_sub(1))
    }
}

/// Checks `[lyapunov]`: the number of exponents against the tangent dimension, the transient
/// against t_end, the interval; the run must be deterministic and have tokens.
pub fn lyapunov_spec(
    raw: Option<&RawLyapunov>,
    file: &Path,
    (model, tokens, time, run): (&ModelSpec, &TokenSpec, &TimeSpec, &RunSpec),
    noisy: bool,
) -> Result<Option<LyapunovSpec>, ScenarioError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let err = |key: &str, message: String| Err(ScenarioError::at(file, key, message));
    if run.model == ModelKind::Oa {
        return err(
            "lyapunov",
            "the exponents follow the tokens; run.model = \"oa\" has none (use full, group or clusters)".into(),
        );
    }
    if noisy {
        return err(
            "lyapunov",
            "the exponents are those of the deterministic flow: remove [noise] or [lyapunov]"
                .into(),
        );
    }
    let dimension = tangent_dimension(model, tokens);
    let k = raw.exponents.unwrap_or(1);
    if k < 1 || k as u64 > dimension as u64 {
        let bound = if model.normalization.on_sphere() {
            "n (d - 1)"
        } else {
            "n d (a pre- or peri-LN stream is not on the spheres)"
        };
        return err(
            "lyapunov.exponents",
            format!("must be an integer from 1 to {bound} = {dimension} (the tangent dimension), found {k}"),
        );
    }
    let transient = raw.transient.unwrap_or(time.t_end / 10.0);
    if !(transient.is_finite() && transient >= 0.0 && transient < time.t_end) {
        return err(
            "lyapunov.transient",
            format!(
                "must be a number with 0 <= transient < t_end = {}, found {transient}",
                time.t_end
            ),
        );
    }
    let interval = raw.interval.unwrap_or(1.0);
    if !(interval.is_finite() && interval > 0.0) {
        return err(
            "lyapunov.interval",
            format!("must be a finite number > 0, found {interval}"),
        );
    }
    if (time.t_end - transient) / interval > MAX_INTERVALS {
        return err(
            "lyapunov.interval",
            format!(
                "(t_end - transient) / interval must be at most {MAX_INTERVALS:e} (one row of lyapunov.csv each), found {:e}",
                (time.t_end - transient) / interval
            ),
        );
    }
    Ok(Some(LyapunovSpec {
        exponents: k as usize,
        transient,
        interval,
    }))
}

/// `[lyapunov]` as resolved (every default filled in).
pub fn lyapunov_table(spec: &LyapunovSpec) -> toml::Table {
    let mut table = toml::Table::new();
    table.insert("exponents".into(), Value::Integer(spec.exponents as i64));
    table.insert("transient".into(), Value::Float(spec.transient));
    table.insert("interval".into(), Value::Float(spec.interval));
    table
}
