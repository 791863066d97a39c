//! Pictures of runs, comparisons, phase portraits and sweeps: each as PNG, SVG and PDF (the
//! PDF with the font embedded, for LaTeX; see [`vector`]).
//!
//! Every function takes data that is already computed and writes files into a folder; none of
//! them runs a simulation (the phase portrait evaluates the Ott–Antonsen vector field on a grid
//! and integrates a few guide curves of it, which is part of drawing the picture).
//!
//! | function | files |
//! |---|---|
//! | [`order_plot`] | `order.png`, `.svg`, `.pdf` |
//! | [`kymograph_plot`] | `kymograph.png`, `.svg`, `.pdf` |
//! | [`tokens_plot`] | `tokens.png`, `.svg`, `.pdf` |
//! | [`tokens_gif`] | `tokens.gif` |
//! | [`portrait_plot`] | `portrait.png`, `.svg`, `.pdf` |
//! | [`compare_plot`] | `compare.png`, `.svg`, `.pdf` |
//! | [`regime_map`] | `regime_map.png`, `.svg`, `.pdf` |
//! | [`bifurcation_plot`] | `bifurcation.png`, `.svg`, `.pdf` |
//! | [`scaling_plot`] | `scaling.png`, `.svg`, `.pdf` |
//! | [`clusters::clusters_plot`] | `clusters.png`, `.svg`, `.pdf` |
//! | [`cluster_diagram::cluster_diagram_plot`] | `cluster_diagram.png`, `.svg`, `.pdf` |
//!
//! Shared style lives here: the font (DejaVu Sans from the `dejavu` crate, registered once with
//! plotters under the family name [`FONT`], so no system font is needed), the fixed colour of
//! each label ([`label_color`]), legends, titles, padded ranges and the PNG/SVG rendering.
//! All pictures are deterministic and never panic for finite input: empty or one-sample series,
//! constant values and n = 1 give a (sparse) picture, not an error.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::drawing::DrawingAreaErrorKind;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::classify::Label;

pub mod bifurcation;
pub mod cluster_diagram;
pub mod clusters;
pub mod codim2;
pub mod compare;
pub mod density;
pub mod ensemble;
pub mod kymograph;
pub mod kymograph_map;
pub mod order;
pub(crate) mod pdf_marks;
pub mod portrait;
pub(crate) mod projection;
mod raster;
pub mod regime;
pub mod scaling;
pub mod snapshots;
pub mod tokens;
pub mod transition;
pub mod vector;

pub use bifurcation::{bifurcation_plot, Bifurcation, CycleLine};
pub use compare::compare_plot;
pub use ensemble::{ensemble_plot, EnsembleView};
pub use kymograph::{kymograph_plot, AngleHistory};
pub use order::{order_plot, OrderView};
pub use portrait::{portrait_plot, CycleCurve, CycleKind};
pub use regime::{codim2_map, regime_map, zero_level, RegimeMap, Theory};
pub use scaling::{loglog_slope, scaling_plot, ScalingSeries};
pub use snapshots::{snapshot_times, TokenSnapshots};
pub use tokens::{tokens_gif, tokens_plot, MAX_PANELS};
pub use transition::transition_plot;

pub use crate::figure::{Figure, SLIDE_SIZE};

/// The font family every picture uses: DejaVu Sans, registered from bytes under plotters'
/// generic name, so that plotters' own defaults resolve to the same font.
pub const FONT: &str = "sans-serif";

/// Name used for a sweep point whose run failed (`None` in the label slices).
pub const FAILED: &str = "failed";

static FONTS: Once = Once::new();

/// Registers DejaVu Sans (regular, bold, oblique) with plotters, once per process.
pub fn register_fonts() {
    FONTS.call_once(|| {
        // The bytes are a valid TrueType font; a failure would only make text drawing return
        // an error later, never a panic.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
        let _ = plotters::style::register_font(FONT, FontStyle::Oblique, dejavu::sans::oblique());
        let _ = plotters::style::register_font(FONT, FontStyle::Italic, dejavu::sans::oblique());
    });
}

/// Every label in legend order, `None` (a failed run) last.
pub const LABELS: [Option<Label>; 9] = [
    Some(Label::ConvergedClusters),
    Some(Label::RotatingClusters),
    Some(Label::Oscillation),
    Some(Label::InteriorPoint),
    Some(Label::RotatingInterior),
    Some(Label::Undetermined),
    Some(Label::MetastableClusters),
    Some(Label::Chaotic),
    None,
];

/// The fixed colour of a label in every picture (`None`: a failed run).
///
/// Okabe–Ito colours (readable with colour-vision deficiencies): clusters are blues and greens,
/// oscillation vermillion, interior points orange and purple, chaotic yellow, undetermined
/// light grey, failed dark grey.
pub fn label_color(label: Option<Label>) -> RGBColor {
    match label {
        Some(Label::ConvergedClusters) => RGBColor(0, 114, 178),
        Some(Label::RotatingClusters) => RGBColor(0, 158, 115),
        Some(Label::Oscillation) => RGBColor(213, 94, 0),
        Some(Label::InteriorPoint) => RGBColor(230, 159, 0),
        Some(Label::RotatingInterior) => RGBColor(204, 121, 167),
        Some(Label::Undetermined) => RGBColor(190, 190, 190),
        Some(Label::MetastableClusters) => RGBColor(86, 180, 233),
        Some(Label::Chaotic) => RGBColor(240, 228, 66),
        None => RGBColor(70, 70, 70),
    }
}

