//! `tokens.png` (small multiples of the tokens at up to six times) and `tokens.gif` (an
//! animation over all kept snapshots).
//!
//! Views: d = 2, the unit circle; d = 3, the sphere in orthographic projection from a fixed
//! direction (back hemisphere faded, outline, equator and two meridians); d > 3, the plane of
//! the two principal axes of the final snapshot (eigenvectors of the second-moment matrix
//! (1/n) sum x x^T, each axis labelled with the share lambda_k / tr S of the second moment it
//! carries, or "no spread" when that share is below 0.1%);
//! d = 1, the two points +-1 on a line. Each token keeps one colour in every panel and frame:
//! a hue wheel over the tokens ordered by their angle in the view at the first snapshot, so one
//! can follow where tokens go. In d = 2 grey bars outside the circle give the density of the
//! token angle (the histogram of theta_k over 90 bins, the longest bar 0.2 long), so what
//! oscillates is visible even when the tokens overlap.

use std::f64::consts::PI;
use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::element::BitMapElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::projection::principal_axes;
use super::snapshots::TokenSnapshots;
use super::{
    desc_size, draw_no_data, draw_title, register_fonts, short, text, text_at, tick, Chart2d,
    Figure, OrIo, Picture, TICK_SIZE,
};
use super::{lw, px, pxi};
use crate::simd::dot;

/// Most panels in `tokens.png`.
pub const MAX_PANELS: usize = 6;
/// Most frames in `tokens.gif`.
pub const MAX_FRAMES: usize = 100;
/// Size of a `tokens.gif` frame.
pub const GIF_SIZE: (u32, u32) = (600, 640);

pub use super::snapshots::DENSITY_TOKENS;

/// Cells across the picture plane of the density shading.
const DENSITY_CELLS: usize = 64;

/// Viewing direction of the sphere (d = 3): azimuth and elevation in degrees.
const AZIMUTH_DEG: f64 = 35.0;
const ELEVATION_DEG: f64 = 22.0;

/// How tokens become points of the picture.
#[derive(Debug, Clone)]
pub(crate) enum View {
    Line,
    Circle,
    Sphere {
        right: [f64; 3],
        up: [f64; 3],
        toward: [f64; 3],
        /// Whether the tokens are drawn as a density shading (more than [`DENSITY_TOKENS`]).
        shaded: bool,
    },
    Pca {
        e1: Vec<f64>,
        e2: Vec<f64>,
        share: (f64, f64),
    },
}

impl View {
    pub(crate) fn of(snaps: &TokenSnapshots) -> View {
        match snaps.d() {
            0 | 1 => View::Line,
            2 => View::Circle,
            3 => {
                let (a, e) = (AZIMUTH_DEG.to_radians(), ELEVATION_DEG.to_radians());
                let toward = [e.cos() * a.cos(), e.cos() * a.sin(), e.sin()];
                let right = [-a.sin(), a.cos(), 0.0];
                let up = [
                    toward[1] * right[2] - toward[2] * right[1],
                    toward[2] * right[0] - toward[0] * right[2],
                    toward[0] * right[1] - toward[1] * right[0],
                ];
                View::Sphere {
                    right,
                    up,
                    toward,
                    shaded: snaps.n() > DENSITY_TOKENS,
                }
            }
            d => {
                let last = (0..snaps.len())
                    .rev()
                    .find(|&i| !snaps.tokens(i).is_empty())
                    .map(|i| snaps.tokens(i))
                    .unwrap_or(&[]);
                let (e1, e2, share) = principal_axes(last, d);
                View::Pca { e1, e2, share }
            }
        }
    }

    /// (u, v) in the picture plane and the depth (>= 0 in front; 1 for flat views).
    pub(crate) fn project(&self, x: &[f64]) -> (f64, f64, f64) {
        let get = |i: usize| x.get(i).copied().unwrap_or(0.0);
        match self {
            View::Line => (get(0), 0.0, 1.0),
            View::Circle => (get(0), get(1), 1.0),
            View::Sphere {
                right, up, toward, ..
            } => (dot(x, right), dot(x, up), dot(x, toward)),
            View::Pca { e1, e2, .. } => (dot(x, e1), dot(x, e2), 1.0),
        }
    }

    fn note(&self) -> String {
        match self {
            View::Line => "d = 1: tokens at ±1".into(),
            View::Circle => "tokens on the unit circle (x₁, x₂)".into(),
            View::Sphere { shaded: true, .. } => format!(
                "sphere seen from azimuth {AZIMUTH_DEG}°, elevation {ELEVATION_DEG}°; shading: density of the tokens on the front hemisphere (log scale)"
            ),
            View::Sphere { .. } => format!(
                "sphere seen from azimuth {AZIMUTH_DEG}°, elevation {ELEVATION_DEG}°; back hemisphere faded"
            ),
            View::Pca { .. } => {
                "projection on the two principal axes of the final tokens; circle: |x| = 1".into()
            }
        }
    }
}

