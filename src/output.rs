//! Output folders, output locks and file writers.
//!
//! - **Staging and replacement.** A result folder is written into a staging folder
//!   `.NAME.tmp-XXXX` beside its target `NAME`; only a complete result is put in place, by one
//!   atomic step: `rename(staging, NAME)` when there is no `NAME`, else
//!   `renameat2(staging, NAME, RENAME_EXCHANGE)` (Linux), after which the old result sits under
//!   the staging name and is removed. Where the exchange is not available (other systems, file
//!   systems without it) the documented fallback is two renames, `NAME -> staging.old`,
//!   `staging -> NAME`, with a window of two system calls in which `NAME` is missing (the old
//!   result is then still complete under `staging.old`). Every failed step removes the staging
//!   folder.
//! - **One process per output.** A command holds an advisory lock (`File::try_lock`, `flock`)
//!   on `.NAME.lock` beside its target for as long as it runs; the kernel releases it when the
//!   process ends, however it ends. A second command on the same output is refused (exit 2,
//!   "in use by process N"). The shards of one sweep share the folder with a shared lock and
//!   each holds an exclusive lock on its own `.shard-K-of-N.lock`.
//! - **Stale staging folders** (`.NAME.tmp-*` left by killed processes) are removed by the next
//!   command in that parent folder, only when the lock of `NAME` is free, so a running process
//!   is never disturbed.
//! - **`--out` rules** ([`resolve_out`], [`StagedDir::new`]): a symlink is followed (results go
//!   where it points); `.`, `..` and the like are resolved to the folder they name; the root
//!   `/` and an existing non-folder (a regular file, a device) are refused (exit 2); an existing
//!   folder is replaced only when it holds a result of the same family of commands
//!   ([`ResultKind`]) or nothing (exit 2 otherwise).
//!
//! Numbers in CSV files are written in the shortest form that reads back to the same f64
//! (`ryu`, through the `csv` crate), so files are byte-identical for identical results;
//! quantities that do not apply are empty cells.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use npyz::WriterBuilder;
use serde::Serialize;

use crate::error::Error;
use crate::observe::{Observer, RunInfo, Sample};

/// The family of commands whose results may replace each other in one folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    /// `run` and `compare` (same default folder `output/<name>/`): a `summary.json` with a
    /// `label` or a `compare` object.
    Run,
    /// `sweep` and `merge`: a `sweep.json`, or a `summary.json` with `points` and `axes`.
    Sweep,
    /// `inspect`: a `heads.csv` and no `summary.json`.
    Inspect,
}

impl ResultKind {
    fn commands(self) -> &'static str {
        match self {
            ResultKind::Run => "`tokdyn run` or `tokdyn compare`",
            ResultKind::Sweep => "`tokdyn sweep`",
            ResultKind::Inspect => "`tokdyn inspect`",
        }
    }

    fn matches(self, summary: &serde_json::Value) -> bool {
        match self {
            ResultKind::Run => summary.get("label").is_some() || summary.get("compare").is_some(),
            ResultKind::Sweep => summary.get("points").is_some() && summary.get("axes").is_some(),
            ResultKind::Inspect => false,
        }
    }
}

/// Files that other commands add to a result folder (`predict`, `portrait`), and hidden files:
/// a folder holding only these may be replaced.
fn is_companion_file(name: &str) -> bool {
    name.starts_with('.')
        || matches!(
            name,
            "predict.json" | "portrait.png" | "portrait.svg" | "portrait.pdf"
        )
}

fn input_error(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::Input(format!("{}: --out: {what}", path.display()))
}

