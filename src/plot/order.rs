//! `order.png` / `order.svg`: the order parameters against time.
//!
//! Top: |R2| and the nematic order s (one curve when they coincide, as in d = 2 where
//! s = |R2|; in d > 2 R2 is the order parameter of the projections on coordinates (1, 2) and the
//! legend says so). Bottom: arg R2 in (-pi, pi], continuous between samples and cut at the wraps
//! (a wrap is drawn as the curve leaving at +pi and re-entering at -pi, never as a vertical
//! line). Everything over the window `[output] window = [t0, t1]` (default the whole run); when
//! the window holds more than [`ZOOM_AFTER`] periods, a right-hand column repeats both panels
//! over the last [`ZOOM_PERIODS`] periods. Lines are 2 px wide (thick polylines grow mitre
//! spikes at sharp peaks).

use std::f64::consts::PI;
use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::Frame;
use super::{
    draw_legend_row, draw_no_data, draw_title, envelope, finite_range, padded, thin, tick,
    window_range, Entry, Figure, Mark, OrIo, Picture,
};
use super::{is_paper, lw, px, pxi};
use crate::observe::{principal_arg, OrderSeries};

/// Width and height of `order.png` (paper).
pub const ORDER_SIZE: (u32, u32) = (1100, 850);

/// Colour of |R2| curves.
pub(crate) const R2_COLOR: RGBColor = RGBColor(70, 130, 200);
/// Colour of s curves.
pub(crate) const S_COLOR: RGBColor = RGBColor(25, 25, 25);
/// Colour of arg R2.
pub(crate) const ARG_COLOR: RGBColor = RGBColor(150, 40, 120);

/// Most points drawn per curve (the envelope of longer series is kept).
const MAX_POINTS: usize = 4000;
/// A window with more periods than this gets the zoom column.
pub const ZOOM_AFTER: f64 = 8.0;
/// Periods shown in the zoom column.
pub const ZOOM_PERIODS: f64 = 3.0;

/// What `order.png` shows besides the series.
#[derive(Debug, Clone, Copy, Default)]
pub struct OrderView {
    /// Time window `[t0, t1]` (default: the whole run).
    pub window: Option<(f64, f64)>,
    /// The period of the run, when it is periodic (for the zoom column).
    pub period: Option<f64>,
    /// Picture format.
    pub figure: Figure,
}

/// Writes `order.png` and `order.svg` into `dir`.
///
/// `title` may hold several lines (`\n`): the first is drawn large (e.g. the scenario name and
/// label), the others smaller (e.g. the rates).
pub fn order_plot(
    series: &OrderSeries,
    view: &OrderView,
    title: &str,
    dir: &Path,
) -> io::Result<()> {
    super::render(
        &OrderPicture {
            series,
            view,
            title,
        },
        dir,
        "order",
        view.figure.size(ORDER_SIZE),
        view.figure,
    )
    .map(|_| ())
}

struct OrderPicture<'a> {
    series: &'a OrderSeries,
    view: &'a OrderView,
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

/// The radius of a sample dot of `r` layout units (two thirds of it on paper, where dots of
/// neighbouring samples would merge).
fn dot(r: u32) -> u32 {
    if is_paper() {
        px(r * 2).div_ceil(3)
    } else {
        px(r)
    }
}

/// Whether s and |R2| differ anywhere (d > 2); else one curve stands for both.
fn distinct(r2_abs: &[f64], nematic: &[f64]) -> bool {
    r2_abs
        .iter()
        .zip(nematic)
        .any(|(a, b)| (a - b).abs() > 1e-6 * a.abs().max(1.0))
}

/// The time windows drawn: the main one and, for long periodic runs, the zoom.
fn windows(t: &[f64], view: &OrderView) -> ((f64, f64), Option<(f64, f64)>) {
    let (t0, t1) = super::clip_window(t, view.window);
    let zoom = view
        .period
        .filter(|p| p.is_finite() && *p > 0.0 && (t1 - t0) / p > ZOOM_AFTER)
        .map(|p| (t1 - ZOOM_PERIODS * p, t1));
    ((t0, t1), zoom)
}

fn levels_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    t: &[f64],
    r2_abs: &[f64],
    nematic: &[f64],
    (t0, t1): (f64, f64),
    y_desc: &str,
) -> io::Result<()> {
    let (i0, i1) = window_range(t, (t0, t1));
    let two = distinct(r2_abs, nematic);
    let y_range = padded(
        finite_range(
            r2_abs[i0..i1]
                .iter()
                .chain(if two { &nematic[i0..i1] } else { &[] })
                .copied(),
        ),
        0.06,
    );
    // Paper: the t axis is named once, under the arg panel.
    let paper = is_paper();
    let frame = Frame {
        margin: 12,
        right: 30,
        x_labels: if paper { 32 } else { 50 },
        y_labels: if paper { 75 } else { 90 },
    };
    let mut chart = frame.chart(area, t0..t1, y_range.0..y_range.1)?;
    super::time_mesh(&mut chart)
        .max_light_lines(4)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .x_desc(if paper { "" } else { "t" })
        .y_desc(y_desc)
        .draw()
        .io()?;
    if i1 == i0 {
        return draw_no_data(area, "no samples");
    }
    let tw = &t[i0..i1];
    let r2_pts = envelope(tw, &r2_abs[i0..i1], MAX_POINTS / 2);
    chart
        .draw_series(LineSeries::new(
            r2_pts.iter().copied(),
            R2_COLOR.stroke_width(lw(2)),
        ))
        .io()?;
    let dots = i1 - i0 <= 300;
    if dots {
        chart
            .draw_series(
                r2_pts
                    .iter()
                    .map(|&p| Circle::new(p, dot(3), R2_COLOR.filled())),
            )
            .io()?;
    }
    if two {
        let s_pts = envelope(tw, &nematic[i0..i1], MAX_POINTS / 2);
        chart
            .draw_series(LineSeries::new(
                s_pts.iter().copied(),
                S_COLOR.stroke_width(lw(2)),
            ))
            .io()?;
        if dots {
            chart
                .draw_series(
                    s_pts
                        .iter()
                        .map(|&p| Circle::new(p, dot(2), S_COLOR.filled())),
                )
                .io()?;
        }
    }
    Ok(())
}

