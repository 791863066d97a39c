//! The mean field on the circle by Fourier modes (docs/MATH.md §17):
//!
//! ```text
//! rho(theta) = sum_k c_k e^{i k theta},   c_k' = -T k^2 c_k - i k (rho v)^_k
//! v(theta)   = Im( e^{-i theta} sum_heads F_h(theta) / Z_h(theta) )
//! F_h(theta) = (2 pi / N) sum_j h(beta <x_theta, A x_j>) (V x_j) rho_j     (as a complex number)
//! Z_h        = (2 pi / N) sum_j e^{beta <x_theta, A x_j>} rho_j  (sa; 1 for lsa and usa)
//! ```
//!
//! When A = a R (a rotation times a number, a = |A| e^{i alpha}) the weight depends on
//! psi = theta - phi only, K(psi) = h(beta a cos(psi - alpha)), with the exact Fourier
//! coefficients K_m = I_m(beta a) e^{-i m alpha} (Jacobi–Anger; lsa: beta a / 2 at m = +-1), and
//! F_k = 2 pi K_k g_k is a product of modes (FFT, O(N log N), no aliasing of the kernel).
//! Otherwise the integrals are the trapezoid rule on a finer grid of M = N + 2 m_K points
//! (m_K: the modes the kernel needs, I_m(beta |A|) < 1e-17 I_0 beyond), exact for the
//! integrand's trigonometric polynomial: a stored N x M matrix of weights (quadrature).

use std::f64::consts::PI;
use std::sync::Arc;

use num_complex::Complex64;
use rustfft::{Fft, FftPlanner};

use super::stepper::SpectralSystem;
use super::{Kernel, MeanFieldHead};

/// How the attention sums of a head are evaluated.
enum Weights {
    /// 2 pi K_k / N per FFT index (the kernel's exact modes, scaled for the convolution).
    Convolution(Vec<Complex64>),
    /// The N x M weights (row i: theta_i, column j: the fine point 2 pi j / M), the trapezoid
    /// factor included.
    Quadrature(Vec<f64>),
}

/// The fine grid of the quadrature heads: its size, FFT and angles.
struct Fine {
    m: usize,
    inverse: Arc<dyn Fft<f64>>,
    trig: Vec<(f64, f64)>,
    rho: Vec<Complex64>,
    g: Vec<Complex64>,
}

/// The modes the kernel h(beta <x, A y>) needs in y: I_m(beta |A|_F) below 1e-17 I_0 beyond
/// (lsa: 1), at most 4096.
pub fn kernel_modes(kernel: Kernel, beta: f64, a: &[[f64; 2]; 2]) -> usize {
    if kernel == Kernel::Lsa {
        return 1;
    }
    let x = beta.abs() * a.iter().flatten().map(|v| v * v).sum::<f64>().sqrt();
    let mut s = vec![0.0; 4097];
    crate::model::bessel::scaled_bessel_i(x, &mut s);
    (1..s.len()).find(|&m| s[m] < 1e-17 * s[0]).unwrap_or(4096)
}

/// One head on a grid of N points.
struct GridHead {
    weights: Weights,
    /// V as (m+, m-): V x <-> m+ z + m- conj(z).
    v: [[f64; 2]; 2],
}

/// The mean field on a grid of N points: its FFTs, weights and scratch.
pub struct Circle {
    n: usize,
    kernel: Kernel,
    heads: Vec<GridHead>,
    linear: Vec<f64>,
    forward: Arc<dyn Fft<f64>>,
    inverse: Arc<dyn Fft<f64>>,
    scratch: Vec<Complex64>,
    rho: Vec<Complex64>,
    field: Vec<Complex64>,
    norm: Vec<Complex64>,
    buf: Vec<Complex64>,
    flux: Vec<Complex64>,
    /// (cos, sin) of the grid angles.
    trig: Vec<(f64, f64)>,
    /// The fine grid (quadrature heads only).
    fine: Option<Fine>,
}

