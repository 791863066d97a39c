//! `compare.png` / `compare.svg`: the full model and its reductions (and the group model when
//! present) in one picture.
//!
//! Top: |R2(t)| of every model in one panel (over the last periods when a periodic run holds
//! many: a whole long run would be a barcode). The models agree to round-off when the reductions
//! are exact, so the styles stay visible on top of each other: `full` wide and light underneath,
//! `phase` solid, `ws` dashed, `oa` dotted, `group` long-dashed red, all thinner. Bottom: the
//! error e_m(t) = |R2_m(t) - R2_full(t)| of each other model on a log scale, solid lines in the
//! model's colour (values below 1e-17 are drawn at 1e-17), each with its maximum over the
//! samples in the legend.

use std::io;
use std::path::Path;

use num_complex::Complex64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::order::{ZOOM_AFTER, ZOOM_PERIODS};
use super::Frame;
use super::{
    draw_legend_row, draw_no_data, draw_title, envelope, finite_range, padded, tick, Entry, Figure,
    Mark, OrIo, Picture,
};
use super::{lw, px, pxi};

/// The frame of both panels.
const FRAME: Frame = Frame {
    margin: 12,
    right: 30,
    x_labels: 50,
    y_labels: 95,
};

/// Width and height of `compare.png` (paper).
pub const COMPARE_SIZE: (u32, u32) = (1100, 900);

/// Errors below this are drawn at this value on the log scale.
pub const ERROR_FLOOR: f64 = 1e-17;

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
            width: 6,
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
        "group" => CurveStyle {
            color: RGBColor(200, 30, 60),
            width: 2,
            dash: Some((16, 5)),
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
/// `series` holds `(model name, R2 at each time of t)`, the reference (`full`) first; the
/// first word of the name picks the style (`full`, `phase`, `ws`, `oa`, `group`), the name is
/// the legend text. Series shorter than `t` are drawn as far as they go. Only the samples in
/// `window` (`[output] window`, clipped to the run; `None`: the whole run) are drawn, and the
/// maximum errors in the legend are over them. When the run is periodic (`period`, the full
/// model's) and the window holds more than [`ZOOM_AFTER`] periods, the top panel shows the last
/// [`ZOOM_PERIODS`] periods (so the curves can be told apart) and says so; the error panel
/// always covers the whole window.
pub fn compare_plot(
    t: &[f64],
    series: &[(&str, &[Complex64])],
    window: Option<(f64, f64)>,
    period: Option<f64>,
    title: &str,
    figure: Figure,
    dir: &Path,
) -> io::Result<()> {
    let (t0, t1) = super::clip_window(t, window);
    let (i0, i1) = super::window_range(t, (t0, t1));
    let levels_from = period
        .filter(|p| p.is_finite() && *p > 0.0 && (t1 - t0) / p > ZOOM_AFTER)
        .map(|p| t1 - ZOOM_PERIODS * p);
    let cut = |r2: &'_ [Complex64]| -> (usize, usize) { (i0.min(r2.len()), i1.min(r2.len())) };
    let windowed: Vec<(&str, &[Complex64])> = series
        .iter()
        .map(|&(name, r2)| {
            let (a, b) = cut(r2);
            (name, &r2[a..b])
        })
        .collect();
    let pic = ComparePicture {
        t: &t[i0..i1],
        series: &windowed,
        levels_from,
        title,
    };
    super::render(&pic, dir, "compare", figure.size(COMPARE_SIZE), figure).map(|_| ())
}

/// The error |R2_m - R2_ref| at each common sample, and its maximum (NaN when none is finite).
pub fn error_series(reference: &[Complex64], other: &[Complex64]) -> (Vec<f64>, f64) {
    let e: Vec<f64> = reference
        .iter()
        .zip(other)
        .map(|(a, b)| (a - b).norm())
        .collect();
    let max = e
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(f64::NAN, f64::max);
    (e, max)
}

struct ComparePicture<'a> {
    t: &'a [f64],
    series: &'a [(&'a str, &'a [Complex64])],
    /// The first time the top panel shows (the last periods of a long periodic run).
    levels_from: Option<f64>,
    title: &'a str,
}

fn draw_curve<DB: DrawingBackend, CT: plotters::coord::CoordTranslate<From = (f64, f64)>>(
    chart: &mut ChartContext<'_, DB, CT>,
    pts: Vec<(f64, f64)>,
    style: CurveStyle,
) -> io::Result<()> {
    let shape = style.color.stroke_width(lw(style.width));
    match style.dash {
        None => chart
            .draw_series(LineSeries::new(pts, shape))
            .io()
            .map(|_| ()),
        Some((d, g)) => chart
            .draw_series(DashedLineSeries::new(
                pts,
                pxi(d as i32),
                pxi(g as i32),
                shape,
            ))
            .io()
            .map(|_| ()),
    }
}

