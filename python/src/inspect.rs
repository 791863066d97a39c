//! `tokdyn.inspect`: what `tokdyn inspect CHECKPOINT --heads H` computes, as numbers.
//!
//! The library's `inspect` lists the checkpoint and writes `heads.csv` (into `out`, or a
//! temporary folder that is removed); the heads it summarises are formed again here,
//! A_h = W_Q^h (W_K^h)^T / sqrt(d_h) and V_h = (W_V^h W_O^h)^T (docs/MATH.md §8), and handed back
//! whole with their spectra: the eigenvalues of the symmetric part (A_h + A_h^T) / 2 (ascending)
//! and those of V_h (complex, in the order the real Schur form gives them).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use numpy::{PyArray1, PyArrayMethods};
use tokdyn::checkpoint::spectra::{spectra, HeadSpectra};
use tokdyn::checkpoint::Checkpoint;
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
    // The command's own checks and messages first (and heads.csv, when heads are asked for).
    let temp;
    let target = match (&out, heads) {
        (Some(dir), _) => Some(dir.clone()),
        (None, Some(_)) => {
            temp = tempfile::tempdir().map_err(Error::io(std::env::temp_dir()))?;
            Some(temp.path().join("result"))
        }
        (None, None) => None,
    };
    let report = tokdyn::command::inspect::inspect(&path, heads, format.as_deref(), target)?;
    let heads_csv = match &report.dir {
        Some(dir) => {
            let csv = dir.join("heads.csv");
            Some(std::fs::read_to_string(&csv).map_err(Error::io(&csv))?)
        }
        None => None,
    };
    let input = |message: String| Error::Input(format!("{}: {message}", path.display()));
    let (format, d) = (report.format, report.d);
    let mut found = Found {
        table: report.table,
        format: format.to_string(),
        d,
        layers: report.layers.clone(),
        heads_csv,
        dir: if out.is_some() { report.dir } else { None },
        heads: Vec::new(),
    };
    let Some(h) = heads else {
        return Ok(found);
    };
    let checkpoint = Checkpoint::open(&path).map_err(|e| input(e.to_string()))?;
    for &l in &report.layers {
        let weights = checkpoint
            .layer_heads(format, l, d, h)
            .map_err(|e| input(format!("layer {l}: {e}")))?;
        for (i, w) in weights.into_iter().enumerate() {
            let HeadSpectra { a_sym, mut v_eig } = spectra(&w);
            if v_eig.is_empty() {
                v_eig = vec![num_complex::Complex64::new(f64::NAN, f64::NAN); d];
            }
            // nalgebra stores column-major; numpy wants rows.
            let rows = |m: &nalgebra::DMatrix<f64>| m.transpose().as_slice().to_vec();
            found.heads.push(HeadFound {
                layer: l,
                head: i,
                a: rows(&w.a),
                v: rows(&w.v),
                a_sym,
                v_eig,
            });
        }
    }
    Ok(found)
}
