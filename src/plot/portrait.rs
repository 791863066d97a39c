//! `portrait.png` / `portrait.svg`: the Ott–Antonsen phase portrait of d = 2 LSA in the unit
//! disk of R2.
//!
//! Drawn from the formula R' = i omega(R) R + (H(R) - conj(H(R)) R^2) / 2
//! ([`SecondHarmonic::ott_antonsen_rhs`]): direction arrows on a grid (darker = faster), the
//! nullclines Re R' = 0 and Im R' = 0 (marching squares on a 321 x 321 grid), a few OA
//! trajectories from starts on the circles |R| = 0.5 and 0.9 (fixed-step RK4 up to the guide
//! time; guide curves of the picture, not results), the fixed points given by the caller
//! (stable filled, unstable hollow, a centre a grey square), closed curves given by the caller
//! (limit cycles: stable solid, unstable dashed, a neutral family of closed orbits around a
//! centre thin dotted), the invariant circle |R| = 1, and the run's R2 path on top.

use std::f64::consts::PI;
use std::io;
use std::path::Path;

use num_complex::Complex64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::{
    disk_chart, draw_legend, draw_title, square_chart_width, thin, Chart2d, Entry, Mark, OrIo,
    Picture,
};
use super::{is_paper, legend_below, lw, px, pxi};
use crate::reduced::SecondHarmonic;

/// Width and height of `portrait.png` (paper): taller than wide, the legend goes below the disk.
pub const PORTRAIT_SIZE: (u32, u32) = (1400, 1650);

const RE_NULL: RGBColor = RGBColor(0, 150, 136);
const IM_NULL: RGBColor = RGBColor(230, 120, 0);
const GUIDE: RGBColor = RGBColor(95, 120, 160);
const PATH: RGBColor = RGBColor(210, 20, 40);
/// Colour of the closed curves (limit cycles); their kind is told by the stroke.
const CYCLE: RGBColor = RGBColor(106, 61, 154);

/// Grid nodes per side for the nullclines.
const NULL_GRID: usize = 321;
/// Most RK4 steps of a guide trajectory.
const GUIDE_STEPS: usize = 20_000;
/// Most points of a drawn path.
const MAX_PATH: usize = 5000;

/// How a fixed point is drawn: stable filled, unstable (and saddles) hollow, a centre (neutral:
/// purely imaginary eigenvalues) as a grey square.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixedKind {
    /// An attracting fixed point.
    Stable,
    /// A repelling fixed point or a saddle.
    Unstable,
    /// A neutral centre, surrounded by closed orbits.
    Centre,
}

/// How a closed curve of the portrait is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CycleKind {
    /// An attracting limit cycle: solid.
    Stable,
    /// A repelling limit cycle: dashed.
    Unstable,
    /// One closed orbit of a neutral family (around a centre): thin dotted.
    Neutral,
}

impl CycleKind {
    /// Stroke width and dash pattern (`None`: solid).
    fn stroke(self) -> (u32, Option<(u32, u32)>) {
        match self {
            CycleKind::Stable => (4, None),
            CycleKind::Unstable => (3, Some((14, 9))),
            CycleKind::Neutral => (2, Some((3, 6))),
        }
    }

    /// The legend text.
    fn legend(self) -> &'static str {
        match self {
            CycleKind::Stable => "stable limit cycle",
            CycleKind::Unstable => "unstable limit cycle",
            CycleKind::Neutral => "closed orbits around a centre",
        }
    }
}

/// A closed curve in the R2 plane (the last point joins the first) and how it is drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleCurve {
    /// The curve's points in the R plane, in order around it.
    pub points: Vec<Complex64>,
    /// How it is drawn.
    pub kind: CycleKind,
}

/// Colour of the centre marker.
pub(crate) const CENTRE_COLOR: RGBColor = RGBColor(150, 150, 150);

