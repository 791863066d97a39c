//! The mean field (`--model mean-field`, docs/MATH.md §18) against independent results: the
//! dispersion relation of the uniform state, the Ott–Antonsen equation for lsa, the noisy
//! stationary state by its own self-consistency, mass conservation, the concentration stop and
//! the bad inputs.

use std::f64::consts::PI;

use tokdyn::mean_field::start::Shape;
use tokdyn::mean_field::{self, Kernel, MeanFieldHead, MeanFieldProblem, StartDensity};

const I2: [[f64; 2]; 2] = [[1.0, 0.0], [0.0, 1.0]];

/// I_nu(x) by its power series (x small enough for the test's betas).
fn bessel_i(nu: f64, x: f64) -> f64 {
    let mut term = (x / 2.0).powf(nu) / gamma(nu + 1.0);
    let mut sum = term;
    for m in 1..200 {
        let m = m as f64;
        term *= (x / 2.0).powi(2) / (m * (m + nu));
        sum += term;
        if term < 1e-18 * sum {
            break;
        }
    }
    sum
}

/// Gamma by Lanczos (g = 7), enough for half-integers and integers here.
fn gamma(x: f64) -> f64 {
    if x < 0.5 {
        return PI / ((PI * x).sin() * gamma(1.0 - x));
    }
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    (2.0 * PI).sqrt() * t.powf(x + 0.5) * (-t).exp() * a
}

fn problem(kernel: Kernel, beta: f64, t: f64, start: StartDensity) -> MeanFieldProblem {
    MeanFieldProblem {
        kernel,
        beta,
        heads: vec![MeanFieldHead { a: I2, v: I2 }],
        temperature: t,
        start,
        rtol: 1e-12,
        atol: 1e-16,
        t_end: 1.0,
        samples: 2,
        grid: None,
        max_grid: 4096,
    }
}

fn uniform_plus(k: u32, a: f64) -> StartDensity {
    StartDensity {
        shape: Shape::Uniform,
        modes: vec![(k, a, 0.3)],
    }
}

fn run(p: &MeanFieldProblem) -> mean_field::MeanFieldRun {
    let r = mean_field::solve(p, &mut []).unwrap();
    assert!(r.solution.status.is_success(), "{:?}", r.solution.status);
    r
}

#[test]
fn small_modes_grow_at_the_dispersion_rate_on_the_circle() {
    for (kernel, beta, temp) in [
        (Kernel::Usa, 2.0, 0.3),
        (Kernel::Sa, 3.0, 0.05),
        (Kernel::Usa, 5.0, 1.0),
    ] {
        for l in 1..=3u32 {
            let mut c = bessel_i(l as f64, beta) / beta;
            if kernel == Kernel::Sa {
                c /= bessel_i(0.0, beta);
            }
            let lambda = (l * l) as f64 * (c - temp);
            // Over one e-fold at most, from a mode of 1e-6: the quadratic terms stay ~1e-6.
            let mut p = problem(kernel, beta, temp, uniform_plus(l, 1e-6));
            p.t_end = 1.0f64.min(1.0 / lambda.abs());
            let r = run(&p);
            let c0 = r.history[0][l as usize].norm();
            let c1 = r.history[1][l as usize].norm();
            let measured = (c1 / c0).ln() / p.t_end;
            let rel = (measured - lambda).abs() / lambda.abs();
            eprintln!("{kernel:?} beta {beta} T {temp} l {l}: {measured} vs {lambda} ({rel:.2e}), steps {}", r.solution.accepted_steps);
            assert!(rel < 1e-4, "{kernel:?} l = {l}: {measured} vs {lambda}");
        }
    }
}
