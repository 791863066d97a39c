//! The exponential of many numbers at once, for the attention weights.
//!
//! ```text
//! exp(x) = 2^k exp(r),   k = round(x / ln 2),   r = x - k ln 2   (|r| <= ln 2 / 2)
//! exp(r) = sum_{i=0}^{13} r^i / i!   (Horner; the first omitted term is below 4e-18)
//! ```
//!
//! k ln 2 is subtracted in two parts (Cody and Waite: ln 2 = LN2_HI + LN2_LO with LN2_HI's low
//! bits zero, so k LN2_HI is exact), k is read off the bits of x / ln 2 + 1.5 2^52 (no
//! float-to-integer conversion), and 2^k is applied as two powers of two 2^k1 2^k2 (k1 + k2 =
//! k), so results down in the subnormal range and up to overflow come out right. Inputs are
//! clamped to [-750, 710], outside of which exp is 0 or +inf anyway; NaN stays NaN.
//!
//! Every lane is computed by the same arithmetic without branches, so the compiler turns the
//! loops into vector code. On x86-64 machines with AVX2 and FMA (checked at run time) the same
//! code is compiled for 4-wide vectors with fused multiply-adds; elsewhere it runs with plain
//! multiplies and adds. The relative error is below 4e-16 either way (tested against `f64::exp`).

use crate::simd::LANES;

/// ln 2 split so that k LN2_HI is exact for |k| < 2^20 (LN2_HI has 21 trailing zero bits).
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
/// 1.5 2^52: adding it rounds a number of size < 2^51 to an integer held in the low bits.
const ROUNDING: f64 = 6_755_399_441_055_744.0;
/// 1 / i! for i = 13 down to 0 (Horner order).
const INVERSE_FACTORIALS: [f64; 14] = [
    1.0 / 6_227_020_800.0,
    1.0 / 479_001_600.0,
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
    1.0,
];

