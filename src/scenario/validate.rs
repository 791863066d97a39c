//! From the raw serde structs to a checked [`Scenario`]: every range rule of the scenario format (README),
//! the matrices built, and the `resolved` provenance table assembled.

use std::path::Path;

use toml::Value;

use super::error::ScenarioError;
use super::expression::check_param_name;
use super::heads::{build_heads, LayerHeads};
use super::kinds::{InitKind, KernelKind, ModelKind, LABELS};
use super::layers;
use super::matrix::{build_matrix, describe, matrix_to_toml, MatrixContext};
use super::schema::{RawModel, RawScenario, RawTokens};
use super::stochastic;
use super::{HeadSpec, ModelSpec, OutputSpec, RunSpec, Scenario, SolverSpec, TimeSpec, TokenSpec};
use crate::label::Label;

/// The largest accepted dimension: a d x d matrix of f64 then takes at most 2 GiB. (Larger
/// matrices would be allocated while loading, before any memory check of the run can warn.)
pub const MAX_D: usize = 1 << 14;

/// Check a raw scenario and build the checked one: each section in file order, then the
/// resolved table for provenance.
pub fn validate(raw: RawScenario, file: &Path, base_dir: &Path) -> Result<Scenario, ScenarioError> {
    check_name(&raw.name, file)?;
    let expect = expected_label(raw.expect.as_deref(), file)?;
    let params = params(&raw, file)?;
    let checked = model_spec(&raw, file, base_dir, &params)?;
    let tokens = token_spec(&raw, file, base_dir, &checked)?;
    let time = time_spec(&raw, file, checked.stack.as_ref())?;
    let solver = solver_spec(&raw, file)?;
    super::bounds::check_fixed_steps(solver.method, solver.dt, time.t_max, file)?;
    if let Some(stack) = &checked.stack {
        super::bounds::check_layer_segments(stack, time.t_max, file)?;
        super::bounds::check_field_scale(stack, checked.model.beta, time.t_max, file)?;
    }
    super::bounds::check_field_rate(
        &checked.model,
        (&time, tokens.n),
        weight_keys(&raw, &checked),
        file,
    )?;
    let run = run_spec(&raw, file, &checked.model)?;
    let output = output_spec(file, &raw.output)?;
    let noise = stochastic::noise_spec(
        raw.noise.as_ref(),
        file,
        (&tokens, &time, &run),
        checked.model.d,
    )?;
    if noise.is_some() && !checked.model.normalization.on_sphere() {
        return Err(ScenarioError::at(
            file,
            "noise.temperature",
            format!("the noise moves tokens on the sphere (post-LN, nGPT); model.normalization = \"{}\" keeps an unnormalised stream (remove [noise] or use normalization = \"post\")", checked.model.normalization),
        ));
    }
    let ensemble = stochastic::ensemble_spec(raw.ensemble.as_ref(), file, &tokens, noise.as_ref())?;
    let clusters = cluster_rule(file, &raw.clusters)?;
    let lyapunov = super::lyapunov::lyapunov_spec(
        raw.lyapunov.as_ref(),
        file,
        (&checked.model, &tokens, &time, &run),
        noise.is_some(),
    )?;
    let density =
        super::density::density_spec(raw.density.as_ref(), file, (&checked.model, &tokens, &run))?;
    if density.is_some() && (ensemble.is_some() || lyapunov.is_some()) {
        let key = if ensemble.is_some() {
            "ensemble"
        } else {
            "lyapunov"
        };
        return Err(ScenarioError::at(
            file,
            key,
            "the mean-field model is one deterministic density: it has no seeds to run over and no tokens to follow (remove this table or run --model full)",
        ));
    }
    if let (Some(d), Some(n)) = (&density, &noise) {
        // The diffusion's top rate T (N/2)^2 on the largest grid must be a number: the
        // exponential integrator takes e^{-T k^2 h} exactly, but not past a double.
        let top = n.temperature * (d.max_grid as f64 / 2.0).powi(2);
        if top.is_nan() || top > 1e300 {
            return Err(ScenarioError::at(
                file,
                "noise.temperature",
                format!(
                    "T = {:e} makes the mean field's diffusion rate T (max_grid / 2)^2 = {top:e} overflow (at most 1e300); lower the temperature or density.max_grid",
                    n.temperature
                ),
            ));
        }
    }
    if let Some(description) = &raw.description {
        check_description(description).map_err(|m| ScenarioError::at(file, "description", m))?;
    }
    let resolved = Resolved {
        raw: &raw,
        params: &params,
        model: checked.resolved,
        tokens: &tokens,
        time: &time,
        solver: &solver,
        run: &run,
        output: &output,
    }
    .table();
    let mut resolved = resolved;
    if let Some(n) = &noise {
        resolved.insert("noise".into(), Value::Table(stochastic::noise_table(n)));
    }
    if let Some(e) = &ensemble {
        resolved.insert(
            "ensemble".into(),
            Value::Table(stochastic::ensemble_table(e)),
        );
    }
    let mut clusters_table = toml::Table::new();
    clusters_table.insert("threshold".into(), Value::Float(clusters.threshold));
    resolved.insert("clusters".into(), Value::Table(clusters_table));
    if let Some(l) = &lyapunov {
        resolved.insert(
            "lyapunov".into(),
            Value::Table(super::lyapunov::lyapunov_table(l)),
        );
    }
    if let Some(d) = &density {
        resolved.insert(
            "density".into(),
            Value::Table(super::density::density_table(d)),
        );
    }
    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        expect,
        params,
        model: checked.model,
        tokens,
        time,
        solver,
        run,
        output,
        noise,
        ensemble,
        clusters,
        lyapunov,
        density,
        file: file.to_path_buf(),
        resolved,
    })
}

