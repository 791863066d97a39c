//! `codim2.png` / `.svg`: the fold and Hopf curves of a two-parameter continuation drawn over
//! the regime map of the same two parameters, with their special points.
//!
//! Folds are solid blue; the Hopf curve is solid red where l1 < 0 (supercritical: a stable
//! cycle is born), dotted red where l1 > 0 (subcritical); neutral saddles (tr J = 0, det J < 0,
//! no bifurcation of the fixed point's stability type) are dashed grey. Bogdanov–Takens (BT),
//! cusp (CP) and generalised Hopf (GH) points are labelled diamond outlines.

use std::io;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::{desc_size, diamond, lw, pxi, text_at, Chart2d, Entry, Mark, OrIo, Stroke};

/// How a piece of curve is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurveStyle {
    /// det J = 0.
    Fold,
    /// tr J = 0, det J > 0, l1 < 0 (or unknown).
    HopfSupercritical,
    /// tr J = 0, det J > 0, l1 > 0.
    HopfSubcritical,
    /// tr J = 0, det J < 0.
    NeutralSaddle,
}

/// The curves and special points drawn over the map.
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    /// Polylines in (x axis, y axis) coordinates with their style.
    pub curves: Vec<(Vec<(f64, f64)>, CurveStyle)>,
    /// Special points (x, y, name).
    pub points: Vec<(f64, f64, String)>,
}

const FOLD: RGBColor = RGBColor(20, 60, 200);
const HOPF: RGBColor = RGBColor(210, 20, 40);
const NEUTRAL: RGBColor = RGBColor(110, 110, 110);

impl Overlay {
    /// The extent of the drawn curves.
    pub(crate) fn coordinates(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.curves
            .iter()
            .flat_map(|c| c.0.iter().copied())
            .chain(self.points.iter().map(|p| (p.0, p.1)))
    }

    /// Legend entries of the styles present.
    pub(crate) fn legend(&self) -> Vec<Entry> {
        let has = |s: CurveStyle| self.curves.iter().any(|c| c.1 == s);
        let mut out = Vec::new();
        if has(CurveStyle::Fold) {
            out.push(Entry::new(Mark::Line(FOLD.to_rgba(), 3, None), "fold (LP)"));
        }
        if has(CurveStyle::HopfSupercritical) {
            out.push(Entry::new(
                Mark::Line(HOPF.to_rgba(), 3, None),
                "Hopf, supercritical (l1 < 0)",
            ));
        }
        if has(CurveStyle::HopfSubcritical) {
            out.push(Entry::new(
                Mark::Line(HOPF.to_rgba(), 3, Some((3, 5))),
                "Hopf, subcritical (l1 > 0)",
            ));
        }
        if has(CurveStyle::NeutralSaddle) {
            out.push(Entry::new(
                Mark::Line(NEUTRAL.to_rgba(), 2, Some((10, 7))),
                "neutral saddle",
            ));
        }
        if !self.points.is_empty() {
            out.push(Entry::new(
                Mark::DiamondOutline(BLACK),
                "BT Bogdanov-Takens, CP cusp, GH gen. Hopf",
            ));
        }
        out
    }

    /// Draws the curves (with a white halo) and the special points.
    pub(crate) fn draw<DB: DrawingBackend>(&self, chart: &mut Chart2d<'_, DB>) -> io::Result<()> {
        for (line, style) in &self.curves {
            let pts: Vec<(f64, f64)> = line
                .iter()
                .copied()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), WHITE.stroke_width(lw(6))))
                .io()?;
            let (color, stroke) = match style {
                CurveStyle::Fold => (FOLD, Stroke::Solid(3)),
                CurveStyle::HopfSupercritical => (HOPF, Stroke::Solid(3)),
                CurveStyle::HopfSubcritical => (
                    HOPF,
                    Stroke::Dashed {
                        dash: 3,
                        gap: 5,
                        width: 3,
                    },
                ),
                CurveStyle::NeutralSaddle => (NEUTRAL, super::LONG_DASHES),
            };
            super::draw_stroke(chart, pts, color, stroke)?;
        }
        let label_style = text_at(desc_size(), BLACK, HPos::Left, VPos::Bottom);
        for (x, y, name) in &self.points {
            if !(x.is_finite() && y.is_finite()) {
                continue;
            }
            let mut outline = diamond((0, 0), pxi(13));
            outline.push(outline[0]);
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((*x, *y))
                        + PathElement::new(outline, BLACK.stroke_width(lw(2)))
                        + Text::new(name.clone(), (pxi(12), -pxi(12)), label_style.clone()),
                ))
                .io()?;
        }
        Ok(())
    }
}