/// The label of principal axis `k` with its share of the variance; an axis with no variance
/// (below 0.1%: the final tokens lie on one line through 0) says so instead of a number.
pub(crate) fn pca_axis_label(k: usize, share: f64) -> String {
    if share < 1e-3 {
        format!("axis {k}: no spread (final tokens on one line)")
    } else {
        format!("principal axis {k} ({:.1}% of variance)", 100.0 * share)
    }
}

/// Bars outside the unit circle: the density of the token angles theta in [`RING_BINS`] bins,
/// the longest bar [`RING_LENGTH`] long.
fn density_ring(tokens: &[f64], d: usize) -> Vec<Vec<(f64, f64)>> {
    let mut counts = [0usize; RING_BINS];
    for x in tokens.chunks_exact(d.max(2)) {
        if let Some(j) = super::kymograph::angle_bin_of(x[1], x[0], 1.0, RING_BINS) {
            counts[j] += 1;
        }
    }
    let max = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let step = 2.0 * PI / RING_BINS as f64;
    counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(j, &c)| {
            let (a0, a1) = (j as f64 * step, (j + 1) as f64 * step);
            let (r0, r1) = (1.04, 1.04 + RING_LENGTH * c as f64 / max);
            vec![
                (r0 * a0.cos(), r0 * a0.sin()),
                (r1 * a0.cos(), r1 * a0.sin()),
                (r1 * a1.cos(), r1 * a1.sin()),
                (r0 * a1.cos(), r0 * a1.sin()),
            ]
        })
        .collect()
}

