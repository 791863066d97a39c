//! Hot loops compiled for the vector instructions of the machine they run on.
//!
//! The crate is built for the baseline x86-64 instruction set (2-wide SSE2 vectors), so that one
//! binary runs on any x86-64 machine. [`vectorized`] runs a closure inside a function compiled
//! for AVX2 and FMA when the CPU has them (checked once, at run time): the closure is inlined
//! there and its loops become 4-wide. The arithmetic is the same either way (no fused
//! multiply-adds are introduced: Rust never contracts a * b + c), so results are identical on
//! every machine.

/// Whether the CPU has AVX2 and FMA (checked once).
#[cfg(target_arch = "x86_64")]
pub fn has_avx2_fma() -> bool {
    use std::sync::OnceLock;
    static DETECTED: OnceLock<bool> = OnceLock::new();
    *DETECTED.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    })
}

/// Whether the CPU has AVX2 and FMA (never, off x86-64).
#[cfg(not(target_arch = "x86_64"))]
pub fn has_avx2_fma() -> bool {
    false
}

/// Runs `f`, compiled for AVX2 where the CPU has it (mark the closure `#[inline(always)]`).
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU supports the features `avx2` is compiled for.
        return unsafe { avx2(f) };
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Partial sums kept side by side in the vectorised reductions (two 4-wide vectors).
pub const LANES: usize = 8;

/// `acc[l] += values[i]` for every i = l mod LANES: a sum in a fixed order that vectorises.
#[inline(always)]
pub fn add_in_lanes(acc: &mut [f64; LANES], values: &[f64]) {
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for l in 0..LANES {
            acc[l] += chunk[l];
        }
    }
    for (a, v) in acc.iter_mut().zip(chunks.remainder()) {
        *a += v;
    }
}

/// The dot product of two rows, summed in order (the one every stage uses, so that the same
/// rows give the same bits wherever they are multiplied).
#[inline]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    // The examples of the documentation (the module is internal, so not doctests).
    #[test]
    fn vectorized_returns_the_closure_result() {
        let x = vec![1.0; 1000];
        let sum: f64 = crate::simd::vectorized(
            #[inline(always)]
            || x.iter().map(|v| 2.0 * v).sum(),
        );
        assert_eq!(sum, 2000.0);
    }

    #[test]
    fn add_in_lanes_keeps_every_value() {
        let mut acc = [0.0; crate::simd::LANES];
        crate::simd::add_in_lanes(&mut acc, &[1.0; 20]);
        assert_eq!(acc.iter().sum::<f64>(), 20.0);
    }
}