/// Whether A = a R (a rotation times a number): a11 = a22 and a12 = -a21.
pub fn commutes_with_rotations(a: &[[f64; 2]; 2]) -> bool {
    let scale = a.iter().flatten().fold(0.0f64, |m, x| m.max(x.abs()));
    (a[0][0] - a[1][1]).abs() <= 1e-15 * scale && (a[0][1] + a[1][0]).abs() <= 1e-15 * scale
}

/// The signed wavenumber of FFT index `i` of `n` (the Nyquist index counts as n/2).
pub fn wavenumber(i: usize, n: usize) -> f64 {
    if i <= n / 2 {
        i as f64
    } else {
        i as f64 - n as f64
    }
}

impl Circle {
    /// The mean field of `heads` on N grid points theta_j = 2 pi j / N, temperature `t`.
    pub fn new(n: usize, kernel: Kernel, beta: f64, heads: &[MeanFieldHead], t: f64) -> Self {
        let mut planner = FftPlanner::new();
        let forward = planner.plan_fft_forward(n);
        let inverse = planner.plan_fft_inverse(n);
        let scratch_len = forward
            .get_inplace_scratch_len()
            .max(inverse.get_inplace_scratch_len());
        let trig: Vec<(f64, f64)> = (0..n)
            .map(|j| {
                let th = 2.0 * PI * j as f64 / n as f64;
                (th.cos(), th.sin())
            })
            .collect();
        let linear = (0..n)
            .map(|i| {
                let k = wavenumber(i, n);
                -t * k * k
            })
            .collect();
        let zero = Complex64::new(0.0, 0.0);
        let mut circle = Circle {
            n,
            kernel,
            heads: Vec::new(),
            linear,
            forward,
            inverse,
            scratch: vec![zero; scratch_len],
            rho: vec![zero; n],
            field: vec![zero; n],
            norm: vec![zero; n],
            buf: vec![zero; n],
            flux: vec![zero; n],
            trig,
            fine: None,
        };
        let modes = heads
            .iter()
            .filter(|h| !commutes_with_rotations(&h.a))
            .map(|h| kernel_modes(kernel, beta, &h.a))
            .max();
        if let Some(mk) = modes {
            let m = n + 2 * mk;
            let inverse = planner.plan_fft_inverse(m);
            let len = inverse.get_inplace_scratch_len();
            if len > circle.scratch.len() {
                circle.scratch.resize(len, zero);
            }
            circle.fine = Some(Fine {
                m,
                inverse,
                trig: (0..m)
                    .map(|j| {
                        let th = 2.0 * PI * j as f64 / m as f64;
                        (th.cos(), th.sin())
                    })
                    .collect(),
                rho: vec![zero; m],
                g: vec![zero; m],
            });
        }
        circle.heads = heads
            .iter()
            .map(|h| GridHead {
                weights: circle.weights(kernel, beta, &h.a),
                v: h.v,
            })
            .collect();
        circle
    }

    /// Number of grid points.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the grid is empty (never: N >= 4).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether every head runs by convolution.
    pub fn convolution(&self) -> bool {
        self.heads
            .iter()
            .all(|h| matches!(h.weights, Weights::Convolution(_)))
    }

    /// The kernel h(beta <x_theta, A x_phi>) (sa: shifted by beta |A|_2 bound, which cancels in F/Z).
    fn weight(kernel: Kernel, beta: f64, score: f64, shift: f64) -> f64 {
        match kernel {
            Kernel::Lsa => beta * score,
            Kernel::Usa => (beta * score).exp(),
            Kernel::Sa => (beta * score - shift).exp(),
        }
    }

