//! `regime_map.png` / `regime_map.svg`: the label of every point of a two-axis sweep as a
//! coloured cell, with the label colours of [`super::label_color`] and, optionally, boundary
//! points and a theory curve on top.
//!
//! The theory curve is the level set f(x, y) = 0 of an expression over the axes (`[theory]
//! boundary` of the sweep file), found by marching squares ([`zero_level`]): f is sampled on a
//! grid, and on each grid cell whose corners change sign the crossings on its edges, by linear
//! interpolation x = x_a + (x_b - x_a) f_a / (f_a - f_b), are joined.

use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    draw_legend, draw_no_data, draw_title, finite_range, label_color, label_name, padded, tick,
    Chart2d, Entry, Figure, Mark, OrIo, Picture, LABELS,
};
use super::{is_paper, legend_below, lw, px, pxi};
use crate::classify::Label;

/// Width and height of `regime_map.png`.
pub const REGIME_SIZE: (u32, u32) = (1400, 1500);

/// A theory curve: its segments and its legend text (e.g. `"theory: v11 - v12 = 0"`).
#[derive(Debug, Clone, Default)]
pub struct Theory {
    /// The curve, as line segments in axis coordinates.
    pub segments: Vec<[(f64, f64); 2]>,
    /// Its legend text.
    pub text: String,
}

/// Colour of the theory curve.
pub const THEORY_COLOR: RGBColor = RGBColor(0, 0, 0);

/// The segments of the level set f = 0 of values `f[i * ys.len() + j] = f(xs[i], ys[j])`
/// (marching squares; a corner with f >= 0 counts as positive; non-finite cells are skipped).
pub fn zero_level(f: &[f64], xs: &[f64], ys: &[f64]) -> Vec<[(f64, f64); 2]> {
    let (nx, ny) = (xs.len(), ys.len());
    let mut out = Vec::new();
    if f.len() < nx * ny {
        return out;
    }
    let at = |i: usize, j: usize| f[i * ny + j];
    for i in 0..nx.saturating_sub(1) {
        for j in 0..ny.saturating_sub(1) {
            // Corners in order around the cell.
            let c = [(i, j), (i + 1, j), (i + 1, j + 1), (i, j + 1)];
            let v: Vec<f64> = c.iter().map(|&(a, b)| at(a, b)).collect();
            if v.iter().any(|x| !x.is_finite()) {
                continue;
            }
            let mut cross = Vec::with_capacity(4);
            for k in 0..4 {
                let (a, b) = (k, (k + 1) % 4);
                if (v[a] >= 0.0) != (v[b] >= 0.0) {
                    let s = v[a] / (v[a] - v[b]);
                    let (pa, pb) = ((xs[c[a].0], ys[c[a].1]), (xs[c[b].0], ys[c[b].1]));
                    cross.push((pa.0 + s * (pb.0 - pa.0), pa.1 + s * (pb.1 - pa.1)));
                }
            }
            for pair in cross.chunks_exact(2) {
                out.push([pair[0], pair[1]]);
            }
        }
    }
    out
}

/// Writes `regime_map.png` and `regime_map.svg` into `dir`.
///
/// `labels` is row-major with the first axis (x) slowest, as in `sweep.csv`: the point
/// `(xs[i], ys[j])` has `labels[i * ys.len() + j]`; `None` is a failed point. Missing entries
/// (a short slice) are left blank. `boundary` points are drawn as black dots.
#[allow(clippy::too_many_arguments)]
pub fn regime_map(
    x_name: &str,
    xs: &[f64],
    y_name: &str,
    ys: &[f64],
    labels: &[Option<Label>],
    boundary: &[(f64, f64)],
    theory: Option<&Theory>,
    title: &str,
    figure: Figure,
    dir: &Path,
) -> io::Result<()> {
    RegimeMap::plain((x_name, xs), (y_name, ys), labels, boundary, theory, title).write(figure, dir)
}

/// `color` mixed with white: weight `share` (clamped to [0, 1]) on the colour.
pub fn shaded(color: RGBColor, share: f64) -> RGBColor {
    let w = if share.is_finite() {
        share.clamp(0.0, 1.0)
    } else {
        1.0
    };
    let mix = |c: u8| (255.0 - w * (255.0 - f64::from(c))).round() as u8;
    RGBColor(mix(color.0), mix(color.1), mix(color.2))
}

/// Writes `codim2.png` (and its SVG): the regime map of `regime_map` with the curves and
/// special points of a two-parameter continuation on top (`super::codim2`).
#[allow(clippy::too_many_arguments)]
pub fn codim2_map(
    x_name: &str,
    xs: &[f64],
    y_name: &str,
    ys: &[f64],
    labels: &[Option<Label>],
    overlay: &super::codim2::Overlay,
    title: &str,
    figure: Figure,
    dir: &Path,
) -> io::Result<()> {
    let pic = RegimeMap {
        overlay: Some(overlay),
        ..RegimeMap::plain((x_name, xs), (y_name, ys), labels, &[], None, title)
    };
    super::render(&pic, dir, "codim2", figure.size(REGIME_SIZE), figure).map(|_| ())
}