/// The folder `out` names, by the `--out` rules: a symlink is followed, `.`/`..` are resolved,
/// the root and existing non-folders are refused (exit 2).
pub fn resolve_out(out: &Path) -> Result<PathBuf, Error> {
    let is_link = fs::symlink_metadata(out).is_ok_and(|m| m.file_type().is_symlink());
    let target = if is_link || out.file_name().is_none() {
        fs::canonicalize(out).map_err(|e| {
            input_error(
                out,
                format_args!("cannot resolve it ({e}); a symlink must point to an existing folder"),
            )
        })?
    } else {
        out.to_path_buf()
    };
    if target.file_name().is_none() {
        return Err(input_error(
            out,
            "names the root folder, which cannot hold a result; name a folder inside it",
        ));
    }
    match fs::metadata(&target) {
        Ok(m) if !m.is_dir() => Err(input_error(
            out,
            "exists and is not a folder (a file?); remove it or choose another --out",
        )),
        _ => Ok(target),
    }
}

/// The folder that holds `target` (`.` for a bare name).
pub fn parent_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn file_name(target: &Path) -> String {
    target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into())
}

/// The lock file of the output `target`: `.NAME.lock` beside it.
pub fn lock_path(target: &Path) -> PathBuf {
    parent_of(target).join(format!(".{}.lock", file_name(target)))
}

/// Refuses (exit 2) an existing `target` that is not a result of `kind` and not empty.
pub fn check_replaceable(target: &Path, kind: ResultKind) -> Result<(), Error> {
    let Ok(entries) = fs::read_dir(target) else {
        return Ok(());
    };
    let mut has_summary = false;
    let mut foreign = None;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "summary.json" {
            has_summary = true;
        } else if kind == ResultKind::Sweep && name == "sweep.json" {
            return Ok(());
        } else if kind == ResultKind::Inspect && name == "heads.csv" {
            // An inspect result: replaceable by another.
        } else if !is_companion_file(&name) && foreign.is_none() {
            foreign = Some(name);
        }
    }
    let summary_path = target.join("summary.json");
    if has_summary {
        let summary = crate::input::read_bytes(&summary_path, 1 << 30)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        if summary.is_some_and(|s| kind.matches(&s)) {
            return Ok(());
        }
        return Err(input_error(
            target,
            format_args!(
                "holds a result that is not from {}; refusing to replace it: remove it or choose another --out",
                kind.commands()
            ),
        ));
    }
    match foreign {
        None => Ok(()),
        Some(name) => Err(input_error(
            target,
            format_args!(
                "is a folder that is not a tokdyn result (it holds `{}` and no summary.json); refusing to replace it: choose another --out",
                crate::input::clip(&name, 80)
            ),
        )),
    }
}

/// An advisory lock on a lock file, held until dropped (or the process ends).
///
/// The last holder removes the lock file when it lets go (an exclusive holder always, a shared
/// one when it can upgrade to exclusive); a new holder checks after locking that the path still
/// names the file it locked, and starts again when it does not, so a lock file removed under a
/// waiting process never lets two holders in.
#[derive(Debug)]
pub struct OutputLock {
    file: File,
    path: PathBuf,
    exclusive: bool,
    /// An exclusive lock file is removed on a forced stop ([`crate::interrupt`]).
    _registered: Option<crate::interrupt::Registered>,
}

/// Whether `file` is (still) the file at `path`.
fn same_file(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        true
    }
}

/// Attempts at taking a lock whose file is being removed by its previous holder.
const LOCK_ATTEMPTS: usize = 20;

impl OutputLock {
    fn open(path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    }

    /// Takes the lock at `path` without waiting; `what` names the output in the refusal
    /// (exit 2: "in use by process N").
    pub fn try_acquire(path: &Path, what: &Path, exclusive: bool) -> Result<OutputLock, Error> {
        for _ in 0..LOCK_ATTEMPTS {
            let file = Self::open(path).map_err(Error::io(path))?;
            let attempt = if exclusive {
                file.try_lock()
            } else {
                file.try_lock_shared()
            };
            match attempt {
                Ok(()) if same_file(&file, path) => {
                    return Ok(Self::held(file, path, exclusive));
                }
                // The previous holder removed the file meanwhile: again with the new one.
                Ok(()) => continue,
                Err(TryLockError::WouldBlock) if !same_file(&file, path) => continue,
                Err(TryLockError::WouldBlock) => return Err(Self::refusal(&file, what, exclusive)),
                Err(TryLockError::Error(e)) => return Err(Error::io(path)(e)),
            }
        }
        Err(input_error(what, "its lock file keeps changing; try again"))
    }

