//! The spectral (Fourier–Bessel) kernel: the `usa` and `sa` fields in d = 2 in O(n M) work
//! instead of O(n^2) (docs/MATH.md, section 4, "The spectral kernel").
//!
//! Tokens are z = e^{i theta} = x_1 + i x_2, and a real 2 x 2 matrix acts as
//! M x <-> m+ z + m- conj(z) (docs/MATH.md, section 3.1, "Complex notation"). With beta folded in,
//!
//! ```text
//! beta <x_k, A x_j> = Re(a e^{i(theta_k - theta_j)}) + Re(b e^{i(theta_k + theta_j)}),
//! a = beta ((a11 + a22) + i (a12 - a21)) / 2,   b = beta ((a11 - a22) - i (a12 + a21)) / 2,
//! ```
//!
//! and the Jacobi–Anger expansion e^{x cos u} = sum_m I_m(x) e^{i m u} gives
//!
//! ```text
//! exp(beta <x_k, A x_j>) = sum_{m,l} alpha_m gamma_l z_k^{m+l} z_j^{l-m},
//! alpha_m = I_m(|a|) e^{i m arg a},   gamma_l = I_l(|b|) e^{i l arg b}.
//! ```
//!
//! With the token moments mu_p = (1/n) sum_j z_j^p (mu_{-p} = conj(mu_p)) and
//! V x_j <-> v+ z_j + v- conj(z_j), the field before projection is, as a complex number,
//!
//! ```text
//! usa:  F_k = sum_{|q| <= P} c_q z_k^q,   c_q = sum_{m+l=q} alpha_m gamma_l (v+ mu_{l-m+1} + v- mu_{l-m-1}),
//! sa:   F_k = N_k / D_k,   N_k = the same sum,   D_k = sum_{|q| <= P} d_q z_k^q,
//!       d_q = sum_{m+l=q} alpha_m gamma_l mu_{l-m}   (D_k is real: d_{-q} = conj(d_q)),
//! ```
//!
//! truncated at |m| <= M_a, |l| <= M_b (P = M_a + M_b). Heads add their F_k; for `sa` each head
//! divides by its own D_k. Then x_k' = P_k (Re F_k, Im F_k), P_k y = y - <u_k, y> u_k at the unit
//! token u_k = x_k / |x_k|.
//!
//! **Truncation and error.** The scaled values e^{-x} I_m(x) sum to 1 over all m, so the series of
//! one factor is cut at the smallest M whose scaled tail 2 sum_{m > M} e^{-x} I_m(x) is below
//! eps / 4: the absolute error of the truncated weight is then below eps e^{|a| + |b|} / 2, no
//! larger than the rounding of a sum of terms of total size e^{|a| + |b|}. Relative to the
//! smallest weight e^{-(|a| + |b|)} that is the a-priori bound
//!
//! ```text
//! bound = eps e^{2 (|a| + |b|)}   (largest over the heads),
//! ```
//!
//! the relative error of a token's field when all its weights are the smallest possible (tokens
//! clustered where the kernel is weakest); for spread tokens the error is far smaller. The
//! kernel runs only where bound <= [`BOUND_LIMIT`] (`auto` also needs n >=
//! [`AUTO_MIN_TOKENS`]).
//!
//! **Cost.** Moments O(n P): the powers z^p by repeated multiplication, pulled back onto the unit
//! circle every `RENORMALISE` steps. Coefficients O(M_a M_b) per head. Evaluation at every token
//! by Horner's rule in z (q >= 0) and conj(z) (q < 0), O(n P) and stable on |z| = 1. The moments
//! are summed in fixed chunks of tokens added in order (`parallel.rs`) and the evaluation is
//! token by token, so the field is bit-identical for any thread count; every buffer is allocated
//! when the field is built.

use std::sync::Mutex;

use nalgebra::DMatrix;
use num_complex::Complex64;

use super::bessel::scaled_bessel_i;
use super::{Attention, Kernel};
use crate::parallel::{chunk_count, chunked_sum, for_each_chunk};

/// Largest a-priori relative error (`bound` above) for which the spectral kernel runs.
pub const BOUND_LIMIT: f64 = 1e-13;

/// From this many tokens on, `auto` prefers the spectral kernel (measured crossover, see
/// docs/DESIGN.md "Spectral kernel").
pub const AUTO_MIN_TOKENS: usize = 128;

/// The scaled tail of a Bessel series at its truncation.
const TAIL: f64 = f64::EPSILON / 4.0;