/// The keys that name a scenario's score and value matrices in an error: (A, V).
fn weight_keys(raw: &RawScenario, checked: &CheckedModel) -> (&'static str, &'static str) {
    match &checked.stack {
        Some(s) if s.duration_key.starts_with("model.checkpoint") => {
            ("model.checkpoint", "model.checkpoint")
        }
        Some(_) => ("model.layers", "model.layers"),
        None if raw.model.heads.is_some() => ("model.heads", "model.heads"),
        None => ("model.A", "model.V"),
    }
}

/// `name`: `[a-z0-9_-]+` (the rule of scenario and sweep names).
pub(crate) fn check_name(name: &str, file: &Path) -> Result<(), ScenarioError> {
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if name_ok {
        return Ok(());
    }
    Err(ScenarioError::at(
        file,
        "name",
        format!(
            "\"{}\" is not a valid name (use lowercase letters, digits, _ and -)",
            name.escape_debug()
        ),
    ))
}

/// `expect`: one of the label words.
fn expected_label(expect: Option<&str>, file: &Path) -> Result<Option<Label>, ScenarioError> {
    let Some(expect) = expect else {
        return Ok(None);
    };
    Label::from_word(expect).map(Some).ok_or_else(|| {
        ScenarioError::at(
            file,
            "expect",
            format!(
                "unknown label \"{}\" (labels are: {})",
                expect.escape_debug(),
                LABELS.join(", ")
            ),
        )
    })
}

/// `[params]`: valid names with finite numbers, in file order.
fn params(raw: &RawScenario, file: &Path) -> Result<Vec<(String, f64)>, ScenarioError> {
    let mut params = Vec::with_capacity(raw.params.len());
    for (name, value) in &raw.params {
        let key = format!("params.{name}");
        let err = |message: String| ScenarioError::at(file, &key, message);
        check_param_name(name).map_err(err)?;
        let number = match value {
            Value::Integer(i) => *i as f64,
            Value::Float(f) if f.is_finite() => *f,
            Value::Float(f) => return Err(err(format!("{f} is not a finite number"))),
            other => return Err(err(format!("expected a number, found {}", describe(other)))),
        };
        params.push((name.clone(), number));
    }
    Ok(params)
}

