//! Output folders and file writers.
//!
//! A run writes into a staging folder beside its target (`.NAME.tmp-XXXX`) and renames it into
//! place only when everything succeeded, so there is never a half-written output folder and an
//! existing result is replaced only by a complete one.
//!
//! Numbers in CSV files are written in the shortest form that reads back to the same f64
//! (`ryu`, through the `csv` crate), so files are byte-identical for identical results;
//! quantities that do not apply are empty cells.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use npyz::WriterBuilder;
use serde::Serialize;

use crate::observe::{Observer, RunInfo, Sample};

/// A folder being written, renamed to its target by [`StagedDir::commit`]; dropped without a
/// commit, it is removed.
pub struct StagedDir {
    target: PathBuf,
    staging: tempfile::TempDir,
}

impl StagedDir {
    /// Starts a staging folder for `target` (parent folders are created).
    pub fn new(target: &Path) -> io::Result<Self> {
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&parent)?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into());
        let staging = tempfile::Builder::new()
            .prefix(&format!(".{name}.tmp-"))
            .tempdir_in(&parent)?;
        Ok(StagedDir {
            target: target.to_path_buf(),
            staging,
        })
    }

    /// The staging folder, where files are written.
    pub fn path(&self) -> &Path {
        self.staging.path()
    }

    /// The final location.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Moves the staging folder into place, replacing an existing target.
    pub fn commit(self) -> io::Result<PathBuf> {
        let staging = self.staging.keep();
        if self.target.exists() {
            let parent = staging.parent().unwrap_or(Path::new("."));
            let old = tempfile::Builder::new()
                .prefix(".replaced.tmp-")
                .tempdir_in(parent)?
                .keep();
            fs::remove_dir(&old)?;
            fs::rename(&self.target, &old)?;
            if let Err(e) = fs::rename(&staging, &self.target) {
                let _ = fs::rename(&old, &self.target);
                let _ = fs::remove_dir_all(&staging);
                return Err(e);
            }
            let _ = fs::remove_dir_all(&old);
        } else if let Err(e) = fs::rename(&staging, &self.target) {
            let _ = fs::remove_dir_all(&staging);
            return Err(e);
        }
        Ok(self.target)
    }
}

/// Writes `value` as pretty JSON.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    serde_json::to_writer_pretty(&mut w, value).map_err(io::Error::other)?;
    w.write_all(b"\n")?;
    w.flush()
}

/// One row of `order.csv`.
#[derive(Serialize)]
struct OrderRow {
    t: f64,
    r2_re: f64,
    r2_im: f64,
    r2_abs: f64,
    r2_arg: f64,
    r1_abs: Option<f64>,
    nematic: f64,
}

/// Streams `order.csv` (`t,r2_re,r2_im,r2_abs,r2_arg,r1_abs,nematic`), one row per sample.
pub struct OrderCsv {
    writer: csv::Writer<BufWriter<File>>,
}

impl OrderCsv {
    /// Creates the file and writes the header.
    pub fn create(path: &Path) -> io::Result<Self> {
        let writer = csv::Writer::from_writer(BufWriter::new(File::create(path)?));
        Ok(OrderCsv { writer })
    }
}

impl Observer for OrderCsv {
    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        let row = OrderRow {
            t: s.t,
            r2_re: s.order.r2.re,
            r2_im: s.order.r2.im,
            r2_abs: s.order.r2.norm(),
            r2_arg: s.order.r2_arg(),
            r1_abs: s.order.r1,
            nematic: s.order.nematic,
        };
        self.writer.serialize(row).map_err(io::Error::other)
    }

    fn finish(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

/// Writes tokens (n x d row-major) as CSV with the header `x1,...,xd`, one token a row.
pub fn write_tokens_csv(path: &Path, tokens: &[f64], d: usize) -> io::Result<()> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(BufWriter::new(File::create(path)?));
    w.write_record((1..=d).map(|i| format!("x{i}")))
        .map_err(io::Error::other)?;
    for row in tokens.chunks_exact(d) {
        w.serialize(row).map_err(io::Error::other)?;
    }
    w.flush()
}

/// Streams the sampled tokens to `trajectory.npy`, float64 of shape (samples, n, d).
pub struct TrajectoryNpy {
    path: PathBuf,
    n: usize,
    d: usize,
    writer: Option<npyz::NpyWriter<f64, BufWriter<File>>>,
}

impl TrajectoryNpy {
    /// A writer for n tokens in d dimensions; the file is created at the start of the run.
    pub fn new(path: &Path, n: usize, d: usize) -> Self {
        TrajectoryNpy {
            path: path.to_path_buf(),
            n,
            d,
            writer: None,
        }
    }
}

impl Observer for TrajectoryNpy {
    fn wants_tokens(&self) -> bool {
        true
    }

    fn start(&mut self, info: &RunInfo) -> io::Result<()> {
        let file = BufWriter::new(File::create(&self.path)?);
        let shape = [info.samples as u64, self.n as u64, self.d as u64];
        self.writer = Some(
            npyz::WriteOptions::new()
                .default_dtype()
                .shape(&shape)
                .writer(file)
                .begin_nd()?,
        );
        Ok(())
    }

    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        match (&mut self.writer, s.tokens) {
            (Some(w), Some(tokens)) => w.extend(tokens.iter().copied()),
            _ => Ok(()),
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        // A run that stopped early leaves a short file; its folder is not committed then.
        match self.writer.take() {
            Some(w) => w.finish().or(Ok(())),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_dir_replaces_only_on_commit() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("out").join("run");
        let first = StagedDir::new(&target).unwrap();
        fs::write(first.path().join("a.txt"), "one").unwrap();
        first.commit().unwrap();
        assert_eq!(fs::read_to_string(target.join("a.txt")).unwrap(), "one");

        // An abandoned second run leaves the first intact and no staging folder behind.
        let second = StagedDir::new(&target).unwrap();
        fs::write(second.path().join("a.txt"), "two").unwrap();
        drop(second);
        assert_eq!(fs::read_to_string(target.join("a.txt")).unwrap(), "one");
        assert_eq!(fs::read_dir(target.parent().unwrap()).unwrap().count(), 1);

        let third = StagedDir::new(&target).unwrap();
        fs::write(third.path().join("b.txt"), "three").unwrap();
        third.commit().unwrap();
        assert!(!target.join("a.txt").exists());
        assert_eq!(fs::read_to_string(target.join("b.txt")).unwrap(), "three");
        assert_eq!(fs::read_dir(target.parent().unwrap()).unwrap().count(), 1);
    }
}
