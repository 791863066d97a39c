//! The group model's moment in d = 2 from the initial tokens' harmonics: no pass over the
//! tokens while Phi is well conditioned (docs/MATH.md §2.1).
//!
//! With x_k(0) = (cos t_k, sin t_k), w_k = e^{2 i t_k} and G = Phi^T Phi,
//!
//! ```text
//! |Phi x_k|^2 = a + Re(conj(g) w_k),   a = tr G / 2,   g = (G_11 - G_22) / 2 + i G_12,
//! 1 / |Phi x_k|^2 = (1 / D) [1 + 2 Re sum_{m >= 1} c^m w_k^m],   D = |det Phi|,
//! c = -conj(q),   q = g / (a + D),   |q| < 1          (the Poisson kernel),
//! ```
//!
//! so with the initial harmonics Z_m = sum_k w_k^m (Z_{-m} = conj(Z_m), fixed for the whole run)
//!
//! ```text
//! T_0 = sum_k 1 / |Phi x_k|^2   = (1 / D) [Z_0 + 2 Re sum_{m=1}^{M} c^m Z_m],
//! T_1 = sum_k w_k / |Phi x_k|^2 = (1 / D) [Z_1 + sum_{m=1}^{M} c^m Z_{m+1} + conj(sum_{m=1}^{M} c^m Z_{m-1})],
//! sum_k z_k z_k^T / |z_k|^2 = Phi X Phi^T,   X = (1/2) (T_0 + Re T_1, Im T_1; Im T_1, T_0 - Re T_1).
//! ```
//!
//! The tokens' mean (for R1) follows the same way. Writing Phi on C as zeta -> alpha zeta +
//! beta conj(zeta) (alpha = ((P_11 + P_22) + i (P_21 - P_12)) / 2, beta = ((P_11 - P_22) +
//! i (P_21 + P_12)) / 2; q = beta / alpha for det Phi > 0), with zeta_k = e^{i t_k},
//!
//! ```text
//! y_k = (alpha / |alpha|) zeta_k sqrt((1 + q conj(w_k)) / (1 + conj(q) w_k)) = (alpha / |alpha|) sum_m F_m zeta_k w_k^m,
//! F_m = conj(q)^m sum_j a_j b_{j+m} |q|^{2j},   F_{-m} = q^m sum_j a_{j+m} b_j |q|^{2j}   (m >= 0),
//! a_j = binom(1/2, j),   b_j = binom(-1/2, j),
//! sum_k y_k = (alpha / |alpha|) [sum_{m=0}^{M} F_m O_m + sum_{m=1}^{M} F_{-m} conj(O_{m-1})],
//! ```
//!
//! with the odd harmonics O_m = sum_k zeta_k w_k^m = sum_k e^{i (2m + 1) t_k}; its tail is smaller
//! than S's (|F_{+-m}| <= |q|^m / (1 - |q|^2)).
//!
//! This is the Watanabe–Strogatz picture made computational: Phi acts on the doubled angle by a
//! Möbius map, and the moment of the pushed-forward tokens is a power series in its parameter q
//! whose coefficients are the initial tokens' harmonics. Cutting it after M terms leaves at most
//! 4 (1 + |q|)^3 |q|^{M+1} / (1 - |q|)^4 of S (|Z_m| <= Z_0; the cube and fourth power carry
//! the factor cond(Phi)^2 = ((1 + |q|) / (1 - |q|))^2 from X to S); M is the smallest that
//! makes this below [`TAIL`], a quarter of the rounding unit. When more than [`MAX_TERMS`]
//! terms would be needed (|q| above about 0.70: tokens gathering, Phi far from conformal) the
//! caller sums over the tokens instead.

use num_complex::Complex64;

use crate::parallel::{chunk_count, chunked_sum};
use crate::simd::{vectorized, LANES};

/// The truncation bound on S (relative to its size 1): 2^-55.
pub const TAIL: f64 = 1.0 / 36_028_797_018_963_968.0;

