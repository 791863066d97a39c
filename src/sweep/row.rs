//! One row of a sweep: a point's outcome (its label and the numbers it was read from, or the
//! message of a failure), the columns of `sweep.csv`, and the extra cells of ensemble and
//! temperature sweeps. Strings only here, at the writers and readers of the rows.

use crate::cells::fmt_opt;
use crate::classify::Label;
use crate::observe::cluster_series::Plateau;

/// The result columns of `sweep.csv`, after the axis names.
pub const RESULT_COLUMNS: [&str; 10] = [
    "label",
    "r2_abs_final",
    "r2_abs_tail_min",
    "r2_abs_tail_max",
    "r2_arg_rate",
    "period",
    "error",
    "t_final",
    "reason",
    "cluster_count",
];

/// The result of one point: the label and the numbers it was read from, or the message of a
/// failure. Strings only at the writers ([`Outcome::cells`]) and readers ([`Outcome::from_cells`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The label; `None` for a failed point.
    pub label: Option<Label>,
    pub r2_abs_final: Option<f64>,
    pub r2_abs_tail_min: Option<f64>,
    pub r2_abs_tail_max: Option<f64>,
    pub r2_arg_rate: Option<f64>,
    pub period: Option<f64>,
    /// The message of a failed point (one line, not empty).
    pub error: Option<String>,
    /// The time the run reached (it goes on past t_end while the label is uncertain).
    pub t_final: Option<f64>,
    /// Why the label (one line).
    pub reason: String,
    /// Tight clusters of the tokens at the last sample (docs/MATH.md §11; 0: not clustered);
    /// `None` where the model has no tokens (`oa`), for a failed or a predicted point.
    pub cluster_count: Option<usize>,
    /// The plateaus of the count (summary.json `clusters.history`), kept for
    /// `cluster_diagram.png` by sweeps over `model.beta` only (not a `sweep.csv` column; the
    /// progress file keeps it).
    pub cluster_history: Option<Vec<Plateau>>,
    /// An ensemble point: the share of its runs that have its label (`label_share`).
    pub label_share: Option<f64>,
    /// The means over the point's runs (kept for the transition picture).
    pub stats: Option<PointStats>,
}

/// The means and spreads over a point's runs of the tail-averaged |R1| and s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointStats {
    /// Mean |R1| (none when the runs have no R1).
    pub r1_mean: Option<f64>,
    /// Its sample standard deviation over the runs (0 for one run).
    pub r1_sd: Option<f64>,
    /// Mean s.
    pub nematic_mean: f64,
    /// Its sample standard deviation over the runs.
    pub nematic_sd: f64,
}

/// The column of `sweep.csv` an ensemble sweep adds, before the last of [`RESULT_COLUMNS`].
pub const SHARE_COLUMNS: [&str; 1] = ["label_share"];
/// Where [`SHARE_COLUMNS`] go among the result columns: before `cluster_count`.
const SHARE_AT: usize = RESULT_COLUMNS.len() - 1;
/// The columns after those of `sweep.csv` in the progress and shard files of a sweep over
/// `noise.temperature` (what the transition picture reads).
pub const STAT_COLUMNS: [&str; 4] = ["r1_mean", "r1_sd", "nematic_mean", "nematic_sd"];

/// Which cells a sweep's rows have beyond [`RESULT_COLUMNS`]: `label_share` (ensembles) in
/// `sweep.csv`, and the [`STAT_COLUMNS`] (sweeps over the temperature) in the progress and
/// shard files only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    /// `label_share` among the result columns.
    pub share: bool,
    /// The statistics after those.
    pub stats: bool,
}

impl Layout {
    /// The columns of `sweep.csv` after the axis names.
    /// `label_share` comes just before `cluster_count`, which stays the last column.
    pub fn columns(self) -> Vec<&'static str> {
        let mut columns = RESULT_COLUMNS.to_vec();
        if self.share {
            columns.splice(SHARE_AT..SHARE_AT, SHARE_COLUMNS);
        }
        columns
    }

    /// The columns of a progress or shard row after the axis names (or the index).
    pub fn record_columns(self) -> Vec<&'static str> {
        let stats = STAT_COLUMNS.iter().filter(|_| self.stats);
        let mut columns = self.columns();
        columns.extend(stats);
        columns
    }
}

impl Outcome {
    /// A failed point: no label or numbers, the message in `error`.
    pub fn failure(message: &str) -> Self {
        let mut error = one_line(message);
        if error.is_empty() {
            error = "failed".into();
        }
        Outcome {
            error: Some(error),
            ..Outcome::labelled(None, String::new())
        }
    }