/// The checked `[model]` with what the later sections need from it.
struct CheckedModel {
    model: ModelSpec,
    /// `[model]` for the resolved table.
    resolved: toml::Table,
    checkpoint: Option<layers::OpenCheckpoint>,
    stack: Option<layers::Stack>,
}

/// `[model]`: beta, d, the heads (or the stack of layers) with their matrices built.
fn model_spec(
    raw: &RawScenario,
    file: &Path,
    base_dir: &Path,
    params: &[(String, f64)],
) -> Result<CheckedModel, ScenarioError> {
    let m = &raw.model;
    let beta = super::real::beta(&m.beta, &raw.tokens, file)?;
    let checkpoint = layers::open_checkpoint(raw, file, base_dir)?;
    let d_written = layers::model_d(m, checkpoint.as_ref(), file)?;
    let d = dimension(d_written, file)?;
    let ctx = MatrixContext {
        file,
        base_dir,
        params,
        d,
    };
    let mut resolved = toml::Table::new();
    resolved.insert("kernel".into(), Value::String(m.kernel.to_string()));
    resolved.insert("beta".into(), Value::Float(beta));
    resolved.insert("d".into(), Value::Integer(d_written));
    let stack = match layers::has_stack(raw) {
        true => Some(layers::build_stack(
            raw,
            checkpoint.as_ref(),
            &ctx,
            &mut resolved,
        )?),
        false => None,
    };
    let (heads, factored) = match &stack {
        Some(s) => (
            s.layers[0].heads.as_ref().clone(),
            s.layers[0].factored.as_ref().clone(),
        ),
        None => {
            let h = heads(m, &ctx, &mut resolved)?;
            (h.formed, h.factored)
        }
    };
    resolved.insert(
        "kernel_method".into(),
        Value::String(m.kernel_method.to_string()),
    );
    let mask = super::real::mask(m, checkpoint.as_ref());
    resolved.insert("mask".into(), Value::String(mask.to_string()));
    // A llama checkpoint is pre-LN with RoPE by default.
    let llama = checkpoint.as_ref().and_then(|c| c.llama.as_ref());
    let normalization = m.normalization.unwrap_or(match llama {
        Some(_) => super::NormalizationKind::Pre,
        None => super::NormalizationKind::Post,
    });
    resolved.insert(
        "normalization".into(),
        Value::String(normalization.to_string()),
    );
    let position =
        super::position::position(m.position.as_ref(), llama.map(|c| c.rope_theta), file)?;
    if let Some(table) = position.to_toml() {
        resolved.insert("position".into(), table);
    }
    let ngpt_alpha = super::position::ngpt_alpha(m.ngpt_alpha, file)?;
    if normalization == super::NormalizationKind::Ngpt {
        resolved.insert("ngpt_alpha".into(), Value::Float(ngpt_alpha));
    }
    let model = ModelSpec {
        kernel: m.kernel,
        beta,
        d,
        heads,
        layers: stack.as_ref().map_or(Vec::new(), |s| s.layers.clone()),
        looped: stack.as_ref().is_some_and(|s| s.looped),
        kernel_method: m.kernel_method,
        factored,
        mask,
        normalization,
        ngpt_alpha,
        position,
    };
    super::position::check_heads(&model, file)?;
    Ok(CheckedModel {
        model,
        resolved,
        checkpoint,
        stack,
    })
}

/// `model.d`: an integer from 2 to [`MAX_D`].
fn dimension(d_written: i64, file: &Path) -> Result<usize, ScenarioError> {
    let err = |message: String| ScenarioError::at(file, "model.d", message);
    let d = match usize::try_from(d_written) {
        Ok(d) if d >= 2 => d,
        _ => return Err(err(format!("must be an integer >= 2, found {d_written}"))),
    };
    if d > MAX_D {
        let gib = (d as f64).powi(2) * 8.0 / f64::from(1u32 << 30);
        return Err(err(format!(
            "d = {d} is too large (at most {MAX_D}; each d x d matrix would take {gib:.1} GiB)"
        )));
    }
    Ok(d)
}

