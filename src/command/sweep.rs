//! `tokdyn sweep SWEEP`: the grid, refinement, continuation or codim-2 sweep of
//! [`crate::sweep`] (its shards and resumes), and where its folder is.

use std::path::Path;

use crate::error::Error;
use crate::sweep::{sweep, SweepOptions};

/// `tokdyn sweep`: runs the sweep, prints its folder.
pub fn cli(path: &Path, options: &SweepOptions) -> Result<(), Error> {
    let dir = sweep(path, options)?;
    println!("-> {}", dir.display());
    Ok(())
}
