//! The llama layout (Llama, Mistral, Qwen: safetensors + config.json; docs/MATH.md §16).
//!
//! PyTorch's `[out, in]` order: `model.layers.{l}.self_attn.q_proj.weight` is `[H d_h, d]`,
//! `k_proj` and `v_proj` `[H_kv d_h, d]`, `o_proj` `[d, H d_h]`, `input_layernorm.weight` the
//! RMSNorm gain g `[d]`; the word embeddings `model.embed_tokens.weight` `[vocabulary, d]`. In the row-vector
//! convention W_Q = q_proj^T (d x H d_h), and head h uses the key/value head h / (H / H_kv)
//! (grouped-query attention):
//!
//! ```text
//! Q_h = W_Q[:, h d_h ..],  K_h = W_K[:, g d_h ..],  V_h = W_V[:, g d_h ..],  O_h = W_O[h d_h .., :]
//! RMSNorm(x) = g ⊙ x sqrt(d) / |x|  =>  folded: Q_h -> sqrt(d) diag(g) Q_h  (the same for K_h, V_h)
//! ```
//!
//! so that the folded head acting on the unit direction z = x / |x| gives the model's own
//! scores and values on the normalised stream (RMSNorm's eps, about 1e-6 of the mean square,
//! is left out), and beta = 1 is the model's temperature.

use std::path::Path;

use nalgebra::DMatrix;

use super::{Checkpoint, CheckpointError, HeadFactors};

/// What tokdyn reads from config.json.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// `hidden_size`: d.
    pub hidden_size: usize,
    /// `num_attention_heads`: H.
    pub heads: usize,
    /// `num_key_value_heads` (default H): H_kv, dividing H.
    pub kv_heads: usize,
    /// `head_dim` (default d / H).
    pub head_dim: usize,
    /// `rope_theta` (default 10000).
    pub rope_theta: f64,
}

fn fail<T>(message: impl Into<String>) -> Result<T, CheckpointError> {
    Err(CheckpointError(message.into()))
}

impl LlamaConfig {
    /// Reads and checks config.json (`path`): the keys above, H divisible by H_kv.
    pub fn read(path: &Path) -> Result<LlamaConfig, CheckpointError> {
        let shown = path.display();
        let text = crate::input::read_text(path, 1 << 24)
            .map_err(|e| CheckpointError(format!("`{shown}`: {e}")))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| CheckpointError(format!("`{shown}`: not valid JSON ({e})")))?;
        let count = |key: &str| -> Result<Option<usize>, CheckpointError> {
            match json.get(key) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(v) => match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
                    Some(n) if n >= 1 => Ok(Some(n)),
                    _ => fail(format!(
                        "`{shown}`: {key}: expected an integer >= 1, found {v}"
                    )),
                },
            }
        };
        let required = |key: &str| -> Result<usize, CheckpointError> {
            count(key)?.ok_or_else(|| CheckpointError(format!("`{shown}`: {key}: missing")))
        };
        let hidden_size = required("hidden_size")?;
        let heads = required("num_attention_heads")?;
        let kv_heads = count("num_key_value_heads")?.unwrap_or(heads);
        if !heads.is_multiple_of(kv_heads) {
            return fail(format!(
                "`{shown}`: num_attention_heads = {heads} is not a multiple of num_key_value_heads = {kv_heads}"
            ));
        }
        let head_dim = match count("head_dim")? {
            Some(h) => h,
            None if hidden_size.is_multiple_of(heads) => hidden_size / heads,
            None => {
                return fail(format!(
                "`{shown}`: head_dim: missing, and num_attention_heads = {heads} does not divide hidden_size = {hidden_size}"
            ))
            }
        };
        let rope_theta = match json.get("rope_theta") {
            None | Some(serde_json::Value::Null) => 10000.0,
            Some(v) => match v.as_f64() {
                Some(t) if t.is_finite() && t > 1.0 => t,
                _ => {
                    return fail(format!(
                        "`{shown}`: rope_theta: expected a number > 1, found {v}"
                    ))
                }
            },
        };
        Ok(LlamaConfig {
            hidden_size,
            heads,
            kv_heads,
            head_dim,
            rope_theta,
        })
    }

    /// The key/value head of query head h.
    pub fn kv_head(&self, h: usize) -> usize {
        h / (self.heads / self.kv_heads)
    }
}

