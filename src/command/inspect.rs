//! `tokdyn inspect CHECKPOINT --heads H`: what a checkpoint holds, and per head the spectra of
//! [`crate::checkpoint::spectra`] as a table and `heads.csv`.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::checkpoint::llama::{self, LlamaConfig};
use crate::checkpoint::spectra::{head_row, spectra, HeadRow, HeadSpectra};
use crate::checkpoint::{Checkpoint, Format, HeadWeights};
use crate::error::Error;
use crate::output::{ResultKind, StagedDir};

/// What `inspect` found.
#[derive(Debug, Clone)]
pub struct InspectReport {
    /// The printed table.
    pub table: String,
    /// Per-head rows (empty without `--heads`).
    pub heads: Vec<HeadRow>,
    /// Where `heads.csv` was written.
    pub dir: Option<PathBuf>,
    /// The tensor layout read.
    pub format: Format,
    /// The model width.
    pub d: usize,
    /// The attention layers found, in order.
    pub layers: Vec<usize>,
}

/// Inspects a checkpoint; with `heads`, computes the per-head spectra and writes `heads.csv`
/// into `out` (default `output/inspect-<file stem>/`).
pub fn inspect(
    path: &Path,
    heads: Option<usize>,
    format: Option<&str>,
    out: Option<PathBuf>,
) -> Result<InspectReport, Error> {
    let stem = path
        .file_stem()
        .map_or("checkpoint".into(), |s| s.to_string_lossy().into_owned());
    let target = out.unwrap_or_else(|| crate::output::default_folder(&format!("inspect-{stem}")));
    inspect_with(path, heads, format, Some(target), &mut |_, _, _, _| {})
}

/// [`inspect`] that hands every head's weights and spectra to `visit` (the Python module keeps
/// them) and writes `heads.csv` only into `out` when given.
pub fn inspect_with(
    path: &Path,
    heads: Option<usize>,
    format: Option<&str>,
    out: Option<PathBuf>,
    visit: &mut dyn FnMut(usize, usize, &HeadWeights, &HeadSpectra),
) -> Result<InspectReport, Error> {
    let input = |message: String| Error::Input(format!("{}: {message}", path.display()));
    let checkpoint = Checkpoint::open(path).map_err(|e| input(e.to_string()))?;
    let format = match format {
        Some(word) => Format::from_word(word).ok_or_else(|| {
            input(format!(
                "--format: unknown format `{}` (valid: {})",
                word.escape_debug(),
                Format::WORDS.join(", ")
            ))
        })?,
        None => checkpoint.detect_format().ok_or_else(|| {
            input("no gpt2, bert or llama attention tensors found (see --format)".to_string())
        })?,
    };
    let d = checkpoint.width(format).map_err(|e| input(e.to_string()))?;
    let layers = checkpoint.layer_indices(format);
    let table = describe(&checkpoint, format, d, &layers);
    let Some(h) = heads else {
        return Ok(InspectReport {
            table,
            heads: Vec::new(),
            dir: None,
            format,
            d,
            layers,
        });
    };
    if h == 0 {
        return Err(input("--heads: must be at least 1, found 0".to_string()));
    }
    if format == Format::Llama {
        let rows = llama_rows(&checkpoint, path, h, &layers, visit).map_err(input)?;
        return finish(table, rows, out, (format, d, layers));
    }
    if !d.is_multiple_of(h) {
        return Err(input(format!(
            "--heads: heads = {h} does not divide d = {d}"
        )));
    }
    let mut rows = Vec::new();
    for &l in &layers {
        let weights = checkpoint
            .layer_heads(format, l, d, h)
            .map_err(|e| input(format!("layer {l}: {e}")))?;
        for (i, w) in weights.iter().enumerate() {
            let spectra = spectra(w);
            rows.push(head_row(l, i, w, &spectra));
            visit(l, i, w, &spectra);
        }
    }
    finish(table, rows, out, (format, d, layers))
}

/// The table with the head rows, `heads.csv` written into `out` when given.
fn finish(
    mut table: String,
    rows: Vec<HeadRow>,
    out: Option<PathBuf>,
    (format, d, layers): (Format, usize, Vec<usize>),
) -> Result<InspectReport, Error> {
    table.push_str(&head_table(&rows));
    let dir = match out {
        Some(target) => Some(write_heads(&target, &rows)?),
        None => None,
    };
    Ok(InspectReport {
        table,
        heads: rows,
        dir,
        format,
        d,
        layers,
    })
}