fn arg_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    t: &[f64],
    arg: &[f64],
    (t0, t1): (f64, f64),
    y_desc: &str,
) -> io::Result<()> {
    let (i0, i1) = window_range(t, (t0, t1));
    let idx: Vec<usize> = thin(&(i0..i1).collect::<Vec<_>>(), MAX_POINTS);
    let tt: Vec<f64> = idx.iter().map(|&i| t[i]).collect();
    let aa: Vec<f64> = idx.iter().map(|&i| arg[i]).collect();
    // Plotted in units of pi, so the ticks fall on -pi, -pi/2, 0, pi/2, pi.
    let frame = Frame {
        margin: 12,
        right: 30,
        x_labels: 55,
        y_labels: if is_paper() { 75 } else { 90 },
    };
    let mut chart = frame.chart(area, t0..t1, -1.06..1.06)?;
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
    super::time_mesh(&mut chart)
        .max_light_lines(4)
        .x_label_formatter(&tick)
        .y_labels(5)
        .y_label_formatter(&pi_label)
        .x_desc("t")
        .y_desc(y_desc)
        .draw()
        .io()?;
    for piece in wrapped_pieces(&tt, &aa) {
        let piece: Vec<(f64, f64)> = piece.into_iter().map(|(t, a)| (t, a / PI)).collect();
        if piece.len() == 1 || tt.len() <= 300 {
            chart
                .draw_series(
                    piece
                        .iter()
                        .map(|&p| Circle::new(p, dot(3), ARG_COLOR.filled())),
                )
                .io()?;
        }
        chart
            .draw_series(LineSeries::new(piece, ARG_COLOR.stroke_width(lw(2))))
            .io()?;
    }
    Ok(())
}

impl Picture for OrderPicture<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let s = self.series;
        let n = s.len().min(s.nematic.len());
        let t = &s.t[..n];
        let r2_abs: Vec<f64> = s.r2.iter().take(n).map(|z| z.norm()).collect();
        let nematic = &s.nematic[..n];
        let arg: Vec<f64> = s.r2.iter().take(n).map(|z| principal_arg(*z)).collect();
        let two = distinct(&r2_abs, nematic);
        let area = draw_title(root, self.title)?;
        let (r2_name, y_desc, arg_desc) = if two {
            (
                "|R₂| of the projections on (x₁, x₂)",
                "|R₂|,  s",
                "arg R₂ (x₁, x₂)",
            )
        } else {
            ("|R₂| (= s, the nematic order)", "|R₂|", "arg R₂")
        };
        let mut entries = vec![Entry::new(Mark::Line(R2_COLOR.to_rgba(), 2, None), r2_name)];
        if two {
            entries.push(Entry::new(
                Mark::Line(S_COLOR.to_rgba(), 2, None),
                "s (nematic order)",
            ));
        }
        entries.push(Entry::new(
            Mark::Line(ARG_COLOR.to_rgba(), 2, None),
            "arg R₂ (below)",
        ));
        let used = draw_legend_row(&area, 0, &entries)?;
        let (w, h) = area.dim_in_pixel();
        let used = (used + pxi(4)).max(0) as u32;
        let area = area.shrink((0, used), (w, h.saturating_sub(used)));
        let (main, zoom) = windows(t, self.view);
        let (left, right) = match zoom {
            Some(_) => {
                let (l, r) = area.split_horizontally(area.dim_in_pixel().0 * 62 / 100);
                (l, Some(r))
            }
            None => (area.clone(), None),
        };
        let (top, bottom) = left.split_vertically(left.dim_in_pixel().1 * 56 / 100);
        levels_chart(&top, t, &r2_abs, nematic, main, y_desc)?;
        arg_chart(&bottom, t, &arg, main, arg_desc)?;
        if let (Some(right), Some(z)) = (right, zoom) {
            let cap = super::text_at(
                super::LEGEND_SIZE,
                RGBColor(60, 60, 60),
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            );
            let (rw, rh) = right.dim_in_pixel();
            right
                .draw_text(
                    &format!("last {} periods", ZOOM_PERIODS),
                    &cap,
                    (rw as i32 / 2, 0),
                )
                .io()?;
            let cap_h = px(28);
            let right = right.shrink((0, cap_h), (rw, rh.saturating_sub(cap_h)));
            let (top, bottom) = right.split_vertically(right.dim_in_pixel().1 * 56 / 100);
            levels_chart(&top, t, &r2_abs, nematic, z, y_desc)?;
            arg_chart(&bottom, t, &arg, z, arg_desc)?;
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