/// A time for panel captions: two decimals at most, trailing zeros cut (196.55, 200).
fn time_text(t: f64) -> String {
    if !t.is_finite() || t.abs() >= 1e5 {
        return short(t);
    }
    let s = format!("{t:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Angle bins of the density ring of d = 2 panels.
const RING_BINS: usize = 90;
/// Length of the longest bar of the density ring.
const RING_LENGTH: f64 = 0.2;
/// Colour of the density ring.
pub(crate) const RING_COLOR: RGBColor = RGBColor(90, 90, 90);

/// The colour of each token: a hue wheel over the tokens ordered by their angle in the view at
/// the first snapshot (by rank, so the whole wheel is used even when the tokens start on an arc,
/// as a Poisson start does). On the sphere the angle is the one about the x3 axis.
fn token_colors(view: &View, first: &[f64], d: usize) -> Vec<RGBColor> {
    let angles: Vec<f64> = first
        .chunks_exact(d.max(1))
        .map(|x| {
            let (u, v) = match view {
                View::Sphere { .. } => (x[0], x.get(1).copied().unwrap_or(0.0)),
                _ => {
                    let (u, v, _) = view.project(x);
                    (u, v)
                }
            };
            let a = v.atan2(u);
            if a.is_finite() {
                a
            } else {
                0.0
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..angles.len()).collect();
    order.sort_by(|&i, &j| angles[i].total_cmp(&angles[j]).then(i.cmp(&j)));
    let m = angles.len().max(1) as f64;
    let mut colors = vec![BLACK; angles.len()];
    for (rank, &k) in order.iter().enumerate() {
        colors[k] = hue_color(rank as f64 / m);
    }
    colors
}

fn hue_color(hue: f64) -> RGBColor {
    let c = HSLColor(hue.rem_euclid(1.0), 0.8, 0.45)
        .to_backend_color()
        .rgb;
    RGBColor(c.0, c.1, c.2)
}

/// Lighter version of a colour (towards white by `f` in [0, 1]).
fn lighten(c: RGBColor, f: f64) -> RGBColor {
    let m = |v: u8| (v as f64 + (255.0 - v as f64) * f).round() as u8;
    RGBColor(m(c.0), m(c.1), m(c.2))
}

/// `count` evenly spaced indices of `0..len`, first and last included.
fn pick(len: usize, count: usize) -> Vec<usize> {
    if len == 0 || count == 0 {
        return Vec::new();
    }
    if len <= count {
        return (0..len).collect();
    }
    if count == 1 {
        return vec![len - 1];
    }
    let mut v: Vec<usize> = (0..count)
        .map(|i| (2 * i * (len - 1) + (count - 1)) / (2 * (count - 1)))
        .collect();
    v.dedup();
    v
}

/// A polyline in the picture plane.
type Polyline = Vec<(f64, f64)>;

/// A great circle of the sphere (d = 3): points p(s) = cos s a + sin s b, split by visibility.
fn great_circle(view: &View, a: [f64; 3], b: [f64; 3]) -> (Vec<Polyline>, Vec<Polyline>) {
    let (mut front, mut back) = (Vec::new(), Vec::new());
    let mut cur: Vec<(f64, f64)> = Vec::new();
    let mut cur_front = None;
    for k in 0..=180 {
        let s = 2.0 * PI * k as f64 / 180.0;
        let p = [
            s.cos() * a[0] + s.sin() * b[0],
            s.cos() * a[1] + s.sin() * b[1],
            s.cos() * a[2] + s.sin() * b[2],
        ];
        let (u, v, depth) = view.project(&p);
        let is_front = depth >= 0.0;
        if cur_front.is_some_and(|f| f != is_front) {
            cur.push((u, v));
            let piece = std::mem::take(&mut cur);
            if cur_front == Some(true) {
                front.push(piece);
            } else {
                back.push(piece);
            }
        }
        cur_front = Some(is_front);
        cur.push((u, v));
    }
    if !cur.is_empty() {
        if cur_front == Some(true) {
            front.push(cur);
        } else {
            back.push(cur);
        }
    }
    (front, back)
}

/// Draws one view of one snapshot into a square area, with a caption above it.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    view: &View,
    tokens: &[f64],
    d: usize,
    colors: &[RGBColor],
    caption: &str,
    caption_color: RGBColor,
) -> io::Result<()> {
    let pca = matches!(view, View::Pca { .. });
    let (xl, yl) = if pca { (px(50), px(70)) } else { (0, 0) };
    let margin = px(8);
    let cell = panel_cell(area, caption, caption_color, margin, (xl, yl))?;
    let lim = if matches!(view, View::Circle) {
        1.04 + RING_LENGTH + 0.04
    } else {
        1.18
    };
    let mut chart = ChartBuilder::on(&cell)
        .margin(margin)
        .x_label_area_size(xl)
        .y_label_area_size(yl)
        .build_cartesian_2d(-lim..lim, -lim..lim)
        .io()?;
    draw_panel_axes(&mut chart, view, lim)?;
    draw_reference(&mut chart, view)?;
    if let View::Circle = view {
        draw_density_ring(&mut chart, tokens, d)?;
    }
    if let View::Sphere { .. } = view {
        draw_sphere_frame(&mut chart, view)?;
    }
    draw_tokens(&mut chart, view, tokens, d, colors)?;
    // The axis names over the tokens, where dots do not hide them.
    draw_axis_names(&mut chart, view)
}

/// Draws the caption at the top of `area` and returns the centred square cell below it (with
/// room for the margin and the label areas `(x, y)`).
fn panel_cell<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    caption_color: RGBColor,
    margin: u32,
    (xl, yl): (u32, u32),
) -> io::Result<DrawingArea<DB, Shift>> {
    let (w, h) = area.dim_in_pixel();
    let cap = text_at(desc_size(), caption_color, HPos::Center, VPos::Top);
    area.draw_text(caption, &cap, (w as i32 / 2, pxi(4))).io()?;
    let top = px((desc_size() * 1.3) as u32);
    let inner = area
        .clone()
        .shrink((0, top), (w, h.saturating_sub(top + px(16))));
    let (iw, ih) = inner.dim_in_pixel();
    // A square plotting area, centred.
    let side = (iw.saturating_sub(2 * margin + yl)).min(ih.saturating_sub(2 * margin + xl));
    let cw = side + 2 * margin + yl;
    let ch = side + 2 * margin + xl;
    let x0 = (iw.saturating_sub(cw)) / 2;
    Ok(inner.shrink((x0, 0), (cw, ch)))
}

/// The principal-axes mesh with its labels, or light axes through the centre (not on the
/// sphere).
fn draw_panel_axes<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    view: &View,
    lim: f64,
) -> io::Result<()> {
    match view {
        View::Pca { share, .. } => {
            let (xt, yt) = super::ticks(chart);
            let mut mesh = super::axes(chart);
            super::grid(&mut mesh, 230, 255);
            mesh.x_labels(xt.min(5))
                .y_labels(yt.min(5))
                .max_light_lines(4)
                .label_style(text(TICK_SIZE * 0.85))
                .axis_desc_style(text(desc_size() * 0.85))
                .x_label_formatter(&tick)
                .y_label_formatter(&tick)
                .x_desc(axis_name(1, share.0))
                .y_desc(axis_name(2, share.1))
                .draw()
                .io()?;
        }
        View::Sphere { .. } => {}
        _ => {
            for (a, b) in [((-lim, 0.0), (lim, 0.0)), ((0.0, -lim), (0.0, lim))] {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![a, b],
                        RGBColor(225, 225, 225).stroke_width(lw(1)),
                    )))
                    .io()?;
            }
        }
    }
    Ok(())
}

