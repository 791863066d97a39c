//! The spherical-harmonics kernel: the `usa` and `sa` fields on S^2 (d = 3) in O(n L^2) work
//! instead of O(n^2) (docs/MATH.md, "Softmax kernels on S^2 by spherical harmonics").
//!
//! For a head with A = a R, R orthogonal, put kappa = |beta a| and R' = sign(beta a) R, so that
//! beta <x, A y> = kappa <R'^T x, y>. The plane-wave expansion and the addition theorem give
//!
//! ```text
//! e^{kappa t} = sum_l (2l + 1) i_l(kappa) P_l(t),
//! e^{kappa <q, y>} = 4 pi sum_{l <= L} i_l(kappa) sum_{m=-l..l} Y_lm(q) Y_lm(y)   (+ the tail),
//! ```
//!
//! with i_l the modified spherical Bessel functions and Y_lm the real orthonormal spherical
//! harmonics. With the moments mu_lm = (1/n) sum_j Y_lm(x_j) and W_lm = (1/n) sum_j Y_lm(x_j) x_j
//! (shared by every head) and q_k = R'^T x_k,
//!
//! ```text
//! usa:  f_k = e^{kappa} V sum_lm 4 pi e^{-kappa} i_l(kappa) Y_lm(q_k) W_lm,
//! sa:   f_k = V N_k / D_k,  N_k = sum_lm 4 pi e^{-kappa} i_l Y_lm(q_k) W_lm,  D_k = the same with mu_lm,
//! ```
//!
//! summed over heads, each with its own kappa, R', V and degree L; then x_k' = P_k f_k.
//!
//! **Truncation and error.** The scaled values e^{-kappa} (2l + 1) i_l(kappa) are positive and sum
//! to 1 (t = 1), so dropping l > L errs by at most T_L e^{kappa} on every weight, T_L = sum_{l > L}
//! e^{-kappa} (2l + 1) i_l(kappa), which falls faster than any geometric sequence once l > kappa.
//! Every term of the series is rounded relative to the largest weight e^{kappa}. A token's sum
//! (1/n) sum_j w_kj is at least e^{-kappa} (its farthest partners) and at least its own weight
//! e^{kappa <x_k, R' x_k>} / n >= e^{kappa lambda} / n (lambda the smallest eigenvalue of
//! (R' + R'^T) / 2; lambda = 1 for A = I), so relative to it the error is at most
//!
//! ```text
//! bound = (ROUNDING (L + 1) eps + T_L) * range,   range = min(e^{2 kappa}, n e^{kappa (1 - lambda)}),
//! ```
//!
//! e^{2 kappa} being the dynamic range between a token's nearest and farthest partners. L is the
//! smallest degree with T_L range <= tolerance / 2; the kernel runs where bound <= tolerance for
//! every head (the tolerance is the run's `solver.rtol`).
//!
//! **Harmonics by recurrences.** Y_lm = Q_l^m(z) Re (x + i y)^m and Y_l,-m = Q_l^m(z) Im (x + i y)^m,
//! where Q_l^m = N_m Pbar_l^m / sin^m(theta) are polynomials in z = cos theta made by the
//! three-term recurrence of the normalised associated Legendre functions (forward in l for each m,
//! stable): Q_m^m a constant, Q_{m+1}^m = sqrt(2m + 3) z Q_m^m,
//! Q_l^m = a_lm z Q_{l-1}^m - c_lm Q_{l-2}^m. No angle, no square root per harmonic.
//!
//! **Cost and determinism.** Moments: O(n (L + 1)^2), four lanes of tokens at a time, summed in a
//! fixed number of groups of whole chunks of `parallel::TOKENS_PER_CHUNK` tokens (the number of
//! groups depends on n only) and the groups added in order; evaluation: O(n (L_h + 1)^2) per head,
//! token by token. The field is bit-identical for any thread count; all scratch is allocated when
//! the field is built.

use std::f64::consts::PI;
use std::sync::Mutex;

use nalgebra::{DMatrix, Matrix3, SymmetricEigen};
use rayon::prelude::*;

use super::bessel::{
    leading_terms, miller_downward, recurrence_overflows, settled_without_recurrence,
};
use super::{Attention, Kernel, Mask, Normalization};
use crate::parallel::{chunk_count, for_each_chunk, TOKENS_PER_CHUNK};
use crate::simd;

/// Tokens handled side by side (one 4-wide vector).
const LANES: usize = 4;

/// A head applies when A^T A = a^2 I to this relative accuracy (entry by entry).
pub const ORTHOGONALITY: f64 = 1e-12;

/// The highest degree the kernel accepts (beyond it the direct kernel is cheaper anyway).
pub const MAX_DEGREE: usize = 160;

