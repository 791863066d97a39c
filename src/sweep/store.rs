//! The files a sweep keeps in its folder besides its results: the manifest `sweep.json`, the
//! progress file (for `--resume`) and the shard files.
//!
//! - `sweep.json` describes the grid (axis names, values as written in the CSV, the number of
//!   points, the columns) and the base scenario table; it is written at the start of every sweep
//!   or shard run, and is the same text for every shard of one sweep. Shards and progress files
//!   belong to the sweep whose manifest is in the folder.
//! - The progress file (`sweep.progress`, or `shard-K-of-N.progress`) starts with a line naming
//!   a fingerprint of the manifest (a file of another grid or base scenario is never read);
//!   then one line per finished point, appended and flushed as the point completes:
//!   `g,INDEX,<result cells>,<check>` for a grid point, `r,<axis values>,<result cells>,<check>`
//!   for a point of boundary refinement, where `<check>` is the FNV-1a hash (16 hex digits) of
//!   the other cells joined by U+001F. A line without its line break (the process was killed
//!   while writing it), whose check does not match (a torn or mixed line) or that does not
//!   parse is ignored, and its point is computed again.
//! - Locks ([`FolderLocks`]): an unsharded sweep or a merge holds the folder's output lock
//!   exclusively; a shard holds it shared plus `.shard-K-of-N.lock` exclusively, so the shards
//!   of one sweep run at once in one folder while a second whole sweep, or a second copy of a
//!   shard, is refused. The manifest is checked and written under `.manifest.lock`.
//! - `shard-K-of-N.csv`: the columns of `sweep.csv` after a leading `index` column, one row per
//!   point i with i mod N = K - 1, in index order.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::output::{lock_path, parent_of, remove_stale_staging, OutputLock};

use super::row::{Layout, Outcome};
use super::spec::{Axis, Plan};
use crate::cells::{csv_line, fmt_opt, parse_records};
use crate::observe::cluster_series::Plateau;
use crate::observe::progress::Counter;

/// The manifest's file name.
pub const MANIFEST: &str = "sweep.json";
/// The format tag of the manifest.
const FORMAT: &str = "tokdyn-sweep-manifest-1";

/// One axis in the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestAxis {
    /// The axis as the sweep file gives it (its fields written inline).
    #[serde(flatten)]
    pub axis: Axis,
    /// The grid values as written in the CSV (2 steps - 1 of them when the axis goes back).
    pub values: Vec<String>,
}

/// `sweep.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub name: String,
    pub version: String,
    pub model: String,
    pub points: usize,
    /// The columns of `sweep.csv`.
    pub columns: Vec<String>,
    pub axes: Vec<ManifestAxis>,
    /// The base scenario table (with `run.model` from the sweep file), as read.
    pub scenario: serde_json::Value,
    /// `label` of the sweep file when it is not the default (`"predict"`): a folder never
    /// mixes simulated and predicted labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// The grid values of an axis as written in the CSV, formatted in parallel blocks (the same
/// bytes in the same order for any thread count); an axis of more than one block reports its
/// progress, so that a grid of 10^8 points is not minutes of silence before its first point.
fn axis_cells(axis: &Axis, label: &str, progress: bool) -> Vec<String> {
    const BLOCK: usize = 1 << 16;
    let points = axis.points();
    let blocks = points.div_ceil(BLOCK);
    let label = format!("{label}: grid values");
    let mut counter = Counter::new(&label, "blocks", blocks as u64, progress && blocks > 1);
    let mut cells = Vec::with_capacity(points);
    for start in (0..points).step_by(BLOCK) {
        let end = (start + BLOCK).min(points);
        cells.par_extend(
            (start..end)
                .into_par_iter()
                .map(|i| axis.cell(axis.value(i))),
        );
        counter.inc();
    }
    counter.finish();
    cells
}

