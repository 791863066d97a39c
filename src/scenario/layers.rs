//! A stack of attention layers: `[[model.layers]]` (also spelled `[[layers]]`), `model.loop`,
//! `[model.checkpoint]`, and tokens from a checkpoint's embedding.
//!
//! Layer i, with duration tau_i (default 1), acts on [s_i, s_i + tau_i), s_0 = 0,
//! s_{i+1} = s_i + tau_i; the stack's time is T = sum_i tau_i. Without `loop = true`,
//! `time.t_end` must not exceed T. A checkpoint's layer l becomes a layer with heads
//! A_h = W_Q^h (W_K^h)^T / sqrt(d_h), V_h = (W_V^h W_O^h)^T (see `crate::checkpoint`) and
//! duration `layer_time`. `tokens.init = "embedding"` takes rows `ids` of the embedding matrix
//! E (minus the mean row of E when `center = true`); they are normalised when the tokens are made.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use toml::Value;

use super::error::ScenarioError;
use super::heads::{build_heads, LayerHeads};
use super::matrix::{build_matrix, matrix_to_toml, MatrixContext};
use super::schema::{RawCheckpoint, RawLayer, RawModel, RawScenario, RawTokens};
use super::{FactorSpec, HeadSpec, LayerSpec};
use crate::checkpoint::llama::LlamaConfig;
use crate::checkpoint::{Checkpoint, Format};
use crate::memory;

/// A checkpoint named by `[model.checkpoint]`, opened.
pub struct OpenCheckpoint {
    pub checkpoint: Checkpoint,
    pub format: Format,
    /// The checkpoint's d.
    pub d: usize,
    /// config.json of a llama checkpoint.
    pub llama: Option<LlamaConfig>,
    /// Whether the pre-attention norm is folded into the heads (llama).
    pub fold_norm: bool,
}

/// The layer tables of a scenario and the key they were written under, if any; both
/// spellings at once is an error.
fn layer_tables<'r>(
    raw: &'r RawScenario,
    file: &Path,
) -> Result<Option<(&'r [RawLayer], &'static str)>, ScenarioError> {
    match (&raw.model.layers, &raw.layers) {
        (Some(_), Some(_)) => Err(ScenarioError::at(
            file,
            "layers",
            "the stack is given twice: use [[model.layers]] or [[layers]], not both",
        )),
        (Some(l), None) => Ok(Some((l, "model.layers"))),
        (None, Some(l)) => Ok(Some((l, "layers"))),
        (None, None) => Ok(None),
    }
}

/// Whether the scenario describes a stack (layers or a checkpoint) rather than one layer.
pub fn has_stack(raw: &RawScenario) -> bool {
    raw.model.layers.is_some() || raw.layers.is_some() || raw.model.checkpoint.is_some()
}

/// Opens `[model.checkpoint]` when there is one.
pub fn open_checkpoint(
    raw: &RawScenario,
    file: &Path,
    base_dir: &Path,
) -> Result<Option<OpenCheckpoint>, ScenarioError> {
    let Some(c) = &raw.model.checkpoint else {
        return Ok(None);
    };
    let err = |key: &str, message: String| ScenarioError::at(file, key, message);
    let format = Format::from_word(&c.format).ok_or_else(|| {
        err(
            "model.checkpoint.format",
            format!(
                "unknown format `{}` (valid: {})",
                c.format.escape_debug(),
                Format::WORDS.join(", ")
            ),
        )
    })?;
    let path = base_dir.join(&c.path);
    let checkpoint =
        Checkpoint::open(&path).map_err(|e| err("model.checkpoint.path", e.to_string()))?;
    let d = checkpoint
        .width(format)
        .map_err(|e| err("model.checkpoint", format!("`{}`: {e}", path.display())))?;
    let llama = match format {
        Format::Llama => Some(llama_config(c, &path, base_dir, d, file)?),
        _ if c.config.is_some() => {
            return Err(err(
                "model.checkpoint.config",
                format!("only the llama layout reads a config.json (this is {format})"),
            ))
        }
        _ => None,
    };
    let fold_norm = c.fold_norm.unwrap_or(format == Format::Llama);
    if fold_norm && format != Format::Llama {
        return Err(err(
            "model.checkpoint.fold_norm",
            format!("folding the norm into the heads is implemented for llama checkpoints only (this is {format}); remove it or set false"),
        ));
    }
    Ok(Some(OpenCheckpoint {
        checkpoint,
        format,
        d,
        llama,
        fold_norm,
    }))
}

