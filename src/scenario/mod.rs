//! Scenario files: load a TOML scenario, apply `--set KEY=VALUE` overrides, validate it, and
//! hand out checked types (the scenario format of the README).
//!
//! The pipeline is: text -> `toml::Table` -> overrides ([`apply_set`]) -> raw serde structs
//! with `deny_unknown_fields` (`schema`) -> checked [`Scenario`] (`validate`, with matrices
//! built by `matrix` and expressions evaluated by `expression`). Every problem is a
//! [`ScenarioError`] whose `Display` is one line naming the file, the key and what is wrong.
//! The initial tokens are produced on demand by [`Scenario::initial_tokens`] (`init`).
//!
//! The checked scenario also carries `resolved`: the scenario table after overrides, with every
//! default filled in and every matrix expanded to rows of numbers, for provenance.

mod bounds;
mod density;
mod error;
mod expression;
mod heads;
mod init;
mod kinds;
mod layers;
mod lyapunov;
mod matrix;
mod numfile;
mod overrides;
mod position;
mod real;
mod schema;
mod stochastic;
mod validate;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use crate::label::Label;
pub use bounds::{MAX_FIXED_STEPS, MAX_LAYER_SEGMENTS};
pub use density::{DensityInit, DensitySpec};
pub use error::ScenarioError;
pub use expression::evaluate as evaluate_expression;
pub use expression::RESERVED as RESERVED_NAMES;
pub use kinds::{
    InitKind, KernelKind, KernelMethodKind, MaskKind, MethodKind, ModelKind, NormalizationKind,
    UnknownWord, LABELS,
};
pub use lyapunov::{tangent_dimension, LyapunovSpec};
pub use overrides::{apply_set, parse_set_value, set_value};
pub use position::{AlibiSlopes, PositionSpec};
pub use real::check_run_model;
pub(crate) use schema::deserialize_at;
pub use stochastic::{
    EnsembleSpec, NoiseSpec, DEFAULT_NOISE_DT, MAX_NOISE_STEPS, MAX_RUNS, TEMPERATURE_TURN,
};
pub(crate) use validate::check_name;
pub use validate::{check_description, MAX_D, MAX_SAMPLES, MIN_T_END};

/// A checked scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Names the output folder; matches `[a-z0-9_-]+`.
    pub name: String,
    /// The optional description.
    pub description: Option<String>,
    /// The label this scenario should show.
    pub expect: Option<Label>,
    /// The `[params]`, in file order.
    pub params: Vec<(String, f64)>,
    /// `[model]`.
    pub model: ModelSpec,
    /// `[tokens]`.
    pub tokens: TokenSpec,
    /// `[time]`.
    pub time: TimeSpec,
    /// `[solver]`.
    pub solver: SolverSpec,
    /// `[run]`.
    pub run: RunSpec,
    /// `[output]`.
    pub output: OutputSpec,
    /// `[noise]`: noisy tokens (full model only).
    pub noise: Option<NoiseSpec>,
    /// `[ensemble]`: runs over consecutive seeds.
    pub ensemble: Option<EnsembleSpec>,
    /// `[clusters]`.
    pub clusters: crate::observe::clusters::ClusterRule,
    /// `[lyapunov]`: compute the first exponents.
    pub lyapunov: Option<LyapunovSpec>,
    /// `[density]` with its defaults: the start of the mean field (`None` for other models).
    pub density: Option<DensitySpec>,
    /// The scenario path as given (for messages and provenance).
    pub file: PathBuf,
    /// The scenario after overrides, with every matrix expanded to rows of numbers and every
    /// default filled in; `tokens.path` is resolved against the scenario's folder.
    pub resolved: toml::Table,
}

/// `[model]`: the vector field.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    /// The attention kernel.
    pub kernel: KernelKind,
    /// beta, the inverse temperature of the kernel.
    pub beta: f64,
    /// Dimension of the sphere's ambient space, >= 2.
    pub d: usize,
    /// At least one head; `A = ..., V = ...` in the file is one head. For a stack of
    /// layers: the heads of the first layer.
    pub heads: Vec<HeadSpec>,
    /// A stack of layers (`[[model.layers]]` or a checkpoint); empty for the single layer
    /// `heads` acting for ever.
    pub layers: Vec<LayerSpec>,
    /// `model.loop`: the stack repeats for ever.
    pub looped: bool,
    /// `kernel_method`: which kernel evaluates `usa` and `sa` (default `auto`).
    pub kernel_method: KernelMethodKind,
    /// Heads given by their factors (for a stack: those of the first layer); their fields add
    /// to those of `heads`.
    pub factored: Vec<FactorSpec>,
    /// `model.mask` (default: causal for a gpt2 checkpoint, else none).
    pub mask: MaskKind,
    /// `model.normalization` (default post).
    pub normalization: NormalizationKind,
    /// `model.ngpt_alpha` (default 1; nGPT only).
    pub ngpt_alpha: f64,
    /// `model.position` (default none).
    pub position: PositionSpec,
}

impl ModelSpec {
    /// Whether the plain sphere flow holds: no mask, post-LN, no positions (the reductions,
    /// the group and cluster models, the energy).
    pub fn is_plain(&self) -> bool {
        self.mask == MaskKind::None
            && self.normalization == NormalizationKind::Post
            && self.position == PositionSpec::None
    }
}

/// One layer of a stack: its heads, acting for `duration` (> 0).
#[derive(Debug, Clone, PartialEq)]
pub struct LayerSpec {
    /// The layer's heads (their fields add); layers written identically, or the same
    /// checkpoint layer given twice, share one copy.
    pub heads: std::sync::Arc<Vec<HeadSpec>>,
    /// The layer's factored heads (checkpoint heads are kept factored), shared the same way.
    pub factored: std::sync::Arc<Vec<FactorSpec>>,
    /// How long the layer acts (> 0).
    pub duration: f64,
}

