//! The real-transformer keys of `[model]`: `beta = { log_n = gamma }`, `mask` (with its
//! checkpoint default) and `normalization`, and the models that hold under them
//! (docs/MATH.md §9).
//!
//! ```text
//! beta = gamma ln n      (long context, gamma > 0)
//! ```

use std::path::Path;

use toml::Value;

use super::error::ScenarioError;
use super::kinds::{MaskKind, ModelKind, NormalizationKind};
use super::layers::{self, OpenCheckpoint};
use super::matrix::describe;
use super::schema::{RawModel, RawTokens};
use super::ModelSpec;
use crate::checkpoint::Format;

/// `model.beta`: a finite number, or `{ log_n = gamma }` with gamma > 0, giving gamma ln n.
pub fn beta(value: &Value, tokens: &RawTokens, file: &Path) -> Result<f64, ScenarioError> {
    let err = |key: &str, message: String| ScenarioError::at(file, key, message);
    let number = |v: &Value| match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    };
    if let Some(beta) = number(value) {
        return finite_number(beta, "model.beta", file);
    }
    let Value::Table(table) = value else {
        return Err(err(
            "model.beta",
            format!(
                "expected a number or {{ log_n = gamma }}, found {}",
                describe(value)
            ),
        ));
    };
    if let Some(other) = table.keys().find(|k| k.as_str() != "log_n") {
        return Err(err(
            &format!("model.beta.{other}"),
            "unknown key (the table form is { log_n = gamma })".to_string(),
        ));
    }
    let Some(gamma_value) = table.get("log_n") else {
        return Err(err(
            "model.beta.log_n",
            "missing: the table form is { log_n = gamma }".to_string(),
        ));
    };
    let gamma = number(gamma_value).ok_or_else(|| {
        err(
            "model.beta.log_n",
            format!("expected a number, found {}", describe(gamma_value)),
        )
    })?;
    if !(gamma.is_finite() && gamma > 0.0) {
        return Err(err(
            "model.beta.log_n",
            format!("gamma must be a finite number > 0, found {gamma}"),
        ));
    }
    let n = layers::token_count(tokens, file)?;
    if n < 1 {
        return Err(err(
            "tokens.n",
            format!("must be an integer >= 1, found {n}"),
        ));
    }
    Ok(gamma * (n as f64).ln())
}

fn finite_number(value: f64, key: &str, file: &Path) -> Result<f64, ScenarioError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(ScenarioError::at(
            file,
            key,
            format!("{value} is not a finite number"),
        ))
    }
}

/// `model.mask` as written, else causal for a gpt2 checkpoint (a decoder) and none otherwise.
pub fn mask(m: &RawModel, checkpoint: Option<&OpenCheckpoint>) -> MaskKind {
    m.mask.unwrap_or(match checkpoint.map(|c| c.format) {
        Some(Format::Gpt2 | Format::Llama) => MaskKind::Causal,
        _ => MaskKind::None,
    })
}

/// Only the full model holds under a causal mask or pre-LN: the reductions and the group
/// model need every token to feel the same field of the tokens on the sphere.
pub fn check_run_model(
    run: ModelKind,
    model: &ModelSpec,
    file: &Path,
) -> Result<(), ScenarioError> {
    if run == ModelKind::Full {
        return Ok(());
    }
    let reason = if model.mask == MaskKind::Causal {
        "under a causal mask (model.mask = \"causal\") token k feels only the tokens before it"
    } else if model.normalization == NormalizationKind::Pre {
        "with pre-LN (model.normalization = \"pre\") the tokens leave the sphere"
    } else if model.normalization == NormalizationKind::Peri {
        "with peri-LN (model.normalization = \"peri\") the tokens leave the sphere"
    } else if model.normalization == NormalizationKind::Ngpt {
        "with nGPT (model.normalization = \"ngpt\") each token moves at its own speed alpha / |a_k|"
    } else if model.position != super::PositionSpec::None {
        "with positions (model.position) the tokens are not exchangeable"
    } else {
        return Ok(());
    };
    Err(ScenarioError::at(
        file,
        "run.model",
        format!("the {run} model does not hold here: {reason}; use run.model = \"full\""),
    ))
}
