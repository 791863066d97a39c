//! Double-double numbers: x = hi + lo, |lo| <= ulp(hi) / 2, about 106 significant bits, for the
//! spectral kernel where plain doubles cancel (docs/MATH.md, section 4, "The spectral kernel").
//!
//! Built on the error-free transformations
//!
//! ```text
//! two_sum(a, b)  = (s, e):  s = fl(a + b),  e = (a + b) - s exactly   (Knuth)
//! two_prod(a, b) = (p, e):  p = fl(a b),    e = a b - p exactly       (FMA, or Dekker's split)
//! ```
//!
//! The sum is the "sloppy" one (two_sum of the high parts, the low parts added plainly): its error
//! is below about 4 u^2 (|a| + |b|), u = 2^-53, which is the bound the spectral kernel needs (its
//! terms are compared with the size of the largest term, never with their sum). The product errs
//! by about 4 u^2 |a b|. `FMA` selects the fused multiply-add for the product's error term (call
//! with `true` only inside code compiled for FMA, [`crate::simd::vectorized`]); Dekker's split
//! gives the same exact error term without it, so the results are the same bits either way.

use std::ops::{Add, Mul, Neg, Sub};

/// A double-double number hi + lo.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Dd {
    pub hi: f64,
    pub lo: f64,
}

/// A complex number with double-double parts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cdd {
    pub re: Dd,
    pub im: Dd,
}

#[inline(always)]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

#[inline(always)]
fn quick_two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    (s, b - (s - a))
}

/// Veltkamp's split a = hi + lo into two 26-bit halves.
#[inline(always)]
fn split(a: f64) -> (f64, f64) {
    let t = 134_217_729.0 * a;
    let hi = t - (t - a);
    (hi, a - hi)
}

#[inline(always)]
fn two_prod<const FMA: bool>(a: f64, b: f64) -> (f64, f64) {
    let p = a * b;
    if FMA {
        (p, a.mul_add(b, -p))
    } else {
        let (ah, al) = split(a);
        let (bh, bl) = split(b);
        (p, ((ah * bh - p) + ah * bl + al * bh) + al * bl)
    }
}

impl Dd {
    pub const ZERO: Dd = Dd { hi: 0.0, lo: 0.0 };
    pub const ONE: Dd = Dd { hi: 1.0, lo: 0.0 };

    /// The exact value of a double.
    #[inline(always)]
    pub fn from_f64(x: f64) -> Dd {
        Dd { hi: x, lo: 0.0 }
    }

    /// The nearest double.
    #[inline(always)]
    pub fn to_f64(self) -> f64 {
        self.hi + self.lo
    }

    #[inline(always)]
    fn renormalised(hi: f64, lo: f64) -> Dd {
        let (hi, lo) = quick_two_sum(hi, lo);
        Dd { hi, lo }
    }

    /// a + b.
    #[inline(always)]
    pub fn plus(self, b: Dd) -> Dd {
        let (s, e) = two_sum(self.hi, b.hi);
        Dd::renormalised(s, e + (self.lo + b.lo))
    }

    /// a b.
    #[inline(always)]
    pub fn times<const FMA: bool>(self, b: Dd) -> Dd {
        let (p, e) = two_prod::<FMA>(self.hi, b.hi);
        Dd::renormalised(p, e + (self.hi * b.lo + self.lo * b.hi))
    }

    /// a b for a double b.
    #[inline(always)]
    pub fn times_f64<const FMA: bool>(self, b: f64) -> Dd {
        let (p, e) = two_prod::<FMA>(self.hi, b);
        Dd::renormalised(p, e + self.lo * b)
    }

    /// a / b (two Newton corrections of the double quotient).
    pub fn divide(self, b: Dd) -> Dd {
        let q1 = self.hi / b.hi;
        let r = self - b.times::<false>(Dd::from_f64(q1));
        let q2 = r.hi / b.hi;
        let r = r - b.times::<false>(Dd::from_f64(q2));
        let q3 = r.hi / b.hi;
        Dd::renormalised(q1, q2).plus(Dd::from_f64(q3))
    }

    /// sqrt(a) for a >= 0 (one Newton correction of the double root).
    pub fn sqrt(self) -> Dd {
        if self.hi <= 0.0 {
            return Dd::ZERO;
        }
        let y = self.hi.sqrt();
        let (p, e) = two_prod::<false>(y, y);
        let residual = ((self.hi - p) - e) + self.lo;
        Dd::renormalised(y, residual / (2.0 * y))
    }
}

impl Add for Dd {
    type Output = Dd;
    #[inline(always)]
    fn add(self, b: Dd) -> Dd {
        Dd::plus(self, b)
    }
}

