//! Axisymmetric functions on S^{d-1} (d >= 3): Gauss quadrature in u = <x, e>, the Gegenbauer
//! polynomials and the Funk–Hecke coefficients of e^{beta <x, y>} (docs/MATH.md §17.1).
//!
//! ```text
//! lambda = (d - 2) / 2,  weight w(u) = (1 - u^2)^{lambda - 1/2} = (1 - u^2)^{(d-3)/2} on [-1, 1]
//! mu0    = int w = sqrt(pi) Gamma((d-1)/2) / Gamma(d/2) = |S^{d-1}| / |S^{d-2}|
//! P_0 = 1, P_1 = u, (l + 2 lambda) P_{l+1} = 2 (l + lambda) u P_l - l P_{l-1}     (P_l(1) = 1)
//! (1/mu0) int P_l P_k w du = delta_lk / N(d, l),  N(d, l) = (2l + d - 2) (l + d - 3)! / (l! (d - 2)!)
//! c_l    = (1/mu0) int e^{beta t} P_l(t) w(t) dt = Gamma(d/2) (2/beta)^{d/2-1} I_{l+d/2-1}(beta)
//! ```
//!
//! For d = 3 the P_l are the Legendre polynomials, w = 1 and mu0 = 2. (1/mu0) w(u) du is the law
//! of u = <x, e> for x uniform on the sphere (the normalised surface measure sigma), N(d, l) is
//! the dimension of the spherical harmonics of degree l, and by Funk–Hecke
//! integral e^{beta <x, y>} P_l(<y, e>) dsigma(y) = c_l P_l(<x, e>): the convolution with the
//! kernel is diagonal in the P_l. At beta = 0 the c_l are 1, 0, 0, ...; c_l(-beta) =
//! (-1)^l c_l(beta).
//!
//! The nodes are the zeros of the degree-m orthonormal polynomial, found by Newton's method on
//! the three-term recurrence of the monic Jacobi matrix (off-diagonal squared
//! b_n = n (n + 2 lambda - 1) / (4 (n + lambda) (n + lambda - 1))) from the asymptotic guesses
//! theta_k = (k + lambda/2 - 1/2) pi / (m + lambda); the weights are Christoffel's,
//! 1 / sum_{j<m} p_j(u_k)^2 for the orthonormal p_j. Gauss quadrature with m nodes is exact for
//! polynomials of degree 2m - 1 against w.

use std::f64::consts::PI;

/// lambda = (d - 2) / 2 (d >= 3).
fn lambda(d: usize) -> f64 {
    (d as f64 - 2.0) / 2.0
}

/// Gamma(z) for z = 1/2, 1, 3/2, 2, ... (infinite past z = 171).
fn gamma_half(z: f64) -> f64 {
    let (mut w, mut value) = if z.fract() == 0.0 {
        (1.0, 1.0)
    } else {
        (0.5, PI.sqrt())
    };
    while w < z - 0.25 {
        value *= w;
        w += 1.0;
    }
    value
}

/// ln Gamma(z) for z = 1/2, 1, 3/2, 2, ... (z a positive multiple of 1/2), by Gamma(z + 1) =
/// z Gamma(z) from Gamma(1/2) = sqrt(pi) or Gamma(1) = 1 (a sum of logarithms: no overflow).
fn ln_gamma_half(z: f64) -> f64 {
    let (mut w, mut value) = if z.fract() == 0.0 {
        (1.0, 0.0)
    } else {
        (0.5, 0.5 * PI.ln())
    };
    while w < z - 0.25 {
        value += w.ln();
        w += 1.0;
    }
    value
}

/// mu0 = int_{-1}^{1} (1 - u^2)^{(d-3)/2} du = |S^{d-1}| / |S^{d-2}| (d >= 3; d = 3: 2).
pub fn weight_total(d: usize) -> f64 {
    let (a, b) = ((d as f64 - 1.0) / 2.0, d as f64 / 2.0);
    let direct = PI.sqrt() * gamma_half(a) / gamma_half(b);
    if direct.is_finite() {
        direct
    } else {
        (0.5 * PI.ln() + ln_gamma_half(a) - ln_gamma_half(b)).exp()
    }
}

/// |S^{d-1}|, the area of the unit sphere in R^d: 2 pi^{d/2} / Gamma(d/2) (d = 3: 4 pi).
pub fn sphere_area(d: usize) -> f64 {
    let direct = 2.0 * PI.powf(d as f64 / 2.0) / gamma_half(d as f64 / 2.0);
    if direct.is_finite() && direct > 0.0 {
        direct
    } else {
        (2f64.ln() + d as f64 / 2.0 * PI.ln() - ln_gamma_half(d as f64 / 2.0)).exp()
    }
}