/// The fixed points of `predict` with how each is drawn.
pub fn fixed_kinds(points: &[crate::predict::FixedPoint]) -> Vec<(Complex64, FixedKind)> {
    use crate::predict::Stability;
    points
        .iter()
        .map(|p| {
            let kind = match p.stability {
                Stability::Stable => FixedKind::Stable,
                Stability::Center => FixedKind::Centre,
                _ => FixedKind::Unstable,
            };
            (p.r, kind)
        })
        .collect()
}

/// The periodic orbits `predict` found, with how each is drawn: stable solid, unstable dashed,
/// neutral ones (a centre's family, or an isolated neutral cycle) dotted.
pub fn cycle_curves(cycles: &[crate::predict::LimitCycle]) -> Vec<CycleCurve> {
    use crate::predict::CycleKind as Found;
    cycles
        .iter()
        .map(|c| CycleCurve {
            points: crate::predict::cycle_orbit(c).to_vec(),
            kind: match c.kind {
                Found::Stable => CycleKind::Stable,
                Found::Unstable => CycleKind::Unstable,
                Found::Neutral | Found::Centre => CycleKind::Neutral,
            },
        })
        .collect()
}

/// Writes `portrait.png` and `portrait.svg` into `dir`.
///
/// - `sh`: the model's omega and H (d = 2, lsa);
/// - `fixed`: fixed points of the OA equation and how each is drawn;
/// - `cycles`: closed curves (limit cycles, neutral orbits) to draw, may be empty;
/// - `path_r2`: the run's R2 at each sample (may be empty);
/// - `guide_time`: how long the guide trajectories run (nothing is drawn for them if it is not
///   positive);
/// - `title`: one or more lines.
#[allow(clippy::too_many_arguments)]
pub fn portrait_plot(
    sh: &SecondHarmonic,
    fixed: &[(Complex64, FixedKind)],
    cycles: &[CycleCurve],
    path_r2: &[Complex64],
    guide_time: f64,
    title: &str,
    figure: super::Figure,
    dir: &Path,
) -> io::Result<()> {
    // The field on the grid and the guide curves, computed once for the PNG and the SVG.
    let field = FieldGrid::of(sh);
    let dt = guide_step(field.max_speed);
    // A long (or infinite) guide time is cut to the step budget; NaN or <= 0 means none.
    let guide_time = if guide_time > 0.0 {
        guide_time.min(GUIDE_STEPS as f64 * dt)
    } else {
        0.0
    };
    let guides = guide_curves(sh, guide_time, dt);
    let pic = PortraitPicture {
        sh,
        fixed,
        cycles,
        path_r2,
        guide_time,
        title,
        field,
        guides,
    };
    super::render(&pic, dir, "portrait", figure.size(PORTRAIT_SIZE), figure).map(|_| ())
}

struct PortraitPicture<'a> {
    sh: &'a SecondHarmonic,
    fixed: &'a [(Complex64, FixedKind)],
    cycles: &'a [CycleCurve],
    path_r2: &'a [Complex64],
    /// How long the guide curves run (cut to the step budget; 0: none).
    guide_time: f64,
    title: &'a str,
    field: FieldGrid,
    /// The guide curves, thinned.
    guides: Vec<Vec<(f64, f64)>>,
}

