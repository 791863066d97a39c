//! `clusters.png` / `.svg` / `.pdf`: a run's count of tight clusters and its energy against
//! log t, the merges marked (docs/MATH.md §11).
//!
//! Top: the count at every sample (a step line; 0 means the tokens are not clustered). Bottom:
//! the energy E(t) of the gradient flow, or a note where the flow has none. A merge a -> b is a
//! dashed vertical line through both panels, labelled `a→b` at the top. The time axis is
//! log10 t over the samples with t > 0.

use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::observe::cluster_series::{merges, ClusterSeries};

use super::Frame;
use super::{
    draw_no_data, draw_title, lw, px, short_number, text_at, tick, Figure, OrIo, Picture, TICK_SIZE,
};
use plotters::style::text_anchor::{HPos, VPos};

/// Width and height of `clusters.png` (paper).
pub const CLUSTERS_SIZE: (u32, u32) = (1200, 900);

/// The colour of the count line.
/// The frame of both panels.
const TIME_FRAME: Frame = Frame {
    margin: 12,
    right: 30,
    x_labels: 60,
    y_labels: 80,
};

const COUNT_COLOR: RGBColor = RGBColor(31, 119, 180);
/// The colour of the energy line.
const ENERGY_COLOR: RGBColor = RGBColor(214, 39, 40);
/// The colour of the merge marks.
const MERGE_COLOR: RGBColor = RGBColor(110, 110, 110);

/// What `clusters.png` shows (read from a run's cluster series).
#[derive(Debug, Clone)]
pub struct ClustersView {
    /// The title.
    pub title: String,
    /// Sample times.
    pub t: Vec<f64>,
    /// The count at each sample.
    pub count: Vec<usize>,
    /// The energy at each sample, where the flow has one.
    pub energy: Option<Vec<f64>>,
    /// The merges: (t, from_count, to_count).
    pub merges: Vec<(f64, usize, usize)>,
}

impl ClustersView {
    /// The view of a run's cluster series; `None` when no sample had tight clusters (nothing
    /// to draw).
    pub fn of(series: &ClusterSeries, title: &str) -> Option<Self> {
        let rows = series.rows();
        if !rows.iter().any(|r| r.count > 0) {
            return None;
        }
        let energy: Option<Vec<f64>> = rows.iter().map(|r| r.energy).collect();
        Some(ClustersView {
            title: title.to_string(),
            t: rows.iter().map(|r| r.t).collect(),
            count: rows.iter().map(|r| r.count).collect(),
            energy,
            merges: merges(rows)
                .iter()
                .map(|m| (m.t, m.from_count, m.to_count))
                .collect(),
        })
    }
}

/// Writes `clusters.png`, `.svg` and `.pdf` into `dir`.
pub fn clusters_plot(view: &ClustersView, figure: Figure, dir: &Path) -> io::Result<()> {
    super::render(view, dir, "clusters", figure.size(CLUSTERS_SIZE), figure).map(|_| ())
}

/// The log10 t range of the samples with t > 0 (a unit range around one time).
fn log_range(t: &[f64]) -> Option<(f64, f64)> {
    let logs = t.iter().filter(|&&t| t > 0.0).map(|t| t.log10());
    let (lo, hi) = logs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        return None;
    }
    Some(if hi - lo < 1e-9 {
        (lo - 0.5, hi + 0.5)
    } else {
        (lo, hi)
    })
}

/// A tick of a log10 axis as the time it stands for.
fn time_tick(x: &f64) -> String {
    short_number(10f64.powf(*x))
}

impl Picture for ClustersView {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, &self.title)?;
        let Some(range) = log_range(&self.t) else {
            return draw_no_data(&area, "no sample after t = 0");
        };
        let (_, h) = area.dim_in_pixel();
        let (top, bottom) = area.split_vertically(h / 2);
        self.draw_counts(&top, range)?;
        self.draw_energy(&bottom, range)
    }
}

impl ClustersView {
    /// The samples with t > 0 as (log10 t, value).
    fn points<'a>(&'a self, values: &'a [f64]) -> impl Iterator<Item = (f64, f64)> + 'a {
        self.t
            .iter()
            .zip(values)
            .filter(|(t, v)| **t > 0.0 && v.is_finite())
            .map(|(t, v)| (t.log10(), *v))
    }

