//! `cluster_diagram.png` / `.svg` / `.pdf`: the (beta, t) diagram of the cluster count of a
//! sweep over `model.beta` (docs/MATH.md §11), as the metastability literature draws it.
//!
//! Each point of the sweep is a column at its beta (as wide as the spacing of the betas); each
//! plateau of its count (`{count, from, to}`, summary.json `clusters.history`) is a cell from
//! its first time to the next plateau's first time, coloured by the count (grey: not
//! clustered: "not tight"). The time axis is log10 t from the first sample after t = 0.

use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use plotters::style::text_anchor::{HPos, VPos};

use super::Frame;
use super::{
    draw_no_data, draw_title, px, short_number, text_at, tick, Figure, OrIo, Picture, LEGEND_SIZE,
};
use crate::observe::cluster_series::Plateau;

/// Width and height of `cluster_diagram.png` (paper).
pub const DIAGRAM_SIZE: (u32, u32) = (1200, 900);

/// The colour of count k (k = 0: not clustered).
pub fn count_color(k: usize) -> RGBColor {
    const PALETTE: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
        RGBColor(60, 60, 60),
    ];
    match k {
        0 => RGBColor(215, 215, 215),
        k => PALETTE[(k - 1) % PALETTE.len()],
    }
}

/// What `cluster_diagram.png` shows (read from a sweep's points).
#[derive(Debug, Clone)]
pub struct DiagramView {
    /// The title.
    pub title: String,
    /// (beta, the point's plateaus) in increasing beta.
    pub columns: Vec<(f64, Vec<Plateau>)>,
    /// The first sample time after 0 (the bottom of the time axis).
    pub t_first: f64,
}

/// Writes `cluster_diagram.png`, `.svg` and `.pdf` into `dir`.
pub fn cluster_diagram_plot(view: &DiagramView, figure: Figure, dir: &Path) -> io::Result<()> {
    super::render(
        view,
        dir,
        "cluster_diagram",
        figure.size(DIAGRAM_SIZE),
        figure,
    )
    .map(|_| ())
}

impl DiagramView {
    /// The log10 t range: the first sample after 0 to the last time.
    fn time_range(&self) -> Option<(f64, f64)> {
        let last = self
            .columns
            .iter()
            .flat_map(|(_, p)| p.iter().map(|p| p.to))
            .fold(0.0f64, f64::max);
        let first = if self.t_first > 0.0 {
            self.t_first
        } else {
            last / 1e3
        };
        (last > 0.0 && first.is_finite()).then(|| {
            let (lo, hi) = (first.log10(), last.log10());
            if hi - lo < 1e-9 {
                (lo - 0.5, hi + 0.5)
            } else {
                (lo, hi)
            }
        })
    }

    /// The half width of the column at position i (half the spacing to its neighbours).
    fn half_width(&self, i: usize) -> f64 {
        let b = |j: usize| self.columns[j].0;
        let k = self.columns.len();
        let gap = match (i.checked_sub(1), i + 1 < k) {
            (Some(p), true) => (b(i + 1) - b(p)) / 2.0,
            (Some(p), false) => b(i) - b(p),
            (None, true) => b(i + 1) - b(i),
            (None, false) => 1.0,
        };
        (gap / 2.0).abs().max(1e-12)
    }
}

impl Picture for DiagramView {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, &self.title)?;
        let Some((y0, y1)) = self.time_range() else {
            return draw_no_data(&area, "no cluster series");
        };
        let x0 = self.columns[0].0 - self.half_width(0);
        let last = self.columns.len() - 1;
        let x1 = self.columns[last].0 + self.half_width(last);
        let (w, _) = area.dim_in_pixel();
        let (plot_area, legend_area) = area.split_horizontally(w * 3 / 4);
        let frame = Frame {
            margin: 12,
            right: 12,
            x_labels: 60,
            y_labels: 80,
        };
        let mut chart = frame.chart(&plot_area, x0..x1, y0..y1)?;
        super::time_mesh(&mut chart)
            .disable_mesh()
            .x_label_formatter(&tick)
            .y_label_formatter(&|y| short_number(10f64.powf(*y)))
            .x_desc("beta")
            .y_desc("t (log scale)")
            .draw()
            .io()?;
        let mut seen: Vec<usize> = Vec::new();
        for (i, (beta, plateaus)) in self.columns.iter().enumerate() {
            let w = self.half_width(i);
            for (j, p) in plateaus.iter().enumerate() {
                let end = plateaus.get(j + 1).map_or(p.to, |next| next.from);
                if end <= 0.0 {
                    continue;
                }
                let (lo, hi) = (p.from.max(10f64.powf(y0)).log10(), end.log10());
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(beta - w, lo), (beta + w, hi.max(lo))],
                        count_color(p.count).filled(),
                    )))
                    .io()?;
                if !seen.contains(&p.count) {
                    seen.push(p.count);
                }
            }
        }
        seen.sort_unstable();
        draw_legend(&legend_area, &seen)
    }
}

/// The colour of each count that occurs, one line each, beside the chart.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    counts: &[usize],
) -> io::Result<()> {
    let (x, step, size) = (px(10) as i32, px(34) as i32, px(18) as i32);
    for (i, &k) in counts.iter().enumerate() {
        let y = px(30) as i32 + i as i32 * step;
        area.draw(&Rectangle::new(
            [(x, y), (x + size, y + size)],
            count_color(k).filled(),
        ))
        .io()?;
        let name = match k {
            0 => "not tight".to_string(),
            1 => "1 cluster".to_string(),
            k => format!("{k} clusters"),
        };
        area.draw(&Text::new(
            name,
            (x + size + px(8) as i32, y + size / 2),
            text_at(LEGEND_SIZE, BLACK, HPos::Left, VPos::Center),
        ))
        .io()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diagram_is_drawn_and_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let plateau = |count, from, to| Plateau { count, from, to };
        let view = DiagramView {
            title: "diagram".into(),
            columns: vec![
                (2.0, vec![plateau(0, 0.0, 3.0), plateau(2, 4.0, 40.0)]),
                (
                    5.0,
                    vec![
                        plateau(0, 0.0, 2.0),
                        plateau(3, 2.5, 30.0),
                        plateau(2, 31.0, 40.0),
                    ],
                ),
            ],
            t_first: 0.5,
        };
        cluster_diagram_plot(&view, Figure::Paper, dir.path()).unwrap();
        let a = std::fs::read(dir.path().join("cluster_diagram.png")).unwrap();
        cluster_diagram_plot(&view, Figure::Paper, dir.path()).unwrap();
        assert_eq!(
            a,
            std::fs::read(dir.path().join("cluster_diagram.png")).unwrap()
        );
        let empty = DiagramView {
            title: "none".into(),
            columns: vec![(1.0, vec![])],
            t_first: 0.5,
        };
        cluster_diagram_plot(&empty, Figure::Paper, dir.path()).unwrap();
    }
}
