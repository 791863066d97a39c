//! `tokdyn.inspect`: what `tokdyn inspect CHECKPOINT --heads H` computes, as numbers.
//!
//! The library's `inspect_with` lists the checkpoint, writes `heads.csv` only into `out`, and
//! hands each head it summarises, A_h = W_Q^h (W_K^h)^T / sqrt(d_h) and
//! V_h = (W_V^h W_O^h)^T (docs/MATH.md §8), to this module, which keeps it whole with its spectra: the eigenvalues of the symmetric part (A_h + A_h^T) / 2 (ascending)
//! and those of V_h (complex, in the order the real Schur form gives them).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use numpy::{PyArray1, PyArrayMethods};
use tokdyn::checkpoint::spectra::HeadSpectra;
use tokdyn::checkpoint::HeadWeights;
use tokdyn::command::inspect::heads_csv;
use tokdyn::error::Error;

use crate::detached::detached;

/// Everything `inspect` hands back, before it becomes Python values.
struct Found {
    table: String,
    format: String,
    d: usize,
    layers: Vec<usize>,
    heads_csv: Option<String>,
    dir: Option<PathBuf>,
    /// Per head, layer-major.
    heads: Vec<HeadFound>,
}

/// One head: its place, A_h and V_h (row-major), and their spectra.
struct HeadFound {
    layer: usize,
    head: usize,
    a: Vec<f64>,
    v: Vec<f64>,
    a_sym: Vec<f64>,
    v_eig: Vec<num_complex::Complex64>,
}

/// `inspect`: a dict with `table`, `format`, `d`, `layers`, `dir`, `heads_csv` (text or None),
/// and per head `layer`, `head`, `A`, `V` (row-major, d x d), `a_sym` (d eigenvalues,
/// ascending) and `v_eig` (d complex eigenvalues); without `heads` only the
/// first five.
#[pyfunction]
#[pyo3(signature = (checkpoint, heads=None, format=None, out=None))]
pub fn inspect<'py>(
    py: Python<'py>,
    checkpoint: PathBuf,
    heads: Option<usize>,
    format: Option<String>,
    out: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let found = detached(py, move || inspect_in_rust(checkpoint, heads, format, out))?;
    let dict = PyDict::new(py);
    dict.set_item("table", found.table)?;
    dict.set_item("format", found.format)?;
    dict.set_item("d", found.d)?;
    dict.set_item("layers", found.layers)?;
    dict.set_item("heads_csv", found.heads_csv)?;
    dict.set_item("dir", found.dir)?;
    if heads.is_none() {
        return Ok(dict);
    }
    let d = found.d;
    let count = found.heads.len();
    let (mut layer, mut head) = (Vec::new(), Vec::new());
    let (mut a, mut v, mut a_sym, mut v_eig) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for one in found.heads {
        layer.push(one.layer as i64);
        head.push(one.head as i64);
        a.extend(one.a);
        v.extend(one.v);
        a_sym.extend(one.a_sym);
        v_eig.extend(one.v_eig);
    }
    dict.set_item("layer", PyArray1::from_vec(py, layer))?;
    dict.set_item("head", PyArray1::from_vec(py, head))?;
    dict.set_item("A", PyArray1::from_vec(py, a).reshape([count, d, d])?)?;
    dict.set_item("V", PyArray1::from_vec(py, v).reshape([count, d, d])?)?;
    dict.set_item("a_sym", PyArray1::from_vec(py, a_sym).reshape([count, d])?)?;
    dict.set_item("v_eig", PyArray1::from_vec(py, v_eig).reshape([count, d])?)?;
    Ok(dict)
}

fn inspect_in_rust(
    path: PathBuf,
    heads: Option<usize>,
    format: Option<String>,
    out: Option<PathBuf>,
) -> Result<Found, Error> {
    // nalgebra stores column-major; numpy wants rows.
    let rows = |m: &nalgebra::DMatrix<f64>| m.transpose().as_slice().to_vec();
    let mut kept = Vec::new();
    let mut keep = |layer: usize, head: usize, w: &HeadWeights, s: &HeadSpectra| {
        let mut v_eig = s.v_eig.clone();
        if v_eig.is_empty() {
            v_eig = vec![num_complex::Complex64::new(f64::NAN, f64::NAN); w.v.nrows()];
        }
        kept.push(HeadFound {
            layer,
            head,
            a: rows(&w.a),
            v: rows(&w.v),
            a_sym: s.a_sym.clone(),
            v_eig,
        });
    };
    let report =
        tokdyn::command::inspect::inspect_with(&path, heads, format.as_deref(), out, &mut keep)?;
    let heads_csv = match heads {
        Some(_) => {
            let bytes = heads_csv(&report.heads).map_err(Error::io(&path))?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        None => None,
    };
    Ok(Found {
        table: report.table,
        format: report.format.to_string(),
        d: report.d,
        layers: report.layers,
        heads_csv,
        dir: report.dir,
        heads: kept,
    })
}