/// Powers z^p are pulled back onto the unit circle after this many multiplications.
const RENORMALISE: usize = 16;

/// Which kernel evaluates the `usa` and `sa` fields (`model.kernel_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelMethod {
    /// Spectral where its bound holds and n is large enough to pay, direct otherwise.
    #[default]
    Auto,
    /// The pairwise sums, O(n^2).
    Direct,
    /// The Fourier–Bessel series; an error where its bound fails.
    Spectral,
}

/// The kernel a field was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelChoice {
    /// The pairwise (or, for `lsa`, moment-matrix) evaluation.
    Direct,
    /// The spectral kernel with truncation |m|, |l| <= `terms` (the largest over heads and factors).
    Spectral {
        /// The truncation M.
        terms: usize,
    },
}

impl KernelChoice {
    /// `"direct"` or `"spectral"` (summary.json's `kernel_method`).
    pub fn as_str(self) -> &'static str {
        match self {
            KernelChoice::Direct => "direct",
            KernelChoice::Spectral { .. } => "spectral",
        }
    }

    /// The truncation M of the spectral kernel, `None` for the direct one.
    pub fn terms(self) -> Option<usize> {
        match self {
            KernelChoice::Direct => None,
            KernelChoice::Spectral { terms } => Some(terms),
        }
    }
}

/// Whether the spectral kernel can evaluate this field at all (d = 2, `usa` or `sa`).
pub fn applies(attention: &Attention) -> bool {
    attention.d() == 2 && attention.kernel != Kernel::Lsa
}

/// The a-priori relative error eps e^{2 (|a| + |b|)} (largest over the heads), or `None` where
/// the spectral kernel does not apply.
pub fn error_bound(attention: &Attention) -> Option<f64> {
    applies(attention).then(|| f64::EPSILON * (2.0 * largest_exponent(attention)).exp())
}

/// max over heads of |a| + |b| (beta included): the log of the largest weight.
fn largest_exponent(attention: &Attention) -> f64 {
    attention
        .heads
        .iter()
        .map(|h| {
            let (a, b) = angular_coefficients(&h.a, attention.beta);
            a.norm() + b.norm()
        })
        .fold(0.0, f64::max)
}

/// Decides the kernel for `n` tokens; `Err` (one line) when `method` is `Spectral` and the
/// spectral kernel does not apply or its bound fails.
pub fn choose(
    attention: &Attention,
    n: usize,
    method: KernelMethod,
) -> Result<KernelChoice, String> {
    let spectral = || KernelChoice::Spectral {
        terms: truncation(attention),
    };
    match (method, error_bound(attention)) {
        (KernelMethod::Direct, _) => Ok(KernelChoice::Direct),
        (KernelMethod::Auto, Some(bound))
            if bound <= BOUND_LIMIT && n >= AUTO_MIN_TOKENS =>
        {
            Ok(spectral())
        }
        (KernelMethod::Auto, _) => Ok(KernelChoice::Direct),
        (KernelMethod::Spectral, None) => Err(format!(
            "\"spectral\" needs d = 2 and kernel \"usa\" or \"sa\" (this field has d = {} and kernel {})",
            attention.d(),
            match attention.kernel {
                Kernel::Lsa => "\"lsa\"",
                Kernel::Usa => "\"usa\"",
                Kernel::Sa => "\"sa\"",
            }
        )),
        (KernelMethod::Spectral, Some(bound)) if bound > BOUND_LIMIT => Err(format!(
            "\"spectral\": its error bound eps e^(2 beta (|a| + |b|)) = {bound:.2e} is above {BOUND_LIMIT:.0e} (beta (|a| + |b|) = {:.4} here, at most {:.4}); use \"auto\" or \"direct\"",
            largest_exponent(attention),
            0.5 * (BOUND_LIMIT / f64::EPSILON).ln()
        )),
        (KernelMethod::Spectral, Some(_)) => Ok(spectral()),
    }
}

/// (a, b) of the form beta <x, A y> = Re(a e^{i(s - t)}) + Re(b e^{i(s + t)}), x = e^{is}, y = e^{it}.
fn angular_coefficients(a: &DMatrix<f64>, beta: f64) -> (Complex64, Complex64) {
    let half = 0.5 * beta;
    (
        Complex64::new(a[(0, 0)] + a[(1, 1)], a[(0, 1)] - a[(1, 0)]) * half,
        Complex64::new(a[(0, 0)] - a[(1, 1)], -(a[(0, 1)] + a[(1, 0)])) * half,
    )
}

