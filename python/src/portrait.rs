//! `tokdyn.portrait`: the picture of `tokdyn portrait` (docs/MATH.md §6.1), drawn into `out` or
//! into a temporary folder that is removed (so that bad input is refused with the command's
//! message either way). The numbers of the portrait (fixed points, cycles, the R2 path) are
//! put together in Python from `predict` and the run or the OA equation, as the command reads
//! them.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use tokdyn::command::portrait::PathSource;
use tokdyn::error::Error;

use crate::detached::detached;
use crate::{load_scenario, options};

/// `portrait`: (the path of portrait.png, or None when `out` is None; the path of the
/// `order.csv` the R2 path was read from, or None when the OA equation was integrated).
#[pyfunction]
#[pyo3(signature = (scenario, sets=None, out=None))]
pub fn portrait(
    py: Python<'_>,
    scenario: &Bound<'_, PyAny>,
    sets: Option<&Bound<'_, PyDict>>,
    out: Option<PathBuf>,
) -> PyResult<(Option<PathBuf>, Option<PathBuf>)> {
    let scenario = load_scenario(scenario, sets, None)?;
    detached(py, move || {
        let temp;
        let target = match &out {
            Some(dir) => dir.clone(),
            None => {
                temp = tempfile::tempdir().map_err(Error::io(std::env::temp_dir()))?;
                temp.path().join("result")
            }
        };
        let (png, source) =
            tokdyn::command::portrait::portrait(&scenario, &options(Some(target), "portrait"))?;
        let order = match source {
            PathSource::Run(path) => Some(path),
            PathSource::OttAntonsen => None,
        };
        Ok((out.is_some().then_some(png), order))
    })
}
