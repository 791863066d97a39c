//! The axisymmetric mean field on S^{d-1}, d >= 3 (docs/MATH.md §17.2): a density
//! f(u) = sum_l a_l P_l(u) = sum_l b_l p_l(u) of u = <x, e> (relative to the normalised
//! surface measure sigma, so the uniform state is f = 1 and rho = f / |S^{d-1}|), heads
//! A = a I, V = v I. The state is the b_l = a_l / sqrt(N(d, l)) of the orthonormal
//! p_l = sqrt(N(d, l)) P_l: of order one for every d (N(d, l) overflows and P_l(u) underflows
//! in high dimension), and the stepper's error norm sum |b_l| weighs every mode alike.
//!
//! ```text
//! d_t f = (1 - u^2)^{-(d-3)/2} d_u[ (1 - u^2)^{(d-1)/2} ( T d_u f - f Phi'(u) ) ]
//! b_l'  = -T l (l + d - 2) b_l + E_sigma[ p_l'(u) (1 - u^2) f(u) Phi'(u) ]
//! Phi   = sum_heads (v / b) K_b * f        (usa, b = beta a; b = 0: v u a_1 / d)
//!       = sum_heads (v / b) log K_b * f    (sa)
//!       = sum_heads (v b / 2) (<x, y>^2 * f)  (lsa: only l = 2, G_2 = v b / (d (d + 2)))
//! K_b * p_l = c_l(b) p_l                   (Funk–Hecke, `gegenbauer`; Phi's multipliers act
//!                                          on b_l as on a_l)
//! ```
//!
//! The velocity of a token is v P_x^perp grad Phi, whose u-component is (1 - u^2) Phi'(u). The
//! expectation is the Gauss–Gegenbauer rule on m nodes, exact for polynomials of degree 2m - 1;
//! the modes l <= L = (2m - 1) / 3 are kept, so that the usa and lsa transport
//! (degree <= 3L) is integrated exactly (the two-thirds rule of the circle). b_0 = 1 for ever
//! (p_0' = 0): the mass is exact.

use num_complex::Complex64;

use super::gegenbauer;
use super::peaks::{Peak, PEAK_MASS};
use super::start::{Shape, StartDensity};
use super::stepper::SpectralSystem;
use super::{Kernel, MeanFieldHead};

/// The highest degree kept on m nodes: L = (2m - 1) / 3.
pub fn top_degree(m: usize) -> usize {
    (2 * m).saturating_sub(1) / 3
}

/// Each head's (a, v) of A = a I, V = v I (stored as a I_2, v I_2).
fn scalars(heads: &[MeanFieldHead]) -> impl Iterator<Item = (f64, f64)> + '_ {
    heads.iter().map(|h| (h.a[0][0], h.v[0][0]))
}

/// A softmax head: v / b and its c_l(b) (scaled; only their ratios matter).
struct SoftHead {
    gain: f64,
    c: Vec<f64>,
}

/// The axisymmetric system on m Gauss nodes (a [`SpectralSystem`] on the b_l, stored as
/// complex numbers with zero imaginary part).
pub struct Axisymmetric {
    d: usize,
    m: usize,
    top: usize,
    u: Vec<f64>,
    /// The weights of sigma's law of u (sum 1) times (1 - u^2).
    flux_weight: Vec<f64>,
    /// p_l(u_k), row k.
    p: Vec<f64>,
    /// p_l'(u_k), row k.
    dp: Vec<f64>,
    linear: Vec<f64>,
    /// The potential's multipliers G_l of the heads whose Phi is linear in f.
    potential: Vec<f64>,
    soft: Vec<SoftHead>,
    scratch: Vec<f64>,
    q: Vec<f64>,
}

