//! Attention heads from a trained checkpoint (`.safetensors`, gpt2 or bert layout).
//!
//! In the row-vector convention of these models one head h (d_h = d / heads) computes
//!
//! ```text
//! score_kj = (x_k W_Q^h)(x_j W_K^h)^T / sqrt(d_h),   out_k = sum_j softmax_j(score_kj) x_j W_V^h W_O^h,
//! ```
//!
//! which is tokdyn's `sa` field (beta = 1) with, as d x d matrices acting on column vectors,
//!
//! ```text
//! A_h = W_Q^h (W_K^h)^T / sqrt(d_h),    V_h = (W_V^h W_O^h)^T.
//! ```
//!
//! W_Q^h, W_K^h, W_V^h are columns h d_h .. (h+1) d_h of the d x d maps x -> x W_Q (etc.), and
//! W_O^h is rows h d_h .. (h+1) d_h of the output map z -> z W_O on the concatenated heads.
//! Where each layout keeps these maps is in [`gpt2`] and [`bert`]. Weights stored as F32,
//! F16, BF16 (or F64) are widened to f64. Biases, layer norms, MLPs and positional encodings
//! are not read.

pub mod bert;
pub mod gpt2;
pub mod llama;
pub mod spectra;
pub mod validate;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use nalgebra::DMatrix;
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::{Dtype, SafeTensors};

/// A checkpoint problem: one message naming the tensor (when there is one) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointError(pub String);

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CheckpointError {}

fn fail<T>(message: impl Into<String>) -> Result<T, CheckpointError> {
    Err(CheckpointError(message.into()))
}

/// The tensor layouts understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// GPT-2: fused `c_attn` (Q, K, V) and `c_proj` per layer.
    Gpt2,
    /// BERT: separate query, key, value and output dense layers.
    Bert,
    /// Llama: q/k/v/o projections in PyTorch order, grouped-query heads, config.json.
    Llama,
}

impl Format {
    /// The file words, in order.
    pub const WORDS: [&'static str; 3] = ["gpt2", "bert", "llama"];

    /// The word used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Gpt2 => "gpt2",
            Format::Bert => "bert",
            Format::Llama => "llama",
        }
    }

    /// Parses a file word.
    pub fn from_word(word: &str) -> Option<Format> {
        match word {
            "gpt2" => Some(Format::Gpt2),
            "bert" => Some(Format::Bert),
            "llama" => Some(Format::Llama),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The weights of one head as tokdyn reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadWeights {
    /// A_h = W_Q^h (W_K^h)^T / sqrt(d_h).
    pub a: DMatrix<f64>,
    /// V_h = (W_V^h W_O^h)^T.
    pub v: DMatrix<f64>,
}

/// The factors of one head in the row-vector convention (kept factored, no d x d matrix):
/// A_h = Q K^T / sqrt(d_h), value matrix (V O)^T.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadFactors {
    /// W_Q^h (d x d_h).
    pub q: DMatrix<f64>,
    /// W_K^h (d x d_h).
    pub k: DMatrix<f64>,
    /// W_V^h (d x d_h).
    pub v: DMatrix<f64>,
    /// W_O^h (d_h x d).
    pub o: DMatrix<f64>,
}

/// A `.safetensors` file held in memory.
pub struct Checkpoint {
    path: PathBuf,
    bytes: Vec<u8>,
    /// Where the data start (8 + header length).
    data_start: usize,
    metadata: Metadata,
    names: Vec<String>,
}

impl fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Checkpoint({})", self.path.display())
    }
}

