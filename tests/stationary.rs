//! Stationary densities of the mean field (A = V = I, d = 2) and their branches, against an
//! independent solution written here: Newton on the density's values on a grid of angles
//! (real space, the convolution by quadrature, a finite-difference Jacobian), the branch
//! parametrised by <cos theta>; the Bessel functions by their power series; the stability by
//! the mean-field time stepper.

use std::f64::consts::PI;

use nalgebra::{DMatrix, DVector};
use tokdyn::bifurcation::stationary::{self, Family, Parameter};
use tokdyn::mean_field::{self, Kernel, MeanFieldHead, MeanFieldProblem, StartDensity};

/// I_k(x) by its power series.
fn bessel_i(k: u32, x: f64) -> f64 {
    let mut term = (x / 2.0).powi(k as i32) / (1..=k).map(f64::from).product::<f64>();
    let mut sum = term;
    for m in 1..200 {
        term *= (x / 2.0).powi(2) / (m as f64 * (m + k) as f64);
        sum += term;
        if term < 1e-18 * sum {
            break;
        }
    }
    sum
}

/// Points of the independent grid (even density: the unknowns are theta_0 .. theta_{N/2}).
const N: usize = 96;

/// The residual of rho = e^{Phi/T}/Z, <cos> = r at unknowns x = (rho_0 .. rho_{N/2}, T).
fn residual(kernel: Kernel, beta: f64, r: f64, x: &DVector<f64>) -> DVector<f64> {
    let half = N / 2;
    let t = x[half + 1];
    let theta = |j: usize| 2.0 * PI * j as f64 / N as f64;
    let rho = |j: usize| x[if j <= half { j } else { N - j }];
    let dtheta = 2.0 * PI / N as f64;
    let phi: Vec<f64> = (0..N)
        .map(|i| {
            let conv: f64 = (0..N)
                .map(|j| (beta * (theta(i) - theta(j)).cos()).exp() * rho(j) * dtheta)
                .sum();
            match kernel {
                Kernel::Sa => conv.ln() / beta,
                _ => conv / beta,
            }
        })
        .collect();
    let top = phi.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = phi.iter().map(|p| ((p - top) / t).exp()).collect();
    let z: f64 = w.iter().sum::<f64>() * dtheta;
    let mut f = DVector::zeros(half + 2);
    for i in 0..=half {
        f[i] = x[i] - w[i] / z;
    }
    f[half + 1] = (0..N).map(|j| theta(j).cos() * rho(j) * dtheta).sum::<f64>() - r;
    f
}

/// T of the one-bump state with <cos theta> = r (Newton from a von Mises guess at T0).
fn independent_t(kernel: Kernel, beta: f64, r: f64, t0: f64) -> f64 {
    let half = N / 2;
    // kappa with I_1/I_0 = r, roughly: bisection.
    let (mut lo, mut hi) = (1e-6, 200.0);
    for _ in 0..80 {
        let mid = 0.5 * (lo + hi);
        if bessel_i(1, mid) / bessel_i(0, mid) < r {
            lo = mid
        } else {
            hi = mid
        }
    }
    let kappa = lo;
    let mut x = DVector::zeros(half + 2);
    for i in 0..=half {
        x[i] = (kappa * (2.0 * PI * i as f64 / N as f64).cos()).exp() / (2.0 * PI * bessel_i(0, kappa));
    }
    x[half + 1] = t0;
    for _ in 0..40 {
        let f = residual(kernel, beta, r, &x);
        let mut jac = DMatrix::zeros(half + 2, half + 2);
        for j in 0..half + 2 {
            let h = 1e-7 * x[j].abs().max(1e-3);
            let mut xp = x.clone();
            xp[j] += h;
            let mut xm = x.clone();
            xm[j] -= h;
            let col = (residual(kernel, beta, r, &xp) - residual(kernel, beta, r, &xm)) / (2.0 * h);
            jac.set_column(j, &col);
        }
        let step = jac.lu().solve(&f).expect("independent Newton");
        x -= &step;
        if step.norm() < 1e-13 {
            break;
        }
    }
    assert!(residual(kernel, beta, r, &x).norm() < 1e-10);
    x[half + 1]
}