/// The heads of a single layer: `A` and `V`, or `heads = [{ A, V }, ...]`, written into
/// `resolved` as numbers.
fn heads(
    m: &RawModel,
    ctx: &MatrixContext<'_>,
    resolved: &mut toml::Table,
) -> Result<LayerHeads, ScenarioError> {
    let err = |key: &str, message: &str| ScenarioError::at(ctx.file, key, message.to_string());
    check_layer_memory(m, ctx)?;
    match (&m.a, &m.v, &m.heads) {
        (Some(a), Some(v), None) => {
            let head = HeadSpec {
                a: build_matrix(a, "model.A", ctx)?,
                v: build_matrix(v, "model.V", ctx)?,
            };
            resolved.insert("A".into(), matrix_to_toml(&head.a));
            resolved.insert("V".into(), matrix_to_toml(&head.v));
            Ok(LayerHeads {
                formed: vec![head],
                ..LayerHeads::default()
            })
        }
        (None, None, Some(raw_heads)) => {
            let heads = build_heads(raw_heads, "model.heads", ctx)?;
            resolved.insert("heads".into(), Value::Array(heads.resolved.clone()));
            Ok(heads)
        }
        (_, _, Some(_)) => Err(err("model.heads", "give either A and V or heads, not both")),
        (Some(_), None, None) => Err(err("model.V", "missing (A is given, V is not)")),
        (None, Some(_), None) => Err(err("model.A", "missing (V is given, A is not)")),
        (None, None, None) => Err(err(
            "model.A",
            "missing: give A and V, or heads = [{ A = ..., V = ... }, ...]",
        )),
    }
}

/// Refuses, before any matrix is built, a single layer whose matrices and their resolved text
/// (scenario.toml lists every entry) do not fit in the memory available.
fn check_layer_memory(m: &RawModel, ctx: &MatrixContext<'_>) -> Result<(), ScenarioError> {
    let heads = m.heads.as_ref().map_or(1, |h| h.len().max(1));
    let entries = crate::memory::layer_entries(heads, ctx.d);
    let need = crate::memory::stack_bytes(entries, entries, 1, true);
    let key = if m.heads.is_some() {
        "model.heads"
    } else {
        "model.d"
    };
    let what = format!(
        "d = {} with {heads} head(s) (two d x d matrices each, listed in the resolved scenario.toml)",
        ctx.d
    );
    crate::memory::check(need, &what).map_err(|message| ScenarioError::at(ctx.file, key, message))
}

/// `[tokens]`: n (or the count of `ids`), seed, the initial state's settings and file.
fn token_spec(
    raw: &RawScenario,
    file: &Path,
    base_dir: &Path,
    checked: &CheckedModel,
) -> Result<TokenSpec, ScenarioError> {
    let err = |key: &str, message: String| ScenarioError::at(file, key, message);
    let t = &raw.tokens;
    let d = checked.model.d;
    let t_n = layers::token_count(t, file)?;
    let n = match usize::try_from(t_n) {
        Ok(n) if n >= 1 => n,
        _ => {
            return Err(err(
                "tokens.n",
                format!("must be an integer >= 1, found {t_n}"),
            ))
        }
    };
    if n.checked_mul(d)
        .and_then(|nd| nd.checked_mul(8))
        .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(err(
            "tokens.n",
            format!("n = {n} tokens in d = {d} is too large (n * d * 8 bytes overflows)"),
        ));
    }
    let seed = u64::try_from(t.seed).map_err(|_| {
        err(
            "tokens.seed",
            format!("must be an integer >= 0, found {}", t.seed),
        )
    })?;
    finite(file, "tokens.r0", t.r0)?;
    if !(0.0..1.0).contains(&t.r0) {
        return Err(err(
            "tokens.r0",
            format!("must be in [0, 1), found {}", t.r0),
        ));
    }
    finite(file, "tokens.phi0", t.phi0)?;
    finite(file, "tokens.eps", t.eps)?;
    if t.eps < 0.0 {
        return Err(err("tokens.eps", format!("must be >= 0, found {}", t.eps)));
    }
    Ok(TokenSpec {
        n,
        init: t.init,
        seed,
        r0: t.r0,
        phi0: t.phi0,
        eps: t.eps,
        path: token_file(t, file, base_dir)?,
        embedding: layers::embedding_rows(t, checked.checkpoint.as_ref(), file)?,
    })
}