/// N(d, l): the dimension of the spherical harmonics of degree l on S^{d-1}, 1 / the mean of
/// P_l^2 (d = 3: 2l + 1).
pub fn dimension(d: usize, l: usize) -> f64 {
    if l == 0 {
        return 1.0;
    }
    // (2l + d - 2) / l * binomial(l + d - 3, l - 1), the binomial as a product of ratios.
    let mut binomial = 1.0;
    for j in 1..l {
        binomial *= (j + d - 2) as f64 / j as f64;
    }
    (2 * l + d - 2) as f64 / l as f64 * binomial
}

/// ln N(d, l), a sum of logarithms (N itself overflows for large d and l).
pub fn ln_dimension(d: usize, l: usize) -> f64 {
    if l == 0 {
        return 0.0;
    }
    let binomial: f64 = (1..l).map(|j| ((j + d - 2) as f64 / j as f64).ln()).sum();
    ((2 * l + d - 2) as f64 / l as f64).ln() + binomial
}

/// Writes p_l(u) = sqrt(N(d, l)) P_l(u), l = 0 ..= `lmax`, into `p` and p_l'(u) into `dp`: the
/// polynomials orthonormal for sigma's law of u, by the recurrence of the monic Jacobi matrix,
/// sqrt(b_{l+1}) p_{l+1} = u p_l - sqrt(b_l) p_{l-1} (p_0 = 1, p_1 = sqrt(d) u). They stay of
/// order one where P_l(u) underflows and N(d, l) overflows.
pub fn orthonormal_polynomials(d: usize, lmax: usize, u: f64, p: &mut [f64], dp: &mut [f64]) {
    debug_assert!(d >= 3 && p.len() > lmax && dp.len() > lmax);
    let lam = lambda(d);
    p[0] = 1.0;
    dp[0] = 0.0;
    let mut sb_prev = 0.0;
    for l in 0..lmax {
        let sb = jacobi_b(lam, l + 1).sqrt();
        let (below, dbelow) = if l == 0 {
            (0.0, 0.0)
        } else {
            (p[l - 1], dp[l - 1])
        };
        p[l + 1] = (u * p[l] - sb_prev * below) / sb;
        dp[l + 1] = (p[l] + u * dp[l] - sb_prev * dbelow) / sb;
        sb_prev = sb;
    }
}

/// The monic Jacobi matrix's off-diagonal squared, b_n (n >= 1).
fn jacobi_b(lam: f64, n: usize) -> f64 {
    let n = n as f64;
    n * (n + 2.0 * lam - 1.0) / (4.0 * (n + lam) * (n + lam - 1.0))
}

/// The orthonormal p_m(u), p_m'(u) and sum_{j<m} p_j(u)^2 (against w, see the module docs).
fn orthonormal(lam: f64, mu0: f64, m: usize, u: f64) -> (f64, f64, f64) {
    let (mut p_prev, mut p) = (0.0, 1.0 / mu0.sqrt());
    let (mut dp_prev, mut dp) = (0.0, 0.0);
    let mut sum = 0.0;
    let mut sb_prev = 0.0;
    for n in 0..m {
        sum += p * p;
        let sb = jacobi_b(lam, n + 1).sqrt();
        let p_next = (u * p - sb_prev * p_prev) / sb;
        let dp_next = (p + u * dp - sb_prev * dp_prev) / sb;
        (p_prev, p, dp_prev, dp, sb_prev) = (p, p_next, dp, dp_next, sb);
    }
    (p, dp, sum)
}

/// The number of zeros of the degree-m orthonormal polynomial below x: the negative pivots of
/// J - x I for the Jacobi matrix J (zero diagonal, off-diagonal sqrt(b_n); Sturm's count).
fn zeros_below(lam: f64, m: usize, x: f64) -> usize {
    let mut count = 0;
    let mut pivot = 1.0;
    for i in 0..m {
        pivot = if i == 0 {
            -x
        } else {
            -x - jacobi_b(lam, i) / pivot
        };
        if pivot == 0.0 {
            pivot = -f64::MIN_POSITIVE;
        }
        if pivot < 0.0 {
            count += 1;
        }
    }
    count
}

