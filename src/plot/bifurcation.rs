//! `bifurcation.png` / `bifurcation.svg`: a one-axis sweep as a bifurcation diagram.
//!
//! Each sweep point is a bar from the tail minimum to the tail maximum of |R2| (a dot when they
//! agree), in the colour of its label; failed points are crosses on the bottom edge. Branches of
//! fixed points are drawn underneath (stable solid, unstable dashed, centres — both eigenvalues
//! on the imaginary axis — as a grey dotted "centre (neutral)" line) and special points (fold
//! "LP", Hopf "H", ...) as labelled diamond outlines beneath the sweep points, so no grid point
//! is hidden. Continued periodic orbits (`[continuation] cycles = true`) are two blue curves
//! per branch, their min and max |R2| (stable solid, unstable dashed), with their special
//! points (LPC, HC, SNIC) among the others. The title states the fixed parameters and the
//! start (the caller writes it).

use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

pub use super::portrait::FixedKind;

/// A branch's polyline split where its kind (stability) changes: each new piece starts at the
/// last point of the one before, so the drawn branch has no gap.
pub fn pieces_by_kind(
    points: impl IntoIterator<Item = ((f64, f64), FixedKind)>,
) -> Vec<(Vec<(f64, f64)>, FixedKind)> {
    let mut pieces: Vec<(Vec<(f64, f64)>, FixedKind)> = Vec::new();
    for (xy, kind) in points {
        match pieces.last_mut() {
            Some((line, k)) if *k == kind => line.push(xy),
            Some((line, _)) => {
                let last = *line.last().unwrap_or(&xy);
                pieces.push((vec![last, xy], kind));
            }
            None => pieces.push((vec![xy], kind)),
        }
    }
    pieces
}
use super::portrait::CENTRE_COLOR;
use super::{
    desc_size, diamond, draw_legend, draw_title, finite_range, label_color, label_name, padded,
    text_at, tick, Chart2d, Entry, Figure, Mark, OrIo, Picture, LABELS,
};
use super::{draw_stroke, is_paper, legend_below, lw, px, pxi, Stroke, LONG_DASHES};
use crate::classify::Label;

/// Width and height of `bifurcation.png`.
pub const BIFURCATION_SIZE: (u32, u32) = (1400, 1250);

const BRANCH: RGBColor = RGBColor(30, 30, 30);
const CYCLE: RGBColor = RGBColor(20, 90, 200);
/// The short dashes of centres.
const DOTS: Stroke = Stroke::Dashed {
    dash: 3,
    gap: 5,
    width: 4,
};

/// One drawn curve of a cycle branch: `(parameter, min or max |R2|)` and whether its cycles
/// are stable.
pub type CycleLine = (Vec<(f64, f64)>, bool);

/// Writes `bifurcation.png` and `bifurcation.svg` into `dir`: a [`Bifurcation`] of OA fixed
/// points without cycles.
pub fn bifurcation_plot(
    p_name: &str,
    points: &[(f64, f64, f64, Option<Label>)],
    branches: &[(Vec<(f64, f64)>, FixedKind)],
    special: &[(f64, f64, String)],
    title: &str,
    figure: Figure,
    dir: &Path,
) -> io::Result<()> {
    let diagram = Bifurcation {
        p_name,
        points,
        branches,
        cycles: &[],
        special,
        title,
        densities: false,
    };
    diagram.write(figure, dir)
}

/// What `bifurcation.png` shows.
pub struct Bifurcation<'a> {
    /// The parameter's name (the horizontal axis).
    pub p_name: &'a str,
    /// The sweep's points: `(parameter, tail min |R2|, tail max |R2|, label)`, `None` = failed
    /// run (its numbers are ignored).
    pub points: &'a [(f64, f64, f64, Option<Label>)],
    /// Polylines `(parameter, |R|)` of fixed points and their kind.
    pub branches: &'a [(Vec<(f64, f64)>, FixedKind)],
    /// The min / max |R2| curves of continued cycles.
    pub cycles: &'a [CycleLine],
    /// Special points `(parameter, |R|, name)`, e.g. `"LP"`, `"H"`.
    pub special: &'a [(f64, f64, String)],
    /// The title.
    pub title: &'a str,
    /// Branches of stationary densities of the mean field (`|R1| = <cos theta>` on the vertical
    /// axis, special points BP and LP) instead of OA fixed points.
    pub densities: bool,
}