/// config.json of a llama checkpoint (`config`, else beside the weights), its hidden size
/// checked against the tensors' d.
fn llama_config(
    c: &RawCheckpoint,
    weights: &Path,
    base_dir: &Path,
    d: usize,
    file: &Path,
) -> Result<LlamaConfig, ScenarioError> {
    let err = |message: String| ScenarioError::at(file, "model.checkpoint.config", message);
    let path = match &c.config {
        Some(p) => base_dir.join(p),
        None => weights
            .parent()
            .unwrap_or(Path::new("."))
            .join("config.json"),
    };
    if !path.is_file() {
        return Err(err(format!(
            "`{}`: no such file (a llama checkpoint needs its config.json beside the weights, or model.checkpoint.config = path)",
            path.display()
        )));
    }
    let config = LlamaConfig::read(&path).map_err(|e| err(e.to_string()))?;
    if config.hidden_size != d {
        return Err(err(format!(
            "`{}`: hidden_size = {} disagrees with the tensors' d = {d}",
            path.display(),
            config.hidden_size
        )));
    }
    Ok(config)
}

/// `model.d`: as written, or the checkpoint's (given both, they must agree).
pub fn model_d(
    m: &RawModel,
    checkpoint: Option<&OpenCheckpoint>,
    file: &Path,
) -> Result<i64, ScenarioError> {
    match (m.d, checkpoint) {
        (Some(d), Some(c)) if usize::try_from(d) != Ok(c.d) => Err(ScenarioError::at(
            file,
            "model.d",
            format!("d = {d} does not match the checkpoint's d = {}", c.d),
        )),
        (Some(d), _) => Ok(d),
        (None, Some(c)) => Ok(c.d as i64),
        (None, None) => Err(ScenarioError::at(file, "model.d", "missing (required key)")),
    }
}

/// `tokens.n`: as written, or the number of `tokens.ids` (given both, they must agree).
pub fn token_count(t: &RawTokens, file: &Path) -> Result<i64, ScenarioError> {
    if t.ids.as_ref().is_some_and(|ids| ids.is_empty()) {
        return Err(ScenarioError::at(
            file,
            "tokens.ids",
            "needs at least one token id (n is their count)",
        ));
    }
    match (t.n, &t.ids) {
        (Some(n), Some(ids)) if usize::try_from(n) != Ok(ids.len()) => Err(ScenarioError::at(
            file,
            "tokens.n",
            format!("n = {n} does not match the {} tokens.ids", ids.len()),
        )),
        (Some(n), _) => Ok(n),
        (None, Some(ids)) => Ok(ids.len() as i64),
        (None, None) => Err(ScenarioError::at(
            file,
            "tokens.n",
            "missing (required key)",
        )),
    }
}

/// The checked stack.
pub struct Stack {
    pub layers: Vec<LayerSpec>,
    pub looped: bool,
    /// The key of the shortest layer's duration (for refusals of passes that cannot finish).
    pub duration_key: String,
}

/// Builds the stack from `[[model.layers]]` / `[[layers]]` or `[model.checkpoint]`, and writes
/// its resolved form into `resolved_model`.
pub fn build_stack(
    raw: &RawScenario,
    checkpoint: Option<&OpenCheckpoint>,
    ctx: &MatrixContext,
    resolved_model: &mut toml::Table,
) -> Result<Stack, ScenarioError> {
    let file = ctx.file;
    let m = &raw.model;
    if m.a.is_some() || m.v.is_some() || m.heads.is_some() {
        let key = if m.heads.is_some() {
            "model.heads"
        } else {
            "model.A"
        };
        return Err(ScenarioError::at(
            file,
            key,
            "with a stack of layers, give A and V (or heads) in each layer, not in [model]",
        ));
    }
    let tables = layer_tables(raw, file)?;
    let layers = match (tables, &m.checkpoint, checkpoint) {
        (Some(_), Some(_), _) => {
            return Err(ScenarioError::at(
                file,
                "model.checkpoint",
                "give either the layers or a checkpoint, not both",
            ))
        }
        (Some((tables, key)), None, _) => {
            let layers = explicit_layers(tables, key, ctx, resolved_model)?;
            let shortest = shortest_layer(&layers);
            (layers, format!("{key}[{shortest}].duration"))
        }
        (None, Some(raw_c), Some(open)) => (
            checkpoint_layers(raw_c, open, ctx, resolved_model)?,
            "model.checkpoint.layer_time".to_string(),
        ),
        _ => return Err(ScenarioError::at(file, "model.layers", "missing")),
    };
    let (layers, duration_key) = layers;
    let looped = m.looped.unwrap_or(false);
    resolved_model.insert("loop".into(), Value::Boolean(looped));
    Ok(Stack {
        layers,
        looped,
        duration_key,
    })
}

