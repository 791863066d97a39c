//! Python values to TOML values (a scenario dict becomes the table the file would give) and
//! numpy matrices to nalgebra ones.

use nalgebra::DMatrix;
use numpy::ndarray::ArrayView2;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// The deepest nesting a scenario dict may have (a matrix inside a head inside a list is 4).
const MAX_DEPTH: usize = 16;

/// Converts a Python value to TOML: dict (str keys) -> table, list or tuple -> array,
/// bool, int, float, str; numpy arrays and scalars through `.tolist()`. `key` names the value in
/// messages (dotted, with [i] for list items).
pub fn py_to_toml(value: &Bound<'_, PyAny>, key: &str) -> PyResult<toml::Value> {
    convert(value, key, 0)
}

fn convert(value: &Bound<'_, PyAny>, key: &str, depth: usize) -> PyResult<toml::Value> {
    let place = if key.is_empty() { "scenario" } else { key };
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "{place}: nested more than {MAX_DEPTH} levels deep"
        )));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut table = toml::Table::new();
        for (k, v) in dict.iter() {
            let Ok(name) = k.extract::<String>() else {
                return Err(PyValueError::new_err(format!(
                    "{place}: keys must be strings, got {}",
                    k.repr()?
                )));
            };
            let child = if key.is_empty() {
                name.clone()
            } else {
                format!("{key}.{name}")
            };
            table.insert(name, convert(&v, &child, depth + 1)?);
        }
        return Ok(toml::Value::Table(table));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for (i, item) in value.try_iter()?.enumerate() {
            items.push(convert(&item?, &format!("{place}[{i}]"), depth + 1)?);
        }
        return Ok(toml::Value::Array(items));
    }
    if value.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(value.extract()?));
    }
    if value.is_instance_of::<PyInt>() {
        return match value.extract::<i64>() {
            Ok(i) => Ok(toml::Value::Integer(i)),
            Err(_) => Err(PyValueError::new_err(format!(
                "{place}: the integer {} does not fit in 64 bits",
                value.repr()?
            ))),
        };
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(value.extract()?));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(value.extract()?));
    }
    if value.hasattr("tolist")? {
        // numpy arrays and numpy scalars.
        return convert(&value.call_method0("tolist")?, key, depth + 1);
    }
    Err(PyValueError::new_err(format!(
        "{place}: a value of type {} has no TOML form (use dict, list, bool, int, float or str)",
        value.get_type().name()?
    )))
}

/// The `set` dict as `KEY=VALUE` texts read exactly like `--set`: a str value is the text
/// itself, any other value its TOML form.
pub fn sets_to_strings(sets: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<String>> {
    let Some(sets) = sets else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(sets.len());
    for (k, v) in sets.iter() {
        let Ok(key) = k.extract::<String>() else {
            return Err(PyValueError::new_err(format!(
                "set: keys must be dotted strings like \"params.v11\", got {}",
                k.repr()?
            )));
        };
        let text = match v.extract::<String>() {
            Ok(text) => text,
            Err(_) => py_to_toml(&v, &format!("set[{key:?}]"))?.to_string(),
        };
        out.push(format!("{key}={text}"));
    }
    Ok(out)
}

/// A d x d matrix from a 2-D array view, checked (shape, finite entries).
pub fn matrix_rows(view: &ArrayView2<'_, f64>, d: usize, what: &str) -> PyResult<DMatrix<f64>> {
    let (rows, cols) = view.dim();
    if rows != d || cols != d {
        return Err(PyValueError::new_err(format!(
            "{what}: expected a {d} x {d} matrix (d from X), got shape ({rows}, {cols})"
        )));
    }
    if let Some(((i, j), _)) = view.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(PyValueError::new_err(format!(
            "{what}[{i}][{j}]: not a finite number"
        )));
    }
    Ok(DMatrix::from_fn(d, d, |i, j| view[[i, j]]))
}
