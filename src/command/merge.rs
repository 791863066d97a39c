//! `tokdyn merge DIR`: the shard files of a sweep folder assembled into `sweep.csv` (by
//! [`crate::sweep::merge`]).

use std::path::Path;

use crate::error::Error;
use crate::sweep::merge;

/// `tokdyn merge`: merges, prints the merged file.
pub fn cli(dir: &Path) -> Result<(), Error> {
    let path = merge(dir)?;
    println!("-> {}", path.display());
    Ok(())
}
