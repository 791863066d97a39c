//! `kymograph.png` / `kymograph.svg`: the density of the token angles against time, the standard
//! picture of synchronisation (clusters forming, rotating and oscillating show at one glance).
//!
//! d = 2: the doubled angle xi_k = 2 theta_k in [0, 2 pi), theta_k = atan2(x_k2, x_k1), the
//! quantity R2 = (1/n) sum e^{i xi_k} averages. d > 2: the angle phi_k = atan2(<x_k, e2>,
//! <x_k, e1>) in [0, 2 pi) in the plane of the two leading principal axes e1, e2 of the final
//! tokens (eigenvectors of S = (1/n) sum x_k x_k^T). Each column is the histogram
//! p_j = #{k : angle_k in bin j} / n over `bins` equal bins, drawn as the density relative to
//! the uniform one, p_j * bins (1 = uniform), on a logarithmic viridis scale
//! c = ln(1 + p_j bins) / ln(1 + max).
//!
//! [`AngleHistory`] records during the run (histograms of all tokens in d = 2, a bounded token
//! subsample in d > 2, whose axes are known only at the end); at most [`MAX_COLUMNS`] columns are
//! kept: when full, every second column is dropped and the sample stride doubles, so a run of
//! any length costs O(MAX_COLUMNS * bins) memory in d = 2.

use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};
use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use rayon::prelude::*;

use super::projection::principal_axes;
use super::{
    draw_no_data, draw_title, finite_range, padded, short, text_at, tick, Chart2d, Figure, OrIo,
    Picture, TICK_SIZE,
};
use super::{lw, px, pxi};

/// Angle bins of a column.
pub const BINS: usize = 72;
/// Most columns (time samples) kept.
pub const MAX_COLUMNS: usize = 512;
/// Most numbers (f32) kept for the token subsample in d > 2.
const MAX_RAW_VALUES: usize = 8_000_000;
/// Most tokens kept per column in d > 2.
const MAX_RAW_TOKENS: usize = 2000;

/// The token angles of a run, one column per kept sample.
#[derive(Debug, Clone)]
pub struct AngleHistory {
    d: usize,
    n: usize,
    stride: usize,
    token_stride: usize,
    times: Vec<f64>,
    /// d <= 2: fractions per bin; d > 2: the kept tokens (row-major, f32).
    columns: Vec<Vec<f32>>,
    /// The column being recorded a piece at a time: counts per bin and the number of tokens
    /// (d <= 2), the kept tokens (d > 2).
    counts: Vec<u64>,
    total: u64,
    raw: Vec<f32>,
}

/// The bin of an angle in [0, 2 pi) (any finite angle is reduced first).
pub fn angle_bin(angle: f64, bins: usize) -> usize {
    let a = angle.rem_euclid(2.0 * PI);
    ((a / (2.0 * PI) * bins as f64) as usize).min(bins - 1)
}

/// tan(pi / 8): above it the octant angle is folded about pi / 4.
const TAN_PI_8: f64 = 0.414_213_562_373_095_03;
/// Taylor coefficients (-1)^k / (2k + 1) of atan s = s sum_k c_k s^(2k), k = 0..8.
const ATAN_TAYLOR: [f64; 9] = [
    1.0,
    -1.0 / 3.0,
    1.0 / 5.0,
    -1.0 / 7.0,
    1.0 / 9.0,
    -1.0 / 11.0,
    1.0 / 13.0,
    -1.0 / 15.0,
    1.0 / 17.0,
];
/// Distance (in bins) from a bin edge inside which [`angle_bin_of`] asks `atan2` instead: the
/// cheap angle is within 3e-9 of the true one, i.e. 7e-8 bins for 72 bins of the doubled angle
/// (150 times below the margin), and `angle_bin`'s own rounding is below 1e-13 bins.
const EDGE_MARGIN: f64 = 1e-5;
/// Tokens whose bin positions are found together (a stack array, no allocation).
const BLOCK: usize = 256;

/// 1 where `c` holds, else 0 (a select the compiler vectorises).
#[inline(always)]
fn one_if(c: bool) -> f64 {
    if c {
        1.0
    } else {
        0.0
    }
}