/// p_l(u) and p_l'(u) (orthonormal) for l = 0 ..= top on the nodes, row-major (node, degree).
pub fn tables(d: usize, u: &[f64], top: usize) -> (Vec<f64>, Vec<f64>) {
    let w = top + 1;
    let (mut p, mut dp) = (vec![0.0; u.len() * w], vec![0.0; u.len() * w]);
    for (k, &x) in u.iter().enumerate() {
        let rows = (&mut p[k * w..(k + 1) * w], &mut dp[k * w..(k + 1) * w]);
        gegenbauer::orthonormal_polynomials(d, top, x, rows.0, rows.1);
    }
    (p, dp)
}

/// The multiplier of a_l (and of b_l) in Phi for one head whose Phi is linear in f (usa, lsa; b = 0 of any
/// kernel), l = 0 ..= top.
fn linear_potential(kernel: Kernel, d: usize, b: f64, v: f64, top: usize) -> Vec<f64> {
    let df = d as f64;
    let mut g = vec![0.0; top + 1];
    if b == 0.0 || (kernel != Kernel::Lsa && b.abs() < 1e-300) {
        // h = 1 (usa, sa: Z = 1): the velocity is v E[y], Phi = v <x, E y> = v u a_1 / d.
        if kernel != Kernel::Lsa && top >= 1 {
            g[1] = v / df;
        }
        return g;
    }
    match kernel {
        Kernel::Lsa => {
            if top >= 2 {
                g[2] = v * b / (df * (df + 2.0));
            }
        }
        _ => {
            let c = gegenbauer::funk_hecke(d, b, top);
            for (g, c) in g.iter_mut().zip(c) {
                *g = v * c / b;
            }
        }
    }
    g
}

impl Axisymmetric {
    /// The system on m nodes of S^{d-1} (d >= 3).
    pub fn new(
        d: usize,
        m: usize,
        kernel: Kernel,
        beta: f64,
        heads: &[MeanFieldHead],
        t: f64,
    ) -> Self {
        let top = top_degree(m);
        let (u, w) = gegenbauer::nodes(d, m);
        let mu0 = gegenbauer::weight_total(d);
        let flux_weight = u
            .iter()
            .zip(&w)
            .map(|(x, w)| w / mu0 * (1.0 - x * x))
            .collect();
        let (p, dp) = tables(d, &u, top);
        let linear = (0..=top).map(|l| -t * (l * (l + d - 2)) as f64).collect();
        let mut potential = vec![0.0; top + 1];
        let mut soft = Vec::new();
        for (a, v) in scalars(heads) {
            let b = beta * a;
            if kernel == Kernel::Sa && b != 0.0 {
                soft.push(SoftHead {
                    gain: v / b,
                    c: gegenbauer::funk_hecke_scaled(d, b, top),
                });
            } else {
                let g = linear_potential(kernel, d, b, v, top);
                potential.iter_mut().zip(g).for_each(|(p, g)| *p += g);
            }
        }
        Axisymmetric {
            d,
            m,
            top,
            u,
            flux_weight,
            p,
            dp,
            linear,
            potential,
            soft,
            scratch: vec![0.0; top + 1],
            q: vec![0.0; m],
        }
    }

    /// The number of coefficients, L + 1.
    pub fn len(&self) -> usize {
        self.top + 1
    }

    /// Whether there are no coefficients (never).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The nodes u_k (ascending).
    pub fn nodes(&self) -> &[f64] {
        &self.u
    }

    /// The dimension d.
    pub fn dimension(&self) -> usize {
        self.d
    }

    /// sum_l x_l row_l.
    fn dot(row: &[f64], x: &[f64]) -> f64 {
        row.iter().zip(x).map(|(r, x)| r * x).sum()
    }
}

impl SpectralSystem for Axisymmetric {
    fn linear(&self) -> &[f64] {
        &self.linear
    }

