//! Exponential time differencing, fourth order (Cox–Matthews ETDRK4), with the error from step
//! doubling (docs/MATH.md §17):
//!
//! ```text
//! c' = L c + N(c),  L diagonal (the diffusion, -T k^2), N the transport
//! a       = e^{hL/2} c + (h/2) phi1(hL/2) N(c)
//! b       = e^{hL/2} c + (h/2) phi1(hL/2) N(a)
//! e       = e^{hL/2} a + (h/2) phi1(hL/2) (2 N(b) - N(c))
//! c(t+h)  = e^{hL} c + h [ f1 N(c) + 2 f2 (N(a) + N(b)) + f3 N(e) ]
//! f1 = phi1 - 3 phi2 + 4 phi3,  f2 = phi2 - 2 phi3,  f3 = -phi2 + 4 phi3   (at hL)
//! phi1(z) = (e^z - 1)/z,  phi2 = (e^z - 1 - z)/z^2,  phi3 = (e^z - 1 - z - z^2/2)/z^3
//! error   = |two steps of h/2 - one step of h| / 15      (the two half steps are kept)
//! ```
//!
//! The diffusion is solved exactly, so the step follows the accuracy of the transport, not the
//! stiffness T k^2 of the top modes; and since f1 + 4 f2 + f3 = phi1, a stationary density is a
//! fixed point of the scheme for every h: at a steady state the error estimate vanishes and the
//! steps grow (an integrating-factor Runge–Kutta pair does not have this property and keeps
//! small steps forever). The error is measured as a bound of the density's sup norm:
//! sum_k |error_k| against atol + rtol sum_k |c_k|.

use num_complex::Complex64;

/// A semilinear system on spectral coefficients: the diagonal linear part and the rest.
pub trait SpectralSystem {
    /// The diagonal of L (<= 0), one entry per coefficient.
    fn linear(&self) -> &[f64];
    /// Writes N(c) into `out` (same length as `c`).
    fn nonlinear(&mut self, c: &[Complex64], out: &mut [Complex64]);
}

/// phi1, phi2, phi3 of a real z <= 0 (Taylor series near 0, where the formulas cancel).
pub fn phi123(z: f64) -> (f64, f64, f64) {
    if z.abs() < 0.2 {
        // phi_k(z) = sum_m z^m / (m + k)!
        let (mut p1, mut p2, mut p3) = (0.0, 0.0, 0.0);
        let mut zm = 1.0;
        let mut fact = 1.0; // m!
        for m in 0..16 {
            let mf = m as f64;
            let f1 = fact * (mf + 1.0);
            let f2 = f1 * (mf + 2.0);
            let f3 = f2 * (mf + 3.0);
            p1 += zm / f1;
            p2 += zm / f2;
            p3 += zm / f3;
            zm *= z;
            fact *= mf + 1.0;
        }
        return (p1, p2, p3);
    }
    let e = z.exp();
    let p1 = (e - 1.0) / z;
    let p2 = (e - 1.0 - z) / (z * z);
    let p3 = (e - 1.0 - z - 0.5 * z * z) / (z * z * z);
    (p1, p2, p3)
}

/// The factors of one step size, per coefficient.
#[derive(Default)]
struct Factors {
    h: f64,
    e_half: Vec<f64>,
    phi_half: Vec<f64>,
    e_full: Vec<f64>,
    f1: Vec<f64>,
    f2: Vec<f64>,
    f3: Vec<f64>,
}

impl Factors {
    fn make(&mut self, h: f64, l: &[f64]) {
        if self.h == h && self.e_full.len() == l.len() {
            return;
        }
        self.h = h;
        let n = l.len();
        for v in [
            &mut self.e_half,
            &mut self.phi_half,
            &mut self.e_full,
            &mut self.f1,
            &mut self.f2,
            &mut self.f3,
        ] {
            v.resize(n, 0.0);
        }
        for (k, &lk) in l.iter().enumerate() {
            let z = h * lk;
            self.e_half[k] = (0.5 * z).exp();
            self.phi_half[k] = phi123(0.5 * z).0;
            self.e_full[k] = z.exp();
            let (p1, p2, p3) = phi123(z);
            self.f1[k] = p1 - 3.0 * p2 + 4.0 * p3;
            self.f2[k] = p2 - 2.0 * p3;
            self.f3[k] = -p2 + 4.0 * p3;
        }
    }
}

/// The stepper's state between steps.
pub struct Stepper {
    /// N at the current state, and N at the stages a, b, e.
    n0: Vec<Complex64>,
    na: Vec<Complex64>,
    nb: Vec<Complex64>,
    ne: Vec<Complex64>,
    a: Vec<Complex64>,
    /// One full step, the midpoint of the two half steps, and N there.
    full: Vec<Complex64>,
    mid: Vec<Complex64>,
    nmid: Vec<Complex64>,
    two: Vec<Complex64>,
    /// Whether `n0` holds N of the current state.
    fresh: bool,
    /// The step the controller proposes next.
    pub h: f64,
    rtol: f64,
    atol: f64,
    /// Evaluations of N.
    pub evals: u64,
    /// Accepted steps (each made of two half steps).
    pub accepted: u64,
    /// Rejected steps.
    pub rejected: u64,
    whole: Factors,
    half: Factors,
}

/// What one attempt to advance gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepResult {
    /// Advanced by this much.
    Accepted(f64),
    /// The step fell below round-off of t.
    Underflow,
    /// A stage was not finite.
    NonFinite,
}

fn finite(v: &[Complex64]) -> bool {
    v.iter().all(|z| z.re.is_finite() && z.im.is_finite())
}