/// The most terms the series may use (|q| up to about 0.70).
pub const MAX_TERMS: usize = 128;

/// The harmonics Z_0, Z_1, ... and O_0, O_1, ... of the initial tokens, computed as far as the
/// series has asked.
#[derive(Default)]
pub struct Harmonics {
    /// Z_m = sum_k w_k^m (zero tokens left out).
    z: Vec<Complex64>,
    /// O_m = sum_k zeta_k w_k^m.
    o: Vec<Complex64>,
    /// binom(1/2, j) and binom(-1/2, j).
    half: Vec<f64>,
    minus_half: Vec<f64>,
}

/// How the series is evaluated for one Phi: q, the terms M, 1 / D and alpha / |alpha|.
#[derive(Clone, Copy, Debug)]
pub struct Series {
    /// q = beta / alpha (|q| < 1); the series' factor is c = -conj(q).
    q: Complex64,
    /// alpha / |alpha|.
    turn: Complex64,
    /// M, the number of terms kept.
    terms: usize,
    /// 1 / |det Phi|.
    inv_det: f64,
}

impl Series {
    /// The series for Phi (column-major 2 x 2), or `None` when it would need more than
    /// [`MAX_TERMS`] terms or Phi is singular.
    pub fn for_phi(phi: &[f64]) -> Option<Series> {
        let [p00, p10, p01, p11] = [phi[0], phi[1], phi[2], phi[3]];
        let det = p00 * p11 - p01 * p10;
        let alpha = Complex64::new(p00 + p11, p10 - p01) * 0.5;
        let beta = Complex64::new(p00 - p11, p10 + p01) * 0.5;
        // det Phi = |alpha|^2 - |beta|^2 > 0 keeps |q| < 1 (the flow keeps det Phi > 0).
        let size = alpha.norm_sqr().sqrt();
        if !(det > 0.0 && det.is_finite() && size > 0.0) {
            return None;
        }
        let q = beta / alpha;
        let terms = tabled_terms(q.norm_sqr().sqrt())?;
        Some(Series {
            q,
            turn: alpha / size,
            terms,
            inv_det: 1.0 / det,
        })
    }

    /// M, the number of terms this series keeps.
    #[cfg(test)]
    fn terms(&self) -> usize {
        self.terms
    }

    /// The harmonics it reads: Z_0 ..= Z_{M+1}.
    pub fn harmonics_needed(&self) -> usize {
        self.terms + 2
    }
}

/// Bins of |q| for [`tabled_terms`].
const TERM_BINS: usize = 4096;

/// The terms for |q| = r from a table: [`terms_for`] at the upper edge of r's bin (at least as
/// many terms as r needs, without four logarithms an evaluation).
fn tabled_terms(r: f64) -> Option<usize> {
    static TABLE: std::sync::OnceLock<Vec<Option<usize>>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (1..=TERM_BINS)
            .map(|i| terms_for(i as f64 / TERM_BINS as f64))
            .collect()
    });
    if r == 0.0 {
        return Some(0);
    }
    if !(0.0..1.0).contains(&r) {
        return None;
    }
    table[((r * TERM_BINS as f64) as usize).min(TERM_BINS - 1)]
}

/// The smallest M with 4 (1 + r)^3 r^{M+1} / (1 - r)^4 <= TAIL, if it is at most MAX_TERMS.
fn terms_for(r: f64) -> Option<usize> {
    if r == 0.0 {
        return Some(0);
    }
    if r.is_nan() || r >= 1.0 {
        return None;
    }
    let room = TAIL * (1.0 - r).powi(4) / (4.0 * (1.0 + r).powi(3));
    let exponent = (room.ln() / r.ln()).ceil();
    if !(exponent.is_finite() && exponent <= (MAX_TERMS + 1) as f64) {
        return None;
    }
    // r^{M+1} <= room with M + 1 = exponent (at least 1).
    Some((exponent as usize).max(1) - 1)
}

