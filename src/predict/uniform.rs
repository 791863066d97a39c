//! The clusters that grow out of the uniform state: its fastest unstable mode
//! (docs/MATH.md §11).
//!
//! For heads with A = a I and V = v I (b = beta a), the uniform density on S^{d-1} perturbed by
//! a spherical harmonic of degree l (on the circle: the Fourier mode e^{i l theta}) grows at
//!
//! ```text
//! usa: lambda_l = sum_heads v l (l + d - 2) m_l(b) / b,    m_l(b) = Gamma(nu + 1) (2 / b)^nu I_{l + nu}(b)
//! sa:  lambda_l = sum_heads v l (l + d - 2) I_{l + nu}(b) / (b I_nu(b)),          nu = d / 2 - 1
//! ```
//!
//! (m_l is the sphere's mean of e^{b t} times the degree-l Legendre polynomial of d dimensions,
//! by Funk–Hecke; on the circle lambda_k = v k^2 I_k(b) / b, over I_0(b) for sa). The number of
//! metastable clusters is the fastest mode l* = argmax_l lambda_l, when lambda_{l*} > 0.
//!
//! "Near uniform" is read on the initial tokens: the moments of degree 1 ..= max(l*, 2) on the
//! circle (|(1/n) sum_k e^{i l theta_k}|) and of degrees 1 and 2 in d >= 3 (|(1/n) sum_k x_k| and
//! ||(1/n) sum_k x_k x_k^T - I / d||_F / sqrt(1 - 1/d)), each 1 for tokens at one point and 0
//! for the uniform density, must all be at most [`NEAR_UNIFORM`].

use serde::Serialize;

use crate::model::{Attention, Kernel};

/// The largest low moment (module docs) of a start that counts as near uniform.
pub const NEAR_UNIFORM: f64 = 0.1;

/// A mode's growth rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModeRate {
    /// The degree l (the Fourier mode on the circle).
    pub mode: usize,
    /// lambda_l.
    pub rate: f64,
}

/// What the uniform state predicts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UniformPrediction {
    /// l* when the layer has the form and the start is near uniform; else `None`.
    pub from_uniform: Option<usize>,
    /// The fastest mode of the uniform state (whatever the start), when the layer has the form
    /// and some mode grows.
    pub fastest_mode: Option<usize>,
    /// The growth rates of the modes 1 ..= [`max_mode`] (empty when the layer lacks the form).
    pub rates: Vec<ModeRate>,
    /// The largest low moment of the initial tokens (module docs).
    pub start_moment: f64,
    /// [`NEAR_UNIFORM`].
    pub tolerance: f64,
    /// Why `from_uniform` is what it is, in words.
    pub reason: String,
}

/// Each head's (a, v) when A = a I and V = v I (to 1e-12 relative), else why not.
pub fn scalar_heads(attention: &Attention) -> Result<Vec<(f64, f64)>, String> {
    if !attention.factored.is_empty() {
        return Err("a head is given by its factors, not A = a I and V = v I".into());
    }
    if !attention.is_plain() {
        return Err(
            "the layer is masked, not post-LN or has positions (the uniform state's modes need none of these)".into(),
        );
    }
    if attention.kernel == Kernel::Lsa {
        return Err("linear attention (lsa) is read by the OA analysis".into());
    }
    let scalar = |m: &nalgebra::DMatrix<f64>| -> Option<f64> {
        let c = m[(0, 0)];
        let tol = 1e-12 * c.abs().max(1.0);
        let ok = (0..m.nrows()).all(|i| {
            (0..m.ncols()).all(|j| (m[(i, j)] - if i == j { c } else { 0.0 }).abs() <= tol)
        });
        ok.then_some(c)
    };
    attention
        .heads
        .iter()
        .map(|h| match (scalar(&h.a), scalar(&h.v)) {
            (Some(a), Some(v)) => Ok((a, v)),
            _ => Err("A and V are not both multiples of the identity".to_string()),
        })
        .collect()
}

/// The highest mode whose rate is computed: beyond about sqrt(b) the rates fall like
/// (b / 2)^l / l!, so 4 sqrt(max |b|) + 12 modes hold the fastest.
pub fn max_mode(beta: f64, heads: &[(f64, f64)]) -> usize {
    let b = heads
        .iter()
        .map(|&(a, _)| (beta * a).abs())
        .fold(0.0, f64::max);
    (4.0 * b.min(1e6).sqrt()).ceil() as usize + 12
}

/// lambda_l for l = 1 ..= `top` (module docs).
pub fn mode_rates(
    kernel: Kernel,
    beta: f64,
    d: usize,
    heads: &[(f64, f64)],
    top: usize,
) -> Vec<ModeRate> {
    let nu = d as f64 / 2.0 - 1.0;
    let mut rates = vec![0.0; top];
    for &(a, v) in heads {
        let b = beta * a;
        for (l, rate) in (1..=top).zip(rates.iter_mut()) {
            let laplace = (l * (l + d - 2)) as f64;
            *rate += v * laplace * head_factor(kernel, b, nu, l);
        }
    }
    (1..=top)
        .zip(rates)
        .map(|(mode, rate)| ModeRate { mode, rate })
        .collect()
}