/// (m+, m-) of a 2 x 2 matrix: M x <-> m+ z + m- conj(z).
fn plus_minus(m: &DMatrix<f64>) -> (Complex64, Complex64) {
    (
        Complex64::new(m[(0, 0)] + m[(1, 1)], m[(1, 0)] - m[(0, 1)]) * 0.5,
        Complex64::new(m[(0, 0)] - m[(1, 1)], m[(1, 0)] + m[(0, 1)]) * 0.5,
    )
}

/// The scaled Bessel values e^{-x} I_m(x), m = 0..=M, with M the smallest order whose scaled tail
/// 2 sum_{m > M} e^{-x} I_m(x) is below [`TAIL`].
fn truncated_bessel(x: f64) -> Vec<f64> {
    let cap = x.ceil().min(1e6) as usize + 60 + (10.0 * x.min(1e6).sqrt()).ceil() as usize;
    let mut values = vec![0.0; cap];
    scaled_bessel_i(x, &mut values);
    let mut tail = 0.0;
    let mut order = cap - 1;
    while order > 0 && tail + 2.0 * values[order] <= TAIL {
        tail += 2.0 * values[order];
        order -= 1;
    }
    values.truncate(order + 1);
    values
}

/// The largest truncation order over the heads and their two factors.
fn truncation(attention: &Attention) -> usize {
    attention
        .heads
        .iter()
        .map(|h| {
            let (a, b) = angular_coefficients(&h.a, attention.beta);
            let ma = truncated_bessel(a.norm()).len() - 1;
            let mb = truncated_bessel(b.norm()).len() - 1;
            ma.max(mb)
        })
        .max()
        .unwrap_or(0)
}

/// One head's series: c e^{i m phase} I_m(x) e^{-x} for m = -M..=M, index m + M.
fn series(x: f64, phase: f64) -> Vec<Complex64> {
    let values = truncated_bessel(x);
    let order = values.len() - 1;
    (0..=2 * order)
        .map(|i| {
            let m = i as f64 - order as f64;
            Complex64::from_polar(values[i.abs_diff(order)], m * phase)
        })
        .collect()
}

/// One head in spectral form.
struct HeadSeries {
    /// alpha_m e^{-|a|}, m = -M_a..=M_a (index m + M_a).
    alpha: Vec<Complex64>,
    /// gamma_l e^{-|b|}, l = -M_b..=M_b (index l + M_b).
    gamma: Vec<Complex64>,
    /// v+ and v- of V.
    v_plus: Complex64,
    v_minus: Complex64,
    /// e^{|a| + |b|}: undoes the scaling of the Bessel functions (`usa`; `sa` divides it out).
    scale: f64,
}

impl HeadSeries {
    fn new(a: &DMatrix<f64>, v: &DMatrix<f64>, beta: f64) -> Self {
        let (a, b) = angular_coefficients(a, beta);
        let (v_plus, v_minus) = plus_minus(v);
        HeadSeries {
            alpha: series(a.norm(), a.arg()),
            gamma: series(b.norm(), b.arg()),
            v_plus,
            v_minus,
            scale: (a.norm() + b.norm()).exp(),
        }
    }

    /// P = M_a + M_b, the degree of the head's polynomial in z_k.
    fn degree(&self) -> usize {
        (self.alpha.len() - 1) / 2 + (self.gamma.len() - 1) / 2
    }
}

/// Buffers reused from one evaluation to the next.
struct Scratch {
    /// Per-chunk partial power sums, 2 (P + 2) numbers per chunk.
    partials: Vec<f64>,
    /// sum_j z_j^p as (re, im) pairs, p = 0..=P + 1.
    sums: Vec<f64>,
    /// mu_p, p = 0..=P + 1.
    moments: Vec<Complex64>,
    /// c_q (q = -P..=P at index q + P): one polynomial for `usa`, one per head for `sa`.
    numerators: Vec<Complex64>,
    /// d_q (q = 0..=P), one per head, `sa` only.
    denominators: Vec<Complex64>,
}

/// The spectral `usa` / `sa` field in d = 2 (see the module's documentation).
pub struct SpectralField {
    heads: Vec<HeadSeries>,
    softmax: bool,
    /// The largest degree P over the heads.
    degree: usize,
    n: usize,
    terms: usize,
    scratch: Mutex<Scratch>,
}

