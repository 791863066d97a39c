//! The exponential of many numbers at once, for the attention weights.
//!
//! ```text
//! exp(x) = 2^k exp(r),   k = round(x / ln 2),   r = x - k ln 2   (|r| <= ln 2 / 2)
//! exp(r) = sum_{i=0}^{11} c_i r^i   (c_0 = c_1 = 1; interpolation at the 12 Chebyshev nodes of
//!                                    [-ln 2 / 2, ln 2 / 2], relative error below 2e-17)
//! ```
//!
//! k ln 2 is subtracted in two parts (Cody and Waite: ln 2 = LN2_HI + LN2_LO with LN2_HI's low
//! bits zero, so k LN2_HI is exact), k is read off the bits of x / ln 2 + 1.5 2^52 (no
//! float-to-integer conversion). The polynomial is evaluated in Estrin's scheme (pairs
//! c_i + c_{i+1} r, combined with r^2, r^4, r^8: a dependency chain of 5 steps instead of 11).
//! 2^k is applied in two halves, k = k1 + k2: k1 is added to the exponent bits of exp(r)
//! (an integer addition, exact because the result stays normal) and 2^k2 multiplies, so
//! results down in the subnormal range and up to overflow come out right. Inputs are clamped
//! to [-750, 710], outside of which exp is 0 or +inf anyway; NaN stays NaN (x 0 is added).
//!
//! Every lane is computed by the same arithmetic without branches, so the compiler turns the
//! loops into vector code. On x86-64 machines with AVX2 and FMA (checked at run time) the same
//! code is compiled for 4-wide vectors with fused multiply-adds; elsewhere it runs with plain
//! multiplies and adds. The error is at most 2 ulp either way (tested against `f64::exp`).

use crate::simd::LANES;

/// ln 2 split so that k LN2_HI is exact for |k| < 2^20 (LN2_HI has 21 trailing zero bits).
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
/// 1.5 2^52: adding it rounds a number of size < 2^51 to an integer held in the low bits.
const ROUNDING: f64 = 6_755_399_441_055_744.0;
/// c_11 down to c_0 of the module documentation (rounded to f64 from a 60-digit solve).
const POLYNOMIAL: [f64; 12] = [
    2.511_003_760_596_377_7e-8,
    2.763_263_963_904_103e-7,
    2.755_724_091_857_897e-6,
    2.480_148_548_232_849_4e-5,
    1.984_126_989_004_711_3e-4,
    1.388_888_895_231_477_5e-3,
    8.333_333_333_319_601e-3,
    4.166_666_666_648_81e-2,
    1.666_666_666_666_668e-1,
    5.000_000_000_000_019e-1,
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
    let p = polynomial::<FUSED>(r);
    // k (two's complement) sits in the low bits of `shifted`; k1 = floor(k / 2), k2 = k - k1,
    // both in [-538, 512] for the clamped x, so p 2^k1 (p in [0.7, 1.5]) and 2^k2 are normal.
    let k_bits = shifted.to_bits().wrapping_sub(ROUNDING.to_bits());
    let k1 = (k_bits.wrapping_add(2048) >> 1).wrapping_sub(1024);
    let k2 = k_bits.wrapping_sub(k1);
    let half = f64::from_bits(p.to_bits().wrapping_add(k1 << 52));
    let scale2 = f64::from_bits(k2.wrapping_add(1023) << 52);
    // x 0 is 0, or NaN for NaN (whose k bits are meaningless; x is finite or NaN here).
    half * scale2 + x * 0.0
}

/// sum c_i r^i in Estrin's scheme.
#[inline(always)]
fn polynomial<const FUSED: bool>(r: f64) -> f64 {
    let c = &POLYNOMIAL;
    let r2 = r * r;
    let r4 = r2 * r2;
    let r8 = r4 * r4;
    let pair = |high: f64, low: f64| multiply_add::<FUSED>(high, r, low);
    let (p01, p23, p45) = (pair(c[10], c[11]), pair(c[8], c[9]), pair(c[6], c[7]));
    let (p67, p89, p1011) = (pair(c[4], c[5]), pair(c[2], c[3]), pair(c[0], c[1]));
    let q0 = multiply_add::<FUSED>(p23, r2, p01);
    let q1 = multiply_add::<FUSED>(p67, r2, p45);
    let q2 = multiply_add::<FUSED>(p1011, r2, p89);
    multiply_add::<FUSED>(q2, r8, multiply_add::<FUSED>(q1, r4, q0))
}

#[inline(always)]
fn exp_in_place_lanes<const FUSED: bool>(values: &mut [f64]) {
    // Four 4-wide vectors per step, so their independent chains overlap.
    let mut chunks = values.chunks_exact_mut(2 * LANES);
    for chunk in &mut chunks {
        chunk.iter_mut().for_each(|v| *v = exp_lane::<FUSED>(*v));
    }
    for v in chunks.into_remainder() {
        *v = exp_lane::<FUSED>(*v);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn exp_in_place_avx2(values: &mut [f64]) {
    exp_in_place_lanes::<true>(values)
}

/// Replaces every value v by exp(v) (within 2 ulp of `f64::exp`, the test `agrees_with_the_library_exponential_to_two_ulps`).
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

    #[test]
    fn shifted_sum_of_three_values() {
        let mut v = [0.0, 1.0, -2.5];
        let sum = exp_shifted_sum(&mut v, 1.0);
        assert!((sum - (-1.0f64).exp() - 1.0 - (-3.5f64).exp()).abs() < 1e-15);
        assert!((v[1] - 1.0).abs() < 1e-16);
    }

    /// Units in the last place between `got` and the library's exp(x) (both positive).
    fn ulps(got: f64, x: f64) -> u64 {
        got.to_bits().abs_diff(x.exp().to_bits())
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
        // Random arguments over the whole finite range (a fixed linear congruential sequence).
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        xs.extend((0..200_000).map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 11) as f64 / (1u64 << 53) as f64 * 1460.0 - 750.0
        }));
        for fused in [false, true] {
            let mut got = xs.clone();
            if fused {
                // The fused variant through the public entry where the CPU has FMA, else the
                // same arithmetic with `mul_add` in software.
                got.iter_mut().for_each(|v| *v = exp_lane::<true>(*v));
            } else {
                exp_in_place_lanes::<false>(&mut got);
            }
            // Subnormal results carry fewer digits: 2 ulp of the smallest subnormal there.
            let worst = got.iter().zip(&xs).map(|(&g, &x)| ulps(g, x)).max();
            assert!(worst <= Some(2), "fused {fused}: worst error {worst:?} ulp");
        }
        let mut public = xs.clone();
        exp_in_place(&mut public);
        assert!(public.iter().zip(&xs).all(|(g, x)| ulps(*g, *x) <= 2));
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
                assert!((g - e).abs() <= 5e-16 * e, "exp({x} - {shift}) = {g}");
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