/// The word of a label in legends (`failed` for `None`).
pub fn label_name(label: Option<Label>) -> &'static str {
    match label {
        Some(l) => l.as_str(),
        None => FAILED,
    }
}

/// Turns a plotters drawing error into an `io::Error`.
pub(crate) trait OrIo<T> {
    fn io(self) -> io::Result<T>;
}

impl<T, E: std::error::Error + Send + Sync> OrIo<T> for Result<T, DrawingAreaErrorKind<E>> {
    fn io(self) -> io::Result<T> {
        self.map_err(|e| io::Error::other(format!("drawing failed: {e}")))
    }
}

/// A chart with two linear f64 axes (the steps of a picture's drawing take one).
pub(crate) type Chart2d<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A picture that can be drawn on any plotters backend.
pub(crate) trait Picture {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()>;
}

fn with_path(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Draws `pic` into `dir/stem.png`, `dir/stem.svg` and `dir/stem.pdf` at the pixel size `size`
/// (the SVG and the PDF get the physical size of `figure`); returns the files written.
///
/// The PNG and the vector files are two independent drawings of the picture: they are made
/// concurrently (each with the scale of the picture set on its own thread), so a picture's
/// costly PDF conversion runs beside its PNG. An error of the vector files is reported first.
pub(crate) fn render(
    pic: &(impl Picture + Sync),
    dir: &Path,
    stem: &str,
    size: (u32, u32),
    figure: Figure,
) -> io::Result<Vec<PathBuf>> {
    register_fonts();
    not_interrupted()?;
    let png = dir.join(format!("{stem}.png"));
    let svg_path = dir.join(format!("{stem}.svg"));
    let pdf_path = dir.join(format!("{stem}.pdf"));
    let (vector, bitmap) = rayon::join(
        || write_vector(pic, (&svg_path, &pdf_path), size, figure),
        || {
            let _scale = Scale::set(size, figure);
            draw_png(pic, &png, size).map_err(|e| with_path(&png, e))
        },
    );
    vector.and(bitmap)?;
    Ok(vec![png, svg_path, pdf_path])
}

/// An error when a signal asked the command to stop: a picture is not begun then.
fn not_interrupted() -> io::Result<()> {
    if crate::interrupt::is_requested() {
        return Err(io::Error::new(
            io::ErrorKind::Interrupted,
            "interrupted while drawing the pictures",
        ));
    }
    Ok(())
}

/// Draws `pic` as SVG text of `size` pixels and writes it (with the physical size of `figure`)
/// to `svg_path` and its PDF to `pdf_path`.
fn write_vector(
    pic: &impl Picture,
    (svg_path, pdf_path): (&Path, &Path),
    size: (u32, u32),
    figure: Figure,
) -> io::Result<()> {
    let _scale = Scale::set(size, figure);
    let svg = draw_svg(pic, size).map_err(|e| with_path(svg_path, e))?;
    not_interrupted()?;
    let pdf = vector::svg_to_pdf(&svg, size, figure).map_err(|e| with_path(pdf_path, e))?;
    let svg = vector::with_physical_size(&svg, size, figure);
    std::fs::write(svg_path, svg).map_err(|e| with_path(svg_path, e))?;
    std::fs::write(pdf_path, pdf).map_err(|e| with_path(pdf_path, e))
}

/// The picture drawn into `path` as a PNG of `size` pixels.
fn draw_png(pic: &impl Picture, path: &Path, size: (u32, u32)) -> io::Result<()> {
    let root = raster::Raster::new(path, size).into_drawing_area();
    root.fill(&WHITE).io()?;
    pic.draw(&root)?;
    root.present().io()
}

/// The picture as SVG text at `size` pixels.
fn draw_svg(pic: &impl Picture, size: (u32, u32)) -> io::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).io()?;
        pic.draw(&root)?;
        root.present().io()?;
    }
    Ok(svg)
}

// ---------------------------------------------------------------------------------------------
// Scale

/// Plotters draws a font of size `f` with an em of `f / 1.24` pixels (the SVG `font-size`).
const EM_PER_SIZE: f64 = 1.0 / 1.24;

/// Pixels per printed inch of the layout at scale 1: a font of [`TICK_SIZE`] layout units is
/// then 6.8 pt (`LEGEND_SIZE` 7.2 pt). `slide` (160 pixels per inch) is drawn at scale 1.
const LAYOUT_DPI: f64 = TICK_SIZE * EM_PER_SIZE * 72.0 / 6.8;

/// The layout scale of the picture being drawn: pixels per layout unit, and whether the
/// picture is for a paper column (`compact` layouts: fewer ticks, panels and words).
///
/// A picture printed `W` inches wide from `w` pixels has `dpi = w / W`; on paper every length
/// of the layout (fonts, margins, label areas, line widths, marks) is multiplied by
/// `k = dpi / LAYOUT_DPI`, so a font of `f` layout units prints at `72 f / LAYOUT_DPI` pt
/// whatever the pixel size. It is set by [`render`] for the drawing of one picture on the
/// drawing thread and restored when the guard drops; elsewhere (the GIF) it is 1.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    k: f64,
    paper: bool,
}