/// The k-th zero (ascending, 0-based) of the degree-m orthonormal polynomial: bisection on
/// Sturm's count until [lo, hi] holds it alone, then Newton's method kept inside the bracket.
fn zero(lam: f64, mu0: f64, m: usize, k: usize) -> f64 {
    // Counts at the ends: all zeros lie in (-1, 1).
    let ((mut lo, mut below_lo), (mut hi, mut below_hi)) = ((-1.0, 0), (1.0, m));
    loop {
        let mid = 0.5 * (lo + hi);
        if below_lo == k && below_hi == k + 1 || mid == lo {
            break;
        }
        let below = zeros_below(lam, m, mid);
        if below > k {
            (hi, below_hi) = (mid, below);
        } else {
            (lo, below_lo) = (mid, below);
        }
    }
    // Between the k-th zero and the one below, p_m has the sign (-1)^{m-k} (positive leading
    // coefficient); read off the count, not off p_m(lo), which is 0 when lo is a zero itself.
    let low_sign = if (m - k).is_multiple_of(2) { 1.0 } else { -1.0 };
    let mut x = 0.5 * (lo + hi);
    for _ in 0..200 {
        let (p, dp, _) = orthonormal(lam, mu0, m, x);
        if p == 0.0 {
            break;
        }
        if p.signum() == low_sign {
            lo = x;
        } else {
            hi = x;
        }
        let newton = x - p / dp;
        let next = if newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        let done = (next - x).abs() <= 1e-16 * x.abs().max(1e-3);
        x = next;
        if done {
            break;
        }
    }
    x
}

/// The m Gauss nodes (ascending, symmetric about 0) and weights for the weight
/// (1 - u^2)^{(d-3)/2} on [-1, 1] (d >= 3, m >= 1; the weights sum to [`weight_total`]). Each
/// zero is isolated by Sturm's count (so no zero is found twice, whatever d) and polished by
/// Newton's method; the weights are Christoffel's.
pub fn nodes(d: usize, m: usize) -> (Vec<f64>, Vec<f64>) {
    debug_assert!(d >= 3);
    let (lam, mu0) = (lambda(d), weight_total(d));
    let mut u = vec![0.0; m];
    let mut w = vec![0.0; m];
    // The zeros k = m/2 ..= m-1 are u >= 0; the rest mirror them.
    for k in m / 2..m {
        let x = if 2 * k + 1 == m {
            0.0
        } else {
            zero(lam, mu0, m, k)
        };
        let (_, _, sum) = orthonormal(lam, mu0, m, x);
        let mirror = m - 1 - k;
        u[k] = x;
        u[mirror] = -x;
        w[k] = 1.0 / sum;
        w[mirror] = 1.0 / sum;
    }
    (u, w)
}

/// Writes P_l(u) for l = 0 ..= `lmax` into `out` (length lmax + 1): the Gegenbauer polynomials
/// C_l^{(d-2)/2} normalised so that P_l(1) = 1 (d = 3: Legendre).
pub fn polynomials(d: usize, lmax: usize, u: f64, out: &mut [f64]) {
    debug_assert!(d >= 3 && out.len() > lmax);
    let lam = lambda(d);
    out[0] = 1.0;
    if lmax == 0 {
        return;
    }
    out[1] = u;
    for l in 1..lmax {
        let lf = l as f64;
        out[l + 1] = (2.0 * (lf + lam) * u * out[l] - lf * out[l - 1]) / (lf + 2.0 * lam);
    }
}

/// The Funk–Hecke coefficients c_l of e^{beta <x, y>} on S^{d-1}, l = 0 ..= `lmax`, times
/// e^{-|beta|} (finite for every finite beta; d >= 3).
pub fn funk_hecke_scaled(d: usize, beta: f64, lmax: usize) -> Vec<f64> {
    let x = beta.abs();
    let nu = lambda(d);
    let mut c = if x < 1.0 {
        series(nu, x, lmax)
    } else {
        // Gamma(nu + 1) (2/x)^nu e^{-x} I_{nu+l}(x) in logarithms: each factor alone leaves
        // the doubles for large d, their product does not (c_0 e^{-x} lies in [e^{-2x}, 1]).
        let ln_scale = ln_gamma_half(nu + 1.0) + nu * (2.0 / x).ln();
        ln_scaled_bessel_shifted(nu, x, lmax)
            .into_iter()
            .map(|v| (ln_scale + v).exp())
            .collect()
    };
    if beta < 0.0 {
        c.iter_mut().skip(1).step_by(2).for_each(|v| *v = -*v);
    }
    c
}

