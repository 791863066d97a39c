//! Modified Bessel functions of the first kind, scaled: e^{-x} I_m(x) for m = 0, 1, ..., x >= 0.
//!
//! Miller's method. The recurrence
//!
//! ```text
//! I_{m-1}(x) = I_{m+1}(x) + (2m / x) I_m(x)
//! ```
//!
//! is stable downward (I_m is its dominant solution there), so running it from a start index N
//! far above the last wanted order, with the arbitrary start f_{N+1} = 0, f_N = 1, gives numbers
//! proportional to I_m(x) to round-off. The factor follows from the Jacobi–Anger expansion at
//! angle 0,
//!
//! ```text
//! e^x = I_0(x) + 2 sum_{m >= 1} I_m(x),
//! ```
//!
//! which divides the f_m into e^{-x} I_m(x) directly: no overflow however large x is. The
//! spectral kernel (`spectral`) uses these values as the Fourier coefficients of
//! exp(x cos u) = sum_m I_m(x) e^{i m u}.
//!
//! For tiny x the recurrence's factor 2m / x would overflow before a rescaling could catch it
//! (beta -> 0: beta = 1e-100, or `log_n` of 5e-324). There the leading term of the power series
//!
//! ```text
//! e^{-x} I_m(x) = (x/2)^m / m! (1 + O(x^2) + O(x)),
//! ```
//!
//! is exact to the arithmetic: the switch happens only where x < 1e-50, so the neglected
//! terms are below 1e-100 relative (docs/MATH.md §4, "The spectral kernel").

use super::ddouble::Dd;

/// Values above this are scaled down during the recurrence (keeps every number finite).
const RESCALE_ABOVE: f64 = 1e250;

/// Orders computed beyond the last wanted one (and beyond x) before the recurrence starts.
fn start_order(last: usize, x: f64) -> usize {
    // The scaled I_m(x) falls like exp(-m^2 / 2x) for m < x and faster than (x/2)^m / m! beyond,
    // so x + 10 sqrt(x) + 30 orders past the larger of `last` and x leave terms far below 2^-53.
    let reach = x.ceil().min(1e7) as usize;
    last.max(reach) + 30 + (10.0 * x.min(1e7).sqrt()).ceil() as usize
}

/// Writes e^{-x} I_m(x) into `out[m]` for m = 0 .. out.len() - 1 (x finite and >= 0; for other x
/// every entry is NaN). Example: e^{-1} I_0(1) = 0.46575960759364... (the test `value_at_one`).
pub fn scaled_bessel_i(x: f64, out: &mut [f64]) {
    if settled_without_recurrence(x, out) {
        return;
    }
    let start = start_order(out.len() - 1, x);
    if recurrence_overflows(start, x, RESCALE_ABOVE) {
        leading_terms(out, 1.0, |previous, m| previous * (0.5 * x) / m);
        return;
    }
    // Sum of f_m over m >= 1 (the normalisation is f_0 + 2 * this).
    let (current, sum) = miller_downward(
        start,
        f64::MIN_POSITIVE * 1e10,
        out,
        (RESCALE_ABOVE, 1.0 / RESCALE_ABOVE),
        |m| 2.0 * m as f64 / x,
        |_| 1.0,
    );
    // `current` is now f_0.
    out[0] = current;
    let total = current + 2.0 * sum;
    out.iter_mut().for_each(|v| *v /= total);
}

/// Fills `out` where no recurrence is needed and says so: nothing to fill, x not finite or
/// negative (every entry NaN), x = 0 (1, 0, 0, ...). Otherwise `out` is left all zero.
pub(crate) fn settled_without_recurrence(x: f64, out: &mut [f64]) -> bool {
    if out.is_empty() {
        return true;
    }
    if !(x.is_finite() && x >= 0.0) {
        out.fill(f64::NAN);
        return true;
    }
    out.fill(0.0);
    if x == 0.0 {
        out[0] = 1.0;
        return true;
    }
    false
}

