//! The gpt2 layout (names with or without the `transformer.` prefix).
//!
//! `h.{l}.attn.c_attn.weight` is d x 3d, used as x W: columns [0, d) are W_Q, [d, 2d) W_K and
//! [2d, 3d) W_V. `h.{l}.attn.c_proj.weight` is d x d, used as z W on the concatenated heads:
//! it is W_O itself. The word embeddings are `wte.weight` (vocabulary x d).

use super::{Checkpoint, CheckpointError, LayerMaps};

const PREFIXES: [&str; 2] = ["", "transformer."];

/// The spellings of layer `l`'s query-key-value tensor.
pub fn names(l: usize) -> impl Iterator<Item = Vec<String>> {
    std::iter::once(spellings(&format!("h.{l}.attn.c_attn.weight")))
}

fn spellings(name: &str) -> Vec<String> {
    PREFIXES.iter().map(|p| format!("{p}{name}")).collect()
}

/// The embedding's spellings.
pub fn embedding_names() -> Vec<String> {
    spellings("wte.weight")
}

/// The layer index of an attention tensor name, if it is one.
pub fn layer_of(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("transformer.").unwrap_or(name);
    let rest = rest.strip_prefix("h.")?;
    let (index, tail) = rest.split_once('.')?;
    (tail == "attn.c_attn.weight").then(|| index.parse().ok())?
}

/// The names (as in the file, else the plain spelling) of layer `l`'s c_attn and c_proj.
pub fn attention_names(c: &Checkpoint, l: usize) -> (String, String) {
    let pick = |name: String| {
        let all = spellings(&name);
        c.find(&all).unwrap_or(&all[0]).to_string()
    };
    (
        pick(format!("h.{l}.attn.c_attn.weight")),
        pick(format!("h.{l}.attn.c_proj.weight")),
    )
}

/// W_Q, W_K, W_V and W_O of layer `l` (row-vector convention).
pub fn maps(c: &Checkpoint, l: usize, d: usize) -> Result<LayerMaps, CheckpointError> {
    let (qkv_name, proj_name) = attention_names(c, l);
    let qkv = c.matrix(&qkv_name, d, 3 * d)?;
    let o = c.matrix(&proj_name, d, d)?;
    Ok(LayerMaps {
        q: qkv.columns(0, d).into_owned(),
        k: qkv.columns(d, d).into_owned(),
        v: qkv.columns(2 * d, d).into_owned(),
        o,
    })
}