impl Stepper {
    /// A stepper for `len` coefficients, first trying step `h`.
    pub fn new(len: usize, h: f64, rtol: f64, atol: f64) -> Self {
        let z = vec![Complex64::new(0.0, 0.0); len];
        Stepper {
            n0: z.clone(),
            na: z.clone(),
            nb: z.clone(),
            ne: z.clone(),
            a: z.clone(),
            full: z.clone(),
            mid: z.clone(),
            nmid: z.clone(),
            two: z,
            fresh: false,
            h,
            rtol,
            atol,
            evals: 0,
            accepted: 0,
            rejected: 0,
            whole: Factors::default(),
            half: Factors::default(),
        }
    }

    /// Resizes for a new number of coefficients (after the grid grew).
    pub fn resize(&mut self, len: usize) {
        let zero = Complex64::new(0.0, 0.0);
        for v in [
            &mut self.n0,
            &mut self.na,
            &mut self.nb,
            &mut self.ne,
            &mut self.a,
            &mut self.full,
            &mut self.mid,
            &mut self.nmid,
            &mut self.two,
        ] {
            v.resize(len, zero);
        }
        self.fresh = false;
        self.whole.h = f64::NAN;
        self.half.h = f64::NAN;
    }

    /// Advances `c` from `t` by at most `limit` with the error within the tolerances.
    pub fn step(
        &mut self,
        system: &mut dyn SpectralSystem,
        c: &mut [Complex64],
        t: f64,
        limit: f64,
    ) -> StepResult {
        if !self.fresh {
            system.nonlinear(c, &mut self.n0);
            self.evals += 1;
            self.fresh = true;
        }
        loop {
            let h = self.h.min(limit);
            if h <= 4.0 * f64::EPSILON * t.abs().max(limit) {
                return StepResult::Underflow;
            }
            let l = system.linear().to_vec();
            self.whole.make(h, &l);
            self.half.make(0.5 * h, &l);
            let norm = self.attempt(system, c);
            if !norm.is_finite() {
                self.rejected += 1;
                self.h = h * 0.1;
                if self.h <= 4.0 * f64::EPSILON * t.abs().max(1.0) {
                    return StepResult::NonFinite;
                }
                continue;
            }
            let factor = (0.9 * norm.powf(-0.2)).clamp(0.2, 5.0);
            if norm <= 1.0 {
                c.copy_from_slice(&self.two);
                self.fresh = false;
                self.accepted += 1;
                if h == self.h || factor < 1.0 {
                    self.h = h * factor;
                } else {
                    // A step cut short by `limit` does not shrink the next one.
                    self.h = self.h.max(h * factor);
                }
                return StepResult::Accepted(h);
            }
            self.rejected += 1;
            self.h = h * factor.min(1.0);
        }
    }

    /// One full step and two half steps from `c`; the error norm (infinite when not finite).
    fn attempt(&mut self, system: &mut dyn SpectralSystem, c: &[Complex64]) -> f64 {
        let n0 = std::mem::take(&mut self.n0);
        let mut out = std::mem::take(&mut self.full);
        let ok = self.etdrk4(system, c, &n0, true, &mut out);
        self.full = out;
        if !ok {
            self.n0 = n0;
            return f64::INFINITY;
        }
        let mut mid = std::mem::take(&mut self.mid);
        let ok = self.etdrk4(system, c, &n0, false, &mut mid);
        self.n0 = n0;
        if !ok {
            self.mid = mid;
            return f64::INFINITY;
        }
        let mut nmid = std::mem::take(&mut self.nmid);
        system.nonlinear(&mid, &mut nmid);
        self.evals += 1;
        let mut two = std::mem::take(&mut self.two);
        let ok = finite(&nmid) && self.etdrk4(system, &mid, &nmid, false, &mut two);
        self.mid = mid;
        self.nmid = nmid;
        self.two = two;
        if !ok {
            return f64::INFINITY;
        }
        let (mut err, mut size) = (0.0, 0.0);
        for ((ck, two), full) in c.iter().zip(&self.two).zip(&self.full) {
            err += (two - full).norm() / 15.0;
            size += ck.norm().max(two.norm());
        }
        err / (self.atol + self.rtol * size)
    }

    /// One ETDRK4 step (`whole`: of h, else of h/2) from `c` with N(c) = `n0`, into `out`;
    /// false when a stage is not finite.
    fn etdrk4(
        &mut self,
        system: &mut dyn SpectralSystem,
        c: &[Complex64],
        n0: &[Complex64],
        whole: bool,
        out: &mut [Complex64],
    ) -> bool {
        let f = if whole { &self.whole } else { &self.half };
        let h = f.h;
        let len = c.len();
        for k in 0..len {
            self.a[k] = c[k] * f.e_half[k] + n0[k] * (0.5 * h * f.phi_half[k]);
        }
        system.nonlinear(&self.a, &mut self.na);
        let f = if whole { &self.whole } else { &self.half };
        for k in 0..len {
            out[k] = c[k] * f.e_half[k] + self.na[k] * (0.5 * h * f.phi_half[k]);
        }
        system.nonlinear(out, &mut self.nb);
        let f = if whole { &self.whole } else { &self.half };
        for k in 0..len {
            out[k] =
                self.a[k] * f.e_half[k] + (self.nb[k] * 2.0 - n0[k]) * (0.5 * h * f.phi_half[k]);
        }
        system.nonlinear(out, &mut self.ne);
        self.evals += 3;
        if !(finite(&self.na) && finite(&self.nb) && finite(&self.ne)) {
            return false;
        }
        let f = if whole { &self.whole } else { &self.half };
        for k in 0..len {
            out[k] = c[k] * f.e_full[k]
                + (n0[k] * f.f1[k]
                    + (self.na[k] + self.nb[k]) * (2.0 * f.f2[k])
                    + self.ne[k] * f.f3[k])
                    * h;
        }
        true
    }
}