/// Miller's downward recurrence f_{k-1} = f_{k+1} + c(k) f_k from f_{start+1} = 0,
/// f_start = `seed` down to k = 0: stores f_k in out[k] for k < out.len() and returns f_0 and
/// sum_{k >= 1} w(k) f_k. Whenever a value exceeds `rescale.0` the run so far (stored values
/// and sum included) is multiplied by `rescale.1`, so only the ratios are meaningful.
pub(crate) fn miller_downward(
    start: usize,
    seed: f64,
    out: &mut [f64],
    rescale: (f64, f64),
    c: impl Fn(usize) -> f64,
    w: impl Fn(usize) -> f64,
) -> (f64, f64) {
    let (mut above, mut current) = (0.0, seed);
    let mut sum = 0.0;
    for k in (1..=start).rev() {
        if k < out.len() {
            out[k] = current;
        }
        sum += w(k) * current;
        let below = above + c(k) * current;
        above = current;
        current = below;
        if current > rescale.0 {
            let s = rescale.1;
            current *= s;
            above *= s;
            sum *= s;
            // The orders stored so far are k and above.
            if k < out.len() {
                out[k..].iter_mut().for_each(|v| *v *= s);
            }
        }
    }
    (current, sum)
}

/// Whether one step of the downward recurrence from `start`, whose values reach `rescale_above`
/// before they are scaled down, can overflow: (2 start / x) rescale_above > f64::MAX.
pub(crate) fn recurrence_overflows(start: usize, x: f64, rescale_above: f64) -> bool {
    2.0 * start as f64 / x > f64::MAX / rescale_above
}

/// e^{-x} I_m(x) = (x/2)^m / m! for tiny x (see the module's documentation): out[0] = one,
/// out[m] = next(out[m - 1], m) = out[m - 1] (x / 2) / m.
pub(crate) fn leading_terms<T: Copy>(out: &mut [T], one: T, next: impl Fn(T, f64) -> T) {
    out[0] = one;
    for m in 1..out.len() {
        out[m] = next(out[m - 1], m as f64);
    }
}

/// Above this a double-double recurrence is scaled down by [`DD_RESCALE`] (exact powers of two).
const DD_RESCALE_ABOVE: f64 = 4.149_515_568_880_993e180; // 2^600
const DD_RESCALE: f64 = 2.409_919_865_102_884_6e-181; // 2^-600