impl Harmonics {
    /// Makes sure Z_0 ..= Z_{count-1} of the tokens `x` (n x 2 row-major) are at hand: on a
    /// shortfall all are computed again up to twice as many (so the work stays within twice
    /// the final count); every Z_m comes out the same however far the computation goes.
    fn ensure(&mut self, x: &[f64], count: usize) {
        if self.z.len() >= count {
            return;
        }
        let count = count.max(2 * self.z.len()).clamp(16, MAX_TERMS + 2);
        (self.z, self.o) = harmonics(x, count);
        if self.half.is_empty() {
            self.half = binomials(0.5);
            self.minus_half = binomials(-0.5);
        }
    }

    /// Z_m.
    fn at(&self, m: usize) -> Complex64 {
        self.z[m]
    }

    /// sum_k y_k (as y_1 + i y_2) with y_k = Phi x_k / |Phi x_k|, by the series (after
    /// [`Harmonics::projector_sums`] of the same series, which makes the harmonics; F_{-m} =
    /// conj(conj(q)^m) times a real sum, so each m needs one power). The real sums of F_m and
    /// F_{-m} keep the terms j with |q|^{m + 2j} above the cut's, j <= (M - m) / 2 + 1; they are
    /// built a power of |q|^2 at a time over all m (independent sums, vectorised).
    pub fn mean_direction_sum(&self, series: &Series) -> Complex64 {
        let (plus, minus) = vectorized(
            #[inline(always)]
            || self.mean_direction_coefficients(series),
        );
        let mut sum = Complex64::default();
        let mut power = Complex64::new(1.0, 0.0);
        for m in 0..=series.terms {
            sum += power * plus[m] * self.o[m];
            if m > 0 {
                sum += (power * minus[m] * self.o[m - 1]).conj();
            }
            power *= series.q.conj();
        }
        series.turn * sum
    }

    /// The real sums sum_j a_j b_{j+m} |q|^{2j} (plus) and sum_j a_{j+m} b_j |q|^{2j} (minus),
    /// m = 0 ..= M.
    #[inline(always)]
    fn mean_direction_coefficients(
        &self,
        series: &Series,
    ) -> ([f64; MAX_TERMS + 1], [f64; MAX_TERMS + 1]) {
        let (a, b) = (&self.half, &self.minus_half);
        let big_m = series.terms;
        let r2 = series.q.norm_sqr();
        let mut plus = [0.0; MAX_TERMS + 1];
        let mut minus = [0.0; MAX_TERMS + 1];
        let mut weight = 1.0;
        for j in 0..big_m / 2 + 2 {
            // m with j <= (M - m) / 2 + 1, i.e. m <= M + 2 - 2j (and m <= M).
            let last = (big_m + 2).saturating_sub(2 * j).min(big_m);
            let (aj, bj) = (a[j] * weight, b[j] * weight);
            let shifted = b[j..=j + last].iter().zip(&a[j..=j + last]);
            let sums = plus[..=last].iter_mut().zip(&mut minus[..=last]);
            for ((p, n), (bm, am)) in sums.zip(shifted) {
                *p += aj * bm;
                *n += bj * am;
            }
            weight *= r2;
        }
        (plus, minus)
    }

    /// (sum a^2, sum ab, sum b^2) / |z|^2 over the tokens `x`, (a, b) = z = Phi x_k, by the
    /// series (computing the harmonics of `x` first where they fall short).
    pub fn projector_sums(&mut self, x: &[f64], phi: &[f64], series: &Series) -> [f64; 3] {
        self.ensure(x, series.harmonics_needed());
        let (t0, t1) = self.weighted_sums(series);
        let x = [0.5 * (t0 + t1.re), 0.5 * t1.im, 0.5 * (t0 - t1.re)];
        let rows = [[phi[0], phi[2]], [phi[1], phi[3]]];
        let form = |u: [f64; 2], v: [f64; 2]| {
            u[0] * (x[0] * v[0] + x[1] * v[1]) + u[1] * (x[1] * v[0] + x[2] * v[1])
        };
        [
            form(rows[0], rows[0]),
            form(rows[0], rows[1]),
            form(rows[1], rows[1]),
        ]
    }

