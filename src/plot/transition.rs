//! `transition.png` / `.svg` / `.pdf`: the mean order parameters of a sweep over the noise
//! temperature (docs/MATH.md §14), read from the sweep's results.
//!
//! The mean |R1| over each point's runs against T with one-sd bars (filled dots on the way
//! out, open dots on the way back), the mean s lighter; where the sweep goes back, the area
//! between the two legs' |R1| is shaded (the hysteresis loop); the mean-field ordered branch
//! as a black line and its critical temperature T_c as a dashed vertical line.

use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::order::{R2_COLOR, S_COLOR};
use super::{draw_title, lw, px, tick, Entry, Figure, Mark, OrIo, Picture};
use crate::classify::Label;
use crate::model::Kernel;

/// Width and height of `transition.png`.
pub const TRANSITION_SIZE: (u32, u32) = (1200, 800);

/// Colour of the return leg.
const BACK_COLOR: RGBColor = RGBColor(213, 94, 0);

/// One point of the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionPoint {
    /// The temperature.
    pub temperature: f64,
    /// On the way back.
    pub back: bool,
    /// Its label (none for a failed point).
    pub label: Option<Label>,
    /// The share of its runs with that label (ensembles).
    pub label_share: Option<f64>,
    /// Mean and sd of |R1| over its runs.
    pub r1: Option<(f64, f64)>,
    /// Mean and sd of s over its runs.
    pub nematic: Option<(f64, f64)>,
}

/// What `transition.png` shows.
#[derive(Debug, Clone)]
pub struct TransitionView {
    /// The title.
    pub title: String,
    /// The sweep's points in sweep order.
    pub points: Vec<TransitionPoint>,
    /// The mean-field ordered branch (T, |R1|), empty when the mean field does not hold.
    pub curve: Vec<(f64, f64)>,
    /// T_c and the kernel it is of.
    pub critical: Option<(f64, Kernel)>,
}

/// Writes `transition.png`, `.svg` and `.pdf` into `dir`.
pub fn transition_plot(view: &TransitionView, figure: Figure, dir: &Path) -> io::Result<()> {
    super::render(
        view,
        dir,
        "transition",
        figure.size(TRANSITION_SIZE),
        figure,
    )
    .map(|_| ())
}

impl TransitionView {
    /// The (T, mean) of one leg's points for one order parameter.
    fn leg(&self, back: bool, r1: bool) -> Vec<(f64, f64, f64)> {
        self.points
            .iter()
            .filter(|p| p.back == back)
            .filter_map(|p| {
                let v = if r1 { p.r1 } else { p.nematic };
                v.map(|(m, s)| (p.temperature, m, s))
            })
            .collect()
    }

    /// The hysteresis loop: the out leg's |R1| then the back leg's, as one polygon.
    fn loop_polygon(&self) -> Vec<(f64, f64)> {
        let back = self.leg(true, true);
        if back.is_empty() {
            return Vec::new();
        }
        let out = self.leg(false, true);
        out.iter().chain(&back).map(|&(t, m, _)| (t, m)).collect()
    }
}

impl Picture for TransitionView {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, &self.title)?;
        let ts = self.points.iter().map(|p| p.temperature);
        let (lo, hi) = super::padded(super::finite_range(ts), 0.03);
        let critical = self.critical.filter(|(tc, _)| (lo..=hi).contains(tc));
        let area = super::legend_below(&area, &self.legend(critical))?;
        let mut chart = super::value_chart(&area, lo..hi, 0.0..1.05)?;
        super::time_mesh(&mut chart)
            .max_light_lines(4)
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .x_desc("noise temperature T")
            .y_desc("|R1|, s (mean ± sd)")
            .draw()
            .io()?;
        let polygon = self.loop_polygon();
        if !polygon.is_empty() {
            chart
                .draw_series(std::iter::once(Polygon::new(
                    polygon,
                    BACK_COLOR.mix(0.15).filled(),
                )))
                .io()?;
        }
        if !self.curve.is_empty() {
            chart
                .draw_series(LineSeries::new(
                    self.curve.iter().copied(),
                    BLACK.stroke_width(lw(2)),
                ))
                .io()?;
        }
        if let Some((tc, _)) = critical {
            let dashes = (0..20).map(|k| {
                let y0 = k as f64 * 1.05 / 20.0;
                PathElement::new(vec![(tc, y0), (tc, y0 + 0.03)], BLACK.stroke_width(lw(2)))
            });
            chart.draw_series(dashes).io()?;
        }
        for (r1, back, color) in self.legs() {
            draw_leg(&mut chart, &self.leg(back, r1), color, back)?;
        }
        Ok(())
    }
}