/// atan2(y, x) in [-pi, pi] to within 3e-9 (for finite x, y not both tiny), without `atan2` nor
/// branches: with t = min(|x|, |y|) / max(|x|, |y|) in [0, 1], atan t = s (1 - s^2/3 + ... +
/// s^16/17) (remainder below |s|^19/19 < 3e-9) with s = t for t <= tan(pi/8), else
/// atan t = pi/4 + atan s with s = (t - 1)/(t + 1) (|s| <= tan(pi/8) again), then the octant
/// reflections a -> pi/2 - a (|y| > |x|), a -> pi - a (x < 0) and the sign of y.
#[inline(always)]
fn cheap_atan2(y: f64, x: f64) -> f64 {
    let (ax, ay) = (x.abs(), y.abs());
    let steep = one_if(ay > ax);
    let (lo, hi) = (ax.min(ay), ax.max(ay));
    let fold = one_if(lo > TAN_PI_8 * hi);
    let s = (lo - fold * hi) / (hi + fold * lo);
    let s2 = s * s;
    let series = ATAN_TAYLOR.iter().rev().fold(0.0, |acc, &c| acc * s2 + c);
    let a = s * series + fold * FRAC_PI_4;
    let a = steep * FRAC_PI_2 + (1.0 - 2.0 * steep) * a;
    let neg = one_if(x < 0.0);
    (neg * PI + (1.0 - 2.0 * neg) * a).copysign(y)
}

/// The cheap bin position `factor * atan2(y, x) * bins / (2 pi)` reduced to [0, bins].
#[inline(always)]
fn cheap_position(y: f64, x: f64, factor: f64, bins: usize) -> f64 {
    let p = factor * cheap_atan2(y, x) * (bins as f64 / (2.0 * PI));
    p + one_if(p < 0.0) * bins as f64
}

/// The bin `angle_bin(factor * atan2(y, x), bins)` (`None` when that angle is not finite)
/// given the cheap position `p` of (x, y): `p`'s bin unless `p` lies within [`EDGE_MARGIN`] of
/// a bin edge or the point is not finite or next to 0; then by `atan2` itself, so every angle
/// lands in exactly the bin `atan2` gives it.
#[inline(always)]
fn settle_bin(p: f64, y: f64, x: f64, factor: f64, bins: usize) -> Option<usize> {
    let trusted = x.is_finite() && y.is_finite() && x.abs().max(y.abs()) > 1e-300;
    if trusted && p >= 0.0 && p < bins as f64 {
        // bins < 2^31 (the picture's bins): a signed conversion, cheaper than usize's.
        let j = p as i32;
        let frac = p - f64::from(j);
        if frac > EDGE_MARGIN && frac < 1.0 - EDGE_MARGIN {
            return Some(j as usize);
        }
    }
    let a = factor * y.atan2(x);
    a.is_finite().then(|| angle_bin(a, bins))
}

/// The bin `angle_bin(factor * atan2(y, x), bins)` (`None` when that angle is not finite),
/// found from [`cheap_atan2`] with the `atan2` fallback of [`settle_bin`]. `factor` is 1 (an
/// angle) or 2 (a doubled angle).
#[inline]
pub(crate) fn angle_bin_of(y: f64, x: f64, factor: f64, bins: usize) -> Option<usize> {
    settle_bin(cheap_position(y, x, factor, bins), y, x, factor, bins)
}

/// Marks a token whose bin the vectorised pass leaves to [`settle_bin`] (no bin is this
/// large: [`BINS`] < 255).
const UNSETTLED: f64 = 255.0;

