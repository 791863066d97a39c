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

/// Largest distance (radians) a token may be bounded to travel up to t_max: the speed bound
/// S of [`check_field_rate`] times t_max. An adaptive integrator takes at least of the order of
/// S t_max / (its largest accurate angle per step) steps where the tokens do move that fast.
pub const MAX_TRAVEL: f64 = 1e12;

/// Largest speed bound S (and factor beta |A| or |V|) accepted at all: beyond it the
/// arithmetic of the field (squared norms, the integrator's error estimate) overflows.
pub const MAX_RATE: f64 = 1e150;

/// Largest beta |A| accepted: every score beta <x, A y> and the difference of two stays a
/// double (sa's softmax is shifted by its largest score, so its speed bound does not grow
/// with beta; lsa and usa are held by [`MAX_RATE`] long before).
pub const MAX_SCORE: f64 = 1e307;

/// The weights of one head as the speed bound sees them: |A| and |V| (spectral norms, or
/// bounds of them; factored heads: |Q| |K| / sqrt(d_h) and |V| |O|).
#[derive(Debug, Clone, Copy, PartialEq)]
struct HeadNorms {
    a: f64,
    v: f64,
}

/// How a head's norms are taken: a cheap upper bound of the spectral norm, or its estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
enum NormKind {
    Bound,
    Estimate,
}

/// Which part of the weights a refusal names.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Culprit {
    Values,
    Scores,
    Beta,
    Slopes,
    Alpha,
    Time,
}

impl Culprit {
    /// What to lower.
    fn advice(self) -> &'static str {
        match self {
            Culprit::Values => "scale the values down",
            Culprit::Scores | Culprit::Beta => "lower beta or the weights' scale",
            Culprit::Slopes => "lower the ALiBi slopes",
            Culprit::Alpha => "lower model.ngpt_alpha",
            Culprit::Time => "shorten the run",
        }
    }
}

/// Refuses a field whose speed bound overflows the arithmetic or whose work up to t_max is
/// past [`MAX_TRAVEL`]. With a = |A|, v = |V| (spectral norms) per head, a token's speed
/// |x'| is at most, summed over the heads of a layer (largest layer),
///
/// ```text
/// lsa: |beta| a v,      usa: v e^{|beta| a},      sa: v
/// ```
///
/// (sa's weights sum to 1; pre-LN moves the stream by the same attention output). ALiBi adds
/// -m |p_k - p_j| to lsa's weights, so lsa's bound grows by v m (n - 1) per head (usa's and
/// sa's weights do not grow with it). Peri-LN moves the stream by a_k / |a_k| (S = 1) and nGPT
/// the tokens by alpha P a_k / |a_k| (S = alpha), whatever the heads. The check
/// first uses min(|M|_F, sqrt(|M|_1 |M|_inf)) >= |M|_2 and, only when that refuses, the
/// spectral norm itself by power iteration (so an identity in d = 100 counts 1, not 10).
pub fn check_field_rate(
    model: &super::ModelSpec,
    (time, n): (&super::TimeSpec, usize),
    keys: (&str, &str),
    file: &Path,
) -> Result<(), ScenarioError> {
    let refusal = |kind| rate_refusal(model, (time.t_max, n), kind);
    match refusal(NormKind::Bound).and_then(|_| refusal(NormKind::Estimate)) {
        None => Ok(()),
        Some((culprit, message)) => {
            let key = match culprit {
                Culprit::Values => keys.1,
                Culprit::Scores => keys.0,
                Culprit::Beta => "model.beta",
                Culprit::Slopes => "model.position",
                Culprit::Alpha => "model.ngpt_alpha",
                Culprit::Time if time.t_max > time.t_end => "time.t_max",
                Culprit::Time => "time.t_end",
            };
            Err(ScenarioError::at(file, key, message))
        }
    }
}

/// The reason the field with norms of `kind` is refused, if it is.
fn rate_refusal(
    model: &super::ModelSpec,
    (t_max, n): (f64, usize),
    kind: NormKind,
) -> Option<(Culprit, String)> {
    let layers = layer_norms(model, kind);
    let beta = model.beta.abs();
    let largest = |f: fn(&HeadNorms) -> f64| {
        layers.iter().flatten().map(f).fold(
            0.0,
            |m: f64, x| if x.is_nan() { f64::INFINITY } else { m.max(x) },
        )
    };
    let (a, v) = (largest(|h| h.a), largest(|h| h.v));
    if !within(v, MAX_RATE) {
        return Some((
            Culprit::Values,
            format!("|V| = {v:.2e} overflows the field's arithmetic (at most {MAX_RATE:e}); scale the values down"),
        ));
    }
    // beta |A| is too large: blame the larger factor.
    let score_culprit = if a >= beta {
        Culprit::Scores
    } else {
        Culprit::Beta
    };
    if !within(beta * a, MAX_SCORE) {
        return Some((
            score_culprit,
            format!("beta |A| = {:.2e} overflows the scores' arithmetic (at most {MAX_SCORE:e}); lower beta or the scores' scale", beta * a),
        ));
    }
    if model.kernel == super::KernelKind::Usa && !within(beta * a, MAX_RATE.ln()) {
        return Some((
            score_culprit,
            format!(
                "usa weighs by e^(beta |A|) = e^{:.4e}, which overflows the field's arithmetic (beta |A| at most ln {MAX_RATE:e} = {:.1}); lower beta or the scores' scale",
                beta * a,
                MAX_RATE.ln()
            ),
        ));
    }
    let (speed, formula, culprit) = speed_bound(model, &layers, n);
    if !within(speed, MAX_RATE) {
        return Some((
            culprit,
            format!("the tokens' speed bound S = {formula} = {speed:.2e} overflows the field's arithmetic (at most {MAX_RATE:e}); {}", culprit.advice()),
        ));
    }
    let travel = speed * t_max;
    (travel > MAX_TRAVEL).then(|| {
        (
            Culprit::Time,
            format!(
                "the tokens' speed bound S = {formula} = {speed:.2e} over t_max = {t_max:e} gives S t = {travel:.2e} radians of work, beyond the bound {MAX_TRAVEL:e}; shorten the run or lower S's factors"
            ),
        )
    })
}

