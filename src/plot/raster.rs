//! The PNG backend of the pictures: plotters' `BitMapBackend` with a cheaper polygon fill that
//! makes the same pixels.
//!
//! Thick lines (the guide curves and the run's path of the phase portrait, a few thousand
//! points) are drawn by plotters as one polygon each, filled scan line by scan line: at each
//! line the crossing edges are sorted by where they cross, and plotters computes that position
//! (a division) inside every comparison of the sort and allocates a new edge list per line.
//! [`fill_polygon`] is the same algorithm with the same drawing calls in the same order (so the
//! same bytes): each crossing position is computed once per line and the edge list is kept.
//! Everything else is `BitMapBackend`'s own drawing.

use plotters::prelude::*;
use plotters_backend::{
    rasterizer, BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

/// `BitMapBackend` with [`fill_polygon`] for filled polygons and thick lines.
pub(crate) struct Raster<'a> {
    inner: BitMapBackend<'a>,
}

impl<'a> Raster<'a> {
    /// A PNG file at `path` of `size` pixels, written when presented.
    pub(crate) fn new(path: &'a std::path::Path, size: (u32, u32)) -> Self {
        Raster {
            inner: BitMapBackend::new(path, size),
        }
    }

    /// Drawing into `buffer` (RGB, `size` pixels).
    #[cfg(test)]
    pub(crate) fn with_buffer(buffer: &'a mut [u8], size: (u32, u32)) -> Self {
        Raster {
            inner: BitMapBackend::with_buffer(buffer, size),
        }
    }
}

type Failure<'a> = DrawingErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>;

impl<'a> DrawingBackend for Raster<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), Failure<'a>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), Failure<'a>> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), Failure<'a>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), Failure<'a>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), Failure<'a>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    /// plotters' default `draw_path`, whose thick lines go to [`fill_polygon`].
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), Failure<'a>> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        if style.stroke_width() == 1 {
            let mut begin: Option<BackendCoord> = None;
            for end in path {
                if let Some(begin) = begin {
                    self.inner.draw_line(begin, end, style)?;
                }
                begin = Some(end);
            }
            return Ok(());
        }
        let points: Vec<BackendCoord> = path.into_iter().collect();
        let outline = rasterizer::polygonize(&points, style.stroke_width());
        fill_polygon(&mut self.inner, &outline, &style.color())
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), Failure<'a>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), Failure<'a>> {
        let vertices: Vec<BackendCoord> = vert.into_iter().collect();
        fill_polygon(&mut self.inner, &vertices, style)
    }

    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> Result<(), Failure<'a>> {
        self.inner.draw_text(text, style, pos)
    }

    fn estimate_text_size<T: BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> Result<(u32, u32), Failure<'a>> {
        self.inner.estimate_text_size(text, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), Failure<'a>> {
        self.inner.blit_bitmap(pos, size, src)
    }
}

/// An edge of the polygon crossing the sweep: it spans `total` sweep lines, `epoch` of them
/// passed, from `begin` to `end` across the sweep; `at` is where it crosses the current line.
#[derive(Clone, Copy)]
struct Edge {
    epoch: u32,
    total: u32,
    begin: i32,
    end: i32,
    at: f64,
}

impl Edge {
    /// The edge from `from` to `to` along a sweep over the first coordinate (`None` if it
    /// lies on one sweep line).
    fn new(mut from: BackendCoord, mut to: BackendCoord) -> Option<Edge> {
        if from.0 == to.0 {
            return None;
        }
        if from.0 > to.0 {
            std::mem::swap(&mut from, &mut to);
        }
        Some(Edge {
            epoch: 0,
            total: (to.0 - from.0) as u32,
            begin: from.1,
            end: to.1,
            at: 0.0,
        })
    }

    /// Sweep lines left (plotters' `get_master_pos`).
    fn left(&self) -> i32 {
        (self.total - self.epoch) as i32
    }

    /// Where the edge crosses the current sweep line (plotters' `get_slave_pos`, the same
    /// operations).
    fn crossing(&self) -> f64 {
        f64::from(self.begin)
            + (i64::from(self.end - self.begin) * i64::from(self.epoch)) as f64
                / f64::from(self.total)
    }
}

/// The smallest and largest x and y of the vertices (`None` when there are none).
fn spans(vertices: &[BackendCoord]) -> Option<((i32, i32), (i32, i32))> {
    let (&(x, y), rest) = vertices.split_first()?;
    Some(
        rest.iter()
            .fold(((x, x), (y, y)), |((x0, x1), (y0, y1)), &(x, y)| {
                ((x0.min(x), x1.max(x)), (y0.min(y), y1.max(y)))
            }),
    )
}

