//! The bert layout (names with or without the `bert.` prefix).
//!
//! `encoder.layer.{l}.attention.self.query.weight` (and `key`, `value`) are d x d in the
//! nn.Linear layout y = x W^T, so W_Q = query.weight^T (likewise W_K, W_V);
//! `encoder.layer.{l}.attention.output.dense.weight` likewise gives W_O = dense.weight^T. The
//! word embeddings are `embeddings.word_embeddings.weight` (vocabulary x d).

use super::{Checkpoint, CheckpointError, LayerMaps};

const PREFIXES: [&str; 2] = ["", "bert."];

/// The spellings of layer `l`'s query tensor.
pub fn names(l: usize) -> impl Iterator<Item = Vec<String>> {
    std::iter::once(spellings(&format!(
        "encoder.layer.{l}.attention.self.query.weight"
    )))
}

fn spellings(name: &str) -> Vec<String> {
    PREFIXES.iter().map(|p| format!("{p}{name}")).collect()
}

/// The embedding's spellings.
pub fn embedding_names() -> Vec<String> {
    spellings("embeddings.word_embeddings.weight")
}

/// The layer index of a query tensor name, if it is one.
pub fn layer_of(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("bert.").unwrap_or(name);
    let rest = rest.strip_prefix("encoder.layer.")?;
    let (index, tail) = rest.split_once('.')?;
    (tail == "attention.self.query.weight").then(|| index.parse().ok())?
}

/// The names (as in the file, else the plain spelling) of layer `l`'s query, key, value and
/// output tensors.
pub fn attention_names(c: &Checkpoint, l: usize) -> (String, String, String, String) {
    let pick = |tail: &str| {
        let all = spellings(&format!("encoder.layer.{l}.attention.{tail}.weight"));
        c.find(&all).unwrap_or(&all[0]).to_string()
    };
    (
        pick("self.query"),
        pick("self.key"),
        pick("self.value"),
        pick("output.dense"),
    )
}

/// W_Q, W_K, W_V and W_O of layer `l` (row-vector convention: the transposed nn.Linear weights).
pub fn maps(c: &Checkpoint, l: usize, d: usize) -> Result<LayerMaps, CheckpointError> {
    let (q, k, v, o) = attention_names(c, l);
    Ok(LayerMaps {
        q: c.matrix(&q, d, d)?.transpose(),
        k: c.matrix(&k, d, d)?.transpose(),
        v: c.matrix(&v, d, d)?.transpose(),
        o: c.matrix(&o, d, d)?.transpose(),
    })
}