    /// T_0 = sum 1 / |z|^2 and T_1 = sum w / |z|^2 by the series.
    ///
    /// One Horner pass gives P = sum_{m=2}^{M+1} c^{m-2} Z_m; then sum_{m>=1} c^m Z_m = c (Z_1 +
    /// c P), sum_{m>=1} c^m Z_{m+1} = c P and sum_{m>=1} c^m Z_{m-1} = c (Z_0 + c (Z_1 + c P)):
    /// each keeps at least the terms m <= M (a few beyond, smaller than the cut's tail).
    fn weighted_sums(&self, series: &Series) -> (f64, Complex64) {
        let c = -series.q.conj();
        // P in four Horner chains in c^4, one for each m mod 4 (independent: a quarter of the
        // latency): P = sum_r c^r P_r(c^4).
        let c4 = (c * c) * (c * c);
        let blocks = self.z[2..series.terms + 2].chunks_exact(4);
        let mut chains = [Complex64::default(); 4];
        chains[..blocks.remainder().len()].copy_from_slice(blocks.remainder());
        vectorized(
            #[inline(always)]
            || {
                for block in blocks.rev() {
                    for r in 0..4 {
                        chains[r] = fused_multiply_add(chains[r], c4, block[r]);
                    }
                }
            },
        );
        let p = chains[0] + c * (chains[1] + c * (chains[2] + c * chains[3]));
        let from_one = self.at(1) + c * p;
        let same = c * from_one;
        let up = c * p;
        let down = c * (self.at(0) + same);
        let t0 = series.inv_det * (self.at(0).re + 2.0 * same.re);
        let t1 = (self.at(1) + up + down.conj()) * series.inv_det;
        (t0, t1)
    }
}

/// Z_0 .. Z_{count-1} and O_0 .. O_{count-1} of the tokens `x` (n x 2 row-major): zeta = (x_1 +
/// i x_2) / |x|, w = zeta^2, powers by repeated products, summed in lanes of [`LANES`] tokens
/// within fixed chunks (the same numbers for any thread count and any `count`).
fn harmonics(x: &[f64], count: usize) -> (Vec<Complex64>, Vec<Complex64>) {
    let n = x.len() / 2;
    let width = 4 * count;
    let mut partials = vec![0.0; width * chunk_count(n)];
    let mut sums = vec![0.0; width];
    chunked_sum(x, 2, width, &mut partials, &mut sums, |rows, acc| {
        vectorized(
            #[inline(always)]
            || chunk_harmonics(rows, count, acc),
        )
    });
    let pairs = sums.chunks_exact(4);
    let z = pairs.clone().map(|p| Complex64::new(p[0], p[1])).collect();
    let o = pairs.map(|p| Complex64::new(p[2], p[3])).collect();
    (z, o)
}

/// acc[4m..4m+4] += Re, Im of sum w^m and of sum zeta w^m over the tokens `rows`, in lanes.
#[inline(always)]
fn chunk_harmonics(rows: &[f64], count: usize, acc: &mut [f64]) {
    let mut lanes = vec![[0.0; LANES]; 4 * count];
    let mut blocks = rows.chunks_exact(2 * LANES);
    for block in &mut blocks {
        add_block_powers(block.try_into().expect("a block"), &mut lanes);
    }
    let rest = blocks.remainder();
    if !rest.is_empty() {
        let mut padded = [0.0; 2 * LANES];
        padded[..rest.len()].copy_from_slice(rest);
        add_block_powers(&padded, &mut lanes);
    }
    for (a, lane) in acc.iter_mut().zip(&lanes) {
        *a += lane.iter().fold(0.0, |s, v| s + v);
    }
}

