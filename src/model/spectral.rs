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
//! tau: the absolute error of the truncated weight is then below 2 tau e^{|a| + |b|}. Every term
//! is rounded relative to the largest weight e^{|a| + |b|}, so relative to the smallest weight
//! e^{-(|a| + |b|)} the a-priori bound is
//!
//! ```text
//! bound = eps e^{2 (|a| + |b|)}   (largest over the heads),
//! ```
//!
//! the relative error of a token's field when all its weights are the smallest possible (tokens
//! clustered where the kernel is weakest); for spread tokens the error is far smaller. In doubles
//! (eps = 2^-52, tau = eps / 4) the bound holds up to |a| + |b| = 3.05. Beyond, every step runs
//! in double-double arithmetic (the crate-private `ddouble` module, eps = 2^-104, tau from `tail_dd`): the
//! Bessel values, the phases, the tokens normalised to 106 bits, the moments, the coefficients and
//! the evaluation; the bound then holds up to 21.1. The kernel runs only where bound <=
//! [`BOUND_LIMIT`] (`auto` also needs n >= [`AUTO_MIN_TOKENS`], [`AUTO_MIN_TOKENS_DD`] in
//! double-doubles).
//!
//! **Cost.** Moments O(n P): the powers z^p by repeated multiplication, pulled back onto the unit
//! circle every `RENORMALISE` steps. Coefficients O(M_a M_b) per head. Evaluation at every token
//! by Horner's rule in z (q >= 0) and conj(z) (q < 0), O(n P) and stable on |z| = 1. The moments
//! are summed in fixed chunks of tokens added in order (`parallel.rs`) and the evaluation is
//! token by token, so the field is bit-identical for any thread count; every buffer is allocated
//! when the field is built. The double-double steps cost about 15 times the doubles' per term.

use std::sync::Mutex;

use nalgebra::DMatrix;
use num_complex::Complex64;

use rayon::prelude::*;

use super::bessel::{scaled_bessel_i, scaled_bessel_i_dd};
use super::ddouble::{Cdd, Dd};
use super::{Attention, Kernel};
use crate::parallel::{chunk_count, chunked_sum, for_each_chunk, TOKENS_PER_CHUNK};
use crate::simd;

/// Largest a-priori relative error (`bound` above) for which the spectral kernel runs.
pub const BOUND_LIMIT: f64 = 1e-13;

/// From this many tokens on, `auto` prefers the spectral kernel (measured crossover, see
/// docs/DESIGN.md "Spectral kernel").
pub const AUTO_MIN_TOKENS: usize = 128;

/// From this many tokens on, `auto` prefers the double-double spectral kernel (measured
/// crossover against the direct kernel, see docs/DESIGN.md "Spectral kernel").
pub const AUTO_MIN_TOKENS_DD: usize = 4096;

/// The unit of the double-double arithmetic, as `f64::EPSILON` is of doubles: eps^2.
pub const DD_EPSILON: f64 = f64::EPSILON * f64::EPSILON;

/// The scaled tail of a Bessel series at its truncation.
const TAIL: f64 = f64::EPSILON / 4.0;

/// The same for the double-double series, at least (see [`tail_dd`]).
const TAIL_DD: f64 = DD_EPSILON / 4.0;

/// The share of [`BOUND_LIMIT`] the double-double truncation may take.
const TRUNCATION_SHARE: f64 = 0.01;

/// The scaled tail tau of each double-double factor when the largest exponent |a| + |b| is
/// `exponent`: the truncated weight errs by at most 2 tau e^{|a| + |b|}, which is at most
/// TRUNCATION_SHARE * BOUND_LIMIT (1e-15) of the smallest weight e^{-(|a| + |b|)}, and never
/// less than the arithmetic resolves ([`TAIL_DD`]).
fn tail_dd(exponent: f64) -> f64 {
    TAIL_DD.max(0.5 * TRUNCATION_SHARE * BOUND_LIMIT * (-2.0 * exponent).exp())
}