impl Manifest {
    /// The manifest of a plan; `progress`: a huge grid reports the formatting of its values.
    pub fn new(plan: &Plan, progress: bool) -> Self {
        let axes = plan
            .axes
            .iter()
            .map(|a| ManifestAxis {
                axis: a.clone(),
                values: axis_cells(a, &plan.name, progress),
            })
            .collect();
        Manifest {
            format: FORMAT.into(),
            name: plan.name.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            model: plan.model.to_string(),
            points: plan.points(),
            columns: sweep_columns(
                &plan.axes.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
                plan.layout(),
            ),
            axes,
            scenario: serde_json::to_value(&plan.template).unwrap_or(serde_json::Value::Null),
            label: (plan.label_source != super::spec::LabelSource::Simulation)
                .then(|| plan.label_source.as_str().to_string()),
        }
    }

    /// The manifest as written.
    pub fn text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Reads `DIR/sweep.json`; `Ok(None)` when there is none.
    pub fn read(dir: &Path) -> Result<Option<(Manifest, String)>, String> {
        let path = dir.join(MANIFEST);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
        };
        let m: Manifest = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a sweep manifest: {e}", path.display()))?;
        if m.format != FORMAT {
            return Err(format!(
                "{}: format: unknown manifest format `{}` (this tokdyn reads {FORMAT})",
                path.display(),
                m.format
            ));
        }
        let points = m.axes.iter().map(|a| a.values.len()).product::<usize>();
        let expected = |a: &ManifestAxis| a.axis.points();
        if points != m.points || m.axes.iter().any(|a| a.values.len() != expected(a)) {
            return Err(format!(
                "{}: points: the axes do not make {} points",
                path.display(),
                m.points
            ));
        }
        Ok(Some((m, text)))
    }

    /// The axis cells of point `index`.
    pub fn coord_cells(&self, mut index: usize) -> Vec<String> {
        let mut cells = vec![String::new(); self.axes.len()];
        for (k, axis) in self.axes.iter().enumerate().rev() {
            let count = axis.values.len().max(1);
            cells[k] = axis.values[index % count].clone();
            index /= count;
        }
        cells
    }

    /// The layout of the sweep's rows: `label_share` when `sweep.csv` has it, the statistics
    /// when an axis is the temperature.
    pub fn layout(&self) -> Layout {
        Layout {
            share: self.columns.iter().any(|c| c == "label_share"),
            stats: self
                .axes
                .iter()
                .any(|a| a.axis.key == super::spec::TEMPERATURE_KEY),
        }
    }

    /// A 64-bit FNV-1a fingerprint of the manifest text.
    pub fn fingerprint(text: &str) -> String {
        fnv1a(text.as_bytes())
    }
}

