//! The PDF page of a picture: its marks written as PDF paths directly, its text through
//! `svg2pdf`.
//!
//! The SVG that plotters writes has five kinds of marks (`rect`, `circle`, `line`, `polyline`,
//! `polygon`, each one tag with integer pixel coordinates) and `text`. Going through `usvg`, every
//! mark is parsed, styled and converted on its own: a picture of 12,000 token dots spent a third
//! of a short run there. Here the marks are read straight from their tags and written as PDF path
//! operators in the picture's pixel coordinates, under one transform
//! `[72 / dpi, 0, 0, -72 / dpi, 0, 72 h / dpi]` (pixels to points, y downwards as in the SVG); a
//! circle of radius r is four cubic Béziers with control points at kappa r,
//! kappa = 4 (sqrt 2 - 1) / 3 (radial error 2.7e-4 r). The text alone (a few dozen tags) goes
//! through `svg2pdf` as a form XObject drawn over the marks, so the font is embedded and the text
//! stays text as before. A mark's opacity a < 1 is folded into its colours over white as
//! the vector copies' `opaque_over_white` does. Styles follow SVG's defaults: stroke width 1, butt
//! caps, miter joins with limit 4, non-zero fill.
//!
//! The text is drawn above all marks: plotters draws a legend's box before its labels and no
//! picture of tokdyn draws marks over text, so the page looks the same. An SVG with any other
//! element (an embedded image, a group) is converted whole by `svg2pdf` instead
//! ([`marks_and_text`] returns `None`).

use std::collections::HashMap;

use pdf_writer::{Content, Finish, Name, Pdf, Rect, Ref, TextStr};

/// kappa = 4 (sqrt 2 - 1) / 3: the control-point distance of a quarter circle of radius 1.
const KAPPA: f32 = 0.552_284_8;

/// An 8-bit RGB colour.
pub type Rgb = [u8; 3];

/// The geometry of one mark, in pixels (y downwards).
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// The rectangle from the corner (x, y), w wide and h high.
    Rect { x: f32, y: f32, w: f32, h: f32 },
    /// The circle about (cx, cy) of radius r.
    Circle { cx: f32, cy: f32, r: f32 },
    /// An open polyline (an SVG `line` is one of two points).
    Polyline(Vec<(f32, f32)>),
    /// A closed, filled polygon.
    Polygon(Vec<(f32, f32)>),
}

/// One mark: its shape, its fill colour and its stroke (colour and width), opaque.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    /// Where it is.
    pub shape: Shape,
    /// The fill colour (none: not filled).
    pub fill: Option<Rgb>,
    /// The stroke colour and width in pixels (none: not stroked).
    pub stroke: Option<(Rgb, f32)>,
}

/// The marks of a plotters SVG in drawing order, and the SVG of its text alone (the same
/// `<svg>` header, the `text` elements, `</svg>`); `None` when the SVG holds anything else or a
/// mark does not parse.
pub fn marks_and_text(svg: &str) -> Option<(Vec<Mark>, String)> {
    let mut marks = Vec::new();
    let mut text = String::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        if !rest[..start].trim().is_empty() {
            return None;
        }
        rest = &rest[start..];
        let end = rest.find('>')? + 1;
        let tag = &rest[..end];
        let name = tag[1..]
            .split(|c: char| c.is_whitespace() || c == '>' || (c == '/' && !tag.starts_with("</")))
            .next()?;
        match name {
            "svg" => text.push_str(tag),
            "/svg" => {
                text.push_str(tag);
                rest = &rest[end..];
                break;
            }
            "text" => {
                let close = rest.find("</text>")? + "</text>".len();
                text.push_str(&rest[..close]);
                rest = &rest[close..];
                continue;
            }
            "rect" | "circle" | "line" | "polyline" | "polygon" => {
                if let Some(mark) = mark(name, tag)? {
                    marks.push(mark);
                }
            }
            _ => return None,
        }
        rest = &rest[end..];
    }
    if !rest.trim().is_empty() || !text.starts_with("<svg") || !text.ends_with("</svg>") {
        return None;
    }
    Some((marks, text))
}

