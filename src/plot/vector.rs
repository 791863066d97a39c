//! The vector files of a picture: the SVG with its physical size, and a PDF with the font
//! embedded.
//!
//! A picture of `w x h` pixels printed `W` inches wide has `dpi = w / W` pixels per inch; the
//! PDF page is `72 w / dpi x 72 h / dpi` points (`W` inches wide, same aspect), and the SVG gets
//! `width="W in"`, `height="(h / dpi) in"` with the pixel `viewBox` kept. The PDF is made from
//! the picture's own SVG: its marks written as PDF paths directly (`plot::pdf_marks`), its
//! text converted by `svg2pdf` (through `usvg`), with DejaVu Sans — the font of the
//! PNG — given to it from the bytes the project bundles (no system font is looked up); the text
//! stays text, and the glyphs used are embedded as a subset (a TrueType `/FontFile2`).
//!
//! Translucent marks (`opacity = a < 1`, e.g. the token dots) go into the PDF as their colour
//! over white, c' = a c + (1 - a) 255 per channel ([`opaque_over_white`]): `svg2pdf` would make
//! one transparency group per mark (megabytes for a few thousand tokens), listed in an order that
//! changes from run to run, and the PDF must be the same bytes for the same run. The content
//! streams are left uncompressed: `svg2pdf` deflates at a fixed level that took a third of a
//! short run's time; the files are a few times larger (kilobytes to a few megabytes).

use std::io;
use std::sync::{Arc, OnceLock};

use svg2pdf::usvg::{self, fontdb};

use super::{pdf_marks, Figure};

/// The family name of the bundled font, as its name table gives it.
const FAMILY: &str = "DejaVu Sans";

/// The font database with the bundled DejaVu Sans (regular, bold, oblique) only; the generic
/// families all resolve to it.
fn fonts() -> Arc<fontdb::Database> {
    static DB: OnceLock<Arc<fontdb::Database>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut db = fontdb::Database::new();
        for bytes in [
            dejavu::sans::regular(),
            dejavu::sans::bold(),
            dejavu::sans::oblique(),
        ] {
            db.load_font_data(bytes.to_vec());
        }
        db.set_sans_serif_family(FAMILY);
        db.set_serif_family(FAMILY);
        db.set_monospace_family(FAMILY);
        db.set_cursive_family(FAMILY);
        db.set_fantasy_family(FAMILY);
        Arc::new(db)
    })
    .clone()
}

/// Pixels per inch of a picture `width` pixels wide printed at the width of `figure`.
pub fn dpi(width: u32, figure: Figure) -> f64 {
    width.max(1) as f64 / figure.width_inches()
}

/// The PDF of an SVG of `size` pixels, at the physical size of `figure`: the marks written
/// directly and the text through `svg2pdf` (`plot::pdf_marks`), or the whole SVG through
/// `svg2pdf` when it holds elements other than plotters' marks and text.
pub fn svg_to_pdf(svg: &str, size: (u32, u32), figure: Figure) -> io::Result<Vec<u8>> {
    let dpi = dpi(size.0, figure);
    let Some((marks, text)) = pdf_marks::marks_and_text(svg) else {
        return whole_svg_to_pdf(svg, dpi);
    };
    let text = if text.contains("<text") {
        let tree = parse(&opaque_over_white(&text))?;
        let chunk = svg2pdf::to_chunk(&tree, conversion())
            .map_err(|e| io::Error::other(format!("PDF conversion failed: {e}")))?;
        Some(chunk)
    } else {
        None
    };
    Ok(pdf_marks::page(&marks, text, size, dpi))
}

/// The PDF of a whole SVG converted by `svg2pdf` (its marks too).
fn whole_svg_to_pdf(svg: &str, dpi: f64) -> io::Result<Vec<u8>> {
    let tree = parse(&opaque_over_white(svg))?;
    let page = svg2pdf::PageOptions { dpi: dpi as f32 };
    svg2pdf::to_pdf(&tree, conversion(), page)
        .map_err(|e| io::Error::other(format!("PDF conversion failed: {e}")))
}

/// The `usvg` tree of an SVG, its text set in the bundled font.
fn parse(svg: &str) -> io::Result<usvg::Tree> {
    let options = usvg::Options {
        font_family: FAMILY.to_string(),
        fontdb: fonts(),
        ..usvg::Options::default()
    };
    usvg::Tree::from_str(svg, &options)
        .map_err(|e| io::Error::other(format!("PDF: the SVG does not parse: {e}")))
}