/// Zero-level segments of `f` sampled on an `m x m` grid over [-1, 1]^2 (marching squares),
/// inside the unit disk.
pub(crate) fn zero_segments(values: &[f64], m: usize) -> Vec<[(f64, f64); 2]> {
    let mut out = Vec::new();
    if m < 2 || values.len() < m * m {
        return out;
    }
    let h = 2.0 / (m - 1) as f64;
    let at = |i: usize, j: usize| values[j * m + i];
    let pos = |i: usize, j: usize| (-1.0 + i as f64 * h, -1.0 + j as f64 * h);
    let cross = |a: f64, b: f64, pa: (f64, f64), pb: (f64, f64)| -> Option<(f64, f64)> {
        if (a > 0.0) == (b > 0.0) || !a.is_finite() || !b.is_finite() {
            return None;
        }
        let t = (a / (a - b)).clamp(0.0, 1.0);
        Some((pa.0 + t * (pb.0 - pa.0), pa.1 + t * (pb.1 - pa.1)))
    };
    let inside = |p: (f64, f64)| p.0 * p.0 + p.1 * p.1 <= 1.0 + 1e-12;
    for j in 0..m - 1 {
        for i in 0..m - 1 {
            let (p00, p10, p11, p01) = (pos(i, j), pos(i + 1, j), pos(i + 1, j + 1), pos(i, j + 1));
            let (v00, v10, v11, v01) = (at(i, j), at(i + 1, j), at(i + 1, j + 1), at(i, j + 1));
            let e = [
                cross(v00, v10, p00, p10), // bottom
                cross(v10, v11, p10, p11), // right
                cross(v01, v11, p01, p11), // top
                cross(v00, v01, p00, p01), // left
            ];
            let mut pairs: Vec<(usize, usize)> = Vec::new();
            let found: Vec<usize> = (0..4).filter(|&k| e[k].is_some()).collect();
            if found.len() == 2 {
                pairs.push((found[0], found[1]));
            } else if found.len() == 4 {
                let centre = (v00 + v10 + v11 + v01) / 4.0;
                if (centre > 0.0) == (v00 > 0.0) {
                    pairs.push((0, 1));
                    pairs.push((2, 3));
                } else {
                    pairs.push((0, 3));
                    pairs.push((1, 2));
                }
            }
            for (a, b) in pairs {
                if let (Some(pa), Some(pb)) = (e[a], e[b]) {
                    if inside(pa) && inside(pb) {
                        out.push([pa, pb]);
                    }
                }
            }
        }
    }
    out
}