impl Sub for Dd {
    type Output = Dd;
    #[inline(always)]
    fn sub(self, b: Dd) -> Dd {
        Dd::plus(self, -b)
    }
}

impl Neg for Dd {
    type Output = Dd;
    #[inline(always)]
    fn neg(self) -> Dd {
        Dd {
            hi: -self.hi,
            lo: -self.lo,
        }
    }
}

impl Mul for Dd {
    type Output = Dd;
    #[inline(always)]
    fn mul(self, b: Dd) -> Dd {
        Dd::times::<false>(self, b)
    }
}

impl Cdd {
    pub const ZERO: Cdd = Cdd {
        re: Dd::ZERO,
        im: Dd::ZERO,
    };
    pub const ONE: Cdd = Cdd {
        re: Dd::ONE,
        im: Dd::ZERO,
    };

    #[inline(always)]
    pub fn new(re: Dd, im: Dd) -> Cdd {
        Cdd { re, im }
    }

    /// The nearest double complex number (re, im).
    #[inline(always)]
    pub fn to_f64(self) -> (f64, f64) {
        (self.re.to_f64(), self.im.to_f64())
    }

    #[inline(always)]
    pub fn conj(self) -> Cdd {
        Cdd::new(self.re, -self.im)
    }

    #[inline(always)]
    pub fn plus(self, b: Cdd) -> Cdd {
        Cdd::new(self.re.plus(b.re), self.im.plus(b.im))
    }

    #[inline(always)]
    pub fn times<const FMA: bool>(self, b: Cdd) -> Cdd {
        Cdd::new(
            self.re.times::<FMA>(b.re) - self.im.times::<FMA>(b.im),
            self.re.times::<FMA>(b.im).plus(self.im.times::<FMA>(b.re)),
        )
    }

    /// a b for a double complex b = (re, im).
    #[inline(always)]
    pub fn times_f64<const FMA: bool>(self, re: f64, im: f64) -> Cdd {
        Cdd::new(
            self.re.times_f64::<FMA>(re) - self.im.times_f64::<FMA>(im),
            self.re
                .times_f64::<FMA>(im)
                .plus(self.im.times_f64::<FMA>(re)),
        )
    }

    /// a s for a real double-double s.
    #[inline(always)]
    pub fn scale<const FMA: bool>(self, s: Dd) -> Cdd {
        Cdd::new(self.re.times::<FMA>(s), self.im.times::<FMA>(s))
    }

    /// The unit complex number (x, y) / |(x, y)| to double-double accuracy ((1, 0) for (0, 0)).
    pub fn unit(x: f64, y: f64) -> Cdd {
        let (xx, ex) = two_prod::<false>(x, x);
        let (yy, ey) = two_prod::<false>(y, y);
        let r2 = Dd::renormalised(xx, ex).plus(Dd::renormalised(yy, ey));
        if r2.hi <= 0.0 || !r2.hi.is_finite() {
            return Cdd::ONE;
        }
        let r = r2.sqrt();
        Cdd::new(Dd::from_f64(x).divide(r), Dd::from_f64(y).divide(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_and_sums_keep_106_bits() {
        // (1 + 2^-30)^2 = 1 + 2^-29 + 2^-60: the last term is lost in doubles, kept here.
        let a = Dd::from_f64(1.0 + 2f64.powi(-30));
        let p = a * a;
        assert_eq!(p.hi, 1.0 + 2f64.powi(-29));
        assert_eq!(p.lo, 2f64.powi(-60));
        // FMA and Dekker's split give the same bits.
        assert_eq!(a.times::<true>(a), p);
        // 1/3 * 3 = 1 to about 1e-32.
        let third = Dd::ONE.divide(Dd::from_f64(3.0));
        let back = third.times_f64::<false>(3.0) - Dd::ONE;
        assert!(back.to_f64().abs() < 1e-31, "{back:?}");
        // sqrt(2)^2 = 2.
        let root = Dd::from_f64(2.0).sqrt();
        assert!((root * root - Dd::from_f64(2.0)).to_f64().abs() < 1e-31);
        // A unit complex number has |z|^2 = 1 to about 1e-32.
        let z = Cdd::unit(0.3, -1.7);
        let r2 = z.re * z.re + z.im * z.im - Dd::ONE;
        assert!(r2.to_f64().abs() < 1e-31, "{r2:?}");
        // z^64 by repeated products stays on the circle to 64 times that.
        let mut w = Cdd::ONE;
        for _ in 0..64 {
            w = w.times::<false>(z);
        }
        let r2 = w.re * w.re + w.im * w.im - Dd::ONE;
        assert!(r2.to_f64().abs() < 1e-29, "{r2:?}");
    }
}