/// The arithmetic of the spectral kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Doubles: bound eps e^{2 (|a| + |b|)}.
    Double,
    /// Double-doubles (about 106 bits): bound eps^2 e^{2 (|a| + |b|)}, about 20 times the work.
    DoubleDouble,
}

impl Precision {
    /// The unit round-off of this arithmetic.
    fn epsilon(self) -> f64 {
        match self {
            Precision::Double => f64::EPSILON,
            Precision::DoubleDouble => DD_EPSILON,
        }
    }
}

/// Doubles where their bound holds, double-doubles otherwise.
pub fn precision(attention: &Attention) -> Precision {
    if f64::EPSILON * (2.0 * largest_exponent(attention)).exp() <= BOUND_LIMIT {
        Precision::Double
    } else {
        Precision::DoubleDouble
    }
}

/// Powers z^p are pulled back onto the unit circle after this many multiplications.
const RENORMALISE: usize = 16;

/// Whether the spectral kernel can evaluate this field at all (d = 2, `usa` or `sa`).
pub fn applies(attention: &Attention) -> bool {
    attention.d() == 2 && attention.kernel != Kernel::Lsa
}

/// The a-priori relative error eps e^{2 (|a| + |b|)} (largest over the heads) of the arithmetic
/// [`precision`] picks (eps = 2^-52 for doubles, 2^-104 for double-doubles), or `None` where the
/// spectral kernel does not apply.
pub fn error_bound(attention: &Attention) -> Option<f64> {
    applies(attention)
        .then(|| precision(attention).epsilon() * (2.0 * largest_exponent(attention)).exp())
}