/// The rounding constant of the bound: a token's error is at most ROUNDING (L + 1) eps times the
/// largest weight (measured worst case about a fifth of it, docs/DESIGN.md).
pub const ROUNDING: f64 = 4.0;

/// The tolerance of a field built without one (the default `solver.rtol`).
pub const DEFAULT_TOLERANCE: f64 = 1e-9;

/// `auto` takes the harmonics when n >= AUTO_TOKENS_PER_HARMONIC (L + 1)^2 (measured crossover
/// against the direct kernel, docs/DESIGN.md "Harmonics kernel"), and never below AUTO_MIN_TOKENS.
pub const AUTO_TOKENS_PER_HARMONIC: f64 = 3.0;

/// The fewest tokens for which `auto` takes the harmonics.
pub const AUTO_MIN_TOKENS: usize = 512;

/// At most this many groups of chunks sum the moments (their lanes are the scratch).
const MAX_GROUPS: usize = 32;

/// At most this many bytes of moment scratch for the groups together.
const GROUP_SCRATCH_BYTES: usize = 256 << 20;

/// One head as the kernel reads it: beta <x, A y> = kappa <R'^T x, y>.
#[derive(Debug, Clone)]
pub struct HeadShape {
    /// kappa = |beta a| >= 0.
    pub kappa: f64,
    /// R' (sign included), orthogonal to [`ORTHOGONALITY`].
    pub rotation: Matrix3<f64>,
    /// The smallest eigenvalue of (R' + R'^T) / 2, in [-1, 1].
    pub lambda: f64,
}

/// kappa, R' and lambda of a 3 x 3 matrix A at inverse temperature beta, or `None` when A is not
/// a multiple of an orthogonal matrix (to [`ORTHOGONALITY`]).
pub fn head_shape(a: &DMatrix<f64>, beta: f64) -> Option<HeadShape> {
    if a.shape() != (3, 3) || !beta.is_finite() || a.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let gram = a.transpose() * a;
    let scale2 = gram.trace() / 3.0;
    if scale2 == 0.0 {
        return Some(HeadShape {
            kappa: 0.0,
            rotation: Matrix3::identity(),
            lambda: 1.0,
        });
    }
    let off = (0..3)
        .flat_map(|i| (0..3).map(move |j| (i, j)))
        .map(|(i, j)| (gram[(i, j)] / scale2 - if i == j { 1.0 } else { 0.0 }).abs())
        .fold(0.0, f64::max);
    if off > ORTHOGONALITY {
        return None;
    }
    let scale = scale2.sqrt();
    let s = beta * scale;
    let rotation = Matrix3::from_fn(|i, j| a[(i, j)] / scale * s.signum());
    let symmetric = (rotation + rotation.transpose()) * 0.5;
    let lambda = SymmetricEigen::new(symmetric)
        .eigenvalues
        .min()
        .clamp(-1.0, 1.0);
    Some(HeadShape {
        kappa: s.abs(),
        rotation,
        lambda,
    })
}

/// Why the harmonics kernel does not hold for this layer (d, kernel, mask, normalisation,
/// heads), or `None`.
pub fn why_not(attention: &Attention) -> Option<String> {
    if attention.d() != 3 {
        return Some(format!(
            "\"harmonics\" needs d = 3 (this field has d = {})",
            attention.d()
        ));
    }
    if attention.kernel == Kernel::Lsa {
        return Some(
            "\"harmonics\" needs kernel \"usa\" or \"sa\" (this field has \"lsa\")".into(),
        );
    }
    if attention.mask != Mask::None {
        return Some("\"harmonics\" does not hold under a causal mask (its moments average over every token); use \"auto\" or \"direct\"".into());
    }
    if attention.normalization != Normalization::Post {
        return Some("\"harmonics\" does not hold for a normalisation other than post-LN; use \"auto\" or \"direct\"".into());
    }
    if !attention.position.is_none() {
        return Some("\"harmonics\" does not hold with positions (model.position: the tokens are not exchangeable); use \"auto\" or \"direct\"".into());
    }
    let formed = attention.formed();
    for (h, head) in formed.heads.iter().enumerate() {
        if head_shape(&head.a, attention.beta).is_none() {
            return Some(format!(
                "\"harmonics\" needs every head's A to be a multiple of an orthogonal matrix (A^T A = a^2 I to {ORTHOGONALITY:.0e}); head {} is not; use \"auto\" or \"direct\"",
                h + 1
            ));
        }
    }
    None
}