    fn weights(&mut self, kernel: Kernel, beta: f64, a: &[[f64; 2]; 2]) -> Weights {
        let n = self.n;
        let frob = a.iter().flatten().map(|x| x * x).sum::<f64>().sqrt();
        let shift = beta * frob;
        if commutes_with_rotations(a) {
            return Weights::Convolution(convolution_modes(kernel, beta, a, n));
        }
        let fine = self
            .fine
            .as_ref()
            .expect("a quadrature head has its fine grid");
        let (m, dq) = (fine.m, 2.0 * PI / fine.m as f64);
        let mut w = vec![0.0; n * m];
        for (i, &(ci, si)) in self.trig.iter().enumerate() {
            for (j, &(cj, sj)) in fine.trig.iter().enumerate() {
                let ax = (a[0][0] * cj + a[0][1] * sj, a[1][0] * cj + a[1][1] * sj);
                w[i * m + j] = Self::weight(kernel, beta, ci * ax.0 + si * ax.1, shift) * dq;
            }
        }
        Weights::Quadrature(w)
    }

    /// The density on the grid from its coefficients (into `self.rho`, real parts used).
    fn synthesize(&mut self, c: &[Complex64]) {
        self.rho.copy_from_slice(c);
        self.inverse
            .process_with_scratch(&mut self.rho, &mut self.scratch);
        if let Some(fine) = self.fine.as_mut() {
            fine.rho = resample(c, fine.m);
            fine.inverse
                .process_with_scratch(&mut fine.rho, &mut self.scratch);
        }
    }

    /// The velocity v(theta_j) of the density in `self.rho` (into `self.flux` as real parts).
    fn velocity(&mut self) {
        let n = self.n;
        for z in &mut self.flux {
            *z = Complex64::new(0.0, 0.0);
        }
        for hi in 0..self.heads.len() {
            let v = self.heads[hi].v;
            // g_j = rho_j V x_j as a complex number.
            for j in 0..n {
                let (c, s) = self.trig[j];
                let r = self.rho[j].re;
                self.buf[j] = Complex64::new(
                    r * (v[0][0] * c + v[0][1] * s),
                    r * (v[1][0] * c + v[1][1] * s),
                );
            }
            let sa = self.kernel == Kernel::Sa;
            match &self.heads[hi].weights {
                Weights::Convolution(kh) => {
                    self.field.copy_from_slice(&self.buf);
                    self.forward
                        .process_with_scratch(&mut self.field, &mut self.scratch);
                    for (f, k) in self.field.iter_mut().zip(kh) {
                        *f *= k;
                    }
                    self.inverse
                        .process_with_scratch(&mut self.field, &mut self.scratch);
                    if sa {
                        for j in 0..n {
                            self.norm[j] = Complex64::new(self.rho[j].re, 0.0);
                        }
                        self.forward
                            .process_with_scratch(&mut self.norm, &mut self.scratch);
                        for (f, k) in self.norm.iter_mut().zip(kh) {
                            *f *= k;
                        }
                        self.inverse
                            .process_with_scratch(&mut self.norm, &mut self.scratch);
                    }
                }
                Weights::Quadrature(w) => {
                    let fine = self
                        .fine
                        .as_mut()
                        .expect("a quadrature head has its fine grid");
                    let m = fine.m;
                    for j in 0..m {
                        let (c, s) = fine.trig[j];
                        let r = fine.rho[j].re;
                        fine.g[j] = Complex64::new(
                            r * (v[0][0] * c + v[0][1] * s),
                            r * (v[1][0] * c + v[1][1] * s),
                        );
                    }
                    for i in 0..n {
                        let row = &w[i * m..(i + 1) * m];
                        let (mut fx, mut fy, mut z) = (0.0, 0.0, 0.0);
                        for ((w, g), r) in row.iter().zip(&fine.g).zip(&fine.rho) {
                            fx += w * g.re;
                            fy += w * g.im;
                            z += w * r.re;
                        }
                        self.field[i] = Complex64::new(fx, fy);
                        self.norm[i] = Complex64::new(z, 0.0);
                    }
                }
            }
            for j in 0..n {
                let (c, s) = self.trig[j];
                let mut f = self.field[j];
                if sa {
                    f /= self.norm[j].re;
                }
                self.flux[j].re += -s * f.re + c * f.im;
            }
        }
    }
}

impl SpectralSystem for Circle {
    fn linear(&self) -> &[f64] {
        &self.linear
    }