/// The Funk–Hecke coefficients c_l of e^{beta <x, y>} on S^{d-1}, l = 0 ..= `lmax` (module
/// docs; they overflow to infinity for |beta| past about 700).
pub fn funk_hecke(d: usize, beta: f64, lmax: usize) -> Vec<f64> {
    let e = beta.abs().exp();
    let mut c = funk_hecke_scaled(d, beta, lmax);
    c.iter_mut().for_each(|v| *v *= e);
    c
}

/// e^{-x} c_l for 0 <= x < 1 by the power series
/// c_l = Gamma(nu + 1) sum_k (x/2)^{2k + l} / (k! Gamma(nu + l + k + 1)).
fn series(nu: f64, x: f64, lmax: usize) -> Vec<f64> {
    let h = 0.5 * x;
    let mut lead = 1.0; // Gamma(nu + 1) (x/2)^l / Gamma(nu + l + 1)
    let mut out = Vec::with_capacity(lmax + 1);
    for l in 0..=lmax {
        if l > 0 {
            lead *= h / (nu + l as f64);
        }
        let (mut term, mut sum) = (lead, lead);
        for k in 0..40 {
            let kf = k as f64;
            term *= h * h / ((kf + 1.0) * (nu + l as f64 + kf + 1.0));
            sum += term;
            if term <= 1e-18 * sum {
                break;
            }
        }
        out.push(sum * (-x).exp());
    }
    out
}