/// e^{-x} i_l(x) for l = 0..out.len() (x finite, >= 0), by Miller's downward recurrence
/// i_{l-1} = i_{l+1} + (2l + 1) / x i_l normalised by sum_l (2l + 1) e^{-x} i_l(x) = 1.
pub fn scaled_spherical_bessel_i(x: f64, out: &mut [f64]) {
    if settled_without_recurrence(x, out) {
        return;
    }
    let reach = x.ceil().min(1e7) as usize;
    let start = (out.len() - 1).max(reach) + 40 + (10.0 * x.min(1e7).sqrt()).ceil() as usize;
    // For tiny x (beta -> 0) the factor (2l + 1) / x would overflow before a rescaling: there
    // e^{-x} i_l(x) = x^l / (2l + 1)!! (1 + O(x)), exact to the arithmetic below x = 1e-50.
    if recurrence_overflows(start + 1, x, 1e250) {
        leading_terms(out, 1.0, |previous, l| previous * x / (2.0 * l + 1.0));
        return;
    }
    // sum_l (2l + 1) f_l over the orders above the current one.
    let (current, sum) = miller_downward(
        start,
        1e-280,
        out,
        (1e250, 1e-250),
        |l| (2 * l + 1) as f64 / x,
        |l| (2 * l + 1) as f64,
    );
    out[0] = current;
    let total = current + sum;
    out.iter_mut().for_each(|v| *v /= total);
}

/// The scaled values e^{-kappa} i_l(kappa), l = 0..=MAX_DEGREE + 1, and the tails
/// T_L = sum_{l > L} e^{-kappa} (2l + 1) i_l(kappa), L = 0..=MAX_DEGREE.
fn radial_and_tails(kappa: f64) -> (Vec<f64>, Vec<f64>) {
    // Far beyond MAX_DEGREE so that the tails include every order that matters.
    let mut values = vec![0.0; MAX_DEGREE + 400];
    scaled_spherical_bessel_i(kappa, &mut values);
    let mut tails = vec![0.0; MAX_DEGREE + 1];
    let mut sum = 0.0;
    for l in (1..values.len()).rev() {
        sum += (2 * l + 1) as f64 * values[l];
        if l - 1 <= MAX_DEGREE {
            tails[l - 1] = sum;
        }
    }
    values.truncate(MAX_DEGREE + 2);
    (values, tails)
}

/// T_L = sum_{l > L} e^{-kappa} (2l + 1) i_l(kappa): the truncated weight errs by at most
/// T_L e^{kappa} (L <= MAX_DEGREE).
pub fn tail(kappa: f64, degree: usize) -> f64 {
    radial_and_tails(kappa).1[degree.min(MAX_DEGREE)]
}

/// The dynamic range min(e^{2 kappa}, n e^{kappa (1 - lambda)}) of a head for n tokens.
pub fn dynamic_range(shape: &HeadShape, n: usize) -> f64 {
    let full = (2.0 * shape.kappa).exp();
    let own = n.max(1) as f64 * (shape.kappa * (1.0 - shape.lambda)).exp();
    full.min(own)
}

/// One head's plan: its shape, degree L and a-priori bound.
#[derive(Debug, Clone)]
pub struct HeadPlan {
    /// kappa, R', lambda.
    pub shape: HeadShape,
    /// The truncation degree L.
    pub degree: usize,
    /// (ROUNDING (L + 1) eps + T_L) range.
    pub bound: f64,
}

/// The degree and bound of a head for n tokens at `tolerance`: L the smallest degree with
/// T_L range <= tolerance / 2 (at most MAX_DEGREE).
pub fn plan_head(shape: HeadShape, n: usize, tolerance: f64) -> HeadPlan {
    let range = dynamic_range(&shape, n);
    let (_, tails) = radial_and_tails(shape.kappa);
    let target = 0.5 * tolerance / range;
    let degree = tails
        .iter()
        .position(|t| *t <= target)
        .unwrap_or(MAX_DEGREE);
    let bound = (ROUNDING * (degree + 1) as f64 * f64::EPSILON + tails[degree]) * range;
    HeadPlan {
        shape,
        degree,
        bound,
    }
}

/// The plans of every head (formed), or why the kernel does not hold.
pub fn plan(attention: &Attention, n: usize, tolerance: f64) -> Result<Vec<HeadPlan>, String> {
    if let Some(reason) = why_not(attention) {
        return Err(reason);
    }
    Ok(attention
        .formed()
        .heads
        .iter()
        .map(|h| {
            let shape = head_shape(&h.a, attention.beta).expect("checked by why_not");
            plan_head(shape, n, tolerance)
        })
        .collect())
}

