//! Pictures from small synthetic data: every file exists, PNGs decode to the expected size and
//! are not blank (many colours, the label colours where expected), SVGs are SVG, the GIF has
//! several frames, and degenerate inputs draw without panicking.

use std::collections::HashSet;
use std::f64::consts::PI;
use std::fs::File;
use std::path::Path;

use nalgebra::DMatrix;
use num_complex::Complex64;
use tokdyn::classify::Label;
use tokdyn::model::{Attention, Head, Kernel};
use tokdyn::observe::{Observer, OrderParameters, OrderSeries, RunInfo, Sample};
use tokdyn::plot::bifurcation::FixedKind;
use tokdyn::plot::{
    bifurcation_plot, compare_plot, kymograph_plot, label_color, order_plot, portrait_plot,
    regime_map, snapshot_times, tokens_gif, tokens_plot, zero_level, AngleHistory, CycleCurve,
    CycleKind, Figure, OrderView, Theory, TokenSnapshots, LABELS,
};
use tokdyn::reduced::SecondHarmonic;

struct Image {
    width: u32,
    height: u32,
    pixels: Vec<[u8; 3]>,
}

impl Image {
    fn distinct(&self) -> usize {
        self.pixels.iter().collect::<HashSet<_>>().len()
    }
    fn count(&self, rgb: (u8, u8, u8)) -> usize {
        self.pixels
            .iter()
            .filter(|p| (p[0], p[1], p[2]) == rgb)
            .count()
    }
    fn non_white(&self) -> usize {
        self.pixels
            .iter()
            .filter(|p| **p != [255, 255, 255])
            .count()
    }
}

fn read_png(path: &Path) -> Image {
    let decoder = png::Decoder::new(File::open(path).expect("png exists"));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("png data");
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let pixels = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    Image {
        width: info.width,
        height: info.height,
        pixels,
    }
}

fn gif_frames(path: &Path) -> (u16, u16, usize) {
    let mut decoder = gif::DecodeOptions::new()
        .read_info(File::open(path).expect("gif exists"))
        .expect("gif header");
    let (w, h) = (decoder.width(), decoder.height());
    let mut frames = 0;
    while decoder.read_next_frame().expect("gif frame").is_some() {
        frames += 1;
    }
    (w, h, frames)
}

fn check_png(dir: &Path, stem: &str, width: u32) -> Image {
    let img = read_png(&dir.join(format!("{stem}.png")));
    assert_eq!(img.width, width, "{stem}.png width");
    assert!(img.width >= 800 && img.height >= 600, "{stem}.png size");
    assert!(
        img.distinct() > 40,
        "{stem}.png has {} colours",
        img.distinct()
    );
    assert!(
        img.non_white() > img.pixels.len() / 100,
        "{stem}.png is nearly blank"
    );
    img
}

fn check_svg(dir: &Path, stem: &str) {
    let text = std::fs::read_to_string(dir.join(format!("{stem}.svg"))).expect("svg exists");
    assert!(text.contains("<svg"), "{stem}.svg");
    assert!(text.contains("</svg>"), "{stem}.svg complete");
    assert!(text.contains("<text"), "{stem}.svg has text");
}