/// One head by its factors in the row-vector convention: A = Q K^T / sqrt(d_h), value matrix
/// (V O)^T, with Q, K, V d x d_h and O d_h x d (d_h divides d).
#[derive(Debug, Clone, PartialEq)]
pub struct FactorSpec {
    /// Q (d x d_h).
    pub q: nalgebra::DMatrix<f64>,
    /// K (d x d_h).
    pub k: nalgebra::DMatrix<f64>,
    /// V (d x d_h).
    pub v: nalgebra::DMatrix<f64>,
    /// O (d_h x d).
    pub o: nalgebra::DMatrix<f64>,
}

/// One attention head: A = Q^T K and V, both d x d.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadSpec {
    /// A, the d x d score matrix.
    pub a: nalgebra::DMatrix<f64>,
    /// V, the d x d value matrix.
    pub v: nalgebra::DMatrix<f64>,
}

/// `[tokens]`: how many and where they start.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenSpec {
    /// Number of tokens, >= 1 (n * d * 8 bytes is representable).
    pub n: usize,
    /// The initial state.
    pub init: InitKind,
    /// Seed of the random draws (uniform start, perturbations).
    pub seed: u64,
    /// Poisson: |R2(0)|, in [0, 1).
    pub r0: f64,
    /// Poisson: arg R2(0).
    pub phi0: f64,
    /// Standard deviation of the perturbation of splay and poisson starts, >= 0.
    pub eps: f64,
    /// For `init = "file"`: the token file, resolved relative to the scenario file's folder.
    pub path: Option<PathBuf>,
    /// For `init = "embedding"`: the embedding rows of `tokens.ids` (centred when asked),
    /// n x d, not yet normalised.
    pub embedding: Option<Vec<f64>>,
}

/// `[time]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeSpec {
    /// Final time, > 0.
    pub t_end: f64,
    /// Number of output samples including t = 0, >= 2.
    pub samples: usize,
    /// Latest time a run may go on to when its label at t_end is not certain (>= t_end;
    /// t_end when absent: no extension).
    pub t_max: f64,
}

/// `[solver]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolverSpec {
    /// The integrator.
    pub method: MethodKind,
    /// Relative tolerance of the adaptive methods.
    pub rtol: f64,
    /// Absolute tolerance of the adaptive methods.
    pub atol: f64,
    /// Step of `rk4`.
    pub dt: f64,
}

/// `[run]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSpec {
    /// The model to integrate.
    pub model: ModelKind,
}

/// `[output]` (our extension): optional extra outputs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OutputSpec {
    /// Write `trajectory.npy`.
    pub trajectory: bool,
    /// Draw `tokens.gif`.
    pub animation: bool,
    /// Time window of `order.png`, `kymograph.png` and `compare.png`, `[t0, t1]` with t0 < t1
    /// (default: the whole run).
    pub window: Option<(f64, f64)>,
    /// Times of the `tokens.png` panels (default: chosen from the dynamics), increasing.
    pub snapshots: Vec<f64>,
    /// Picture format: one paper column or a slide.
    pub figure: crate::plot::Figure,
}

impl Scenario {
    /// Read the scenario file, apply the overrides in order, validate.
    pub fn load(path: &Path, sets: &[String]) -> Result<Scenario, ScenarioError> {
        let text = crate::input::read_text(path, crate::input::TOML_LIMIT)
            .map_err(|e| ScenarioError::file(path, e))?;
        let base_dir = path.parent().unwrap_or(Path::new(""));
        Self::from_toml_str(&text, path, base_dir, sets)
    }

    /// Same as [`Scenario::load`] from text already read; `base_dir` resolves relative paths.
    pub fn from_toml_str(
        text: &str,
        file: &Path,
        base_dir: &Path,
        sets: &[String],
    ) -> Result<Scenario, ScenarioError> {
        let mut table = parse_toml(text, file)?;
        for set in sets {
            apply_set(&mut table, set).map_err(|message| {
                ScenarioError::at(file, format!("--set {}", set.trim()), message)
            })?;
        }
        Self::from_table(table, file, base_dir)
    }

    /// Validate a scenario table (sweeps change a template table per grid point and call this).
    pub fn from_table(
        table: toml::Table,
        file: &Path,
        base_dir: &Path,
    ) -> Result<Scenario, ScenarioError> {
        // A token model keeps its `[density]` as written, for the mean field beside it
        // (`compare`); the mean-field model checks and resolves it.
        let density = table.get("density").cloned();
        let raw = schema::parse_raw(table, file)?;
        let mut scenario = validate::validate(raw, file, base_dir)?;
        if let (None, Some(density)) = (&scenario.density, density) {
            scenario.resolved.insert("density".into(), density);
        }
        Ok(scenario)
    }

    /// The initial tokens, n x d row-major (token k is `[k*d .. (k+1)*d]`), rows of unit length.
    pub fn initial_tokens(&self) -> Result<Vec<f64>, ScenarioError> {
        init::initial_tokens(self)
    }
}

/// Parse TOML text into a table; a syntax error names the file, line and column.
pub fn parse_toml(text: &str, file: &Path) -> Result<toml::Table, ScenarioError> {
    text.parse::<toml::Table>().map_err(|e| {
        let place = match e.span() {
            Some(span) => {
                let (line, column) = line_column(text, span.start);
                format!("line {line}, column {column}: ")
            }
            None => String::new(),
        };
        ScenarioError::file(file, format!("{place}invalid TOML: {}", e.message()))
    })
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}