/// The largest kappa for which a head of this shape meets `tolerance` for n tokens.
pub fn kappa_limit(shape: &HeadShape, n: usize, tolerance: f64) -> f64 {
    let meets = |kappa: f64| {
        let trial = HeadShape {
            kappa,
            ..shape.clone()
        };
        plan_head(trial, n, tolerance).bound <= tolerance
    };
    if !meets(0.0) {
        return 0.0;
    }
    let (mut low, mut high) = (0.0, 1.0);
    while meets(high) && high < 700.0 {
        low = high;
        high *= 2.0;
    }
    for _ in 0..40 {
        let mid = 0.5 * (low + high);
        if meets(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

/// Whether every head meets the tolerance; else the message naming beta and the limit.
pub fn check_exact(
    attention: &Attention,
    plans: &[HeadPlan],
    n: usize,
    tolerance: f64,
) -> Result<(), String> {
    for (h, p) in plans.iter().enumerate() {
        if p.bound <= tolerance {
            continue;
        }
        let limit = kappa_limit(&p.shape, n, tolerance);
        // kappa = |beta| a: the same head meets the tolerance up to |beta| = limit / a.
        let beta_limit = limit * attention.beta.abs() / p.shape.kappa;
        return Err(format!(
            "\"harmonics\" cannot meet the tolerance {tolerance:.0e} at beta = {}: head {} has kappa = beta a = {:.4} and a dynamic range min(e^(2 kappa), n e^(kappa (1 - lambda))) = {:.2e}, so its error bound is {:.2e}; the limit is kappa <= {limit:.3} (|beta| <= {beta_limit:.3} for this head); use \"auto\" or \"direct\"",
            attention.beta,
            h + 1,
            p.shape.kappa,
            dynamic_range(&p.shape, n),
            p.bound,
        ));
    }
    Ok(())
}

/// The number of real harmonics of degree <= L: (L + 1)^2.
pub fn harmonics_count(degree: usize) -> usize {
    (degree + 1) * (degree + 1)
}

/// Whether `auto` should take the harmonics of these plans for n tokens (faster than direct).
pub fn pays(plans: &[HeadPlan], n: usize) -> bool {
    let degree = plans.iter().map(|p| p.degree).max().unwrap_or(0);
    n >= AUTO_MIN_TOKENS && n as f64 >= AUTO_TOKENS_PER_HARMONIC * harmonics_count(degree) as f64
}

/// The recurrence constants of Q_l^m for degrees <= L, in the order m = 0..=L, l = m..=L.
struct Tables {
    degree: usize,
    /// Q_m^m.
    start: Vec<f64>,
    /// a_lm and c_lm at recurrence index rbase[m] + l - m.
    a: Vec<f64>,
    c: Vec<f64>,
    rbase: Vec<usize>,
    /// Index of Y_lm (and, for m > 0, of Y_l,-m right after it) at hbase[m] + (l - m) * (1 or 2).
    hbase: Vec<usize>,
}

impl Tables {
    fn new(degree: usize) -> Self {
        let mut start = Vec::with_capacity(degree + 1);
        let mut product = 1.0_f64;
        for m in 0..=degree {
            if m > 0 {
                product *= ((2 * m + 1) as f64 / (2 * m) as f64).sqrt();
            }
            let norm = if m == 0 {
                1.0 / (4.0 * PI).sqrt()
            } else {
                1.0 / (2.0 * PI).sqrt()
            };
            start.push(norm * product);
        }
        let (mut a, mut c, mut rbase, mut hbase) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut h = 0;
        for m in 0..=degree {
            rbase.push(a.len());
            hbase.push(h);
            h += (degree + 1 - m) * if m == 0 { 1 } else { 2 };
            for l in m..=degree {
                let (lf, mf) = (l as f64, m as f64);
                if l == m {
                    a.push(0.0);
                    c.push(0.0);
                } else if l == m + 1 {
                    a.push((2.0 * mf + 3.0).sqrt());
                    c.push(0.0);
                } else {
                    let al = ((4.0 * lf * lf - 1.0) / (lf * lf - mf * mf)).sqrt();
                    let l1 = lf - 1.0;
                    let bl = ((l1 * l1 - mf * mf) / (4.0 * l1 * l1 - 1.0)).sqrt();
                    a.push(al);
                    c.push(al * bl);
                }
            }
        }
        Tables {
            degree,
            start,
            a,
            c,
            rbase,
            hbase,
        }
    }
}

/// Calls `emit(index, yc, ys)` for the harmonics of degree <= `degree` at four unit points
/// (coordinates in lanes): yc = Y_lm, ys = Y_l,-m (zero for m = 0; index of Y_l,-m is index + 1).
#[inline(always)]
fn for_each_harmonic<F>(t: &Tables, degree: usize, p: &[[f64; LANES]; 3], mut emit: F)
where
    F: FnMut(usize, &[f64; LANES], &[f64; LANES], bool),
{
    let z = p[2];
    let mut cm = [1.0; LANES];
    let mut sm = [0.0; LANES];
    for m in 0..=degree {
        let (rb, hb) = (t.rbase[m], t.hbase[m]);
        let step = if m == 0 { 1 } else { 2 };
        let mut q2 = [0.0; LANES];
        let mut q1 = [t.start[m]; LANES];
        for l in m..=degree {
            if l > m {
                let (a, c) = (t.a[rb + l - m], t.c[rb + l - m]);
                let mut q = [0.0; LANES];
                for i in 0..LANES {
                    q[i] = a * z[i] * q1[i] - c * q2[i];
                }
                q2 = q1;
                q1 = q;
            }
            let mut yc = [0.0; LANES];
            let mut ys = [0.0; LANES];
            for i in 0..LANES {
                yc[i] = q1[i] * cm[i];
                ys[i] = q1[i] * sm[i];
            }
            emit(hb + (l - m) * step, &yc, &ys, m > 0);
        }
        // (x + i y)^{m+1} = (x + i y)^m (x + i y).
        for i in 0..LANES {
            let (c, s) = (cm[i], sm[i]);
            cm[i] = c * p[0][i] - s * p[1][i];
            sm[i] = c * p[1][i] + s * p[0][i];
        }
    }
}

/// Four tokens from `rows` (3 numbers each) starting at token `first`, normalised, in lanes;
/// missing tokens are (0, 0, 1) with weight 0.
#[inline(always)]
fn load_lanes(rows: &[f64], first: usize) -> ([[f64; LANES]; 3], [f64; LANES]) {
    let mut p = [[0.0; LANES]; 3];
    let mut w = [0.0; LANES];
    for i in 0..LANES {
        let k = first + i;
        if 3 * k + 3 <= rows.len() {
            let r = &rows[3 * k..3 * k + 3];
            let inv = 1.0 / (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
            for c in 0..3 {
                p[c][i] = r[c] * inv;
            }
            w[i] = 1.0;
        } else {
            p[2][i] = 1.0;
        }
    }
    (p, w)
}

/// Adds Y_lm(x_j) [1, x_j] of every token of `rows` into the lane sums `acc` (4 per harmonic).
#[inline(always)]
fn moment_rows(t: &Tables, rows: &[f64], acc: &mut [[f64; LANES]]) {
    let n = rows.len() / 3;
    for first in (0..n).step_by(LANES) {
        let (p, w) = load_lanes(rows, first);
        let mut u = [[0.0; LANES]; 4];
        for i in 0..LANES {
            u[0][i] = w[i];
            u[1][i] = w[i] * p[0][i];
            u[2][i] = w[i] * p[1][i];
            u[3][i] = w[i] * p[2][i];
        }
        for_each_harmonic(t, t.degree, &p, |index, yc, ys, sine| {
            let cell = &mut acc[4 * index..4 * index + 4];
            for (c, sum) in cell.iter_mut().enumerate() {
                for i in 0..LANES {
                    sum[i] += yc[i] * u[c][i];
                }
            }
            if sine {
                let cell = &mut acc[4 * index + 4..4 * index + 8];
                for (c, sum) in cell.iter_mut().enumerate() {
                    for i in 0..LANES {
                        sum[i] += ys[i] * u[c][i];
                    }
                }
            }
        });
    }
}

/// One head ready to evaluate.
struct HeadSeries {
    /// R'^T, so that q = R'^T x.
    rotation_t: Matrix3<f64>,
    /// V.
    value: Matrix3<f64>,
    kappa: f64,
    degree: usize,
    /// 4 pi e^{-kappa} i_l(kappa), l = 0..=degree.
    radial: Vec<f64>,
}

/// Buffers reused from one evaluation to the next.
struct Scratch {
    /// Lane sums of each group: groups x (4 (L + 1)^2) lanes.
    partials: Vec<[f64; LANES]>,
    /// mu_lm and W_lm (4 per harmonic).
    moments: Vec<f64>,
    /// Per head: 4 pi e^{-kappa} i_l times the moments (4 per harmonic).
    coefficients: Vec<Vec<[f64; 4]>>,
}

/// The `usa` / `sa` field on S^2 by spherical harmonics, for n tokens.
pub struct HarmonicsField {
    tables: Tables,
    heads: Vec<HeadSeries>,
    softmax: bool,
    n: usize,
    groups: usize,
    scratch: Mutex<Scratch>,
}

/// The groups of chunks that sum the moments for n tokens at degree L (n and L only).
fn group_count(n: usize, degree: usize) -> usize {
    let per_group = 4 * harmonics_count(degree) * LANES * 8;
    chunk_count(n)
        .min(MAX_GROUPS)
        .min((GROUP_SCRATCH_BYTES / per_group).max(1))
}

impl HarmonicsField {
    /// The field of `attention` for n tokens with the given per-head plans, or `None` when the
    /// kernel does not apply (see [`why_not`]).
    pub fn new(attention: &Attention, n: usize, plans: &[HeadPlan]) -> Option<Self> {
        if why_not(attention).is_some() {
            return None;
        }
        let formed = attention.formed();
        let degree = plans.iter().map(|p| p.degree).max().unwrap_or(0);
        let heads = formed
            .heads
            .iter()
            .zip(plans)
            .map(|(h, p)| {
                let (values, _) = radial_and_tails(p.shape.kappa);
                HeadSeries {
                    rotation_t: p.shape.rotation.transpose(),
                    value: Matrix3::from_fn(|i, j| h.v[(i, j)]),
                    kappa: p.shape.kappa,
                    degree: p.degree,
                    radial: values[..=p.degree].iter().map(|v| 4.0 * PI * v).collect(),
                }
            })
            .collect::<Vec<_>>();
        let count = harmonics_count(degree);
        let groups = group_count(n, degree);
        let scratch = Scratch {
            partials: vec![[0.0; LANES]; groups * 4 * count],
            moments: vec![0.0; 4 * count],
            coefficients: heads.iter().map(|_| vec![[0.0; 4]; count]).collect(),
        };
        Some(HarmonicsField {
            tables: Tables::new(degree),
            heads,
            softmax: attention.kernel == Kernel::Sa,
            n,
            groups,
            scratch: Mutex::new(scratch),
        })
    }

    /// The field with degree L for every head (tests and benchmarks: no bound is checked).
    pub fn with_degree(attention: &Attention, n: usize, degree: usize) -> Option<Self> {
        let formed = attention.formed();
        let plans: Option<Vec<HeadPlan>> = formed
            .heads
            .iter()
            .map(|h| {
                head_shape(&h.a, attention.beta).map(|shape| HeadPlan {
                    shape,
                    degree: degree.min(MAX_DEGREE),
                    bound: f64::NAN,
                })
            })
            .collect();
        Self::new(attention, n, &plans?)
    }

    /// The truncation degree L (the largest over the heads).
    pub fn degree(&self) -> usize {
        self.tables.degree
    }

    /// Bytes of scratch for n tokens at degree L with `heads` heads.
    pub fn scratch_bytes(n: usize, degree: usize, heads: usize) -> usize {
        let count = harmonics_count(degree);
        (group_count(n, degree) * 4 * LANES + 4 + 4 * heads)
            .saturating_mul(count)
            .saturating_add(6 * count)
            .saturating_mul(8)
    }

    /// Writes x' into `dx` for the tokens `x` (n x 3 row-major; rows need not be exactly unit).
    pub fn eval(&self, x: &[f64], dx: &mut [f64]) {
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        self.moments(x, s);
        self.coefficients(s);
        let coefficients = &s.coefficients;
        for_each_chunk(dx, 3, x, 3, |out, rows| {
            simd::vectorized(
                #[inline(always)]
                || self.field_rows(coefficients, rows, out),
            )
        });
    }

    /// mu_lm and W_lm, summed in groups of whole chunks added in order.
    fn moments(&self, x: &[f64], s: &mut Scratch) {
        let n_tokens = x.len() / 3;
        let width = 4 * harmonics_count(self.tables.degree);
        let chunks = chunk_count(n_tokens);
        let groups = self.groups.min(chunks).max(1);
        let tables = &self.tables;
        let partials = &mut s.partials[..groups * width];
        let sum_group = |g: usize, acc: &mut [[f64; LANES]]| {
            acc.fill([0.0; LANES]);
            let (c0, c1) = (g * chunks / groups, (g + 1) * chunks / groups);
            let begin = (c0 * TOKENS_PER_CHUNK).min(n_tokens);
            let end = (c1 * TOKENS_PER_CHUNK).min(n_tokens);
            let rows = &x[3 * begin..3 * end];
            simd::vectorized(
                #[inline(always)]
                || moment_rows(tables, rows, acc),
            );
        };
        if groups == 1 {
            sum_group(0, partials);
        } else {
            partials
                .par_chunks_mut(width)
                .enumerate()
                .for_each(|(g, acc)| sum_group(g, acc));
        }
        let inv_n = 1.0 / self.n.max(1) as f64;
        s.moments.fill(0.0);
        for acc in partials.chunks(width) {
            for (m, lanes) in s.moments.iter_mut().zip(acc) {
                *m += (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
            }
        }
        s.moments.iter_mut().for_each(|m| *m *= inv_n);
    }

    /// Per head: 4 pi e^{-kappa} i_l(kappa) [mu_lm, W_lm] for l <= L_h.
    fn coefficients(&self, s: &mut Scratch) {
        let t = &self.tables;
        for (head, coefficients) in self.heads.iter().zip(s.coefficients.iter_mut()) {
            for m in 0..=head.degree {
                let step = if m == 0 { 1 } else { 2 };
                for l in m..=head.degree {
                    let index = t.hbase[m] + (l - m) * step;
                    let cells = coefficients[index..index + step].iter_mut();
                    for (cell, mu) in cells.zip(s.moments[4 * index..].chunks_exact(4)) {
                        *cell = std::array::from_fn(|c| head.radial[l] * mu[c]);
                    }
                }
            }
        }
    }

    /// The projected field at each token of `rows` into `out`.
    #[inline(always)]
    fn field_rows(&self, coefficients: &[Vec<[f64; 4]>], rows: &[f64], out: &mut [f64]) {
        let n = rows.len() / 3;
        for first in (0..n).step_by(LANES) {
            let (p, w) = load_lanes(rows, first);
            let mut f = [[0.0; LANES]; 3];
            for (head, coefficients) in self.heads.iter().zip(coefficients) {
                self.add_head(head, coefficients, &p, &mut f);
            }
            for i in 0..LANES {
                if w[i] == 0.0 {
                    continue;
                }
                let radial = f[0][i] * p[0][i] + f[1][i] * p[1][i] + f[2][i] * p[2][i];
                for c in 0..3 {
                    out[3 * (first + i) + c] = f[c][i] - radial * p[c][i];
                }
            }
        }
    }

    /// Adds one head's unprojected field at four tokens (lanes) into `f`.
    #[inline(always)]
    fn add_head(
        &self,
        head: &HeadSeries,
        coefficients: &[[f64; 4]],
        p: &[[f64; LANES]; 3],
        f: &mut [[f64; LANES]; 3],
    ) {
        // q = R'^T x, normalised.
        let r = &head.rotation_t;
        let mut q = [[0.0; LANES]; 3];
        for i in 0..LANES {
            let v = [
                r[(0, 0)] * p[0][i] + r[(0, 1)] * p[1][i] + r[(0, 2)] * p[2][i],
                r[(1, 0)] * p[0][i] + r[(1, 1)] * p[1][i] + r[(1, 2)] * p[2][i],
                r[(2, 0)] * p[0][i] + r[(2, 1)] * p[1][i] + r[(2, 2)] * p[2][i],
            ];
            let inv = 1.0 / (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
            for c in 0..3 {
                q[c][i] = v[c] * inv;
            }
        }
        let mut sums = [[0.0; LANES]; 4];
        for_each_harmonic(&self.tables, head.degree, &q, |index, yc, ys, sine| {
            let cc = &coefficients[index];
            for (c, sum) in sums.iter_mut().enumerate() {
                for i in 0..LANES {
                    sum[i] += yc[i] * cc[c];
                }
            }
            if sine {
                let cs = &coefficients[index + 1];
                for (c, sum) in sums.iter_mut().enumerate() {
                    for i in 0..LANES {
                        sum[i] += ys[i] * cs[c];
                    }
                }
            }
        });
        let v = &head.value;
        let scale = head.kappa.exp();
        for i in 0..LANES {
            let factor = if self.softmax {
                1.0 / sums[0][i]
            } else {
                scale
            };
            let nk = [sums[1][i], sums[2][i], sums[3][i]];
            for c in 0..3 {
                f[c][i] += factor * (v[(c, 0)] * nk[0] + v[(c, 1)] * nk[1] + v[(c, 2)] * nk[2]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// P_l(t) by Bonnet's recurrence.
    fn legendre(l: usize, t: f64) -> f64 {
        let (mut p0, mut p1) = (1.0, t);
        if l == 0 {
            return 1.0;
        }
        for k in 1..l {
            let kf = k as f64;
            let p2 = ((2.0 * kf + 1.0) * t * p1 - kf * p0) / (kf + 1.0);
            p0 = p1;
            p1 = p2;
        }
        p1
    }

    fn unit(v: [f64; 3]) -> [f64; 3] {
        let r = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        [v[0] / r, v[1] / r, v[2] / r]
    }

    /// Every Y_lm at one point (lane 0), by index.
    fn harmonics_at(t: &Tables, x: [f64; 3]) -> Vec<f64> {
        let p = [[x[0]; LANES], [x[1]; LANES], [x[2]; LANES]];
        let mut out = vec![0.0; harmonics_count(t.degree)];
        for_each_harmonic(t, t.degree, &p, |index, yc, ys, sine| {
            out[index] = yc[0];
            if sine {
                out[index + 1] = ys[0];
            }
        });
        out
    }

    #[test]
    fn harmonics_obey_the_addition_theorem() {
        // sum_m Y_lm(x) Y_lm(y) = (2l + 1) / (4 pi) P_l(<x, y>), with P_l by Bonnet: checks the
        // normalisation and the orthogonality of the real basis degree by degree.
        let degree = 40;
        let t = Tables::new(degree);
        let x = unit([0.3, -0.5, 0.81]);
        let y = unit([-0.7, 0.2, -0.1]);
        let (hx, hy) = (harmonics_at(&t, x), harmonics_at(&t, y));
        let cos = x[0] * y[0] + x[1] * y[1] + x[2] * y[2];
        for l in 0..=degree {
            let mut sum = 0.0;
            for m in 0..=l {
                let index = t.hbase[m] + (l - m) * if m == 0 { 1 } else { 2 };
                sum += hx[index] * hy[index];
                if m > 0 {
                    sum += hx[index + 1] * hy[index + 1];
                }
            }
            let expected = (2 * l + 1) as f64 / (4.0 * PI) * legendre(l, cos);
            assert!(
                (sum - expected).abs() < 1e-13 * (2 * l + 1) as f64,
                "l = {l}: {sum} vs {expected}"
            );
            // x with itself: P_l(1) = 1.
            let own: f64 = (0..=l)
                .map(|m| {
                    let index = t.hbase[m] + (l - m) * if m == 0 { 1 } else { 2 };
                    hx[index] * hx[index] + if m > 0 { hx[index + 1].powi(2) } else { 0.0 }
                })
                .sum();
            assert!((own - (2 * l + 1) as f64 / (4.0 * PI)).abs() < 1e-13 * (2 * l + 1) as f64);
        }
    }

    #[test]
    fn spherical_bessel_values_match_the_closed_forms() {
        // i_0 = sinh x / x, i_1 = cosh x / x - sinh x / x^2,
        // i_2 = (3 / x^2 + 1) sinh x / x - 3 cosh x / x^2.
        for x in [0.5_f64, 2.0, 7.0, 30.0] {
            let mut v = vec![0.0; 10];
            scaled_spherical_bessel_i(x, &mut v);
            let (sh, ch) = ((x.sinh()) * (-x).exp(), x.cosh() * (-x).exp());
            let expected = [
                sh / x,
                ch / x - sh / (x * x),
                (3.0 / (x * x) + 1.0) * sh / x - 3.0 * ch / (x * x),
            ];
            for l in 0..3 {
                let rel = (v[l] - expected[l]).abs() / expected[l];
                assert!(rel < 1e-13, "x = {x}, l = {l}: {} vs {}", v[l], expected[l]);
            }
        }
        let mut v = vec![0.0; 4];
        scaled_spherical_bessel_i(0.0, &mut v);
        assert_eq!(v, [1.0, 0.0, 0.0, 0.0]);
        // beta -> 0: finite, the series' leading terms x^l / (2l + 1)!!, and a tail T_0 = x.
        for x in [1e-60_f64, 1e-200, 5e-324] {
            let mut v = vec![0.0; 4];
            scaled_spherical_bessel_i(x, &mut v);
            assert!(v.iter().all(|f| f.is_finite()), "{x}: {v:?}");
            assert_eq!(v[0], 1.0);
            assert!((v[1] - x / 3.0).abs() <= 1e-15 * x / 3.0, "{x}: {v:?}");
            assert!(v[2] <= x * x, "{x}: {v:?}");
            assert!(tail(x, 0) <= 2.0 * x && tail(x, 0).is_finite(), "{x}");
        }
    }

    #[test]
    fn head_shapes_read_a_multiple_of_an_orthogonal_matrix() {
        let r = DMatrix::from_row_slice(3, 3, &[0.36, 0.48, -0.8, -0.8, 0.6, 0.0, 0.48, 0.64, 0.6]);
        let shape = head_shape(&(&r * -0.8), 2.0).expect("a multiple of a rotation");
        assert!((shape.kappa - 1.6).abs() < 1e-14);
        // R' = sign(beta a) R with a = 0.8 > 0 read from the norm: R' = -R.
        assert!((shape.rotation[(0, 0)] + 0.36).abs() < 1e-14);
        let mut bent = r.clone();
        bent[(0, 0)] += 1e-6;
        assert!(head_shape(&bent, 1.0).is_none());
        let i = DMatrix::identity(3, 3);
        assert_eq!(head_shape(&i, 3.0).unwrap().lambda, 1.0);
    }
}