/// The polygon's edges ordered by where they start along the sweep (stable, as plotters),
/// each from its lower to its higher end; coordinates swapped to (sweep, across) when the
/// sweep runs along y.
fn sweep_edges(vertices: &[BackendCoord], horizontal: bool) -> Vec<(BackendCoord, BackendCoord)> {
    let flip = |(x, y): BackendCoord| if horizontal { (x, y) } else { (y, x) };
    let mut edges: Vec<(BackendCoord, BackendCoord)> =
        vertices.windows(2).map(|w| (w[0], w[1])).collect();
    edges.push((vertices[vertices.len() - 1], vertices[0]));
    let mut edges: Vec<_> = edges.into_iter().map(|(a, b)| (flip(a), flip(b))).collect();
    edges.sort_by_key(|(a, b)| a.0.min(b.0));
    for e in &mut edges {
        if e.0 .0 > e.1 .0 {
            std::mem::swap(&mut e.0, &mut e.1);
        }
    }
    edges
}

/// plotters' `rasterizer::fill_polygon` (plotters-backend 0.3.7): the same drawing calls in
/// the same order, with each edge's crossing computed once per sweep line (see the module
/// doc).
pub(crate) fn fill_polygon<DB: DrawingBackend, S: BackendStyle>(
    back: &mut DB,
    vertices: &[BackendCoord],
    style: &S,
) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
    let Some((x_span, y_span)) = spans(vertices) else {
        return Ok(());
    };
    if x_span.0 == x_span.1 || y_span.0 == y_span.1 {
        return back.draw_line((x_span.0, y_span.0), (x_span.1, y_span.1), style);
    }
    let horizontal = x_span.1 - x_span.0 > y_span.1 - y_span.0;
    let edges = sweep_edges(vertices, horizontal);
    let (low, high) = if horizontal { x_span } else { y_span };
    let mut next = 0;
    let mut active: Vec<Edge> = Vec::new();
    for line in low..=high {
        active.retain_mut(|e| {
            let stays = e.left() > 0;
            e.epoch += u32::from(stays);
            stays
        });
        while next < edges.len() && edges[next].0 .0 <= line {
            active.extend(Edge::new(edges[next].0, edges[next].1));
            next += 1;
        }
        for e in &mut active {
            e.at = e.crossing();
        }
        // A stable sort by the crossing, as plotters' `sort` of its edges (never NaN).
        active.sort_by(|a, b| a.at.partial_cmp(&b.at).unwrap_or(std::cmp::Ordering::Equal));
        fill_line(back, &active, line, horizontal, style)?;
    }
    Ok(())
}

/// The spans of one sweep line between paired crossings (plotters' pairing and drawing).
fn fill_line<DB: DrawingBackend, S: BackendStyle>(
    back: &mut DB,
    active: &[Edge],
    line: i32,
    horizontal: bool,
    style: &S,
) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
    let (mut first, mut second): (Option<&Edge>, Option<&Edge>) = (None, None);
    for edge in active {
        if first.is_none() {
            first = Some(edge);
        } else if second.is_none() {
            second = Some(edge);
        }
        let (Some(a), Some(b)) = (first, second) else {
            continue;
        };
        if a.left() == 0 && b.left() != 0 {
            (first, second) = (Some(b), None);
            continue;
        }
        if a.left() != 0 && b.left() == 0 {
            second = None;
            continue;
        }
        let (from, to) = (a.at, b.at);
        (first, second) = (None, None);
        if a.left() == 0 && b.left() == 0 && to - from > 1.0 {
            continue;
        }
        draw_span(back, line, (from, to), horizontal, style)?;
    }
    Ok(())
}