/// The reference curve: the unit circle (dashed in principal axes), or the segment [-1, 1] for
/// d = 1.
fn draw_reference<DB: DrawingBackend>(chart: &mut Chart2d<'_, DB>, view: &View) -> io::Result<()> {
    let grey = RGBColor(150, 150, 150);
    let circle: Vec<(f64, f64)> = (0..=240)
        .map(|k| {
            let s = 2.0 * PI * k as f64 / 240.0;
            (s.cos(), s.sin())
        })
        .collect();
    match view {
        View::Pca { .. } => chart
            .draw_series(DashedLineSeries::new(
                circle,
                pxi(6),
                pxi(5),
                grey.stroke_width(lw(1)),
            ))
            .io()?,
        View::Line => chart
            .draw_series(LineSeries::new(
                vec![(-1.0, 0.0), (1.0, 0.0)],
                grey.stroke_width(lw(2)),
            ))
            .io()?,
        _ => chart
            .draw_series(LineSeries::new(circle, grey.stroke_width(lw(2))))
            .io()?,
    };
    Ok(())
}

/// d = 2: the density ring of the doubled angle outside the circle.
fn draw_density_ring<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    tokens: &[f64],
    d: usize,
) -> io::Result<()> {
    chart
        .draw_series(
            density_ring(tokens, d)
                .into_iter()
                .map(|p| Polygon::new(p, RING_COLOR.mix(0.55).filled())),
        )
        .io()?;
    Ok(())
}

/// The names of the axes: x1, x2 at the circle (d = 2), x1, x2, x3 at the ends of the sphere's
/// axes (d = 3, grey behind the sphere); none in the other views.
fn draw_axis_names<DB: DrawingBackend>(chart: &mut Chart2d<'_, DB>, view: &View) -> io::Result<()> {
    match view {
        View::Circle => {
            let label = text_at(
                super::LEGEND_SIZE,
                RGBColor(110, 110, 110),
                HPos::Center,
                VPos::Center,
            );
            chart
                .draw_series([
                    Text::new("x₁", (1.1, 0.06), label.clone()),
                    Text::new("x₂", (0.07, 1.1), label),
                ])
                .io()?;
        }
        View::Sphere { .. } => {
            for (i, name) in ["x₁", "x₂", "x₃"].into_iter().enumerate() {
                let mut axis = [0.0; 3];
                axis[i] = 1.0;
                let (u, v, depth) = view.project(&axis);
                chart
                    .draw_series(std::iter::once(Text::new(
                        name,
                        (u * 1.1 + 0.02, v * 1.1 + 0.02),
                        text_at(
                            super::LEGEND_SIZE,
                            axis_color(depth),
                            HPos::Center,
                            VPos::Center,
                        ),
                    )))
                    .io()?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The grey of a sphere axis: darker in front (depth >= 0) than behind.
fn axis_color(depth: f64) -> RGBColor {
    if depth >= 0.0 {
        RGBColor(120, 120, 120)
    } else {
        RGBColor(185, 185, 185)
    }
}

/// d = 3: the equator and two meridians (the back half dashed) and the three axes (their
/// names are drawn over the tokens, [`draw_axis_names`]).
fn draw_sphere_frame<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    view: &View,
) -> io::Result<()> {
    let e = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    for (a, b) in [(e[0], e[1]), (e[0], e[2]), (e[1], e[2])] {
        let (front, back) = great_circle(view, a, b);
        for piece in back {
            chart
                .draw_series(DashedLineSeries::new(
                    piece,
                    4,
                    4,
                    RGBColor(205, 205, 205).stroke_width(lw(1)),
                ))
                .io()?;
        }
        for piece in front {
            chart
                .draw_series(LineSeries::new(
                    piece,
                    RGBColor(175, 175, 175).stroke_width(lw(1)),
                ))
                .io()?;
        }
    }
    for axis in &e {
        let (u, v, depth) = view.project(axis);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 0.0), (u, v)],
                axis_color(depth).stroke_width(lw(1)),
            )))
            .io()?;
    }
    Ok(())
}

/// The density on the sphere of the front hemisphere's tokens in DENSITY_CELLS x DENSITY_CELLS
/// cells of the picture plane [-1, 1]^2 (row-major, v up): each token counts with its depth, since
/// the orthographic projection shrinks the sphere's area by that factor (du dv = depth dA);
/// smoothed twice by the binomial filter [1, 2, 1] / 4 in each direction.
pub(crate) fn front_density(view: &View, tokens: &[f64], d: usize) -> Vec<f64> {
    let g = DENSITY_CELLS;
    let mut counts = vec![0.0; g * g];
    let cell = |a: f64| (((a + 1.0) * 0.5 * g as f64).floor().max(0.0) as usize).min(g - 1);
    for x in tokens.chunks_exact(d.max(1)) {
        let (u, v, depth) = view.project(x);
        if depth >= 0.0 && u.is_finite() && v.is_finite() {
            counts[cell(v) * g + cell(u)] += depth;
        }
    }
    for _ in 0..2 {
        counts = smooth(&counts, g, 1, g);
        counts = smooth(&counts, g, g, 1);
    }
    counts
}