impl SpectralField {
    /// The spectral field of `attention` for `n` tokens, whatever its error bound (check
    /// [`error_bound`] or use [`choose`]); `None` unless d = 2 and the kernel is `usa` or `sa`.
    pub fn new(attention: &Attention, n: usize) -> Option<Self> {
        if !applies(attention) {
            return None;
        }
        let heads: Vec<HeadSeries> = attention
            .heads
            .iter()
            .map(|h| HeadSeries::new(&h.a, &h.v, attention.beta))
            .collect();
        let degree = heads.iter().map(HeadSeries::degree).max().unwrap_or(0);
        let softmax = attention.kernel == Kernel::Sa;
        let polynomials = if softmax { heads.len() } else { 1 };
        let width = 2 * (degree + 2);
        let scratch = Scratch {
            partials: vec![0.0; width * chunk_count(n)],
            sums: vec![0.0; width],
            moments: vec![Complex64::default(); degree + 2],
            numerators: vec![Complex64::default(); polynomials * (2 * degree + 1)],
            denominators: vec![
                Complex64::default();
                if softmax {
                    heads.len() * (degree + 1)
                } else {
                    0
                }
            ],
        };
        Some(SpectralField {
            heads,
            softmax,
            degree,
            n,
            terms: truncation(attention),
            scratch: Mutex::new(scratch),
        })
    }

    /// The truncation M: |m|, |l| <= M (the largest over heads and factors).
    pub fn terms(&self) -> usize {
        self.terms
    }

    /// Bytes of scratch memory for `n` tokens and polynomials of degree `degree` (an estimate
    /// for a few heads).
    pub fn scratch_bytes(n: usize, degree: usize) -> usize {
        (2 * (degree + 2))
            .saturating_mul(chunk_count(n) + 1)
            .saturating_add(16 * (8 * degree + 8))
            .saturating_mul(8)
    }

    /// Writes x' into `dx` for the tokens `x` (n x 2 row-major; rows need not be exactly unit).
    pub fn eval(&self, x: &[f64], dx: &mut [f64]) {
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        self.moments(x, s);
        self.coefficients(s);
        let p = self.degree;
        let (numerators, denominators) = (&s.numerators[..], &s.denominators[..]);
        let softmax = self.softmax;
        for_each_chunk(dx, 2, x, 2, |out, rows| {
            for (f, row) in out.chunks_exact_mut(2).zip(rows.chunks_exact(2)) {
                let inv = 1.0 / (row[0] * row[0] + row[1] * row[1]).sqrt();
                let z = Complex64::new(row[0] * inv, row[1] * inv);
                let field = if softmax {
                    numerators
                        .chunks_exact(2 * p + 1)
                        .zip(denominators.chunks_exact(p + 1))
                        .map(|(c, d)| horner(c, z) / hermitian_horner(d, z))
                        .fold(Complex64::default(), |acc, v| acc + v)
                } else {
                    horner(numerators, z)
                };
                let radial = z.re * field.re + z.im * field.im;
                f[0] = field.re - radial * z.re;
                f[1] = field.im - radial * z.im;
            }
        });
    }

    /// mu_p = (1/n) sum_j z_j^p, p = 0..=P + 1, over fixed chunks of tokens.
    fn moments(&self, x: &[f64], s: &mut Scratch) {
        chunked_sum(x, 2, s.sums.len(), &mut s.partials, &mut s.sums, power_sums);
        let inv_n = 1.0 / self.n.max(1) as f64;
        for (mu, pair) in s.moments.iter_mut().zip(s.sums.chunks_exact(2)) {
            *mu = Complex64::new(pair[0] * inv_n, pair[1] * inv_n);
        }
    }

    /// c_q (and d_q for `sa`) of every head from the moments.
    fn coefficients(&self, s: &mut Scratch) {
        let p = self.degree as isize;
        let mu = &s.moments;
        let moment = |k: isize| {
            if k >= 0 {
                mu[k as usize]
            } else {
                mu[(-k) as usize].conj()
            }
        };
        s.numerators.fill(Complex64::default());
        s.denominators.fill(Complex64::default());
        let width = 2 * self.degree + 1;
        for (h, head) in self.heads.iter().enumerate() {
            let (numerator, scale) = if self.softmax {
                (&mut s.numerators[h * width..(h + 1) * width], 1.0)
            } else {
                (&mut s.numerators[..], head.scale)
            };
            let ma = ((head.alpha.len() - 1) / 2) as isize;
            let mb = ((head.gamma.len() - 1) / 2) as isize;
            for (i, alpha) in head.alpha.iter().enumerate() {
                let m = i as isize - ma;
                for (k, gamma) in head.gamma.iter().enumerate() {
                    let l = k as isize - mb;
                    let (q, shift) = (m + l, l - m);
                    let w = alpha * gamma;
                    numerator[(q + p) as usize] += w
                        * scale
                        * (head.v_plus * moment(shift + 1) + head.v_minus * moment(shift - 1));
                    if self.softmax && q >= 0 {
                        let d = h * (self.degree + 1) + q as usize;
                        s.denominators[d] += w * moment(shift);
                    }
                }
            }
        }
    }
}