/// x <= limit, false for NaN.
fn within(x: f64, limit: f64) -> bool {
    x <= limit
}

/// The tokens' speed bound S of [`check_field_rate`] (largest layer), its formula, and what to
/// blame when it overflows.
fn speed_bound(
    model: &super::ModelSpec,
    layers: &[Vec<HeadNorms>],
    n: usize,
) -> (f64, &'static str, Culprit) {
    use super::{KernelKind, NormalizationKind};
    match model.normalization {
        NormalizationKind::Peri => {
            return (1.0, "1 (peri-LN moves by a_k / |a_k|)", Culprit::Values)
        }
        NormalizationKind::Ngpt => return (model.ngpt_alpha, "alpha (nGPT)", Culprit::Alpha),
        NormalizationKind::Post | NormalizationKind::Pre => {}
    }
    let beta = model.beta.abs();
    let lsa = model.kernel == KernelKind::Lsa;
    let alibi = lsa && matches!(model.position, super::PositionSpec::Alibi(_));
    let reach = n.saturating_sub(1) as f64;
    let speed = layers
        .iter()
        .map(|heads| {
            let slopes = model.position.slopes(heads.len(), n).filter(|_| alibi);
            let slope = |i: usize| {
                slopes
                    .as_ref()
                    .and_then(|m| m.get(i))
                    .map_or(0.0, |m| m.abs())
            };
            heads
                .iter()
                .enumerate()
                .map(|(i, h)| head_speed(model.kernel, beta, h) + h.v * slope(i) * reach)
                .sum::<f64>()
        })
        .fold(
            0.0,
            |m: f64, x| if x.is_nan() { f64::INFINITY } else { m.max(x) },
        );
    let (formula, culprit) = match model.kernel {
        KernelKind::Lsa if alibi => (
            "sum over heads of |V| (|beta| |A| + m (n - 1))",
            Culprit::Slopes,
        ),
        KernelKind::Lsa => ("sum over heads of |beta| |A| |V|", Culprit::Beta),
        KernelKind::Usa => ("sum over heads of |V| e^(|beta| |A|)", Culprit::Beta),
        KernelKind::Sa => ("sum over heads of |V|", Culprit::Values),
    };
    (speed, formula, culprit)
}

/// A token's speed bound for one head (see [`check_field_rate`]).
fn head_speed(kernel: super::KernelKind, beta: f64, h: &HeadNorms) -> f64 {
    match kernel {
        super::KernelKind::Lsa => beta * h.a * h.v,
        super::KernelKind::Usa => h.v * (beta * h.a).exp(),
        super::KernelKind::Sa => h.v,
    }
}

/// The heads' norms of every layer (one layer without a stack).
fn layer_norms(model: &super::ModelSpec, kind: NormKind) -> Vec<Vec<HeadNorms>> {
    let norm = |m: &nalgebra::DMatrix<f64>| match kind {
        NormKind::Bound => spectral_norm_bound(m),
        NormKind::Estimate => spectral_norm_estimate(m),
    };
    let layer = |heads: &[super::HeadSpec], factored: &[super::FactorSpec]| -> Vec<HeadNorms> {
        let formed = heads.iter().map(|h| HeadNorms {
            a: norm(&h.a),
            v: norm(&h.v),
        });
        let factored = factored.iter().map(|f| HeadNorms {
            a: norm(&f.q) * norm(&f.k) / (f.q.ncols().max(1) as f64).sqrt(),
            v: norm(&f.v) * norm(&f.o),
        });
        formed.chain(factored).collect()
    };
    if model.layers.is_empty() {
        return vec![layer(&model.heads, &model.factored)];
    }
    model
        .layers
        .iter()
        .map(|l| layer(&l.heads, &l.factored))
        .collect()
}

/// min(|M|_F, sqrt(|M|_1 |M|_inf)), an upper bound of the spectral norm |M|_2 (O(d^2)).
fn spectral_norm_bound(m: &nalgebra::DMatrix<f64>) -> f64 {
    let column = m.column_iter().map(|c| c.abs().sum()).fold(0.0, f64::max);
    let row = m.row_iter().map(|r| r.abs().sum()).fold(0.0, f64::max);
    m.norm().min((column * row).sqrt())
}

/// |M|_2 by power iteration on M^T M (40 steps from a fixed start): a lower estimate that is
/// exact to round-off once the top singular value separates. Scaled by the largest entry so
/// no product overflows.
fn spectral_norm_estimate(m: &nalgebra::DMatrix<f64>) -> f64 {
    let top = m.amax();
    if top.is_nan() || top <= 0.0 || !top.is_finite() {
        return if top.is_nan() { f64::NAN } else { top };
    }
    let scaled = m / top;
    let n = m.ncols();
    let mut x = nalgebra::DVector::from_fn(n, |i, _| 1.0 + i as f64 / n as f64);
    let mut sigma = 0.0;
    for _ in 0..40 {
        x /= x.norm();
        let y = &scaled * &x;
        sigma = y.norm();
        x = scaled.tr_mul(&y);
        if x.norm().is_nan() || x.norm() <= 0.0 {
            break;
        }
    }
    sigma * top
}
