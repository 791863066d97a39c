//! `regime_map.png` / `regime_map.svg`: the label of every point of a two-axis sweep as a
//! coloured cell, with the label colours of [`super::label_color`] and, optionally, boundary
//! points on top.

use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    draw_legend, draw_no_data, draw_title, finite_range, label_color, label_name, padded, text,
    tick, Entry, Mark, OrIo, Picture, DESC_SIZE, LABELS, TICK_SIZE,
};
use crate::classify::Label;

/// Width and height of `regime_map.png`.
pub const REGIME_SIZE: (u32, u32) = (1400, 1000);

/// Writes `regime_map.png` and `regime_map.svg` into `dir`.
///
/// `labels` is row-major with the first axis (x) slowest, as in `sweep.csv`: the point
/// (xs[i], ys[j]) has `labels[i * ys.len() + j]`; `None` is a failed point. Missing entries
/// (a short slice) are left blank. `boundary` points are drawn as black dots.
#[allow(clippy::too_many_arguments)]
pub fn regime_map(
    x_name: &str,
    xs: &[f64],
    y_name: &str,
    ys: &[f64],
    labels: &[Option<Label>],
    boundary: &[(f64, f64)],
    title: &str,
    dir: &Path,
) -> io::Result<()> {
    let pic = RegimePicture {
        x_name,
        xs,
        y_name,
        ys,
        labels,
        boundary,
        title,
    };
    super::render(&pic, dir, "regime_map", REGIME_SIZE, true).map(|_| ())
}

struct RegimePicture<'a> {
    x_name: &'a str,
    xs: &'a [f64],
    y_name: &'a str,
    ys: &'a [f64],
    labels: &'a [Option<Label>],
    boundary: &'a [(f64, f64)],
    title: &'a str,
}

/// The extent (lo, hi) of the cell of each grid value: halfway to the neighbours, the outer
/// cells as wide as their inner half; a single value gets a width of 10% of it (at least 0.1).
pub(crate) fn cell_edges(values: &[f64]) -> Vec<(f64, f64)> {
    let n = values.len();
    if n == 1 {
        let v = values[0];
        let half = (0.05 * v.abs()).max(0.05);
        return vec![(v - half, v + half)];
    }
    (0..n)
        .map(|i| {
            let v = values[i];
            let left = if i > 0 {
                (values[i - 1] + v) / 2.0
            } else {
                v - (values[1] - v) / 2.0
            };
            let right = if i + 1 < n {
                (v + values[i + 1]) / 2.0
            } else {
                v + (v - values[n - 2]) / 2.0
            };
            (left.min(right), left.max(right))
        })
        .collect()
}

impl Picture for RegimePicture<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, self.title)?;
        let (w, _) = area.dim_in_pixel();
        let (left, right) = area.split_horizontally(w.saturating_sub(340));
        let (nx, ny) = (self.xs.len(), self.ys.len());
        let xe = if nx > 0 {
            cell_edges(self.xs)
        } else {
            Vec::new()
        };
        let ye = if ny > 0 {
            cell_edges(self.ys)
        } else {
            Vec::new()
        };
        let xr = padded(
            finite_range(
                xe.iter()
                    .flat_map(|e| [e.0, e.1])
                    .chain(self.boundary.iter().map(|b| b.0)),
            ),
            0.0,
        );
        let yr = padded(
            finite_range(
                ye.iter()
                    .flat_map(|e| [e.0, e.1])
                    .chain(self.boundary.iter().map(|b| b.1)),
            ),
            0.0,
        );
        let (margin, xl, yl) = (15u32, 65u32, 95u32);
        let mut chart = ChartBuilder::on(&left)
            .margin(margin)
            .x_label_area_size(xl)
            .y_label_area_size(yl)
            .build_cartesian_2d(xr.0..xr.1, yr.0..yr.1)
            .io()?;
        chart
            .configure_mesh()
            .disable_mesh()
            .label_style(text(TICK_SIZE))
            .axis_desc_style(text(DESC_SIZE))
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .x_desc(self.x_name)
            .y_desc(self.y_name)
            .draw()
            .io()?;
        if nx == 0 || ny == 0 || self.labels.is_empty() {
            draw_no_data(&left, "no sweep points")?;
        }
        // Thin white borders between cells when cells are large enough to show them.
        let (pw, ph) = chart.plotting_area().dim_in_pixel();
        let borders = nx > 0 && ny > 0 && pw / nx as u32 >= 14 && ph / ny as u32 >= 14;
        let mut counts = [0usize; 7];
        let mut cells: Vec<([(f64, f64); 2], RGBColor)> = Vec::new();
        // Runs of equal labels along y are filled as one rectangle (a small SVG for big grids).
        let mut runs: Vec<([(f64, f64); 2], RGBColor)> = Vec::new();
        for (i, xe) in xe.iter().enumerate() {
            let mut previous: Option<(usize, Option<Label>)> = None;
            for (j, ye) in ye.iter().enumerate() {
                let Some(&label) = self.labels.get(i * ny + j) else {
                    continue;
                };
                if !(xe.0.is_finite() && xe.1.is_finite() && ye.0.is_finite() && ye.1.is_finite()) {
                    continue;
                }
                if let Some(k) = LABELS.iter().position(|l| *l == label) {
                    counts[k] += 1;
                }
                let rect = [(xe.0, ye.0), (xe.1, ye.1)];
                cells.push((rect, label_color(label)));
                match (previous, runs.last_mut()) {
                    (Some((pj, pl)), Some(run)) if pj + 1 == j && pl == label => {
                        run.0[0].1 = run.0[0].1.min(ye.0);
                        run.0[1].1 = run.0[1].1.max(ye.1);
                    }
                    _ => runs.push((rect, label_color(label))),
                }
                previous = Some((j, label));
            }
        }
        chart
            .draw_series(runs.iter().map(|(r, c)| Rectangle::new(*r, c.filled())))
            .io()?;
        if borders {
            chart
                .draw_series(
                    cells
                        .iter()
                        .map(|(r, _)| Rectangle::new(*r, WHITE.stroke_width(1))),
                )
                .io()?;
        }
        let pts: Vec<(f64, f64)> = self
            .boundary
            .iter()
            .copied()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 6, WHITE.filled())))
            .io()?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, BLACK.filled())))
            .io()?;

        let mut entries: Vec<Entry> = LABELS
            .iter()
            .zip(counts)
            .filter(|(_, c)| *c > 0)
            .map(|(l, c)| {
                Entry::new(
                    Mark::Square(label_color(*l)),
                    format!("{} ({c})", label_name(*l)),
                )
            })
            .collect();
        if !pts.is_empty() {
            entries.push(Entry::new(Mark::Dot(BLACK, true), "boundary"));
        }
        draw_legend(&right, (10, 70), &entries)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_tile_the_axis() {
        let e = cell_edges(&[0.0, 0.5, 1.0]);
        assert_eq!(e, vec![(-0.25, 0.25), (0.25, 0.75), (0.75, 1.25)]);
        let e = cell_edges(&[1.0, 0.0]);
        assert_eq!(e, vec![(0.5, 1.5), (-0.5, 0.5)]);
        let e = cell_edges(&[2.0]);
        assert!(e[0].0 < 2.0 && e[0].1 > 2.0);
        assert!(cell_edges(&[]).is_empty());
    }
}