/// acc[2p], acc[2p + 1] += Re, Im of z^p for every row (a token, normalised here) and
/// p = 0..acc.len() / 2.
fn power_sums(rows: &[f64], acc: &mut [f64]) {
    for row in rows.chunks_exact(2) {
        let inv = 1.0 / (row[0] * row[0] + row[1] * row[1]).sqrt();
        let z = Complex64::new(row[0] * inv, row[1] * inv);
        let mut w = Complex64::new(1.0, 0.0);
        for (p, pair) in acc.chunks_exact_mut(2).enumerate() {
            pair[0] += w.re;
            pair[1] += w.im;
            w *= z;
            if p % RENORMALISE == RENORMALISE - 1 {
                // One Newton step towards |w| = 1 (|w| - 1 is a few ulps here).
                w *= 1.5 - 0.5 * w.norm_sqr();
            }
        }
    }
}

/// sum_{q=-P}^{P} c[q + P] z^q for |z| = 1, by Horner's rule in z and in conj(z).
#[inline]
fn horner(c: &[Complex64], z: Complex64) -> Complex64 {
    let p = c.len() / 2;
    let mut positive = c[2 * p];
    for coefficient in c[p..2 * p].iter().rev() {
        positive = positive * z + coefficient;
    }
    if p == 0 {
        return positive;
    }
    let zc = z.conj();
    let mut negative = c[0];
    for coefficient in &c[1..p] {
        negative = negative * zc + coefficient;
    }
    positive + negative * zc
}

/// Re(d[0]) + 2 Re(sum_{q=1}^{P} d[q] z^q): the real sum over q = -P..=P when d_{-q} = conj(d_q).
#[inline]
fn hermitian_horner(d: &[Complex64], z: Complex64) -> f64 {
    let p = d.len() - 1;
    if p == 0 {
        return d[0].re;
    }
    let mut s = d[p];
    for coefficient in d[1..p].iter().rev() {
        s = s * z + coefficient;
    }
    d[0].re + 2.0 * (s * z).re
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn horner_sums_the_polynomial() {
        let c: Vec<Complex64> = (0..9)
            .map(|i| Complex64::new(i as f64 * 0.3 - 1.0, (i * i) as f64 * 0.1))
            .collect();
        let z = Complex64::from_polar(1.0, 0.7);
        let direct: Complex64 = (0..9).map(|i| c[i] * z.powi(i as i32 - 4)).sum();
        assert!((horner(&c, z) - direct).norm() < 1e-13);
        assert!((horner(&c[..1], z) - c[0]).norm() == 0.0);
        // A Hermitian sequence d_{-q} = conj(d_q) sums to a real number.
        let d = &c[4..];
        let full: Complex64 = (-4i32..=4)
            .map(|q| {
                let dq = if q >= 0 {
                    d[q as usize]
                } else {
                    d[(-q) as usize].conj()
                };
                dq * z.powi(q)
            })
            .sum();
        let dd: Vec<Complex64> = std::iter::once(Complex64::new(d[0].re, 0.0))
            .chain(d[1..].iter().copied())
            .collect();
        assert!((hermitian_horner(&dd, z) - full.re).abs() < 1e-13);
    }

    #[test]
    fn truncation_leaves_a_tail_below_the_target() {
        for x in [0.0, 0.3, 1.0, 4.0, 20.0] {
            let kept = truncated_bessel(x);
            let mut all = vec![0.0; kept.len() + 200];
            scaled_bessel_i(x, &mut all);
            let tail: f64 = 2.0 * all[kept.len()..].iter().sum::<f64>();
            assert!(tail <= TAIL, "x = {x}: tail {tail:e}");
            // One order fewer would not do (the truncation is the smallest).
            if kept.len() > 1 {
                assert!(tail + 2.0 * all[kept.len() - 1] > TAIL, "x = {x}");
            }
        }
        assert_eq!(truncated_bessel(0.0).len(), 1);
    }
}