/// One span of a sweep line with its two partly covered end pixels, as plotters draws it
/// (including its end alpha `to.floor() - to` for a vertical sweep, never positive, so that
/// pixel is not drawn).
fn draw_span<DB: DrawingBackend, S: BackendStyle>(
    back: &mut DB,
    line: i32,
    (from, to): (f64, f64),
    horizontal: bool,
    style: &S,
) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
    let color = style.color();
    if horizontal {
        back.draw_line(
            (line, from.ceil() as i32),
            (line, to.floor() as i32),
            &color,
        )?;
        back.draw_pixel((line, from.floor() as i32), color.mix(from.ceil() - from))?;
        back.draw_pixel((line, to.ceil() as i32), color.mix(to - to.floor()))
    } else {
        back.draw_line(
            (from.ceil() as i32, line),
            (to.floor() as i32, line),
            &color,
        )?;
        back.draw_pixel((from.floor() as i32, line), color.mix(from.ceil() - from))?;
        back.draw_pixel((to.ceil() as i32, line), color.mix(to.floor() - to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    const SIZE: (u32, u32) = (160, 120);

    /// The pixels of `shapes` drawn in order on plotters' own `BitMapBackend` and on
    /// [`Raster`].
    fn both(shapes: &[Shape]) -> (Vec<u8>, Vec<u8>) {
        let mut plain = vec![255u8; (SIZE.0 * SIZE.1 * 3) as usize];
        let mut fast = plain.clone();
        {
            let mut b = BitMapBackend::with_buffer(&mut plain, SIZE);
            shapes.iter().for_each(|s| s.draw(&mut b));
        }
        {
            let mut b = Raster::with_buffer(&mut fast, SIZE);
            shapes.iter().for_each(|s| s.draw(&mut b));
        }
        (plain, fast)
    }

    /// A shape drawn on a backend.
    enum Shape {
        Polygon(Vec<BackendCoord>, BackendColor),
        Path(Vec<BackendCoord>, BackendColor, u32),
    }

    impl Shape {
        fn draw<DB: DrawingBackend>(&self, b: &mut DB) {
            match self {
                Shape::Polygon(v, c) => b.fill_polygon(v.iter().copied(), c).unwrap(),
                Shape::Path(v, c, w) => {
                    let style = ShapeStyle {
                        color: RGBAColor(c.rgb.0, c.rgb.1, c.rgb.2, c.alpha),
                        filled: false,
                        stroke_width: *w,
                    };
                    b.draw_path(v.iter().copied(), &style).unwrap()
                }
            }
        }
    }

    type Rng = rand_chacha::ChaCha8Rng;

    fn random_points(rng: &mut Rng, n: usize, spread: i32) -> Vec<BackendCoord> {
        (0..n)
            .map(|_| {
                (
                    rng.random_range(-spread..SIZE.0 as i32 + spread),
                    rng.random_range(-spread..SIZE.1 as i32 + spread),
                )
            })
            .collect()
    }

    fn random_color(rng: &mut Rng) -> BackendColor {
        let alpha = [1.0, 0.85, 0.5, 0.1, 0.0][rng.random_range(0..5)];
        BackendColor {
            alpha,
            rgb: (
                rng.random_range(0..=255),
                rng.random_range(0..=255),
                rng.random_range(0..=255),
            ),
        }
    }

    #[test]
    fn polygons_and_thick_lines_have_plotters_pixels() {
        let mut rng = Rng::seed_from_u64(7);
        for case in 0..400 {
            let n = [1, 2, 3, 4, 7, 30, 300][case % 7];
            let spread = [0, 20, 200][case % 3];
            let shapes: Vec<Shape> = (0..3)
                .map(|k| {
                    let pts = random_points(&mut rng, n, spread);
                    let c = random_color(&mut rng);
                    if k == 1 {
                        Shape::Path(pts, c, rng.random_range(1..9))
                    } else {
                        Shape::Polygon(pts, c)
                    }
                })
                .collect();
            let (plain, fast) = both(&shapes);
            assert!(plain == fast, "case {case}");
        }
    }

    #[test]
    fn a_spiral_of_thick_line_has_plotters_pixels() {
        // Many edges cross each scan line (the portrait's guide curves), in both sweeps.
        for (w, h) in [(1.0, 1.0), (1.0, 0.4), (0.4, 1.0)] {
            let spiral: Vec<BackendCoord> = (0..2000)
                .map(|k| {
                    let s = k as f64 * 0.05;
                    let r = 55.0 * (1.0 - k as f64 / 2400.0);
                    (
                        (80.0 + w * r * s.cos()) as i32,
                        (60.0 + h * r * s.sin()) as i32,
                    )
                })
                .collect();
            let color = BackendColor {
                alpha: 1.0,
                rgb: (95, 120, 160),
            };
            let (plain, fast) = both(&[Shape::Path(spiral, color, 4)]);
            assert!(plain == fast);
            assert!(plain.iter().any(|&v| v != 255), "nothing drawn");
        }
    }
}