/// The index of the layer with the shortest duration (the first of them).
fn shortest_layer(layers: &[LayerSpec]) -> usize {
    (0..layers.len())
        .min_by(|&a, &b| layers[a].duration.total_cmp(&layers[b].duration))
        .unwrap_or(0)
}

fn duration(value: Option<f64>, key: &str, file: &Path) -> Result<f64, ScenarioError> {
    let tau = value.unwrap_or(1.0);
    if !(tau.is_finite() && tau > 0.0) {
        return Err(ScenarioError::at(
            file,
            key,
            format!("must be a finite number > 0, found {tau}"),
        ));
    }
    Ok(tau)
}

/// Layers written in the scenario: each with A and V, or heads, and a duration. Entries
/// written identically (apart from the duration) share one copy of their matrices; the
/// memory they need is checked before any is built.
fn explicit_layers(
    tables: &[RawLayer],
    key: &str,
    ctx: &MatrixContext,
    resolved_model: &mut toml::Table,
) -> Result<Vec<LayerSpec>, ScenarioError> {
    if tables.is_empty() {
        return Err(ScenarioError::at(ctx.file, key, "needs at least one layer"));
    }
    let first_of = distinct_entries(tables);
    check_stack_memory(tables, &first_of, key, ctx)?;
    let mut layers: Vec<LayerSpec> = Vec::with_capacity(tables.len());
    let mut resolved = Vec::with_capacity(tables.len());
    let mut heads_toml: Vec<Option<Value>> = Vec::with_capacity(tables.len());
    for (i, t) in tables.iter().enumerate() {
        let at = format!("{key}[{i}]");
        let first = first_of[i];
        let (heads, factored, toml_heads) = if first < i {
            let shared = heads_toml[first]
                .clone()
                .unwrap_or(Value::Array(Vec::new()));
            (
                layers[first].heads.clone(),
                layers[first].factored.clone(),
                shared,
            )
        } else {
            let built = layer_heads(t, &at, ctx)?;
            (
                Arc::new(built.formed),
                Arc::new(built.factored),
                compact_heads(built.resolved),
            )
        };
        let duration = duration(t.duration, &format!("{at}.duration"), ctx.file)?;
        let mut table = toml::Table::new();
        table.insert("heads".into(), toml_heads.clone());
        table.insert("duration".into(), Value::Float(duration));
        resolved.push(Value::Table(table));
        heads_toml.push((first == i).then_some(toml_heads));
        layers.push(LayerSpec {
            heads,
            factored,
            duration,
        });
    }
    resolved_model.insert("layers".into(), Value::Array(resolved));
    Ok(layers)
}

/// A layer's resolved heads with every `A` and `V` that is exactly the identity or zero
/// written as that word (a deep stack of such layers then costs a few bytes a layer in the
/// resolved scenario, not d^2 numbers).
fn compact_heads(resolved: Vec<Value>) -> Value {
    let compact = |mut head: Value| {
        if let Value::Table(t) = &mut head {
            for key in ["A", "V"] {
                if let Some(word) = t.get(key).and_then(matrix_word) {
                    t.insert(key.into(), Value::String(word.into()));
                }
            }
        }
        head
    };
    Value::Array(resolved.into_iter().map(compact).collect())
}

/// `"identity"` or `"zero"` when the rows of numbers `m` are exactly that matrix.
fn matrix_word(m: &Value) -> Option<&'static str> {
    let rows = m.as_array()?;
    let d = rows.len();
    let entry = |i: usize, j: usize| rows[i].as_array().and_then(|r| r.get(j)?.as_float());
    let is = |diagonal: f64| {
        rows.iter()
            .all(|r| r.as_array().is_some_and(|r| r.len() == d))
            && (0..d)
                .all(|i| (0..d).all(|j| entry(i, j) == Some(if i == j { diagonal } else { 0.0 })))
    };
    if d > 0 && is(1.0) {
        Some("identity")
    } else if d > 0 && is(0.0) {
        Some("zero")
    } else {
        None
    }
}

