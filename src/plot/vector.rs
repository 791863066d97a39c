//! The vector files of a picture: the SVG with its physical size, and a PDF with the font
//! embedded.
//!
//! A picture of `w x h` pixels printed `W` inches wide has `dpi = w / W` pixels per inch; the
//! PDF page is `72 w / dpi x 72 h / dpi` points (`W` inches wide, same aspect), and the SVG gets
//! `width="W in"`, `height="(h / dpi) in"` with the pixel `viewBox` kept. The PDF is converted
//! from the picture's own SVG by `svg2pdf` (through `usvg`), with DejaVu Sans — the font of the
//! PNG — given to it from the bytes the project bundles (no system font is looked up); the text
//! stays text, and the glyphs used are embedded as a subset (a TrueType `/FontFile2`).

use std::io;
use std::sync::{Arc, OnceLock};

use svg2pdf::usvg::{self, fontdb};

use super::Figure;

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

/// The PDF of an SVG of `size` pixels, at the physical size of `figure`.
pub fn svg_to_pdf(svg: &str, size: (u32, u32), figure: Figure) -> io::Result<Vec<u8>> {
    let options = usvg::Options {
        font_family: FAMILY.to_string(),
        fontdb: fonts(),
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(svg, &options)
        .map_err(|e| io::Error::other(format!("PDF: the SVG does not parse: {e}")))?;
    let page = svg2pdf::PageOptions {
        dpi: dpi(size.0, figure) as f32,
    };
    svg2pdf::to_pdf(&tree, svg2pdf::ConversionOptions::default(), page)
        .map_err(|e| io::Error::other(format!("PDF conversion failed: {e}")))
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