    fn nonlinear(&mut self, c: &[Complex64], out: &mut [Complex64]) {
        let w = self.top + 1;
        let a: Vec<f64> = c.iter().map(|z| z.re).collect();
        for (s, (g, a)) in self.scratch.iter_mut().zip(self.potential.iter().zip(&a)) {
            *s = g * a;
        }
        let soft: Vec<Vec<f64>> = self
            .soft
            .iter()
            .map(|h| h.c.iter().zip(&a).map(|(c, a)| c * a).collect())
            .collect();
        for k in 0..self.m {
            let (p, dp) = (&self.p[k * w..(k + 1) * w], &self.dp[k * w..(k + 1) * w]);
            let f = Self::dot(p, &a);
            let mut slope = Self::dot(dp, &self.scratch);
            for (h, ca) in self.soft.iter().zip(&soft) {
                slope += h.gain * Self::dot(dp, ca) / Self::dot(p, ca);
            }
            self.q[k] = self.flux_weight[k] * f * slope;
        }
        // sum_k p_l'(u_k) q_k, row by row (the tables are stored by node).
        let sums = &mut self.scratch;
        sums.fill(0.0);
        for (row, q) in self.dp.chunks_exact(w).zip(&self.q) {
            sums.iter_mut().zip(row).for_each(|(s, d)| *s += d * q);
        }
        for (o, s) in out.iter_mut().zip(sums.iter()) {
            *o = Complex64::new(*s, 0.0);
        }
    }
}

/// The start's coefficients b_0 ..= b_top (f relative to sigma): uniform b_0 = 1; von Mises
/// f = e^{kappa u} / c_0(kappa), `b_l = E[p_l]` = sqrt(N(d, l)) c_l(kappa) / c_0(kappa); each
/// added mode (l, a) adds a P_l = a p_l / sqrt(N(d, l)) (a = 1 doubles the uniform density at
/// u = 1). Products of huge and tiny factors are formed in logarithms.
pub fn start_modes(start: &StartDensity, d: usize, top: usize) -> Vec<Complex64> {
    let mut b = vec![0.0; top + 1];
    match start.shape {
        Shape::VonMises { kappa, .. } if kappa > 0.0 => {
            let c = gegenbauer::funk_hecke_scaled(d, kappa, top);
            for (l, b) in b.iter_mut().enumerate() {
                if c[l] != 0.0 {
                    let ln = 0.5 * gegenbauer::ln_dimension(d, l) + (c[l] / c[0]).ln();
                    *b = ln.exp();
                }
            }
        }
        _ => b[0] = 1.0,
    }
    for &(l, amp, _) in &start.modes {
        if let Some(x) = b.get_mut(l as usize) {
            *x += amp * (-0.5 * gegenbauer::ln_dimension(d, l as usize)).exp();
        }
    }
    b.into_iter().map(|x| Complex64::new(x, 0.0)).collect()
}

/// The start's smallest value of f (relative to sigma) on a fine grid of u, endpoints included
/// (a density must not be negative): the von Mises part e^{kappa (u - 1)} / (e^{-kappa} c_0)
/// exactly (it is positive), the added modes sum a P_l(u).
pub fn start_minimum(start: &StartDensity, d: usize) -> f64 {
    let top = start
        .modes
        .iter()
        .map(|m| m.0 as usize)
        .max()
        .unwrap_or(0)
        .max(1);
    let mut a = vec![0.0; top + 1];
    for &(l, amp, _) in &start.modes {
        a[l as usize] += amp;
    }
    // The von Mises part as (kappa, e^{-kappa} c_0(kappa)); the uniform start is kappa = 0.
    let (kappa, c0) = match start.shape {
        Shape::VonMises { kappa, .. } if kappa > 0.0 => {
            (kappa, gegenbauer::funk_hecke_scaled(d, kappa, 0)[0])
        }
        _ => (0.0, 1.0),
    };
    let base = |u: f64| (kappa * (u - 1.0)).exp() / c0;
    let points = (16 * top).clamp(4096, 1 << 18);
    let mut p = vec![0.0; top + 1];
    (0..=points)
        .map(|j| {
            let u = -1.0 + 2.0 * j as f64 / points as f64;
            gegenbauer::polynomials(d, top, u, &mut p);
            base(u) + Axisymmetric::dot(&p, &a)
        })
        .fold(f64::INFINITY, f64::min)
}