impl Checkpoint {
    /// Reads and checks a `.safetensors` file (header, offsets, dtypes).
    pub fn open(path: &Path) -> Result<Checkpoint, CheckpointError> {
        // Only a regular file is read (a FIFO or a device would never end); no size limit
        // beyond the file's own.
        let size = std::fs::metadata(path).map_or(0, |m| m.len());
        crate::memory::check(size, "reading the checkpoint (it is held in memory)")
            .map_err(|e| CheckpointError(format!("`{}`: {e}", path.display())))?;
        let bytes = crate::input::read_bytes(path, u64::MAX)
            .map_err(|e| CheckpointError(format!("`{}`: {e}", path.display())))?;
        let (header_len, metadata) = match SafeTensors::read_metadata(&bytes) {
            Ok(parsed) => parsed,
            Err(e) => return fail(diagnose(&bytes, &e.to_string())),
        };
        let mut names: Vec<String> = metadata.tensors().into_keys().collect();
        names.sort();
        Ok(Checkpoint {
            path: path.to_path_buf(),
            bytes,
            data_start: 8 + header_len,
            metadata,
            names,
        })
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn entry(&self, name: &str) -> Option<(&TensorInfo, &[u8])> {
        let info = self.metadata.info(name)?;
        let (start, end) = info.data_offsets;
        let data = self
            .bytes
            .get(self.data_start + start..self.data_start + end)?;
        Some((info, data))
    }

    /// Tensor names, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether a tensor of this name exists.
    pub fn has(&self, name: &str) -> bool {
        self.names
            .binary_search_by(|n| n.as_str().cmp(name))
            .is_ok()
    }

    /// The dtype word and shape of a tensor.
    pub fn info(&self, name: &str) -> Option<(String, Vec<usize>)> {
        let (t, _) = self.entry(name)?;
        Some((format!("{:?}", t.dtype), t.shape.clone()))
    }

    /// The first of `candidates` present in the file.
    pub fn find<'n>(&self, candidates: &'n [String]) -> Option<&'n str> {
        candidates.iter().find(|c| self.has(c)).map(String::as_str)
    }

    /// A 2-D tensor of shape `rows x cols`, widened to f64, row-major.
    pub fn matrix(
        &self,
        name: &str,
        rows: usize,
        cols: usize,
    ) -> Result<DMatrix<f64>, CheckpointError> {
        let (shape, data) = self.tensor(name)?;
        if shape != [rows, cols] {
            return fail(format!(
                "tensor `{name}`: expected shape [{rows}, {cols}], found {shape:?}"
            ));
        }
        Ok(DMatrix::from_row_slice(rows, cols, &data))
    }

    /// A 2-D tensor's shape; an error naming it when it is missing or not 2-D.
    pub fn shape2(&self, name: &str) -> Result<(usize, usize), CheckpointError> {
        match self.info(name) {
            None => fail(format!("tensor `{name}`: missing from the checkpoint")),
            Some((_, s)) if s.len() == 2 => {
                validate::non_empty(name, &s)?;
                Ok((s[0], s[1]))
            }
            Some((_, s)) => fail(format!(
                "tensor `{name}`: expected a matrix, found shape {s:?}"
            )),
        }
    }

    /// Rows `ids` of a 2-D tensor (`rows x cols`), and the mean of all its rows.
    pub fn rows_and_mean(
        &self,
        name: &str,
        ids: &[usize],
    ) -> Result<(Vec<f64>, Vec<f64>, usize), CheckpointError> {
        let (rows, cols) = self.shape2(name)?;
        let (_, data) = self.tensor(name)?;
        let mut picked = Vec::with_capacity(ids.len() * cols);
        for &id in ids {
            if id >= rows {
                return fail(format!(
                    "tensor `{name}`: token id {id} is out of range (the vocabulary has {rows} rows)"
                ));
            }
            picked.extend_from_slice(&data[id * cols..(id + 1) * cols]);
        }
        let mut mean = vec![0.0; cols];
        for row in data.chunks_exact(cols.max(1)) {
            for (m, v) in mean.iter_mut().zip(row) {
                *m += v;
            }
        }
        for m in &mut mean {
            *m /= rows.max(1) as f64;
        }
        validate::embedding(name, &picked, &mean)?;
        Ok((picked, mean, cols))
    }

    /// A tensor's shape and values widened to f64 (F32, F16, BF16, F64); every value finite.
    pub fn tensor(&self, name: &str) -> Result<(Vec<usize>, Vec<f64>), CheckpointError> {
        let Some((t, bytes)) = self.entry(name) else {
            return fail(format!("tensor `{name}`: missing from the checkpoint"));
        };
        validate::non_empty(name, &t.shape)?;
        let data: Vec<f64> = match t.dtype {
            Dtype::F32 => bytes
                .chunks_exact(4)
                .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                .collect(),
            Dtype::F64 => bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                .collect(),
            Dtype::F16 => bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f64())
                .collect(),
            Dtype::BF16 => bytes
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f64())
                .collect(),
            other => {
                return fail(format!(
                    "tensor `{name}`: dtype {other:?} is not supported (F32, F16, BF16 or F64)"
                ))
            }
        };
        if let Some(i) = data.iter().position(|v| !v.is_finite()) {
            return fail(format!(
                "tensor `{name}`: value {} at flat index {i} is not finite",
                data[i]
            ));
        }
        Ok((t.shape.clone(), data))
    }

    /// Which layout the names follow, if any.
    pub fn detect_format(&self) -> Option<Format> {
        if gpt2::names(0).find(|c| self.find(c).is_some()).is_some() {
            Some(Format::Gpt2)
        } else if bert::names(0).find(|c| self.find(c).is_some()).is_some() {
            Some(Format::Bert)
        } else if llama::names(0).find(|c| self.find(c).is_some()).is_some() {
            Some(Format::Llama)
        } else {
            None
        }
    }

    /// Layer indices that have an attention block in `format`, in order.
    pub fn layer_indices(&self, format: Format) -> Vec<usize> {
        let mut found = BTreeSet::new();
        for name in &self.names {
            if let Some(l) = match format {
                Format::Gpt2 => gpt2::layer_of(name),
                Format::Bert => bert::layer_of(name),
                Format::Llama => llama::layer_of(name),
            } {
                found.insert(l);
            }
        }
        found.into_iter().collect()
    }

    /// The model width d: the embedding's columns, else the first layer's query width.
    pub fn width(&self, format: Format) -> Result<usize, CheckpointError> {
        let embedding = self.embedding_name(format);
        if self.has(&embedding) {
            return Ok(self.shape2(&embedding)?.1);
        }
        let first = self.layer_indices(format).first().copied().unwrap_or(0);
        let name = match format {
            Format::Gpt2 => gpt2::attention_names(self, first).0,
            Format::Bert => bert::attention_names(self, first).0,
            // q_proj is [H d_h, d]: d is its second axis.
            Format::Llama => {
                let q = llama::tensor_name(self, first, "self_attn.q_proj.weight");
                return Ok(self.shape2(&q)?.1);
            }
        };
        Ok(self.shape2(&name)?.0)
    }

    /// The word-embedding tensor's name (the prefixed spelling when that one is in the file).
    pub fn embedding_name(&self, format: Format) -> String {
        let candidates = match format {
            Format::Gpt2 => gpt2::embedding_names(),
            Format::Bert => bert::embedding_names(),
            Format::Llama => llama::embedding_names(),
        };
        self.find(&candidates).unwrap_or(&candidates[0]).to_string()
    }

    /// The position-embedding tensor's name when the file has one (gpt2 `wpe`, bert
    /// `position_embeddings`; llama has none: RoPE acts in the scores).
    pub fn position_embedding_name(&self, format: Format) -> Option<String> {
        let candidates: Vec<String> = match format {
            Format::Gpt2 => vec!["wpe.weight".into(), "transformer.wpe.weight".into()],
            Format::Bert => vec![
                "embeddings.position_embeddings.weight".into(),
                "bert.embeddings.position_embeddings.weight".into(),
            ],
            Format::Llama => Vec::new(),
        };
        self.find(&candidates).map(str::to_string)
    }

    /// Rows 0..count of a 2-D tensor of `cols` columns (the first `count` positions).
    pub fn leading_rows(
        &self,
        name: &str,
        count: usize,
        cols: usize,
    ) -> Result<Vec<f64>, CheckpointError> {
        let (rows, width) = self.shape2(name)?;
        if width != cols {
            return fail(format!(
                "tensor `{name}`: expected {cols} columns (d), found {width}"
            ));
        }
        if count > rows {
            return fail(format!(
                "tensor `{name}`: {count} tokens but only {rows} positions"
            ));
        }
        let (_, data) = self.tensor(name)?;
        Ok(data[..count * cols].to_vec())
    }

    /// The heads of layer `layer`: A_h and V_h for h = 0..heads, d x d each.
    pub fn layer_heads(
        &self,
        format: Format,
        layer: usize,
        d: usize,
        heads: usize,
    ) -> Result<Vec<HeadWeights>, CheckpointError> {
        if heads == 0 {
            return fail("heads = 0: must be at least 1");
        }
        if !d.is_multiple_of(heads) {
            return fail(format!("heads = {heads} does not divide d = {d}"));
        }
        let maps = match format {
            Format::Gpt2 => gpt2::maps(self, layer, d)?,
            Format::Bert => bert::maps(self, layer, d)?,
            Format::Llama => return fail(LLAMA_NEEDS_CONFIG),
        };
        let formed = split_heads(&maps, heads);
        let (a_names, v_names) = self.head_tensor_names(format, layer);
        validate::heads(&formed, &a_names, &v_names)?;
        Ok(formed)
    }

    /// The tensors A_h is formed from, and those V_h is formed from, in layer `layer`.
    fn head_tensor_names(&self, format: Format, layer: usize) -> (Vec<String>, Vec<String>) {
        match format {
            Format::Gpt2 => {
                let (qkv, proj) = gpt2::attention_names(self, layer);
                (vec![qkv.clone()], vec![qkv, proj])
            }
            Format::Bert => {
                let (q, k, v, o) = bert::attention_names(self, layer);
                (vec![q, k], vec![v, o])
            }
            Format::Llama => {
                let name = |t: &str| llama::tensor_name(self, layer, &format!("self_attn.{t}"));
                (
                    vec![name("q_proj.weight"), name("k_proj.weight")],
                    vec![name("v_proj.weight"), name("o_proj.weight")],
                )
            }
        }
    }

    /// The heads of layer `layer` kept factored: W_Q^h, W_K^h, W_V^h (d x d_h) and W_O^h
    /// (d_h x d) for h = 0..heads.
    pub fn layer_factors(
        &self,
        format: Format,
        layer: usize,
        d: usize,
        heads: usize,
    ) -> Result<Vec<HeadFactors>, CheckpointError> {
        if heads == 0 || !d.is_multiple_of(heads) {
            return fail(format!("heads = {heads} does not divide d = {d}"));
        }
        let maps = match format {
            Format::Gpt2 => gpt2::maps(self, layer, d)?,
            Format::Bert => bert::maps(self, layer, d)?,
            Format::Llama => return fail(LLAMA_NEEDS_CONFIG),
        };
        // The heads are checked as formed in f64 (A_h, V_h), as `layer_heads` does, then kept
        // factored.
        let (a_names, v_names) = self.head_tensor_names(format, layer);
        validate::heads(&split_heads(&maps, heads), &a_names, &v_names)?;
        Ok(split_factors(&maps, heads))
    }
}