/// For each layer entry, the index of the first entry written the same way (its matrices,
/// not its duration).
fn distinct_entries(tables: &[RawLayer]) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    tables
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let text = format!("{:?}", (&t.a, &t.v, &t.heads));
            *seen.entry(text).or_insert(i)
        })
        .collect()
}

/// Whether every matrix of an entry is written `"identity"` or `"zero"` (its resolved form is
/// then the same words).
fn written_as_words(t: &RawLayer) -> bool {
    let word = |v: &Value| matches!(v.as_str(), Some("identity" | "zero"));
    match (&t.a, &t.v, &t.heads) {
        (Some(a), Some(v), None) => word(a) && word(v),
        (None, None, Some(h)) => h
            .iter()
            .all(|h| h.a.as_ref().is_some_and(word) && h.v.as_ref().is_some_and(word)),
        _ => false,
    }
}

/// Heads an entry declares (before its matrices are built).
fn declared_heads(t: &RawLayer) -> usize {
    t.heads.as_ref().map_or(1, |h| h.len().max(1))
}

/// Refuses, before building anything, a stack whose matrices and resolved form do not fit.
fn check_stack_memory(
    tables: &[RawLayer],
    first_of: &[usize],
    key: &str,
    ctx: &MatrixContext,
) -> Result<(), ScenarioError> {
    let mut distinct = 0u64;
    let mut written = 0u64;
    for (i, t) in tables.iter().enumerate() {
        let entries = memory::layer_entries(declared_heads(t), ctx.d);
        if !written_as_words(t) {
            written = written.saturating_add(entries);
        }
        if first_of[i] == i {
            distinct = distinct.saturating_add(entries);
        }
    }
    let need = memory::stack_bytes(distinct, written, tables.len(), true);
    let unique = first_of.iter().enumerate().filter(|(i, f)| i == *f).count();
    let what = format!(
        "a stack of {} layers ({unique} distinct) of d = {} (the resolved scenario.toml lists the matrices of every layer not written \"identity\" or \"zero\")",
        tables.len(),
        ctx.d
    );
    memory::check(need, &what).map_err(|m| ScenarioError::at(ctx.file, key, m))
}

/// The heads of one written layer.
fn layer_heads(t: &RawLayer, at: &str, ctx: &MatrixContext) -> Result<LayerHeads, ScenarioError> {
    let err = |key: String, message: &str| ScenarioError::at(ctx.file, key, message);
    match (&t.a, &t.v, &t.heads) {
        (Some(a), Some(v), None) => {
            let head = HeadSpec {
                a: build_matrix(a, &format!("{at}.A"), ctx)?,
                v: build_matrix(v, &format!("{at}.V"), ctx)?,
            };
            let mut table = toml::Table::new();
            table.insert("A".into(), matrix_to_toml(&head.a));
            table.insert("V".into(), matrix_to_toml(&head.v));
            Ok(LayerHeads {
                formed: vec![head],
                factored: Vec::new(),
                resolved: vec![Value::Table(table)],
            })
        }
        (None, None, Some(heads)) => build_heads(heads, &format!("{at}.heads"), ctx),
        (_, _, Some(_)) => Err(err(
            format!("{at}.heads"),
            "give either A and V or heads, not both",
        )),
        (Some(_), None, None) => Err(err(format!("{at}.V"), "missing (A is given, V is not)")),
        (None, Some(_), None) => Err(err(format!("{at}.A"), "missing (V is given, A is not)")),
        (None, None, None) => Err(err(
            format!("{at}.A"),
            "missing: give A and V, or heads = [{ A = ..., V = ... }, ...]",
        )),
    }
}