thread_local! {
    static SCALE: std::cell::Cell<Scale> = const { std::cell::Cell::new(Scale { k: 1.0, paper: false }) };
}

/// Restores the previous scale when dropped.
pub(crate) struct ScaleGuard(Scale);

impl Scale {
    /// Sets the scale of a picture of `size` pixels in `figure` until the guard drops.
    pub(crate) fn set(size: (u32, u32), figure: Figure) -> ScaleGuard {
        let new = match figure {
            Figure::Paper => Scale {
                k: (vector::dpi(size.0, figure) / LAYOUT_DPI).max(1.0),
                paper: true,
            },
            Figure::Slide => Scale {
                k: 1.0,
                paper: false,
            },
        };
        ScaleGuard(SCALE.with(|c| c.replace(new)))
    }
}

impl Drop for ScaleGuard {
    fn drop(&mut self) {
        SCALE.with(|c| c.set(self.0));
    }
}

/// Pixels per layout unit of the picture being drawn.
pub(crate) fn scale() -> f64 {
    SCALE.with(|c| c.get().k)
}

/// Whether the picture being drawn is for a paper column.
pub(crate) fn is_paper() -> bool {
    SCALE.with(|c| c.get().paper)
}

/// `v` layout units in pixels.
pub(crate) fn px(v: u32) -> u32 {
    (v as f64 * scale()).round() as u32
}

/// `v` layout units in (signed) pixels.
pub(crate) fn pxi(v: i32) -> i32 {
    (v as f64 * scale()).round() as i32
}

/// How many x and y tick labels a chart's plotting area has room for: about one per 55 and
/// per 28 layout units (3 to 10; plotters picks round steps at most that many), so paper charts
/// get fewer, readable ones.
pub(crate) fn ticks<DB: DrawingBackend, CT: plotters::coord::CoordTranslate>(
    chart: &ChartContext<'_, DB, CT>,
) -> (usize, usize) {
    let (w, h) = chart.plotting_area().dim_in_pixel();
    let fit = |len: u32, per: u32| (len / px(per).max(1)).clamp(3, 10) as usize;
    (fit(w, 55), fit(h, 28))
}

/// A coordinate whose ticks plotters can label (what a chart's mesh asks of each axis).
pub(crate) trait TickedAxis: Ranged + ValueFormatter<<Self as Ranged>::ValueType> {}

impl<T: Ranged + ValueFormatter<<T as Ranged>::ValueType>> TickedAxis for T {}

/// The axes of a chart as every picture draws them (the one chart set-up): tick counts from
/// the plotting area ([`ticks`]), thin black axes and tick marks, the tick and description
/// fonts; the caller adds its grid (or `disable_mesh`), formatters and descriptions, then
/// draws. A later call of the same setter overrides these.
pub(crate) fn axes<'a, 'b, X: TickedAxis, Y: TickedAxis, DB: DrawingBackend>(
    chart: &'b mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> plotters::chart::MeshStyle<'a, 'b, X, Y, DB> {
    let (xt, yt) = ticks(chart);
    let mut mesh = chart.configure_mesh();
    mesh.x_labels(xt)
        .y_labels(yt)
        .axis_style(BLACK.stroke_width(lw(1)))
        .set_all_tick_mark_size(px(5))
        .label_style(text(TICK_SIZE))
        .axis_desc_style(text(desc_size()));
    mesh
}

/// A light grey grid (bold lines of grey `bold`, light lines of grey `light`).
pub(crate) fn grid<X, Y, DB>(
    mesh: &mut plotters::chart::MeshStyle<'_, '_, X, Y, DB>,
    bold: u8,
    light: u8,
) where
    X: plotters::coord::ranged1d::Ranged,
    Y: plotters::coord::ranged1d::Ranged,
    DB: DrawingBackend,
{
    mesh.bold_line_style(RGBColor(bold, bold, bold).stroke_width(lw(1)))
        .light_line_style(RGBColor(light, light, light).stroke_width(lw(1)));
}

/// The mesh of a time chart: [`axes`] and a light grey grid; the caller adds light lines,
/// formatters and descriptions, then draws.
pub(crate) fn time_mesh<'a, 'b, X: TickedAxis, Y: TickedAxis, DB: DrawingBackend>(
    chart: &'b mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> plotters::chart::MeshStyle<'a, 'b, X, Y, DB> {
    let mut mesh = axes(chart);
    grid(&mut mesh, 225, 245);
    mesh
}

/// The chart [`Frame::chart`] builds from the coordinate specs `X` and `Y`.
pub(crate) type Chart<'a, DB, X, Y> = ChartContext<
    'a,
    DB,
    Cartesian2d<
        <X as plotters::coord::ranged1d::AsRangedCoord>::CoordDescType,
        <Y as plotters::coord::ranged1d::AsRangedCoord>::CoordDescType,
    >,
>;

/// Where a chart sits in its area, in layout units: the margin all round (`right` replaces it
/// on the right) and the heights / widths of the x and y label areas.
pub(crate) struct Frame {
    pub margin: u32,
    pub right: u32,
    pub x_labels: u32,
    pub y_labels: u32,
}