/// An OA trajectory from `r0` by fixed-step RK4, until `t_end`, |R| > 1, a non-finite value or
/// a fixed point.
pub(crate) fn guide_curve(
    sh: &SecondHarmonic,
    r0: Complex64,
    t_end: f64,
    dt: f64,
) -> Vec<(f64, f64)> {
    let mut out = vec![(r0.re, r0.im)];
    if !(t_end > 0.0 && t_end.is_finite() && dt > 0.0 && dt.is_finite()) {
        return out;
    }
    // At most GUIDE_STEPS steps of at most dt: a long guide time is cut, never stretched.
    let wanted = (t_end / dt).ceil();
    let (steps, dt) = if wanted <= GUIDE_STEPS as f64 {
        let steps = (wanted as usize).max(1);
        (steps, t_end / steps as f64)
    } else {
        (GUIDE_STEPS, dt)
    };
    let f = |r: Complex64| sh.ott_antonsen_rhs(r);
    let mut r = r0;
    for _ in 0..steps {
        let k1 = f(r);
        if k1.norm() < 1e-10 {
            break;
        }
        let k2 = f(r + k1 * (dt / 2.0));
        let k3 = f(r + k2 * (dt / 2.0));
        let k4 = f(r + k3 * dt);
        let next = r + (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (dt / 6.0);
        if !(next.re.is_finite() && next.im.is_finite()) || next.norm() > 1.0 + 1e-9 {
            break;
        }
        r = next;
        out.push((r.re, r.im));
    }
    out
}

/// Step of the guide trajectories: 0.01, or less where the field is fast (|R'| max on the disk).
fn guide_step(max_speed: f64) -> f64 {
    if max_speed > 0.0 && max_speed.is_finite() {
        (0.05 / max_speed).min(0.01)
    } else {
        0.01
    }
}

/// A filled arrowhead with its tip at `tip`, pointing along `dir` (unit), of length `len`.
fn arrow_head(tip: (f64, f64), dir: (f64, f64), len: f64) -> Vec<(f64, f64)> {
    let (px, py) = (-dir.1, dir.0);
    let back = (tip.0 - len * dir.0, tip.1 - len * dir.1);
    vec![
        tip,
        (back.0 + 0.45 * len * px, back.1 + 0.45 * len * py),
        (back.0 - 0.45 * len * px, back.1 - 0.45 * len * py),
    ]
}

/// The point halfway along a polyline (by arc length) and the direction there.
fn midway(p: &[(f64, f64)]) -> Option<((f64, f64), (f64, f64))> {
    let seg = |a: (f64, f64), b: (f64, f64)| ((b.0 - a.0).powi(2) + (b.1 - a.1).powi(2)).sqrt();
    let total: f64 = p.windows(2).map(|w| seg(w[0], w[1])).sum();
    if total.is_nan() || total <= 0.04 {
        return None;
    }
    let mut acc = 0.0;
    for w in p.windows(2) {
        let l = seg(w[0], w[1]);
        if acc + l >= total / 2.0 && l > 0.0 {
            let f = (total / 2.0 - acc) / l;
            let at = (
                w[0].0 + f * (w[1].0 - w[0].0),
                w[0].1 + f * (w[1].1 - w[0].1),
            );
            return Some((at, ((w[1].0 - w[0].0) / l, (w[1].1 - w[0].1) / l)));
        }
        acc += l;
    }
    None
}

impl Picture for PortraitPicture<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let sh = self.sh;
        let area = draw_title(root, self.title)?;
        let (field, guide_time) = (&self.field, self.guide_time);
        let path = drawn_path(self.path_r2);
        let entries = self.legend(guide_time, !path.is_empty());
        let (margin, xl, yl) = (px(15), px(60), px(85));
        // Paper: the legend in rows below a centred square disk; otherwise a column beside it.
        let (left, right) = if is_paper() {
            let above = legend_below(&area, &entries)?;
            let (w, h) = above.dim_in_pixel();
            let cw = square_chart_width(h, margin, xl, yl).min(w);
            let x0 = (w - cw) / 2;
            (above.shrink((x0, 0), (cw, h)), None)
        } else {
            let (w, h) = area.dim_in_pixel();
            let cw = square_chart_width(h, margin, xl, yl).min(w.saturating_sub(px(300)));
            let (l, r) = area.split_horizontally(cw);
            (l, Some(r))
        };
        let mut chart = disk_chart(&left, margin, xl, yl)?;
        draw_arrows(&mut chart, sh, field.max_speed)?;
        draw_guides(&mut chart, &self.guides)?;
        draw_nullclines(&mut chart, field)?;
        draw_cycles(&mut chart, self.cycles)?;
        draw_unit_circle(&mut chart)?;
        draw_path(&mut chart, &path)?;
        draw_fixed_points(&mut chart, self.fixed)?;
        if let Some(right) = right {
            draw_legend(&right, (pxi(10), pxi(70)), &entries)?;
        }
        Ok(())
    }
}

impl PortraitPicture<'_> {
    /// The legend: what is always drawn, then what this picture has.
    fn legend(&self, guide_time: f64, has_path: bool) -> Vec<Entry> {
        let mut entries = vec![
            Entry::new(
                Mark::Line(RGBColor(120, 120, 120).to_rgba(), 2, None),
                "direction of R' (darker: faster)",
            ),
            Entry::new(Mark::Line(RE_NULL.to_rgba(), 3, None), "Re R' = 0"),
            Entry::new(Mark::Line(IM_NULL.to_rgba(), 3, None), "Im R' = 0"),
        ];
        if guide_time > 0.0 {
            entries.push(Entry::new(
                Mark::Line(GUIDE.to_rgba(), 2, None),
                format!("OA trajectories (t ≤ {})", super::short(guide_time)),
            ));
        }
        entries.push(Entry::new(
            Mark::Line(BLACK.to_rgba(), 2, None),
            "|R₂| = 1 (two clusters)",
        ));
        for kind in [CycleKind::Stable, CycleKind::Unstable, CycleKind::Neutral] {
            if self.cycles.iter().any(|c| c.kind == kind) {
                let (width, dash) = kind.stroke();
                entries.push(Entry::new(
                    Mark::Line(CYCLE.to_rgba(), width, dash),
                    kind.legend(),
                ));
            }
        }
        if has_path {
            entries.push(Entry::new(
                Mark::Line(PATH.to_rgba(), 3, None),
                "run: R₂(t)",
            ));
            entries.push(Entry::new(Mark::Dot(PATH, false), "run: start"));
            entries.push(Entry::new(Mark::Triangle(PATH), "run: end"));
        }
        let has = |k: FixedKind| self.fixed.iter().any(|f| f.1 == k);
        if has(FixedKind::Stable) {
            entries.push(Entry::new(Mark::Dot(BLACK, true), "stable fixed point"));
        }
        if has(FixedKind::Unstable) {
            entries.push(Entry::new(Mark::Dot(BLACK, false), "unstable fixed point"));
        }
        if has(FixedKind::Centre) {
            entries.push(Entry::new(Mark::Square(CENTRE_COLOR), "centre (neutral)"));
        }
        entries
    }
}