/// `tokens.path`: required by, and only allowed with, `init = "file"`.
fn token_file(
    t: &RawTokens,
    file: &Path,
    base_dir: &Path,
) -> Result<Option<std::path::PathBuf>, ScenarioError> {
    let err = |message: String| ScenarioError::at(file, "tokens.path", message);
    match (t.init, &t.path) {
        (InitKind::File, Some(p)) if !p.is_empty() => Ok(Some(base_dir.join(p))),
        (InitKind::File, _) => Err(err(
            "missing: init = \"file\" needs path = \"...\" (.npy or .csv, n x d)".to_string(),
        )),
        (init, Some(_)) => Err(err(format!(
            "path is only used with init = \"file\" (init is \"{init}\")"
        ))),
        (_, None) => Ok(None),
    }
}

/// `[time]`: t_end, samples and t_max (and a stack's layers must cover t_end).
fn time_spec(
    raw: &RawScenario,
    file: &Path,
    stack: Option<&layers::Stack>,
) -> Result<TimeSpec, ScenarioError> {
    let err = |key: &str, message: String| ScenarioError::at(file, key, message);
    finite(file, "time.t_end", raw.time.t_end)?;
    if raw.time.t_end < MIN_T_END {
        return Err(err(
            "time.t_end",
            format!("must be >= {MIN_T_END:e}, found {}", raw.time.t_end),
        ));
    }
    let samples = match usize::try_from(raw.time.samples) {
        Ok(s) if (2..=MAX_SAMPLES).contains(&s) => s,
        _ => {
            return Err(err(
                "time.samples",
                format!(
                    "must be an integer from 2 to {MAX_SAMPLES} (each sample is kept in memory and is a row of order.csv), found {}",
                    raw.time.samples
                ),
            ))
        }
    };
    let t_max = raw.time.t_max.unwrap_or(raw.time.t_end);
    finite(file, "time.t_max", t_max)?;
    if t_max < raw.time.t_end {
        return Err(err(
            "time.t_max",
            format!("must be >= time.t_end = {}, found {t_max}", raw.time.t_end),
        ));
    }
    let time = TimeSpec {
        t_end: raw.time.t_end,
        samples,
        t_max,
    };
    if let Some(stack) = stack {
        layers::check_time(stack, time.t_end, file)?;
    }
    Ok(time)
}

/// `[solver]`: positive finite tolerances and step.
fn solver_spec(raw: &RawScenario, file: &Path) -> Result<SolverSpec, ScenarioError> {
    let s = &raw.solver;
    for (key, value) in [
        ("solver.rtol", s.rtol),
        ("solver.atol", s.atol),
        ("solver.dt", s.dt),
    ] {
        finite(file, key, value)?;
        if value <= 0.0 {
            return Err(ScenarioError::at(
                file,
                key,
                format!("must be > 0, found {value}"),
            ));
        }
    }
    Ok(SolverSpec {
        method: s.method,
        rtol: s.rtol,
        atol: s.atol,
        dt: s.dt,
    })
}

