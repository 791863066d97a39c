//! `order.png` / `order.svg`: the order parameters against time.
//!
//! Top panel: the nematic order s and |R2| (equal when d = 2: |R2| is drawn wide and light,
//! s as a dark dashed line on it, so both stay visible). Bottom panel: arg R2 in (-pi, pi],
//! continuous between samples and cut at the wraps (a wrap is drawn as the curve leaving at
//! +pi and re-entering at -pi, never as a vertical line).

use std::f64::consts::PI;
use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    draw_legend_row, draw_no_data, draw_title, envelope, finite_range, padded, text, thin, tick,
    Entry, Mark, OrIo, Picture, DESC_SIZE, TICK_SIZE,
};
use crate::observe::{principal_arg, OrderSeries};

/// Width and height of `order.png`.
pub const ORDER_SIZE: (u32, u32) = (1100, 850);

/// Colour of |R2| curves.
pub(crate) const R2_COLOR: RGBColor = RGBColor(110, 165, 225);
/// Colour of s curves.
pub(crate) const S_COLOR: RGBColor = RGBColor(25, 25, 25);
/// Colour of arg R2.
pub(crate) const ARG_COLOR: RGBColor = RGBColor(150, 40, 120);

/// Most points drawn per curve (the envelope of longer series is kept).
const MAX_POINTS: usize = 4000;

/// Writes `order.png` and `order.svg` into `dir`.
///
/// `title` may hold several lines (`\n`): the first is drawn large (e.g. the scenario name and
/// label), the others smaller (e.g. the rates).
pub fn order_plot(series: &OrderSeries, title: &str, dir: &Path) -> io::Result<()> {
    super::render(
        &OrderPicture { series, title },
        dir,
        "order",
        ORDER_SIZE,
        true,
    )
    .map(|_| ())
}

struct OrderPicture<'a> {
    series: &'a OrderSeries,
    title: &'a str,
}