/// R' on the `NULL_GRID x NULL_GRID` grid over [-1, 1]^2 and its largest speed in the disk.
struct FieldGrid {
    re: Vec<f64>,
    im: Vec<f64>,
    max_speed: f64,
}

impl FieldGrid {
    fn of(sh: &SecondHarmonic) -> FieldGrid {
        let m = NULL_GRID;
        let hstep = 2.0 / (m - 1) as f64;
        let mut re = vec![0.0; m * m];
        let mut im = vec![0.0; m * m];
        let mut max_speed: f64 = 0.0;
        for j in 0..m {
            for i in 0..m {
                let r = Complex64::new(-1.0 + i as f64 * hstep, -1.0 + j as f64 * hstep);
                let f = sh.ott_antonsen_rhs(r);
                re[j * m + i] = f.re;
                im[j * m + i] = f.im;
                if r.norm() <= 1.0 && f.norm().is_finite() {
                    max_speed = max_speed.max(f.norm());
                }
            }
        }
        FieldGrid { re, im, max_speed }
    }
}

/// Direction arrows on a 0.1 grid inside the disk, shaded by speed (log scale over the drawn
/// arrows); a resting point is a dot.
fn draw_arrows<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    sh: &SecondHarmonic,
    max_speed: f64,
) -> io::Result<()> {
    let step = 0.1;
    let mut arrows = Vec::new();
    for j in -10..=10 {
        for i in -10..=10 {
            let r = Complex64::new(i as f64 * step, j as f64 * step);
            if r.norm() > 0.965 {
                continue;
            }
            let f = sh.ott_antonsen_rhs(r);
            let s = f.norm();
            if s.is_finite() {
                arrows.push((r, f, s));
            }
        }
    }
    let (lo, hi) = arrows
        .iter()
        .filter(|a| a.2 > 0.0)
        .map(|a| a.2.ln())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    for &(r, f, s) in &arrows {
        let frac = if s > 0.0 && hi > lo {
            (s.ln() - lo) / (hi - lo)
        } else {
            0.5
        };
        let g = (215.0 - 125.0 * frac.clamp(0.0, 1.0)).round() as u8;
        let c = RGBColor(g, g, g);
        if s.is_nan() || s <= 1e-14 * max_speed.max(1e-300) {
            chart
                .draw_series(std::iter::once(Circle::new(
                    (r.re, r.im),
                    px(2),
                    c.filled(),
                )))
                .io()?;
            continue;
        }
        let dir = (f.re / s, f.im / s);
        let len = 0.075;
        let tail = (r.re - 0.5 * len * dir.0, r.im - 0.5 * len * dir.1);
        let tip = (r.re + 0.5 * len * dir.0, r.im + 0.5 * len * dir.1);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![tail, tip],
                c.stroke_width(lw(2)),
            )))
            .io()?;
        chart
            .draw_series(std::iter::once(Polygon::new(
                arrow_head(tip, dir, 0.028),
                c.filled(),
            )))
            .io()?;
    }
    Ok(())
}