/// ln(e^{-x} I_{nu + l}(x)) for l = 0 ..= lmax, x >= 1, nu = (d - 2)/2 a non-negative integer
/// or half-integer. The ratios R_j = I_{nu0 + j} / I_{nu0 + j - 1} over the orders nu0 + j
/// (nu0 = 0 or 1/2) follow from I_{mu-1} = I_{mu+1} + (2 mu / x) I_mu as
/// R_j = 1 / (2 (nu0 + j) / x + R_{j+1}), started at R = 0 far above (Miller's algorithm on the
/// ratios: stable, and no value leaves the doubles); the lowest order is e^{-x} I_0(x)
/// (`model::bessel`) or e^{-x} I_{1/2}(x) = (1 - e^{-2x}) / sqrt(2 pi x).
fn ln_scaled_bessel_shifted(nu: f64, x: f64, lmax: usize) -> Vec<f64> {
    let half = nu.fract() != 0.0;
    let nu0 = if half { 0.5 } else { 0.0 };
    let offset = (nu - nu0).round() as usize;
    let last = offset + lmax;
    let start = last.max(x.ceil().min(1e7) as usize) + 30 + (10.0 * x.min(1e7).sqrt()) as usize;
    let mut ln_ratio = vec![0.0; last + 1];
    let mut ratio = 0.0;
    for j in (1..=start).rev() {
        ratio = 1.0 / (2.0 * (nu0 + j as f64) / x + ratio);
        if j <= last {
            ln_ratio[j] = ratio.ln();
        }
    }
    let lowest = if half {
        -(-2.0 * x).exp_m1() / (2.0 * PI * x).sqrt()
    } else {
        let mut i0 = [0.0];
        crate::model::bessel::scaled_bessel_i(x, &mut i0);
        i0[0]
    };
    let mut acc = lowest.ln();
    let mut out = Vec::with_capacity(lmax + 1);
    for (j, r) in ln_ratio.iter().enumerate() {
        if j > 0 {
            acc += r;
        }
        if j >= offset {
            out.push(acc);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-300)
    }

    #[test]
    fn legendre_nodes_match_known_values() {
        // Three-point Gauss–Legendre: +-sqrt(3/5), 0; weights 5/9, 8/9, 5/9.
        let (u, w) = nodes(3, 3);
        let r = (0.6f64).sqrt();
        assert!(close(u[2], r, 1e-15) && close(u[0], -r, 1e-15) && u[1] == 0.0);
        assert!(close(w[0], 5.0 / 9.0, 1e-14) && close(w[1], 8.0 / 9.0, 1e-14));
    }

    #[test]
    fn quadrature_is_exact_for_moments() {
        // int u^{2k} (1 - u^2)^{lambda - 1/2} du = B(k + 1/2, lambda + 1/2), by a product.
        // d = 30 and 200: Newton's method from the asymptotic guesses found zeros twice there.
        for d in (3..=8).chain([30, 200]) {
            for m in [1usize, 2, 5, 16, 41, 200, 1500] {
                let (u, w) = nodes(d, m);
                assert!(u.windows(2).all(|p| p[0] < p[1]), "d {d} m {m}");
                assert!(u.iter().all(|v| v.abs() < 1.0));
                let lam = lambda(d);
                for k in 0..m.min(12) {
                    // B(k + 1/2, lam + 1/2) = B(1/2, lam + 1/2) prod_{j<k} (j + 1/2)/(j + lam + 1)
                    let mut exact = weight_total(d);
                    for j in 0..k {
                        exact *= (j as f64 + 0.5) / (j as f64 + lam + 1.0);
                    }
                    let q: f64 = u
                        .iter()
                        .zip(&w)
                        .map(|(x, w)| w * x.powi(2 * k as i32))
                        .sum();
                    assert!(close(q, exact, 1e-12), "d {d} m {m} k {k}: {q} vs {exact}");
                }
            }
        }
    }

    #[test]
    fn polynomials_are_orthogonal_with_the_harmonic_dimension() {
        for d in [3usize, 4, 5, 7] {
            let lmax = 20;
            let (u, w) = nodes(d, 32);
            let mu0 = weight_total(d);
            let mut p = vec![0.0; lmax + 1];
            let mut gram = vec![0.0; (lmax + 1) * (lmax + 1)];
            for (x, wk) in u.iter().zip(&w) {
                polynomials(d, lmax, *x, &mut p);
                for i in 0..=lmax {
                    for j in 0..=lmax {
                        gram[i * (lmax + 1) + j] += wk * p[i] * p[j] / mu0;
                    }
                }
            }
            for i in 0..=lmax {
                for j in 0..=lmax {
                    let want = if i == j { 1.0 / dimension(d, i) } else { 0.0 };
                    assert!(
                        (gram[i * (lmax + 1) + j] - want).abs() < 1e-14,
                        "d {d} {i} {j}"
                    );
                }
            }
            polynomials(d, lmax, 1.0, &mut p);
            assert!(p.iter().all(|v| (v - 1.0).abs() < 1e-13));
        }
        assert_eq!(dimension(3, 4), 9.0);
        assert_eq!(dimension(4, 3), 16.0); // (l + 1)^2 on S^3
    }

    #[test]
    fn funk_hecke_matches_closed_forms_in_three_dimensions() {
        for beta in [1e-8, 0.3, 0.99, 1.0, 2.5, 10.0, 40.0] {
            let c = funk_hecke(3, beta, 2);
            let (s, ch) = (beta.sinh(), beta.cosh());
            let c0 = s / beta;
            let c1 = (beta * ch - s) / (beta * beta);
            // c_2 = (1/2) int e^{bt} (3t^2 - 1)/2 dt
            let c2 = ((beta * beta + 3.0) * s - 3.0 * beta * ch) / beta.powi(3);
            assert!(close(c[0], c0, 1e-14), "beta {beta}");
            if beta > 1e-3 {
                assert!(close(c[1], c1, 1e-12), "beta {beta}: {} vs {c1}", c[1]);
                assert!(close(c[2], c2, 1e-9), "beta {beta}: {} vs {c2}", c[2]);
            }
        }
        assert_eq!(funk_hecke(3, 0.0, 3), vec![1.0, 0.0, 0.0, 0.0]);
        let neg = funk_hecke(4, -2.0, 5);
        let pos = funk_hecke(4, 2.0, 5);
        for l in 0..=5 {
            assert!(close(
                neg[l],
                pos[l] * if l % 2 == 1 { -1.0 } else { 1.0 },
                1e-15
            ));
        }
    }

    #[test]
    fn funk_hecke_matches_the_quadrature_of_its_integral() {
        for d in [3usize, 4, 5, 6, 9] {
            let (u, w) = nodes(d, 80);
            let mu0 = weight_total(d);
            for beta in [0.2, 0.999, 1.0, 3.0, 12.0, 30.0] {
                let lmax = 25;
                let c = funk_hecke_scaled(d, beta, lmax);
                let mut q = vec![0.0; lmax + 1];
                let mut p = vec![0.0; lmax + 1];
                for (x, wk) in u.iter().zip(&w) {
                    polynomials(d, lmax, *x, &mut p);
                    let e = (beta * (x - 1.0)).exp() * wk / mu0;
                    q.iter_mut().zip(&p).for_each(|(q, p)| *q += e * p);
                }
                for l in 0..=lmax {
                    // Relative, or absolute at the quadrature's round-off against c_0.
                    let diff = (c[l] - q[l]).abs();
                    assert!(
                        diff < 1e-11 * q[l].abs() || diff < 1e-14 * q[0],
                        "d {d} beta {beta} l {l}: {} vs {}",
                        c[l],
                        q[l]
                    );
                }
            }
        }
    }
}