/// lanes[4m..4m+4][i] += w_i^m, zeta_i w_i^m for the LANES tokens of `block` (a zero token
/// adds 0).
#[inline(always)]
fn add_block_powers(block: &[f64; 2 * LANES], lanes: &mut [[f64; LANES]]) {
    let mut w_re = [0.0; LANES];
    let mut w_im = [0.0; LANES];
    let mut p_re = [0.0; LANES];
    let mut p_im = [0.0; LANES];
    let mut o_re = [0.0; LANES];
    let mut o_im = [0.0; LANES];
    for i in 0..LANES {
        let (x1, x2) = (block[2 * i], block[2 * i + 1]);
        let norm = x1 * x1 + x2 * x2;
        let inv = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        w_re[i] = (x1 * x1 - x2 * x2) * inv;
        w_im[i] = 2.0 * x1 * x2 * inv;
        p_re[i] = if norm > 0.0 { 1.0 } else { 0.0 };
        let root = inv.sqrt();
        o_re[i] = x1 * root;
        o_im[i] = x2 * root;
    }
    for quad in lanes.chunks_exact_mut(4) {
        for i in 0..LANES {
            quad[0][i] += p_re[i];
            quad[1][i] += p_im[i];
            quad[2][i] += o_re[i];
            quad[3][i] += o_im[i];
            let (re, im) = times(p_re[i], p_im[i], w_re[i], w_im[i]);
            (p_re[i], p_im[i]) = (re, im);
            let (re, im) = times(o_re[i], o_im[i], w_re[i], w_im[i]);
            (o_re[i], o_im[i]) = (re, im);
        }
    }
}

/// a b + c for complex numbers, each real part by fused multiply-adds (one rounding each; one
/// instruction where the CPU has FMA, which [`vectorized`] compiles for).
#[inline(always)]
fn fused_multiply_add(a: Complex64, b: Complex64, c: Complex64) -> Complex64 {
    Complex64::new(
        a.re.mul_add(b.re, (-a.im).mul_add(b.im, c.re)),
        a.re.mul_add(b.im, a.im.mul_add(b.re, c.im)),
    )
}

/// (a + i b) (c + i d).
#[inline(always)]
fn times(a: f64, b: f64, c: f64, d: f64) -> (f64, f64) {
    (a * c - b * d, a * d + b * c)
}

