//! From the raw serde structs to a checked [`Scenario`]: every range rule of the scenario format (README),
//! the matrices built, and the `resolved` provenance table assembled.

use std::path::Path;

use toml::Value;

use super::error::ScenarioError;
use super::expression::check_param_name;
use super::kinds::{InitKind, KernelKind, ModelKind, LABELS};
use super::layers;
use super::matrix::{build_matrix, describe, matrix_to_toml, MatrixContext};
use super::schema::RawScenario;
use super::{HeadSpec, ModelSpec, OutputSpec, RunSpec, Scenario, SolverSpec, TimeSpec, TokenSpec};

/// The largest accepted dimension: a d x d matrix of f64 then takes at most 2 GiB. (Larger
/// matrices would be allocated while loading, before any memory check of the run can warn.)
pub const MAX_D: usize = 1 << 14;

/// Check a raw scenario and build the checked one.
pub fn validate(raw: RawScenario, file: &Path, base_dir: &Path) -> Result<Scenario, ScenarioError> {
    let err = |key: &str, message: String| ScenarioError::at(file, key, message);

    // Top level.
    let name_ok = !raw.name.is_empty()
        && raw
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !name_ok {
        return Err(err(
            "name",
            format!(
                "\"{}\" is not a valid name (use lowercase letters, digits, _ and -)",
                raw.name.escape_debug()
            ),
        ));
    }
    if let Some(expect) = &raw.expect {
        if !LABELS.contains(&expect.as_str()) {
            return Err(err(
                "expect",
                format!(
                    "unknown label \"{}\" (labels are: {})",
                    expect.escape_debug(),
                    LABELS.join(", ")
                ),
            ));
        }
    }

    // [params]
    let mut params = Vec::with_capacity(raw.params.len());
    for (name, value) in &raw.params {
        let key = format!("params.{name}");
        check_param_name(name).map_err(|m| err(&key, m))?;
        let number = match value {
            Value::Integer(i) => *i as f64,
            Value::Float(f) if f.is_finite() => *f,
            Value::Float(f) => return Err(err(&key, format!("{f} is not a finite number"))),
            other => {
                return Err(err(
                    &key,
                    format!("expected a number, found {}", describe(other)),
                ))
            }
        };
        params.push((name.clone(), number));
    }

    // [model]
    let m = &raw.model;
    finite(file, "model.beta", m.beta)?;
    let checkpoint = layers::open_checkpoint(&raw, file, base_dir)?;
    let m_d = layers::model_d(m, checkpoint.as_ref(), file)?;
    let d = match usize::try_from(m_d) {
        Ok(d) if d >= 2 => d,
        _ => {
            return Err(err(
                "model.d",
                format!("must be an integer >= 2, found {m_d}"),
            ))
        }
    };
    if d > MAX_D {
        let gib = (d as f64).powi(2) * 8.0 / f64::from(1u32 << 30);
        return Err(err(
            "model.d",
            format!(
                "d = {d} is too large (at most {MAX_D}; each d x d matrix would take {gib:.1} GiB)"
            ),
        ));
    }
    let ctx = MatrixContext {
        file,
        base_dir,
        params: &params,
        d,
    };
    let mut resolved_model = toml::Table::new();
    resolved_model.insert("kernel".into(), Value::String(m.kernel.to_string()));
    resolved_model.insert("beta".into(), Value::Float(m.beta));
    resolved_model.insert("d".into(), Value::Integer(m_d));
    let stack = match layers::has_stack(&raw) {
        true => Some(layers::build_stack(
            &raw,
            checkpoint.as_ref(),
            &ctx,
            &mut resolved_model,
        )?),
        false => None,
    };
    let heads = match (&m.a, &m.v, &m.heads) {
        _ if stack.is_some() => stack
            .as_ref()
            .map_or(Vec::new(), |s| s.layers[0].heads.clone()),
        (Some(a), Some(v), None) => {
            let head = HeadSpec {
                a: build_matrix(a, "model.A", &ctx)?,
                v: build_matrix(v, "model.V", &ctx)?,
            };
            resolved_model.insert("A".into(), matrix_to_toml(&head.a));
            resolved_model.insert("V".into(), matrix_to_toml(&head.v));
            vec![head]
        }
        (None, None, Some(raw_heads)) => {
            if raw_heads.is_empty() {
                return Err(err("model.heads", "needs at least one head".to_string()));
            }
            let mut heads = Vec::with_capacity(raw_heads.len());
            let mut resolved_heads = Vec::with_capacity(raw_heads.len());
            for (i, h) in raw_heads.iter().enumerate() {
                let head = HeadSpec {
                    a: build_matrix(&h.a, &format!("model.heads[{i}].A"), &ctx)?,
                    v: build_matrix(&h.v, &format!("model.heads[{i}].V"), &ctx)?,
                };
                let mut t = toml::Table::new();
                t.insert("A".into(), matrix_to_toml(&head.a));
                t.insert("V".into(), matrix_to_toml(&head.v));
                resolved_heads.push(Value::Table(t));
                heads.push(head);
            }
            resolved_model.insert("heads".into(), Value::Array(resolved_heads));
            heads
        }
        (_, _, Some(_)) => {
            return Err(err(
                "model.heads",
                "give either A and V or heads, not both".to_string(),
            ))
        }
        (Some(_), None, None) => {
            return Err(err("model.V", "missing (A is given, V is not)".to_string()))
        }
        (None, Some(_), None) => {
            return Err(err("model.A", "missing (V is given, A is not)".to_string()))
        }
        (None, None, None) => {
            return Err(err(
                "model.A",
                "missing: give A and V, or heads = [{ A = ..., V = ... }, ...]".to_string(),
            ))
        }
    };
    resolved_model.insert(
        "kernel_method".into(),
        Value::String(m.kernel_method.to_string()),
    );
    let model = ModelSpec {
        kernel: m.kernel,
        beta: m.beta,
        d,
        heads,
        layers: stack.as_ref().map_or(Vec::new(), |s| s.layers.clone()),
        looped: stack.as_ref().is_some_and(|s| s.looped),
        kernel_method: m.kernel_method,
    };

    // [tokens]
    let t = &raw.tokens;
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
    let path = match (t.init, &t.path) {
        (InitKind::File, Some(p)) if !p.is_empty() => Some(base_dir.join(p)),
        (InitKind::File, _) => {
            return Err(err(
                "tokens.path",
                "missing: init = \"file\" needs path = \"...\" (.npy or .csv, n x d)".to_string(),
            ))
        }
        (init, Some(_)) => {
            return Err(err(
                "tokens.path",
                format!("path is only used with init = \"file\" (init is \"{init}\")"),
            ))
        }
        (_, None) => None,
    };
    let tokens = TokenSpec {
        n,
        init: t.init,
        seed,
        r0: t.r0,
        phi0: t.phi0,
        eps: t.eps,
        path,
        embedding: layers::embedding_rows(t, checkpoint.as_ref(), file)?,
    };

    // [time]
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
    if let Some(stack) = &stack {
        layers::check_time(stack, time.t_end, file)?;
    }

    // [solver]
    let s = &raw.solver;
    for (key, value) in [
        ("solver.rtol", s.rtol),
        ("solver.atol", s.atol),
        ("solver.dt", s.dt),
    ] {
        finite(file, key, value)?;
        if value <= 0.0 {
            return Err(err(key, format!("must be > 0, found {value}")));
        }
    }
    let solver = SolverSpec {
        method: s.method,
        rtol: s.rtol,
        atol: s.atol,
        dt: s.dt,
    };

    // [run]
    let run = RunSpec {
        model: raw.run.model,
    };
    if run.model == ModelKind::Group && model.kernel != KernelKind::Lsa {
        return Err(err(
            "run.model",
            format!(
                "the group model needs kernel = \"lsa\" (one matrix M = beta V S A^T drives every \
                 token only for linear attention); this scenario has kernel = \"{}\"",
                model.kernel
            ),
        ));
    }
    if !matches!(run.model, ModelKind::Full | ModelKind::Group)
        && (d != 2 || model.kernel != KernelKind::Lsa)
    {
        return Err(err(
            "run.model",
            format!(
                "the {} reduction needs d = 2 and kernel = \"lsa\" (a pure second-harmonic field); \
                 this scenario has d = {d}, kernel = \"{}\"",
                run.model, model.kernel
            ),
        ));
    }
    let output = output_spec(file, &raw.output)?;

    // The resolved scenario (provenance): everything explicit, matrices as numbers.
    let mut resolved = toml::Table::new();
    resolved.insert("name".into(), Value::String(raw.name.clone()));
    if let Some(description) = &raw.description {
        check_description(description).map_err(|m| err("description", m))?;
        resolved.insert("description".into(), Value::String(description.clone()));
    }
    if let Some(expect) = &raw.expect {
        resolved.insert("expect".into(), Value::String(expect.clone()));
    }
    let params_table: toml::Table = params
        .iter()
        .map(|(k, v)| (k.clone(), Value::Float(*v)))
        .collect();
    resolved.insert("params".into(), Value::Table(params_table));
    resolved.insert("model".into(), Value::Table(resolved_model));
    let mut tokens_table = toml::Table::new();
    tokens_table.insert("n".into(), Value::Integer(t_n));
    tokens_table.insert("init".into(), Value::String(t.init.to_string()));
    tokens_table.insert("seed".into(), Value::Integer(t.seed));
    tokens_table.insert("r0".into(), Value::Float(t.r0));
    tokens_table.insert("phi0".into(), Value::Float(t.phi0));
    tokens_table.insert("eps".into(), Value::Float(t.eps));
    if let Some(p) = &tokens.path {
        let absolute = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        tokens_table.insert(
            "path".into(),
            Value::String(absolute.to_string_lossy().into_owned()),
        );
    }
    if let Some(ids) = &t.ids {
        let ids = ids.iter().map(|&i| Value::Integer(i)).collect();
        tokens_table.insert("ids".into(), Value::Array(ids));
        tokens_table.insert("center".into(), Value::Boolean(t.center.unwrap_or(false)));
    }
    resolved.insert("tokens".into(), Value::Table(tokens_table));
    let mut time_table = toml::Table::new();
    time_table.insert("t_end".into(), Value::Float(time.t_end));
    time_table.insert("samples".into(), Value::Integer(raw.time.samples));
    time_table.insert("t_max".into(), Value::Float(time.t_max));
    resolved.insert("time".into(), Value::Table(time_table));
    let mut solver_table = toml::Table::new();
    solver_table.insert("method".into(), Value::String(solver.method.to_string()));
    solver_table.insert("rtol".into(), Value::Float(solver.rtol));
    solver_table.insert("atol".into(), Value::Float(solver.atol));
    solver_table.insert("dt".into(), Value::Float(solver.dt));
    resolved.insert("solver".into(), Value::Table(solver_table));
    let mut run_table = toml::Table::new();
    run_table.insert("model".into(), Value::String(run.model.to_string()));
    resolved.insert("run".into(), Value::Table(run_table));
    let mut output_table = toml::Table::new();
    output_table.insert("trajectory".into(), Value::Boolean(output.trajectory));
    output_table.insert("animation".into(), Value::Boolean(output.animation));
    if let Some((t0, t1)) = output.window {
        output_table.insert("window".into(), Value::from(vec![t0, t1]));
    }
    if !output.snapshots.is_empty() {
        output_table.insert("snapshots".into(), Value::from(output.snapshots.clone()));
    }
    output_table.insert("figure".into(), Value::from(output.figure.as_str()));
    resolved.insert("output".into(), Value::Table(output_table));

    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        expect: raw.expect,
        params,
        model,
        tokens,
        time,
        solver,
        run,
        output,
        file: file.to_path_buf(),
        resolved,
    })
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