    fn nonlinear(&mut self, c: &[Complex64], out: &mut [Complex64]) {
        let n = self.n;
        self.synthesize(c);
        self.velocity();
        for j in 0..n {
            self.flux[j] = Complex64::new(self.flux[j].re * self.rho[j].re, 0.0);
        }
        self.forward
            .process_with_scratch(&mut self.flux, &mut self.scratch);
        let scale = 1.0 / n as f64;
        for (i, o) in out.iter_mut().enumerate() {
            let k = if kept(i, n) { wavenumber(i, n) } else { 0.0 };
            *o = Complex64::new(0.0, -k) * self.flux[i] * scale;
        }
    }
}

/// 2 pi K_k / N per FFT index for A = a R: K_m = I_m(beta a) e^{-i m alpha} (usa; sa scaled by
/// e^{-beta a}, which cancels in F / Z), beta a / 2 e^{-+ i alpha} at m = +-1 (lsa).
fn convolution_modes(kernel: Kernel, beta: f64, a: &[[f64; 2]; 2], n: usize) -> Vec<Complex64> {
    let (p, q) = (a[0][0], a[1][0]);
    let (size, alpha) = (p.hypot(q), q.atan2(p));
    let x = beta * size;
    let mut scaled = vec![0.0; n / 2 + 1];
    if kernel != Kernel::Lsa {
        crate::model::bessel::scaled_bessel_i(x.abs(), &mut scaled);
    }
    let mode = |m: i64| -> Complex64 {
        let value = match kernel {
            Kernel::Lsa if m.abs() == 1 => x / 2.0,
            Kernel::Lsa => 0.0,
            // I_m(-x) = (-1)^m I_m(x).
            Kernel::Usa | Kernel::Sa => {
                let sign = if x < 0.0 && m % 2 != 0 { -1.0 } else { 1.0 };
                let scale = if kernel == Kernel::Usa {
                    x.abs().exp()
                } else {
                    1.0
                };
                sign * scaled[m.unsigned_abs() as usize] * scale
            }
        };
        Complex64::from_polar(value, -(m as f64) * alpha)
    };
    let factor = 2.0 * PI / n as f64;
    (0..n)
        .map(|i| {
            let k = wavenumber(i, n) as i64;
            let kk = if 2 * i == n {
                (mode(k) + mode(-k)) * 0.5
            } else {
                mode(k)
            };
            kk * factor
        })
        .collect()
}

/// The coefficients c_k (FFT order) of a density sampled on N grid points.
pub fn analyse(values: &[f64]) -> Vec<Complex64> {
    let n = values.len();
    let mut c: Vec<Complex64> = values.iter().map(|&v| Complex64::new(v, 0.0)).collect();
    FftPlanner::new().plan_fft_forward(n).process(&mut c);
    let scale = 1.0 / n as f64;
    c.iter().map(|z| z * scale).collect()
}

/// The density on N grid points from coefficients (FFT order) of any grid ([`resample`]).
pub fn synthesize_on(c: &[Complex64], n: usize) -> Vec<f64> {
    let mut full = resample(c, n);
    FftPlanner::new().plan_fft_inverse(n).process(&mut full);
    full.iter().map(|z| z.re).collect()
}

/// Coefficients of one grid size moved to another: modes kept, zero padding, modes past the
/// new Nyquist mode dropped (a Nyquist mode is split evenly between +N/2 and -N/2 when growing).
pub fn resample(c: &[Complex64], n: usize) -> Vec<Complex64> {
    let m = c.len();
    let mut out = vec![Complex64::new(0.0, 0.0); n];
    let mut put = |k: i64, z: Complex64| {
        if 2 * k.unsigned_abs() as usize <= n {
            out[k.rem_euclid(n as i64) as usize] += z;
        }
    };
    for (i, &z) in c.iter().enumerate() {
        let k = wavenumber(i, m) as i64;
        if m.is_multiple_of(2) && 2 * i == m && n > m {
            put(k, z * 0.5);
            put(-k, z * 0.5);
        } else {
            put(k, z);
        }
    }
    out
}