/// binom(s, j) for j = 0 ..= 2 MAX_TERMS + 4, by the products (s - i) / (i + 1).
fn binomials(s: f64) -> Vec<f64> {
    let mut b = vec![1.0; 2 * MAX_TERMS + 5];
    for j in 1..b.len() {
        b[j] = b[j - 1] * (s - (j - 1) as f64) / j as f64;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens at angles t_k (n x 2 row-major).
    fn tokens(angles: &[f64]) -> Vec<f64> {
        angles.iter().flat_map(|t| [t.cos(), t.sin()]).collect()
    }

    /// The sums by a plain loop over the tokens.
    fn direct(phi: &[f64], x: &[f64]) -> [f64; 3] {
        let mut s = [0.0; 3];
        for t in x.chunks_exact(2) {
            let a = phi[0] * t[0] + phi[2] * t[1];
            let b = phi[1] * t[0] + phi[3] * t[1];
            let norm = a * a + b * b;
            s[0] += a * a / norm;
            s[1] += a * b / norm;
            s[2] += b * b / norm;
        }
        s
    }

    fn angles(n: usize, seed: u64) -> Vec<f64> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 53) as f64 * std::f64::consts::TAU
            })
            .collect()
    }

    #[test]
    fn the_series_is_the_sum_over_the_tokens() {
        let x = tokens(&angles(3000, 7));
        let mut h = Harmonics::default();
        // Rotations times scales, shears and near-conformal maps, up to |q| near the cut.
        let maps = [
            [1.0, 0.0, 0.0, 1.0],
            [0.0, 1.0, -1.0, 0.0],
            [2.0, 0.3, -0.1, 1.7],
            [1.0, 0.5, 0.2, 1.4],
            [3.0, -1.0, 0.5, 0.9],
            [1.0, 0.0, 0.0, 4.5],
        ];
        let mut used = 0;
        for phi in maps {
            let Some(series) = Series::for_phi(&phi) else {
                continue;
            };
            used += 1;
            let s = h.projector_sums(&x, &phi, &series);
            let d = direct(&phi, &x);
            // Both are sums of 3000 terms of size <= 1: a few rounding units of n apart.
            for (a, b) in s.iter().zip(d) {
                assert!((a - b).abs() <= 1e-14 * 3000.0, "{phi:?}: {s:?} vs {d:?}");
            }
        }
        assert!(used >= 5);
    }

    #[test]
    fn the_mean_direction_series_is_the_sum_over_the_tokens() {
        let x = tokens(&angles(2000, 11));
        let mut h = Harmonics::default();
        for phi in [
            [1.0, 0.0, 0.0, 1.0],
            [2.0, 0.3, -0.1, 1.7],
            [3.0, -1.0, 0.5, 0.9],
            [1.0, 0.0, 0.0, 4.5],
        ] {
            let series = Series::for_phi(&phi).expect("within the terms");
            h.ensure(&x, series.harmonics_needed());
            let by_series = h.mean_direction_sum(&series);
            let mut direct = Complex64::default();
            for t in x.chunks_exact(2) {
                let z =
                    Complex64::new(phi[0] * t[0] + phi[2] * t[1], phi[1] * t[0] + phi[3] * t[1]);
                direct += z / z.norm();
            }
            let error = (by_series - direct).norm() / 2000.0;
            assert!(
                error <= 1e-15,
                "{phi:?}: {by_series} vs {direct} ({error:e})"
            );
        }
    }

    #[test]
    fn far_from_conformal_maps_are_left_to_the_direct_sum() {
        // q = 0.9: a map squeezing one direction by 19.
        assert!(Series::for_phi(&[1.0, 0.0, 0.0, 19.0]).is_none());
        assert!(Series::for_phi(&[1.0, 2.0, 2.0, 4.0]).is_none());
        assert!(Series::for_phi(&[f64::NAN, 0.0, 0.0, 1.0]).is_none());
        assert_eq!(
            Series::for_phi(&[2.0, 1.0, -1.0, 2.0]).map(|s| s.terms()),
            Some(0)
        );
    }

    #[test]
    fn the_cut_bounds_the_tail() {
        for r in [0.01, 0.1, 0.3, 0.5, 0.6, 0.65] {
            let m = terms_for(r).expect("within the terms") as i32;
            let bound = |m: i32| 4.0 * (1.0 + r).powi(3) * r.powi(m + 1) / (1.0 - r).powi(4);
            assert!(bound(m) <= TAIL, "r {r}: M {m}");
            assert!(
                m == 0 || bound(m - 1) > TAIL,
                "r {r}: M {m} is not the smallest"
            );
        }
        assert!(terms_for(0.9).is_none());
        // The table never keeps fewer terms than the bound needs.
        for i in 0..7000 {
            let r = i as f64 * 1e-4 + 1.234e-5;
            match (terms_for(r), tabled_terms(r)) {
                (Some(exact), Some(tabled)) => {
                    assert!(tabled >= exact && tabled <= exact + 2, "r {r}")
                }
                (None, tabled) => assert!(tabled.is_none(), "r {r}"),
                (Some(_), None) => assert!(r > 0.69, "r {r}"),
            }
        }
    }

    #[test]
    fn harmonics_do_not_depend_on_how_far_they_go_or_the_threads() {
        let x = tokens(&angles(10_000, 3));
        let short = harmonics(&x, 16);
        let long = harmonics(&x, 40);
        assert_eq!(short.0[..], long.0[..16]);
        assert_eq!(short.1[..], long.1[..16]);
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| harmonics(&x, 40));
        assert_eq!(one, long);
        assert_eq!(long.0[0].re, 10_000.0);
        assert!(long.0[0].im == 0.0);
        // O_0 = sum_k e^{i t_k} by its definition.
        let mean: Complex64 = x.chunks_exact(2).map(|t| Complex64::new(t[0], t[1])).sum();
        assert!((long.1[0] - mean).norm() < 1e-11);
    }
}