/// The fewest tokens for which `auto` takes the spectral kernel in this arithmetic.
fn auto_min_tokens(precision: Precision) -> usize {
    match precision {
        Precision::Double => AUTO_MIN_TOKENS,
        Precision::DoubleDouble => AUTO_MIN_TOKENS_DD,
    }
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

/// Whether the spectral kernel evaluates this field for `n` tokens: `Some(terms)` (its
/// truncation) or `None` (the direct sums). `asked`: `kernel_method = "spectral"`, an error
/// (one line) where the kernel does not apply or its bound fails; otherwise `auto`, which takes
/// it where its bound holds and n is large enough to pay.
pub fn choose(attention: &Attention, n: usize, asked: bool) -> Result<Option<usize>, String> {
    if let Some(reason) = unplain(attention) {
        return match asked {
            true => Err(format!("\"spectral\" does not hold {reason}")),
            false => Ok(None),
        };
    }
    match (asked, error_bound(attention)) {
        (false, Some(bound))
            if bound <= BOUND_LIMIT && n >= auto_min_tokens(precision(attention)) =>
        {
            Ok(Some(truncation(attention)))
        }
        (false, _) => Ok(None),
        (true, None) => Err(format!(
            "\"spectral\" needs d = 2 and kernel \"usa\" or \"sa\" (this field has d = {} and kernel {})",
            attention.d(),
            match attention.kernel {
                Kernel::Lsa => "\"lsa\"",
                Kernel::Usa => "\"usa\"",
                Kernel::Sa => "\"sa\"",
            }
        )),
        (true, Some(bound)) if bound > BOUND_LIMIT => Err(format!(
            "\"spectral\": its error bound eps^2 e^(2 beta (|a| + |b|)) = {bound:.2e} (double-double arithmetic) is above {BOUND_LIMIT:.0e} (beta (|a| + |b|) = {:.4} here, at most {:.4}); use \"auto\" or \"direct\"",
            largest_exponent(attention),
            0.5 * (BOUND_LIMIT / DD_EPSILON).ln()
        )),
        (true, Some(_)) => Ok(Some(truncation(attention))),
    }
}

/// Why the spectral kernel does not apply to a masked, pre-LN, positioned or factored layer (its moments
/// average over every token on the circle), or `None`.
fn unplain(attention: &Attention) -> Option<&'static str> {
    if attention.mask != super::Mask::None {
        Some("under a causal mask (use \"auto\" or \"direct\")")
    } else if attention.normalization != super::Normalization::Post {
        Some("for a normalisation other than post-LN (use \"auto\" or \"direct\")")
    } else if !attention.position.is_none() {
        Some("with positions (model.position; use \"auto\" or \"direct\")")
    } else if !attention.factored.is_empty() {
        Some("for factored heads (use \"auto\" or \"direct\")")
    } else {
        None
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
    values.truncate(truncated_order(&values, TAIL) + 1);
    values
}

/// The same in double-doubles, tail below `tail` ([`tail_dd`]).
fn truncated_bessel_dd(x: f64, tail: f64) -> Vec<Dd> {
    let cap = x.ceil().min(1e6) as usize + 100 + (15.0 * x.min(1e6).sqrt()).ceil() as usize;
    let mut values = vec![Dd::ZERO; cap];
    scaled_bessel_i_dd(x, &mut values);
    let highs: Vec<f64> = values.iter().map(|v| v.hi).collect();
    values.truncate(truncated_order(&highs, tail) + 1);
    values
}

/// The smallest M with 2 sum_{m > M} values[m] <= tail.
fn truncated_order(values: &[f64], tail: f64) -> usize {
    let mut sum = 0.0;
    let mut order = values.len() - 1;
    while order > 0 && sum + 2.0 * values[order] <= tail {
        sum += 2.0 * values[order];
        order -= 1;
    }
    order
}

/// The truncation order of one factor e^{x cos u} in this arithmetic.
fn order_for(x: f64, precision: Precision, exponent: f64) -> usize {
    match precision {
        Precision::Double => truncated_bessel(x).len() - 1,
        Precision::DoubleDouble => truncated_bessel_dd(x, tail_dd(exponent)).len() - 1,
    }
}

/// The largest truncation order over the heads and their two factors.
fn truncation(attention: &Attention) -> usize {
    let precision = precision(attention);
    let exponent = largest_exponent(attention);
    attention
        .heads
        .iter()
        .map(|h| {
            let (a, b) = angular_coefficients(&h.a, attention.beta);
            let ma = order_for(a.norm(), precision, exponent);
            let mb = order_for(b.norm(), precision, exponent);
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

/// One head's series in double-doubles: I_m(x) e^{-x} u^m for m = -M..=M (index m + M), u the
/// unit complex number a / |a| to double-double accuracy and x = |a| rounded (the pair is one
/// exact complex number x u next to a: a coherent change of A, not a cancelling one).
fn series_dd(a: Complex64, tail: f64) -> Vec<Cdd> {
    let x = a.norm();
    let values = truncated_bessel_dd(x, tail);
    let order = values.len() - 1;
    let u = Cdd::unit(a.re, a.im);
    let mut out = vec![Cdd::ZERO; 2 * order + 1];
    let mut power = Cdd::ONE;
    for (m, value) in values.iter().enumerate() {
        let term = power.scale::<false>(*value);
        out[order + m] = term;
        out[order - m] = term.conj();
        power = power.times::<false>(u);
    }
    out
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
    /// alpha and gamma in double-doubles (empty for the double arithmetic).
    alpha_dd: Vec<Cdd>,
    gamma_dd: Vec<Cdd>,
}

impl HeadSeries {
    /// `exponent`: the largest |a| + |b| over all heads (sets the double-double truncation).
    fn new(
        a: &DMatrix<f64>,
        v: &DMatrix<f64>,
        beta: f64,
        precision: Precision,
        exponent: f64,
    ) -> Self {
        let (a, b) = angular_coefficients(a, beta);
        let (v_plus, v_minus) = plus_minus(v);
        let double = precision == Precision::Double;
        let (alpha_dd, gamma_dd) = if double {
            (Vec::new(), Vec::new())
        } else {
            let tail = tail_dd(exponent);
            (series_dd(a, tail), series_dd(b, tail))
        };
        HeadSeries {
            alpha: if double {
                series(a.norm(), a.arg())
            } else {
                Vec::new()
            },
            gamma: if double {
                series(b.norm(), b.arg())
            } else {
                Vec::new()
            },
            v_plus,
            v_minus,
            scale: (a.norm() + b.norm()).exp(),
            alpha_dd,
            gamma_dd,
        }
    }

    /// (M_a, M_b): the truncations of the head's two factors.
    fn orders(&self) -> (usize, usize) {
        if self.alpha.is_empty() {
            ((self.alpha_dd.len() - 1) / 2, (self.gamma_dd.len() - 1) / 2)
        } else {
            ((self.alpha.len() - 1) / 2, (self.gamma.len() - 1) / 2)
        }
    }

    /// P = M_a + M_b, the degree of the head's polynomial in z_k.
    fn degree(&self) -> usize {
        let (ma, mb) = self.orders();
        ma + mb
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
    /// The double-double arithmetic's partial sums, moments, nu_s = v+ mu_{s+1} + v- mu_{s-1}
    /// (s = -P..=P) and coefficients (empty for doubles).
    partials_dd: Vec<Cdd>,
    sums_dd: Vec<Cdd>,
    nu_dd: Vec<Cdd>,
    numerators_dd: Vec<Cdd>,
    denominators_dd: Vec<Cdd>,
}

/// The spectral `usa` / `sa` field in d = 2 (see the module's documentation).
pub struct SpectralField {
    heads: Vec<HeadSeries>,
    softmax: bool,
    /// The largest degree P over the heads.
    degree: usize,
    n: usize,
    terms: usize,
    precision: Precision,
    scratch: Mutex<Scratch>,
}

impl SpectralField {
    /// The spectral field of `attention` for `n` tokens, whatever its error bound (check
    /// [`error_bound`] or use [`choose`]); `None` unless d = 2 and the kernel is `usa` or `sa`.
    pub fn new(attention: &Attention, n: usize) -> Option<Self> {
        Self::with_precision(attention, n, precision(attention))
    }

    /// [`SpectralField::new`] in the arithmetic `precision` (for comparisons; `new` picks it).
    pub fn with_precision(attention: &Attention, n: usize, precision: Precision) -> Option<Self> {
        if !applies(attention) {
            return None;
        }
        let exponent = largest_exponent(attention);
        let heads: Vec<HeadSeries> = attention
            .heads
            .iter()
            .map(|h| HeadSeries::new(&h.a, &h.v, attention.beta, precision, exponent))
            .collect();
        let degree = heads.iter().map(HeadSeries::degree).max().unwrap_or(0);
        let softmax = attention.kernel == Kernel::Sa;
        let polynomials = if softmax { heads.len() } else { 1 };
        let denominators = if softmax {
            heads.len() * (degree + 1)
        } else {
            0
        };
        // One arithmetic's buffers are sized, the other's are empty.
        let (plain, dd) = match precision {
            Precision::Double => (1, 0),
            Precision::DoubleDouble => (0, 1),
        };
        let width = degree + 2;
        let scratch = Scratch {
            partials: vec![0.0; plain * 2 * width * chunk_count(n)],
            sums: vec![0.0; plain * 2 * width],
            moments: vec![Complex64::default(); plain * width],
            numerators: vec![Complex64::default(); plain * polynomials * (2 * degree + 1)],
            denominators: vec![Complex64::default(); plain * denominators],
            partials_dd: vec![Cdd::ZERO; dd * width * chunk_count(n)],
            sums_dd: vec![Cdd::ZERO; dd * width],
            nu_dd: vec![Cdd::ZERO; dd * (2 * degree + 1)],
            numerators_dd: vec![Cdd::ZERO; dd * polynomials * (2 * degree + 1)],
            denominators_dd: vec![Cdd::ZERO; dd * denominators],
        };
        let terms = heads
            .iter()
            .map(|h| {
                let (ma, mb) = h.orders();
                ma.max(mb)
            })
            .max()
            .unwrap_or(0);
        Some(SpectralField {
            heads,
            softmax,
            degree,
            n,
            terms,
            precision,
            scratch: Mutex::new(scratch),
        })
    }

    /// The truncation M: |m|, |l| <= M (the largest over heads and factors).
    pub fn terms(&self) -> usize {
        self.terms
    }

    /// The arithmetic this field runs in.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Bytes of scratch memory for `n` tokens and polynomials of degree `degree` (an estimate
    /// for a few heads, in the double-double arithmetic, which needs twice the doubles').
    pub fn scratch_bytes(n: usize, degree: usize) -> usize {
        (4 * (degree + 2))
            .saturating_mul(chunk_count(n) + 1)
            .saturating_add(32 * (8 * degree + 8))
            .saturating_mul(8)
    }

    /// Writes x' into `dx` for the tokens `x` (n x 2 row-major; rows need not be exactly unit).
    pub fn eval(&self, x: &[f64], dx: &mut [f64]) {
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        if self.precision == Precision::DoubleDouble {
            self.moments_dd(x, s);
            self.coefficients_dd(s);
            self.evaluate_dd(x, dx, s);
            return;
        }
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

/// The double-double arithmetic (used where the doubles' bound fails): the same three steps.
impl SpectralField {
    /// mu_p * n = sum_j z_j^p (p = 0..=P + 1) in double-doubles, over fixed chunks added in order.
    fn moments_dd(&self, x: &[f64], s: &mut Scratch) {
        let width = s.sums_dd.len();
        let chunks = chunk_count(x.len() / 2);
        s.sums_dd.fill(Cdd::ZERO);
        if chunks == 1 {
            power_sums_dd(x, &mut s.sums_dd);
            return;
        }
        s.partials_dd[..width * chunks]
            .par_chunks_mut(width)
            .zip(x.par_chunks(2 * TOKENS_PER_CHUNK))
            .for_each(|(acc, rows)| {
                acc.fill(Cdd::ZERO);
                power_sums_dd(rows, acc);
            });
        for acc in s.partials_dd.chunks(width).take(chunks) {
            for (sum, part) in s.sums_dd.iter_mut().zip(acc) {
                *sum = sum.plus(*part);
            }
        }
    }

    /// c_q (and d_q for `sa`) of every head in double-doubles, from the power sums.
    fn coefficients_dd(&self, s: &mut Scratch) {
        let p = self.degree;
        let inv_n = Dd::ONE.divide(Dd::from_f64(self.n.max(1) as f64));
        s.sums_dd
            .iter_mut()
            .for_each(|sum| *sum = sum.scale::<false>(inv_n));
        let mu = &s.sums_dd;
        let moment = |k: isize| {
            if k >= 0 {
                mu[k as usize]
            } else {
                mu[k.unsigned_abs()].conj()
            }
        };
        s.numerators_dd.fill(Cdd::ZERO);
        s.denominators_dd.fill(Cdd::ZERO);
        let width = 2 * p + 1;
        for (h, head) in self.heads.iter().enumerate() {
            let (v_plus, v_minus) = (head.v_plus, head.v_minus);
            let scale = if self.softmax { 1.0 } else { head.scale };
            for (i, nu) in s.nu_dd.iter_mut().enumerate() {
                let shift = i as isize - p as isize;
                *nu = moment(shift + 1)
                    .times_f64::<false>(v_plus.re * scale, v_plus.im * scale)
                    .plus(
                        moment(shift - 1)
                            .times_f64::<false>(v_minus.re * scale, v_minus.im * scale),
                    );
            }
            let numerator = if self.softmax {
                &mut s.numerators_dd[h * width..(h + 1) * width]
            } else {
                &mut s.numerators_dd[..]
            };
            let denominator = if self.softmax {
                &mut s.denominators_dd[h * (p + 1)..(h + 1) * (p + 1)]
            } else {
                &mut []
            };
            let (ma, mb) = head.orders();
            for (i, alpha) in head.alpha_dd.iter().enumerate() {
                for (k, gamma) in head.gamma_dd.iter().enumerate() {
                    // q = m + l and shift = l - m, offset by P.
                    let q = i + k + p - ma - mb;
                    let shift = k + p + ma - i - mb;
                    let w = alpha.times::<false>(*gamma);
                    numerator[q] = numerator[q].plus(w.times::<false>(s.nu_dd[shift]));
                    if q >= p && !denominator.is_empty() {
                        let d = &mut denominator[q - p];
                        *d = d.plus(w.times::<false>(moment(shift as isize - p as isize)));
                    }
                }
            }
        }
    }

    /// The field at every token from the double-double coefficients, rounded to doubles and
    /// projected.
    fn evaluate_dd(&self, x: &[f64], dx: &mut [f64], s: &Scratch) {
        let p = self.degree;
        let (numerators, denominators) = (&s.numerators_dd[..], &s.denominators_dd[..]);
        let softmax = self.softmax;
        for_each_chunk(dx, 2, x, 2, |out, rows| {
            if simd::has_avx2_fma() {
                simd::vectorized(
                    #[inline(always)]
                    || field_rows_dd::<true>(numerators, denominators, p, softmax, rows, out),
                );
            } else {
                field_rows_dd::<false>(numerators, denominators, p, softmax, rows, out);
            }
        });
    }
}

/// The projected double-double field at each row of `rows` into `out` (see `evaluate_dd`).
#[inline(always)]
fn field_rows_dd<const FMA: bool>(
    numerators: &[Cdd],
    denominators: &[Cdd],
    p: usize,
    softmax: bool,
    rows: &[f64],
    out: &mut [f64],
) {
    for (f, row) in out.chunks_exact_mut(2).zip(rows.chunks_exact(2)) {
        let z = Cdd::unit(row[0], row[1]);
        let field = if softmax {
            numerators
                .chunks_exact(2 * p + 1)
                .zip(denominators.chunks_exact(p + 1))
                .fold(Cdd::ZERO, |acc, (c, d)| {
                    let inverse = Dd::ONE.divide(hermitian_horner_dd::<FMA>(d, z));
                    acc.plus(horner_dd::<FMA>(c, z).scale::<FMA>(inverse))
                })
        } else {
            horner_dd::<FMA>(numerators, z)
        };
        let (re, im) = field.to_f64();
        let (zr, zi) = z.to_f64();
        let radial = zr * re + zi * im;
        f[0] = re - radial * zr;
        f[1] = im - radial * zi;
    }
}

/// acc[p] += z^p in double-doubles for every row (a token, normalised here to double-double
/// accuracy) and p = 0..acc.len().
fn power_sums_dd(rows: &[f64], acc: &mut [Cdd]) {
    if simd::has_avx2_fma() {
        simd::vectorized(
            #[inline(always)]
            || power_sums_dd_with::<true>(rows, acc),
        );
    } else {
        power_sums_dd_with::<false>(rows, acc);
    }
}

#[inline(always)]
fn power_sums_dd_with<const FMA: bool>(rows: &[f64], acc: &mut [Cdd]) {
    for row in rows.chunks_exact(2) {
        let z = Cdd::unit(row[0], row[1]);
        let mut w = Cdd::ONE;
        for a in acc.iter_mut() {
            *a = a.plus(w);
            w = w.times::<FMA>(z);
        }
    }
}

/// [`horner`] in double-doubles.
#[inline(always)]
fn horner_dd<const FMA: bool>(c: &[Cdd], z: Cdd) -> Cdd {
    let p = c.len() / 2;
    let mut positive = c[2 * p];
    for coefficient in c[p..2 * p].iter().rev() {
        positive = positive.times::<FMA>(z).plus(*coefficient);
    }
    if p == 0 {
        return positive;
    }
    let zc = z.conj();
    let mut negative = c[0];
    for coefficient in &c[1..p] {
        negative = negative.times::<FMA>(zc).plus(*coefficient);
    }
    positive.plus(negative.times::<FMA>(zc))
}

/// [`hermitian_horner`] in double-doubles.
#[inline(always)]
fn hermitian_horner_dd<const FMA: bool>(d: &[Cdd], z: Cdd) -> Dd {
    let p = d.len() - 1;
    if p == 0 {
        return d[0].re;
    }
    let mut s = d[p];
    for coefficient in d[1..p].iter().rev() {
        s = s.times::<FMA>(z).plus(*coefficient);
    }
    let last = s.times::<FMA>(z).re;
    d[0].re + last + last
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