const PREFIXES: [&str; 2] = ["model.", ""];

fn spellings(name: &str) -> Vec<String> {
    PREFIXES.iter().map(|p| format!("{p}{name}")).collect()
}

/// The spellings of layer `l`'s query tensor.
pub fn names(l: usize) -> impl Iterator<Item = Vec<String>> {
    std::iter::once(spellings(&format!("layers.{l}.self_attn.q_proj.weight")))
}

/// The embedding's spellings.
pub fn embedding_names() -> Vec<String> {
    spellings("embed_tokens.weight")
}

/// The layer index of a query tensor name, if it is one.
pub fn layer_of(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("model.").unwrap_or(name);
    let rest = rest.strip_prefix("layers.")?;
    let (index, tail) = rest.split_once('.')?;
    (tail == "self_attn.q_proj.weight").then(|| index.parse().ok())?
}

/// The name (as in the file, else the prefixed spelling) of a tensor of layer `l`.
pub fn tensor_name(c: &Checkpoint, l: usize, tail: &str) -> String {
    let all = spellings(&format!("layers.{l}.{tail}"));
    c.find(&all).unwrap_or(&all[0]).to_string()
}

/// The heads of layer `l` as factors (row-vector convention), with the RMSNorm gain and the
/// sqrt(d) scale folded into Q, K, V when `fold_norm`; every shape checked against `config`.
pub fn layer_factors(
    c: &Checkpoint,
    config: &LlamaConfig,
    l: usize,
    fold_norm: bool,
) -> Result<Vec<HeadFactors>, CheckpointError> {
    let (d, e) = (config.hidden_size, config.head_dim);
    let (h, kv) = (config.heads, config.kv_heads);
    let read = |tail: &str, rows: usize, cols: usize| {
        let name = tensor_name(c, l, tail);
        c.matrix(&name, rows, cols).map_err(|err| {
            CheckpointError(format!(
                "{err} (config.json: hidden_size = {d}, num_attention_heads = {h}, num_key_value_heads = {kv}, head_dim = {e})"
            ))
        })
    };
    // [out, in] -> the row-vector maps x W (in x out).
    let wq = read("self_attn.q_proj.weight", h * e, d)?.transpose();
    let wk = read("self_attn.k_proj.weight", kv * e, d)?.transpose();
    let wv = read("self_attn.v_proj.weight", kv * e, d)?.transpose();
    let wo = read("self_attn.o_proj.weight", d, h * e)?.transpose();
    let fold = if fold_norm {
        let name = tensor_name(c, l, "input_layernorm.weight");
        let (shape, gain) = c.tensor(&name)?;
        if shape != [d] {
            return fail(format!(
                "tensor `{name}`: expected shape [{d}] (hidden_size), found {shape:?}"
            ));
        }
        let scale = (d as f64).sqrt();
        Some(DMatrix::from_diagonal(&nalgebra::DVector::from_iterator(
            d,
            gain.iter().map(|g| g * scale),
        )))
    } else {
        None
    };
    let folded = |m: DMatrix<f64>| match &fold {
        Some(f) => f * m,
        None => m,
    };
    let heads = (0..h)
        .map(|head| {
            let g = config.kv_head(head);
            HeadFactors {
                q: folded(wq.columns(head * e, e).into_owned()),
                k: folded(wk.columns(g * e, e).into_owned()),
                v: folded(wv.columns(g * e, e).into_owned()),
                o: wo.rows(head * e, e).into_owned(),
            }
        })
        .collect();
    Ok(heads)
}
