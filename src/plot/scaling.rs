//! `scaling.png` / `scaling.svg`: the time of one field evaluation against the number of
//! tokens, on log-log axes (the picture of `cargo bench --bench scaling`).
//!
//! One coloured line with markers per series (e.g. one per kernel and dimension), its fitted
//! log-log slope in the legend, and dashed grey reference lines of slope 1 and 2 (O(n) and
//! O(n^2) cost). A reference line is drawn parallel to, and half a decade below, the series
//! whose slope is closest to it (within 0.5), so a series that follows it reads at a glance;
//! when no series is that close it starts at the lowest point of the smallest n. The legend
//! goes into the corner of the plot that covers the fewest curve points.
//!
//! The slope is fitted by [`loglog_slope`], which the bench uses too.

use std::io;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::Frame;
use super::{
    desc_size, draw_legend, draw_no_data, draw_title, finite_range, legend_size, short, text,
    Chart2d, Entry, Mark, OrIo, Picture, TICK_SIZE,
};
use super::{legend_below, lw, px, pxi};

/// Width and height of `scaling.png`.
pub const SCALING_SIZE: (u32, u32) = (1200, 900);

/// Up to this many measured series the legend goes inside the chart, in its emptiest corner.
const LEGEND_INSIDE_MAX: usize = 6;

/// Colours of the series, in order (Okabe–Ito, then darker tones; they repeat after eight).
const SERIES_COLORS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(25, 25, 25),
    RGBColor(140, 90, 40),
];

/// Colour of the reference lines of slope 1 and 2.
const REFERENCE_COLORS: [RGBColor; 2] = [RGBColor(150, 150, 150), RGBColor(90, 90, 90)];

/// How far (in decades) a reference line sits below the series it is drawn beside.
const REFERENCE_OFFSET: f64 = 0.5;

/// One measured series: seconds per evaluation at each n, and the fitted log-log slope.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingSeries {
    /// Legend text before the slope, e.g. `usa d=2`.
    pub label: String,
    /// Numbers of tokens.
    pub n: Vec<f64>,
    /// Seconds per evaluation at each n (non-finite or non-positive values are not drawn).
    pub seconds: Vec<f64>,
    /// The fitted slope of log(seconds) against log(n) (`NaN`: not fitted, shown as `n/a`).
    pub slope: f64,
}

impl ScalingSeries {
    /// The legend text: the label and the slope to 2 decimals.
    pub fn legend(&self) -> String {
        if self.slope.is_finite() {
            format!("{} (slope {:.2})", self.label, self.slope)
        } else {
            format!("{} (slope n/a)", self.label)
        }
    }

    /// The drawable points as (log10 n, log10 seconds).
    fn log_points(&self) -> Vec<(f64, f64)> {
        self.n
            .iter()
            .zip(&self.seconds)
            .filter(|(n, t)| n.is_finite() && t.is_finite() && **n > 0.0 && **t > 0.0)
            .map(|(n, t)| (n.log10(), t.log10()))
            .collect()
    }
}

/// The least-squares slope of log(t) against log(n) over the pairs where both are finite and
/// positive; `NaN` when fewer than two distinct n remain.
///
/// The logarithms are taken in base 2, so data t = c n^p with n and c powers of two give p
/// exactly.
///
/// ```
/// use tokdyn::plot::loglog_slope;
/// let n = [1e3, 1e4, 1e5];
/// let t: Vec<f64> = n.iter().map(|n| 3e-9 * n * n).collect();
/// assert!((loglog_slope(&n, &t) - 2.0).abs() < 1e-12);
/// assert!(loglog_slope(&[1e3], &[1.0]).is_nan());
/// ```
pub fn loglog_slope(n: &[f64], t: &[f64]) -> f64 {
    let pts: Vec<(f64, f64)> = n
        .iter()
        .zip(t)
        .filter(|(n, t)| n.is_finite() && t.is_finite() && **n > 0.0 && **t > 0.0)
        .map(|(n, t)| (n.log2(), t.log2()))
        .collect();
    if pts.len() < 2 {
        return f64::NAN;
    }
    let m = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / m;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / m;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return f64::NAN;
    }
    sxy / sxx
}

