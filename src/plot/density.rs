//! `density.png` (and .svg, .pdf): the mean field's density rho(theta, t) over time
//! (docs/MATH.md §17), a heat map of 2 pi rho (1 = uniform) on the logarithmic viridis scale of
//! the kymograph, c = ln(1 + 2 pi rho) / ln(1 + max); negative values (round-off or Gibbs
//! ripples of a density the grid barely resolves) are drawn as 0. In d >= 3 (axisymmetric) the
//! rows are u = <x, e> in [-1, 1], each taking the nearest Gauss node, coloured by
//! |S^{d-1}| rho.

use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::kymograph::{density_max, draw_density_columns};
use super::Frame;
use super::TICK_SIZE;
use super::{desc_size, draw_title, finite_range, padded, text, tick, Figure, OrIo, Picture};

/// Most time columns and angle rows drawn (neighbours are averaged).
const COLUMNS: usize = 256;
const ROWS: usize = 128;

/// The densities of a run: sample times, grid size and the rows (samples x grid, row-major).
pub struct DensityView<'a> {
    /// Sample times.
    pub times: &'a [f64],
    /// Grid points per sample (angles 2 pi j / grid).
    pub grid: usize,
    /// rho at each sample on the grid.
    pub values: &'a [f64],
    /// d >= 3: the grid's nodes u_k (ascending) and |S^{d-1}|; `None` on the circle.
    pub sphere: Option<(&'a [f64], f64)>,
}

impl DensityView<'_> {
    /// The grid index drawn in row b of `rows`, and the uniform density's inverse.
    fn row_source(&self, b: usize, rows: usize) -> usize {
        match self.sphere {
            Some((u, _)) => {
                let centre = -1.0 + (2.0 * b as f64 + 1.0) / rows as f64;
                let i = u
                    .partition_point(|&x| x < centre)
                    .min(u.len().saturating_sub(1));
                if i > 0 && (centre - u[i - 1]).abs() < (u[i] - centre).abs() {
                    i - 1
                } else {
                    i
                }
            }
            None => b,
        }
    }

    /// 1 / the uniform density: 2 pi or |S^{d-1}|.
    fn scale(&self) -> f64 {
        self.sphere.map_or(2.0 * std::f64::consts::PI, |s| s.1)
    }
}

struct DensityPicture<'a> {
    view: &'a DensityView<'a>,
    title: &'a str,
}

impl DensityPicture<'_> {
    /// Columns (t0, t1, 2 pi rho averaged over ROWS bins), neighbours averaged.
    fn columns(&self) -> Vec<(f64, f64, Vec<f64>)> {
        let v = self.view;
        let m = v.times.len().min(v.values.len() / v.grid.max(1));
        if m == 0 {
            return Vec::new();
        }
        let rows = if v.sphere.is_some() {
            ROWS
        } else {
            ROWS.min(v.grid)
        };
        let scale = v.scale();
        let group = m.div_ceil(COLUMNS).max(1);
        let dt_last = if m >= 2 {
            v.times[m - 1] - v.times[m - 2]
        } else {
            1.0
        };
        let edge = |i: usize| {
            if i < m {
                v.times[i]
            } else {
                v.times[m - 1] + dt_last
            }
        };
        (0..m)
            .step_by(group)
            .map(|s| {
                let e = (s + group).min(m);
                let mut col = vec![0.0; rows];
                let mut count = vec![0usize; rows];
                for i in s..e {
                    let row = &v.values[i * v.grid..(i + 1) * v.grid];
                    if v.sphere.is_some() {
                        for (b, c) in col.iter_mut().enumerate() {
                            *c += row[v.row_source(b, rows)].max(0.0) * scale;
                        }
                        count.iter_mut().for_each(|n| *n += 1);
                        continue;
                    }
                    for (j, &x) in row.iter().enumerate() {
                        let b = j * rows / v.grid;
                        col[b] += x.max(0.0) * scale;
                        count[b] += 1;
                    }
                }
                for (c, n) in col.iter_mut().zip(&count) {
                    *c /= (*n).max(1) as f64;
                }
                (edge(s), edge(e), col)
            })
            .collect()
    }
}

impl Picture for DensityPicture<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, self.title)?;
        let cols = self.columns();
        // On the sphere the chart's 0..2 is u + 1.
        let sphere = self.view.sphere.is_some();
        let t_range = padded(finite_range(cols.iter().flat_map(|c| [c.0, c.1])), 0.0);
        let frame = Frame {
            margin: 12,
            right: 24,
            x_labels: 55,
            y_labels: 95,
        };
        let mut chart = frame.chart(&area, t_range.0..t_range.1, 0.0..2.0)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .label_style(text(TICK_SIZE))
            .axis_desc_style(text(desc_size()))
            .x_label_formatter(&tick)
            .y_labels(5)
            .y_label_formatter(&|v: &f64| {
                if sphere {
                    tick(&(v - 1.0))
                } else {
                    format!("{}π", tick(v))
                }
            })
            .x_desc("t")
            .y_desc(if sphere {
                "u  (colour: |S| ρ, log scale)"
            } else {
                "θ  (colour: 2π ρ, log scale)"
            })
            .draw()
            .io()?;
        draw_density_columns(&mut chart, &cols, density_max(&cols))
    }
}

/// Draws `density.*` into `dir`.
pub fn density_plot(
    view: &DensityView<'_>,
    title: &str,
    figure: Figure,
    dir: &Path,
) -> io::Result<()> {
    let pic = DensityPicture { view, title };
    super::render(&pic, dir, "density", figure.size((1000, 600)), figure).map(|_| ())
}