impl TransitionView {
    /// The legs drawn: (|R1| or s, back, colour), those with points only.
    fn legs(&self) -> Vec<(bool, bool, RGBColor)> {
        let mut legs = Vec::new();
        for (r1, color) in [(false, S_COLOR), (true, R2_COLOR)] {
            for back in [false, true] {
                if self.leg(back, r1).is_empty() {
                    continue;
                }
                let c = if back && r1 { BACK_COLOR } else { color };
                legs.push((r1, back, if r1 { c } else { lighter(c) }));
            }
        }
        legs
    }

    /// The legend entries of what is drawn.
    fn legend(&self, critical: Option<(f64, Kernel)>) -> Vec<Entry> {
        let mut entries = Vec::new();
        if !self.loop_polygon().is_empty() {
            let fill = BACK_COLOR.mix(0.15);
            let c = RGBColor(fill.0, fill.1, fill.2);
            entries.push(Entry::new(
                Mark::Square(lighter(lighter(c))),
                "hysteresis loop",
            ));
        }
        if !self.curve.is_empty() {
            entries.push(Entry::new(
                Mark::Line(BLACK.to_rgba(), 2, None),
                "mean field (n -> inf)",
            ));
        }
        if let Some((tc, kernel)) = critical {
            let name = match kernel {
                Kernel::Sa => "T_c = I1(beta) / (beta I0(beta))",
                _ => "T_c = I1(beta) / beta",
            };
            entries.push(Entry::new(
                Mark::Line(BLACK.to_rgba(), 2, Some((6, 6))),
                format!("{name} = {}", super::short_number(tc)),
            ));
        }
        for (r1, back, color) in self.legs() {
            let name = if r1 { "|R1|" } else { "s" };
            let text = format!("{name}{}", if back { ", back" } else { "" });
            entries.push(Entry::new(Mark::Dot(color, !back), text));
        }
        entries
    }
}

/// `c` halfway to white.
fn lighter(c: RGBColor) -> RGBColor {
    let half = |v: u8| ((u16::from(v) + 255) / 2) as u8;
    RGBColor(half(c.0), half(c.1), half(c.2))
}

/// One leg: line, one-sd bars, dots (open on the way back).
fn draw_leg<DB: DrawingBackend>(
    chart: &mut super::Chart2d<'_, DB>,
    leg: &[(f64, f64, f64)],
    color: RGBColor,
    back: bool,
) -> io::Result<()> {
    let bars = leg.iter().map(|&(t, m, s)| {
        PathElement::new(vec![(t, m - s), (t, m + s)], color.stroke_width(lw(1)))
    });
    chart.draw_series(bars).io()?;
    chart
        .draw_series(LineSeries::new(
            leg.iter().map(|&(t, m, _)| (t, m)),
            color.stroke_width(lw(2)),
        ))
        .io()?;
    let style = if back {
        color.stroke_width(lw(2))
    } else {
        color.filled()
    };
    chart
        .draw_series(
            leg.iter()
                .map(|&(t, m, _)| Circle::new((t, m), px(5), style)),
        )
        .io()?;
    Ok(())
}