/// The mark of one tag (`Some(None)`: nothing to paint); `None` when it does not parse.
fn mark(name: &str, tag: &str) -> Option<Option<Mark>> {
    let number = |key: &str| -> Option<f32> { attribute(tag, key)?.parse().ok() };
    let shape = match name {
        "rect" => Shape::Rect {
            x: number("x")?,
            y: number("y")?,
            w: number("width")?,
            h: number("height")?,
        },
        "circle" => Shape::Circle {
            cx: number("cx")?,
            cy: number("cy")?,
            r: number("r")?,
        },
        "line" => Shape::Polyline(vec![
            (number("x1")?, number("y1")?),
            (number("x2")?, number("y2")?),
        ]),
        "polyline" => Shape::Polyline(points(attribute(tag, "points")?)?),
        _ => Shape::Polygon(points(attribute(tag, "points")?)?),
    };
    let alpha = match attribute(tag, "opacity") {
        Some(a) => a.parse::<f64>().ok()?,
        None => 1.0,
    };
    let empty = match &shape {
        Shape::Polyline(p) => p.len() < 2,
        Shape::Polygon(p) => p.len() < 3,
        _ => false,
    };
    if alpha <= 0.0 || empty {
        return Some(None);
    }
    let alpha = alpha.min(1.0);
    // SVG's defaults: fill black (none for a line or polyline), stroke none, width 1.
    let default_fill = if matches!(name, "line" | "polyline") {
        "none"
    } else {
        "#000000"
    };
    let fill = paint(attribute(tag, "fill").unwrap_or(default_fill), alpha)?;
    let width = match attribute(tag, "stroke-width") {
        Some(w) => w.parse::<f32>().ok()?,
        None => 1.0,
    };
    let stroke = paint(attribute(tag, "stroke").unwrap_or("none"), alpha)?
        .filter(|_| width > 0.0)
        .map(|c| (c, width));
    if fill.is_none() && stroke.is_none() {
        return Some(None);
    }
    Some(Some(Mark {
        shape,
        fill,
        stroke,
    }))
}

/// The value of attribute `key` of `tag` (a whole-word match, before the closing quote).
fn attribute<'a>(tag: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = tag[from..].find(key) {
        let at = from + i;
        let before = tag[..at].chars().next_back();
        let after = &tag[at + key.len()..];
        if before.is_some_and(char::is_whitespace) {
            if let Some(value) = after.strip_prefix("=\"") {
                return value.find('"').map(|end| &value[..end]);
            }
        }
        from = at + key.len();
    }
    None
}