    /// Takes the exclusive lock at `path`, waiting for its holder (for short critical sections).
    pub fn wait(path: &Path) -> Result<OutputLock, Error> {
        loop {
            let file = Self::open(path).map_err(Error::io(path))?;
            file.lock().map_err(Error::io(path))?;
            if same_file(&file, path) {
                return Ok(Self::held(file, path, true));
            }
        }
    }

    fn held(file: File, path: &Path, exclusive: bool) -> OutputLock {
        if exclusive {
            // The holder's process id, for the message of whoever is refused.
            let mut f = &file;
            let _ = file.set_len(0);
            let _ = write!(f, "{}", std::process::id());
        }
        OutputLock {
            _registered: exclusive.then(|| crate::interrupt::register(path)),
            file,
            path: path.to_path_buf(),
            exclusive,
        }
    }

    fn refusal(file: &File, what: &Path, exclusive: bool) -> Error {
        // A shared lock we can take means the holders are shards of a sweep.
        if exclusive && file.try_lock_shared().is_ok() {
            let _ = file.unlock();
            return input_error(
                what,
                "in use by shards of a sweep running there; wait for them to finish or choose another --out",
            );
        }
        let mut text = String::new();
        let mut f = file;
        let _ = f.read_to_string(&mut text);
        let holder = match text.trim().parse::<u32>() {
            Ok(pid) => format!("process {pid}"),
            Err(_) => "another process".into(),
        };
        input_error(
            what,
            format_args!(
                "in use by {holder} (another tokdyn command writes there); wait for it to finish or choose another --out"
            ),
        )
    }
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        // The last holder removes the file while it still holds the lock; closing the file
        // releases the lock.
        if self.exclusive || self.file.try_lock().is_ok() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Removes the stale staging folders `.X.tmp-*` in `parent` whose output `X` is not locked
/// (its process is gone). `own` is the name whose lock this process holds.
pub fn remove_stale_staging(parent: &Path, own: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((owner, suffix)) = name
            .strip_prefix('.')
            .and_then(|rest| rest.rsplit_once(".tmp-"))
        else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        // Only folders of tokdyn's making: `tempfile`'s six-character suffix and a lock file.
        if suffix.len() != 6 || !suffix.bytes().all(|b| b.is_ascii_alphanumeric()) {
            continue;
        }
        let lock = parent.join(format!(".{owner}.lock"));
        let free = owner == own
            || OpenOptions::new()
                .read(true)
                .open(&lock)
                .is_ok_and(|f| f.try_lock().is_ok());
        if free {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// A folder being written, put in place of its target by [`StagedDir::commit`]; dropped
/// without a commit, it is removed. It holds the output's lock while it lives.
pub struct StagedDir {
    target: PathBuf,
    staging: tempfile::TempDir,
    _lock: OutputLock,
    /// The staging folder is removed on a forced stop ([`crate::interrupt`]).
    _registered: crate::interrupt::Registered,
}

impl StagedDir {
    /// Starts a staging folder for the output `out` of a command of `kind` (parent folders
    /// are created): applies the `--out` rules, takes the output's lock, removes stale staging
    /// folders.
    pub fn new(out: &Path, kind: ResultKind) -> Result<Self, Error> {
        let target = resolve_out(out)?;
        let parent = parent_of(&target);
        fs::create_dir_all(&parent).map_err(Error::io(&parent))?;
        let lock = OutputLock::try_acquire(&lock_path(&target), &target, true)?;
        check_replaceable(&target, kind)?;
        let name = file_name(&target);
        remove_stale_staging(&parent, &name);
        let staging = tempfile::Builder::new()
            .prefix(&format!(".{name}.tmp-"))
            .tempdir_in(&parent)
            .map_err(Error::io(&parent))?;
        Ok(StagedDir {
            _registered: crate::interrupt::register(staging.path()),
            target,
            staging,
            _lock: lock,
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

    /// Puts the staging folder in place of the target in one atomic step and removes the old
    /// result. Refused, leaving the old result, when an interruption was requested.
    pub fn commit(self) -> Result<PathBuf, Error> {
        if crate::interrupt::is_requested() {
            return Err(Error::Interrupted(
                "before the result was put in place (any old result is intact)".into(),
            ));
        }
        let io_err = Error::io(&self.target);
        if fs::symlink_metadata(&self.target).is_err() {
            fs::rename(self.staging.path(), &self.target).map_err(io_err)?;
            return Ok(self.target);
        }
        exchange(self.staging.path(), &self.target).map_err(io_err)?;
        // The old result is now under the staging name.
        let old = self.staging.keep();
        fs::remove_dir_all(&old).map_err(|e| Error::Io {
            path: old.clone(),
            source: io::Error::new(
                e.kind(),
                format!(
                    "the new result is in {} but the old one could not be removed from here: {e}",
                    self.target.display()
                ),
            ),
        })?;
        Ok(self.target)
    }
}

/// Swaps the folders `new` and `target` (both exist): afterwards `target` holds the new result
/// and `new` the old one.
#[cfg(target_os = "linux")]
fn exchange(new: &Path, target: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    use rustix::io::Errno;
    match renameat_with(CWD, new, CWD, target, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(()),
        Err(e) if e == Errno::INVAL || e == Errno::NOSYS || e == Errno::NOTSUP => {
            exchange_by_two_renames(new, target)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(new: &Path, target: &Path) -> io::Result<()> {
    exchange_by_two_renames(new, target)
}

/// The portable fallback of [`exchange`]: `target -> new.old`, `new -> target`,
/// `new.old -> new`; `target` is missing between the first two renames.
fn exchange_by_two_renames(new: &Path, target: &Path) -> io::Result<()> {
    let mut aside = new.as_os_str().to_owned();
    aside.push(".old");
    let aside = PathBuf::from(aside);
    fs::rename(target, &aside)?;
    if let Err(e) = fs::rename(new, target) {
        let _ = fs::rename(&aside, target);
        return Err(e);
    }
    fs::rename(&aside, new)
}

/// Writes `bytes` to a temporary file beside `path` and renames it into place, so `path` is
/// never half-written (the one atomic-write helper of the crate).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent_of(path);
    fs::create_dir_all(&dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-"))
        .tempfile_in(&dir)?;
    tmp.write_all(bytes)?;
    tmp.flush()?;
    readable_by_all(tmp.as_file())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Gives a file written through a temporary file (created 0600) the mode of the other
/// outputs, 0644 (owner writes, everyone reads).
fn readable_by_all(file: &File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(fs::Permissions::from_mode(0o644))?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

/// Writes `value` as pretty JSON (with a final newline) through [`write_atomic`].
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

/// The default output folder of a result named `name`: `output/<name>/`.
pub fn default_folder(name: &str) -> PathBuf {
    Path::new("output").join(name)
}

/// Free bytes for an unprivileged writer on the file system of `dir`, if known.
pub fn free_space(dir: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        let s = rustix::fs::statvfs(dir).ok()?;
        Some(s.f_bavail.saturating_mul(s.f_frsize))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// Refuses (exit 2) a run whose files need about `need` bytes, more than the free space where
/// `dir` lives; `what` names the file and key responsible.
pub fn check_free_space(dir: &Path, need: u64, what: &str) -> Result<(), Error> {
    match free_space(dir) {
        Some(free) if need > free => Err(Error::Input(format!(
            "{what}: the output needs about {:.2} GB, more than the {:.2} GB free in {}",
            need as f64 / 1e9,
            free as f64 / 1e9,
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// Writes `value` as pretty JSON.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    serde_json::to_writer_pretty(&mut w, value).map_err(io::Error::other)?;
    w.write_all(b"\n")?;
    w.flush()
}

/// Writes the CSV file `path`: a header from the rows' field names, then one line per row.
pub fn write_csv_rows<R: Serialize>(
    path: &Path,
    rows: impl IntoIterator<Item = R>,
) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(BufWriter::new(File::create(path)?));
    for row in rows {
        w.serialize(row).map_err(io::Error::other)?;
    }
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

/// Writes `lyapunov.csv`: the header `t,lambda1,...,lambdak`, then one row per time (`times`)
/// with the running estimates (`estimates`, k numbers each).
pub fn write_lyapunov_csv(
    path: &Path,
    times: &[f64],
    estimates: &[Vec<f64>],
    k: usize,
) -> io::Result<()> {
    let mut writer = csv::Writer::from_writer(BufWriter::new(File::create(path)?));
    let mut header = vec!["t".to_string()];
    header.extend((1..=k).map(|i| format!("lambda{i}")));
    writer.write_record(&header).map_err(io::Error::other)?;
    for (t, row) in times.iter().zip(estimates) {
        let mut record = vec![*t];
        record.extend_from_slice(row);
        writer.serialize(record).map_err(io::Error::other)?;
    }
    writer.flush()
}

/// Writes tokens (n x d row-major) as CSV with the header `x1,...,xd`, one token a row.
pub fn write_tokens_csv(path: &Path, tokens: &[f64], d: usize) -> io::Result<()> {
    let mut w = TokensCsv::create(path, d)?;
    w.rows(tokens)?;
    w.finish()
}

/// A tokens CSV written a piece of rows at a time (the bytes of [`write_tokens_csv`]).
///
/// The header is written by the `csv` crate; the rows are formatted here as that crate
/// serialises them (each number by `ryu`, `,` between, `\n` after, none quoted), in blocks of
/// rows formatted concurrently and written in order, so the bytes are the same for any number
/// of threads.
pub struct TokensCsv {
    writer: BufWriter<File>,
    d: usize,
}

/// Rows of a tokens CSV formatted together (one block per task).
const CSV_BLOCK_ROWS: usize = 8192;

impl TokensCsv {
    /// Creates the file and writes the header `x1,...,xd`.
    pub fn create(path: &Path, d: usize) -> io::Result<Self> {
        let mut header = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        header
            .write_record((1..=d).map(|i| format!("x{i}")))
            .map_err(io::Error::other)?;
        let header = header.into_inner().map_err(|e| e.into_error())?;
        let mut writer = BufWriter::new(File::create(path)?);
        writer.write_all(&header)?;
        Ok(TokensCsv { writer, d })
    }

    /// Appends tokens (rows of d numbers).
    pub fn rows(&mut self, tokens: &[f64]) -> io::Result<()> {
        use rayon::prelude::*;
        if self.d == 0 && !tokens.is_empty() {
            // What the csv crate said: rows of one number after a header of none.
            return Err(io::Error::other(
                "tokens CSV: rows of 1 number, header of 0",
            ));
        }
        let width = self.d.max(1);
        let usable = tokens.len() - tokens.len() % width;
        let blocks: Vec<Vec<u8>> = tokens[..usable]
            .par_chunks(CSV_BLOCK_ROWS * width)
            .map(|block| csv_rows(block, width))
            .collect();
        blocks.iter().try_for_each(|b| self.writer.write_all(b))
    }

    /// Flushes the file.
    pub fn finish(mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

/// The CSV text of `values` as rows of `width` numbers, as `csv` serialises a `[f64]` row.
fn csv_rows(values: &[f64], width: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 21);
    let mut number = ryu::Buffer::new();
    for row in values.chunks_exact(width) {
        for (k, &v) in row.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            out.extend_from_slice(number.format(v).as_bytes());
        }
        out.push(b'\n');
    }
    out
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

    fn takes_token_pieces(&self) -> bool {
        true
    }

    fn sample_tokens(&mut self, _index: usize, _first: usize, rows: &[f64]) -> io::Result<()> {
        match &mut self.writer {
            Some(w) => w.extend(rows.iter().copied()),
            None => Ok(()),
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

    /// The bytes the `csv` crate writes for the header and the rows (the reference).
    fn csv_crate_bytes(tokens: &[f64], d: usize) -> Vec<u8> {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        w.write_record((1..=d).map(|i| format!("x{i}"))).unwrap();
        for row in tokens.chunks_exact(d.max(1)) {
            w.serialize(row).unwrap();
        }
        w.into_inner().unwrap()
    }

    #[test]
    fn tokens_csv_has_the_bytes_of_the_csv_crate() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            5e-324,
            f64::MIN_POSITIVE,
            f64::MAX,
            1e16,
            1e-7,
            0.1,
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        for (d, n) in [(2, 20_000), (1, 9), (3, 17_000), (5, 3), (2, 0)] {
            let tokens: Vec<f64> = (0..n * d.max(1) + usize::from(d > 1))
                .map(|i| match i % 7 {
                    0 => specials[rng.random_range(0..specials.len())],
                    _ => rng.random_range(-1.0..1.0) * 10f64.powi(rng.random_range(-20..20)),
                })
                .collect();
            // Written in uneven pieces, as the group model hands them over.
            let mut w = TokensCsv::create(&path, d).unwrap();
            let cut = tokens.len() / 3 / d.max(1) * d.max(1);
            w.rows(&tokens[..cut]).unwrap();
            w.rows(&tokens[cut..]).unwrap();
            w.finish().unwrap();
            assert_eq!(
                fs::read(&path).unwrap(),
                csv_crate_bytes(&tokens, d),
                "d = {d}"
            );
        }
    }

    #[test]
    fn atomic_write_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.csv");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn staged_dir_replaces_only_on_commit() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("out").join("run");
        let parent = target.parent().unwrap().to_path_buf();
        let listing = || {
            let mut v: Vec<String> = fs::read_dir(&parent)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let first = StagedDir::new(&target, ResultKind::Run).unwrap();
        fs::write(first.path().join("summary.json"), r#"{"label":"one"}"#).unwrap();
        first.commit().unwrap();
        assert!(fs::read_to_string(target.join("summary.json"))
            .unwrap()
            .contains("one"));

        // An abandoned second run leaves the first intact and no staging folder behind.
        let second = StagedDir::new(&target, ResultKind::Run).unwrap();
        fs::write(second.path().join("summary.json"), r#"{"label":"two"}"#).unwrap();
        drop(second);
        assert!(fs::read_to_string(target.join("summary.json"))
            .unwrap()
            .contains("one"));
        assert_eq!(listing(), ["run"]);

        let third = StagedDir::new(&target, ResultKind::Run).unwrap();
        fs::write(third.path().join("summary.json"), r#"{"label":"three"}"#).unwrap();
        third.commit().unwrap();
        assert!(fs::read_to_string(target.join("summary.json"))
            .unwrap()
            .contains("three"));
        assert_eq!(listing(), ["run"]);

        // The two-rename fallback swaps the same way.
        let a = root.path().join("a");
        let b = root.path().join("b");
        fs::create_dir(&a).unwrap();
        fs::create_dir(&b).unwrap();
        fs::write(a.join("x"), "new").unwrap();
        fs::write(b.join("x"), "old").unwrap();
        exchange_by_two_renames(&a, &b).unwrap();
        assert_eq!(fs::read_to_string(b.join("x")).unwrap(), "new");
        assert_eq!(fs::read_to_string(a.join("x")).unwrap(), "old");
    }

    #[test]
    fn out_rules() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("file");
        fs::write(&file, "x").unwrap();
        let e = StagedDir::new(&file, ResultKind::Run).err().unwrap();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("not a folder"), "{e}");
        assert_eq!(fs::read_to_string(&file).unwrap(), "x");
        assert_eq!(
            StagedDir::new(Path::new("/"), ResultKind::Run)
                .err()
                .unwrap()
                .exit_code(),
            2
        );
        // A foreign folder and a result of another family are kept.
        let foreign = root.path().join("home");
        fs::create_dir(&foreign).unwrap();
        fs::write(foreign.join("thesis.tex"), "x").unwrap();
        let e = StagedDir::new(&foreign, ResultKind::Run).err().unwrap();
        assert!(e.to_string().contains("not a tokdyn result"), "{e}");
        let sweep = root.path().join("sweep");
        fs::create_dir(&sweep).unwrap();
        fs::write(sweep.join("summary.json"), r#"{"points":4,"axes":["a"]}"#).unwrap();
        let e = StagedDir::new(&sweep, ResultKind::Run).err().unwrap();
        assert!(e.to_string().contains("not from"), "{e}");
        assert!(check_replaceable(&sweep, ResultKind::Sweep).is_ok());
        // A symlink is followed: the result lands where it points.
        #[cfg(unix)]
        {
            let real = root.path().join("real");
            let link = root.path().join("link");
            fs::create_dir(&real).unwrap();
            std::os::unix::fs::symlink(&real, &link).unwrap();
            let staged = StagedDir::new(&link, ResultKind::Run).unwrap();
            fs::write(staged.path().join("summary.json"), r#"{"label":"x"}"#).unwrap();
            staged.commit().unwrap();
            assert!(fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
            assert!(real.join("summary.json").exists());
        }
    }

    #[test]
    fn a_held_lock_refuses_a_second_holder_and_guards_staging() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("res");
        let held = StagedDir::new(&target, ResultKind::Run).unwrap();
        let e = StagedDir::new(&target, ResultKind::Run).err().unwrap();
        assert_eq!(e.exit_code(), 2);
        let pid = std::process::id().to_string();
        assert!(
            e.to_string().contains(&format!("in use by process {pid}")),
            "{e}"
        );
        // Another output's cleanup leaves a locked staging folder alone, removes a free one,
        // and never touches folders that are not of tokdyn's making (no lock file).
        let stale = root.path().join(".gone.tmp-abc123");
        fs::create_dir(&stale).unwrap();
        fs::write(root.path().join(".gone.lock"), "").unwrap();
        let foreign = root.path().join(".mine.tmp-abc123");
        fs::create_dir(&foreign).unwrap();
        remove_stale_staging(root.path(), "other");
        assert!(held.path().exists());
        assert!(!stale.exists());
        assert!(foreign.exists());
        drop(held);
    }
}

/// How a command is run (not part of the scenario).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Output folder; default `output/<name>/`.
    pub out: Option<PathBuf>,
    /// Show progress on stderr for long runs.
    pub progress: bool,
    /// The command line, for provenance.
    pub command_line: Vec<String>,
}

impl RunOptions {
    /// The output folder of `scenario`.
    pub fn folder(&self, scenario: &crate::scenario::Scenario) -> PathBuf {
        self.out
            .clone()
            .unwrap_or_else(|| default_folder(&scenario.name))
    }
}

/// The label of the run whose output folder is `dir` (read from its summary.json), if there is
/// one.
pub fn read_label(dir: &Path) -> Option<crate::label::Label> {
    /// The part of summary.json read back.
    #[derive(serde::Deserialize)]
    struct Labelled {
        label: crate::label::Label,
    }
    let text = std::fs::read_to_string(dir.join("summary.json")).ok()?;
    serde_json::from_str::<Labelled>(&text)
        .ok()
        .map(|s| s.label)
}

/// Writes `density.npy`: float64 of shape (samples, grid), row-major.
pub fn write_density_npy(
    path: &Path,
    samples: usize,
    grid: usize,
    values: &[f64],
) -> io::Result<()> {
    let file = BufWriter::new(File::create(path)?);
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[samples as u64, grid as u64])
        .writer(file)
        .begin_nd()?;
    w.extend(values.iter().copied())?;
    w.finish()
}

/// Writes `density_grid.csv`: a header (`theta` or `u`) and one grid point a row.
pub fn write_density_grid_csv(path: &Path, header: &str, points: &[f64]) -> io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    writeln!(w, "{header}")?;
    let mut buf = ryu::Buffer::new();
    for &p in points {
        writeln!(w, "{}", buf.format(p))?;
    }
    w.flush()
}