    /// A point with `label` and `reason` and no numbers yet.
    pub(super) fn labelled(label: Option<Label>, reason: String) -> Self {
        Outcome {
            label,
            r2_abs_final: None,
            r2_abs_tail_min: None,
            r2_abs_tail_max: None,
            r2_arg_rate: None,
            period: None,
            error: None,
            t_final: None,
            reason,
            cluster_count: None,
            cluster_history: None,
            label_share: None,
            stats: None,
        }
    }

    /// The cells of a `sweep.csv` row in `layout` (see [`Layout::columns`]).
    pub fn row_cells(&self, layout: Layout) -> Vec<String> {
        let mut cells = self.cells();
        if layout.share {
            cells.insert(SHARE_AT, fmt_opt(self.label_share));
        }
        cells
    }

    /// The cells of a progress or shard row in `layout` (see [`Layout::record_columns`]).
    pub fn record_cells(&self, layout: Layout) -> Vec<String> {
        let mut cells = self.row_cells(layout);
        if layout.stats {
            let s = self.stats;
            cells.push(fmt_opt(s.and_then(|s| s.r1_mean)));
            cells.push(fmt_opt(s.and_then(|s| s.r1_sd)));
            cells.push(fmt_opt(s.map(|s| s.nematic_mean)));
            cells.push(fmt_opt(s.map(|s| s.nematic_sd)));
        }
        cells
    }

    /// Reads back the cells of [`Outcome::record_cells`] (or of [`Outcome::row_cells`] when
    /// `layout.stats` is false).
    pub fn from_record_cells(cells: &[String], layout: Layout) -> Option<Self> {
        if cells.len() != layout.record_columns().len() {
            return None;
        }
        let mut cells = cells.to_vec();
        let share = layout.share.then(|| cells.remove(SHARE_AT));
        let base = RESULT_COLUMNS.len();
        let mut o = Outcome::from_cells(&cells[..base])?;
        let parse = |c: &str| -> Option<Option<f64>> {
            match c {
                "" => Some(None),
                c => c.parse::<f64>().ok().map(Some),
            }
        };
        let number = |k: usize| parse(&cells[k]);
        let k = base;
        if let Some(share) = share {
            o.label_share = parse(&share)?;
        }
        if layout.stats {
            let (r1_mean, r1_sd) = (number(k)?, number(k + 1)?);
            o.stats = match (number(k + 2)?, number(k + 3)?) {
                (Some(nematic_mean), Some(nematic_sd)) => Some(PointStats {
                    r1_mean,
                    r1_sd,
                    nematic_mean,
                    nematic_sd,
                }),
                _ => None,
            };
        }
        Some(o)
    }

    /// The cells of `sweep.csv` (see [`RESULT_COLUMNS`]), numbers as the shortest decimal that
    /// reads back.
    pub fn cells(&self) -> Vec<String> {
        vec![
            self.label
                .map(|l| l.as_str().to_string())
                .unwrap_or_default(),
            fmt_opt(self.r2_abs_final),
            fmt_opt(self.r2_abs_tail_min),
            fmt_opt(self.r2_abs_tail_max),
            fmt_opt(self.r2_arg_rate),
            fmt_opt(self.period),
            self.error.clone().unwrap_or_default(),
            fmt_opt(self.t_final),
            self.reason.clone(),
            self.cluster_count
                .map(|c| c.to_string())
                .unwrap_or_default(),
        ]
    }

    /// Reads stored cells back; `None` if they are not a valid outcome (a label or an error,
    /// not both; numbers that parse).
    pub fn from_cells(cells: &[String]) -> Option<Self> {
        if cells.len() != RESULT_COLUMNS.len() {
            return None;
        }
        let number = |k: usize| -> Option<Option<f64>> {
            match cells[k].as_str() {
                "" => Some(None),
                c => c.parse::<f64>().ok().map(Some),
            }
        };
        let label = match cells[0].as_str() {
            "" => None,
            word => Some(Label::from_word(word)?),
        };
        let error = (!cells[6].is_empty()).then(|| cells[6].clone());
        if label.is_some() == error.is_some() {
            return None;
        }
        let cluster_count = match cells[9].as_str() {
            "" => None,
            c => Some(c.parse::<usize>().ok()?),
        };
        Some(Outcome {
            label,
            r2_abs_final: number(1)?,
            r2_abs_tail_min: number(2)?,
            r2_abs_tail_max: number(3)?,
            r2_arg_rate: number(4)?,
            period: number(5)?,
            error,
            t_final: number(7)?,
            reason: cells[8].clone(),
            cluster_count,
            cluster_history: None,
            label_share: None,
            stats: None,
        })
    }

    /// The label's word (empty for a failed point).
    pub fn label(&self) -> &'static str {
        self.label.map(Label::as_str).unwrap_or("")
    }

    /// Whether the point's run failed.
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }
}

/// A message on one line: its lines trimmed and joined by "; ".
pub fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