/// The llama layout's heads come from [`llama::layer_factors`] with its config.json.
const LLAMA_NEEDS_CONFIG: &str =
    "the llama layout is read with its config.json (llama::layer_factors), not by head count";

/// W_Q^h, W_K^h, W_V^h (columns h d_h .. (h+1) d_h) and W_O^h (those rows) for every head.
pub fn split_factors(maps: &LayerMaps, heads: usize) -> Vec<HeadFactors> {
    let dh = maps.q.nrows() / heads;
    (0..heads)
        .map(|h| {
            let cols = h * dh;
            HeadFactors {
                q: maps.q.columns(cols, dh).into_owned(),
                k: maps.k.columns(cols, dh).into_owned(),
                v: maps.v.columns(cols, dh).into_owned(),
                o: maps.o.rows(cols, dh).into_owned(),
            }
        })
        .collect()
}

/// The four d x d maps of one layer in the row-vector convention: x -> x W_Q, x W_K, x W_V,
/// and z -> z W_O on the concatenated heads.
pub struct LayerMaps {
    /// W_Q.
    pub q: DMatrix<f64>,
    /// W_K.
    pub k: DMatrix<f64>,
    /// W_V.
    pub v: DMatrix<f64>,
    /// W_O.
    pub o: DMatrix<f64>,
}