/// Writes `scaling.png`, `scaling.svg` and `scaling.pdf` into `dir` and returns their paths.
///
/// `title` may hold several lines (`\n`), the first drawn large. Series without a drawable
/// point still get their legend entry; no series at all gives a picture saying "no data".
///
/// ```
/// use tokdyn::plot::{loglog_slope, scaling_plot, ScalingSeries};
/// let n = vec![1e3, 1e4, 1e5];
/// let seconds: Vec<f64> = n.iter().map(|n| 2e-9 * n * n).collect();
/// let slope = loglog_slope(&n, &seconds);
/// let series = [ScalingSeries { label: "usa d=2".into(), n, seconds, slope }];
/// let dir = tempfile::tempdir().unwrap();
/// let files = scaling_plot(dir.path(), &series, "Time per field evaluation").unwrap();
/// assert!(files[0].ends_with("scaling.png") && files[1].ends_with("scaling.svg"));
/// ```
pub fn scaling_plot(dir: &Path, series: &[ScalingSeries], title: &str) -> io::Result<Vec<PathBuf>> {
    super::render(
        &ScalingPicture { series, title },
        dir,
        "scaling",
        SCALING_SIZE,
        super::Figure::Slide,
    )
}

struct ScalingPicture<'a> {
    series: &'a [ScalingSeries],
    title: &'a str,
}

/// Superscript digits for axis labels 10^k.
fn superscript(k: i64) -> String {
    const DIGITS: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    let mut s = String::new();
    if k < 0 {
        s.push('⁻');
    }
    for c in k.unsigned_abs().to_string().chars() {
        s.push(DIGITS[c.to_digit(10).unwrap_or(0) as usize]);
    }
    s
}

/// The label of a tick at log10 value `v`: `10^k` at whole decades, nothing in between.
fn decade_label(v: &f64) -> String {
    let k = v.round();
    if (v - k).abs() < 1e-9 {
        format!("10{}", superscript(k as i64))
    } else {
        String::new()
    }
}

/// A log10 range that covers `range` padded by 4% of its span (at least a quarter decade on
/// each side), or `default` when there is none.
fn log_range(range: Option<(f64, f64)>, default: (f64, f64)) -> (f64, f64) {
    match range {
        None => default,
        Some((lo, hi)) => {
            let pad = (0.04 * (hi - lo)).max(0.25);
            (lo - pad, hi + pad)
        }
    }
}

/// The part inside the box [x0, x1] x [y0, y1] of the line of slope `k` through `(xa, ya)`.
fn clip_line(
    k: f64,
    (xa, ya): (f64, f64),
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> Option<[(f64, f64); 2]> {
    let xs = x0.max(xa + (y0 - ya) / k);
    let xe = x1.min(xa + (y1 - ya) / k);
    (xs < xe).then_some([(xs, ya + k * (xs - xa)), (xe, ya + k * (xe - xa))])
}

impl Picture for ScalingPicture<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, self.title)?;
        // Many series: the legend in rows below the chart (inside it would cover the lines).
        let below = self.series.len() > LEGEND_INSIDE_MAX;
        let area = if below {
            let mut entries: Vec<Entry> = self
                .series
                .iter()
                .enumerate()
                .map(|(i, s)| series_entry(i, s))
                .collect();
            entries.extend([reference_entry(0, 1.0), reference_entry(1, 2.0)]);
            legend_below(&area, &entries)?
        } else {
            area
        };
        let points: Vec<Vec<(f64, f64)>> = self.series.iter().map(|s| s.log_points()).collect();
        let all = || points.iter().flatten();
        let xr = log_range(finite_range(all().map(|p| p.0)), (2.0, 7.0));
        let yr = log_range(finite_range(all().map(|p| p.1)), (-6.0, 1.0));
        let decades = |r: (f64, f64)| (r.1.floor() - r.0.ceil()).max(0.0) as usize + 1;

        let frame = Frame {
            margin: 15,
            right: 35,
            x_labels: 70,
            y_labels: 110,
        };
        let mut chart = frame.chart(&area, xr.0..xr.1, yr.0..yr.1)?;
        let mut mesh = super::axes(&mut chart);
        super::grid(&mut mesh, 215, 255);
        mesh.max_light_lines(0)
            .x_labels(decades(xr) + 1)
            .y_labels(decades(yr) + 1)
            .label_style(text(TICK_SIZE * 1.1))
            .axis_desc_style(text(desc_size()))
            .x_label_formatter(&decade_label)
            .y_label_formatter(&decade_label)
            .x_desc("tokens n")
            .y_desc("seconds per field evaluation")
            .draw()
            .io()?;

        draw_minor_grid(&mut chart, xr, yr)?;
        let mut entries = draw_measured(&mut chart, self.series, &points)?;
        let mut references: Vec<Vec<(f64, f64)>> = Vec::new();
        if all().next().is_none() {
            draw_no_data(&chart.plotting_area().strip_coord_spec(), "no data")?;
        } else {
            for (segment, color, entry) in self.reference_lines(&points, xr, yr) {
                if let Some(segment) = segment {
                    references.push(segment.to_vec());
                    chart
                        .draw_series(std::iter::once(DashedPathElement::new(
                            segment,
                            pxi(10),
                            pxi(7),
                            color.stroke_width(lw(2)),
                        )))
                        .io()?;
                }
                entries.push(entry);
            }
        }
        if !below {
            let plot = chart.plotting_area().strip_coord_spec();
            let origin = legend_corner(&chart, &entries, points.iter().chain(&references));
            draw_legend(&plot, origin, &entries)?;
        }
        Ok(())
    }
}