/// The bins of the doubled angles of the d = 2 tokens `rows` into `bin` (as whole numbers in
/// f64, so the pass stays in vector registers), four or more at a time (AVX2 where the CPU has
/// it: the same operations, so the same numbers): the bin of the cheap position where
/// [`settle_bin`] would trust it, else [`UNSETTLED`].
fn cheap_doubled_bins(rows: &[f64], bin: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx2_fma() {
        // SAFETY: the CPU supports the features this function is compiled for.
        unsafe { cheap_doubled_bins_avx2(rows, bin) };
        return;
    }
    cheap_doubled_bins_lanes(rows, bin)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn cheap_doubled_bins_avx2(rows: &[f64], bin: &mut [f64]) {
    cheap_doubled_bins_lanes(rows, bin)
}

#[inline(always)]
fn cheap_doubled_bins_lanes(rows: &[f64], bin: &mut [f64]) {
    for (b, xy) in bin.iter_mut().zip(rows.chunks_exact(2)) {
        *b = trusted_bin(cheap_position(xy[1], xy[0], 2.0, BINS), xy[1], xy[0]);
    }
}

/// The bin [`settle_bin`] takes from the cheap position `p` of (x, y) without `atan2`, or
/// [`UNSETTLED`] where it would ask `atan2`; the same tests, without branches (for p >= 0 the
/// floor is `settle_bin`'s integer part).
#[inline(always)]
fn trusted_bin(p: f64, y: f64, x: f64) -> f64 {
    let (ax, ay) = (x.abs(), y.abs());
    let trusted = (ax < f64::INFINITY) & (ay < f64::INFINITY) & (ax.max(ay) > 1e-300);
    let j = p.floor();
    let frac = p - j;
    let inside = (p >= 0.0) & (p < BINS as f64);
    let clear = (frac > EDGE_MARGIN) & (frac < 1.0 - EDGE_MARGIN);
    if trusted & inside & clear {
        j
    } else {
        UNSETTLED
    }
}

/// Adds the bins of the doubled angles of the d = 2 tokens `rows` (row-major) to `counts`: the
/// bins of a block first (vectorised), then counted into four interleaved histograms (so
/// tokens of one cluster do not wait on one counter), the unsettled ones by [`settle_bin`].
fn count_doubled(rows: &[f64], counts: &mut [u64; BINS]) {
    let mut bin = [0.0; BLOCK];
    // u32 counters, emptied into `counts` every FLUSH tokens and at the end.
    const FLUSH: usize = 1 << 24;
    for part in rows.chunks(2 * FLUSH) {
        let mut lanes = [[0u32; BINS]; 4];
        for block in part.chunks(2 * BLOCK) {
            let m = block.len() / 2;
            cheap_doubled_bins(block, &mut bin[..m]);
            for (k, (&b, xy)) in bin[..m].iter().zip(block.chunks_exact(2)).enumerate() {
                // A whole number in [0, BINS) or UNSETTLED: the conversion is exact.
                if let Some(slot) = lanes[k % 4].get_mut(b as usize) {
                    *slot += 1;
                } else {
                    let p = cheap_position(xy[1], xy[0], 2.0, BINS);
                    if let Some(j) = settle_bin(p, xy[1], xy[0], 2.0, BINS) {
                        counts[j] += 1;
                    }
                }
            }
        }
        for lane in &lanes {
            for (c, &l) in counts.iter_mut().zip(lane) {
                *c += u64::from(l);
            }
        }
    }
}

/// Fractions of the angles atan2(v, u) of the points (u, v) in each of `bins` bins (points
/// without a finite angle are left out of the counts but not of the total, so a column sums to
/// the finite share).
fn histogram(points: impl Iterator<Item = (f64, f64)>, bins: usize) -> Vec<f32> {
    let mut counts = vec![0u64; bins];
    let mut total = 0u64;
    for (u, v) in points {
        total += 1;
        if let Some(j) = angle_bin_of(v, u, 1.0, bins) {
            counts[j] += 1;
        }
    }
    fractions(&counts, total)
}

/// The counts as fractions of `total`.
fn fractions(counts: &[u64], total: u64) -> Vec<f32> {
    let total = total.max(1) as f64;
    counts.iter().map(|&c| (c as f64 / total) as f32).collect()
}

impl AngleHistory {
    /// An empty history for n tokens of dimension d.
    pub fn new(n: usize, d: usize) -> Self {
        let d = d.max(1);
        let per = if d > 2 {
            (MAX_RAW_VALUES / (MAX_COLUMNS * d)).clamp(1, MAX_RAW_TOKENS)
        } else {
            n.max(1)
        };
        AngleHistory {
            d,
            n,
            stride: 1,
            token_stride: n.div_ceil(per).max(1),
            times: Vec::new(),
            columns: Vec::new(),
            counts: vec![0; BINS],
            total: 0,
            raw: Vec::new(),
        }
    }

    /// Forgets every column (a new run).
    pub fn clear(&mut self) {
        self.stride = 1;
        self.times.clear();
        self.columns.clear();
        self.counts.fill(0);
        self.total = 0;
        self.raw.clear();
    }

    /// Records sample `index` (0, 1, 2, ... in order) at time t with tokens n x d row-major.
    pub fn record(&mut self, index: usize, t: f64, tokens: &[f64]) {
        self.record_piece(index, 0, tokens);
        self.finish_record(index, t);
    }

    /// Records the tokens `first, first + 1, ...` (rows n x d) of sample `index`, a piece of
    /// [`AngleHistory::record`]; the pieces of a sample come in order from token 0, then
    /// [`AngleHistory::finish_record`].
    pub fn record_piece(&mut self, index: usize, first: usize, tokens: &[f64]) {
        if !index.is_multiple_of(self.stride) {
            return;
        }
        let d = self.d;
        if d <= 2 {
            // Integer counts: the same for any split among threads.
            let rows = crate::parallel::TOKENS_PER_CHUNK * d;
            let (counts, total) = tokens
                .par_chunks(rows)
                .map(|rows| {
                    let mut counts = [0u64; BINS];
                    if d == 2 {
                        count_doubled(rows, &mut counts);
                    } else {
                        for &x in rows {
                            if let Some(j) = angle_bin_of(0.0, x, 2.0, BINS) {
                                counts[j] += 1;
                            }
                        }
                    }
                    (counts, (rows.len() / d) as u64)
                })
                .reduce(
                    || ([0u64; BINS], 0),
                    |(mut a, s), (b, t)| {
                        a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                        (a, s + t)
                    },
                );
            self.counts
                .iter_mut()
                .zip(counts)
                .for_each(|(a, b)| *a += b);
            self.total += total;
        } else {
            let stride = self.token_stride;
            let skip = (stride - first % stride) % stride;
            let kept = tokens.chunks_exact(d).skip(skip).step_by(stride);
            self.raw.extend(kept.flatten().map(|&v| v as f32));
        }
    }

    /// Whether sample `index` makes a column (every `stride`-th sample is kept).
    pub fn records(&self, index: usize) -> bool {
        index.is_multiple_of(self.stride)
    }

    /// Adds the counts per bin of `total` tokens (d <= 2) to the column of sample `index`, in
    /// place of [`AngleHistory::record_piece`] (the same column when they are its counts).
    pub fn add_counts(&mut self, index: usize, counts: &[u64; BINS], total: u64) {
        if !self.records(index) || self.d > 2 {
            return;
        }
        self.counts
            .iter_mut()
            .zip(counts)
            .for_each(|(a, b)| *a += b);
        self.total += total;
    }

    /// Ends the column of sample `index` at time t begun by [`AngleHistory::record_piece`].
    pub fn finish_record(&mut self, index: usize, t: f64) {
        if !index.is_multiple_of(self.stride) {
            return;
        }
        let column = if self.d <= 2 {
            fractions(&self.counts, self.total)
        } else {
            std::mem::take(&mut self.raw)
        };
        self.counts.fill(0);
        self.total = 0;
        self.times.push(t);
        self.columns.push(column);
        if self.columns.len() > MAX_COLUMNS {
            self.halve();
        }
    }

    /// Keeps every second column (those at multiples of twice the stride).
    fn halve(&mut self) {
        self.times = self.times.iter().step_by(2).copied().collect();
        self.columns = std::mem::take(&mut self.columns)
            .into_iter()
            .step_by(2)
            .collect();
        self.stride *= 2;
    }

    /// Dimension of the tokens.
    pub fn d(&self) -> usize {
        self.d
    }

    /// Number of tokens of the run.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Tokens used per column (all in d = 2, a subsample above).
    pub fn tokens_used(&self) -> usize {
        self.n.div_ceil(self.token_stride)
    }

    /// Times of the kept columns.
    pub fn times(&self) -> &[f64] {
        &self.times
    }

    /// Number of kept columns.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The histograms (fractions per bin, [`BINS`] each) of every column, and the explained
    /// variance shares of the two axes in d > 2 (`None` in d <= 2).
    pub fn histograms(&self) -> (Vec<Vec<f32>>, Option<(f64, f64)>) {
        if self.d <= 2 {
            return (self.columns.clone(), None);
        }
        let d = self.d;
        let last: Vec<f64> = self
            .columns
            .last()
            .map(|c| c.iter().map(|&v| v as f64).collect())
            .unwrap_or_default();
        let (e1, e2, share) = principal_axes(&last, d);
        let hists = self
            .columns
            .iter()
            .map(|c| {
                let points = c.chunks_exact(d).map(|x| {
                    let (mut u, mut v) = (0.0, 0.0);
                    for k in 0..d {
                        u += x[k] as f64 * e1[k];
                        v += x[k] as f64 * e2[k];
                    }
                    (u, v)
                });
                histogram(points, BINS)
            })
            .collect();
        (hists, Some(share))
    }
}

/// Writes `kymograph.png`, `kymograph.svg` and `kymograph.pdf` into `dir`; only the columns
/// in `window` (`[output] window`, clipped to the run; `None`: the whole run) are drawn.
pub fn kymograph_plot(
    history: &AngleHistory,
    window: Option<(f64, f64)>,
    title: &str,
    figure: Figure,
    dir: &Path,
) -> io::Result<()> {
    let (hists, share) = history.histograms();
    let window = window.map(|w| super::clip_window(history.times(), Some(w)));
    let pic = KymographPicture {
        history,
        hists,
        share,
        window,
        title,
    };
    super::render(&pic, dir, "kymograph", figure.size((1100, 700)), figure).map(|_| ())
}

struct KymographPicture<'a> {
    history: &'a AngleHistory,
    hists: Vec<Vec<f32>>,
    share: Option<(f64, f64)>,
    /// The time window drawn (`None`: every column, the last as wide as the one before).
    window: Option<(f64, f64)>,
    title: &'a str,
}