impl Picture for Bifurcation<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, self.title)?;
        let (w, _) = area.dim_in_pixel();
        let entries = self.legend(count_labels(self.points));
        // Paper: the legend in rows below the chart; otherwise a column on the right.
        let (left, right) = if is_paper() {
            (legend_below(&area, &entries)?, None)
        } else {
            let (l, r) = area.split_horizontally(w.saturating_sub(px(340)));
            (l, Some(r))
        };
        let (xr, yr) = self.ranges();
        let (margin, xl, yl) = (px(15), px(65), px(95));
        let mut chart = ChartBuilder::on(&left)
            .margin(margin)
            .margin_right(px(25))
            .x_label_area_size(xl)
            .y_label_area_size(yl)
            .build_cartesian_2d(xr.0..xr.1, yr.0..yr.1)
            .io()?;
        let mut mesh = super::axes(&mut chart);
        super::grid(&mut mesh, 228, 246);
        mesh.max_light_lines(4)
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .x_desc(self.p_name)
            .y_desc(if self.densities {
                "|R₁| = <cos θ>"
            } else if is_paper() {
                "|R₂| (tail range)"
            } else {
                "|R₂|  (tail min – max)"
            })
            .draw()
            .io()?;
        // Branches underneath, special points as outlines beneath the sweep points.
        draw_branches(&mut chart, self.branches)?;
        draw_cycles(&mut chart, self.cycles)?;
        draw_special(&mut chart, self.special)?;
        draw_points(&mut chart, self.points, yr.0 + 0.02 * (yr.1 - yr.0))?;
        let Some(right) = right else {
            return Ok(());
        };
        let top = pxi(70);
        draw_legend(&right, (pxi(10), top), &entries)?;
        let (_, lh) = super::legend_size(&right, &entries);
        let note = text_at(
            super::LEGEND_SIZE,
            RGBColor(90, 90, 90),
            HPos::Left,
            VPos::Top,
        );
        if !self.points.is_empty() {
            right
                .draw_text(
                    "bars: tail min to max of |R₂|",
                    &note,
                    (pxi(12), top + lh + pxi(14)),
                )
                .io()?;
        }
        Ok(())
    }
}

impl Bifurcation<'_> {
    /// Writes `bifurcation.png` and `bifurcation.svg` into `dir`.
    pub fn write(&self, figure: Figure, dir: &Path) -> io::Result<()> {
        super::render(
            self,
            dir,
            "bifurcation",
            figure.size(BIFURCATION_SIZE),
            figure,
        )
        .map(|_| ())
    }

    /// The padded ranges of the parameter and of |R2| (always showing [0, 1]).
    fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let xs = self
            .points
            .iter()
            .map(|p| p.0)
            .chain(self.branches.iter().flat_map(|b| b.0.iter().map(|q| q.0)))
            .chain(self.cycles.iter().flat_map(|b| b.0.iter().map(|q| q.0)))
            .chain(self.special.iter().map(|s| s.0));
        let ys = self
            .points
            .iter()
            .filter(|p| p.3.is_some())
            .flat_map(|p| [p.1, p.2])
            .chain(self.branches.iter().flat_map(|b| b.0.iter().map(|q| q.1)))
            .chain(self.cycles.iter().flat_map(|b| b.0.iter().map(|q| q.1)))
            .chain(self.special.iter().map(|s| s.1))
            .chain([0.0, 1.0]);
        (
            padded(finite_range(xs), 0.03),
            padded(finite_range(ys), 0.04),
        )
    }

    /// The legend: the labels present with their counts, then the branch kinds and special
    /// points present.
    fn legend(&self, counts: [usize; LABELS.len()]) -> Vec<Entry> {
        let mut entries: Vec<Entry> = LABELS
            .iter()
            .zip(counts)
            .filter(|(_, c)| *c > 0)
            .map(|(l, c)| {
                let mark = if l.is_some() {
                    Mark::Dot(label_color(*l), true)
                } else {
                    Mark::Cross(label_color(*l))
                };
                Entry::new(mark, format!("{} ({c})", label_name(*l)))
            })
            .collect();
        let has = |k: FixedKind| self.branches.iter().any(|b| b.1 == k);
        let what = if self.densities {
            "stationary densities"
        } else {
            "fixed points"
        };
        if has(FixedKind::Stable) {
            entries.push(Entry::new(
                Mark::Line(BRANCH.to_rgba(), 3, None),
                format!("stable {what}"),
            ));
        }
        if has(FixedKind::Unstable) {
            entries.push(Entry::new(
                Mark::Line(BRANCH.to_rgba(), 2, Some((10, 7))),
                format!("unstable {what}"),
            ));
        }
        if has(FixedKind::Centre) {
            entries.push(Entry::new(
                Mark::Line(CENTRE_COLOR.to_rgba(), 4, Some((3, 5))),
                "centre (neutral)",
            ));
        }
        if self.cycles.iter().any(|c| c.1) {
            entries.push(Entry::new(
                Mark::Line(CYCLE.to_rgba(), 3, None),
                "stable cycles (min, max)",
            ));
        }
        if self.cycles.iter().any(|c| !c.1) {
            entries.push(Entry::new(
                Mark::Line(CYCLE.to_rgba(), 2, Some((10, 7))),
                "unstable cycles (min, max)",
            ));
        }
        if !self.special.is_empty() {
            let text = if self.densities {
                "BP branch point, LP fold"
            } else if self.cycles.is_empty() {
                "LP fold, H Hopf"
            } else {
                "LP fold, H Hopf, LPC/HC/SNIC"
            };
            entries.push(Entry::new(Mark::DiamondOutline(BLACK), text));
        }
        entries
    }
}