/// The density rho = f / |S^{d-1}| at the nodes `u` from coefficients `c` (any length).
pub fn density_on(c: &[Complex64], d: usize, u: &[f64]) -> Vec<f64> {
    let top = c.len().saturating_sub(1);
    let area = gegenbauer::sphere_area(d);
    let b: Vec<f64> = c.iter().map(|z| z.re).collect();
    let (mut p, mut dp) = (vec![0.0; top + 1], vec![0.0; top + 1]);
    u.iter()
        .map(|&x| {
            gegenbauer::orthonormal_polynomials(d, top, x, &mut p, &mut dp);
            Axisymmetric::dot(&p, &b) / area
        })
        .collect()
}

/// The coefficients on a larger (or equal) grid: zero padding, exact.
pub fn resample(c: &[Complex64], m: usize) -> Vec<Complex64> {
    let mut out = c.to_vec();
    out.resize(top_degree(m) + 1, Complex64::new(0.0, 0.0));
    out
}

/// The weight of the top third of the modes (l > 2L/3) relative to all, sum of |b_l| (a bound
/// of the L2(sigma) norm).
pub fn tail(c: &[Complex64]) -> f64 {
    let top = c.len().saturating_sub(1);
    let (mut high, mut all) = (0.0, 0.0);
    for (l, z) in c.iter().enumerate() {
        all += z.re.abs();
        if 3 * l > 2 * top {
            high += z.re.abs();
        }
    }
    if all > 0.0 {
        high / all
    } else {
        0.0
    }
}

/// `<u> = b_1 / sqrt(d)` and `<u^2> = 1/d + (d - 1)/d b_2 / sqrt(N(d, 2))` (u = p_1 / sqrt(d),
/// u^2 = 1/d + (d - 1)/d P_2): exact moments of f.
pub fn moments(c: &[Complex64], d: usize) -> (f64, f64) {
    let df = d as f64;
    let b = |l: usize| c.get(l).map_or(0.0, |z| z.re);
    let mean = b(1) / df.sqrt();
    let square = 1.0 / df + (df - 1.0) / df * b(2) / gegenbauer::dimension(d, 2).sqrt();
    (mean, square)
}