/// m_l(b) / b (usa) or I_{l+nu}(b) / (b I_nu(b)) (sa); their limits at b = 0 (only l = 1 is
/// not zero there: 1 / d).
fn head_factor(kernel: Kernel, b: f64, nu: f64, l: usize) -> f64 {
    if b.abs() < 1e-12 {
        return if l == 1 {
            1.0 / (2.0 * (nu + 1.0))
        } else {
            0.0
        };
    }
    // I_mu(-x) / I_nu(-x) = (-1)^(mu - nu) I_mu(x) / I_nu(x) for integer mu - nu.
    let x = b.abs();
    let sign = if b < 0.0 && l % 2 == 1 { -1.0 } else { 1.0 };
    let ratio: f64 = (0..l).map(|j| bessel_ratio(nu + j as f64, x)).product();
    let factor = match kernel {
        Kernel::Sa => ratio,
        _ => (log_mean_exponential(nu, x)).exp() * ratio,
    };
    sign * factor / b
}

/// I_{mu+1}(x) / I_mu(x) (x > 0, mu >= 0) by its continued fraction
/// 1 / (2 (mu + 1) / x + 1 / (2 (mu + 2) / x + ...)), evaluated from the bottom.
pub fn bessel_ratio(mu: f64, x: f64) -> f64 {
    let depth = (2.0 * x + 4.0 * x.sqrt() + mu + 60.0).min(1e7) as usize;
    let mut r = 0.0;
    for j in (1..=depth).rev() {
        r = 1.0 / (2.0 * (mu + j as f64) / x + r);
    }
    r
}

/// ln of the sphere's mean of e^{x t}, ln(Gamma(nu + 1) (2 / x)^nu I_nu(x)), for nu = d/2 - 1.
fn log_mean_exponential(nu: f64, x: f64) -> f64 {
    // Start from I_0 (integer nu) or I_{1/2}(x) = sqrt(2 / (pi x)) sinh x, then the ratios.
    let half = nu.fract() != 0.0;
    let (start, mut log_i) = if half {
        let log_sinh = x + (0.5 * (1.0 - (-2.0 * x).exp())).ln();
        (
            0.5,
            0.5 * (2.0 / (std::f64::consts::PI * x)).ln() + log_sinh,
        )
    } else {
        let mut i0 = [0.0];
        crate::model::bessel::scaled_bessel_i(x, &mut i0);
        (0.0, i0[0].ln() + x)
    };
    let mut mu = start;
    while mu < nu - 0.25 {
        log_i += bessel_ratio(mu, x).ln();
        mu += 1.0;
    }
    log_gamma(nu + 1.0) + nu * (2.0 / x).ln() + log_i
}

/// ln Gamma(z) for z = 1, 3/2, 2, 5/2, ... (z - 1 a multiple of 1/2).
fn log_gamma(z: f64) -> f64 {
    // Gamma(1) = 1, Gamma(1/2) = sqrt(pi); Gamma(z + 1) = z Gamma(z).
    let (mut w, mut value) = if z.fract() == 0.0 {
        (1.0, 0.0)
    } else {
        (0.5, 0.5 * std::f64::consts::PI.ln())
    };
    while w < z - 0.25 {
        value += w.ln();
        w += 1.0;
    }
    value
}

/// The fastest mode with a positive rate.
pub fn fastest(rates: &[ModeRate]) -> Option<usize> {
    rates
        .iter()
        .filter(|r| r.rate > 0.0)
        .fold(None, |best: Option<&ModeRate>, r| match best {
            Some(b) if b.rate >= r.rate => Some(b),
            _ => Some(r),
        })
        .map(|r| r.mode)
}

/// The largest low moment of tokens (n x d, unit rows; module docs); `top` is the highest
/// Fourier mode checked on the circle.
pub fn low_moment(tokens: &[f64], d: usize, top: usize) -> f64 {
    let n = (tokens.len() / d.max(1)).max(1) as f64;
    if d == 2 {
        return (1..=top.max(2))
            .map(|l| {
                let (mut c, mut s) = (0.0, 0.0);
                for x in tokens.chunks_exact(2) {
                    let theta = x[1].atan2(x[0]) * l as f64;
                    c += theta.cos();
                    s += theta.sin();
                }
                (c * c + s * s).sqrt() / n
            })
            .fold(0.0, f64::max);
    }
    let mut mean = vec![0.0; d];
    let mut second = vec![0.0; d * d];
    for x in tokens.chunks_exact(d) {
        for i in 0..d {
            mean[i] += x[i] / n;
            for j in 0..d {
                second[i * d + j] += x[i] * x[j] / n;
            }
        }
    }
    let first = mean.iter().map(|v| v * v).sum::<f64>().sqrt();
    let traceless: f64 = (0..d * d)
        .map(|k| {
            let identity = if k / d == k % d { 1.0 / d as f64 } else { 0.0 };
            (second[k] - identity).powi(2)
        })
        .sum::<f64>()
        .sqrt();
    first.max(traceless / (1.0 - 1.0 / d as f64).sqrt())
}