impl Frame {
    /// A chart on `area` in this frame with the coordinates `x` and `y` (ranges, or ranges with
    /// a log scale); the caller configures its mesh with [`axes`] or [`time_mesh`].
    pub(crate) fn chart<'a, DB, X, Y>(
        &self,
        area: &DrawingArea<DB, Shift>,
        x: X,
        y: Y,
    ) -> io::Result<Chart<'a, DB, X, Y>>
    where
        DB: DrawingBackend,
        X: plotters::coord::ranged1d::AsRangedCoord,
        Y: plotters::coord::ranged1d::AsRangedCoord,
    {
        ChartBuilder::on(area)
            .margin(px(self.margin))
            .margin_right(px(self.right))
            .x_label_area_size(px(self.x_labels))
            .y_label_area_size(px(self.y_labels))
            .build_cartesian_2d(x, y)
            .io()
    }
}

/// A chart of two f64 axes as the pictures of values against a parameter or time set it up:
/// margins, label areas sized for the tick and description fonts, and the ranges; the caller
/// configures its mesh with [`time_mesh`].
pub(crate) fn value_chart<'a, DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> io::Result<Chart2d<'a, DB>> {
    let paper = is_paper();
    let frame = Frame {
        margin: 12,
        right: 30,
        x_labels: if paper { 55 } else { 60 },
        y_labels: if paper { 75 } else { 90 },
    };
    frame.chart(area, x, y)
}

/// A line width of `v` layout units in pixels (at least 1).
pub(crate) fn lw(v: u32) -> u32 {
    px(v).max(1)
}

// ---------------------------------------------------------------------------------------------
// Text

/// Font sizes in layout units (the SVG `font-size` in pixels at scale 1, see [`Scale`]).
/// `paper` has its own title and axis-label sizes: 8.8 pt and 7.7 pt printed, ticks 6.8 pt.
pub(crate) fn title_size() -> f64 {
    if is_paper() {
        24.5
    } else {
        30.0
    }
}
pub(crate) fn desc_size() -> f64 {
    if is_paper() {
        21.5
    } else {
        24.0
    }
}
pub(crate) const TICK_SIZE: f64 = 19.0;
pub(crate) const LEGEND_SIZE: f64 = 20.0;
/// The smallest font size any text is drawn at (layout units): 6.8 pt on paper.
pub(crate) const MIN_SIZE: f64 = 19.0;

/// A text style of the picture font (`size` in layout units).
pub(crate) fn text(size: f64) -> TextStyle<'static> {
    TextStyle::from((FONT, font_px(size)).into_font())
}

/// A text style with colour and anchor.
pub(crate) fn text_at(size: f64, color: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle {
        font: (FONT, font_px(size)).into_font(),
        color: color.to_backend_color(),
        pos: Pos::new(h, v),
    }
}

/// The pixel font size of `size` layout units (never below [`MIN_SIZE`]), rounded to tenths.
fn font_px(size: f64) -> f64 {
    (size.max(MIN_SIZE) * scale() * 10.0).round() / 10.0
}

/// Width of `s` in pixels (an estimate when the font is unavailable).
pub(crate) fn text_width<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    s: &str,
    size: f64,
) -> u32 {
    area.estimate_text_size(s, &text(size))
        .map(|(w, _)| w)
        .unwrap_or((s.chars().count() as f64 * size * 0.5) as u32)
}

/// Draws a (possibly multi-line, `\n`) title centred at the top of `area`, shrinking the font
/// (down to [`MIN_SIZE`]) until every line fits the width and wrapping at spaces the lines that
/// still do not; returns the area below it.
pub(crate) fn draw_title<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
) -> io::Result<DrawingArea<DB, Shift>> {
    let lines: Vec<&str> = title
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let (w, h) = area.dim_in_pixel();
    if lines.is_empty() {
        let gap = px(10);
        return Ok(area.clone().shrink((0, gap), (w, h.saturating_sub(gap))));
    }
    let room = w.saturating_sub(px(30));
    let sub = |size: f64| (size * 0.85).max(LEGEND_SIZE);
    let mut size = title_size();
    let too_wide = |size: f64| {
        lines.iter().enumerate().any(|(i, l)| {
            let s = if i == 0 { size } else { sub(size) };
            text_width(area, l, s) > room
        })
    };
    while size > MIN_SIZE + 3.5 && too_wide(size) {
        size -= 0.5;
    }
    let mut y = pxi(10);
    for (i, line) in lines.iter().enumerate() {
        // First line larger, the rest smaller.
        let s = if i == 0 { size } else { sub(size) };
        let style = text_at(s, BLACK, HPos::Center, VPos::Top);
        for part in wrap(area, line, s, room) {
            area.draw_text(&part, &style, (w as i32 / 2, y)).io()?;
            y += (font_px(s) * if i == 0 { 1.1 } else { 1.15 }).ceil() as i32;
        }
    }
    let used = (y + pxi(6)).max(0) as u32;
    Ok(area.clone().shrink((0, used), (w, h.saturating_sub(used))))
}