/// Branches of fixed points: stable solid, unstable dashed, centres grey dotted.
fn draw_branches<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    branches: &[(Vec<(f64, f64)>, FixedKind)],
) -> io::Result<()> {
    for (line, kind) in branches {
        let (color, stroke) = match kind {
            FixedKind::Stable => (BRANCH, Stroke::Solid(3)),
            FixedKind::Centre => (CENTRE_COLOR, DOTS),
            FixedKind::Unstable => (BRANCH, LONG_DASHES),
        };
        draw_stroke(chart, drawable(line), color, stroke)?;
    }
    Ok(())
}

/// The cycles' min / max |R2| curves: stable solid, unstable dashed.
fn draw_cycles<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    cycles: &[CycleLine],
) -> io::Result<()> {
    for (line, stable) in cycles {
        let stroke = if *stable {
            Stroke::Solid(3)
        } else {
            LONG_DASHES
        };
        draw_stroke(chart, drawable(line), CYCLE, stroke)?;
    }
    Ok(())
}

/// The finite points of a curve, moved onto the axes' reach.
fn drawable(line: &[(f64, f64)]) -> Vec<(f64, f64)> {
    line.iter()
        .copied()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .map(|(x, y)| (super::on_axis(x), super::on_axis(y)))
        .collect()
}

/// Special points (fold, Hopf) as diamond outlines with their names.
fn draw_special<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    special: &[(f64, f64, String)],
) -> io::Result<()> {
    let label_style = text_at(desc_size(), BLACK, HPos::Left, VPos::Bottom);
    for (p, r, name) in special {
        if !(p.is_finite() && r.is_finite()) {
            continue;
        }
        let (p, r) = (&super::on_axis(*p), &super::on_axis(*r));
        let mut outline = diamond((0, 0), pxi(13));
        outline.push(outline[0]);
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((*p, *r))
                    + PathElement::new(outline, BLACK.stroke_width(lw(2)))
                    + Text::new(name.clone(), (pxi(12), -pxi(12)), label_style.clone()),
            ))
            .io()?;
    }
    Ok(())
}

/// How many points each label has (`LABELS` order); points with a non-finite parameter are
/// not drawn and not counted.
fn count_labels(points: &[(f64, f64, f64, Option<Label>)]) -> [usize; LABELS.len()] {
    let mut counts = [0usize; LABELS.len()];
    for &(p, _, _, label) in points {
        if let Some(k) = LABELS
            .iter()
            .position(|l| *l == label)
            .filter(|_| p.is_finite())
        {
            counts[k] += 1;
        }
    }
    counts
}

/// The sweep points as bars from the tail's min to max of |R2| in their label's colour (a
/// failed run a cross at `failed_y`).
fn draw_points<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    points: &[(f64, f64, f64, Option<Label>)],
    failed_y: f64,
) -> io::Result<()> {
    let (pw, _) = chart.plotting_area().dim_in_pixel();
    let radius = px(if points.len() as u32 * px(8) > pw {
        3
    } else {
        5
    });
    for &(p, lo, hi, label) in points {
        if !p.is_finite() {
            continue;
        }
        let p = super::on_axis(p);
        let c = label_color(label);
        if label.is_none() || !lo.is_finite() || !hi.is_finite() {
            chart
                .draw_series(std::iter::once(Cross::new(
                    (p, failed_y),
                    px(6),
                    c.stroke_width(lw(2)),
                )))
                .io()?;
            continue;
        }
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(p, lo), (p, hi)],
                c.stroke_width(lw(2)),
            )))
            .io()?;
        for y in [lo, hi] {
            chart
                .draw_series(std::iter::once(Circle::new((p, y), radius, c.filled())))
                .io()?;
        }
    }
    Ok(())
}