/// What `regime_map.png` (or `codim2.png`) shows.
pub struct RegimeMap<'a> {
    x_name: &'a str,
    xs: &'a [f64],
    y_name: &'a str,
    ys: &'a [f64],
    labels: &'a [Option<Label>],
    shares: Option<&'a [Option<f64>]>,
    boundary: &'a [(f64, f64)],
    theory: Option<&'a Theory>,
    title: &'a str,
    overlay: Option<&'a super::codim2::Overlay>,
}

impl<'a> RegimeMap<'a> {
    /// The labels on the grid (`labels[i * ys.len() + j]` at `(xs[i], ys[j])`, as in
    /// [`regime_map`]) with the boundary points and the theory curve: no shading, no overlay.
    pub fn plain(
        (x_name, xs): (&'a str, &'a [f64]),
        (y_name, ys): (&'a str, &'a [f64]),
        labels: &'a [Option<Label>],
        boundary: &'a [(f64, f64)],
        theory: Option<&'a Theory>,
        title: &'a str,
    ) -> Self {
        RegimeMap {
            x_name,
            xs,
            y_name,
            ys,
            labels,
            shares: None,
            boundary,
            theory,
            title,
            overlay: None,
        }
    }

    /// The map of an ensemble sweep: each cell's colour is mixed with white by its share of
    /// runs with the most frequent label (`shares`, same order as the labels): the weight of
    /// the label's colour is the share, so a cell where every run agrees is the full colour.
    pub fn with_shares(self, shares: &'a [Option<f64>]) -> Self {
        RegimeMap {
            shares: Some(shares),
            ..self
        }
    }

    /// Writes `regime_map.png` and `regime_map.svg` into `dir`.
    pub fn write(&self, figure: Figure, dir: &Path) -> io::Result<()> {
        super::render(self, dir, "regime_map", figure.size(REGIME_SIZE), figure).map(|_| ())
    }
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

impl Picture for RegimeMap<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, self.title)?;
        let (w, _) = area.dim_in_pixel();
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
        let cells = Cells::of(self.labels, self.shares, &xe, &ye);
        let pts: Vec<(f64, f64)> = self
            .boundary
            .iter()
            .copied()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        let mut entries = self.legend(cells.counts, !pts.is_empty());
        if let Some(o) = self.overlay {
            entries.extend(o.legend());
        }
        // Paper: the legend in rows below the map; otherwise a column on the right.
        let (left, right) = if is_paper() {
            (legend_below(&area, &entries)?, None)
        } else {
            let (l, r) = area.split_horizontally(w.saturating_sub(px(340)));
            (l, Some(r))
        };
        // The range of one coordinate (`pick`) over the cells' edges, the boundary and the
        // overlay's curves.
        let range = |edges: &[(f64, f64)], pick: fn(&(f64, f64)) -> f64| {
            padded(
                finite_range(
                    edges
                        .iter()
                        .flat_map(|e| [e.0, e.1])
                        .chain(self.boundary.iter().map(pick))
                        .chain(
                            self.overlay
                                .into_iter()
                                .flat_map(|o| o.coordinates().map(|c| pick(&c))),
                        ),
                ),
                0.0,
            )
        };
        let xr = range(&xe, |c| c.0);
        let yr = range(&ye, |c| c.1);
        let (margin, xl, yl) = (px(15), px(65), px(95));
        let mut chart = ChartBuilder::on(&left)
            .margin(margin)
            .x_label_area_size(xl)
            .y_label_area_size(yl)
            .build_cartesian_2d(xr.0..xr.1, yr.0..yr.1)
            .io()?;
        super::axes(&mut chart)
            .disable_mesh()
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
        let borders = nx > 0 && ny > 0 && pw / nx as u32 >= px(14) && ph / ny as u32 >= px(14);
        cells.draw(&mut chart, borders)?;
        if let Some(theory) = self.theory {
            draw_theory(&mut chart, theory)?;
        }
        if let Some(o) = self.overlay {
            o.draw(&mut chart)?;
        }
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, px(6), WHITE.filled())))
            .io()?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, px(4), BLACK.filled())))
            .io()?;
        if let Some(right) = right {
            draw_legend(&right, (pxi(10), pxi(70)), &entries)?;
        }
        Ok(())
    }
}