/// `line` cut into pieces at most `room` pixels wide at font `size`: at `"; "` where that is
/// enough, else also at spaces (a single word wider than `room` stays whole).
pub(crate) fn wrap<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    line: &str,
    size: f64,
    room: u32,
) -> Vec<String> {
    let fits = |s: &str| text_width(area, s, size) <= room;
    let clauses: Vec<String> = line
        .split("; ")
        .enumerate()
        .map(|(i, c)| {
            if i == 0 {
                c.to_string()
            } else {
                format!("; {c}")
            }
        })
        .collect();
    let mut units: Vec<(String, bool)> = Vec::new();
    for clause in &clauses {
        if fits(clause.trim_start_matches("; ")) {
            units.push((clause.clone(), true));
        } else {
            let words = clause.split(' ').filter(|w| !w.is_empty());
            units.extend(words.map(|w| (w.to_string(), false)));
        }
    }
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for (unit, clause) in units {
        let joined = if current.is_empty() {
            unit.trim_start_matches("; ").to_string()
        } else if clause {
            format!("{current}{unit}")
        } else {
            format!("{current} {unit}")
        };
        if !current.is_empty() && !fits(&joined) {
            let unit = unit.trim_start_matches("; ").to_string();
            let done = std::mem::replace(&mut current, unit);
            out.push(if clause { format!("{done};") } else { done });
        } else {
            current = joined;
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Draws "no data" in the middle of an area.
pub(crate) fn draw_no_data<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    what: &str,
) -> io::Result<()> {
    let (w, h) = area.dim_in_pixel();
    let style = text_at(
        desc_size(),
        RGBColor(120, 120, 120),
        HPos::Center,
        VPos::Center,
    );
    area.draw_text(what, &style, (w as i32 / 2, h as i32 / 2))
        .io()
}

// ---------------------------------------------------------------------------------------------
// Legends

/// How a legend entry is marked.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mark {
    /// A line sample: colour, width, dash pattern (`None` solid, `Some((dash, gap))`).
    Line(RGBAColor, u32, Option<(u32, u32)>),
    /// A disc (filled) or ring (hollow) of a colour.
    Dot(RGBColor, bool),
    /// A filled square (a regime-map cell).
    Square(RGBColor),
    /// A diamond outline (special points: what lies under it stays visible).
    DiamondOutline(RGBColor),
    /// A cross (failed points).
    Cross(RGBColor),
    /// A filled triangle.
    Triangle(RGBColor),
}

/// One legend entry.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub mark: Mark,
    pub text: String,
}

impl Entry {
    /// A legend entry: a mark and its text.
    pub fn new(mark: Mark, text: impl Into<String>) -> Self {
        Entry {
            mark,
            text: text.into(),
        }
    }
}

const MARK_W: i32 = 40;

/// The width of a legend mark in pixels.
fn mark_w() -> i32 {
    pxi(MARK_W)
}

fn draw_mark<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    mark: Mark,
    (x, y): (i32, i32),
) -> io::Result<()> {
    let r = pxi;
    match mark {
        Mark::Line(c, w, dash) => {
            let pts = vec![(x, y), (x + mark_w(), y)];
            match dash {
                None => area
                    .draw(&PathElement::new(pts, c.stroke_width(lw(w))))
                    .io(),
                Some((d, g)) => area
                    .draw(&DashedPathElement::new(
                        pts,
                        pxi(d as i32),
                        pxi(g as i32),
                        c.stroke_width(lw(w)),
                    ))
                    .io(),
            }
        }
        Mark::Dot(c, filled) => {
            let cx = x + mark_w() / 2;
            if filled {
                area.draw(&Circle::new((cx, y), r(7), c.filled())).io()?;
                area.draw(&Circle::new((cx, y), r(7), BLACK.stroke_width(lw(1))))
                    .io()
            } else {
                area.draw(&Circle::new((cx, y), r(7), WHITE.filled()))
                    .io()?;
                area.draw(&Circle::new((cx, y), r(7), c.stroke_width(lw(2))))
                    .io()
            }
        }
        Mark::Square(c) => {
            let cx = x + mark_w() / 2;
            area.draw(&Rectangle::new(
                [(cx - r(10), y - r(10)), (cx + r(10), y + r(10))],
                c.filled(),
            ))
            .io()?;
            area.draw(&Rectangle::new(
                [(cx - r(10), y - r(10)), (cx + r(10), y + r(10))],
                RGBColor(80, 80, 80).stroke_width(lw(1)),
            ))
            .io()
        }
        Mark::DiamondOutline(c) => {
            let cx = x + mark_w() / 2;
            let mut pts = diamond((cx, y), r(10));
            pts.push(pts[0]);
            area.draw(&PathElement::new(pts, c.stroke_width(lw(2))))
                .io()
        }
        Mark::Cross(c) => {
            let cx = x + mark_w() / 2;
            area.draw(&Cross::new((cx, y), r(6), c.stroke_width(lw(2))))
                .io()
        }
        Mark::Triangle(c) => {
            let cx = x + mark_w() / 2;
            area.draw(&TriangleMarker::new((cx, y), r(9), c.filled()))
                .io()
        }
    }
}