/// One pass of [1, 2, 1] / 4 along `step` within lines of `g` cells (`line` apart), edges
/// reflected.
fn smooth(values: &[f64], g: usize, step: usize, line: usize) -> Vec<f64> {
    let mut out = vec![0.0; values.len()];
    for a in 0..g {
        for b in 0..g {
            let at = |i: usize| values[a * line + i * step];
            let prev = at(b.saturating_sub(1));
            let next = at((b + 1).min(g - 1));
            out[a * line + b * step] = 0.25 * prev + 0.5 * at(b) + 0.25 * next;
        }
    }
    out
}

/// The front hemisphere as a density shading: a cell of the picture plane inside the unit disc
/// coloured by log(1 + c) / log(1 + max) of its smoothed count (viridis, as the kymograph).
fn draw_density<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    view: &View,
    tokens: &[f64],
    d: usize,
) -> io::Result<()> {
    let g = DENSITY_CELLS;
    let density = front_density(view, tokens, d);
    let max = density.iter().cloned().fold(0.0, f64::max);
    // Counts relative to the smallest visible one, so the scale starts at one token.
    let scale = |c: f64| c * 8.0;
    let side = 2.0 / g as f64;
    let cells = (0..g * g).filter_map(|i| {
        let (row, col) = (i / g, i % g);
        let (u0, v0) = (-1.0 + col as f64 * side, -1.0 + row as f64 * side);
        let (uc, vc) = (u0 + 0.5 * side, v0 + 0.5 * side);
        (uc * uc + vc * vc <= 1.0).then(|| {
            let color = super::kymograph::density_color(scale(density[i]), scale(max));
            Rectangle::new([(u0, v0 + side), (u0 + side, v0)], color.filled())
        })
    });
    chart.draw_series(cells).io()?;
    Ok(())
}

/// The tokens as dots, back to front (behind the sphere lighter and smaller), or on a sphere
/// with many tokens as a density shading.
fn draw_tokens<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    view: &View,
    tokens: &[f64],
    d: usize,
    colors: &[RGBColor],
) -> io::Result<()> {
    if let View::Sphere { shaded: true, .. } = view {
        return draw_density(chart, view, tokens, d);
    }
    let count = tokens.len() / d.max(1);
    let radius = px(if count <= 200 {
        5
    } else if count <= 1000 {
        4
    } else {
        3
    });
    let mut pts: Vec<(f64, f64, f64, RGBColor)> = tokens
        .chunks_exact(d.max(1))
        .enumerate()
        .filter_map(|(k, x)| {
            let (u, v, depth) = view.project(x);
            let c = colors.get(k).copied().unwrap_or(BLACK);
            (u.is_finite() && v.is_finite()).then_some((u, v, depth, c))
        })
        .collect();
    pts.sort_by(|a, b| a.2.partial_cmp(&b.2).unwrap_or(std::cmp::Ordering::Equal));
    chart
        .draw_series(pts.iter().map(|&(u, v, depth, c)| {
            if depth >= 0.0 {
                Circle::new((u, v), radius, c.mix(0.85).filled())
            } else {
                Circle::new((u, v), radius - px(1), lighten(c, 0.6).filled())
            }
        }))
        .io()?;
    Ok(())
}

/// A small hue wheel with a caption, as the colour legend.
fn draw_hue_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    caption: &str,
) -> io::Result<i32> {
    let r = pxi(14);
    for k in 0..48 {
        let a = 2.0 * PI * k as f64 / 48.0;
        let c = hue_color((a + PI) / (2.0 * PI));
        let p = (
            x + r + (r as f64 * a.cos()).round() as i32,
            y - (r as f64 * a.sin()).round() as i32,
        );
        area.draw(&Circle::new(p, px(3), c.filled())).io()?;
    }
    let style = text_at(
        super::LEGEND_SIZE,
        RGBColor(60, 60, 60),
        HPos::Left,
        VPos::Center,
    );
    let lines = footer_lines(area, caption, x);
    let line_h = pxi(24);
    let y0 = y - line_h * (lines.len() as i32 - 1) / 2;
    for (i, line) in lines.iter().enumerate() {
        area.draw_text(line, &style, (x + 2 * r + pxi(14), y0 + line_h * i as i32))
            .io()?;
    }
    Ok(2 * r + pxi(14) + super::text_width(area, caption, super::LEGEND_SIZE) as i32)
}

/// The footer caption cut into lines that fit beside the hue wheel drawn at `x`.
fn footer_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    x: i32,
) -> Vec<String> {
    let (w, _) = area.dim_in_pixel();
    let room = (w as i32 - x - pxi(2 * 14 + 14 + 30)).max(1) as u32;
    super::wrap(area, caption, super::LEGEND_SIZE, room)
}

/// A principal axis named on a panel: in full, or short on paper (where panels are narrow)
/// unless it has no spread.
fn axis_name(k: usize, share: f64) -> String {
    if super::is_paper() && share >= 1e-3 {
        format!("axis {k} ({:.0}%)", 100.0 * share)
    } else {
        pca_axis_label(k, share)
    }
}