impl RegimeMap<'_> {
    /// The legend: the labels present with their counts, the boundary points, the theory.
    fn legend(&self, counts: [usize; LABELS.len()], has_boundary: bool) -> Vec<Entry> {
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
        if self.shares.is_some() {
            entries.push(Entry::new(
                Mark::Square(shaded(RGBColor(90, 90, 90), 0.5)),
                "paler = smaller share of the runs (colour weight = share)",
            ));
        }
        if has_boundary {
            entries.push(Entry::new(Mark::Dot(BLACK, true), "boundary"));
        }
        if let Some(theory) = self.theory.filter(|t| !t.segments.is_empty()) {
            entries.push(Entry::new(
                Mark::Line(THEORY_COLOR.to_rgba(), 3, None),
                theory.text.clone(),
            ));
        }
        entries
    }
}

/// The cells of the map (x major: `labels[i * ny + j]`) in their label's colour, runs of equal
/// labels along y as one rectangle (a small SVG for big grids), and how many cells each label
/// has (`LABELS` order).
struct Cells {
    cells: Vec<([(f64, f64); 2], RGBColor)>,
    runs: Vec<([(f64, f64); 2], RGBColor)>,
    counts: [usize; LABELS.len()],
}

impl Cells {
    fn of(
        labels: &[Option<Label>],
        shares: Option<&[Option<f64>]>,
        xe: &[(f64, f64)],
        ye: &[(f64, f64)],
    ) -> Self {
        let ny = ye.len();
        let mut counts = [0usize; LABELS.len()];
        let mut cells: Vec<([(f64, f64); 2], RGBColor)> = Vec::new();
        let mut runs: Vec<([(f64, f64); 2], RGBColor)> = Vec::new();
        for (i, xe) in xe.iter().enumerate() {
            let mut previous: Option<(usize, RGBColor)> = None;
            for (j, ye) in ye.iter().enumerate() {
                let Some(&label) = labels.get(i * ny + j) else {
                    continue;
                };
                if !(xe.0.is_finite() && xe.1.is_finite() && ye.0.is_finite() && ye.1.is_finite()) {
                    continue;
                }
                if let Some(k) = LABELS.iter().position(|l| *l == label) {
                    counts[k] += 1;
                }
                let on = super::on_axis;
                let rect = [(on(xe.0), on(ye.0)), (on(xe.1), on(ye.1))];
                let share = shares.and_then(|s| s.get(i * ny + j).copied().flatten());
                let color = match share {
                    Some(share) => shaded(label_color(label), share),
                    None => label_color(label),
                };
                cells.push((rect, color));
                match (previous, runs.last_mut()) {
                    (Some((pj, pc)), Some(run)) if pj + 1 == j && pc == color => {
                        run.0[0].1 = run.0[0].1.min(ye.0);
                        run.0[1].1 = run.0[1].1.max(ye.1);
                    }
                    _ => runs.push((rect, color)),
                }
                previous = Some((j, color));
            }
        }
        Cells {
            cells,
            runs,
            counts,
        }
    }

    /// Fills the runs, with thin white borders around each cell when `borders`.
    fn draw<DB: DrawingBackend>(
        &self,
        chart: &mut Chart2d<'_, DB>,
        borders: bool,
    ) -> io::Result<()> {
        chart
            .draw_series(
                self.runs
                    .iter()
                    .map(|(r, c)| Rectangle::new(*r, c.filled())),
            )
            .io()?;
        if borders {
            chart
                .draw_series(
                    self.cells
                        .iter()
                        .map(|(r, _)| Rectangle::new(*r, WHITE.stroke_width(lw(1)))),
                )
                .io()?;
        }
        Ok(())
    }
}

/// The theory curve: a white halo, then the line.
fn draw_theory<DB: DrawingBackend>(chart: &mut Chart2d<'_, DB>, theory: &Theory) -> io::Result<()> {
    for (color, width) in [(WHITE, lw(7)), (THEORY_COLOR, lw(3))] {
        for seg in &theory.segments {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    seg.to_vec(),
                    color.stroke_width(width),
                )))
                .io()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_level_of_a_plane_is_its_line() {
        // f = x - y on [0, 1]^2: every segment end lies on y = x.
        let xs: Vec<f64> = (0..11).map(|i| i as f64 / 10.0 + 0.013).collect();
        let ys: Vec<f64> = (0..11).map(|j| j as f64 / 10.0).collect();
        let f: Vec<f64> = xs
            .iter()
            .flat_map(|x| ys.iter().map(move |y| x - y))
            .collect();
        let segs = zero_level(&f, &xs, &ys);
        assert!(segs.len() >= 9, "{}", segs.len());
        for s in &segs {
            for p in s {
                assert!((p.0 - p.1).abs() < 1e-12, "{p:?}");
            }
        }
        assert!(zero_level(&f[..3], &xs, &ys).is_empty());
        assert!(zero_level(&[1.0; 4], &[0.0, 1.0], &[0.0, 1.0]).is_empty());
    }

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
