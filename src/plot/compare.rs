//! `compare.png` / `compare.svg`: the full model and its reductions side by side.
//!
//! Left: the R2 paths in the unit disk; right: |R2|(t). The models agree to round-off when the
//! reductions are exact, so the styles are chosen to stay visible on top of each other: `full`
//! wide and light underneath, `phase` solid, `ws` dashed, `oa` dotted, all thinner.

use std::f64::consts::PI;
use std::io;
use std::path::Path;

use num_complex::Complex64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    disk_chart, draw_legend_row, draw_no_data, draw_title, envelope, finite_range, padded,
    square_chart_width, text, thin, tick, Entry, Mark, OrIo, Picture, DESC_SIZE, TICK_SIZE,
};

/// Width and height of `compare.png`.
pub const COMPARE_SIZE: (u32, u32) = (1600, 850);

/// How a model's curve is drawn: colour, width, dash (dash, gap) in pixels.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CurveStyle {
    pub color: RGBColor,
    pub width: u32,
    pub dash: Option<(u32, u32)>,
}

/// The style of a model by the first word of its name (`full`, `phase`, `ws`, `oa`); other
/// names get further colours by their position `k`.
pub(crate) fn model_style(name: &str, k: usize) -> CurveStyle {
    let word = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    match word.as_str() {
        "full" => CurveStyle {
            color: RGBColor(160, 200, 240),
            width: 9,
            dash: None,
        },
        "phase" => CurveStyle {
            color: RGBColor(225, 110, 0),
            width: 3,
            dash: None,
        },
        "ws" => CurveStyle {
            color: RGBColor(0, 130, 80),
            width: 3,
            dash: Some((12, 8)),
        },
        "oa" => CurveStyle {
            color: RGBColor(110, 30, 150),
            width: 3,
            dash: Some((3, 6)),
        },
        _ => {
            let others = [
                RGBColor(200, 40, 40),
                RGBColor(40, 40, 40),
                RGBColor(140, 90, 20),
                RGBColor(20, 120, 160),
            ];
            CurveStyle {
                color: others[k % others.len()],
                width: 2,
                dash: None,
            }
        }
    }
}

/// Writes `compare.png` and `compare.svg` into `dir`.
///
/// `series` holds `(model name, R2 at each time of t)`; the first word of the name picks the
/// style (`full`, `phase`, `ws`, `oa`), the whole name is the legend text (so it may carry the
/// error, e.g. `"oa  (max |ΔR₂| 5e-13)"`). Series shorter than `t` are drawn as far as they go.
pub fn compare_plot(
    t: &[f64],
    series: &[(&str, &[Complex64])],
    title: &str,
    dir: &Path,
) -> io::Result<()> {
    let pic = ComparePicture { t, series, title };
    super::render(&pic, dir, "compare", COMPARE_SIZE, true).map(|_| ())
}

struct ComparePicture<'a> {
    t: &'a [f64],
    series: &'a [(&'a str, &'a [Complex64])],
    title: &'a str,
}

fn draw_curve<DB: DrawingBackend, CT: plotters::coord::CoordTranslate<From = (f64, f64)>>(
    chart: &mut ChartContext<'_, DB, CT>,
    pts: Vec<(f64, f64)>,
    style: CurveStyle,
) -> io::Result<()> {
    let shape = style.color.stroke_width(style.width);
    match style.dash {
        None => chart
            .draw_series(LineSeries::new(pts, shape))
            .io()
            .map(|_| ()),
        Some((d, g)) => chart
            .draw_series(DashedLineSeries::new(pts, d as i32, g as i32, shape))
            .io()
            .map(|_| ()),
    }
}

impl Picture for ComparePicture<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, self.title)?;
        let styles: Vec<CurveStyle> = self
            .series
            .iter()
            .enumerate()
            .map(|(k, (name, _))| model_style(name, k))
            .collect();
        let entries: Vec<Entry> = self
            .series
            .iter()
            .zip(&styles)
            .map(|((name, _), s)| Entry::new(Mark::Line(s.color.to_rgba(), s.width, s.dash), *name))
            .collect();
        let used = draw_legend_row(&area, 0, &entries)?;
        let (w, h) = area.dim_in_pixel();
        let used = (used + 6).max(0) as u32;
        let area = area.shrink((0, used), (w, h.saturating_sub(used)));
        let (_, h) = area.dim_in_pixel();
        let (margin, xl, yl) = (15u32, 60u32, 85u32);
        let cw = square_chart_width(h, margin, xl, yl).min(w / 2);
        let (left, right) = area.split_horizontally(cw);

        // Left: paths in the disk.
        let mut chart = disk_chart(&left, margin, xl, yl)?;
        let circle: Vec<(f64, f64)> = (0..=360)
            .map(|k| {
                let s = 2.0 * PI * k as f64 / 360.0;
                (s.cos(), s.sin())
            })
            .collect();
        chart
            .draw_series(LineSeries::new(
                circle,
                RGBColor(60, 60, 60).stroke_width(1),
            ))
            .io()?;
        for ((_, r2), style) in self.series.iter().zip(&styles) {
            let pts: Vec<(f64, f64)> = r2
                .iter()
                .filter(|z| z.re.is_finite() && z.im.is_finite())
                .map(|z| (z.re, z.im))
                .collect();
            let pts = thin(&pts, 5000);
            if let Some(&end) = pts.last() {
                chart
                    .draw_series(std::iter::once(Circle::new(
                        end,
                        (style.width + 3).min(8),
                        style.color.filled(),
                    )))
                    .io()?;
            }
            draw_curve(&mut chart, pts, *style)?;
        }

        // Right: |R2|(t).
        let len = |r2: &[Complex64]| r2.len().min(self.t.len());
        let abs: Vec<Vec<f64>> = self
            .series
            .iter()
            .map(|(_, r2)| r2[..len(r2)].iter().map(|z| z.norm()).collect())
            .collect();
        let t_range = padded(finite_range(self.t.iter().copied()), 0.0);
        let y_range = padded(finite_range(abs.iter().flatten().copied()), 0.06);
        let mut chart = ChartBuilder::on(&right)
            .margin(margin)
            .margin_right(30)
            .x_label_area_size(xl)
            .y_label_area_size(yl)
            .build_cartesian_2d(t_range.0..t_range.1, y_range.0..y_range.1)
            .io()?;
        chart
            .configure_mesh()
            .bold_line_style(RGBColor(225, 225, 225))
            .light_line_style(RGBColor(245, 245, 245))
            .max_light_lines(4)
            .label_style(text(TICK_SIZE))
            .axis_desc_style(text(DESC_SIZE))
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .x_desc("t")
            .y_desc("|R₂|")
            .draw()
            .io()?;
        if self.t.is_empty() || self.series.is_empty() {
            draw_no_data(&right, "no samples")?;
        }
        for (a, style) in abs.iter().zip(&styles) {
            let pts = envelope(&self.t[..a.len()], a, 2500);
            if pts.len() == 1 {
                chart
                    .draw_series(std::iter::once(Circle::new(
                        pts[0],
                        4,
                        style.color.filled(),
                    )))
                    .io()?;
            }
            draw_curve(&mut chart, pts, *style)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_follow_the_model_name() {
        assert_eq!(model_style("full", 0).width, 9);
        assert!(model_style("ws (max |dR2| 1e-13)", 2).dash.is_some());
        assert_eq!(model_style("OA", 3).color, RGBColor(110, 30, 150));
        assert_eq!(model_style("other", 0).width, 2);
    }
}