struct TokensPicture<'a> {
    snaps: &'a TokenSnapshots,
    title: &'a str,
    panels: Vec<(f64, &'a [f64])>,
    cols: usize,
}

const PANEL_W: u32 = 533;

impl Picture for TokensPicture<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let snaps = self.snaps;
        let area = draw_title(root, self.title)?;
        let (w, h) = area.dim_in_pixel();
        if self.panels.is_empty() {
            return draw_no_data(&area, "no token snapshots");
        }
        let d = snaps.d();
        let view = View::of(snaps);
        let colors = token_colors(&view, self.panels[0].1, d);
        let footer = self.footer(&area, snaps, &view);
        let grid = area.clone().shrink((0, 0), (w, h.saturating_sub(footer)));
        let rows = self.panels.len().div_ceil(self.cols);
        let (gw, gh) = grid.dim_in_pixel();
        let pw = gw / self.cols as u32;
        let ph = gh / rows as u32;
        for (k, &(t, tokens)) in self.panels.iter().enumerate() {
            let (r, c) = (k / self.cols, k % self.cols);
            let cell = grid
                .clone()
                .shrink((c as u32 * pw, r as u32 * ph), (pw, ph));
            draw_panel(
                &cell,
                &view,
                tokens,
                d,
                &colors,
                &format!("t = {}", time_text(t)),
                BLACK,
            )?;
        }
        // Footer: colour legend and view note.
        let foot = area
            .clone()
            .shrink((0, h.saturating_sub(footer)), (w, footer));
        draw_hue_legend(
            &foot,
            (FOOT_X, footer as i32 / 2),
            &self.caption(snaps, &view),
        )?;
        Ok(())
    }
}

/// Where the hue wheel of the footer starts (pixels).
const FOOT_X: i32 = 20;

impl TokensPicture<'_> {
    /// The footer caption: what the colours, the grey bars and the view mean.
    fn caption(&self, snaps: &TokenSnapshots, view: &View) -> String {
        let d = snaps.d();
        let kept = self.panels[0].1.len() / d.max(1);
        let shown = if snaps.stride() > 1 {
            format!("; {kept} of {} tokens shown", snaps.n())
        } else {
            String::new()
        };
        let ring = if matches!(view, View::Circle) {
            "; grey bars: density of the angle"
        } else {
            ""
        };
        if let View::Sphere { shaded: true, .. } = view {
            return format!("{}{shown}", view.note());
        }
        format!(
            "colour: tokens ordered by angle at t = {}.   {}{ring}{shown}",
            short(self.panels[0].0),
            view.note()
        )
    }

    /// The footer height in pixels: one or more caption lines.
    fn footer<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        snaps: &TokenSnapshots,
        view: &View,
    ) -> u32 {
        let lines = footer_lines(area, &self.caption(snaps, view), FOOT_X).len() as u32;
        px(44).max(px(24) * lines + px(14))
    }
}

/// The snapshots nearest to each of `times` (distinct, in time order); with no times, up to
/// [`MAX_PANELS`] evenly spread ones (the first and the last included).
fn choose<'a>(snaps: &'a TokenSnapshots, times: &[f64]) -> Vec<(f64, &'a [f64])> {
    let all = snaps.candidates();
    if times.is_empty() || snaps.has_given() {
        return pick(all.len(), MAX_PANELS)
            .into_iter()
            .map(|i| all[i])
            .collect();
    }
    let mut chosen: Vec<usize> = times
        .iter()
        .filter_map(|&t| {
            (0..all.len()).min_by(|&a, &b| (all[a].0 - t).abs().total_cmp(&(all[b].0 - t).abs()))
        })
        .collect();
    chosen.sort_unstable();
    chosen.dedup();
    chosen.into_iter().map(|i| all[i]).collect()
}

/// Writes `tokens.png` and `tokens.svg` into `dir`: one panel per snapshot nearest to each of
/// `times` (see [`super::snapshots::snapshot_times`]; the times asked for in the scenario when
/// there are some; evenly spread snapshots when `times` is empty).
pub fn tokens_plot(
    snaps: &TokenSnapshots,
    times: &[f64],
    title: &str,
    figure: Figure,
    dir: &Path,
) -> io::Result<()> {
    let panels = choose(snaps, times);
    let cols = match panels.len() {
        0 | 1 => 1,
        2 | 4 => 2,
        _ => 3,
    };
    let rows = panels.len().div_ceil(cols).max(1) as u32;
    let width = match cols {
        1 => 1000,
        2 => 1300,
        _ => 1600,
    };
    let ph = (width / cols as u32).min(PANEL_W + 40);
    let height = 120 + rows * (ph + 10) + 44;
    let pic = TokensPicture {
        snaps,
        title,
        panels,
        cols,
    };
    let size = match figure {
        Figure::Paper => (width, height),
        Figure::Slide => super::SLIDE_SIZE,
    };
    super::render(&pic, dir, "tokens", size, figure).map(|_| ())
}