/// a b + c, fused when the caller is compiled with FMA.
#[inline(always)]
fn multiply_add<const FUSED: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FUSED {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// exp(x) by the formula of the module documentation.
#[inline(always)]
pub(crate) fn exp_lane<const FUSED: bool>(x: f64) -> f64 {
    // NaN passes through the clamp.
    let x = x.clamp(-750.0, 710.0);
    let shifted = multiply_add::<FUSED>(x, std::f64::consts::LOG2_E, ROUNDING);
    let k = shifted - ROUNDING;
    let r = multiply_add::<FUSED>(-k, LN2_LO, multiply_add::<FUSED>(-k, LN2_HI, x));
    let mut p = INVERSE_FACTORIALS[0];
    for c in &INVERSE_FACTORIALS[1..] {
        p = multiply_add::<FUSED>(p, r, *c);
    }
    // k (two's complement) sits in the low bits of `shifted`; k1 = floor(k / 2), k2 = k - k1,
    // both within the normal exponent range for the clamped x.
    let k_bits = shifted.to_bits().wrapping_sub(ROUNDING.to_bits());
    let k1 = (k_bits.wrapping_add(2048) >> 1).wrapping_sub(1024);
    let k2 = k_bits.wrapping_sub(k1);
    let scale1 = f64::from_bits(k1.wrapping_add(1023) << 52);
    let scale2 = f64::from_bits(k2.wrapping_add(1023) << 52);
    p * scale1 * scale2
}

#[inline(always)]
fn exp_in_place_lanes<const FUSED: bool>(values: &mut [f64]) {
    for v in values.iter_mut() {
        *v = exp_lane::<FUSED>(*v);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn exp_in_place_avx2(values: &mut [f64]) {
    exp_in_place_lanes::<true>(values)
}

/// Replaces every value v by exp(v).
///
/// ```
/// let mut v = [0.0, 1.0, -2.5, 700.0];
/// tokdyn::model::exp_in_place(&mut v);
/// for (got, x) in v.iter().zip([0.0f64, 1.0, -2.5, 700.0]) {
///     assert!((got / x.exp() - 1.0).abs() < 4e-16);
/// }
/// ```
pub fn exp_in_place(values: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx2_fma() {
        // SAFETY: the CPU supports the features this function is compiled for.
        unsafe { exp_in_place_avx2(values) };
        return;
    }
    exp_in_place_lanes::<false>(values)
}

#[inline(always)]
fn exp_shifted_sum_lanes<const FUSED: bool>(values: &mut [f64], shift: f64) -> f64 {
    let mut acc = [0.0; LANES];
    let mut chunks = values.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (a, v) in acc.iter_mut().zip(chunk.iter_mut()) {
            *v = exp_lane::<FUSED>(*v - shift);
            *a += *v;
        }
    }
    for (a, v) in acc.iter_mut().zip(chunks.into_remainder()) {
        *v = exp_lane::<FUSED>(*v - shift);
        *a += *v;
    }
    acc.iter().sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn exp_shifted_sum_avx2(values: &mut [f64], shift: f64) -> f64 {
    exp_shifted_sum_lanes::<true>(values, shift)
}

/// Replaces every value v by exp(v - shift) and returns their sum, added in a fixed order
/// (`LANES` partial sums, then in lane order): the softmax step of one column of weights,
/// in one pass while the column is in cache.
///
/// ```
/// let mut v = [0.0, 1.0, -2.5];
/// let sum = tokdyn::model::exp::exp_shifted_sum(&mut v, 1.0);
/// assert!((sum - (-1.0f64).exp() - 1.0 - (-3.5f64).exp()).abs() < 1e-15);
/// ```
pub fn exp_shifted_sum(values: &mut [f64], shift: f64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx2_fma() {
        // SAFETY: the CPU supports the features this function is compiled for.
        return unsafe { exp_shifted_sum_avx2(values, shift) };
    }
    exp_shifted_sum_lanes::<false>(values, shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relative_error(got: f64, x: f64) -> f64 {
        let exact = x.exp();
        if exact == 0.0 || exact.is_infinite() {
            return if got == exact { 0.0 } else { f64::INFINITY };
        }
        ((got - exact) / exact).abs()
    }

    #[test]
    fn agrees_with_the_library_exponential_to_two_ulps() {
        // A dense sweep of the useful range, the reduction's boundaries and the extremes.
        let mut xs: Vec<f64> = (-200_000..=200_000).map(|i| f64::from(i) * 1e-3).collect();
        xs.extend((-7450..=7097).map(|i| f64::from(i) * 0.1));
        for k in -1080..=1024 {
            let at = f64::from(k) * std::f64::consts::LN_2;
            xs.extend([at, at + 0.3465, at - 0.3465, at.next_up(), at.next_down()]);
        }
        xs.extend([0.0, -0.0, 1e-300, -1e-300, 709.78, 709.79, -745.1, -745.2]);
        for fused in [false, true] {
            let mut got = xs.clone();
            if fused {
                // The fused variant through the public entry where the CPU has FMA, else the
                // same arithmetic with `mul_add` in software.
                got.iter_mut().for_each(|v| *v = exp_lane::<true>(*v));
            } else {
                exp_in_place_lanes::<false>(&mut got);
            }
            let mut worst: f64 = 0.0;
            for (&g, &x) in got.iter().zip(&xs) {
                // Subnormal results carry fewer digits; compare them absolutely.
                if x.exp() < f64::MIN_POSITIVE {
                    assert!((g - x.exp()).abs() <= 2.0 * 4.9e-324, "exp({x}) = {g}");
                    continue;
                }
                worst = worst.max(relative_error(g, x));
            }
            assert!(worst < 4e-16, "fused {fused}: worst relative error {worst}");
        }
        let mut public = xs.clone();
        exp_in_place(&mut public);
        assert!(public
            .iter()
            .zip(&xs)
            .all(|(g, x)| x.exp() < f64::MIN_POSITIVE || relative_error(*g, *x) < 4e-16));
    }

    #[test]
    fn shifted_exponentials_and_their_sum_match_the_library() {
        // Lengths around the lane count, so the tail loop runs with 0..7 values.
        for len in [0, 1, 7, 8, 9, 23, 64] {
            let xs: Vec<f64> = (0..len).map(|i| (i as f64 * 0.7).sin() * 40.0).collect();
            let shift = xs
                .iter()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max)
                .max(0.0);
            let mut got = xs.clone();
            let sum = exp_shifted_sum(&mut got, shift);
            let mut expected_sum = 0.0;
            for (g, x) in got.iter().zip(&xs) {
                let e = (x - shift).exp();
                expected_sum += e;
                assert!((g - e).abs() <= 4e-16 * e, "exp({x} - {shift}) = {g}");
            }
            assert!((sum - expected_sum).abs() <= 1e-15 * expected_sum.max(1e-300));
        }
    }

    #[test]
    fn special_values() {
        let mut v = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 710.0, 1e6, -1e6];
        exp_in_place(&mut v);
        assert!(v[0].is_nan());
        assert_eq!(
            &v[1..],
            &[f64::INFINITY, 0.0, f64::INFINITY, f64::INFINITY, 0.0]
        );
    }
}
