//! The heads of a layer: `{ A, V }` (formed, d x d each) or `{ Q, K, V, O }` (factored, in the
//! checkpoints' row-vector convention: A = Q K^T / sqrt(d_h), value matrix (V O)^T; docs/MATH.md
//! §9).
//!
//! A factor is rows of entries (numbers or expressions over `[params]`) or `{ file = ... }`
//! (.npy / .csv). d_h is read off Q (its row length, or the width of its file among the
//! divisors of d); K and V must then be d x d_h and O d_h x d, and d_h must divide d.

use nalgebra::DMatrix;
use toml::Value;

use super::error::ScenarioError;
use super::matrix::{build_matrix, describe, entry, matrix_to_toml, MatrixContext};
use super::schema::RawHead;
use super::{FactorSpec, HeadSpec};

/// The heads of one layer, formed and factored, and their resolved tables (in order).
#[derive(Default)]
pub struct LayerHeads {
    pub formed: Vec<HeadSpec>,
    pub factored: Vec<FactorSpec>,
    pub resolved: Vec<Value>,
}

/// `heads = [...]` found at `key` (e.g. `model.heads`).
pub fn build_heads(
    raw: &[RawHead],
    key: &str,
    ctx: &MatrixContext,
) -> Result<LayerHeads, ScenarioError> {
    if raw.is_empty() {
        return Err(ScenarioError::at(ctx.file, key, "needs at least one head"));
    }
    let mut heads = LayerHeads::default();
    for (i, h) in raw.iter().enumerate() {
        let at = format!("{key}[{i}]");
        let mut table = toml::Table::new();
        if h.q.is_some() || h.k.is_some() || h.o.is_some() {
            let f = factored_head(h, &at, ctx)?;
            for (name, m) in [("Q", &f.q), ("K", &f.k), ("V", &f.v), ("O", &f.o)] {
                table.insert(name.into(), matrix_to_toml(m));
            }
            heads.factored.push(f);
        } else {
            let head = formed_head(h, &at, ctx)?;
            table.insert("A".into(), matrix_to_toml(&head.a));
            table.insert("V".into(), matrix_to_toml(&head.v));
            heads.formed.push(head);
        }
        heads.resolved.push(Value::Table(table));
    }
    Ok(heads)
}

/// `{ A, V }`.
fn formed_head(h: &RawHead, at: &str, ctx: &MatrixContext) -> Result<HeadSpec, ScenarioError> {
    let missing = |name: &str| {
        ScenarioError::at(
            ctx.file,
            format!("{at}.{name}"),
            "missing: a head is { A = ..., V = ... } or { Q = ..., K = ..., V = ..., O = ... }",
        )
    };
    let a = h.a.as_ref().ok_or_else(|| missing("A"))?;
    let v = h.v.as_ref().ok_or_else(|| missing("V"))?;
    Ok(HeadSpec {
        a: build_matrix(a, &format!("{at}.A"), ctx)?,
        v: build_matrix(v, &format!("{at}.V"), ctx)?,
    })
}

/// `{ Q, K, V, O }`, shapes checked.
fn factored_head(h: &RawHead, at: &str, ctx: &MatrixContext) -> Result<FactorSpec, ScenarioError> {
    if h.a.is_some() {
        return Err(ScenarioError::at(
            ctx.file,
            format!("{at}.A"),
            "give a head either as { A, V } or by its factors { Q, K, V, O }, not both",
        ));
    }
    let get = |name: &str, value: &Option<Value>| {
        value.clone().ok_or_else(|| {
            ScenarioError::at(
                ctx.file,
                format!("{at}.{name}"),
                "missing: a factored head needs Q, K, V (d x d_h) and O (d_h x d)",
            )
        })
    };
    let (q, k, v, o) = (
        get("Q", &h.q)?,
        get("K", &h.k)?,
        get("V", &h.v)?,
        get("O", &h.o)?,
    );
    let d = ctx.d;
    let q_key = format!("{at}.Q");
    let q = factor(&q, &q_key, d, None, ctx)?;
    let d_h = q.ncols();
    if d_h == 0 || !d.is_multiple_of(d_h) {
        return Err(ScenarioError::at(
            ctx.file,
            q_key,
            format!("d_h = {d_h} (the columns of Q) does not divide d = {d}"),
        ));
    }
    Ok(FactorSpec {
        q,
        k: factor(&k, &format!("{at}.K"), d, Some(d_h), ctx)?,
        v: factor(&v, &format!("{at}.V"), d, Some(d_h), ctx)?,
        o: factor(&o, &format!("{at}.O"), d_h, Some(d), ctx)?,
    })
}