/// Whether FFT index `i` of `n` is a kept mode: |k| <= n/3 (the two-thirds rule, so that the
/// aliases of the quadratic product rho v fall on dropped modes only).
pub fn kept(i: usize, n: usize) -> bool {
    3.0 * wavenumber(i, n).abs() <= n as f64
}

/// Drops the modes past the two-thirds rule.
pub fn truncate(c: &mut [Complex64]) {
    let n = c.len();
    for (i, z) in c.iter_mut().enumerate() {
        if !kept(i, n) {
            *z = Complex64::new(0.0, 0.0);
        }
    }
}

/// The weight of the top third of the kept modes (2n/9 < |k| <= n/3) relative to all of them.
pub fn tail(c: &[Complex64]) -> f64 {
    let n = c.len();
    let (mut top, mut all) = (0.0, 0.0);
    for (i, z) in c.iter().enumerate() {
        if !kept(i, n) {
            continue;
        }
        let a = z.norm();
        all += a;
        if 9.0 * wavenumber(i, n).abs() > 2.0 * n as f64 {
            top += a;
        }
    }
    if all > 0.0 {
        top / all
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mean_field::MeanFieldHead;

    /// N(c) against the transport written out by direct sums on a fine grid.
    #[test]
    fn transport_matches_direct_sums() {
        let n = 64;
        let beta = 2.0;
        let i2 = [[1.0, 0.0], [0.0, 1.0]];
        let rho = |t: f64| 1.0 / (2.0 * PI) + 0.1 * (3.0 * t).cos() + 0.05 * (t - 0.3).sin();
        let values: Vec<f64> = (0..n)
            .map(|j| rho(2.0 * PI * j as f64 / n as f64))
            .collect();
        let c = analyse(&values);
        for (kernel, a) in [
            (Kernel::Usa, i2),
            (Kernel::Usa, [[1.0, 0.4], [-0.2, 0.7]]),
            (Kernel::Sa, [[0.6, -0.8], [0.8, 0.6]]),
        ] {
            let heads = [MeanFieldHead {
                a,
                v: [[0.9, 0.2], [-0.3, 1.1]],
            }];
            let mut circle = Circle::new(n, kernel, beta, &heads, 0.0);
            let mut out = vec![Complex64::new(0.0, 0.0); n];
            circle.nonlinear(&c, &mut out);
            // Direct: flux f(theta) = rho v, by quadrature on 2048 points; its modes by sums.
            let q = 2048;
            let v = &heads[0].v;
            let vel = |t: f64| {
                let (mut fx, mut fy, mut z) = (0.0, 0.0, 0.0);
                for j in 0..q {
                    let p = 2.0 * PI * j as f64 / q as f64;
                    let (cp, sp) = (p.cos(), p.sin());
                    let s = t.cos() * (a[0][0] * cp + a[0][1] * sp)
                        + t.sin() * (a[1][0] * cp + a[1][1] * sp);
                    let w = (beta * s).exp() * rho(p) * 2.0 * PI / q as f64;
                    fx += w * (v[0][0] * cp + v[0][1] * sp);
                    fy += w * (v[1][0] * cp + v[1][1] * sp);
                    z += w;
                }
                let z = if kernel == Kernel::Sa { z } else { 1.0 };
                (-t.sin() * fx + t.cos() * fy) / z
            };
            let flux: Vec<f64> = (0..q)
                .map(|j| {
                    let t = 2.0 * PI * j as f64 / q as f64;
                    rho(t) * vel(t)
                })
                .collect();
            for k in [1i64, 2, 3, 4, 6] {
                let fk: Complex64 = flux
                    .iter()
                    .enumerate()
                    .map(|(j, f)| {
                        Complex64::from_polar(*f, -(k as f64) * 2.0 * PI * j as f64 / q as f64)
                    })
                    .sum::<Complex64>()
                    / q as f64;
                let want = Complex64::new(0.0, -(k as f64)) * fk;
                let got = out[k as usize];
                assert!(
                    (got - want).norm() < 1e-10,
                    "{kernel:?} {a:?} k = {k}: {got} vs {want}"
                );
            }
        }
    }
}