/// The colour of a relative density x >= 0 on the log scale up to `max`.
pub(crate) fn density_color(x: f64, max: f64) -> RGBColor {
    use plotters::style::colors::colormaps::{ColorMap, ViridisRGB};
    let c = if max > 0.0 {
        ((1.0 + x.max(0.0)).ln() / (1.0 + max).ln()).clamp(0.0, 1.0)
    } else {
        0.0
    };
    ColorMap::<RGBColor, f64>::get_color_normalized(&ViridisRGB, c, 0.0, 1.0)
}

/// The largest value of density columns `(t0, t1, values)`, at least 1.
pub(crate) fn density_max(cols: &[(f64, f64, Vec<f64>)]) -> f64 {
    cols.iter()
        .flat_map(|c| c.2.iter().copied())
        .fold(1.0f64, f64::max)
}

/// Draws density columns `(t0, t1, values)` on a chart whose vertical axis runs over 0..2, the
/// values of a column spread evenly over it, coloured by [`density_color`] up to the largest
/// value `max`. Vertical runs of one colour become one rectangle (the SVG stays small).
pub(crate) fn draw_density_columns<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    cols: &[(f64, f64, Vec<f64>)],
    max: f64,
) -> io::Result<()> {
    for (t0, t1, col) in cols {
        let rows = col.len();
        let mut j = 0;
        while j < rows {
            let c = density_color(col[j], max);
            let mut k = j + 1;
            while k < rows && density_color(col[k], max) == c {
                k += 1;
            }
            let (y0, y1) = (2.0 * j as f64 / rows as f64, 2.0 * k as f64 / rows as f64);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(*t0, y0), (*t1, y1)],
                    c.filled(),
                )))
                .io()?;
            j = k;
        }
    }
    Ok(())
}