/// The corners of a diamond around a pixel.
pub(crate) fn diamond((x, y): (i32, i32), r: i32) -> Vec<(i32, i32)> {
    vec![(x, y - r), (x + r, y), (x, y + r), (x - r, y)]
}

/// Size of a vertical legend box.
pub(crate) fn legend_size<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
) -> (i32, i32) {
    let row = (font_px(LEGEND_SIZE) * 1.45) as i32;
    let text_w = entries
        .iter()
        .map(|e| text_width(area, &e.text, LEGEND_SIZE) as i32)
        .max()
        .unwrap_or(0);
    (
        mark_w() + text_w + pxi(36),
        row * entries.len() as i32 + pxi(16),
    )
}

/// Draws a vertical legend box with its top-left corner at `origin` (pixels of `area`).
pub(crate) fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    origin: (i32, i32),
    entries: &[Entry],
) -> io::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let row = (font_px(LEGEND_SIZE) * 1.45) as i32;
    let (w, h) = legend_size(area, entries);
    let (x0, y0) = origin;
    area.draw(&Rectangle::new(
        [(x0, y0), (x0 + w, y0 + h)],
        WHITE.mix(0.9).filled(),
    ))
    .io()?;
    area.draw(&Rectangle::new(
        [(x0, y0), (x0 + w, y0 + h)],
        RGBColor(150, 150, 150).stroke_width(lw(1)),
    ))
    .io()?;
    let style = text_at(LEGEND_SIZE, BLACK, HPos::Left, VPos::Center);
    for (i, e) in entries.iter().enumerate() {
        let y = y0 + pxi(8) + row * i as i32 + row / 2;
        draw_mark(area, e.mark, (x0 + pxi(12), y))?;
        area.draw_text(&e.text, &style, (x0 + pxi(24) + mark_w(), y))
            .io()?;
    }
    Ok(())
}

/// The rows of a horizontal legend in `area` (entry indices, greedy) and each entry's width.
fn legend_rows<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
) -> (Vec<Vec<usize>>, Vec<i32>) {
    let (w, _) = area.dim_in_pixel();
    let widths: Vec<i32> = entries
        .iter()
        .map(|e| mark_w() + pxi(40) + text_width(area, &e.text, LEGEND_SIZE) as i32)
        .collect();
    let mut rows: Vec<Vec<usize>> = vec![Vec::new()];
    let mut used = 0;
    for (i, wi) in widths.iter().enumerate() {
        let last = rows.len() - 1;
        if used + wi > w as i32 - pxi(20) && !rows[last].is_empty() {
            rows.push(Vec::new());
            used = 0;
        }
        let last = rows.len() - 1;
        rows[last].push(i);
        used += wi;
    }
    (rows, widths)
}

/// The height of one row of a horizontal legend, in pixels.
fn legend_row_h() -> i32 {
    (font_px(LEGEND_SIZE) * 1.5) as i32
}

/// The height in pixels that [`draw_legend_row`] takes for `entries` in `area`.
pub(crate) fn legend_row_height<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
) -> i32 {
    legend_rows(area, entries).0.len() as i32 * legend_row_h()
}

/// Draws a one-row legend centred horizontally in `area` at height `y`; entries that do not fit
/// continue on further rows. Returns the height used.
pub(crate) fn draw_legend_row<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    y: i32,
    entries: &[Entry],
) -> io::Result<i32> {
    let (w, _) = area.dim_in_pixel();
    let (rows, widths) = legend_rows(area, entries);
    let row_h = legend_row_h();
    let style = text_at(LEGEND_SIZE, BLACK, HPos::Left, VPos::Center);
    for (r, row) in rows.iter().enumerate() {
        let total: i32 = row.iter().map(|&i| widths[i]).sum::<i32>() - pxi(30);
        let mut x = (w as i32 - total) / 2;
        let yy = y + r as i32 * row_h + row_h / 2;
        for &i in row {
            draw_mark(area, entries[i].mark, (x, yy))?;
            area.draw_text(&entries[i].text, &style, (x + mark_w() + pxi(10), yy))
                .io()?;
            x += widths[i];
        }
    }
    Ok(rows.len() as i32 * row_h)
}

/// Draws `entries` as a horizontal legend at the bottom of `area`; returns the area above it.
pub(crate) fn legend_below<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
) -> io::Result<DrawingArea<DB, Shift>> {
    let (_, h) = area.dim_in_pixel();
    let lh = (legend_row_height(area, entries) + pxi(6)).max(0) as u32;
    let (above, below) = area.split_vertically(h.saturating_sub(lh));
    draw_legend_row(&below, 0, entries)?;
    Ok(above)
}

// ---------------------------------------------------------------------------------------------
// Numbers

/// The time window drawn: `window` (`[output] window`) clipped to `[t_first, t_last]` of `t`,
/// or the whole of `t` when there is no window or it misses the run.
pub(crate) fn clip_window(t: &[f64], window: Option<(f64, f64)>) -> (f64, f64) {
    let whole = finite_range(t.iter().copied()).unwrap_or((0.0, 1.0));
    let (t0, t1) = match window {
        Some((a, b)) if a < b => (a.max(whole.0), b.min(whole.1)),
        _ => whole,
    };
    if t0 < t1 {
        (t0, t1)
    } else {
        whole
    }
}