/// A reference line: its segment inside the box (if any), colour and legend entry.
type Reference = (Option<[(f64, f64); 2]>, RGBColor, Entry);

impl ScalingPicture<'_> {
    /// The reference lines of slope 1 and 2 (clipped to the box, `None` when outside it), each
    /// a decade fraction below the series of nearest slope (within 0.5), else through the
    /// lowest point at the smallest n; with their colours and legend entries.
    fn reference_lines(
        &self,
        points: &[Vec<(f64, f64)>],
        xr: (f64, f64),
        yr: (f64, f64),
    ) -> Vec<Reference> {
        let all = || points.iter().flatten();
        let x_min = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let fallback = all()
            .filter(|p| p.0 == x_min)
            .map(|p| (p.0, p.1))
            .fold((x_min, f64::INFINITY), |a, p| if p.1 < a.1 { p } else { a });
        let mut out = Vec::new();
        for (r, k) in [1.0f64, 2.0].into_iter().enumerate() {
            let near = self
                .series
                .iter()
                .zip(points)
                .filter(|(s, pts)| s.slope.is_finite() && !pts.is_empty())
                .map(|(s, pts)| ((s.slope - k).abs(), pts))
                .filter(|(gap, _)| *gap <= 0.5)
                .min_by(|a, b| a.0.total_cmp(&b.0));
            let anchor = match near {
                Some((_, pts)) => {
                    let last = pts[pts.len() - 1];
                    (last.0, last.1 - REFERENCE_OFFSET)
                }
                None => fallback,
            };
            let color = REFERENCE_COLORS[r];
            out.push((clip_line(k, anchor, xr, yr), color, reference_entry(r, k)));
        }
        out
    }
}

/// The legend entry of the reference line of slope `k` (the `r`-th).
fn reference_entry(r: usize, k: f64) -> Entry {
    Entry::new(
        Mark::Line(REFERENCE_COLORS[r].to_rgba(), 2, Some((10, 7))),
        format!(
            "slope {} (reference, O(n{}))",
            short(k),
            superscript(k as i64)
        )
        .replace("O(n¹)", "O(n)"),
    )
}

/// The legend entry of the `i`-th measured series: its colour, dashed past the palette.
fn series_entry(i: usize, s: &ScalingSeries) -> Entry {
    let color = SERIES_COLORS[i % SERIES_COLORS.len()];
    let dash = (i >= SERIES_COLORS.len()).then_some((12, 7));
    Entry::new(Mark::Line(color.to_rgba(), 3, dash), s.legend())
}

/// Minor grid lines at 2..9 times each power of ten.
fn draw_minor_grid<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    xr: (f64, f64),
    yr: (f64, f64),
) -> io::Result<()> {
    let minor = RGBColor(240, 240, 240);
    let inside = |v: f64, r: (f64, f64)| v > r.0 && v < r.1;
    let steps = |r: (f64, f64)| {
        ((r.0.floor() as i64)..=(r.1.ceil() as i64))
            .flat_map(|d| (2..10).map(move |m| d as f64 + (m as f64).log10()))
    };
    for x in steps(xr).filter(|&x| inside(x, xr)) {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, yr.0), (x, yr.1)],
                minor.stroke_width(lw(1)),
            )))
            .io()?;
    }
    for y in steps(yr).filter(|&y| inside(y, yr)) {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(xr.0, y), (xr.1, y)],
                minor.stroke_width(lw(1)),
            )))
            .io()?;
    }
    Ok(())
}