/// Layers read from a checkpoint.
fn checkpoint_layers(
    raw: &RawCheckpoint,
    open: &OpenCheckpoint,
    ctx: &MatrixContext,
    resolved_model: &mut toml::Table,
) -> Result<Vec<LayerSpec>, ScenarioError> {
    let file = ctx.file;
    let err = |key: &str, message: String| ScenarioError::at(file, key, message);
    let heads = checkpoint_heads(raw, open, file)?;
    if open.llama.is_none() && !open.d.is_multiple_of(heads) {
        return Err(err(
            "model.checkpoint.heads",
            format!("heads = {heads} does not divide d = {}", open.d),
        ));
    }
    if raw.layers.is_empty() {
        return Err(err(
            "model.checkpoint.layers",
            "needs at least one layer index".to_string(),
        ));
    }
    let tau = duration(raw.layer_time, "model.checkpoint.layer_time", file)?;
    let shown = open.checkpoint.path().display();
    let indices = checkpoint_indices(&raw.layers, file)?;
    let mut distinct: Vec<usize> = indices.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let entries = memory::layer_entries(heads, open.d);
    let need = memory::stack_bytes(
        entries.saturating_mul(distinct.len() as u64),
        0,
        indices.len(),
        false,
    );
    let what = format!(
        "a stack of {} checkpoint layers ({} distinct) of d = {}",
        indices.len(),
        distinct.len(),
        open.d
    );
    memory::check(need, &what).map_err(|m| err("model.checkpoint.layers", m))?;
    // Each checkpoint layer is read once; repeated indices share its heads, kept factored:
    // Q, K, V (d x d_h) and O (d_h x d) per head, no d x d matrix.
    let mut read: HashMap<usize, Arc<Vec<FactorSpec>>> = HashMap::new();
    let no_formed: Arc<Vec<HeadSpec>> = Arc::new(Vec::new());
    let mut layers = Vec::with_capacity(indices.len());
    for &index in &indices {
        let factored = match read.get(&index) {
            Some(f) => f.clone(),
            None => {
                let factors = match &open.llama {
                    Some(config) => crate::checkpoint::llama::layer_factors(
                        &open.checkpoint,
                        config,
                        index,
                        open.fold_norm,
                    ),
                    None => open
                        .checkpoint
                        .layer_factors(open.format, index, open.d, heads),
                }
                .map_err(|e| err("model.checkpoint", format!("`{shown}`: layer {index}: {e}")))?;
                let specs: Vec<FactorSpec> = factors
                    .into_iter()
                    .map(|f| FactorSpec {
                        q: f.q,
                        k: f.k,
                        v: f.v,
                        o: f.o,
                    })
                    .collect();
                read.entry(index).or_insert(Arc::new(specs)).clone()
            }
        };
        layers.push(LayerSpec {
            heads: no_formed.clone(),
            factored,
            duration: tau,
        });
    }
    let absolute = std::fs::canonicalize(open.checkpoint.path())
        .unwrap_or_else(|_| open.checkpoint.path().to_path_buf());
    let mut table = toml::Table::new();
    table.insert(
        "path".into(),
        Value::String(absolute.to_string_lossy().into_owned()),
    );
    table.insert("format".into(), Value::String(open.format.to_string()));
    table.insert(
        "layers".into(),
        Value::Array(raw.layers.iter().map(|&l| Value::Integer(l)).collect()),
    );
    table.insert("heads".into(), Value::Integer(heads as i64));
    if let Some(config) = &open.llama {
        table.insert("kv_heads".into(), Value::Integer(config.kv_heads as i64));
        table.insert("head_dim".into(), Value::Integer(config.head_dim as i64));
        table.insert("fold_norm".into(), Value::Boolean(open.fold_norm));
    }
    table.insert("layer_time".into(), Value::Float(tau));
    resolved_model.insert("checkpoint".into(), Value::Table(table));
    Ok(layers)
}

/// `model.checkpoint.heads`: >= 1; llama: config.json's, which a written value must equal.
fn checkpoint_heads(
    raw: &RawCheckpoint,
    open: &OpenCheckpoint,
    file: &Path,
) -> Result<usize, ScenarioError> {
    let err = |message: String| ScenarioError::at(file, "model.checkpoint.heads", message);
    let written = match raw.heads {
        None => None,
        Some(h) => Some(
            usize::try_from(h)
                .ok()
                .filter(|&h| h >= 1)
                .ok_or_else(|| err(format!("must be an integer >= 1, found {h}")))?,
        ),
    };
    match (&open.llama, written) {
        (Some(c), Some(h)) if h != c.heads => Err(err(format!(
            "heads = {h} disagrees with config.json's num_attention_heads = {}",
            c.heads
        ))),
        (Some(c), _) => Ok(c.heads),
        (None, Some(h)) => Ok(h),
        (None, None) => Err(err(format!(
            "missing (required for the {} layout)",
            open.format
        ))),
    }
}