/// `x,y x,y ...` as points.
fn points(text: &str) -> Option<Vec<(f32, f32)>> {
    text.split_whitespace()
        .map(|pair| {
            let (x, y) = pair.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

/// A paint value: `none`, or `#RRGGBB` at opacity `alpha` over white.
fn paint(value: &str, alpha: f64) -> Option<Option<Rgb>> {
    if value == "none" {
        return Some(None);
    }
    hex_over_white(value.strip_prefix('#')?, alpha).map(Some)
}

/// The colour `RRGGBB` (hexadecimal) at opacity `alpha` over white:
/// c' = round(alpha c + (1 - alpha) 255) per channel; `None` when it is not six hex digits.
pub fn hex_over_white(hex: &str, alpha: f64) -> Option<Rgb> {
    if hex.len() != 6 || !hex.is_ascii() {
        return None;
    }
    let mut rgb = [0u8; 3];
    for (i, c) in rgb.iter_mut().enumerate() {
        let v = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()? as f64;
        *c = (alpha * v + (1.0 - alpha) * 255.0)
            .round()
            .clamp(0.0, 255.0) as u8;
    }
    Some(rgb)
}

/// The one-page PDF of `marks` drawn on a page of `size` pixels at `dpi`, with the text
/// XObject of `text` (a chunk from `svg2pdf::to_chunk` and the reference of its XObject) over
/// them.
pub fn page(
    marks: &[Mark],
    text: Option<(pdf_writer::Chunk, Ref)>,
    size: (u32, u32),
    dpi: f64,
) -> Vec<u8> {
    let points = 72.0 / dpi;
    let (width, height) = (
        (size.0 as f64 * points) as f32,
        (size.1 as f64 * points) as f32,
    );
    let points = points as f32;
    let mut next = Ref::new(1);
    let catalog = next.bump();
    let tree = next.bump();
    let page_ref = next.bump();
    let content_ref = next.bump();
    let mut pdf = Pdf::new();
    // The text's objects renumbered after ours, in the order the chunk lists them.
    let text = text.map(|(chunk, xobject)| {
        let mut map = HashMap::new();
        let chunk = chunk.renumber(|old| *map.entry(old).or_insert_with(|| next.bump()));
        let xobject = map.get(&xobject).copied().unwrap_or(xobject);
        (chunk, xobject)
    });
    pdf.catalog(catalog).pages(tree);
    pdf.pages(tree).count(1).kids([page_ref]);
    let mut content = Content::new();
    content.save_state();
    content.transform([points, 0.0, 0.0, -points, 0.0, height]);
    content.set_miter_limit(4.0);
    draw_marks(&mut content, marks);
    content.restore_state();
    if text.is_some() {
        content.save_state();
        content.transform([width, 0.0, 0.0, height, 0.0, 0.0]);
        content.x_object(Name(b"T0"));
        content.restore_state();
    }
    let mut page = pdf.page(page_ref);
    page.media_box(Rect::new(0.0, 0.0, width, height));
    page.parent(tree);
    page.contents(content_ref);
    if let Some((_, xobject)) = &text {
        page.resources().x_objects().pair(Name(b"T0"), *xobject);
    }
    page.finish();
    pdf.stream(content_ref, &content.finish());
    if let Some((chunk, _)) = &text {
        pdf.extend(chunk);
    }
    pdf.document_info(next.bump())
        .producer(TextStr("tokdyn (pdf-writer, svg2pdf)"));
    pdf.finish()
}

/// The path operators of every mark, setting a colour or a width only when it changes.
fn draw_marks(content: &mut Content, marks: &[Mark]) {
    let mut fill_now: Option<Rgb> = None;
    let mut stroke_now: Option<Rgb> = None;
    let mut width_now = 1.0f32;
    for m in marks {
        if let Some(c) = m.fill.filter(|c| fill_now != Some(*c)) {
            content.set_fill_rgb(unit(c[0]), unit(c[1]), unit(c[2]));
            fill_now = Some(c);
        }
        if let Some((c, w)) = m.stroke {
            if stroke_now != Some(c) {
                content.set_stroke_rgb(unit(c[0]), unit(c[1]), unit(c[2]));
                stroke_now = Some(c);
            }
            if width_now != w {
                content.set_line_width(w);
                width_now = w;
            }
        }
        trace(content, &m.shape);
        match (m.fill.is_some(), m.stroke.is_some()) {
            (true, true) => content.fill_nonzero_and_stroke(),
            (true, false) => content.fill_nonzero(),
            _ => content.stroke(),
        };
    }
}

fn unit(v: u8) -> f32 {
    v as f32 / 255.0
}

/// The path of one shape.
fn trace(content: &mut Content, shape: &Shape) {
    match shape {
        Shape::Rect { x, y, w, h } => {
            content.rect(*x, *y, *w, *h);
        }
        Shape::Circle { cx, cy, r } => {
            let k = KAPPA * r;
            content.move_to(cx + r, *cy);
            content.cubic_to(cx + r, cy + k, cx + k, cy + r, *cx, cy + r);
            content.cubic_to(cx - k, cy + r, cx - r, cy + k, cx - r, *cy);
            content.cubic_to(cx - r, cy - k, cx - k, cy - r, *cx, cy - r);
            content.cubic_to(cx + k, cy - r, cx + r, cy - k, cx + r, *cy);
            content.close_path();
        }
        Shape::Polyline(points) | Shape::Polygon(points) => {
            let mut it = points.iter();
            if let Some(&(x, y)) = it.next() {
                content.move_to(x, y);
            }
            for &(x, y) in it {
                content.line_to(x, y);
            }
            if matches!(shape, Shape::Polygon(_)) {
                content.close_path();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::prelude::*;
    use rand::{RngExt, SeedableRng};
    use svg2pdf::usvg;

    /// An SVG drawn by plotters' SVG backend with `count` random marks of every kind, some
    /// translucent, and some text among them.
    fn random_picture(count: usize, seed: u64) -> String {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (400, 300)).into_drawing_area();
            root.fill(&WHITE).unwrap();
            for i in 0..count {
                let c = RGBColor(rng.random(), rng.random(), rng.random());
                let alpha = [1.0, 0.85, 0.3][i % 3];
                let style = c.mix(alpha);
                let (x, y) = (rng.random_range(0..400), rng.random_range(0..300));
                let p = |r: &mut rand_chacha::ChaCha8Rng| {
                    (r.random_range(0..400), r.random_range(0..300))
                };
                let width = rng.random_range(1..4);
                match i % 6 {
                    0 => root
                        .draw(&Circle::new((x, y), rng.random_range(1..9), style.filled()))
                        .unwrap(),
                    1 => root
                        .draw(&Circle::new((x, y), 5, style.stroke_width(width)))
                        .unwrap(),
                    2 => root
                        .draw(&Rectangle::new([(x, y), p(&mut rng)], style.filled()))
                        .unwrap(),
                    3 => root
                        .draw(&PathElement::new(
                            vec![(x, y), p(&mut rng), p(&mut rng)],
                            style.stroke_width(width),
                        ))
                        .unwrap(),
                    4 => root
                        .draw(&Polygon::new(
                            vec![(x, y), p(&mut rng), p(&mut rng)],
                            style.filled(),
                        ))
                        .unwrap(),
                    _ => root
                        .draw(&Text::new("a < b", (x, y), ("sans-serif", 12)))
                        .unwrap(),
                }
            }
            root.present().unwrap();
        }
        svg
    }

    /// The fill colour, the stroke (colour, width) and the bounding box of a usvg path.
    type Seen = (Option<Rgb>, Option<(Rgb, f32)>, [f32; 4]);

    fn rgb(paint: &usvg::Paint) -> Rgb {
        match paint {
            usvg::Paint::Color(c) => [c.red, c.green, c.blue],
            _ => panic!("a plain colour"),
        }
    }

    /// Every path of `usvg`'s tree of the SVG, a translucent mark's colours blended over
    /// white from the opacity of its group as usvg reads it.
    fn seen_by_usvg(svg: &str) -> Vec<Seen> {
        let tree = usvg::Tree::from_str(svg, &usvg::Options::default()).unwrap();
        let mut out = Vec::new();
        for node in tree.root().children() {
            let (path, alpha) = match node {
                usvg::Node::Path(p) => (p.as_ref(), 1.0),
                usvg::Node::Group(g) => match g.children() {
                    [usvg::Node::Path(p)] => (p.as_ref(), g.opacity().get() as f64),
                    _ => continue,
                },
                _ => continue,
            };
            let blend =
                |c: Rgb| c.map(|v| (alpha * v as f64 + (1.0 - alpha) * 255.0).round() as u8);
            let b = path.data().bounds();
            out.push((
                path.fill().map(|f| blend(rgb(f.paint()))),
                path.stroke()
                    .map(|s| (blend(rgb(s.paint())), s.width().get())),
                [b.left(), b.top(), b.right(), b.bottom()],
            ));
        }
        out
    }

    fn bounds(shape: &Shape) -> [f32; 4] {
        match shape {
            Shape::Rect { x, y, w, h } => [*x, *y, x + w, y + h],
            Shape::Circle { cx, cy, r } => [cx - r, cy - r, cx + r, cy + r],
            Shape::Polyline(p) | Shape::Polygon(p) => {
                let xs = p.iter().map(|q| q.0);
                let ys = p.iter().map(|q| q.1);
                [
                    xs.clone().fold(f32::INFINITY, f32::min),
                    ys.clone().fold(f32::INFINITY, f32::min),
                    xs.fold(f32::NEG_INFINITY, f32::max),
                    ys.fold(f32::NEG_INFINITY, f32::max),
                ]
            }
        }
    }

    #[test]
    fn the_marks_read_from_the_tags_are_the_paths_usvg_reads() {
        for seed in 0..5 {
            let svg = random_picture(300, seed);
            let (marks, text) = marks_and_text(&svg).expect("plotters' SVG is read");
            let usvg = seen_by_usvg(&svg);
            // usvg drops degenerate shapes (a zero-width rectangle, a flat polygon) that paint
            // nothing; the rest must agree one to one, in order.
            let mut k = 0;
            for m in &marks {
                let b = bounds(&m.shape);
                let Some(&(fill, stroke, ub)) = usvg.get(k) else {
                    panic!("seed {seed}: usvg has fewer paths");
                };
                let close = b.iter().zip(&ub).all(|(a, u)| (a - u).abs() < 1e-3);
                // usvg keeps an opacity in 8 bits: a channel may differ by one.
                let near = |a: Rgb, b: Rgb| a.iter().zip(&b).all(|(x, y)| x.abs_diff(*y) <= 1);
                let same_fill = match (fill, m.fill) {
                    (Some(a), Some(b)) => near(a, b),
                    (a, b) => a == b,
                };
                let same_stroke = match (stroke, m.stroke) {
                    (Some((a, wa)), Some((b, wb))) => near(a, b) && wa == wb,
                    (a, b) => a == b,
                };
                if !close || !same_fill || !same_stroke {
                    let flat = b[0] == b[2] || b[1] == b[3];
                    assert!(flat, "seed {seed}: {m:?} vs {:?}", usvg[k]);
                    continue;
                }
                k += 1;
            }
            assert_eq!(k, usvg.len(), "seed {seed}: every usvg path matched");
            assert!(
                k + 5 >= marks.len(),
                "seed {seed}: {k} of {} marks",
                marks.len()
            );
            assert_eq!(text.matches("<text").count(), 50);
            assert!(text.starts_with("<svg") && text.ends_with("</svg>"));
            assert!(!text.contains("<circle") && !text.contains("<rect"));
        }
    }

    #[test]
    fn other_elements_leave_the_whole_svg_to_svg2pdf() {
        let svg = random_picture(12, 1);
        assert!(marks_and_text(&svg).is_some());
        for extra in [
            "<image href=\"x.png\"/>",
            "<g>",
            "<!-- note -->",
            "stray text",
        ] {
            let changed = svg.replacen("<rect", &format!("{extra}<rect"), 1);
            assert!(marks_and_text(&changed).is_none(), "{extra}");
        }
        let bad = svg.replacen("cx=\"", "cx=\"x", 1);
        assert!(marks_and_text(&bad).is_none());
    }

    #[test]
    fn the_page_paints_each_mark_once_and_is_the_same_bytes_every_time() {
        let svg = random_picture(120, 7);
        let (marks, _) = marks_and_text(&svg).unwrap();
        let a = page(&marks, None, (400, 300), 100.0);
        assert_eq!(a, page(&marks, None, (400, 300), 100.0));
        let text = String::from_utf8_lossy(&a).to_string();
        assert!(
            text.contains("/MediaBox [0 0 288 216]"),
            "400 x 300 px at 100 dpi"
        );
        let paints = text
            .lines()
            .filter(|l| matches!(*l, "f" | "S" | "B"))
            .count();
        assert_eq!(paints, marks.len());
    }

    #[test]
    fn the_four_cubics_stay_within_3e_4_of_the_circle() {
        // The Bezier from (1, 0) to (0, 1) with control points (1, kappa), (kappa, 1).
        let k = KAPPA as f64;
        let worst = (0..=100)
            .map(|i| {
                let t = i as f64 / 100.0;
                let s = 1.0 - t;
                let x = s * s * s + 3.0 * s * s * t + 3.0 * s * t * t * k;
                let y = 3.0 * s * s * t * k + 3.0 * s * t * t + t * t * t;
                ((x * x + y * y).sqrt() - 1.0).abs()
            })
            .fold(0.0, f64::max);
        assert!(worst < 3e-4 && worst > 2e-4, "{worst}");
    }
}