impl ComparePicture<'_> {
    fn levels<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        styles: &[CurveStyle],
    ) -> io::Result<()> {
        let first = self
            .levels_from
            .map_or(0, |from| self.t.partition_point(|&s| s < from));
        let t = &self.t[first..];
        let len = |r2: &[Complex64]| r2.len().min(self.t.len()).max(first) - first;
        let abs: Vec<Vec<f64>> = self
            .series
            .iter()
            .map(|(_, r2)| {
                r2[first..first + len(r2)]
                    .iter()
                    .map(|z| z.norm())
                    .collect()
            })
            .collect();
        let t_range = padded(finite_range(t.iter().copied()), 0.0);
        let y_desc = match self.levels_from {
            Some(_) => format!("|R₂|, last {ZOOM_PERIODS} periods"),
            None => "|R₂|".to_string(),
        };
        let y_range = padded(finite_range(abs.iter().flatten().copied()), 0.06);
        let mut chart = FRAME.chart(area, t_range.0..t_range.1, y_range.0..y_range.1)?;
        super::time_mesh(&mut chart)
            .max_light_lines(4)
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .x_desc("t")
            .y_desc(y_desc)
            .draw()
            .io()?;
        if self.t.is_empty() || self.series.is_empty() {
            draw_no_data(area, "no samples")?;
        }
        for (a, style) in abs.iter().zip(styles) {
            let pts = envelope(&t[..a.len()], a, 2500);
            if pts.len() == 1 {
                chart
                    .draw_series(std::iter::once(Circle::new(
                        pts[0],
                        px(4),
                        style.color.filled(),
                    )))
                    .io()?;
            }
            draw_curve(&mut chart, pts, *style)?;
        }
        Ok(())
    }

    fn errors<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        styles: &[CurveStyle],
        errors: &[(Vec<f64>, f64)],
    ) -> io::Result<()> {
        let t_range = padded(finite_range(self.t.iter().copied()), 0.0);
        let hi = errors
            .iter()
            .map(|e| e.1)
            .filter(|v| v.is_finite())
            .fold(ERROR_FLOOR * 10.0, f64::max);
        let y_range = (
            ERROR_FLOOR / 2.0,
            (hi * 5.0).clamp(ERROR_FLOOR * 100.0, 10.0),
        );
        let mut chart = FRAME.chart(
            area,
            t_range.0..t_range.1,
            (y_range.0..y_range.1).log_scale(),
        )?;
        super::time_mesh(&mut chart)
            .max_light_lines(0)
            .x_label_formatter(&tick)
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .x_desc("t")
            .y_desc("|R₂ − R₂(full)|")
            .draw()
            .io()?;
        for ((e, _), style) in errors.iter().zip(styles.iter().skip(1)) {
            let n = e.len().min(self.t.len());
            let clamped: Vec<f64> = e[..n].iter().map(|v| v.max(ERROR_FLOOR)).collect();
            let pts = envelope(&self.t[..n], &clamped, 2500);
            // Solid lines: dashes on a noisy error curve read as more noise.
            let thin_style = CurveStyle {
                width: 2,
                dash: None,
                ..*style
            };
            draw_curve(&mut chart, pts, thin_style)?;
        }
        Ok(())
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
        let reference: &[Complex64] = self.series.first().map(|s| s.1).unwrap_or(&[]);
        let errors: Vec<(Vec<f64>, f64)> = self
            .series
            .iter()
            .skip(1)
            .map(|(_, r2)| error_series(reference, r2))
            .collect();
        let entries: Vec<Entry> = self
            .series
            .iter()
            .zip(&styles)
            .enumerate()
            .map(|(k, ((name, _), s))| {
                let text = match k.checked_sub(1).and_then(|i| errors.get(i)) {
                    Some((_, max)) => format!("{name} (max error {max:.1e})"),
                    None => name.to_string(),
                };
                Entry::new(Mark::Line(s.color.to_rgba(), s.width.min(4), s.dash), text)
            })
            .collect();
        let used = draw_legend_row(&area, 0, &entries)?;
        let (w, h) = area.dim_in_pixel();
        let used = (used + pxi(6)).max(0) as u32;
        let area = area.shrink((0, used), (w, h.saturating_sub(used)));
        let (top, bottom) = area.split_vertically(area.dim_in_pixel().1 * 52 / 100);
        self.levels(&top, &styles)?;
        if self.series.len() > 1 {
            self.errors(&bottom, &styles, &errors)?;
        } else {
            draw_no_data(&bottom, "no reduction to compare")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_follow_the_model_name() {
        assert_eq!(model_style("full", 0).width, 6);
        assert!(model_style("ws (max |dR2| 1e-13)", 2).dash.is_some());
        assert_eq!(model_style("OA", 3).color, RGBColor(110, 30, 150));
        assert_eq!(model_style("other", 0).width, 2);
    }
}