/// The heads of a llama checkpoint (config.json beside it; `heads` must be its
/// num_attention_heads), norm folded as a run reads them, with the key/value head of each.
fn llama_rows(
    checkpoint: &Checkpoint,
    path: &Path,
    heads: usize,
    layers: &[usize],
    visit: &mut dyn FnMut(usize, usize, &HeadWeights, &HeadSpectra),
) -> Result<Vec<HeadRow>, String> {
    let config_path = path.parent().unwrap_or(Path::new(".")).join("config.json");
    if !config_path.is_file() {
        return Err(format!(
            "no config.json beside the checkpoint (`{}`): the llama layout needs it",
            config_path.display()
        ));
    }
    let config = LlamaConfig::read(&config_path).map_err(|e| e.to_string())?;
    if heads != config.heads {
        return Err(format!(
            "--heads: heads = {heads} disagrees with config.json's num_attention_heads = {}",
            config.heads
        ));
    }
    let mut rows = Vec::new();
    for &l in layers {
        let factors = llama::layer_factors(checkpoint, &config, l, true)
            .map_err(|e| format!("layer {l}: {e}"))?;
        for (i, f) in factors.iter().enumerate() {
            let w = HeadWeights {
                a: (&f.q * f.k.transpose()) / (f.q.ncols() as f64).sqrt(),
                v: (&f.v * &f.o).transpose(),
            };
            let spectra = spectra(&w);
            let mut row = head_row(l, i, &w, &spectra);
            row.kv = config.kv_head(i);
            rows.push(row);
            visit(l, i, &w, &spectra);
        }
    }
    Ok(rows)
}

/// The tensor list, format, d and layers as text.
fn describe(c: &Checkpoint, format: Format, d: usize, layers: &[usize]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:<56} {:>5}  shape", "tensor", "dtype");
    for name in c.names() {
        if let Some((dtype, shape)) = c.info(name) {
            let _ = writeln!(s, "{name:<56} {dtype:>5}  {shape:?}");
        }
    }
    let shown: Vec<String> = layers.iter().map(usize::to_string).collect();
    let _ = writeln!(
        s,
        "format {format}, d = {d}, {} attention layers: [{}]",
        layers.len(),
        shown.join(", ")
    );
    let _ = writeln!(s, "{}", mask_line(format));
    s
}

/// Which mask a scenario with this checkpoint runs under by default.
pub fn mask_line(format: Format) -> &'static str {
    match format {
        Format::Gpt2 => "mask: causal by default (a decoder: token k attends to j <= k; set model.mask = \"none\" to lift it)",
        Format::Bert => "mask: none by default (an encoder: every token attends to every token)",
        Format::Llama => "mask: causal by default, pre-LN, RoPE from config.json (per-head spectra of llama checkpoints are not computed by inspect yet)",
    }
}

fn head_table(rows: &[HeadRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>5} {:>4} {:>3} {:>11} {:>11} {:>6} {:>11} {:>11} {:>10} {:>10} {:>10} {:>8}",
        "layer",
        "head",
        "kv",
        "symA min",
        "symA max",
        "#>0",
        "Re V min",
        "Re V max",
        "|Im V|max",
        "rho(V)",
        "[A,V] rel",
        "commute"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>5} {:>4} {:>3} {:>11.4e} {:>11.4e} {:>6} {:>11.4e} {:>11.4e} {:>10.3e} {:>10.3e} {:>10.3e} {:>8}",
            r.layer,
            r.head,
            r.kv,
            r.a_sym_min,
            r.a_sym_max,
            r.a_sym_positive,
            r.v_re_min,
            r.v_re_max,
            r.v_im_max,
            r.v_radius,
            r.commutator,
            if r.nearly_commute { "yes" } else { "no" }
        );
    }
    s
}

/// Writes `heads.csv` into the staged folder `target`; returns the committed folder.
fn write_heads(target: &Path, rows: &[HeadRow]) -> Result<PathBuf, Error> {
    let staged = StagedDir::new(target, ResultKind::Inspect)?;
    let path = staged.path().join("heads.csv");
    let bytes = heads_csv(rows).map_err(Error::io(&path))?;
    crate::output::write_atomic(&path, &bytes).map_err(Error::io(&path))?;
    staged.commit()
}

/// The bytes of `heads.csv`.
pub fn heads_csv(rows: &[HeadRow]) -> std::io::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r).map_err(std::io::Error::other)?;
    }
    w.into_inner()
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// `tokdyn inspect`: the table, and where `heads.csv` went.
pub fn cli(
    checkpoint: &Path,
    heads: Option<usize>,
    format: Option<&str>,
    out: Option<PathBuf>,
) -> Result<(), Error> {
    let report = inspect(checkpoint, heads, format, out)?;
    print!("{}", report.table);
    if let Some(dir) = report.dir {
        println!("-> {}", dir.join("heads.csv").display());
    }
    Ok(())
}