/// A d x cols factor (cols read off the value when `None`).
fn factor(
    value: &Value,
    key: &str,
    rows: usize,
    cols: Option<usize>,
    ctx: &MatrixContext,
) -> Result<DMatrix<f64>, ScenarioError> {
    match value {
        Value::Array(r) => rows_of(r, key, rows, cols, ctx),
        Value::Table(t) if t.len() == 1 && t.contains_key("file") => {
            file_factor(&t["file"], key, rows, cols, ctx)
        }
        other => Err(ScenarioError::at(
            ctx.file,
            key,
            format!(
                "expected a factor (rows of entries or {{ file = ... }}), found {}",
                describe(other)
            ),
        )),
    }
}

/// `rows` arrays of `cols` entries (cols: the first row's length when `None`).
fn rows_of(
    rows: &[Value],
    key: &str,
    n_rows: usize,
    cols: Option<usize>,
    ctx: &MatrixContext,
) -> Result<DMatrix<f64>, ScenarioError> {
    let err = |key: String, message: String| ScenarioError::at(ctx.file, key, message);
    if rows.len() != n_rows {
        return Err(err(
            key.to_string(),
            format!("expected {n_rows} rows, found {}", rows.len()),
        ));
    }
    let width = match (cols, rows.first()) {
        (Some(c), _) => c,
        (None, Some(Value::Array(first))) => first.len(),
        (None, _) => 0,
    };
    let mut data = Vec::with_capacity(n_rows * width);
    for (i, row) in rows.iter().enumerate() {
        let row_key = format!("{key}[{i}]");
        let Value::Array(entries) = row else {
            return Err(err(
                row_key,
                format!("expected a row of {width} entries, found {}", describe(row)),
            ));
        };
        if entries.len() != width {
            return Err(err(
                row_key,
                format!(
                    "expected {width} entries (the shape is {n_rows} x {width}), found {}",
                    entries.len()
                ),
            ));
        }
        for (j, v) in entries.iter().enumerate() {
            data.push(entry(v, &format!("{row_key}[{j}]"), ctx)?);
        }
    }
    Ok(DMatrix::from_row_slice(n_rows, width, &data))
}

/// `{ file = ... }` of `rows` rows and `cols` columns (when `None`: the first divisor of d
/// that reads).
fn file_factor(
    file: &Value,
    key: &str,
    rows: usize,
    cols: Option<usize>,
    ctx: &MatrixContext,
) -> Result<DMatrix<f64>, ScenarioError> {
    let file_key = format!("{key}.file");
    let Value::String(name) = file else {
        return Err(ScenarioError::at(
            ctx.file,
            file_key,
            format!("expected a file name, found {}", describe(file)),
        ));
    };
    let path = ctx.base_dir.join(name);
    let widths: Vec<usize> = match cols {
        Some(c) => vec![c],
        None => (1..=ctx.d).filter(|c| ctx.d.is_multiple_of(*c)).collect(),
    };
    let mut first_error = None;
    for c in widths {
        match super::numfile::read_table(&path, rows, c) {
            Ok(data) => return Ok(DMatrix::from_row_slice(rows, c, &data)),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let message = match cols {
        Some(_) => first_error.unwrap_or_default(),
        None => format!(
            "`{}`: expected {rows} rows of d_h numbers with d_h dividing d = {} ({})",
            path.display(),
            ctx.d,
            first_error.unwrap_or_default()
        ),
    };
    Err(ScenarioError::at(ctx.file, file_key, message))
}
