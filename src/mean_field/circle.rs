//! The mean field on the circle by Fourier modes (docs/MATH.md §18):
//!
//! ```text
//! rho(theta) = sum_k c_k e^{i k theta},   c_k' = -T k^2 c_k - i k (rho v)^_k
//! v(theta)   = Im( e^{-i theta} sum_heads F_h(theta) / Z_h(theta) )
//! F_h(theta) = (2 pi / N) sum_j h(beta <x_theta, A x_j>) (V x_j) rho_j     (as a complex number)
//! Z_h        = (2 pi / N) sum_j e^{beta <x_theta, A x_j>} rho_j  (sa; 1 for lsa and usa)
//! ```
//!
//! The sums over the grid are the trapezoid rule, exact for the trigonometric polynomials the
//! grid resolves. When A = a R (a rotation times a number) the weight depends on theta - phi
//! only and the sums are circular convolutions, done by FFT in O(N log N); otherwise the
//! weights are a stored N x N matrix (quadrature, O(N^2)). Either way the same sums, so the
//! results agree to round-off.

use std::f64::consts::PI;
use std::sync::Arc;

use num_complex::Complex64;
use rustfft::{Fft, FftPlanner};

use super::stepper::SpectralSystem;
use super::{Kernel, MeanFieldHead};

/// How the attention sums of a head are evaluated.
enum Weights {
    /// The FFT of the weight h(beta <x_0, A x_{-j}>) (scaled for the convolution).
    Convolution(Vec<Complex64>),
    /// The N x N weights (row i: theta_i), the trapezoid factor included.
    Quadrature(Vec<f64>),
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
        };
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
        let dq = 2.0 * PI / n as f64;
        if commutes_with_rotations(a) {
            // K(psi) = h(beta (a11 cos psi + a21 sin psi)), psi = theta - phi.
            let (p, q) = (a[0][0], a[1][0]);
            let mut k: Vec<Complex64> = self
                .trig
                .iter()
                .map(|&(c, s)| {
                    Complex64::new(Self::weight(kernel, beta, p * c + q * s, shift), 0.0)
                })
                .collect();
            self.forward.process_with_scratch(&mut k, &mut self.scratch);
            let scale = dq / n as f64;
            return Weights::Convolution(k.into_iter().map(|z| z * scale).collect());
        }
        let mut w = vec![0.0; n * n];
        for (i, &(ci, si)) in self.trig.iter().enumerate() {
            for (j, &(cj, sj)) in self.trig.iter().enumerate() {
                let ax = (a[0][0] * cj + a[0][1] * sj, a[1][0] * cj + a[1][1] * sj);
                w[i * n + j] = Self::weight(kernel, beta, ci * ax.0 + si * ax.1, shift) * dq;
            }
        }
        Weights::Quadrature(w)
    }

    /// The density on the grid from its coefficients (into `self.rho`, real parts used).
    fn synthesize(&mut self, c: &[Complex64]) {
        self.rho.copy_from_slice(c);
        self.inverse
            .process_with_scratch(&mut self.rho, &mut self.scratch);
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
                    for i in 0..n {
                        let row = &w[i * n..(i + 1) * n];
                        let (mut fx, mut fy, mut z) = (0.0, 0.0, 0.0);
                        for j in 0..n {
                            fx += row[j] * self.buf[j].re;
                            fy += row[j] * self.buf[j].im;
                            z += row[j] * self.rho[j].re;
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
            let k = if 2 * i == n { 0.0 } else { wavenumber(i, n) };
            *o = Complex64::new(0.0, -k) * self.flux[i] * scale;
        }
    }
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
        if m % 2 == 0 && 2 * i == m && n > m {
            put(k, z * 0.5);
            put(-k, z * 0.5);
        } else {
            put(k, z);
        }
    }
    out
}

/// The weight of the top third of the modes (|k| > N/3) relative to all of them.
pub fn tail(c: &[Complex64]) -> f64 {
    let n = c.len();
    let (mut top, mut all) = (0.0, 0.0);
    for (i, z) in c.iter().enumerate() {
        let a = z.norm();
        all += a;
        if 3.0 * wavenumber(i, n).abs() > n as f64 {
            top += a;
        }
    }
    if all > 0.0 {
        top / all
    } else {
        0.0
    }
}