/// The samples `[i0, i1)` of the sorted times `t` inside `[t0, t1]`.
pub(crate) fn window_range(t: &[f64], (t0, t1): (f64, f64)) -> (usize, usize) {
    let i0 = t.partition_point(|&x| x < t0);
    let i1 = t.partition_point(|&x| x <= t1).max(i0);
    (i0, i1)
}

/// `[lo, hi]` of the finite values, or `None`.
pub(crate) fn finite_range(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in values {
        if v.is_finite() {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    (lo <= hi).then_some((lo, hi))
}

/// Largest |value| an axis reaches: data beyond are drawn at the edge. With ends within
/// +-1e300 every span, padding and tick step stays finite.
pub(crate) const AXIS_LIMIT: f64 = 1e300;

/// How a curve is stroked, in layout units: solid of a width, or dashed.
#[derive(Clone, Copy)]
pub(crate) enum Stroke {
    Solid(u32),
    Dashed { dash: i32, gap: i32, width: u32 },
}

/// The long dashes of unstable branches and cycles.
pub(crate) const LONG_DASHES: Stroke = Stroke::Dashed {
    dash: 10,
    gap: 7,
    width: 2,
};

/// Draws the polyline `pts` in `color` with `stroke`.
pub(crate) fn draw_stroke<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    pts: Vec<(f64, f64)>,
    color: RGBColor,
    stroke: Stroke,
) -> io::Result<()> {
    match stroke {
        Stroke::Solid(width) => chart
            .draw_series(LineSeries::new(pts, color.stroke_width(lw(width))))
            .io()?,
        Stroke::Dashed { dash, gap, width } => chart
            .draw_series(DashedLineSeries::new(
                pts,
                pxi(dash),
                pxi(gap),
                color.stroke_width(lw(width)),
            ))
            .io()?,
    };
    Ok(())
}

/// `v` moved onto the axes' reach, +-[`AXIS_LIMIT`], so that drawing it maps to a pixel
/// near the chart (a value beyond would map past the range of pixel coordinates).
pub(crate) fn on_axis(v: f64) -> f64 {
    v.clamp(-AXIS_LIMIT, AXIS_LIMIT)
}

/// A range padded by `frac` (at most 1) of its span on each side; a degenerate range (one
/// value, or a span below 1e-9 of the values' size) gets a width of 10% of the value (at least
/// 0.1), a missing one is [0, 1]. The ends are clamped to +-[`AXIS_LIMIT`], so the ticks of
/// the axis are computed from a finite range whose span is a sizeable part of its values.
pub(crate) fn padded(range: Option<(f64, f64)>, frac: f64) -> (f64, f64) {
    let Some((lo, hi)) = range.filter(|(lo, hi)| !lo.is_nan() && !hi.is_nan() && lo <= hi) else {
        return (0.0, 1.0);
    };
    let frac = frac.clamp(0.0, 1.0);
    let (lo, hi) = (
        lo.clamp(-AXIS_LIMIT, AXIS_LIMIT),
        hi.clamp(-AXIS_LIMIT, AXIS_LIMIT),
    );
    let span = hi - lo;
    let scale = lo.abs().max(hi.abs());
    if span <= 1e-9 * scale.max(1e-300) {
        let half = (0.05 * scale).max(0.05);
        return (lo - half, hi + half);
    }
    (lo - frac * span, hi + frac * span)
}

/// At most about `2 * buckets` points of (x, y) that keep each bucket's minimum and maximum in
/// order, so a long series keeps its envelope; non-finite points are dropped.
pub(crate) fn envelope(x: &[f64], y: &[f64], buckets: usize) -> Vec<(f64, f64)> {
    let n = x.len().min(y.len());
    let finite = |i: usize| x[i].is_finite() && y[i].is_finite();
    if n <= 2 * buckets.max(1) {
        return (0..n)
            .filter(|&i| finite(i))
            .map(|i| (x[i], y[i]))
            .collect();
    }
    let buckets = buckets.max(1);
    let mut out = Vec::with_capacity(2 * buckets + 2);
    for b in 0..buckets {
        let (s, e) = (b * n / buckets, ((b + 1) * n / buckets).min(n));
        let (mut imin, mut imax) = (None::<usize>, None::<usize>);
        for i in s..e {
            if !finite(i) {
                continue;
            }
            if imin.is_none_or(|j| y[i] < y[j]) {
                imin = Some(i);
            }
            if imax.is_none_or(|j| y[i] > y[j]) {
                imax = Some(i);
            }
        }
        match (imin, imax) {
            (Some(a), Some(b)) if a == b => out.push((x[a], y[a])),
            (Some(a), Some(b)) => {
                let (p, q) = if a < b { (a, b) } else { (b, a) };
                out.push((x[p], y[p]));
                out.push((x[q], y[q]));
            }
            _ => {}
        }
    }
    out
}

/// Every `k`-th point of a polyline (first and last kept) so it has at most about `max` points.
pub(crate) fn thin<T: Copy>(points: &[T], max: usize) -> Vec<T> {
    if points.len() <= max.max(2) {
        return points.to_vec();
    }
    let k = points.len().div_ceil(max.max(2));
    let mut out: Vec<T> = points.iter().step_by(k).copied().collect();
    if !(points.len() - 1).is_multiple_of(k) {
        out.push(points[points.len() - 1]);
    }
    out
}

/// The width of a chart area whose plotting area is square, given its height, margin and
/// label areas (bottom `x_label`, left `y_label`).
/// A square chart of the closed unit disk with axes Re R2 and Im R2 (compare and portrait).
pub(crate) fn disk_chart<'a, DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    margin: u32,
    x_label: u32,
    y_label: u32,
) -> io::Result<
    ChartContext<
        'a,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