/// OA trajectories from eight starts on |R| = 0.5 and eight on |R| = 0.9 (thinned to 800
/// points) up to `guide_time` with steps of at most `dt`.
fn guide_curves(sh: &SecondHarmonic, guide_time: f64, dt: f64) -> Vec<Vec<(f64, f64)>> {
    let mut starts = Vec::new();
    for k in 0..8 {
        starts.push(Complex64::from_polar(0.5, PI / 8.0 + k as f64 * PI / 4.0));
        starts.push(Complex64::from_polar(0.9, k as f64 * PI / 4.0));
    }
    starts
        .into_iter()
        .map(|r0| thin(&guide_curve(sh, r0, guide_time, dt), 800))
        .collect()
}

/// The guide curves, each with a dot at its start and an arrowhead halfway.
fn draw_guides<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    curves: &[Vec<(f64, f64)>],
) -> io::Result<()> {
    for curve in curves {
        if curve.len() < 2 {
            continue;
        }
        chart
            .draw_series(LineSeries::new(
                curve.iter().copied(),
                GUIDE.stroke_width(lw(2)),
            ))
            .io()?;
        chart
            .draw_series(std::iter::once(Circle::new(
                curve[0],
                px(3),
                GUIDE.filled(),
            )))
            .io()?;
        if let Some((at, dir)) = midway(curve) {
            let tip = (at.0 + 0.02 * dir.0, at.1 + 0.02 * dir.1);
            chart
                .draw_series(std::iter::once(Polygon::new(
                    arrow_head(tip, dir, 0.045),
                    GUIDE.filled(),
                )))
                .io()?;
        }
    }
    Ok(())
}

/// The nullclines Re R' = 0 and Im R' = 0.
fn draw_nullclines<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    field: &FieldGrid,
) -> io::Result<()> {
    for (values, color) in [(&field.re, RE_NULL), (&field.im, IM_NULL)] {
        let segs = zero_segments(values, NULL_GRID);
        chart
            .draw_series(
                segs.iter()
                    .map(|s| PathElement::new(vec![s[0], s[1]], color.stroke_width(lw(3)))),
            )
            .io()?;
    }
    Ok(())
}

/// The closed curves given by the caller: stable solid, unstable dashed, neutral thin dotted.
fn draw_cycles<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    cycles: &[CycleCurve],
) -> io::Result<()> {
    for cycle in cycles {
        let mut points: Vec<(f64, f64)> = cycle
            .points
            .iter()
            .filter(|z| z.re.is_finite() && z.im.is_finite())
            .map(|z| (z.re, z.im))
            .collect();
        if points.len() < 2 {
            continue;
        }
        points.push(points[0]);
        let points = thin(&points, MAX_PATH);
        let (width, dash) = cycle.kind.stroke();
        let style = CYCLE.stroke_width(lw(width));
        match dash {
            None => chart
                .draw_series(std::iter::once(PathElement::new(points, style)))
                .io()?,
            Some((d, g)) => chart
                .draw_series(std::iter::once(DashedPathElement::new(
                    points,
                    pxi(d as i32),
                    pxi(g as i32),
                    style,
                )))
                .io()?,
        };
    }
    Ok(())
}

/// The invariant circle |R| = 1.
fn draw_unit_circle<DB: DrawingBackend>(chart: &mut Chart2d<'_, DB>) -> io::Result<()> {
    let circle: Vec<(f64, f64)> = (0..=360)
        .map(|k| {
            let s = 2.0 * PI * k as f64 / 360.0;
            (s.cos(), s.sin())
        })
        .collect();
    chart
        .draw_series(LineSeries::new(circle, BLACK.stroke_width(lw(2))))
        .io()?;
    Ok(())
}

/// The finite points of the run's path, thinned to `MAX_PATH`.
fn drawn_path(path_r2: &[Complex64]) -> Vec<(f64, f64)> {
    let path: Vec<(f64, f64)> = path_r2
        .iter()
        .filter(|z| z.re.is_finite() && z.im.is_finite())
        .map(|z| (z.re, z.im))
        .collect();
    thin(&path, MAX_PATH)
}