/// A_h = W_Q^h (W_K^h)^T / sqrt(d_h), V_h = (W_V^h W_O^h)^T for every head.
pub fn split_heads(maps: &LayerMaps, heads: usize) -> Vec<HeadWeights> {
    let d = maps.q.nrows();
    let dh = d / heads;
    let scale = 1.0 / (dh as f64).sqrt();
    (0..heads)
        .map(|h| {
            let cols = h * dh;
            let q = maps.q.columns(cols, dh);
            let k = maps.k.columns(cols, dh);
            let v = maps.v.columns(cols, dh);
            let o = maps.o.rows(cols, dh);
            HeadWeights {
                a: (q * k.transpose()) * scale,
                v: (v * o).transpose(),
            }
        })
        .collect()
}

/// Why a file did not open, naming the tensor when the header points at one: the dtype
/// that is unknown, or the tensor whose data run past the end of a truncated file.
fn diagnose(bytes: &[u8], reason: &str) -> String {
    let header = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .and_then(|n| usize::try_from(n).ok())
        .and_then(|n| bytes.get(8..8usize.checked_add(n)?))
        .and_then(|h| {
            serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(h)
                .ok()
                .map(|m| (h.len(), m))
        });
    let Some((header_len, map)) = header else {
        return format!("not a valid .safetensors file ({reason})");
    };
    let data_len = bytes.len() - 8 - header_len;
    for (name, entry) in &map {
        if name == "__metadata__" {
            continue;
        }
        let dtype = entry.get("dtype").and_then(|v| v.as_str()).unwrap_or("");
        if serde_json::from_value::<Dtype>(serde_json::Value::String(dtype.to_string())).is_err() {
            return format!("tensor `{name}`: unknown dtype `{}`", dtype.escape_debug());
        }
        let end = entry
            .get("data_offsets")
            .and_then(|v| v.get(1))
            .and_then(|v| v.as_u64());
        if end.is_some_and(|e| e > data_len as u64) {
            return format!(
                "tensor `{name}`: its data run past the end of the file (truncated: {data_len} data bytes)"
            );
        }
    }
    format!("not a valid .safetensors file ({reason})")
}