/// The prediction from the uniform state for a layer and initial tokens (module docs).
pub fn predict_from_uniform(attention: &Attention, tokens: &[f64]) -> UniformPrediction {
    let d = attention.d();
    let heads = match scalar_heads(attention) {
        Ok(h) => h,
        Err(why) => {
            return UniformPrediction {
                from_uniform: None,
                fastest_mode: None,
                rates: Vec::new(),
                start_moment: low_moment(tokens, d, 2),
                tolerance: NEAR_UNIFORM,
                reason: why,
            }
        }
    };
    let rates = mode_rates(
        attention.kernel,
        attention.beta,
        d,
        &heads,
        max_mode(attention.beta, &heads),
    );
    let fastest_mode = fastest(&rates);
    let start_moment = low_moment(tokens, d, fastest_mode.unwrap_or(2));
    let near = start_moment <= NEAR_UNIFORM;
    let (from_uniform, reason) = match fastest_mode {
        None => (None, "no mode of the uniform state grows: it is stable".to_string()),
        Some(l) if near => (
            Some(l),
            format!(
                "the uniform state's fastest mode is {l} (rate {:.6}); the start is near uniform (largest low moment {start_moment:.3e} <= {NEAR_UNIFORM})",
                rates[l - 1].rate
            ),
        ),
        Some(l) => (
            None,
            format!(
                "the start is not near uniform (largest low moment {start_moment:.3e} > {NEAR_UNIFORM}); the uniform state's fastest mode would be {l}"
            ),
        ),
    };
    UniformPrediction {
        from_uniform,
        fastest_mode,
        rates,
        start_moment,
        tolerance: NEAR_UNIFORM,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// I_mu(x) by its power series sum_m (x/2)^{2m + mu} / (m! Gamma(m + mu + 1)).
    fn series_i(mu: f64, x: f64) -> f64 {
        let mut term = (x / 2.0).powf(mu) / log_gamma_any(mu + 1.0).exp();
        let mut sum = 0.0;
        for m in 0..400 {
            sum += term;
            term *= (x / 2.0).powi(2) / ((m + 1) as f64 * (m as f64 + 1.0 + mu));
        }
        sum
    }

    fn log_gamma_any(z: f64) -> f64 {
        // z = integer or half-integer here.
        log_gamma(z)
    }

    #[test]
    fn ratios_and_means_match_the_power_series() {
        for (mu, x) in [(0.0, 0.3), (0.5, 2.0), (1.0, 9.0), (2.5, 16.0), (7.0, 4.0)] {
            let r = bessel_ratio(mu, x);
            let want = series_i(mu + 1.0, x) / series_i(mu, x);
            assert!((r - want).abs() < 1e-12 * want, "{mu} {x}: {r} {want}");
        }
        // The mean of e^{x t} over S^2 is sinh(x) / x; over the circle I_0(x).
        for x in [0.5, 3.0, 20.0] {
            assert!(
                (log_mean_exponential(0.5, x).exp() - x.sinh() / x).abs() < 1e-12 * x.sinh() / x
            );
            assert!(
                (log_mean_exponential(0.0, x).exp() - series_i(0.0, x)).abs()
                    < 1e-11 * series_i(0.0, x)
            );
        }
    }

    #[test]
    fn circle_rates_are_k_squared_bessel_over_beta() {
        for beta in [2.0, 5.0, 10.0] {
            let rates = mode_rates(Kernel::Usa, beta, 2, &[(1.0, 1.0)], 12);
            let sa = mode_rates(Kernel::Sa, beta, 2, &[(1.0, 1.0)], 12);
            for (r, s) in rates.iter().zip(&sa) {
                let k = r.mode as f64;
                let want = k * k * series_i(k, beta) / beta;
                assert!((r.rate - want).abs() < 1e-10 * want, "{beta} {k}");
                assert!((s.rate - want / series_i(0.0, beta)).abs() < 1e-10 * s.rate);
            }
        }
    }

    #[test]
    fn evenly_spaced_tokens_are_near_uniform_and_a_cluster_is_not() {
        let n = 100;
        let even: Vec<f64> = (0..n)
            .flat_map(|k| {
                let t = std::f64::consts::TAU * k as f64 / n as f64;
                [t.cos(), t.sin()]
            })
            .collect();
        assert!(low_moment(&even, 2, 6) < 1e-12);
        let one: Vec<f64> = (0..n).flat_map(|_| [0.0, 1.0, 0.0]).collect();
        assert!((low_moment(&one, 3, 2) - 1.0).abs() < 1e-12);
    }
}