/// Most columns drawn (neighbours are averaged above), so the SVG stays small.
const DRAWN_COLUMNS: usize = 256;

impl KymographPicture<'_> {
    fn axis_label(&self) -> String {
        match self.share {
            None => "doubled angle 2θ".into(),
            Some((a, b)) => format!(
                "angle in the plane of principal axes 1, 2 of the final tokens ({:.0}% + {:.0}% of variance)",
                100.0 * a,
                100.0 * b
            ),
        }
    }

    /// The drawn columns: (t0, t1, relative densities per bin), neighbours averaged; only the
    /// columns that meet the window, cut to it.
    fn drawn(&self) -> Vec<(f64, f64, Vec<f64>)> {
        let t = self.history.times();
        let m = t.len().min(self.hists.len());
        let (w0, w1) = self.window.unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
        // Column i spans [t_i, t_{i+1}): the first drawn one is the one holding w0.
        let first = t[..m].partition_point(|&x| x <= w0).saturating_sub(1);
        let end = t[..m].partition_point(|&x| x < w1).max(first);
        let group = (end - first).div_ceil(DRAWN_COLUMNS).max(1);
        let dt_last = if m >= 2 { t[m - 1] - t[m - 2] } else { 1.0 };
        let edge = |i: usize| -> f64 {
            // Column i spans [t_i, t_{i+1}); the last one as wide as the one before.
            if i < m {
                t[i]
            } else {
                t[m - 1] + dt_last
            }
        };
        (first..end)
            .step_by(group)
            .map(|s| {
                let e = (s + group).min(end);
                let mut dens = vec![0.0; BINS];
                for h in &self.hists[s..e] {
                    for (acc, &p) in dens.iter_mut().zip(h) {
                        *acc += p as f64 * BINS as f64;
                    }
                }
                for v in &mut dens {
                    *v /= (e - s) as f64;
                }
                (edge(s).max(w0), edge(e).min(w1), dens)
            })
            .filter(|c| c.0 < c.1)
            .collect()
    }
}