/// The checkpoint layer indices as written, each >= 0.
fn checkpoint_indices(written: &[i64], file: &Path) -> Result<Vec<usize>, ScenarioError> {
    written
        .iter()
        .map(|&l| {
            usize::try_from(l).map_err(|_| {
                ScenarioError::at(
                    file,
                    "model.checkpoint.layers",
                    format!("layer index {l} is negative"),
                )
            })
        })
        .collect()
}

/// `time.t_end` must lie within a stack that does not loop.
pub fn check_time(stack: &Stack, t_end: f64, file: &Path) -> Result<(), ScenarioError> {
    let total: f64 = stack.layers.iter().map(|l| l.duration).sum();
    if !stack.looped && t_end > total {
        return Err(ScenarioError::at(
            file,
            "time.t_end",
            format!(
                "t_end = {t_end} is beyond the end of the stack of layers at t = {total} \
                 (shorten t_end, or set model.loop = true to repeat the stack)"
            ),
        ));
    }
    Ok(())
}

/// The embedding rows for `tokens.init = "embedding"` (centred when asked), n x d; `None` for
/// other starts. `ids` and `center` belong to the embedding start only.
pub fn embedding_rows(
    t: &RawTokens,
    checkpoint: Option<&OpenCheckpoint>,
    file: &Path,
) -> Result<Option<Vec<f64>>, ScenarioError> {
    let err = |key: &str, message: String| ScenarioError::at(file, key, message);
    let embedding = t.init == super::InitKind::Embedding;
    if !embedding {
        if t.ids.is_some() {
            return Err(err(
                "tokens.ids",
                format!(
                    "ids are only used with init = \"embedding\" (init is \"{}\")",
                    t.init
                ),
            ));
        }
        if t.positions.is_some() {
            return Err(err(
                "tokens.positions",
                format!(
                    "positions are only used with init = \"embedding\" (init is \"{}\")",
                    t.init
                ),
            ));
        }
        if t.center.is_some() {
            return Err(err(
                "tokens.center",
                format!(
                    "center is only used with init = \"embedding\" (init is \"{}\")",
                    t.init
                ),
            ));
        }
        return Ok(None);
    }
    let Some(ids) = &t.ids else {
        return Err(err(
            "tokens.ids",
            "missing: init = \"embedding\" needs ids = [...] (token ids)".to_string(),
        ));
    };
    let Some(open) = checkpoint else {
        return Err(err(
            "tokens.init",
            "init = \"embedding\" needs a [model.checkpoint]".to_string(),
        ));
    };
    if ids.is_empty() {
        return Err(err("tokens.ids", "needs at least one token id".to_string()));
    }
    let mut indices = Vec::with_capacity(ids.len());
    for &id in ids {
        indices.push(
            usize::try_from(id)
                .map_err(|_| err("tokens.ids", format!("token id {id} is negative")))?,
        );
    }
    let name = open.checkpoint.embedding_name(open.format);
    let shown = open.checkpoint.path().display();
    let (mut rows, mean, d) = open
        .checkpoint
        .rows_and_mean(&name, &indices)
        .map_err(|e| err("tokens.ids", format!("`{shown}`: {e}")))?;
    if t.center.unwrap_or(false) {
        for row in rows.chunks_exact_mut(d.max(1)) {
            for (v, m) in row.iter_mut().zip(&mean) {
                *v -= m;
            }
        }
    }
    // Token k (from 0) gets position embedding row k: the model's input wte[id_k] + wpe[k].
    let position_name = open.checkpoint.position_embedding_name(open.format);
    match (t.positions, position_name) {
        (Some(false), _) | (None, None) => {}
        (Some(true), None) => {
            return Err(err(
                "tokens.positions",
                format!(
                    "`{shown}` has no position embeddings (gpt2 wpe.weight, bert position_embeddings; llama has none, RoPE acts in the scores)"
                ),
            ))
        }
        (_, Some(name)) => {
            let table = open
                .checkpoint
                .leading_rows(&name, indices.len(), d)
                .map_err(|e| err("tokens.positions", format!("`{shown}`: {e}")))?;
            rows.iter_mut().zip(&table).for_each(|(v, p)| *v += p);
        }
    }
    Ok(Some(rows))
}