/// A fresh folder for a test's pictures: under `$TOKDYN_PLOT_DIR/<name>` when that is set (to
/// look at them), else a temporary folder.
fn out_dir(name: &str) -> (Option<tempfile::TempDir>, std::path::PathBuf) {
    match std::env::var_os("TOKDYN_PLOT_DIR") {
        Some(root) => {
            let p = Path::new(&root).join(name);
            std::fs::create_dir_all(&p).unwrap();
            (None, p)
        }
        None => {
            let t = tempfile::tempdir().unwrap();
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    }
}

fn rgb(c: plotters::style::RGBColor) -> (u8, u8, u8) {
    (c.0, c.1, c.2)
}

/// A spiral towards |R2| = 0.9 rotating at 0.3 rad per unit time.
fn spiral(samples: usize, t_end: f64) -> OrderSeries {
    let mut s = OrderSeries::new();
    for i in 0..samples {
        let t = t_end * i as f64 / (samples - 1).max(1) as f64;
        let r = 0.9 - 0.7 * (-0.1 * t).exp();
        s.push(
            t,
            &OrderParameters::from_r2(Complex64::from_polar(r, 0.3 * t)),
        );
    }
    s
}

fn second_harmonic(v: [[f64; 2]; 2]) -> SecondHarmonic {
    let a = DMatrix::identity(2, 2);
    let v = DMatrix::from_row_slice(2, 2, &[v[0][0], v[0][1], v[1][0], v[1][1]]);
    SecondHarmonic::new(&Attention::new(Kernel::Lsa, 1.0, vec![Head { a, v }])).unwrap()
}

/// RK4 of the OA equation: the "run" drawn on the portrait.
fn oa_path(sh: &SecondHarmonic, r0: Complex64, t_end: f64, steps: usize) -> Vec<Complex64> {
    let dt = t_end / steps as f64;
    let mut r = r0;
    let mut out = vec![r];
    for _ in 0..steps {
        let k1 = sh.ott_antonsen_rhs(r);
        let k2 = sh.ott_antonsen_rhs(r + k1 * (dt / 2.0));
        let k3 = sh.ott_antonsen_rhs(r + k2 * (dt / 2.0));
        let k4 = sh.ott_antonsen_rhs(r + k3 * dt);
        r += (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (dt / 6.0);
        out.push(r);
    }
    out
}

#[test]
fn order_plot_draws_both_panels() {
    let (_keep, dir) = out_dir("order");
    let series = spiral(801, 80.0);
    order_plot(
        &series,
        &OrderView::default(),
        "spiral — rotating-interior\nrate 0.3 rad/unit time, decay 0.1",
        &dir,
    )
    .unwrap();
    let img = check_png(&dir, "order", 1100);
    // The |R2| curve colour and the arg R2 colour are both there.
    assert!(img.count((70, 130, 200)) > 500);
    assert!(img.count((150, 40, 120)) > 500);
    check_svg(&dir, "order");
}

/// Feeds tokens to the observer as the integrator would.
fn observed_circle_snapshots(n: usize, samples: usize, count: usize) -> TokenSnapshots {
    let mut snaps = TokenSnapshots::new(samples, n, 2, count);
    let info = RunInfo {
        samples,
        t_end: 10.0,
    };
    snaps.start(&info).unwrap();
    let order = OrderParameters::from_r2(Complex64::new(0.0, 0.0));
    for index in 0..samples {
        let f = index as f64 / (samples - 1) as f64;
        // Uniform angles contracting to two antipodal clusters at 0 and pi.
        let tokens: Vec<f64> = (0..n)
            .flat_map(|k| {
                let a0 = 2.0 * PI * k as f64 / n as f64;
                let target = if !(PI / 2.0..3.0 * PI / 2.0).contains(&a0) {
                    if a0 < PI {
                        0.0
                    } else {
                        2.0 * PI
                    }
                } else {
                    PI
                };
                let a = a0 + (target - a0) * f;
                [a.cos(), a.sin()]
            })
            .collect();
        let sample = Sample {
            index,
            t: 10.0 * f,
            state: &[],
            order: &order,
            tokens: Some(&tokens),
        };
        assert!(snaps.wants_tokens());
        snaps.sample(&sample).unwrap();
    }
    snaps.finish().unwrap();
    snaps
}

#[test]
fn tokens_plot_on_the_circle_and_animation() {
    let (_keep, dir) = out_dir("tokens_circle");
    let snaps = observed_circle_snapshots(64, 101, 8);
    assert_eq!(snaps.len(), 8);
    tokens_plot(
        &snaps,
        &[],
        "circle — converged-clusters",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let img = check_png(&dir, "tokens", 1600);
    assert!(img.distinct() > 100);
    tokens_gif(&snaps, "circle — converged-clusters", &dir).unwrap();
    let (w, h, frames) = gif_frames(&dir.join("tokens.gif"));
    assert!(w >= 600 && h >= 600);
    assert_eq!(frames, 8);
}

fn sphere_snapshots(d: usize, n: usize, count: usize) -> Vec<(f64, Vec<f64>)> {
    (0..count)
        .map(|s| {
            let f = s as f64 / (count - 1).max(1) as f64;
            let tokens = (0..n)
                .flat_map(|k| {
                    // Spread points (a spiral on the sphere) drifting towards +-e_(d-1).
                    let z0 = 1.0 - 2.0 * (k as f64 + 0.5) / n as f64;
                    let phi = k as f64 * 2.399963;
                    let mut x = vec![0.0; d];
                    let rho = (1.0 - z0 * z0).max(0.0).sqrt() * (1.0 - 0.9 * f);
                    x[0] = rho * phi.cos();
                    x[1] = rho * phi.sin();
                    x[d - 1] = z0.signum() * (1.0 - rho * rho).max(0.0).sqrt();
                    if d > 3 {
                        x[2] = 0.1 * (k as f64).sin() * (1.0 - f);
                    }
                    let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
                    x.into_iter().map(move |v| v / norm)
                })
                .collect();
            (5.0 * s as f64, tokens)
        })
        .collect()
}

#[test]
fn tokens_plot_on_the_sphere_and_on_principal_axes() {
    for d in [3, 6, 1000] {
        let (_keep, dir) = out_dir(&format!("tokens_d{d}"));
        let snaps = TokenSnapshots::from_snapshots(d, &sphere_snapshots(d, 300, 4));
        tokens_plot(&snaps, &[], &format!("d = {d}"), Figure::Paper, &dir).unwrap();
        let img = read_png(&dir.join("tokens.png"));
        assert!(img.width >= 1000 && img.distinct() > 100, "d = {d}");
        tokens_gif(&snaps, &format!("d = {d}"), &dir).unwrap();
        assert_eq!(gif_frames(&dir.join("tokens.gif")).2, 4);
    }
}

#[test]
fn portrait_shows_field_nullclines_fixed_points_and_path() {
    let (_keep, dir) = out_dir("portrait");
    // Paper case 4: A = I, V = [[v11, v12], [-v12, -v11]] with v11 < v12: periodic orbits.
    let sh = second_harmonic([[0.2, 1.0], [-1.0, -0.2]]);
    let path = oa_path(&sh, Complex64::new(0.3, 0.0), 30.0, 3000);
    let fixed = [
        (Complex64::new(0.0, 0.0), FixedKind::Unstable),
        (Complex64::new(0.5, 0.5), FixedKind::Stable),
    ];
    portrait_plot(
        &sh,
        &fixed,
        &[],
        &path,
        15.0,
        "case4 — oscillation",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let img = check_png(&dir, "portrait", 1400);
    assert!(img.count((210, 20, 40)) > 300, "run path");
    assert!(
        img.count((0, 150, 136)) + img.count((230, 120, 0)) > 100,
        "nullclines"
    );
    check_svg(&dir, "portrait");
}

#[test]
fn compare_plot_draws_four_models() {
    let (_keep, dir) = out_dir("compare");
    let t: Vec<f64> = (0..401).map(|i| i as f64 * 0.1).collect();
    let full: Vec<Complex64> = t
        .iter()
        .map(|t| Complex64::from_polar(0.9 - 0.6 * (-0.2 * t).exp(), 0.5 * t))
        .collect();
    let shifted = |e: f64| -> Vec<Complex64> { full.iter().map(|z| z * (1.0 + e)).collect() };
    let (phase, ws, oa) = (shifted(1e-13), shifted(-1e-13), shifted(0.01));
    compare_plot(
        &t,
        &[
            ("full", &full[..]),
            ("phase", &phase[..]),
            ("ws", &ws[..]),
            ("oa (max |ΔR₂| 9e-3)", &oa[..]),
        ],
        None,
        None,
        "compare",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let img = check_png(&dir, "compare", 1100);
    assert!(img.count((160, 200, 240)) > 500, "full drawn wide");
    check_svg(&dir, "compare");
}

#[test]
fn regime_map_has_the_colour_of_each_label_present_and_no_other() {
    let (_keep, dir) = out_dir("regime");
    let xs: Vec<f64> = (0..12).map(|i| i as f64 / 11.0).collect();
    let ys: Vec<f64> = (0..9).map(|j| j as f64 / 8.0).collect();
    let mut labels = Vec::new();
    for &x in &xs {
        for &y in &ys {
            labels.push(if x < y {
                Some(Label::Oscillation)
            } else if x < 0.8 {
                Some(Label::ConvergedClusters)
            } else {
                Some(Label::RotatingClusters)
            });
        }
    }
    labels[0] = None;
    let boundary: Vec<(f64, f64)> = (0..9).map(|j| (j as f64 / 8.0, j as f64 / 8.0)).collect();
    regime_map(
        "v11",
        &xs,
        "v12",
        &ys,
        &labels,
        &boundary,
        None,
        "case4-map",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let img = check_png(&dir, "regime_map", 1400);
    for l in [
        Some(Label::Oscillation),
        Some(Label::ConvergedClusters),
        Some(Label::RotatingClusters),
        None,
    ] {
        assert!(img.count(rgb(label_color(l))) > 200, "{l:?}");
    }
    // (Undetermined is a grey that anti-aliased text may produce, so it is not checked.)
    for l in [
        Some(Label::InteriorPoint),
        Some(Label::RotatingInterior),
        Some(Label::MetastableClusters),
        Some(Label::Chaotic),
    ] {
        assert_eq!(img.count(rgb(label_color(l))), 0, "{l:?} is absent");
    }
    check_svg(&dir, "regime_map");
    // Every label and the failed runs (None) have a colour.
    assert_eq!(LABELS.len(), Label::ALL.len() + 1);
}

#[test]
fn bifurcation_plot_colours_points_by_label() {
    let (_keep, dir) = out_dir("bifurcation");
    let points: Vec<(f64, f64, f64, Option<Label>)> = (0..41)
        .map(|i| {
            let p = i as f64 / 40.0;
            if p < 0.5 {
                (p, 0.5 - 0.4 * p, 0.5 + 0.4 * p, Some(Label::Oscillation))
            } else if i == 30 {
                (p, f64::NAN, f64::NAN, None)
            } else {
                (p, 1.0, 1.0, Some(Label::ConvergedClusters))
            }
        })
        .collect();
    let stable: Vec<(f64, f64)> = (20..=40).map(|i| (i as f64 / 40.0, 1.0)).collect();
    let unstable: Vec<(f64, f64)> = (0..=20).map(|i| (i as f64 / 40.0, 0.5)).collect();
    bifurcation_plot(
        "v11",
        &points,
        &[(stable, FixedKind::Stable), (unstable, FixedKind::Unstable)],
        &[(0.5, 0.5, "LP".to_string()), (0.25, 0.5, "H".to_string())],
        "case4 — one-axis sweep",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let img = check_png(&dir, "bifurcation", 1400);
    for l in [Some(Label::Oscillation), Some(Label::ConvergedClusters)] {
        assert!(img.count(rgb(label_color(l))) > 200, "{l:?}");
    }
    check_svg(&dir, "bifurcation");
}

#[test]
fn degenerate_inputs_draw_without_panicking() {
    let (_keep, dir) = out_dir("degenerate");
    let p = &dir;
    // Empty and one-sample series, constant |R2| = 1.
    order_plot(&OrderSeries::new(), &OrderView::default(), "", p).unwrap();
    order_plot(&spiral(1, 0.0), &OrderView::default(), "one sample", p).unwrap();
    let mut constant = OrderSeries::new();
    for i in 0..50 {
        constant.push(
            i as f64,
            &OrderParameters::from_r2(Complex64::new(1.0, 0.0)),
        );
    }
    order_plot(&constant, &OrderView::default(), "constant", p).unwrap();
    check_png(p, "order", 1100);
    // No snapshots, one token, one snapshot, d = 1.
    let empty = TokenSnapshots::new(10, 5, 2, 0);
    tokens_plot(&empty, &[], "none", Figure::Paper, p).unwrap();
    tokens_gif(&empty, "none", p).unwrap();
    let one = TokenSnapshots::from_snapshots(2, &[(0.0, vec![1.0, 0.0])]);
    tokens_plot(&one, &[], "n = 1", Figure::Paper, p).unwrap();
    tokens_gif(&one, "n = 1", p).unwrap();
    let line = TokenSnapshots::from_snapshots(1, &[(0.0, vec![1.0, -1.0]), (1.0, vec![1.0, 1.0])]);
    tokens_plot(&line, &[], "d = 1", Figure::Paper, p).unwrap();
    let pca_one = TokenSnapshots::from_snapshots(5, &[(0.0, vec![0.0, 0.0, 1.0, 0.0, 0.0])]);
    tokens_plot(&pca_one, &[], "d = 5, n = 1", Figure::Paper, p).unwrap();
    // A zero field, no path, no guides; a stiff field.
    let zero = second_harmonic([[0.0, 0.0], [0.0, 0.0]]);
    portrait_plot(&zero, &[], &[], &[], 0.0, "zero", Figure::Paper, p).unwrap();
    let stiff = second_harmonic([[300.0, 10.0], [-5.0, 200.0]]);
    portrait_plot(
        &stiff,
        &[],
        &[],
        &[Complex64::new(0.1, 0.0)],
        1e6,
        "stiff",
        Figure::Paper,
        p,
    )
    .unwrap();
    // Compare with nothing, with one sample, with short series.
    compare_plot(&[], &[], None, None, "", Figure::Paper, p).unwrap();
    let one = [Complex64::new(0.5, 0.5)];
    compare_plot(
        &[0.0],
        &[("full", &one[..]), ("oa", &[][..])],
        None,
        None,
        "",
        Figure::Paper,
        p,
    )
    .unwrap();
    // Sweeps: empty, a single point, missing labels, duplicate axis values.
    regime_map("a", &[], "b", &[], &[], &[], None, "", Figure::Paper, p).unwrap();
    regime_map(
        "a",
        &[0.5],
        "b",
        &[2.0],
        &[Some(Label::Undetermined)],
        &[],
        None,
        "",
        Figure::Paper,
        p,
    )
    .unwrap();
    regime_map(
        "a",
        &[0.0, 0.0, 1.0],
        "b",
        &[1.0, 0.0],
        &[None],
        &[(0.5, 0.5)],
        None,
        "",
        Figure::Paper,
        p,
    )
    .unwrap();
    bifurcation_plot("p", &[], &[], &[], "", Figure::Paper, p).unwrap();
    bifurcation_plot(
        "p",
        &[(1.0, 0.3, 0.3, Some(Label::InteriorPoint))],
        &[],
        &[],
        "",
        Figure::Paper,
        p,
    )
    .unwrap();
    bifurcation_plot(
        "p",
        &[(1.0, 0.0, 0.0, None)],
        &[(vec![], FixedKind::Centre)],
        &[],
        "",
        Figure::Paper,
        p,
    )
    .unwrap();
    check_png(p, "bifurcation", 1400);
}

#[test]
#[ignore]
fn gif_speed_and_a_frame_to_look_at() {
    let (_keep, dir) = out_dir("gif_timing");
    let snaps = observed_circle_snapshots(512, 2001, 100);
    let t = std::time::Instant::now();
    tokens_gif(&snaps, "timing", &dir).unwrap();
    eprintln!("100 frames: {:?}", t.elapsed());
    // Frame 50 as a PNG, to look at.
    let mut opts = gif::DecodeOptions::new();
    opts.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = opts
        .read_info(File::open(dir.join("tokens.gif")).unwrap())
        .unwrap();
    for k in 0..=50 {
        let frame = decoder.read_next_frame().unwrap().unwrap();
        if k == 50 {
            let out = File::create(dir.join("frame50.png")).unwrap();
            let mut enc = png::Encoder::new(out, frame.width as u32, frame.height as u32);
            enc.set_color(png::ColorType::Rgba);
            enc.set_depth(png::BitDepth::Eight);
            enc.write_header()
                .unwrap()
                .write_image_data(&frame.buffer)
                .unwrap();
        }
    }
}

#[test]
fn pictures_are_deterministic() {
    let (_a, one) = out_dir("determinism_1");
    let (_b, two) = out_dir("determinism_2");
    let series = spiral(300, 30.0);
    let snaps = observed_circle_snapshots(40, 31, 3);
    for dir in [&one, &two] {
        order_plot(&series, &OrderView::default(), "same", dir).unwrap();
        tokens_plot(&snaps, &[], "same", Figure::Paper, dir).unwrap();
        tokens_gif(&snaps, "same", dir).unwrap();
    }
    for f in [
        "order.png",
        "order.svg",
        "order.pdf",
        "tokens.png",
        "tokens.svg",
        "tokens.pdf",
        "tokens.gif",
    ] {
        let a = std::fs::read(one.join(f)).unwrap();
        let b = std::fs::read(two.join(f)).unwrap();
        assert!(a == b, "{f} differs between two identical calls");
    }
}

#[test]
fn a_large_regime_map_stays_a_small_svg() {
    let (_keep, dir) = out_dir("regime_large");
    let xs: Vec<f64> = (0..200).map(|i| i as f64).collect();
    let ys: Vec<f64> = (0..200).map(|j| j as f64 * 0.01).collect();
    let labels: Vec<Option<Label>> = xs
        .iter()
        .flat_map(|&x| {
            ys.iter().map(move |&y| {
                if y * 100.0 < x {
                    Some(Label::InteriorPoint)
                } else {
                    Some(Label::RotatingInterior)
                }
            })
        })
        .collect();
    regime_map(
        "a",
        &xs,
        "b",
        &ys,
        &labels,
        &[],
        None,
        "200 x 200",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let img = check_png(&dir, "regime_map", 1400);
    assert!(img.count(rgb(label_color(Some(Label::InteriorPoint)))) > 10_000);
    let svg = std::fs::metadata(dir.join("regime_map.svg")).unwrap().len();
    assert!(svg < 200_000, "regime_map.svg is {svg} bytes");
}

// ---------------------------------------------------------------------------------------------
// Pictures for papers: kymograph, windows and zooms, honest labels, theory curves, formats.

fn viridis(c: f64) -> (u8, u8, u8) {
    use plotters::style::colors::colormaps::{ColorMap, ViridisRGB};
    rgb(ColorMap::<plotters::style::RGBColor, f64>::get_color_normalized(&ViridisRGB, c, 0.0, 1.0))
}

fn svg_text(dir: &Path, stem: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{stem}.svg"))).expect("svg exists")
}

/// The texts of an SVG (the content of each `<text>` element, trimmed).
fn svg_texts(dir: &Path, stem: &str) -> Vec<String> {
    let svg = svg_text(dir, stem);
    svg.split("<text")
        .skip(1)
        .filter_map(|part| {
            let body = part.split_once('>')?.1;
            Some(body.split("</text>").next()?.trim().to_string())
        })
        .collect()
}

/// Pixels within the top 15% of the viridis scale.
fn count_top_of_scale(img: &Image) -> usize {
    let top: HashSet<(u8, u8, u8)> = (850..=1000).map(|k| viridis(k as f64 / 1000.0)).collect();
    img.pixels
        .iter()
        .filter(|p| top.contains(&(p[0], p[1], p[2])))
        .count()
}

#[test]
fn kymograph_shows_clusters_where_the_doubled_angle_is() {
    let (_keep, dir) = out_dir("kymograph");
    // Uniform angles contracting to antipodal clusters at 0 and pi: doubled angle 0 (= 2 pi).
    let snaps = observed_circle_snapshots(400, 201, 6);
    let history = snaps.history();
    assert_eq!(history.len(), 201);
    kymograph_plot(history, None, "kymograph", Figure::Paper, &dir).unwrap();
    let img = check_png(&dir, "kymograph", 1100);
    assert_eq!(img.height, 700);
    check_svg(&dir, "kymograph");
    // The top of the scale (the final clusters) and the bottom (empty bins) are both drawn.
    let top = viridis(1.0);
    let bottom = viridis(0.0);
    assert!(count_top_of_scale(&img) > 300, "cluster colours");
    assert!(img.count(bottom) > 10_000, "empty-bin colour");
    // The cluster colour sits only next to angle 0 or 2 pi: the bottom or top tenth of the rows
    // that hold the heat map (the colour bar's top end is in its own columns, right of 950).
    let rows: Vec<usize> = (0..img.pixels.len())
        .filter(|&i| {
            let p = img.pixels[i];
            (p[0], p[1], p[2]) == bottom && (i % img.width as usize) < 900
        })
        .map(|i| i / img.width as usize)
        .collect();
    let (r0, r1) = (*rows.iter().min().unwrap(), *rows.iter().max().unwrap());
    let band = (r1 - r0) / 10;
    for i in 0..img.pixels.len() {
        let p = img.pixels[i];
        let (x, y) = (i % img.width as usize, i / img.width as usize);
        if (p[0], p[1], p[2]) == top && x < 900 && y > 60 {
            assert!(
                y <= r0 + band || y >= r1 - band,
                "cluster colour at row {y}"
            );
        }
    }
    assert!(svg_text(&dir, "kymograph").contains("doubled angle"));
}

#[test]
fn kymograph_in_high_dimension_names_its_plane() {
    let (_keep, dir) = out_dir("kymograph_d6");
    let d = 6;
    let mut history = AngleHistory::new(300, d);
    for (i, (t, tokens)) in sphere_snapshots(d, 300, 20).iter().enumerate() {
        history.record(i, *t, tokens);
    }
    kymograph_plot(&history, None, "d = 6", Figure::Slide, &dir).unwrap();
    let img = read_png(&dir.join("kymograph.png"));
    assert_eq!((img.width, img.height), (1600, 900));
    assert!(img.distinct() > 40);
    assert!(svg_text(&dir, "kymograph").contains("principal axes 1, 2"));
}

#[test]
fn order_plot_draws_one_curve_in_d2_and_says_what_r2_is_in_d3() {
    let (_keep, dir) = out_dir("order_labels");
    // d = 2 (s = |R2|): no s curve, no "projection" wording.
    order_plot(&spiral(400, 40.0), &OrderView::default(), "d = 2", &dir).unwrap();
    let img = check_png(&dir, "order", 1100);
    assert!(img.count((25, 25, 25)) < 100, "no separate s curve");
    let svg = svg_text(&dir, "order");
    assert!(svg.contains("= s"), "one curve stands for both");
    // d > 2: s differs from |R2| of the projection; both drawn, the legend says which is which.
    let mut s = OrderSeries::new();
    for i in 0..400 {
        let t = i as f64 * 0.1;
        let mut o = OrderParameters::from_r2(Complex64::from_polar(0.3 + 0.01 * t, 0.2 * t));
        o.nematic = 0.8 + 0.1 * (0.5 * t).sin();
        s.push(t, &o);
    }
    order_plot(&s, &OrderView::default(), "d = 3", &dir).unwrap();
    let img = check_png(&dir, "order", 1100);
    assert!(img.count((25, 25, 25)) > 300, "s curve");
    assert!(img.count((70, 130, 200)) > 300, "|R2| curve");
    let svg = svg_text(&dir, "order");
    assert!(svg.contains("projections on (x₁, x₂)") && svg.contains("nematic"));
}

#[test]
fn order_plot_window_and_zoom_on_the_last_periods() {
    let (_keep, dir) = out_dir("order_zoom");
    let series = spiral(2001, 200.0);
    let view = OrderView {
        window: None,
        period: Some(2.0 * PI / 0.3),
        figure: Figure::Paper,
    };
    order_plot(&series, &view, "long", &dir).unwrap();
    check_png(&dir, "order", 1100);
    assert!(svg_text(&dir, "order").contains("last 3 periods"));
    // A window of two periods: no zoom; ticks only inside the window.
    let view = OrderView {
        window: Some((50.0, 90.0)),
        ..view
    };
    order_plot(&series, &view, "window", &dir).unwrap();
    let texts = svg_texts(&dir, "order");
    assert!(!texts.iter().any(|t| t == "last 3 periods"));
    assert!(
        texts.iter().any(|t| t == "60") && !texts.iter().any(|t| t == "150"),
        "ticks of the window: {texts:?}"
    );
    // Slide format.
    let view = OrderView {
        figure: Figure::Slide,
        ..view
    };
    order_plot(&series, &view, "slide", &dir).unwrap();
    let img = read_png(&dir.join("order.png"));
    assert_eq!((img.width, img.height), (1600, 900));
}

#[test]
fn compare_plot_has_group_and_every_max_error_in_its_legend() {
    let (_keep, dir) = out_dir("compare_errors");
    let t: Vec<f64> = (0..401).map(|i| i as f64 * 0.1).collect();
    let full: Vec<Complex64> = t
        .iter()
        .map(|t| Complex64::from_polar(0.9 - 0.6 * (-0.2 * t).exp(), 0.5 * t))
        .collect();
    let shifted = |e: f64| -> Vec<Complex64> { full.iter().map(|z| z * (1.0 + e)).collect() };
    let (phase, ws, oa, group) = (
        shifted(1e-13),
        shifted(-2e-12),
        shifted(0.01),
        shifted(3e-15),
    );
    compare_plot(
        &t,
        &[
            ("full", &full[..]),
            ("phase", &phase[..]),
            ("ws", &ws[..]),
            ("oa", &oa[..]),
            ("group", &group[..]),
        ],
        None,
        None,
        "compare",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    check_png(&dir, "compare", 1100);
    let svg = svg_text(&dir, "compare");
    // The largest |R2_m - R2_full| over the samples, computed here independently.
    for (name, other) in [
        ("phase", &phase),
        ("ws", &ws),
        ("oa", &oa),
        ("group", &group),
    ] {
        let max = full
            .iter()
            .zip(other.iter())
            .map(|(a, b)| ((a.re - b.re).powi(2) + (a.im - b.im).powi(2)).sqrt())
            .fold(0.0, f64::max);
        let text = format!("{name} (max error {max:.1e})");
        assert!(svg.contains(&text), "legend {text}");
    }
    // The group curve's colour is drawn.
    let img = read_png(&dir.join("compare.png"));
    assert!(img.count((200, 30, 60)) > 200, "group curve");
}

#[test]
fn regime_map_draws_the_theory_line_and_the_title_lines() {
    let (_keep, dir) = out_dir("regime_theory");
    let xs: Vec<f64> = (0..11).map(|i| i as f64 / 10.0).collect();
    let ys = xs.clone();
    let labels: Vec<Option<Label>> = xs
        .iter()
        .flat_map(|&x| {
            ys.iter().map(move |&y| {
                Some(if x < y {
                    Label::Oscillation
                } else {
                    Label::ConvergedClusters
                })
            })
        })
        .collect();
    let fine: Vec<f64> = (0..101).map(|i| i as f64 / 100.0).collect();
    let f: Vec<f64> = fine
        .iter()
        .flat_map(|x| fine.iter().map(move |y| x - y))
        .collect();
    let theory = Theory {
        segments: zero_level(&f, &fine, &fine),
        text: "theory: v11 - v12 = 0".into(),
    };
    let title = "case4-map (oa model)\nfixed: beta = 1; start: poisson";
    regime_map(
        "v11",
        &xs,
        "v12",
        &ys,
        &labels,
        &[],
        None,
        title,
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let without = read_png(&dir.join("regime_map.png")).count((0, 0, 0));
    regime_map(
        "v11",
        &xs,
        "v12",
        &ys,
        &labels,
        &[],
        Some(&theory),
        title,
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let img = check_png(&dir, "regime_map", 1400);
    assert!(
        img.count((0, 0, 0)) > without + 1500,
        "theory line: {} vs {without} black pixels",
        img.count((0, 0, 0))
    );
    let svg = svg_text(&dir, "regime_map");
    assert!(svg.contains("theory: v11 - v12 = 0") && svg.contains("fixed: beta = 1"));
}

#[test]
fn bifurcation_special_points_leave_grid_points_visible_and_centres_have_their_style() {
    let (_keep, dir) = out_dir("bifurcation_special");
    let points: Vec<(f64, f64, f64, Option<Label>)> = (0..21)
        .map(|i| {
            let p = i as f64 / 20.0;
            (p, 0.5, 0.5, Some(Label::RotatingInterior))
        })
        .collect();
    let centre: Vec<(f64, f64)> = (0..=20).map(|i| (i as f64 / 20.0, 0.8)).collect();
    let colour = rgb(label_color(Some(Label::RotatingInterior)));
    bifurcation_plot(
        "v11",
        &points,
        &[(centre.clone(), FixedKind::Centre)],
        &[],
        "no special",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let bare = read_png(&dir.join("bifurcation.png")).count(colour);
    let special: Vec<(f64, f64, String)> = (0..21)
        .map(|i| (i as f64 / 20.0, 0.5, "LP".to_string()))
        .collect();
    bifurcation_plot(
        "v11",
        &points,
        &[(centre, FixedKind::Centre)],
        &special,
        "special on every grid point",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let img = check_png(&dir, "bifurcation", 1400);
    assert!(
        img.count(colour) * 100 >= bare * 95,
        "{} of {bare}",
        img.count(colour)
    );
    assert!(img.count((150, 150, 150)) > 200, "centre line");
    assert!(svg_text(&dir, "bifurcation").contains("centre (neutral)"));
}

#[test]
fn tokens_plot_ring_times_and_meaningful_axis_labels() {
    let (_keep, dir) = out_dir("tokens_paper");
    let snaps = observed_circle_snapshots(200, 201, 6);
    // Times chosen from the dynamics: the nearest kept snapshots, one panel each.
    let times = [0.0, 2.0, 4.0, 10.0];
    tokens_plot(&snaps, &times, "chosen", Figure::Paper, &dir).unwrap();
    let img = check_png(&dir, "tokens", 1300);
    assert!(img.distinct() > 100);
    let texts = svg_texts(&dir, "tokens");
    for t in ["t = 0", "t = 2", "t = 4", "t = 10"] {
        assert!(texts.iter().any(|x| x == t), "{t} in {texts:?}");
    }
    assert!(svg_text(&dir, "tokens").contains("density of the angle"));
    // d = 5 with every token on one point: no meaningless percentage, a note instead.
    let one_point: Vec<f64> = (0..10).flat_map(|_| [0.0, 0.0, 1.0, 0.0, 0.0]).collect();
    let snaps = TokenSnapshots::from_snapshots(5, &[(0.0, one_point.clone()), (1.0, one_point)]);
    tokens_plot(&snaps, &[], "one point", Figure::Paper, &dir).unwrap();
    let svg = svg_text(&dir, "tokens");
    assert!(svg.contains("no spread"), "note for a one-point cloud");
    assert!(!svg.contains("e-1"), "no tiny percentages");
}

#[test]
fn snapshot_times_follow_the_dynamics() {
    let t: Vec<f64> = (0..=200).map(|i| i as f64).collect();
    // Periodic: spread over the last period, ending at t_end.
    let s = vec![0.5; t.len()];
    let times = snapshot_times(&t, &s, Some(12.0), 6);
    assert_eq!(times.len(), 6);
    assert_eq!(times[5], 200.0);
    assert!((times[0] - (200.0 - 10.0)).abs() < 1e-12);
    // Convergence that settles at t = 50: five times over [0, 50], then t_end.
    let s: Vec<f64> = t.iter().map(|&x| (x / 50.0).min(1.0)).collect();
    let times = snapshot_times(&t, &s, None, 6);
    assert_eq!(times[0], 0.0);
    assert_eq!(times[5], 200.0);
    assert!(times[4] > 45.0 && times[4] <= 50.0, "{times:?}");
    assert!(snapshot_times(&[], &[], None, 6).is_empty());
}

#[test]
fn output_keys_are_read_and_checked() {
    let base = "name = \"x\"\n[model]\nkernel = \"lsa\"\nbeta = 1.0\nd = 2\nA = \"identity\"\nV = \"identity\"\n[tokens]\nn = 4\n[time]\nt_end = 1.0\nsamples = 11\n";
    let load = |extra: &str| {
        tokdyn::scenario::Scenario::from_toml_str(
            &format!("{base}[output]\n{extra}"),
            Path::new("x.toml"),
            Path::new("."),
            &[],
        )
    };
    let s = load("window = [0.2, 0.8]\nsnapshots = [0.5, 0.1]\nfigure = \"slide\"").unwrap();
    assert_eq!(s.output.window, Some((0.2, 0.8)));
    assert_eq!(s.output.snapshots, vec![0.1, 0.5]);
    assert_eq!(s.output.figure, Figure::Slide);
    assert_eq!(load("").unwrap().output.figure, Figure::Paper);
    for (bad, key) in [
        ("window = [1.0, 0.5]", "output.window"),
        ("window = [0.0]", "output.window"),
        ("snapshots = []", "output.snapshots"),
        ("snapshots = [-1.0]", "output.snapshots"),
        ("figure = \"poster\"", "output.figure"),
    ] {
        let e = load(bad).unwrap_err();
        assert!(e.to_string().contains(key), "{bad}: {e}");
    }
}

#[test]
fn a_run_writes_every_picture_as_png_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        "name = \"small\"\n[model]\nkernel = \"lsa\"\nbeta = 1.0\nd = 3\nA = \"identity\"\nV = \"identity\"\n[tokens]\nn = 40\nseed = 2\n[time]\nt_end = 4.0\nsamples = 41\n[output]\nsnapshots = [0.0, 1.0, 4.0]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    assert_cmd::Command::cargo_bin("tokdyn")
        .unwrap()
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .assert()
        .success();
    for stem in ["order", "kymograph", "tokens"] {
        check_png(&out, stem, read_png(&out.join(format!("{stem}.png"))).width);
        check_svg(&out, stem);
    }
    let texts = svg_texts(&out, "tokens");
    for t in ["t = 0", "t = 1", "t = 4"] {
        assert!(
            texts.iter().any(|x| x == t),
            "asked-for time {t} in {texts:?}"
        );
    }
}

#[test]
fn portrait_draws_a_centre_where_it_is() {
    let (_keep, dir) = out_dir("portrait_centre");
    let sh = second_harmonic([[0.2, 1.0], [-1.0, -0.2]]);
    let draw_kind = |z: Complex64, kind: FixedKind| {
        portrait_plot(
            &sh,
            &[(z, kind)],
            &[],
            &[],
            0.0,
            "centre",
            Figure::Paper,
            &dir,
        )
        .unwrap();
        read_png(&dir.join("portrait.png"))
    };
    let draw = |z: Complex64| draw_kind(z, FixedKind::Centre);
    let a = draw(Complex64::new(0.5, 0.5));
    let b = draw(Complex64::new(-0.5, -0.5));
    assert!(svg_text(&dir, "portrait").contains("centre (neutral)"));
    let grey = [150u8, 150, 150];
    // Pixels grey in one picture only: the marker. Its centre moves with the point (x right,
    // y up: smaller row numbers).
    let centroid = |p: &Image, q: &Image| -> (f64, f64, usize) {
        let w = p.width as usize;
        let (mut sx, mut sy, mut n) = (0.0, 0.0, 0usize);
        for i in 0..p.pixels.len() {
            if p.pixels[i] == grey && q.pixels[i] != grey {
                sx += (i % w) as f64;
                sy += (i / w) as f64;
                n += 1;
            }
        }
        (sx / n.max(1) as f64, sy / n.max(1) as f64, n)
    };
    let (ax, ay, an) = centroid(&a, &b);
    let (bx, by, bn) = centroid(&b, &a);
    assert!(an > 150 && bn > 150, "{an} {bn}");
    assert!(
        ax - bx > 200.0 && by - ay > 200.0,
        "({ax}, {ay}) vs ({bx}, {by})"
    );
    // The same place as a stable point's disc (drawn in data coordinates).
    let black = [0u8, 0, 0];
    let c = draw_kind(Complex64::new(0.5, 0.5), FixedKind::Stable);
    let w = c.width as usize;
    let (mut sx, mut sy, mut n) = (0.0, 0.0, 0usize);
    for i in 0..c.pixels.len() {
        // The disk only (the legend is below it on paper).
        if c.pixels[i] == black && b.pixels[i] != black && (i / w) < c.height as usize * 7 / 10 {
            sx += (i % w) as f64;
            sy += (i / w) as f64;
            n += 1;
        }
    }
    let (cx, cy) = (sx / n.max(1) as f64, sy / n.max(1) as f64);
    assert!(n > 100, "{n}");
    assert!(
        (cx - ax).abs() < 3.0 && (cy - ay).abs() < 3.0,
        "centre ({ax}, {ay}), stable point ({cx}, {cy})"
    );
    assert!(svg_text(&dir, "portrait").contains("stable fixed point"));
}

// ---------------------------------------------------------------------------------------------
// PDF, physical sizes, windows, limit cycles

/// The raw bytes of a PDF and the inflated content of each of its (zlib) streams.
fn pdf_parts(path: &Path) -> (Vec<u8>, Vec<u8>) {
    let raw = std::fs::read(path).expect("pdf exists");
    let mut inflated = Vec::new();
    let mut rest = &raw[..];
    while let Some(i) = find(rest, b"stream") {
        let after = &rest[i + 6..];
        let start = if after.starts_with(b"\r\n") { 2 } else { 1 };
        let Some(end) = find(after, b"endstream") else {
            break;
        };
        if i == 0 || rest[i - 1] != b'd' {
            let body = &after[start.min(end)..end];
            if let Ok(v) = miniz_oxide::inflate::decompress_to_vec_zlib(body) {
                inflated.extend_from_slice(&v);
                inflated.push(b'\n');
            }
        }
        rest = &after[end + 9..];
    }
    (raw, inflated)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The page size of a one-page PDF in points (its MediaBox).
fn media_box(raw: &[u8]) -> (f64, f64) {
    let i = find(raw, b"/MediaBox").expect("a MediaBox");
    let text = String::from_utf8_lossy(&raw[i..(i + 80).min(raw.len())]).to_string();
    let inside = text.split('[').nth(1).unwrap().split(']').next().unwrap();
    let v: Vec<f64> = inside
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (v[2] - v[0], v[3] - v[1])
}

/// Checks a picture's PDF: a PDF, a font embedded, every character of `words` mapped by a
/// ToUnicode CMap of the embedded font (so the words are text in the PDF); returns the page
/// size in points.
fn check_pdf(dir: &Path, stem: &str, words: &[&str]) -> (f64, f64) {
    let (raw, inflated) = pdf_parts(&dir.join(format!("{stem}.pdf")));
    assert!(raw.starts_with(b"%PDF-"), "{stem}.pdf header");
    assert!(
        find(&raw, b"/FontFile2").is_some() || find(&raw, b"/FontFile3").is_some(),
        "{stem}.pdf embeds a font"
    );
    assert!(
        find(&raw, b"DejaVu").is_some(),
        "{stem}.pdf: the bundled font"
    );
    // The ToUnicode CMaps, compressed or not.
    let cmap = String::from_utf8_lossy(&raw).to_string() + &String::from_utf8_lossy(&inflated);
    assert!(cmap.contains("beginbfchar") || cmap.contains("beginbfrange"));
    for w in words {
        for c in w.chars().filter(|c| !c.is_whitespace()) {
            let hex = format!("<{:04X}>", c as u32);
            assert!(
                cmap.contains(&hex),
                "{stem}.pdf: '{c}' of '{w}' not in the text"
            );
        }
    }
    media_box(&raw)
}

#[test]
fn every_picture_has_a_pdf_with_the_font_embedded_at_its_physical_size() {
    let (_keep, dir) = out_dir("pdf");
    let series = spiral(401, 40.0);
    let view = OrderView {
        window: None,
        period: None,
        figure: Figure::Paper,
    };
    order_plot(&series, &view, "Spiral kymograph", &dir).unwrap();
    let (w, h) = check_pdf(&dir, "order", &["Spiral", "kymograph"]);
    // One column: 3.5 in = 252 pt wide, the PNG's aspect.
    let img = read_png(&dir.join("order.png"));
    assert!((w - 252.0).abs() < 0.01, "{w}");
    assert!(
        (h - 252.0 * img.height as f64 / img.width as f64).abs() < 0.01,
        "{h}"
    );
    let svg = svg_text(&dir, "order");
    assert!(
        svg.starts_with("<svg width=\"3.5in\" height=\""),
        "{}",
        &svg[..80]
    );
    assert!(svg.contains(&format!("viewBox=\"0 0 {} {}\"", img.width, img.height)));
    // A slide: 1600 x 900 pixels, 10 x 5.625 in.
    let view = OrderView {
        figure: Figure::Slide,
        ..view
    };
    order_plot(&series, &view, "Slide", &dir).unwrap();
    let img = read_png(&dir.join("order.png"));
    assert_eq!((img.width, img.height), (1600, 900));
    let (w, h) = check_pdf(&dir, "order", &["Slide"]);
    assert!(
        (w - 720.0).abs() < 0.01 && (h - 405.0).abs() < 0.01,
        "{w} x {h}"
    );
    assert!(svg_text(&dir, "order").starts_with("<svg width=\"10in\" height=\"5.625in\""));
    // Every other picture too.
    let sh = second_harmonic([[0.2, 1.0], [-1.0, -0.2]]);
    portrait_plot(&sh, &[], &[], &[], 1.0, "Portrait", Figure::Slide, &dir).unwrap();
    assert_eq!(check_pdf(&dir, "portrait", &["Portrait"]), (720.0, 405.0));
    let t: Vec<f64> = (0..50).map(|i| i as f64).collect();
    let z: Vec<Complex64> = t.iter().map(|&s| Complex64::from_polar(0.5, s)).collect();
    compare_plot(
        &t,
        &[("full", &z[..])],
        None,
        None,
        "Compare",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    check_pdf(&dir, "compare", &["Compare"]);
    let snaps = observed_circle_snapshots(50, 21, 3);
    kymograph_plot(snaps.history(), None, "Kymograph", Figure::Paper, &dir).unwrap();
    check_pdf(&dir, "kymograph", &["Kymograph"]);
}

/// The numeric tick labels of an SVG.
fn numeric_ticks(dir: &Path, stem: &str) -> Vec<f64> {
    svg_texts(dir, stem)
        .iter()
        .filter_map(|t| t.parse::<f64>().ok())
        .collect()
}

#[test]
fn kymograph_and_compare_honour_the_window() {
    let (_keep, dir) = out_dir("window");
    let snaps = observed_circle_snapshots(100, 201, 6);
    let history = snaps.history();
    let (t_first, t_last) = (history.times()[0], *history.times().last().unwrap());
    kymograph_plot(history, None, "whole", Figure::Paper, &dir).unwrap();
    let whole = numeric_ticks(&dir, "kymograph");
    let w0 = t_first + 0.25 * (t_last - t_first);
    let w1 = t_first + 0.5 * (t_last - t_first);
    kymograph_plot(history, Some((w0, w1)), "window", Figure::Paper, &dir).unwrap();
    let ticks = numeric_ticks(&dir, "kymograph");
    let outside = |v: &&f64| **v < w0 - 1e-9 || **v > w1 + 1e-9;
    assert!(whole.iter().any(|v| outside(&v)), "{whole:?}");
    // Time ticks of the window only (the colour bar's ticks are small numbers: 0, 1, 3, ...).
    let times: Vec<&f64> = ticks.iter().filter(|v| **v > 3.0).collect();
    assert!(times.len() >= 2, "{ticks:?}");
    assert!(!times.iter().any(outside), "{ticks:?} outside [{w0}, {w1}]");
    check_png(&dir, "kymograph", 1100);

    let t: Vec<f64> = (0..=2000).map(|i| i as f64 * 0.1).collect();
    let full: Vec<Complex64> = t.iter().map(|&s| Complex64::from_polar(0.5, s)).collect();
    let oa: Vec<Complex64> = full.iter().map(|z| z * 1.01).collect();
    let series = [("full", &full[..]), ("oa", &oa[..])];
    compare_plot(
        &t,
        &series,
        Some((50.0, 90.0)),
        None,
        "window",
        Figure::Paper,
        &dir,
    )
    .unwrap();
    let ticks = numeric_ticks(&dir, "compare");
    assert!(ticks.contains(&60.0), "{ticks:?}");
    assert!(
        !ticks.iter().any(|v| *v > 90.0 || (*v > 1.0 && *v < 50.0)),
        "{ticks:?}"
    );
    check_png(&dir, "compare", 1100);
}

#[test]
fn compare_shows_the_last_periods_of_a_long_periodic_run() {
    let (_keep, dir) = out_dir("compare_zoom");
    // |R2| oscillates with period 4 over 50 periods; oa is off by 1%.
    let period = 4.0;
    let t: Vec<f64> = (0..=4000).map(|i| i as f64 * 0.05).collect();
    let full: Vec<Complex64> = t
        .iter()
        .map(|&s| Complex64::from_polar(0.3 + 0.05 * (2.0 * PI * s / period).cos(), s))
        .collect();
    let oa: Vec<Complex64> = full.iter().map(|z| z * 1.01).collect();
    let series = [("full", &full[..]), ("oa", &oa[..])];
    let draw = |period: Option<f64>| {
        compare_plot(&t, &series, None, period, "zoom", Figure::Paper, &dir).unwrap();
        (numeric_ticks(&dir, "compare"), svg_texts(&dir, "compare"))
    };
    let (ticks, texts) = draw(Some(period));
    let last = 200.0 - 3.0 * period;
    // Top panel: time ticks inside the last three periods only; bottom: the whole run.
    assert!(ticks.iter().any(|v| *v > last && *v < 200.0), "{ticks:?}");
    assert!(ticks.contains(&50.0) && ticks.contains(&100.0), "{ticks:?}");
    assert!(
        !ticks
            .iter()
            .any(|v| *v > 100.0 && *v < last - 1e-9 && *v != 150.0),
        "{ticks:?}"
    );
    assert!(
        texts.iter().any(|s| s.contains("last 3 periods")),
        "{texts:?}"
    );
    check_png(&dir, "compare", 1100);
    // Without a period (or with few periods) the top panel covers the whole run.
    let (ticks, texts) = draw(None);
    assert!(!ticks.iter().any(|v| *v > last && *v < 200.0), "{ticks:?}");
    assert!(!texts.iter().any(|s| s.contains("periods")), "{texts:?}");
    let (_, texts) = draw(Some(50.0));
    assert!(!texts.iter().any(|s| s.contains("periods")), "{texts:?}");
}

#[test]
fn portrait_draws_limit_cycles_by_kind() {
    let (_keep, dir) = out_dir("portrait_cycles");
    let sh = second_harmonic([[0.2, 1.0], [-1.0, -0.2]]);
    let circle = |r: f64| -> Vec<Complex64> {
        (0..400)
            .map(|k| Complex64::from_polar(r, 2.0 * PI * k as f64 / 400.0))
            .collect()
    };
    let purple = (106u8, 61, 154);
    let draw = |cycles: &[CycleCurve]| {
        portrait_plot(&sh, &[], cycles, &[], 0.0, "cycles", Figure::Paper, &dir).unwrap();
        read_png(&dir.join("portrait.png"))
    };
    let none = draw(&[]);
    assert_eq!(none.count(purple), 0);
    let stable = draw(&[CycleCurve {
        points: circle(0.5),
        kind: CycleKind::Stable,
    }]);
    assert!(svg_texts(&dir, "portrait").contains(&"stable limit cycle".to_string()));
    let unstable = draw(&[CycleCurve {
        points: circle(0.5),
        kind: CycleKind::Unstable,
    }]);
    assert!(svg_texts(&dir, "portrait").contains(&"unstable limit cycle".to_string()));
    let neutral = draw(&[CycleCurve {
        points: circle(0.5),
        kind: CycleKind::Neutral,
    }]);
    assert!(svg_texts(&dir, "portrait").contains(&"closed orbits around a centre".to_string()));
    // Solid > dashed > thin dotted in ink.
    let (s, u, n) = (
        stable.count(purple),
        unstable.count(purple),
        neutral.count(purple),
    );
    assert!(s > u && u > n && n > 100, "{s} {u} {n}");
    // The curve lies on the circle of radius 0.5: the purple pixels of the disk chart (above
    // the legend) sit at half the distance of the unit circle from the centre.
    let w = stable.width as usize;
    let pts: Vec<(f64, f64)> = (0..stable.pixels.len())
        .filter(|&i| {
            let p = stable.pixels[i];
            (p[0], p[1], p[2]) == purple && i / w < stable.height as usize * 7 / 10
        })
        .map(|i| ((i % w) as f64, (i / w) as f64))
        .collect();
    let (cx, cy) = (
        pts.iter().map(|p| p.0).sum::<f64>() / pts.len() as f64,
        pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64,
    );
    let radii: Vec<f64> = pts.iter().map(|p| (p.0 - cx).hypot(p.1 - cy)).collect();
    let mean = radii.iter().sum::<f64>() / radii.len() as f64;
    // Within the line width (7 px on paper: its joins stick out a little).
    let spread = radii.iter().map(|r| (r - mean).abs()).fold(0.0, f64::max);
    assert!(spread < 7.0, "a circle: {spread}");
    // The chart spans [-1.08, 1.08] over its square plotting area (about 1000 px on paper):
    // radius 0.5 is about 0.5 / 2.16 of the side.
    assert!(mean > 150.0 && mean < 280.0, "{mean}");
}

/// Every text of an SVG with its font size in points at the printed width, the printed width
/// in inches, and every stroke width (of elements that have a stroke) in points.
fn printed_sizes(dir: &Path, stem: &str) -> (Vec<(f64, String)>, f64, Vec<f64>) {
    let svg = svg_text(dir, stem);
    let attr = |tag: &str, name: &str| -> Option<String> {
        let key = format!(" {name}=\"");
        let at = tag.find(&key)? + key.len();
        Some(tag[at..].split('"').next()?.to_string())
    };
    let head = &svg[..svg.find('>').unwrap()];
    let inches: f64 = attr(head, "width")
        .unwrap()
        .trim_end_matches("in")
        .parse()
        .unwrap();
    let view_w: f64 = attr(head, "viewBox")
        .unwrap()
        .split(' ')
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    let pt = 72.0 * inches / view_w;
    let mut texts = Vec::new();
    let mut strokes = Vec::new();
    for piece in svg.split('<').skip(1) {
        let tag = piece.split('>').next().unwrap();
        if tag.starts_with("text ") {
            let size: f64 = attr(tag, "font-size").unwrap().parse().unwrap();
            let content = piece.split('>').nth(1).unwrap_or("").trim().to_string();
            texts.push((size * pt, content));
        } else if attr(tag, "stroke").is_some_and(|s| s != "none") {
            if let Some(w) = attr(tag, "stroke-width") {
                strokes.push(w.parse::<f64>().unwrap() * pt);
            }
        }
    }
    (texts, inches, strokes)
}

/// A tick label: a number or a multiple of pi.
fn is_tick(s: &str) -> bool {
    s.parse::<f64>().is_ok() || s.contains('π')
}

/// Asserts the printed sizes of `stem.svg`: tick labels >= 6.5 pt, every other text >= 7 pt,
/// the title (the largest text) between `title.0` and `title.1` pt, lines >= 0.3 pt and the
/// widest (the data; the kymograph has none) >= 0.5 pt.
fn check_printed(dir: &Path, stem: &str, inches: f64, title: (f64, f64)) {
    let (texts, width, strokes) = printed_sizes(dir, stem);
    assert_eq!(width, inches, "{stem}.svg printed width");
    assert!(texts.len() > 3, "{stem}.svg has {} texts", texts.len());
    for (size, s) in &texts {
        let least = if is_tick(s) { 6.5 } else { 7.0 };
        assert!(*size >= least - 1e-9, "{stem}.svg: '{s}' at {size:.2} pt");
    }
    let largest = texts.iter().map(|t| t.0).fold(0.0, f64::max);
    assert!(
        largest >= title.0 && largest <= title.1,
        "{stem}.svg: title at {largest:.2} pt"
    );
    let thinnest = strokes.iter().copied().fold(f64::INFINITY, f64::min);
    let widest = strokes.iter().copied().fold(0.0, f64::max);
    assert!(thinnest >= 0.3, "{stem}.svg: a line of {thinnest:.2} pt");
    assert!(
        stem == "kymograph" || widest >= 0.5,
        "{stem}.svg: the widest line is {widest:.2} pt"
    );
}

/// Draws every picture at `figure` into `dir` with realistic (long) titles; returns the stems.
fn every_picture(figure: Figure, dir: &Path) -> Vec<&'static str> {
    let title = "case4-oscillation (full, lsa, n = 512, d = 2): oscillation\n\
                 |R2| final 0.3658, arg R2 rate -1.5202, period 4.141";
    let series = spiral(2001, 200.0);
    let view = OrderView {
        window: None,
        period: Some(2.0 * PI),
        figure,
    };
    order_plot(&series, &view, title, dir).unwrap();
    let snaps = observed_circle_snapshots(64, 101, 6);
    kymograph_plot(snaps.history(), None, title, figure, dir).unwrap();
    tokens_plot(&snaps, &[], title, figure, dir).unwrap();
    let sh = second_harmonic([[0.2, 1.0], [-1.0, -0.2]]);
    let path = oa_path(&sh, Complex64::new(0.3, 0.0), 20.0, 400);
    let portrait_title = "case4-oscillation: Ott–Antonsen phase portrait, R2 path of the run";
    let centre = [(Complex64::new(0.0, -0.05), FixedKind::Centre)];
    portrait_plot(&sh, &centre, &[], &path, 30.0, portrait_title, figure, dir).unwrap();
    let t: Vec<f64> = (0..400).map(|i| i as f64 * 0.5).collect();
    let models: Vec<Vec<Complex64>> = (0..5)
        .map(|m| {
            t.iter()
                .map(|&s| {
                    Complex64::from_polar(0.3 + 0.1 * (s * 1.5).sin(), -s) * (1.0 + 1e-8 * m as f64)
                })
                .collect()
        })
        .collect();
    let names = ["full", "phase", "ws", "oa", "group"];
    let series: Vec<(&str, &[Complex64])> = names
        .iter()
        .zip(&models)
        .map(|(n, z)| (*n, &z[..]))
        .collect();
    compare_plot(
        &t,
        &series,
        None,
        None,
        "case4-oscillation: full model and its reductions",
        figure,
        dir,
    )
    .unwrap();
    let xs: Vec<f64> = (0..41).map(|i| i as f64 / 40.0).collect();
    let labels: Vec<Option<Label>> = xs
        .iter()
        .flat_map(|&x| {
            xs.iter().map(move |&y| {
                Some(if x < y {
                    Label::Oscillation
                } else {
                    Label::ConvergedClusters
                })
            })
        })
        .collect();
    let f: Vec<f64> = xs
        .iter()
        .flat_map(|x| xs.iter().map(move |y| x - y))
        .collect();
    let theory = Theory {
        segments: zero_level(&f, &xs, &xs),
        text: "theory: v11 - v12 = 0".into(),
    };
    let sweep_title = "case4-map (oa model)\nlsa, n = 512, d = 2; start: poisson, R(0) = 0.3 e^(i 0); t_end = 200";
    regime_map(
        "v11",
        &xs,
        "v12",
        &xs,
        &labels,
        &[],
        Some(&theory),
        sweep_title,
        figure,
        dir,
    )
    .unwrap();
    let points: Vec<(f64, f64, f64, Option<Label>)> = xs
        .iter()
        .map(|&p| {
            if p < 0.5 {
                (p, 0.5 - 0.4 * p, 0.5 + 0.4 * p, Some(Label::Oscillation))
            } else {
                (p, 1.0, 1.0, Some(Label::ConvergedClusters))
            }
        })
        .collect();
    let stable: Vec<(f64, f64)> = (20..=40).map(|i| (i as f64 / 40.0, 1.0)).collect();
    let centre: Vec<(f64, f64)> = (0..=20)
        .map(|i| (i as f64 / 40.0, i as f64 / 40.0))
        .collect();
    bifurcation_plot(
        "v11",
        &points,
        &[(stable, FixedKind::Stable), (centre, FixedKind::Centre)],
        &[(0.5, 1.0, "LP".to_string())],
        "case4-bifurcation (oa model)\nfixed: v12 = 0.5; lsa, n = 512, d = 2; start: poisson, R(0) = 0.3 e^(i 0); t_end = 3000",
        figure,
        dir,
    )
    .unwrap();
    vec![
        "order",
        "kymograph",
        "tokens",
        "portrait",
        "compare",
        "regime_map",
        "bifurcation",
    ]
}

#[test]
fn paper_pictures_print_readable_text_and_lines_in_one_column() {
    let (_keep, dir) = out_dir("printed_paper");
    for stem in every_picture(Figure::Paper, &dir) {
        check_printed(&dir, stem, 3.5, (8.0, 9.5));
    }
}

#[test]
fn slide_pictures_print_readable_text_and_lines_at_ten_inches() {
    let (_keep, dir) = out_dir("printed_slide");
    for stem in every_picture(Figure::Slide, &dir) {
        check_printed(&dir, stem, 10.0, (8.0, 14.0));
    }
}