/// `svg2pdf`'s options: streams left uncompressed (see the module's documentation).
fn conversion() -> svg2pdf::ConversionOptions {
    svg2pdf::ConversionOptions {
        compress: false,
        ..svg2pdf::ConversionOptions::default()
    }
}

/// The SVG with every `opacity="a"` (a < 1) of an element folded into its `fill` and `stroke`
/// colours (`#RRGGBB`) over a white ground, and the opacity set to 1.
///
/// One pass that writes each tag straight into the output (a picture has thousands of
/// translucent dots): the first ` opacity="a"` of a tag becomes ` opacity="1"`, then its first
/// ` fill="#RRGGBB"` and first ` stroke="#RRGGBB"` are blended; other tags and the text between
/// tags are copied.
pub fn opaque_over_white(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('>')
            .map_or(rest.len(), |e| start + e + 1);
        push_opaque_element(&mut out, &rest[start..end]);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Appends one element's tag to `out` with its opacity folded into its colours (unchanged
/// when opaque).
fn push_opaque_element(out: &mut String, tag: &str) {
    const OPACITY: &str = " opacity=\"";
    let Some((from, value)) = attribute_span(tag, OPACITY) else {
        out.push_str(tag);
        return;
    };
    let alpha = match value.parse::<f64>() {
        Ok(a) if (0.0..1.0).contains(&a) => a,
        _ => {
            out.push_str(tag);
            return;
        }
    };
    let base = out.len();
    out.push_str(&tag[..from]);
    out.push('1');
    out.push_str(&tag[from + value.len()..]);
    for key in [" fill=\"#", " stroke=\"#"] {
        let Some((at, hex)) = attribute_span(&out[base..], key) else {
            continue;
        };
        let Some(blended) = blend_over_white(hex, alpha) else {
            continue;
        };
        // Six ASCII digits replace six ASCII digits.
        if let Ok(blended) = std::str::from_utf8(&blended) {
            let at = base + at;
            out.replace_range(at..at + 6, blended);
        }
    }
}

/// The value of the first attribute that starts with `key` (which ends with the opening quote
/// or `#`), up to the closing quote, and where the value starts in `tag`.
fn attribute_span<'a>(tag: &'a str, key: &str) -> Option<(usize, &'a str)> {
    let from = tag.find(key)? + key.len();
    let len = tag[from..].find('"')?;
    Some((from, &tag[from..from + len]))
}

/// `RRGGBB` at opacity `alpha` over white, as `RRGGBB` (upper-case hexadecimal digits).
fn blend_over_white(hex: &str, alpha: f64) -> Option<[u8; 6]> {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let rgb = pdf_marks::hex_over_white(hex, alpha)?;
    let mut out = [0u8; 6];
    for (i, v) in rgb.into_iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(v >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(v & 15)];
    }
    Some(out)
}

/// The SVG with its `width` and `height` in inches (the physical size of `figure`) instead of
/// pixels; the `viewBox` keeps the pixel coordinates.
pub fn with_physical_size(svg: &str, size: (u32, u32), figure: Figure) -> String {
    let pixels = format!("<svg width=\"{}\" height=\"{}\" ", size.0, size.1);
    let dpi = dpi(size.0, figure);
    let inches = format!(
        "<svg width=\"{}in\" height=\"{}in\" ",
        round4(size.0 as f64 / dpi),
        round4(size.1 as f64 / dpi)
    );
    match svg.strip_prefix(&pixels) {
        Some(rest) => inches + rest,
        None => svg.to_string(),
    }
}