/// `[run]`: the model, which must suit the kernel and dimension.
fn run_spec(raw: &RawScenario, file: &Path, model: &ModelSpec) -> Result<RunSpec, ScenarioError> {
    let run = RunSpec {
        model: raw.run.model,
    };
    let d = model.d;
    super::real::check_run_model(run.model, model, file)?;
    if run.model == ModelKind::Group && model.kernel != KernelKind::Lsa {
        return Err(ScenarioError::at(
            file,
            "run.model",
            format!(
                "the group model needs kernel = \"lsa\" (one matrix M = beta V S A^T drives every \
                 token only for linear attention); this scenario has kernel = \"{}\"",
                model.kernel
            ),
        ));
    }
    if run.model == ModelKind::Clusters && !model.layers.is_empty() {
        return Err(ScenarioError::at(
            file,
            "run.model",
            "the cluster model follows one layer acting for ever; this scenario has a stack of layers",
        ));
    }
    if !matches!(
        run.model,
        ModelKind::Full | ModelKind::Group | ModelKind::Clusters | ModelKind::MeanField
    ) && (d != 2 || model.kernel != KernelKind::Lsa)
    {
        return Err(ScenarioError::at(
            file,
            "run.model",
            format!(
                "the {} reduction needs d = 2 and kernel = \"lsa\" (a pure second-harmonic field); \
                 this scenario has d = {d}, kernel = \"{}\"",
                run.model, model.kernel
            ),
        ));
    }
    Ok(run)
}

/// What the resolved table (provenance) is made of: everything explicit, matrices as numbers.
struct Resolved<'a> {
    raw: &'a RawScenario,
    params: &'a [(String, f64)],
    model: toml::Table,
    tokens: &'a TokenSpec,
    time: &'a TimeSpec,
    solver: &'a SolverSpec,
    run: &'a RunSpec,
    output: &'a OutputSpec,
}

impl Resolved<'_> {
    /// The resolved scenario as a table, sections in file order.
    fn table(self) -> toml::Table {
        let raw = self.raw;
        let mut resolved = toml::Table::new();
        resolved.insert("name".into(), Value::String(raw.name.clone()));
        if let Some(description) = &raw.description {
            resolved.insert("description".into(), Value::String(description.clone()));
        }
        if let Some(expect) = &raw.expect {
            resolved.insert("expect".into(), Value::String(expect.clone()));
        }
        let params_table: toml::Table = self
            .params
            .iter()
            .map(|(k, v)| (k.clone(), Value::Float(*v)))
            .collect();
        resolved.insert("params".into(), Value::Table(params_table));
        resolved.insert("model".into(), Value::Table(self.model.clone()));
        resolved.insert("tokens".into(), Value::Table(self.tokens_table()));
        let mut time_table = toml::Table::new();
        time_table.insert("t_end".into(), Value::Float(self.time.t_end));
        time_table.insert("samples".into(), Value::Integer(raw.time.samples));
        time_table.insert("t_max".into(), Value::Float(self.time.t_max));
        resolved.insert("time".into(), Value::Table(time_table));
        let solver = self.solver;
        let mut solver_table = toml::Table::new();
        solver_table.insert("method".into(), Value::String(solver.method.to_string()));
        solver_table.insert("rtol".into(), Value::Float(solver.rtol));
        solver_table.insert("atol".into(), Value::Float(solver.atol));
        solver_table.insert("dt".into(), Value::Float(solver.dt));
        resolved.insert("solver".into(), Value::Table(solver_table));
        let mut run_table = toml::Table::new();
        run_table.insert("model".into(), Value::String(self.run.model.to_string()));
        resolved.insert("run".into(), Value::Table(run_table));
        resolved.insert("output".into(), Value::Table(self.output_table()));
        resolved
    }

    /// `[tokens]` as resolved: every setting, the token file as an absolute path.
    fn tokens_table(&self) -> toml::Table {
        let t = &self.raw.tokens;
        let mut table = toml::Table::new();
        table.insert("n".into(), Value::Integer(self.tokens.n as i64));
        table.insert("init".into(), Value::String(t.init.to_string()));
        table.insert("seed".into(), Value::Integer(t.seed));
        table.insert("r0".into(), Value::Float(t.r0));
        table.insert("phi0".into(), Value::Float(t.phi0));
        table.insert("eps".into(), Value::Float(t.eps));
        if let Some(p) = &self.tokens.path {
            let absolute = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            table.insert(
                "path".into(),
                Value::String(absolute.to_string_lossy().into_owned()),
            );
        }
        if let Some(ids) = &t.ids {
            let ids = ids.iter().map(|&i| Value::Integer(i)).collect();
            table.insert("ids".into(), Value::Array(ids));
            table.insert("center".into(), Value::Boolean(t.center.unwrap_or(false)));
            if let Some(p) = t.positions {
                table.insert("positions".into(), Value::Boolean(p));
            }
        }
        table
    }

    /// `[output]` as resolved.
    fn output_table(&self) -> toml::Table {
        let output = self.output;
        let mut table = toml::Table::new();
        table.insert("trajectory".into(), Value::Boolean(output.trajectory));
        table.insert("animation".into(), Value::Boolean(output.animation));
        if let Some((t0, t1)) = output.window {
            table.insert("window".into(), Value::from(vec![t0, t1]));
        }
        if !output.snapshots.is_empty() {
            table.insert("snapshots".into(), Value::from(output.snapshots.clone()));
        }
        table.insert("figure".into(), Value::from(output.figure.as_str()));
        table
    }
}