/// The largest T over <cos theta> (the fold) by golden-section search in [a, b].
fn independent_fold(beta: f64, a: f64, b: f64, t0: f64) -> (f64, f64) {
    let g = 0.5 * (5f64.sqrt() - 1.0);
    let (mut a, mut b) = (a, b);
    let f = |r: f64| independent_t(Kernel::Usa, beta, r, t0);
    let (mut c, mut d) = (b - g * (b - a), a + g * (b - a));
    let (mut fc, mut fd) = (f(c), f(d));
    for _ in 0..22 {
        if fc > fd {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = f(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = f(d);
        }
    }
    let r = 0.5 * (a + b);
    (f(r), r)
}

fn family(kernel: Kernel, beta: f64) -> Family {
    Family {
        kernel,
        parameter: Parameter::Temperature,
        other: beta,
    }
}

#[test]
fn branch_points_are_c1_over_beta() {
    for beta in [1.0, 5.0] {
        let bp = stationary::branch_point(&family(Kernel::Usa, beta)).unwrap();
        assert!((bp - bessel_i(1, beta) / beta).abs() < 1e-9, "{bp}");
        let bp = stationary::branch_point(&family(Kernel::Sa, beta)).unwrap();
        let want = bessel_i(1, beta) / (beta * bessel_i(0, beta));
        assert!((bp - want).abs() < 1e-9, "{bp} {want}");
    }
    // Along beta at T = 0.56515910 (usa) the BP is beta = 1.
    let along = Family {
        kernel: Kernel::Usa,
        parameter: Parameter::Beta,
        other: bessel_i(1, 1.0),
    };
    assert!((stationary::branch_point(&along).unwrap() - 1.0).abs() < 1e-9);
}

#[test]
fn states_at_half_match_the_independent_solution() {
    for (kernel, beta, t0, spec) in [
        (Kernel::Usa, 1.0, 0.5, 0.51132373),
        (Kernel::Usa, 5.0, 5.3, 5.37411914),
        (Kernel::Sa, 5.0, 0.17, 0.16984163),
    ] {
        let ours = stationary::state_at(family(kernel, beta), 0.5, None).unwrap();
        let theirs = independent_t(kernel, beta, 0.5, t0);
        assert!((ours.p - theirs).abs() < 1e-8, "{kernel:?} {beta}: {} vs {theirs}", ours.p);
        // SPEC 8a's values (8 digits).
        assert!((ours.p - spec).abs() < 1e-7, "{} vs {spec}", ours.p);
    }
}

fn fold_of(b: &stationary::Branches) -> Vec<(f64, f64)> {
    b.bump
        .iter()
        .filter(|p| p.point == Some("LP"))
        .map(|p| (p.p, p.r1))
        .collect()
}

#[test]
fn usa_beta_5_folds_at_the_independent_fold_with_stability() {
    let b = stationary::continue_states(family(Kernel::Usa, 5.0), 4.0, 6.0, 0.05, 2000);
    let tc = bessel_i(1, 5.0) / 5.0;
    let bps: Vec<_> = b.uniform.iter().filter(|p| p.point == Some("BP")).collect();
    assert_eq!(bps.len(), 1);
    assert!((bps[0].p - tc).abs() < 1e-9);
    let folds = fold_of(&b);
    assert_eq!(folds.len(), 1, "{folds:?}");
    let (tf, rf) = independent_fold(5.0, 0.55, 0.68, 5.4);
    assert!((folds[0].0 - tf).abs() < 1e-6, "{:?} vs {tf}", folds[0]);
    assert!((folds[0].0 - 5.42591587).abs() < 1e-6);
    assert!((folds[0].1 - rf).abs() < 2e-3 && (folds[0].1 - 0.61419).abs() < 1e-4);
    // Uniform: stable exactly above T_c.
    for p in &b.uniform {
        if (p.p - tc).abs() > 1e-9 {
            assert_eq!(p.stable, p.p > tc, "{p:?}");
        }
    }
    // The bump branch: unstable below the fold's |R1|, stable above (away from both ends).
    let mut seen = [false; 2];
    for p in &b.bump {
        if p.r1 > 0.02 && p.r1 < folds[0].1 - 0.02 {
            assert!(!p.stable, "{p:?}");
            seen[0] = true;
        }
        if p.r1 > folds[0].1 + 0.02 {
            assert!(p.stable, "{p:?}");
            seen[1] = true;
        }
    }
    assert_eq!(seen, [true, true]);
    assert_eq!(b.end, Some("range"));
}

#[test]
fn a_fold_exactly_when_beta_exceeds_beta_star() {
    for (beta, fold) in [(2.3, false), (2.6, true), (1.0, false)] {
        let tc = bessel_i(1, beta) / beta;
        let b = stationary::continue_states(family(Kernel::Usa, beta), 0.6 * tc, 1.2 * tc, 0.02, 4000);
        assert_eq!(!fold_of(&b).is_empty(), fold, "beta = {beta}: {:?}", fold_of(&b));
    }
    // sa, beta = 5: continuous (no fold), the bump stable.
    let b = stationary::continue_states(family(Kernel::Sa, 5.0), 0.1, 0.3, 0.005, 4000);
    assert!(fold_of(&b).is_empty());
    assert!(b.bump.iter().filter(|p| p.r1 > 0.05).all(|p| p.stable));
}

/// |R1| after advancing the mean field from `rho` (grid values) plus eps cos(theta) / pi.
fn relax(beta: f64, t: f64, rho: &[f64], eps: f64, time: f64) -> f64 {
    let m = rho.len();
    let values: Vec<f64> = (0..m)
        .map(|j| rho[j] + eps * (2.0 * PI * j as f64 / m as f64).cos() / PI)
        .collect();
    let mut c = mean_field::circle::analyse(&values);
    mean_field::circle::truncate(&mut c);
    let identity = [[1.0, 0.0], [0.0, 1.0]];
    let problem = MeanFieldProblem {
        kernel: Kernel::Usa,
        beta,
        heads: vec![MeanFieldHead {
            a: identity,
            v: identity,
        }],
        temperature: t,
        start: StartDensity {
            shape: tokdyn::scenario::DensityInit::Uniform,
            modes: vec![],
        },
        rtol: 1e-10,
        atol: 1e-13,
        t_end: time,
        samples: 2,
        grid: Some(m),
        max_grid: m,
    };
    mean_field::advance_fixed_grid(&problem, &mut c, time);
    mean_field::order_parameters(&c).r1.unwrap()
}

#[test]
fn the_time_stepper_leaves_the_lower_branch_and_returns_to_the_upper() {
    let fam = family(Kernel::Usa, 5.0);
    for (r1, stable) in [(0.5, false), (0.8, true)] {
        let s = stationary::state_at(fam, r1, None).unwrap();
        assert_eq!(s.rate.unwrap() < 0.0, stable, "{:?}", s.rate);
        let eps = 1e-3;
        let moved = relax(5.0, s.p, &s.rho, eps, 30.0);
        let start = r1 + eps;
        if stable {
            assert!((moved - r1).abs() < 0.2 * (start - r1), "{moved}");
        } else {
            assert!((moved - r1).abs() > 5.0 * (start - r1), "{moved}");
        }
    }
}