/// `v` to 4 decimals, without trailing zeros.
fn round4(v: f64) -> String {
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first implementation of [`opaque_over_white`] (a new string per tag), as the
    /// reference of the one-pass one.
    fn opaque_over_white_reference(svg: &str) -> String {
        fn attribute<'a>(tag: &'a str, key: &str) -> Option<&'a str> {
            let from = tag.find(key)? + key.len();
            let len = tag[from..].find('"')?;
            Some(&tag[from..from + len])
        }
        fn blend(hex: &str, alpha: f64) -> Option<String> {
            if hex.len() != 6 || !hex.is_ascii() {
                return None;
            }
            let mut out = String::new();
            for i in 0..3 {
                let c = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()? as f64;
                let v = (alpha * c + (1.0 - alpha) * 255.0)
                    .round()
                    .clamp(0.0, 255.0) as u8;
                out.push_str(&format!("{v:02X}"));
            }
            Some(out)
        }
        fn element(tag: &str) -> String {
            let Some(alpha) = attribute(tag, " opacity=\"").and_then(|v| v.parse::<f64>().ok())
            else {
                return tag.to_string();
            };
            if !(0.0..1.0).contains(&alpha) {
                return tag.to_string();
            }
            let old = format!(
                " opacity=\"{}\"",
                attribute(tag, " opacity=\"").unwrap_or_default()
            );
            let mut tag = tag.replacen(&old, " opacity=\"1\"", 1);
            for key in [" fill=\"#", " stroke=\"#"] {
                let Some(hex) = attribute(&tag, key) else {
                    continue;
                };
                let Some(blended) = blend(hex, alpha) else {
                    continue;
                };
                tag = tag.replacen(&format!("{key}{hex}\""), &format!("{key}{blended}\""), 1);
            }
            tag
        }
        // Cut at every '>' (not by searching tag starts as the one pass does): each piece is
        // text, then from its first '<' on, one tag.
        let mut out = String::new();
        for piece in svg.split_inclusive('>') {
            match piece.find('<') {
                Some(start) => {
                    out.push_str(&piece[..start]);
                    out.push_str(&element(&piece[start..]));
                }
                None => out.push_str(piece),
            }
        }
        out
    }

    #[test]
    fn one_pass_opacity_folding_matches_the_reference_on_random_tags() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let pieces = [
            "<circle",
            "<rect",
            "<text",
            "</text>",
            " cx=\"1\"",
            " opacity=\"",
            "0.85",
            "1",
            "0",
            "-0.5",
            "1.5",
            "x",
            "\"",
            " fill=\"#",
            " stroke=\"#",
            " fill=\"none\"",
            " stroke-opacity=\"0.5\"",
            " fill-opacity=\"0.2\"",
            "CF4B17",
            "ff00aa",
            "12345",
            "1234567",
            "zz0000",
            "é0000",
            "/>",
            ">",
            "<",
            " ",
            "a > b",
            "\n",
            " opacity=\"0.3\"",
        ];
        for _ in 0..20_000 {
            let len = rng.random_range(0..24);
            let svg: String = (0..len)
                .map(|_| pieces[rng.random_range(0..pieces.len())])
                .collect();
            assert_eq!(
                opaque_over_white(&svg),
                opaque_over_white_reference(&svg),
                "{svg}"
            );
        }
        let dots = "<circle cx=\"189\" cy=\"483\" r=\"8\" opacity=\"0.85\" fill=\"#CF4B17\" stroke=\"none\" stroke-width=\"1\"/>\n";
        assert_eq!(opaque_over_white(dots), opaque_over_white_reference(dots));
        assert!(opaque_over_white(dots).contains("opacity=\"1\" fill=\"#D6663A\""));
    }

    #[test]
    fn translucent_marks_become_their_colour_over_white() {
        let svg = "<svg><circle cx=\"1\" opacity=\"0.5\" fill=\"#000000\" stroke=\"#FF0000\"/><text opacity=\"1\" fill=\"#123456\">a > b</text></svg>";
        let flat = opaque_over_white(svg);
        assert!(
            flat.contains("<circle cx=\"1\" opacity=\"1\" fill=\"#808080\" stroke=\"#FF8080\"/>"),
            "{flat}"
        );
        assert!(
            flat.contains("<text opacity=\"1\" fill=\"#123456\">a > b</text>"),
            "{flat}"
        );
    }

    #[test]
    fn physical_size_replaces_the_pixel_size_only() {
        let svg = "<svg width=\"1400\" height=\"1000\" viewBox=\"0 0 1400 1000\">";
        let out = with_physical_size(svg, (1400, 1000), Figure::Paper);
        assert_eq!(
            out,
            "<svg width=\"3.5in\" height=\"2.5in\" viewBox=\"0 0 1400 1000\">"
        );
        let out = with_physical_size(svg, (1400, 1000), Figure::Slide);
        assert!(
            out.starts_with("<svg width=\"10in\" height=\"7.1429in\""),
            "{out}"
        );
        assert_eq!(with_physical_size("<g/>", (1, 1), Figure::Paper), "<g/>");
    }

    #[test]
    fn the_bundled_font_is_the_only_font() {
        let db = fonts();
        assert_eq!(db.len(), 3);
        let query = fontdb::Query {
            families: &[fontdb::Family::SansSerif],
            ..fontdb::Query::default()
        };
        assert!(db.query(&query).is_some());
    }
}
