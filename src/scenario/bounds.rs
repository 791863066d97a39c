//! Work that could never finish, refused up front (docs/DESIGN.md, "Bounds on work").
//!
//! A fixed-step method takes ceil(t_max / dt) steps; a looped stack of L layers of total
//! time T crosses ceil(t_max / T) L layer boundaries, each restarting the integrator and
//! recording a row of `layers.csv`. Both counts are bounded:
//!
//! ```text
//! t_max / dt <= MAX_FIXED_STEPS,      ceil(t_max / T) L <= MAX_LAYER_SEGMENTS.
//! ```

use std::path::Path;

use super::error::ScenarioError;
use super::layers::Stack;
use super::MethodKind;

/// Most steps a fixed-step method (`rk4`) may take to reach t_max.
pub const MAX_FIXED_STEPS: f64 = 1e9;

/// Most layer segments (layer boundaries) a stack may be integrated over up to t_max.
pub const MAX_LAYER_SEGMENTS: f64 = 1e6;

/// Refuses a fixed step whose count to t_max exceeds [`MAX_FIXED_STEPS`].
pub fn check_fixed_steps(
    method: MethodKind,
    dt: f64,
    t_max: f64,
    file: &Path,
) -> Result<(), ScenarioError> {
    if method != MethodKind::Rk4 {
        return Ok(());
    }
    let steps = (t_max / dt).ceil();
    if steps <= MAX_FIXED_STEPS {
        return Ok(());
    }
    Err(ScenarioError::at(
        file,
        "solver.dt",
        format!(
            "rk4 with dt = {dt:e} needs {steps:.2e} steps to reach t = {t_max} (at most {MAX_FIXED_STEPS:e}); raise dt or use an adaptive method"
        ),
    ))
}

/// Refuses a stack whose layer segments up to t_max exceed [`MAX_LAYER_SEGMENTS`].
pub fn check_layer_segments(stack: &Stack, t_max: f64, file: &Path) -> Result<(), ScenarioError> {
    let layers = stack.layers.len() as f64;
    let pass: f64 = stack.layers.iter().map(|l| l.duration).sum();
    let segments = if stack.looped {
        (t_max / pass).ceil().max(1.0) * layers
    } else {
        layers
    };
    if segments <= MAX_LAYER_SEGMENTS {
        return Ok(());
    }
    Err(ScenarioError::at(
        file,
        stack.duration_key.as_str(),
        format!(
            "the run up to t = {t_max} crosses {segments:.2e} layer boundaries ({layers} layers a pass of time {pass:e}), at most {MAX_LAYER_SEGMENTS:e}; lengthen the layers or shorten the run"
        ),
    ))
}

/// Largest t_max times the field's scale S accepted for a stack (see [`check_field_scale`]).
pub const MAX_SCALED_TIME: f64 = 1e15;

/// Refuses a stack whose field is so large that the run cannot finish: with
/// S = max over layers of sum_h |V_h|_F max(1, |beta| |A_h|_F), a bound on how fast the tokens
/// turn, an accurate integrator needs of the order of S t_max steps; S t_max must be at most
/// [`MAX_SCALED_TIME`] (weights of a trained model give S ~ 1e2-1e4).
pub fn check_field_scale(
    stack: &Stack,
    beta: f64,
    t_max: f64,
    file: &Path,
) -> Result<(), ScenarioError> {
    let scale = stack
        .layers
        .iter()
        .map(|l| {
            let formed = l
                .heads
                .iter()
                .map(|h| h.v.norm() * (beta.abs() * h.a.norm()).max(1.0));
            // Factored heads: |(V O)^T| <= |V| |O| and |Q K^T / sqrt(d_h)| <= |Q| |K| / sqrt(d_h).
            let factored = l.factored.iter().map(|f| {
                let a = f.q.norm() * f.k.norm() / (f.q.ncols().max(1) as f64).sqrt();
                f.v.norm() * f.o.norm() * (beta.abs() * a).max(1.0)
            });
            formed.chain(factored).sum::<f64>()
        })
        .fold(0.0, f64::max);
    if scale * t_max <= MAX_SCALED_TIME {
        return Ok(());
    }
    let key = if stack.duration_key.starts_with("model.checkpoint") {
        "model.checkpoint"
    } else {
        "model.layers"
    };
    Err(ScenarioError::at(
        file,
        key,
        format!(
            "the field's scale S = sum |V| max(1, beta |A|) = {scale:.2e} over t_max = {t_max} needs about {:.2e} steps (S t_max at most {MAX_SCALED_TIME:e}); the weights are too large",
            scale * t_max
        ),
    ))
}