/// The peaks of the density at the nodes: cut at the local minima along u, each basin's mass
/// (quadrature) given to its maximum; `theta` is the angle arccos(u) from the axis.
pub fn peaks(c: &[Complex64], d: usize, m: usize) -> Vec<Peak> {
    let (u, w) = gegenbauer::nodes(d, m);
    let mu0 = gegenbauer::weight_total(d);
    let area = gegenbauer::sphere_area(d);
    let values = density_on(c, d, &u);
    let mass: Vec<f64> = values
        .iter()
        .zip(&w)
        .map(|(v, w)| v * area * w / mu0)
        .collect();
    let mut found = Vec::new();
    let (mut basin, mut top_at) = (0.0, 0);
    for k in 0..m {
        let is_min = k > 0 && k + 1 < m && values[k] <= values[k - 1] && values[k] < values[k + 1];
        if is_min {
            found.push((top_at, basin));
            (basin, top_at) = (0.0, k);
        }
        basin += mass[k];
        if values[k] > values[top_at] {
            top_at = k;
        }
    }
    found.push((top_at, basin));
    let mut out: Vec<Peak> = found
        .into_iter()
        .filter(|&(_, m)| m >= PEAK_MASS)
        .map(|(k, mass)| Peak {
            theta: u[k].clamp(-1.0, 1.0).acos(),
            mass,
        })
        .collect();
    out.sort_by(|a, b| b.mass.total_cmp(&a.mass));
    out.truncate(64);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orthonormal_polynomials_are_scaled_gegenbauer_with_their_derivatives() {
        for d in [3, 5, 40] {
            let (top, u, h) = (12, 0.37, 1e-6);
            let (mut p, mut dp, mut lo, mut hi, mut gp) = (
                vec![0.0; 13],
                vec![0.0; 13],
                vec![0.0; 13],
                vec![0.0; 13],
                vec![0.0; 13],
            );
            let mut scratch = vec![0.0; 13];
            gegenbauer::orthonormal_polynomials(d, top, u, &mut p, &mut dp);
            gegenbauer::orthonormal_polynomials(d, top, u - h, &mut lo, &mut scratch);
            gegenbauer::orthonormal_polynomials(d, top, u + h, &mut hi, &mut scratch);
            gegenbauer::polynomials(d, top, u, &mut gp);
            for l in 0..=top {
                let scaled = gegenbauer::dimension(d, l).sqrt() * gp[l];
                assert!(
                    (p[l] - scaled).abs() < 1e-12 * (1.0 + scaled.abs()),
                    "d {d} l {l}"
                );
                let fd = (hi[l] - lo[l]) / (2.0 * h);
                assert!(
                    (fd - dp[l]).abs() < 1e-7 * (1.0 + fd.abs()),
                    "d {d} l {l}: {fd} vs {}",
                    dp[l]
                );
            }
        }
    }

    #[test]
    fn the_transport_is_the_divergence_of_the_flux() {
        // Against d_t f = -(1/w) d_u[w (1 - u^2) f Phi'] by finite differences in u, d = 3,
        // usa, one head: for f = 1 + 0.3 P_1 + 0.2 P_2, project back on P_l.
        let (d, m, beta) = (3, 24, 1.5);
        let heads = [MeanFieldHead {
            a: [[1.0, 0.0], [0.0, 1.0]],
            v: [[1.0, 0.0], [0.0, 1.0]],
        }];
        let mut s = Axisymmetric::new(d, m, Kernel::Usa, beta, &heads, 0.0);
        // The state holds b_l = a_l / sqrt(N(3, l)) = a_l / sqrt(2l + 1).
        let mut c = vec![Complex64::new(0.0, 0.0); s.len()];
        c[0].re = 1.0;
        c[1].re = 0.3 / 3f64.sqrt();
        c[2].re = 0.2 / 5f64.sqrt();
        let mut out = c.clone();
        s.nonlinear(&c, &mut out);
        // Independent: Phi = (1/beta) sum_l c_l a_l P_l with d = 3 closed forms of c_0..c_2.
        let (sh, ch) = (beta.sinh(), beta.cosh());
        let cl = [
            sh / beta,
            (beta * ch - sh) / beta.powi(2),
            ((beta * beta + 3.0) * sh - 3.0 * beta * ch) / beta.powi(3),
        ];
        let f = |u: f64| 1.0 + 0.3 * u + 0.2 * (1.5 * u * u - 0.5);
        let dphi = |u: f64| (cl[1] * 0.3 + cl[2] * 0.2 * 3.0 * u) / beta;
        let flux = |u: f64| (1.0 - u * u) * f(u) * dphi(u);
        let h = 1e-5;
        let rate = |u: f64| -(flux(u + h) - flux(u - h)) / (2.0 * h);
        // Legendre projections by a fine midpoint rule.
        let n = 20000;
        for l in 0..4 {
            let mut sum = 0.0;
            let mut p = vec![0.0; 4];
            for j in 0..n {
                let u = -1.0 + (j as f64 + 0.5) * 2.0 / n as f64;
                gegenbauer::polynomials(3, 3, u, &mut p);
                sum += rate(u) * p[l] * 2.0 / n as f64;
            }
            let want = (2 * l + 1) as f64 / 2.0 * sum;
            let got = out[l].re * ((2 * l + 1) as f64).sqrt();
            assert!((got - want).abs() < 1e-6, "l {l}: {got} vs {want}");
        }
    }
}
