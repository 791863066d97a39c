//! The format of the pictures (`[output] figure` of a scenario): shared by the scenario file
//! that names it and every picture that is drawn at its size (docs/DESIGN.md, the layers).

/// The format of the pictures (`[output] figure`): `paper` draws each picture at its own size
/// (about 4:3) for one column of a paper, 3.5 in wide in the SVG and the PDF (300 to 400
/// pixels per inch in the PNG); `slide` at 1600 x 900 pixels (16:9) for a slide, 10 in wide
/// (160 pixels per inch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Figure {
    /// One column of a paper.
    #[default]
    Paper,
    /// A 16:9 slide.
    Slide,
}

impl Figure {
    /// The pixel size of a picture whose paper size is `paper`.
    pub fn size(self, paper: (u32, u32)) -> (u32, u32) {
        match self {
            Figure::Paper => paper,
            Figure::Slide => SLIDE_SIZE,
        }
    }

    /// The printed width in inches (SVG and PDF): one column, or a slide.
    pub fn width_inches(self) -> f64 {
        match self {
            Figure::Paper => 3.5,
            Figure::Slide => 10.0,
        }
    }

    /// The word of the format.
    pub fn as_str(self) -> &'static str {
        match self {
            Figure::Paper => "paper",
            Figure::Slide => "slide",
        }
    }
}

/// The pixel size of every picture in the `slide` format (16:9).
pub const SLIDE_SIZE: (u32, u32) = (1600, 900);