/// The measured series (lines with outlined dots); returns their legend entries.
fn draw_measured<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    series: &[ScalingSeries],
    points: &[Vec<(f64, f64)>],
) -> io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for (i, (s, pts)) in series.iter().zip(points).enumerate() {
        let color = SERIES_COLORS[i % SERIES_COLORS.len()];
        // Past the palette, the colours come round again with dashed lines and square marks.
        let again = i >= SERIES_COLORS.len();
        if again {
            chart
                .draw_series(DashedLineSeries::new(
                    pts.iter().copied(),
                    pxi(12),
                    pxi(7),
                    color.stroke_width(lw(3)),
                ))
                .io()?;
        } else {
            chart
                .draw_series(LineSeries::new(
                    pts.iter().copied(),
                    color.stroke_width(lw(3)),
                ))
                .io()?;
        }
        for style in [color.filled(), BLACK.mix(0.6).stroke_width(lw(1))] {
            if again {
                chart
                    .draw_series(pts.iter().map(|&p| {
                        EmptyElement::at(p)
                            + Rectangle::new([(-pxi(5), -pxi(5)), (pxi(5), pxi(5))], style)
                    }))
                    .io()?;
            } else {
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, px(6), style)))
                    .io()?;
            }
        }
        entries.push(series_entry(i, s));
    }
    Ok(entries)
}