/// A multiply-shift hasher for packed RGB keys (the std SipHash dominates the frame time).
#[derive(Default)]
struct RgbHasher(u64);

impl std::hash::Hasher for RgbHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (v as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(26);
    }
}

type RgbMap<V> = std::collections::HashMap<u32, V, std::hash::BuildHasherDefault<RgbHasher>>;

fn pack(p: &[u8]) -> u32 {
    (p[0] as u32) << 16 | (p[1] as u32) << 8 | p[2] as u32
}

/// Reduces an RGB buffer to at most 256 colours: the 255 most frequent colours are kept
/// exactly (white, greys, token colours), every other colour becomes the nearest kept one.
/// With <= 256 colours the GIF encoder uses an exact palette instead of its slow NeuQuant.
pub(crate) fn quantize_256(buf: &mut [u8]) {
    const WHITE_KEY: u32 = 0xff_ffff;
    let mut counts: RgbMap<u32> = RgbMap::default();
    let mut whites = 0u32;
    for p in buf.chunks_exact(3) {
        let k = pack(p);
        if k == WHITE_KEY {
            whites += 1;
        } else {
            *counts.entry(k).or_insert(0) += 1;
        }
    }
    if whites > 0 {
        counts.insert(WHITE_KEY, whites);
    }
    if counts.len() <= 256 {
        return;
    }
    let mut by_count: Vec<(u32, u32)> = counts.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let keep: Vec<u32> = by_count.iter().take(255).map(|c| c.0).collect();
    let split = |k: u32| {
        [
            (k >> 16) as i32,
            ((k >> 8) & 0xff) as i32,
            (k & 0xff) as i32,
        ]
    };
    let mut map: RgbMap<u32> = RgbMap::default();
    for (c, _) in &by_count[255..] {
        let c3 = split(*c);
        let best = keep
            .iter()
            .copied()
            .min_by_key(|k| {
                let k3 = split(*k);
                let d: i32 = (0..3).map(|i| (c3[i] - k3[i]).pow(2)).sum();
                (d, *k)
            })
            .unwrap_or(WHITE_KEY);
        map.insert(*c, best);
    }
    for p in buf.chunks_exact_mut(3) {
        let k = pack(p);
        if k == WHITE_KEY {
            continue;
        }
        if let Some(&q) = map.get(&k) {
            p[0] = (q >> 16) as u8;
            p[1] = (q >> 8) as u8;
            p[2] = q as u8;
        }
    }
}