/// Writes e^{-x} I_m(x) into `out[m]` for m = 0 .. out.len() - 1 to double-double accuracy
/// (about 1e-31 relative to the largest value; same method as [`scaled_bessel_i`], started
/// further out). For x not finite or negative every entry is NaN.
pub(crate) fn scaled_bessel_i_dd(x: f64, out: &mut [Dd]) {
    if out.is_empty() {
        return;
    }
    if !(x.is_finite() && x >= 0.0) {
        out.fill(Dd::from_f64(f64::NAN));
        return;
    }
    out.fill(Dd::ZERO);
    if x == 0.0 {
        out[0] = Dd::ONE;
        return;
    }
    // Twice the double start's reach: the start's error falls below 2^-106.
    let reach = x.ceil().min(1e7) as usize;
    let start = (out.len() - 1).max(reach) + 60 + (20.0 * x.min(1e7).sqrt()).ceil() as usize;
    if recurrence_overflows(start, x, DD_RESCALE_ABOVE) {
        leading_terms(out, Dd::ONE, |previous, m| {
            previous.times_f64::<false>(0.5 * x).divide(Dd::from_f64(m))
        });
        return;
    }
    let two_over_x = Dd::from_f64(2.0).divide(Dd::from_f64(x));
    let (mut above, mut current) = (Dd::ZERO, Dd::ONE);
    let mut sum = Dd::ZERO;
    for m in (1..=start).rev() {
        if m < out.len() {
            out[m] = current;
        }
        sum = sum + current;
        let below = above + two_over_x.times_f64::<false>(m as f64) * current;
        above = current;
        current = below;
        if current.hi > DD_RESCALE_ABOVE {
            let s = Dd::from_f64(DD_RESCALE);
            current = current * s;
            above = above * s;
            sum = sum * s;
            if m < out.len() {
                out[m..].iter_mut().for_each(|v| *v = *v * s);
            }
        }
    }
    out[0] = current;
    let total = current + sum + sum;
    let inverse = Dd::ONE.divide(total);
    out.iter_mut().for_each(|v| *v = *v * inverse);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_at_one() {
        // I_0(1) = 1.2660658777520082..., so e^{-1} I_0(1) = 0.46575960759364...
        let mut out = [0.0; 3];
        scaled_bessel_i(1.0, &mut out);
        assert!((out[0] - 0.465_759_607_593_640_4).abs() < 1e-15);
    }

    #[test]
    fn double_double_value_at_one() {
        // e^{-1} I_0(1) = 0.4657596075936404...
        let mut out = [Dd::ZERO; 2];
        scaled_bessel_i_dd(1.0, &mut out);
        assert!((out[0].to_f64() - 0.465_759_607_593_640_4).abs() < 1e-16);
    }

    /// e^{-x} I_m(x) for the orders ORDERS, computed with mpmath 1.3.0 (`mp.dps = 40`,
    /// `mp.besseli(m, x) * mp.exp(-x)`), rounded to 17 significant digits (kept as printed).
    const ORDERS: [usize; 7] = [0, 1, 2, 5, 10, 20, 40];
    #[allow(clippy::excessive_precision)]
    const TABLE: [(f64, [f64; 7]); 9] = [
        (
            1e-3,
            [
                9.9900074958351556e-1,
                4.9950031235422135e-4,
                1.2487507288542741e-7,
                2.601563910047908e-19,
                2.6884547172369639e-40,
                3.9159864511930746e-85,
                1.1135784386711449e-180,
            ],
        ),
        (
            0.1,
            [
                9.0710092578230109e-1,
                4.5298446808809327e-2,
                1.1319896061145964e-3,
                2.3573294295782141e-9,
                2.4356016783441053e-20,
                3.5472984018130245e-45,
                1.0086770472667999e-100,
            ],
        ),
        (
            0.5,
            [
                6.4503527044915007e-1,
                1.564208031848717e-1,
                1.935205770966328e-2,
                4.9876055214701639e-6,
                1.6030859629529217e-13,
                2.2741587160374397e-31,
                6.1584307184609693e-73,
            ],
        ),
        (
            1.0,
            [
                4.6575960759364044e-1,
                2.0791041534970845e-1,
                4.9938776894223539e-2,
                9.9865714112086907e-5,
                1.0127529864692066e-10,
                1.4593174056818686e-25,
                4.1258037690935588e-61,
            ],
        ),
        (
            2.5,
            [
                2.7004644161220274e-1,
                2.0658464953126655e-1,
                1.047787219871895e-1,
                2.6959566142995797e-3,
                2.4262221023891066e-7,
                3.1520899881449955e-18,
                7.862535224735836e-46,
            ],
        ),
        (
            5.0,
            [
                1.8354081260932835e-1,
                1.6397226694454236e-1,
                1.1795190583151141e-1,
                1.4540318125234771e-2,
                3.0860096549865416e-5,
                3.3853058504733224e-13,
                7.953654429953234e-35,
            ],
        ),
        (
            10.0,
            [
                1.2783333716342861e-1,
                1.2126268138445552e-1,
                1.035808008865375e-1,
                3.5284293614933963e-2,
                9.9388192221399772e-4,
                5.6786220145215239e-9,
                9.2712253205384546e-25,
            ],
        ),
        (
            30.0,
            [
                7.3145946482237294e-2,
                7.1916330598647555e-2,
                6.8351524442327457e-2,
                4.7925203168721224e-2,
                1.3646390946186457e-2,
                1.0545901698926877e-4,
                2.2510414876317662e-12,
            ],
        ),
        (
            100.0,
            [
                3.9944379299096683e-2,
                3.9744153025130253e-2,
                3.9149496238594078e-2,
                3.5229468707741779e-2,
                2.4176682718258828e-2,
                5.3879576269663274e-3,
                1.429143633630828e-5,
            ],
        ),
    ];

    #[test]
    fn scaled_values_match_the_table() {
        let mut out = [0.0; 41];
        for (x, row) in TABLE {
            scaled_bessel_i(x, &mut out);
            for (m, expected) in ORDERS.iter().zip(row) {
                let relative = (out[*m] - expected).abs() / expected;
                assert!(
                    relative < 1e-14,
                    "x = {x}, m = {m}: {} vs {expected} ({relative:.1e})",
                    out[*m]
                );
            }
        }
    }

    /// e^{-x} I_m(x) by its power series sum_k (x/2)^{2k+m} / (k! (k+m)!) times e^{-x}, with
    /// enough terms for x <= 1 (an independent formula for the tiny-argument path).
    fn power_series(x: f64, m: usize) -> f64 {
        let mut term = (0..m).fold(1.0, |t, j| t * 0.5 * x / (j + 1) as f64);
        let mut sum = term;
        for k in 1..30 {
            term *= 0.25 * x * x / (k * (k + m)) as f64;
            sum += term;
        }
        sum * (-x).exp()
    }

    #[test]
    fn tiny_arguments_are_finite_and_meet_the_power_series() {
        // beta -> 0: the recurrence's 2m / x overflows below about 1e-57; the leading term takes
        // over there. Both sides of the switch agree with the power series.
        for x in [1e-3, 1e-40, 1e-56, 1e-60, 1e-100, 1e-300, 5e-324] {
            let mut out = [0.0; 41];
            scaled_bessel_i(x, &mut out);
            let mut dd = [Dd::ZERO; 41];
            scaled_bessel_i_dd(x, &mut dd);
            for m in [0, 1, 2, 5] {
                let want = power_series(x, m);
                for (got, what) in [(out[m], "double"), (dd[m].to_f64(), "double-double")] {
                    assert!(got.is_finite(), "{what}: x = {x:e}, m = {m}: {got}");
                    let err = (got - want).abs();
                    assert!(
                        err <= 1e-14 * want || (want < 1e-300 && err < 1e-300),
                        "{what}: x = {x:e}, m = {m}: {got:e} vs {want:e}"
                    );
                }
            }
        }
    }

    #[test]
    fn short_outputs_and_edge_arguments() {
        // Asking for fewer orders gives the same leading values.
        let mut long = [0.0; 41];
        let mut short = [0.0; 2];
        scaled_bessel_i(30.0, &mut long);
        scaled_bessel_i(30.0, &mut short);
        assert!((short[0] - long[0]).abs() < 1e-16 && (short[1] - long[1]).abs() < 1e-16);
        scaled_bessel_i(0.0, &mut short);
        assert_eq!(short, [1.0, 0.0]);
        scaled_bessel_i(-1.0, &mut short);
        assert!(short.iter().all(|v| v.is_nan()));
        scaled_bessel_i(f64::INFINITY, &mut short);
        assert!(short.iter().all(|v| v.is_nan()));
        // A huge argument stays finite and satisfies the normalisation it was built on.
        let mut many = vec![0.0; 4000];
        scaled_bessel_i(1e5, &mut many);
        assert!(many.iter().all(|v| v.is_finite() && *v >= 0.0));
        let total = many[0] + 2.0 * many[1..].iter().sum::<f64>();
        assert!((total - 1.0).abs() < 1e-12, "{total}");
    }
    #[test]
    fn double_double_values_meet_closed_forms_that_cancel() {
        // sum_m e^{-x} I_m(x) e^{i m u} = e^{x (cos u - 1)}: at u = pi the alternating sum is
        // e^{-2x}, at u = pi/2 the even orders with alternating signs give e^{-x}. Terms of size
        // up to 1 add to e^{-2x}: doubles lose everything at x = 15, double-doubles keep ~1e-16.
        for x in [0.1, 1.0, 3.0, 8.0, 15.0] {
            let mut out = vec![Dd::ZERO; 120];
            scaled_bessel_i_dd(x, &mut out);
            let mut at_pi = out[0];
            let mut at_half_pi = out[0];
            for (m, v) in out.iter().enumerate().skip(1) {
                let twice = *v + *v;
                at_pi = if m % 2 == 0 {
                    at_pi + twice
                } else {
                    at_pi - twice
                };
                match m % 4 {
                    0 => at_half_pi = at_half_pi + twice,
                    2 => at_half_pi = at_half_pi - twice,
                    _ => {}
                }
            }
            let e1 = (at_pi.to_f64() - (-2.0 * x).exp()).abs() / (-2.0 * x).exp();
            let e2 = (at_half_pi.to_f64() - (-x).exp()).abs() / (-x).exp();
            assert!(e1 < 1e-14 && e2 < 1e-14, "x = {x}: {e1:e}, {e2:e}");
            // The high parts are the double values of the table's method.
            let mut plain = vec![0.0; 120];
            scaled_bessel_i(x, &mut plain);
            for (d, p) in out.iter().zip(&plain).take(40) {
                assert!((d.to_f64() - p).abs() <= 1e-15 * out[0].hi, "x = {x}");
            }
        }
        let mut out = [Dd::ZERO; 3];
        scaled_bessel_i_dd(-1.0, &mut out);
        assert!(out.iter().all(|v| v.hi.is_nan()));
        scaled_bessel_i_dd(0.0, &mut out);
        assert_eq!(out[0], Dd::ONE);
    }
}