impl Picture for KymographPicture<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> io::Result<()> {
        let area = draw_title(root, self.title)?;
        let (w, h) = area.dim_in_pixel();
        let bar_w = px(150);
        let (main, bar) = area.split_horizontally(w.saturating_sub(bar_w));
        let cols = self.drawn();
        let t_range = padded(finite_range(cols.iter().flat_map(|c| [c.0, c.1])), 0.0);
        let mut label = self.axis_label();
        let desc = if label.len() > 40 {
            label = "angle (principal plane)".into();
            Some(self.axis_label())
        } else {
            None
        };
        let mut chart = ChartBuilder::on(&main)
            .margin(px(12))
            .margin_top(px(if desc.is_some() { 30 } else { 12 }))
            .margin_right(px(16))
            .x_label_area_size(px(55))
            .y_label_area_size(px(95))
            .build_cartesian_2d(t_range.0..t_range.1, 0.0..2.0)
            .io()?;
        let pi_label = |v: &f64| -> String {
            match (v * 2.0).round() as i64 {
                0 => "0".into(),
                1 => "π/2".into(),
                2 => "π".into(),
                3 => "3π/2".into(),
                4 => "2π".into(),
                _ => format!("{}π", tick(v)),
            }
        };
        super::axes(&mut chart)
            .disable_mesh()
            .x_label_formatter(&tick)
            .y_labels(5)
            .y_label_formatter(&pi_label)
            .x_desc("t")
            .y_desc(label)
            .draw()
            .io()?;
        if cols.is_empty() {
            return draw_no_data(&main, "no token samples");
        }
        let max = density_max(&cols);
        draw_density_columns(&mut chart, &cols, max)?;
        if let Some(full) = desc {
            let style = text_at(
                super::LEGEND_SIZE,
                RGBColor(60, 60, 60),
                HPos::Left,
                VPos::Top,
            );
            main.draw_text(&full, &style, (pxi(107), pxi(4))).io()?;
        }
        if self.history.tokens_used() < self.history.n() {
            let style = text_at(
                super::LEGEND_SIZE,
                RGBColor(60, 60, 60),
                HPos::Right,
                VPos::Bottom,
            );
            let note = format!(
                "{} of {} tokens",
                self.history.tokens_used(),
                self.history.n()
            );
            let (_, mh) = main.dim_in_pixel();
            main.draw_text(
                &note,
                &style,
                (w as i32 - bar_w as i32 - pxi(20), mh as i32 - pxi(2)),
            )
            .io()?;
        }
        draw_colour_bar(&bar, max, h)
    }
}

