//! `ensemble.png` / `.svg` / `.pdf`: an ensemble's label shares and its mean order parameters
//! (docs/MATH.md, "Ensembles").
//!
//! Left: one bar per label that occurred, its share, with the Wilson 95% interval as a
//! whisker. Right: the mean over the runs of |R1| and of s against time, each with a band of
//! one standard deviation.

use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::order::{R2_COLOR, S_COLOR};
use super::{draw_title, label_color, lw, tick, Entry, Figure, Mark, OrIo, Picture};
use crate::classify::Label;

/// Width and height of `ensemble.png` (paper).
pub const ENSEMBLE_SIZE: (u32, u32) = (1300, 700);

/// What `ensemble.png` shows (read from an ensemble's result).
#[derive(Debug, Clone)]
pub struct EnsembleView {
    /// The title.
    pub title: String,
    /// (label word, share, low, high) per label that occurred.
    pub shares: Vec<(String, f64, f64, f64)>,
    /// Sample times.
    pub t: Vec<f64>,
    /// Mean and sd of |R1| at each sample (none without R1).
    pub r1: Option<(Vec<f64>, Vec<f64>)>,
    /// Mean and sd of s at each sample.
    pub nematic: (Vec<f64>, Vec<f64>),
}

/// Writes `ensemble.png`, `.svg` and `.pdf` into `dir`.
pub fn ensemble_plot(view: &EnsembleView, figure: Figure, dir: &Path) -> io::Result<()> {
    super::render(view, dir, "ensemble", figure.size(ENSEMBLE_SIZE), figure).map(|_| ())
}

impl Picture for EnsembleView {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, &self.title)?;
        // The legend of the means below both panels, so that their axes stay level.
        let entries: Vec<Entry> = self
            .curves()
            .iter()
            .filter(|c| c.0.is_some())
            .map(|&(_, color, name)| Entry::new(Mark::Line(color.to_rgba(), 2, None), name))
            .collect();
        let area = super::legend_below(&area, &entries)?;
        let (w, _) = area.dim_in_pixel();
        let (left, right) = area.split_horizontally(w * 2 / 5);
        self.draw_shares(&left)?;
        self.draw_means(&right)
    }
}

/// A curve of the means: (mean and sd at each sample, colour, legend name).
type MeanCurve<'a> = (Option<&'a (Vec<f64>, Vec<f64>)>, RGBColor, &'static str);

impl EnsembleView {
    /// The curves of the means (|R1| absent without R1).
    fn curves(&self) -> [MeanCurve<'_>; 2] {
        [
            (Some(&self.nematic), S_COLOR, "s"),
            (self.r1.as_ref(), R2_COLOR, "|R1|"),
        ]
    }

    /// Bars of the shares with their Wilson intervals.
    fn draw_shares<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let k = self.shares.len().max(1) as f64;
        let mut chart = super::value_chart(area, -0.5..k - 0.5, 0.0..1.0)?;
        let names: Vec<String> = self.shares.iter().map(|s| s.0.clone()).collect();
        super::time_mesh(&mut chart)
            .disable_x_mesh()
            .max_light_lines(0)
            .x_labels(self.shares.len().max(1))
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&tick)
            .y_desc("share of runs, 95% CI")
            .draw()
            .io()?;
        for (i, (word, share, low, high)) in self.shares.iter().enumerate() {
            let x = i as f64;
            let color = label_color(Label::from_word(word));
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x - 0.35, 0.0), (x + 0.35, *share)],
                    color.filled(),
                )))
                .io()?;
            let whisker = BLACK.stroke_width(lw(2));
            chart
                .draw_series([
                    PathElement::new(vec![(x, *low), (x, *high)], whisker),
                    PathElement::new(vec![(x - 0.1, *low), (x + 0.1, *low)], whisker),
                    PathElement::new(vec![(x - 0.1, *high), (x + 0.1, *high)], whisker),
                ])
                .io()?;
        }
        Ok(())
    }

    /// The mean |R1| and s with one-sd bands.
    fn draw_means<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let t0 = self.t.first().copied().unwrap_or(0.0);
        let t1 = self.t.last().copied().unwrap_or(1.0).max(t0 + 1e-12);
        let mut chart = super::value_chart(area, t0..t1, 0.0..1.05)?;
        super::time_mesh(&mut chart)
            .max_light_lines(4)
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .x_desc("t")
            .y_desc("mean ± sd over runs")
            .draw()
            .io()?;
        for (curve, color, _) in self.curves() {
            let Some((mean, sd)) = curve else { continue };
            let upper = self
                .t
                .iter()
                .zip(mean.iter().zip(sd))
                .map(|(t, (m, s))| (*t, m + s));
            let lower = self
                .t
                .iter()
                .zip(mean.iter().zip(sd))
                .map(|(t, (m, s))| (*t, m - s));
            let band: Vec<(f64, f64)> = upper.chain(lower.rev()).collect();
            chart
                .draw_series(std::iter::once(Polygon::new(band, color.mix(0.2).filled())))
                .io()?;
            chart
                .draw_series(LineSeries::new(
                    self.t.iter().copied().zip(mean.iter().copied()),
                    color.stroke_width(lw(2)),
                ))
                .io()?;
        }
        Ok(())
    }
}