/// Pieces of the wrapped arg R2 curve: continuous between samples, cut where it wraps.
pub(crate) fn wrapped_pieces(t: &[f64], arg: &[f64]) -> Vec<Vec<(f64, f64)>> {
    let mut pieces: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current: Vec<(f64, f64)> = Vec::new();
    let n = t.len().min(arg.len());
    for i in 0..n {
        let (ti, ai) = (t[i], arg[i]);
        if !ti.is_finite() || !ai.is_finite() {
            if !current.is_empty() {
                pieces.push(std::mem::take(&mut current));
            }
            continue;
        }
        if let Some(&(tp, ap)) = current.last() {
            let delta = principal_arg(num_complex::Complex64::from_polar(1.0, ai - ap));
            let end = ap + delta;
            if !(-PI..=PI).contains(&end) {
                let edge = if end > PI { PI } else { -PI };
                let f = if delta != 0.0 {
                    (edge - ap) / delta
                } else {
                    0.0
                };
                let tc = tp + f.clamp(0.0, 1.0) * (ti - tp);
                current.push((tc, edge));
                pieces.push(std::mem::take(&mut current));
                current.push((tc, -edge));
            }
        }
        current.push((ti, ai));
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

impl Picture for OrderPicture<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let s = self.series;
        let area = draw_title(root, self.title)?;
        let entries = [
            Entry::new(Mark::Line(R2_COLOR.to_rgba(), 5, None), "|R₂|"),
            Entry::new(
                Mark::Line(S_COLOR.to_rgba(), 2, Some((8, 5))),
                "s (nematic order; = |R₂| in d = 2)",
            ),
            Entry::new(Mark::Line(ARG_COLOR.to_rgba(), 2, None), "arg R₂ (below)"),
        ];
        let used = draw_legend_row(&area, 0, &entries)?;
        let (w, h) = area.dim_in_pixel();
        let used = (used + 4).max(0) as u32;
        let area = area.shrink((0, used), (w, h.saturating_sub(used)));
        let (top, bottom) = area.split_vertically(area.dim_in_pixel().1 * 56 / 100);

        let n = s.len();
        let t = &s.t[..n];
        let r2_abs: Vec<f64> = s.r2.iter().take(n).map(|z| z.norm()).collect();
        let nematic = &s.nematic[..n.min(s.nematic.len())];
        let t_range = padded(finite_range(t.iter().copied()), 0.0);
        let y_range = padded(
            finite_range(r2_abs.iter().chain(nematic.iter()).copied()),
            0.06,
        );

        // Top: s and |R2|.
        let mut chart = ChartBuilder::on(&top)
            .margin(12)
            .margin_right(30)
            .x_label_area_size(50)
            .y_label_area_size(90)
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
            .y_desc("|R₂|,  s")
            .draw()
            .io()?;
        if n == 0 {
            draw_no_data(&top, "no samples")?;
        }
        let r2_pts = envelope(t, &r2_abs, MAX_POINTS / 2);
        let s_pts = envelope(t, nematic, MAX_POINTS / 2);
        chart
            .draw_series(LineSeries::new(
                r2_pts.iter().copied(),
                R2_COLOR.stroke_width(5),
            ))
            .io()?;
        chart
            .draw_series(DashedLineSeries::new(
                s_pts.iter().copied(),
                8,
                5,
                S_COLOR.stroke_width(2),
            ))
            .io()?;
        if n <= 300 {
            chart
                .draw_series(r2_pts.iter().map(|&p| Circle::new(p, 4, R2_COLOR.filled())))
                .io()?;
            chart
                .draw_series(s_pts.iter().map(|&p| Circle::new(p, 2, S_COLOR.filled())))
                .io()?;
        }

        // Bottom: arg R2.
        let arg: Vec<f64> = s.r2.iter().take(n).map(|z| principal_arg(*z)).collect();
        let idx: Vec<usize> = thin(&(0..n).collect::<Vec<_>>(), MAX_POINTS);
        let tt: Vec<f64> = idx.iter().map(|&i| t[i]).collect();
        let aa: Vec<f64> = idx.iter().map(|&i| arg[i]).collect();
        // Plotted in units of pi, so the ticks fall on -pi, -pi/2, 0, pi/2, pi.
        let mut chart = ChartBuilder::on(&bottom)
            .margin(12)
            .margin_right(30)
            .x_label_area_size(55)
            .y_label_area_size(90)
            .build_cartesian_2d(t_range.0..t_range.1, -1.06..1.06)
            .io()?;
        let pi_label = |v: &f64| -> String {
            let k = (v * 2.0).round();
            if (v * 2.0 - k).abs() > 1e-9 {
                return format!("{}π", tick(v));
            }
            match k as i64 {
                -2 => "−π".into(),
                -1 => "−π/2".into(),
                0 => "0".into(),
                1 => "π/2".into(),
                2 => "π".into(),
                _ => format!("{}π", tick(v)),
            }
        };
        chart
            .configure_mesh()
            .bold_line_style(RGBColor(225, 225, 225))
            .light_line_style(RGBColor(245, 245, 245))
            .max_light_lines(4)
            .label_style(text(TICK_SIZE))
            .axis_desc_style(text(DESC_SIZE))
            .x_label_formatter(&tick)
            .y_labels(5)
            .y_label_formatter(&pi_label)
            .x_desc("t")
            .y_desc("arg R₂")
            .draw()
            .io()?;
        for piece in wrapped_pieces(&tt, &aa) {
            let piece: Vec<(f64, f64)> = piece.into_iter().map(|(t, a)| (t, a / PI)).collect();
            if piece.len() == 1 || tt.len() <= 300 {
                chart
                    .draw_series(piece.iter().map(|&p| Circle::new(p, 3, ARG_COLOR.filled())))
                    .io()?;
            }
            chart
                .draw_series(LineSeries::new(piece, ARG_COLOR.stroke_width(2)))
                .io()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_become_cuts_at_plus_and_minus_pi() {
        // A steady rotation across the wrap: 3.0 -> 3.0 + 0.5 = -2.78...
        let t = [0.0, 1.0, 2.0];
        let a = [
            2.5,
            3.0,
            principal_arg(num_complex::Complex64::from_polar(1.0, 3.5)),
        ];
        let p = wrapped_pieces(&t, &a);
        assert_eq!(p.len(), 2);
        let (tc, top) = *p[0].last().unwrap();
        assert_eq!(top, PI);
        assert!((tc - (1.0 + (PI - 3.0) / 0.5)).abs() < 1e-12);
        assert_eq!(p[1][0], (tc, -PI));
        // No wrap: one piece; a single sample: one piece of one point.
        assert_eq!(wrapped_pieces(&[0.0, 1.0], &[0.1, -0.1]).len(), 1);
        assert_eq!(wrapped_pieces(&[0.0], &[0.1]), vec![vec![(0.0, 0.1)]]);
        assert!(wrapped_pieces(&[], &[]).is_empty());
    }
}