/// `[output]`: `window = [t0, t1]` (finite, 0 <= t0 < t1), `snapshots` (1 to 12 finite
/// times >= 0, sorted here), `figure`.
fn output_spec(file: &Path, raw: &super::schema::RawOutput) -> Result<OutputSpec, ScenarioError> {
    let window = match raw.window.as_deref() {
        None => None,
        Some(&[t0, t1]) if t0.is_finite() && t1.is_finite() && 0.0 <= t0 && t0 < t1 => {
            Some((t0, t1))
        }
        Some(_) => {
            return Err(ScenarioError::at(
                file,
                "output.window",
                "expected [t0, t1] with 0 <= t0 < t1",
            ))
        }
    };
    let mut snapshots = raw.snapshots.clone().unwrap_or_default();
    if raw.snapshots.is_some()
        && (snapshots.is_empty()
            || snapshots.len() > 12
            || snapshots.iter().any(|t| !t.is_finite() || *t < 0.0))
    {
        return Err(ScenarioError::at(
            file,
            "output.snapshots",
            "expected 1 to 12 finite times >= 0",
        ));
    }
    snapshots.sort_by(f64::total_cmp);
    Ok(OutputSpec {
        trajectory: raw.trajectory,
        animation: raw.animation,
        window,
        snapshots,
        figure: raw.figure,
    })
}

fn finite(file: &Path, key: &str, value: f64) -> Result<(), ScenarioError> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(ScenarioError::at(
            file,
            key,
            format!("{value} is not a finite number"),
        ))
    }
}

/// Shortest `time.t_end`: below it the sample spacing is lost in round-off.
pub const MIN_T_END: f64 = 1e-9;
/// Most output samples of a run (about 5 GB of memory and 15 GB of order.csv at the limit; the
/// memory and disk checks usually refuse earlier).
pub const MAX_SAMPLES: usize = 100_000_000;
/// Longest description, in bytes (it is copied into every summary.json).
pub const MAX_DESCRIPTION: usize = 4096;

/// A description is at most `MAX_DESCRIPTION` bytes.
pub fn check_description(text: &str) -> Result<(), String> {
    if text.len() > MAX_DESCRIPTION {
        return Err(format!(
            "is {} bytes long, more than the {MAX_DESCRIPTION} allowed",
            text.len()
        ));
    }
    Ok(())
}

/// `[clusters] threshold`: an angle in (0, pi), default [`DEFAULT_THRESHOLD`](crate::observe::clusters::DEFAULT_THRESHOLD).
fn cluster_rule(
    file: &Path,
    raw: &super::schema::RawClusters,
) -> Result<crate::observe::clusters::ClusterRule, ScenarioError> {
    use crate::observe::clusters::ClusterRule;
    match raw.threshold {
        None => Ok(ClusterRule::default()),
        Some(theta) => ClusterRule::new(theta).ok_or_else(|| {
            ScenarioError::at(
                file,
                "clusters.threshold",
                format!(
                    "must be an angle in radians with {:e} <= threshold < pi (angles are resolved to about 1e-15), got {theta:e}",
                    crate::observe::clusters::MIN_THRESHOLD
                ),
            )
        }),
    }
}