/// Draws one frame of the animation (`None`: the "no data" frame).
#[allow(clippy::too_many_arguments)]
fn draw_frame<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    snaps: &TokenSnapshots,
    view: &View,
    colors: &[RGBColor],
    title: &str,
    frame: Option<usize>,
    (t0, t1): (f64, f64),
) -> io::Result<()> {
    root.fill(&WHITE).io()?;
    let area = draw_title(root, title)?;
    let (w, h) = area.dim_in_pixel();
    let Some(i) = frame else {
        return draw_no_data(&area, "no token snapshots");
    };
    let bar = 26u32;
    let panel = area.clone().shrink((0, 0), (w, h.saturating_sub(bar)));
    let t = snaps.times()[i];
    draw_panel(
        &panel,
        view,
        snaps.tokens(i),
        snaps.d(),
        colors,
        &format!("t = {}", short(t)),
        BLACK,
    )?;
    // Progress bar of time.
    let f = if t1 > t0 {
        ((t - t0) / (t1 - t0)).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let (x0, x1, y) = (30, w as i32 - 30, h as i32 - bar as i32 / 2 - 4);
    area.draw(&Rectangle::new(
        [(x0, y - 4), (x1, y + 4)],
        RGBColor(225, 225, 225).filled(),
    ))
    .io()?;
    let xf = x0 + ((x1 - x0) as f64 * f).round() as i32;
    area.draw(&Rectangle::new(
        [(x0, y - 4), (xf, y + 4)],
        RGBColor(90, 90, 90).filled(),
    ))
    .io()
}

/// Writes `tokens.gif` into `dir`: one frame per kept snapshot (at most [`MAX_FRAMES`], evenly
/// spaced), about eight seconds in all, looping.
pub fn tokens_gif(snaps: &TokenSnapshots, title: &str, dir: &Path) -> io::Result<()> {
    register_fonts();
    let path = dir.join("tokens.gif");
    let wrap = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let frames = pick(snaps.len(), MAX_FRAMES);
    let delay = if frames.is_empty() {
        500
    } else {
        (8000 / frames.len() as u32).clamp(60, 500)
    };
    let backend = BitMapBackend::gif(&path, GIF_SIZE, delay)
        .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
    let gif_root = backend.into_drawing_area();
    let first_line = title.lines().next().unwrap_or("");
    let view = View::of(snaps);
    let colors = frames
        .first()
        .map(|&i| token_colors(&view, snaps.tokens(i), snaps.d()))
        .unwrap_or_default();
    let span = (
        frames.first().map(|&i| snaps.times()[i]).unwrap_or(0.0),
        frames.last().map(|&i| snaps.times()[i]).unwrap_or(0.0),
    );
    let (w, h) = GIF_SIZE;
    let mut buf = vec![0u8; (w * h * 3) as usize];
    let list: Vec<Option<usize>> = if frames.is_empty() {
        vec![None]
    } else {
        frames.iter().map(|&i| Some(i)).collect()
    };
    for frame in list {
        {
            let root = BitMapBackend::with_buffer(&mut buf, GIF_SIZE).into_drawing_area();
            draw_frame(&root, snaps, &view, &colors, first_line, frame, span).map_err(wrap)?;
            root.present().io().map_err(wrap)?;
        }
        quantize_256(&mut buf);
        let image = BitMapElement::with_ref((0, 0), GIF_SIZE, &buf)
            .ok_or_else(|| wrap(io::Error::other("frame buffer of the wrong size")))?;
        gif_root.draw(&image).io().map_err(wrap)?;
        gif_root.present().io().map_err(wrap)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn density_of_uniform_tokens_is_flat_across_the_disc() {
        // Uniform tokens on the sphere have a uniform density; their projection piles up near
        // the rim (du dv = depth dA), which the depth weight undoes.
        let n = 400_000;
        let golden = PI * (3.0 - 5f64.sqrt());
        let tokens: Vec<f64> = (0..n)
            .flat_map(|k| {
                let z = 1.0 - (2.0 * k as f64 + 1.0) / n as f64;
                let r = (1.0 - z * z).sqrt();
                let phi = golden * k as f64;
                [r * phi.cos(), r * phi.sin(), z]
            })
            .collect();
        let snaps = TokenSnapshots::from_snapshots(3, &[(0.0, vec![0.0, 0.0, 1.0])]);
        let view = View::of(&snaps);
        let density = front_density(&view, &tokens, 3);
        let g = DENSITY_CELLS;
        let (mut inner, mut outer) = ((0.0, 0), (0.0, 0));
        for (i, c) in density.iter().enumerate() {
            let side = 2.0 / g as f64;
            let u = -1.0 + (i % g) as f64 * side + 0.5 * side;
            let v = -1.0 + (i / g) as f64 * side + 0.5 * side;
            let r = (u * u + v * v).sqrt();
            if r < 0.5 {
                inner = (inner.0 + c, inner.1 + 1);
            } else if (0.7..0.85).contains(&r) {
                outer = (outer.0 + c, outer.1 + 1);
            }
        }
        let ratio = (outer.0 / outer.1 as f64) / (inner.0 / inner.1 as f64);
        assert!((ratio - 1.0).abs() < 0.05, "outer / inner = {ratio}");
    }

    #[test]
    fn sphere_view_is_orthonormal() {
        let snaps = TokenSnapshots::from_snapshots(3, &[(0.0, vec![0.0, 0.0, 1.0])]);
        let View::Sphere {
            right, up, toward, ..
        } = View::of(&snaps)
        else {
            panic!("d = 3 is the sphere view");
        };
        for (a, b) in [(right, up), (up, toward), (right, toward)] {
            assert!(dot(&a, &b).abs() < 1e-12);
        }
        for a in [right, up, toward] {
            assert!((dot(&a, &a) - 1.0).abs() < 1e-12);
        }
        // The north pole is up and in front.
        let (u, v, depth) = View::of(&snaps).project(&[0.0, 0.0, 1.0]);
        assert!(u.abs() < 1e-12 && v > 0.9 && depth > 0.0);
    }

    #[test]
    fn quantization_keeps_frequent_colours_exactly() {
        let mut buf = Vec::new();
        for k in 0..1000u32 {
            let c = if k < 500 {
                [255, 255, 255]
            } else {
                [(k % 251) as u8, 7, (k / 4) as u8]
            };
            buf.extend(c);
        }
        quantize_256(&mut buf);
        let distinct: std::collections::HashSet<&[u8]> = buf.chunks_exact(3).collect();
        assert!(distinct.len() <= 256);
        assert_eq!(&buf[..3], &[255, 255, 255]);
        let mut small = vec![1, 2, 3, 4, 5, 6];
        quantize_256(&mut small);
        assert_eq!(small, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn picks_include_both_ends() {
        assert_eq!(pick(10, 6), vec![0, 2, 4, 5, 7, 9]);
        assert_eq!(pick(3, 6), vec![0, 1, 2]);
        assert!(pick(0, 6).is_empty());
    }
}