/// The corner of the plotting area (top left first) where the legend covers the fewest pixels
/// of the drawn curves.
fn legend_corner<'p, DB: DrawingBackend>(
    chart: &Chart2d<'_, DB>,
    entries: &[Entry],
    curves: impl Iterator<Item = &'p Vec<(f64, f64)>>,
) -> (i32, i32) {
    let plot = chart.plotting_area().strip_coord_spec();
    let (w, h) = plot.dim_in_pixel();
    let (lw, lh) = legend_size(&plot, entries);
    let base = chart.plotting_area().get_base_pixel();
    let mut covered: Vec<(i32, i32)> = Vec::new();
    for pts in curves {
        for pair in pts.windows(2) {
            for k in 0..=16 {
                let f = k as f64 / 16.0;
                let p = (
                    pair[0].0 + f * (pair[1].0 - pair[0].0),
                    pair[0].1 + f * (pair[1].1 - pair[0].1),
                );
                covered.push(chart.backend_coord(&p));
            }
        }
        covered.extend(pts.iter().map(|p| chart.backend_coord(p)));
    }
    let (w, h) = (w as i32, h as i32);
    let corners = [
        (pxi(14), pxi(14)),
        (w - lw - pxi(14), h - lh - pxi(14)),
        (w - lw - pxi(14), pxi(14)),
        (pxi(14), h - lh - pxi(14)),
    ];
    let hits = |&(x0, y0): &(i32, i32)| {
        covered
            .iter()
            .filter(|(px, py)| {
                let (px, py) = (px - base.0, py - base.1);
                px >= x0 - 8 && px <= x0 + lw + 8 && py >= y0 - 8 && py <= y0 + lh + 8
            })
            .count()
    };
    corners
        .iter()
        .min_by_key(|c| hits(c))
        .copied()
        .unwrap_or((14, 14))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_power_laws_is_exact() {
        // Powers of two: the base-2 logarithms are exact, so is the slope.
        let n: Vec<f64> = (7..20).map(|k| 2f64.powi(k)).collect();
        let t: Vec<f64> = n.iter().map(|n| 2f64.powi(-30) * n * n).collect();
        assert_eq!(loglog_slope(&n, &t), 2.0);
        let t1: Vec<f64> = n.iter().map(|n| 2f64.powi(-20) * n).collect();
        assert_eq!(loglog_slope(&n, &t1), 1.0);
        // Any c and n: 2 to round-off.
        let n = [1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5];
        let t: Vec<f64> = n.iter().map(|n| 3.7e-9 * n * n).collect();
        assert!((loglog_slope(&n, &t) - 2.0).abs() < 1e-12);
        // Unusable points are skipped; too few points give NaN.
        let t_bad = [f64::NAN, 0.0, -1.0, 5e-2, 2e-1, 1.25, 5.0];
        let n_bad = [1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5];
        let s = loglog_slope(&n_bad, &t_bad);
        assert!(s.is_finite());
        assert!(loglog_slope(&[1e3], &[1.0]).is_nan());
        assert!(loglog_slope(&[1e3, 1e3], &[1.0, 2.0]).is_nan());
        assert!(loglog_slope(&[], &[]).is_nan());
    }

    #[test]
    fn labels_and_clipping() {
        assert_eq!(decade_label(&3.0), "10³");
        assert_eq!(decade_label(&-6.0), "10⁻⁶");
        assert_eq!(decade_label(&2.5), "");
        assert_eq!(superscript(10), "¹⁰");
        let s = ScalingSeries {
            label: "lsa d=2".into(),
            n: vec![],
            seconds: vec![],
            slope: f64::NAN,
        };
        assert_eq!(s.legend(), "lsa d=2 (slope n/a)");
        let seg = clip_line(2.0, (2.0, -6.0), (2.0, 7.0), (-6.0, 0.0)).unwrap();
        assert_eq!(seg, [(2.0, -6.0), (5.0, 0.0)]);
        assert!(clip_line(1.0, (2.0, 5.0), (2.0, 7.0), (-6.0, 0.0)).is_none());
    }

    fn png_size(path: &Path) -> (u32, u32) {
        let decoder = png::Decoder::new(std::fs::File::open(path).expect("png exists"));
        let mut reader = decoder.read_info().expect("png header");
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).expect("png data");
        // Not blank: many distinct colours (lines, markers, text).
        let distinct: std::collections::HashSet<&[u8]> = buf[..info.buffer_size()]
            .chunks_exact(info.color_type.samples())
            .collect();
        assert!(distinct.len() > 20, "{} colours", distinct.len());
        (info.width, info.height)
    }

    /// The y of every `<text>` of `svg` whose content contains `needle`.
    fn text_ys(svg: &str, needle: &str) -> Vec<f64> {
        svg.split("<text")
            .skip(1)
            .filter(|t| t.split('>').nth(1).is_some_and(|c| c.contains(needle)))
            .filter_map(|t| t.split("y=\"").nth(1)?.split('"').next()?.parse().ok())
            .collect()
    }

    #[test]
    fn many_series_put_the_legend_below_the_axis() {
        let dir = tempfile::tempdir().unwrap();
        let n: Vec<f64> = [1e2, 1e3, 1e4, 1e5].to_vec();
        let series: Vec<ScalingSeries> = (0..14)
            .map(|i| ScalingSeries {
                label: format!("kernel{i} d=2"),
                seconds: n.iter().map(|n| 1e-9 * (i + 1) as f64 * n).collect(),
                n: n.clone(),
                slope: 1.0,
            })
            .collect();
        scaling_plot(dir.path(), &series, "Scaling").unwrap();
        let svg = std::fs::read_to_string(dir.path().join("scaling.svg")).unwrap();
        let axis = text_ys(&svg, "tokens n");
        let legend = text_ys(&svg, "(slope");
        assert_eq!(axis.len(), 1);
        assert_eq!(legend.len(), 14);
        assert!(
            legend.iter().all(|&y| y > axis[0]),
            "{legend:?} vs {axis:?}"
        );
        // A few series keep it inside the chart, above the axis title.
        scaling_plot(dir.path(), &series[..2], "Scaling").unwrap();
        let svg = std::fs::read_to_string(dir.path().join("scaling.svg")).unwrap();
        assert!(text_ys(&svg, "(slope")
            .iter()
            .all(|&y| y < text_ys(&svg, "tokens n")[0]));
    }

    #[test]
    fn picture_is_written_as_png_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let n: Vec<f64> = [1e2, 2e2, 5e2, 1e3, 2e3, 5e3, 1e4].to_vec();
        let lin: Vec<f64> = n.iter().map(|n| 1e-6 + 1e-8 * n).collect();
        let quad: Vec<f64> = n.iter().map(|n| 3e-9 * n * n).collect();
        let series = [
            ScalingSeries {
                label: "lsa d=2".into(),
                slope: loglog_slope(&n[3..], &lin[3..]),
                n: n.clone(),
                seconds: lin,
            },
            ScalingSeries {
                label: "usa d=2".into(),
                slope: loglog_slope(&n[3..], &quad[3..]),
                n: n.clone(),
                seconds: quad,
            },
        ];
        let files = scaling_plot(dir.path(), &series, "Scaling\n2 threads").unwrap();
        assert_eq!(files.len(), 3);
        assert!(files[2].ends_with("scaling.pdf"));
        assert_eq!(png_size(&files[0]), SCALING_SIZE);
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("slope 2.00"));
        assert!(svg.contains("tokens n") && svg.contains("seconds per field evaluation"));

        // Degenerate input draws without error: no series, one point, unusable values.
        let empty = tempfile::tempdir().unwrap();
        scaling_plot(empty.path(), &[], "").unwrap();
        assert_eq!(png_size(&empty.path().join("scaling.png")), SCALING_SIZE);
        let odd = [ScalingSeries {
            label: "one".into(),
            n: vec![1e3, f64::NAN],
            seconds: vec![1e-3, 0.0],
            slope: f64::NAN,
        }];
        scaling_plot(empty.path(), &odd, "one point").unwrap();
    }
}