    fn draw_counts<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        (x0, x1): (f64, f64),
    ) -> io::Result<()> {
        let top = self.count.iter().copied().max().unwrap_or(1).max(1) as f64 + 0.5;
        let mut chart = TIME_FRAME.chart(area, x0..x1, -0.2..top)?;
        super::time_mesh(&mut chart)
            .max_light_lines(4)
            .x_label_formatter(&time_tick)
            .y_label_formatter(&|v| {
                if (v - v.round()).abs() < 1e-9 && *v >= 0.0 {
                    format!("{}", v.round() as i64)
                } else {
                    String::new()
                }
            })
            .x_desc("t (log scale)")
            .y_desc("tight clusters")
            .draw()
            .io()?;
        let counts: Vec<f64> = self.count.iter().map(|&c| c as f64).collect();
        let pts: Vec<(f64, f64)> = self.points(&counts).collect();
        let mut steps = Vec::with_capacity(2 * pts.len());
        for (i, p) in pts.iter().enumerate() {
            if i > 0 {
                steps.push((p.0, pts[i - 1].1));
            }
            steps.push(*p);
        }
        chart
            .draw_series(LineSeries::new(steps, COUNT_COLOR.stroke_width(lw(2))))
            .io()?;
        for &(t, from, to) in self.merges.iter().filter(|m| m.0 > 0.0) {
            let x = t.log10();
            chart
                .draw_series(std::iter::once(DashedPathElement::new(
                    vec![(x, -0.2), (x, top)],
                    px(6),
                    px(4),
                    MERGE_COLOR.stroke_width(lw(1)),
                )))
                .io()?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{from}→{to} "),
                    (x, top),
                    text_at(TICK_SIZE, MERGE_COLOR, HPos::Right, VPos::Top),
                )))
                .io()?;
        }
        Ok(())
    }

    fn draw_energy<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        (x0, x1): (f64, f64),
    ) -> io::Result<()> {
        let Some(energy) = &self.energy else {
            return draw_no_data(
                area,
                "no energy: the flow is not a gradient flow (V = A symmetric)",
            );
        };
        let pts: Vec<(f64, f64)> = self.points(energy).collect();
        if pts.is_empty() {
            return draw_no_data(area, "no energy");
        }
        let (lo, hi) = pts
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                (a.min(p.1), b.max(p.1))
            });
        let pad = ((hi - lo) * 0.05).max(1e-12 * hi.abs().max(1.0));
        let mut chart = TIME_FRAME.chart(area, x0..x1, lo - pad..hi + pad)?;
        super::time_mesh(&mut chart)
            .max_light_lines(4)
            .x_label_formatter(&time_tick)
            .y_label_formatter(&tick)
            .x_desc("t (log scale)")
            .y_desc("energy E")
            .draw()
            .io()?;
        chart
            .draw_series(LineSeries::new(pts, ENERGY_COLOR.stroke_width(lw(2))))
            .io()?;
        for &(t, _, _) in self.merges.iter().filter(|m| m.0 > 0.0) {
            let x = t.log10();
            chart
                .draw_series(std::iter::once(DashedPathElement::new(
                    vec![(x, lo - pad), (x, hi + pad)],
                    px(6),
                    px(4),
                    MERGE_COLOR.stroke_width(lw(1)),
                )))
                .io()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_picture_is_drawn_for_one_sample_and_for_a_staircase() {
        let dir = tempfile::tempdir().unwrap();
        let one = ClustersView {
            title: "one".into(),
            t: vec![0.0],
            count: vec![0],
            energy: None,
            merges: vec![],
        };
        clusters_plot(&one, Figure::Paper, dir.path()).unwrap();
        let stair = ClustersView {
            title: "stair".into(),
            t: (0..50).map(|i| i as f64).collect(),
            count: (0..50)
                .map(|i| {
                    if i < 5 {
                        0
                    } else if i < 30 {
                        3
                    } else {
                        2
                    }
                })
                .collect(),
            energy: Some((0..50).map(|i| 1.0 + i as f64 * 0.01).collect()),
            merges: vec![(30.0, 3, 2)],
        };
        clusters_plot(&stair, Figure::Paper, dir.path()).unwrap();
        let a = std::fs::read(dir.path().join("clusters.png")).unwrap();
        clusters_plot(&stair, Figure::Paper, dir.path()).unwrap();
        assert_eq!(a, std::fs::read(dir.path().join("clusters.png")).unwrap());
    }
}