/// The 64-bit FNV-1a hash of `bytes`, as 16 hex digits.
fn fnv1a(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The check cell of a progress line: the hash of its other cells.
fn line_check(cells: &[String]) -> String {
    fnv1a(cells.join("\u{1f}").as_bytes())
}

/// The locks a sweep (or merge) holds on its folder while it runs.
pub struct FolderLocks {
    _folder: OutputLock,
    _shard: Option<OutputLock>,
}

impl FolderLocks {
    /// Takes the locks of `dir` for the whole sweep (`shard` = None) or for shard (K, N);
    /// refused (exit 2) when another process holds them. Creates `dir` and removes stale
    /// temporary files of this unit.
    pub fn acquire(dir: &Path, shard: Option<(usize, usize)>) -> Result<FolderLocks, Error> {
        let parent = parent_of(dir);
        fs::create_dir_all(&parent).map_err(Error::io(&parent))?;
        let folder = OutputLock::try_acquire(&lock_path(dir), dir, shard.is_none())?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        remove_stale_staging(&parent, &name);
        fs::create_dir_all(dir).map_err(Error::io(dir))?;
        let (own_shard, prefix) = match shard {
            Some((k, n)) => {
                let unit = format!("shard-{k}-of-{n}");
                let lock = OutputLock::try_acquire(
                    &dir.join(format!(".{unit}.lock")),
                    &dir.join(&unit),
                    true,
                )?;
                (Some(lock), format!(".{unit}."))
            }
            None => (None, ".".to_string()),
        };
        // Temporary files of atomic writes killed half-way (`.FILE.tmp-XXXX`) of this unit.
        if let Ok(entries) = fs::read_dir(dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(&prefix)
                    && name.contains(".tmp-")
                    && entry.file_type().is_ok_and(|t| t.is_file())
                {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        Ok(FolderLocks {
            _folder: folder,
            _shard: own_shard,
        })
    }
}

/// The header of `sweep.csv`.
pub fn sweep_columns(axis_names: &[String], layout: Layout) -> Vec<String> {
    axis_names
        .iter()
        .cloned()
        .chain(layout.columns().iter().map(|s| s.to_string()))
        .collect()
}

/// The header of a shard file.
pub fn shard_columns(axis_names: &[String], layout: Layout) -> Vec<String> {
    std::iter::once("index".to_string())
        .chain(axis_names.iter().cloned())
        .chain(layout.record_columns().iter().map(|s| s.to_string()))
        .collect()
}

/// `shard-K-of-N.csv`.
pub fn shard_file(k: usize, n: usize) -> String {
    format!("shard-{k}-of-{n}.csv")
}

/// Parses a shard file name into (K, N).
pub fn parse_shard_file(name: &str) -> Option<(usize, usize)> {
    let rest = name.strip_prefix("shard-")?.strip_suffix(".csv")?;
    let (k, n) = rest.split_once("-of-")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(k) || !digits(n) {
        return None;
    }
    Some((k.parse().ok()?, n.parse().ok()?))
}

/// The shard files of a folder, sorted by (N, K).
pub fn shard_files(dir: &Path) -> io::Result<Vec<(usize, usize, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some((k, n)) = parse_shard_file(&name) {
            out.push((k, n, entry.path()));
        }
    }
    out.sort_by_key(|(k, n, _)| (*n, *k));
    Ok(out)
}

/// Reads a shard file: (index, result) pairs, checked against the manifest (header, index
/// range, axis values).
pub fn read_shard(path: &Path, manifest: &Manifest) -> Result<Vec<(usize, Outcome)>, String> {
    let text =
        fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let records = parse_records(&text).map_err(|e| format!("{}: not CSV: {e}", path.display()))?;
    let names: Vec<String> = manifest.axes.iter().map(|a| a.axis.name.clone()).collect();
    let layout = manifest.layout();
    let header = shard_columns(&names, layout);
    let mut it = records.into_iter();
    match it.next() {
        Some(h) if h == header => {}
        Some(h) if !h.iter().any(|c| c == "cluster_count") => {
            return Err(format!(
                "{}: header: the file has no `cluster_count` column (written by an older tokdyn): run its shard again",
                path.display()
            ))
        }
        Some(h) => {
            return Err(format!(
                "{}: header: `{}` does not match the sweep in sweep.json (`{}`)",
                path.display(),
                h.join(","),
                header.join(",")
            ))
        }
        None => return Err(format!("{}: empty file", path.display())),
    }
    let k = manifest.axes.len();
    let mut rows = Vec::new();
    for (line, rec) in it.enumerate() {
        let line = line + 2;
        let bad = |what: String| format!("{}: line {line}: {what}", path.display());
        if rec.len() != header.len() {
            return Err(bad(format!(
                "{} cells, expected {}",
                rec.len(),
                header.len()
            )));
        }
        let index: usize = rec[0]
            .parse()
            .ok()
            .filter(|&i| i < manifest.points)
            .ok_or_else(|| bad(format!("index `{}` is not a point of the grid", rec[0])))?;
        if rec[1..=k] != manifest.coord_cells(index)[..] {
            return Err(bad(format!(
                "the axis values of point {index} differ from sweep.json (a shard of another sweep?)"
            )));
        }
        let outcome = Outcome::from_record_cells(&rec[k + 1..], layout)
            .ok_or_else(|| bad("not a result row".into()))?;
        rows.push((index, outcome));
    }
    Ok(rows)
}

/// What a progress file holds.
#[derive(Debug, Default)]
pub struct Progress {
    /// Finished grid points.
    pub grid: HashMap<usize, Outcome>,
    /// Finished refinement points, by their axis cells.
    pub refine: HashMap<Vec<String>, Outcome>,
    /// Length of the file up to its last complete line.
    pub valid_len: u64,
}

fn header_line(fingerprint: &str) -> String {
    format!("# tokdyn sweep progress 3, manifest {fingerprint}\n")
}

/// Reads a progress file written for the manifest with `fingerprint`; `None` if there is none
/// or it belongs to another manifest.
pub fn read_progress(
    path: &Path,
    fingerprint: &str,
    (plan_axes, layout): (usize, Layout),
    points: usize,
) -> io::Result<Option<Progress>> {
    let width = layout.record_columns().len();
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let header = header_line(fingerprint);
    if !bytes.starts_with(header.as_bytes()) {
        return Ok(None);
    }
    // Everything up to the last line break; a torn last line is dropped.
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let mut progress = Progress {
        valid_len: end as u64,
        ..Progress::default()
    };
    let text = String::from_utf8_lossy(&bytes[header.len()..end]);
    for line in text.lines() {
        let Ok(records) = parse_records(line) else {
            continue;
        };
        let Some(mut rec) = records.into_iter().next() else {
            continue;
        };
        // A torn or mixed line fails its check.
        match rec.pop() {
            Some(check) if check == line_check(&rec) => {}
            _ => continue,
        }
        match rec.first().map(String::as_str) {
            Some("g") if rec.len() == 3 + width => {
                let end = 2 + width;
                let (Ok(index), Some(mut outcome), Some(history)) = (
                    rec[1].parse::<usize>(),
                    Outcome::from_record_cells(&rec[2..end], layout),
                    parse_history(&rec[end]),
                ) else {
                    continue;
                };
                outcome.cluster_history = history;
                if index < points {
                    progress.grid.insert(index, outcome);
                }
            }
            Some("r") if rec.len() == 1 + plan_axes + width => {
                if let Some(outcome) = Outcome::from_record_cells(&rec[1 + plan_axes..], layout) {
                    progress.refine.insert(rec[1..=plan_axes].to_vec(), outcome);
                }
            }
            _ => {}
        }
    }
    Ok(Some(progress))
}

/// A point's plateaus in one progress cell: `count:from:to` joined by `;`, `-` for none kept
/// (empty for a kept empty history).
fn history_cell(history: Option<&[Plateau]>) -> String {
    let Some(history) = history else {
        return "-".into();
    };
    history
        .iter()
        .map(|p| {
            format!(
                "{}:{}:{}",
                p.count,
                fmt_opt(Some(p.from)),
                fmt_opt(Some(p.to))
            )
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Reads [`history_cell`] back; `None` when the cell does not parse.
fn parse_history(cell: &str) -> Option<Option<Vec<Plateau>>> {
    match cell {
        "-" => return Some(None),
        "" => return Some(Some(Vec::new())),
        _ => {}
    }
    cell.split(';')
        .map(|p| {
            let mut parts = p.split(':');
            let plateau = Plateau {
                count: parts.next()?.parse().ok()?,
                from: parts.next()?.parse().ok()?,
                to: parts.next()?.parse().ok()?,
            };
            parts.next().is_none().then_some(plateau)
        })
        .collect::<Option<Vec<_>>>()
        .map(Some)
}

/// Appends finished points to a progress file, one `write` per line.
pub struct ProgressWriter {
    file: File,
    path: PathBuf,
    layout: Layout,
}

impl ProgressWriter {
    /// Starts a new progress file (replacing any old one).
    pub fn create(path: &Path, fingerprint: &str, layout: Layout) -> io::Result<Self> {
        let mut file = File::create(path)?;
        file.write_all(header_line(fingerprint).as_bytes())?;
        Ok(ProgressWriter {
            file,
            path: path.to_path_buf(),
            layout,
        })
    }

    /// Continues a progress file after its last complete line (dropping a torn one).
    pub fn resume(path: &Path, valid_len: u64, layout: Layout) -> io::Result<Self> {
        {
            let file = OpenOptions::new().write(true).open(path)?;
            file.set_len(valid_len)?;
        }
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(ProgressWriter {
            file,
            path: path.to_path_buf(),
            layout,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records a finished grid point (with its cluster history as a last cell).
    pub fn grid(&mut self, index: usize, outcome: &Outcome) -> io::Result<()> {
        let mut cells = vec!["g".to_string(), index.to_string()];
        cells.extend(outcome.record_cells(self.layout));
        cells.push(history_cell(outcome.cluster_history.as_deref()));
        self.line(cells)
    }

    /// Records a finished refinement point.
    pub fn refine(&mut self, coords: &[String], outcome: &Outcome) -> io::Result<()> {
        let mut cells = vec!["r".to_string()];
        cells.extend(coords.iter().cloned());
        cells.extend(outcome.record_cells(self.layout));
        self.line(cells)
    }

    /// Appends one line (with its check cell) in one `write`.
    fn line(&mut self, mut cells: Vec<String>) -> io::Result<()> {
        let check = line_check(&cells);
        cells.push(check);
        self.file.write_all(csv_line(&cells).as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::row::RESULT_COLUMNS;

    #[test]
    fn grid_values_in_blocks_are_the_values_one_by_one() {
        // Four blocks and a part, going back: the block edges must not shift a value.
        let axis = Axis {
            name: "x".into(),
            key: "params.x".into(),
            from: -0.3,
            to: 1.7,
            steps: 100_003,
            integer: false,
            back: true,
        };
        let one_by_one: Vec<String> = (0..axis.points())
            .map(|i| axis.cell(axis.value(i)))
            .collect();
        assert_eq!(axis_cells(&axis, "test", false), one_by_one);
        assert_eq!(one_by_one.len(), 200_005);
        assert_eq!(one_by_one[100_002], "1.7");
    }

    fn outcome(label: &str) -> Outcome {
        let mut cells = vec![
            label.to_string(),
            "1.0".into(),
            "0.5".into(),
            "1.0".into(),
            "0.0".into(),
            String::new(),
            String::new(),
            "200.0".into(),
            "s settles, \"quoted\"".into(),
            "2".into(),
        ];
        if label.is_empty() {
            cells = vec![String::new(); RESULT_COLUMNS.len()];
            cells[6] = "boom, \"quoted\"".into();
        }
        Outcome::from_cells(&cells).unwrap()
    }

    #[test]
    fn progress_round_trips_and_ignores_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sweep.progress");
        let mut w = ProgressWriter::create(&p, "abc", Layout::default()).unwrap();
        w.grid(3, &outcome("oscillation")).unwrap();
        w.grid(1, &outcome("")).unwrap();
        w.refine(&["0.5".into(), "2".into()], &outcome("converged-clusters"))
            .unwrap();
        drop(w);
        let mut bytes = fs::read(&p).unwrap();
        let full = bytes.len() as u64;
        bytes.extend_from_slice(b"g,7,oscill");
        fs::write(&p, &bytes).unwrap();
        let got = read_progress(&p, "abc", (2, Layout::default()), 10)
            .unwrap()
            .unwrap();
        assert_eq!(got.grid.len(), 2);
        assert_eq!(got.grid[&3], outcome("oscillation"));
        assert_eq!(got.grid[&1], outcome(""));
        assert_eq!(
            got.refine[&vec!["0.5".to_string(), "2".to_string()]],
            outcome("converged-clusters")
        );
        assert_eq!(got.valid_len, full);
        // Another manifest: not ours.
        assert!(read_progress(&p, "abd", (2, Layout::default()), 10)
            .unwrap()
            .is_none());
        // Resuming drops the torn line and appends after the last complete one.
        let mut w = ProgressWriter::resume(&p, got.valid_len, Layout::default()).unwrap();
        w.grid(7, &outcome("interior-point")).unwrap();
        drop(w);
        let got = read_progress(&p, "abc", (2, Layout::default()), 10)
            .unwrap()
            .unwrap();
        assert_eq!(got.grid.len(), 3);
        assert_eq!(got.grid[&7], outcome("interior-point"));
        // A point's cluster history comes back with it.
        let mut o = outcome("metastable-clusters");
        o.cluster_history = Some(vec![
            Plateau {
                count: 0,
                from: 0.0,
                to: 1.5,
            },
            Plateau {
                count: 3,
                from: 1.75,
                to: 0.1 + 0.2,
            },
        ]);
        let mut w =
            ProgressWriter::resume(&p, fs::metadata(&p).unwrap().len(), Layout::default()).unwrap();
        w.grid(8, &o).unwrap();
        drop(w);
        let got = read_progress(&p, "abc", (2, Layout::default()), 10)
            .unwrap()
            .unwrap();
        assert_eq!(got.grid[&8], o);
        assert_eq!(parse_history("3:1"), None);

        // A line torn and completed by another writer (the start of one point's line, the
        // end of another's) fails its check and is dropped.
        let text = fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let g3 = lines.iter().find(|l| l.starts_with("g,3,")).unwrap();
        let g7 = lines.iter().find(|l| l.starts_with("g,7,")).unwrap();
        let mixed = format!("{}{}\n", &g3[..6], &g7[6..]);
        fs::write(&p, format!("{text}{mixed}")).unwrap();
        let got = read_progress(&p, "abc", (2, Layout::default()), 10)
            .unwrap()
            .unwrap();
        assert_eq!(got.grid.len(), 4);
        assert_eq!(got.grid[&3], outcome("oscillation"));
    }

    #[test]
    fn progress_lines_keep_the_share_and_the_statistics() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sweep.progress");
        let layout = Layout {
            share: true,
            stats: true,
        };
        let mut o = outcome("interior-point");
        o.label_share = Some(0.6);
        o.stats = Some(super::super::row::PointStats {
            r1_mean: Some(0.25),
            r1_sd: None,
            nematic_mean: 0.125,
            nematic_sd: 1e-3,
        });
        let failed = outcome("");
        let mut w = ProgressWriter::create(&p, "f", layout).unwrap();
        w.grid(0, &o).unwrap();
        w.grid(1, &failed).unwrap();
        drop(w);
        let got = read_progress(&p, "f", (1, layout), 2).unwrap().unwrap();
        assert_eq!(got.grid[&0], o);
        assert_eq!(got.grid[&1], failed);
        // Read with another layout, the lines do not parse: their points run again.
        let other = read_progress(&p, "f", (1, Layout::default()), 2)
            .unwrap()
            .unwrap();
        assert!(other.grid.is_empty());
        assert_eq!(o.row_cells(layout).len(), RESULT_COLUMNS.len() + 1);
        assert_eq!(o.record_cells(layout).len(), RESULT_COLUMNS.len() + 5);
    }

    #[test]
    fn shard_names() {
        assert_eq!(parse_shard_file(&shard_file(2, 8)), Some((2, 8)));
        assert_eq!(parse_shard_file("shard-2-of-8.csv.tmp"), None);
        assert_eq!(parse_shard_file("shard--of-8.csv"), None);
        assert_eq!(parse_shard_file("shard-a-of-8.csv"), None);
    }
}