/// The colour bar: relative density on the log scale, with ticks at 0, 1, 3, 10, 30, ...
fn draw_colour_bar<DB: DrawingBackend>(
    bar: &DrawingArea<DB, Shift>,
    max: f64,
    h: u32,
) -> io::Result<()> {
    let (top, bottom) = (pxi(30), h as i32 - pxi(80));
    let (x0, x1) = (pxi(14), pxi(40));
    let span = (bottom - top).max(1);
    let steps = 120;
    for s in 0..steps {
        let c0 = s as f64 / steps as f64;
        let x = (c0 * (1.0 + max).ln()).exp() - 1.0;
        let y1 = bottom - (span * s / steps);
        let y0 = bottom - (span * (s + 1) / steps);
        bar.draw(&Rectangle::new(
            [(x0, y0), (x1, y1)],
            density_color(x, max).filled(),
        ))
        .io()?;
    }
    bar.draw(&Rectangle::new(
        [(x0, top), (x1, bottom)],
        RGBColor(80, 80, 80).stroke_width(lw(1)),
    ))
    .io()?;
    let style = text_at(TICK_SIZE, BLACK, HPos::Left, VPos::Center);
    let mut ticks = vec![0.0];
    let mut v = 1.0;
    while v <= max * 1.0001 {
        ticks.push(v);
        v *= if (v.log10().fract()).abs() < 1e-9 {
            3.0
        } else {
            10.0 / 3.0
        };
        v = (v * 1e6).round() / 1e6;
    }
    for x in ticks {
        let c = (1.0 + x).ln() / (1.0 + max).ln();
        let y = bottom - (span as f64 * c).round() as i32;
        bar.draw(&PathElement::new(
            vec![(x1, y), (x1 + pxi(6), y)],
            BLACK.stroke_width(lw(1)),
        ))
        .io()?;
        bar.draw_text(&short(x), &style, (x1 + pxi(10), y)).io()?;
    }
    let caption = text_at(super::LEGEND_SIZE, BLACK, HPos::Left, VPos::Top);
    bar.draw_text("density", &caption, (pxi(4), bottom + pxi(12)))
        .io()?;
    bar.draw_text(
        "(1 = uniform)",
        &caption,
        (pxi(4), bottom + pxi(12 + super::LEGEND_SIZE as i32)),
    )
    .io()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bin the exact path gives: `factor * atan2` reduced to [0, 2 pi), `None` if not finite.
    fn exact_bin(y: f64, x: f64, factor: f64, bins: usize) -> Option<usize> {
        let a = factor * y.atan2(x);
        a.is_finite().then(|| angle_bin(a, bins))
    }

    /// Points around (x, y): up to `ulps` ulps either way in each coordinate.
    fn around(x: f64, y: f64, ulps: usize) -> Vec<(f64, f64)> {
        let steps = |v: f64| {
            let (mut up, mut down, mut out) = (v, v, vec![v]);
            for _ in 0..ulps {
                up = up.next_up();
                down = down.next_down();
                out.extend([up, down]);
            }
            out
        };
        let ys = steps(y);
        steps(x)
            .into_iter()
            .flat_map(|x| ys.iter().map(move |&y| (x, y)))
            .collect()
    }

    #[test]
    fn cheap_angle_is_within_its_error_bound() {
        // Against atan2 on a fine sweep of the circle (both octant folds and every reflection).
        let m = 200_000;
        let worst = (0..m)
            .map(|i| -PI + 2.0 * PI * (i as f64 + 0.37) / m as f64)
            .map(|a| (cheap_atan2(a.sin(), a.cos()) - a.sin().atan2(a.cos())).abs())
            .fold(0.0, f64::max);
        assert!(worst < 3e-9, "{worst:e}");
    }

    #[test]
    fn cheap_bins_match_atan2_bins_on_random_tokens() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for _ in 0..200_000 {
            let r = 10f64.powf(rng.random_range(-12.0..12.0));
            let (x, y) = (
                r * rng.random_range(-1.0..1.0),
                r * rng.random_range(-1.0..1.0),
            );
            for (factor, bins) in [(2.0, BINS), (1.0, BINS), (1.0, 90)] {
                let (cheap, exact) = (
                    angle_bin_of(y, x, factor, bins),
                    exact_bin(y, x, factor, bins),
                );
                assert_eq!(cheap, exact, "x {x:e} y {y:e} factor {factor} bins {bins}");
            }
        }
    }

    #[test]
    fn cheap_bins_match_atan2_bins_on_and_next_to_every_edge() {
        // Doubled angle (d = 2): edges at theta = pi j / bins and theta + pi; an angle in the
        // principal plane: edges at 2 pi j / bins. Points on the edge and 1 to 2 ulps off it in
        // each coordinate, which straddle the edge as atan2 rounds it.
        let mut straddled = 0;
        for (factor, bins) in [(2.0, BINS), (1.0, BINS), (1.0, 90)] {
            for j in 0..2 * bins {
                let theta = 2.0 * PI * j as f64 / (factor * bins as f64);
                let points = around(theta.cos(), theta.sin(), 2);
                let mut seen = std::collections::BTreeSet::new();
                for &(x, y) in &points {
                    let exact = exact_bin(y, x, factor, bins);
                    assert_eq!(angle_bin_of(y, x, factor, bins), exact, "x {x:e} y {y:e}");
                    seen.insert(exact);
                }
                straddled += usize::from(seen.len() > 1);
            }
        }
        assert!(
            straddled > 100,
            "the points straddle few edges: {straddled}"
        );
    }

    #[test]
    fn cheap_bins_of_special_points_are_atan2_bins() {
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            1e-301,
            f64::MAX,
            -f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        for &x in &specials {
            for &y in &specials {
                for (factor, bins) in [(2.0, BINS), (1.0, BINS)] {
                    let exact = exact_bin(y, x, factor, bins);
                    assert_eq!(angle_bin_of(y, x, factor, bins), exact, "x {x:e} y {y:e}");
                }
            }
        }
    }

    /// The counts of the doubled angles' bins found one token at a time by [`angle_bin_of`].
    fn counts_one_by_one(rows: &[f64]) -> [u64; BINS] {
        let mut counts = [0u64; BINS];
        for xy in rows.chunks_exact(2) {
            if let Some(j) = angle_bin_of(xy[1], xy[0], 2.0, BINS) {
                counts[j] += 1;
            }
        }
        counts
    }

    #[test]
    fn block_counts_match_one_by_one_bins() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(23);
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            5e-324,
            1e-301,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        // Random points, points on and next to every bin edge, special values, and one
        // cluster (many tokens in one bin), in blocks that do not fill BLOCK.
        let mut rows: Vec<f64> = Vec::new();
        for _ in 0..3000 {
            let r = 10f64.powf(rng.random_range(-12.0..12.0));
            rows.extend([
                r * rng.random_range(-1.0..1.0),
                r * rng.random_range(-1.0..1.0),
            ]);
        }
        for j in 0..2 * BINS {
            let theta = PI * j as f64 / BINS as f64;
            for (x, y) in around(theta.cos(), theta.sin(), 2) {
                rows.extend([x, y]);
            }
        }
        for &x in &specials {
            for &y in &specials {
                rows.extend([x, y]);
            }
        }
        rows.extend([0.3f64.cos(), 0.3f64.sin()].repeat(1000));
        for len in [rows.len(), 2 * BLOCK - 2, 2 * BLOCK + 6, 2, 0] {
            let part = &rows[rows.len() - len..];
            let mut counts = [0u64; BINS];
            count_doubled(part, &mut counts);
            assert_eq!(counts, counts_one_by_one(part), "{len} numbers");
        }
        let mut counts = [0u64; BINS];
        count_doubled(&rows, &mut counts);
        assert!(counts.iter().sum::<u64>() > 4000);
    }

    #[test]
    fn doubled_angles_fall_in_their_bins() {
        // Two antipodal clusters at theta = 0.3 and 0.3 + pi: one bin of the doubled angle.
        let (c, s) = (0.3f64.cos(), 0.3f64.sin());
        let tokens = [c, s, -c, -s, c, s, -c, -s];
        let mut h = AngleHistory::new(4, 2);
        h.record(0, 0.0, &tokens);
        let (hists, share) = h.histograms();
        assert!(share.is_none());
        let j = angle_bin(0.6, BINS);
        assert_eq!(hists[0][j], 1.0);
        assert_eq!(hists[0].iter().sum::<f32>(), 1.0);
    }

    #[test]
    fn columns_stay_bounded_and_evenly_spaced() {
        let tokens = [1.0, 0.0];
        let mut h = AngleHistory::new(1, 2);
        for i in 0..5000 {
            h.record(i, i as f64, &tokens);
        }
        assert!(h.len() <= MAX_COLUMNS);
        assert!(h.len() > MAX_COLUMNS / 2);
        let dt: Vec<f64> = h.times().windows(2).map(|w| w[1] - w[0]).collect();
        assert!(dt.iter().all(|&x| x == dt[0]), "{dt:?}");
        assert_eq!(h.times()[0], 0.0);
    }

    #[test]
    fn principal_plane_angles_in_high_dimension() {
        // Tokens in the (x3, x4) plane of d = 5 at angles 0 and pi/2: two bins a quarter apart.
        let d = 5;
        let mut tokens = vec![0.0; 4 * d];
        for (k, a) in [0.0f64, 0.0, 1.0, 1.0].iter().enumerate() {
            tokens[k * d + 2] = (a * PI / 2.0).cos();
            tokens[k * d + 3] = (a * PI / 2.0).sin();
        }
        let mut h = AngleHistory::new(4, d);
        h.record(0, 0.0, &tokens);
        let (hists, share) = h.histograms();
        let (a, b) = share.unwrap();
        assert!((a - 0.5).abs() < 1e-6 && (b - 0.5).abs() < 1e-6);
        let occupied: Vec<usize> = (0..BINS).filter(|&j| hists[0][j] > 0.0).collect();
        assert_eq!(occupied.len(), 2);
        let gap = (occupied[1] - occupied[0]) as f64 / BINS as f64;
        assert!((gap - 0.25).abs() < 1.5 / BINS as f64 || (gap - 0.75).abs() < 1.5 / BINS as f64);
    }
}