/// The run's path with a ring at its start and a triangle at its end.
fn draw_path<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    path: &[(f64, f64)],
) -> io::Result<()> {
    let (Some(&first), Some(&last)) = (path.first(), path.last()) else {
        return Ok(());
    };
    chart
        .draw_series(LineSeries::new(
            path.iter().copied(),
            PATH.stroke_width(lw(3)),
        ))
        .io()?;
    chart
        .draw_series(std::iter::once(Circle::new(
            first,
            px(8),
            PATH.stroke_width(lw(3)),
        )))
        .io()?;
    chart
        .draw_series(std::iter::once(TriangleMarker::new(
            last,
            px(10),
            PATH.filled(),
        )))
        .io()?;
    Ok(())
}

/// Fixed points: stable filled, unstable hollow, a centre a grey square.
fn draw_fixed_points<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    fixed: &[(Complex64, FixedKind)],
) -> io::Result<()> {
    for &(z, kind) in fixed {
        if !(z.re.is_finite() && z.im.is_finite()) {
            continue;
        }
        let p = (z.re, z.im);
        match kind {
            FixedKind::Centre => chart
                .draw_series(std::iter::once(
                    EmptyElement::at(p)
                        + Rectangle::new(
                            [(-pxi(9), -pxi(9)), (pxi(9), pxi(9))],
                            CENTRE_COLOR.filled(),
                        )
                        + Rectangle::new(
                            [(-pxi(9), -pxi(9)), (pxi(9), pxi(9))],
                            BLACK.stroke_width(lw(2)),
                        ),
                ))
                .io()?,
            FixedKind::Stable => chart
                .draw_series(std::iter::once(Circle::new(p, px(9), BLACK.filled())))
                .io()?,
            FixedKind::Unstable => {
                chart
                    .draw_series(std::iter::once(Circle::new(p, px(9), WHITE.filled())))
                    .io()?;
                chart
                    .draw_series(std::iter::once(Circle::new(
                        p,
                        px(9),
                        BLACK.stroke_width(lw(3)),
                    )))
                    .io()?
            }
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Attention, Head, Kernel};
    use nalgebra::DMatrix;

    #[test]
    fn marching_squares_find_a_circle() {
        // f = x^2 + y^2 - 0.25: the zero set is the circle of radius 0.5.
        let m = 101;
        let h = 2.0 / (m - 1) as f64;
        let mut v = vec![0.0; m * m];
        for j in 0..m {
            for i in 0..m {
                let (x, y) = (-1.0 + i as f64 * h, -1.0 + j as f64 * h);
                v[j * m + i] = x * x + y * y - 0.25;
            }
        }
        let segs = zero_segments(&v, m);
        assert!(segs.len() > 50);
        for s in &segs {
            for p in s {
                assert!(((p.0 * p.0 + p.1 * p.1).sqrt() - 0.5).abs() < 2e-3);
            }
        }
        assert!(zero_segments(&[0.0; 4], 1).is_empty());
        assert!(zero_segments(&vec![1.0; m * m], m).is_empty());
    }

    #[test]
    fn guide_curves_follow_the_flow_and_stay_in_the_disk() {
        // A = V = I: R' = (R - |R|^2 R)/2, radial growth to |R| = 1.
        let i2 = DMatrix::identity(2, 2);
        let att = Attention::new(
            Kernel::Lsa,
            1.0,
            vec![Head {
                a: i2.clone(),
                v: i2,
            }],
        );
        let sh = SecondHarmonic::new(&att).unwrap();
        let c = guide_curve(&sh, Complex64::new(0.5, 0.0), 20.0, 0.01);
        let last = c.last().unwrap();
        assert!(last.0 > 0.99 && last.0 <= 1.0 + 1e-9 && last.1.abs() < 1e-12);
        assert_eq!(
            guide_curve(&sh, Complex64::new(0.5, 0.0), 0.0, 0.01).len(),
            1
        );
        assert_eq!(
            guide_curve(&sh, Complex64::new(0.0, 0.0), 5.0, 0.01).len(),
            1
        );
    }
}