> {
    let lim = 1.08;
    let mut chart = ChartBuilder::on(area)
        .margin(margin)
        .x_label_area_size(x_label)
        .y_label_area_size(y_label)
        .build_cartesian_2d(-lim..lim, -lim..lim)
        .io()?;
    let mut mesh = axes(&mut chart);
    grid(&mut mesh, 232, 255);
    mesh.max_light_lines(4)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .x_desc("Re R₂")
        .y_desc("Im R₂")
        .draw()
        .io()?;
    Ok(chart)
}

pub(crate) fn square_chart_width(height: u32, margin: u32, x_label: u32, y_label: u32) -> u32 {
    let side = height.saturating_sub(2 * margin + x_label);
    side + 2 * margin + y_label
}

pub use crate::cells::short_number;

/// A short number for labels and legends ([`short_number`]).
pub(crate) fn short(v: f64) -> String {
    short_number(v)
}

/// Formatter for axis ticks that avoids long float tails.
pub(crate) fn tick(v: &f64) -> String {
    // Key points computed as sums of steps can miss zero by round-off (-2.2e-16).
    if v.abs() < 1e-12 {
        return "0".into();
    }
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        return format!("{v:.1e}");
    }
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_ranges_are_finite_and_wide_for_extreme_values() {
        for (lo, hi) in [
            (-1e308, 1e308),
            (f64::NEG_INFINITY, f64::INFINITY),
            (1e300, 1e300 * (1.0 + 1e-15)),
            (-f64::MAX, -f64::MAX),
            (5e-324, 1e-323),
        ] {
            let (a, b) = padded(Some((lo, hi)), 0.05);
            assert!(
                a.is_finite() && b.is_finite() && a < b,
                "{lo}..{hi}: {a}..{b}"
            );
            // The span is a sizeable part of the values, so ticks advance.
            assert!(b - a >= 1e-9 * a.abs().max(b.abs()), "{lo}..{hi}: {a}..{b}");
        }
        assert_eq!(padded(Some((f64::NAN, 1.0)), 0.0), (0.0, 1.0));
    }

    #[test]
    fn padded_ranges_are_never_empty() {
        assert_eq!(padded(None, 0.05), (0.0, 1.0));
        let (lo, hi) = padded(Some((1.0, 1.0)), 0.05);
        assert!(lo < 1.0 && hi > 1.0);
        let (lo, hi) = padded(Some((0.0, 0.0)), 0.05);
        assert!(lo < 0.0 && hi > 0.0);
        let (lo, hi) = padded(Some((0.0, 2.0)), 0.05);
        assert!((lo + 0.1).abs() < 1e-12 && (hi - 2.1).abs() < 1e-12);
        let (lo, hi) = padded(Some((1e300, 1e300)), 0.05);
        assert!(lo < hi);
    }

    #[test]
    fn envelope_keeps_extremes_in_order() {
        let x: Vec<f64> = (0..10_000).map(|i| i as f64).collect();
        let y: Vec<f64> = x.iter().map(|t| (t * 0.01).sin()).collect();
        let e = envelope(&x, &y, 100);
        assert!(e.len() <= 200);
        assert!(e.windows(2).all(|w| w[0].0 < w[1].0));
        let max = e.iter().map(|p| p.1).fold(f64::MIN, f64::max);
        assert!((max - 1.0).abs() < 1e-4);
        assert!(envelope(&[], &[], 10).is_empty());
        assert_eq!(
            envelope(&[0.0, 1.0], &[f64::NAN, 2.0], 10),
            vec![(1.0, 2.0)]
        );
    }

    #[test]
    fn thinning_keeps_the_ends() {
        let p: Vec<usize> = (0..1001).collect();
        let t = thin(&p, 100);
        assert!(t.len() <= 102);
        assert_eq!(t[0], 0);
        assert_eq!(*t.last().unwrap(), 1000);
        assert_eq!(thin(&[1, 2], 1), vec![1, 2]);
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short(0.0), "0");
        assert_eq!(short(1.0), "1");
        assert_eq!(short(0.12345), "0.123");
        assert_eq!(short(123.456), "123");
        assert_eq!(short(1e-7), "1.00e-7");
        assert_eq!(tick(&0.5), "0.5");
        assert_eq!(tick(&-0.0), "0");
        assert_eq!(tick(&-2.2e-16), "0");
    }

    #[test]
    fn every_label_has_its_own_colour() {
        let colours: Vec<RGBColor> = LABELS.iter().map(|l| label_color(*l)).collect();
        for i in 0..colours.len() {
            for j in 0..i {
                assert_ne!(colours[i], colours[j]);
            }
        }
        assert_eq!(label_name(None), "failed");
    }
}
