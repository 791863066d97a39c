//! Stationary axisymmetric densities of the mean field on S^{d-1}, d >= 3 (A = V = I), and
//! their branches, against independent results written here: the Funk–Hecke coefficient c_1 by
//! the Bessel power series, the d = 3 self-consistency solved by Newton on the density's values
//! on a grid in u (the kernel averaged over the azimuth, e^{beta u v} I_0(beta s s'), Simpson's
//! rule), and the stability by the d >= 3 mean-field time stepper.

use nalgebra::{DMatrix, DVector};
use num_complex::Complex64;
use tokdyn::bifurcation::stationary::{self, Family, Parameter};
use tokdyn::mean_field::start::Shape;
use tokdyn::mean_field::{self, gegenbauer, Kernel, MeanFieldHead, MeanFieldProblem, StartDensity};

/// Gamma(z) for z a positive multiple of 1/2.
fn gamma_half(z: f64) -> f64 {
    let (mut w, mut g) = if z.fract() == 0.0 {
        (1.0, 1.0)
    } else {
        (0.5, std::f64::consts::PI.sqrt())
    };
    while w < z - 0.25 {
        g *= w;
        w += 1.0;
    }
    g
}

/// I_nu(x) by its power series (nu a multiple of 1/2).
fn bessel_i(nu: f64, x: f64) -> f64 {
    let mut term = (x / 2.0).powf(nu) / gamma_half(nu + 1.0);
    let mut sum = term;
    for k in 1..300 {
        term *= (x / 2.0).powi(2) / (k as f64 * (k as f64 + nu));
        sum += term;
        if term < 1e-18 * sum {
            break;
        }
    }
    sum
}

/// c_1 = Gamma(d/2) (2/beta)^{d/2-1} I_{d/2}(beta).
fn c1(d: usize, beta: f64) -> f64 {
    let h = d as f64 / 2.0;
    gamma_half(h) * (2.0 / beta).powf(h - 1.0) * bessel_i(h, beta)
}

fn family(d: usize, beta: f64) -> Family {
    Family {
        kernel: Kernel::Usa,
        parameter: Parameter::Temperature,
        other: beta,
        d,
    }
}

#[test]
fn branch_points_are_c1_over_beta_in_d_3_and_4() {
    for (d, beta) in [(3, 2.0), (3, 1.6), (4, 3.0)] {
        let bp = stationary::branch_point(&family(d, beta)).unwrap();
        let want = c1(d, beta) / beta;
        assert!((bp - want).abs() < 1e-7 * want, "d = {d}: {bp} vs {want}");
    }
    // d = 3: c_1 = (beta cosh beta - sinh beta) / beta^2 in closed form.
    let b: f64 = 2.0;
    let closed = (b * b.cosh() - b.sinh()) / (b * b);
    assert!((c1(3, b) - closed).abs() < 1e-12);
}

/// The continuation's folds (T, |R1|).
fn folds(b: &stationary::Branches) -> Vec<(f64, f64)> {
    b.bump
        .iter()
        .filter(|p| p.point == Some("LP"))
        .map(|p| (p.p, p.r1))
        .collect()
}

#[test]
fn a_fold_past_beta_star_and_none_below_in_d_3() {
    // beta* = 1.8162: the bump leaves T_c backwards (to T > T_c) and folds when beta > beta*.
    let tc = c1(3, 2.0) / 2.0;
    let b = stationary::continue_states(family(3, 2.0), 0.7 * tc, 1.3 * tc, 0.02, 2000);
    let lp = folds(&b);
    assert_eq!(lp.len(), 1, "{lp:?} {:?}", b.end);
    assert!(lp[0].0 > tc && lp[0].1 > 0.0, "{lp:?}");
    // Below the fold's |R1| the bump is unstable, above stable (axisymmetric perturbations).
    for p in b.bump.iter().filter(|p| p.r1 > 0.0 && p.point.is_none()) {
        if (p.r1 - lp[0].1).abs() > 0.02 {
            assert_eq!(p.stable, p.r1 > lp[0].1, "{p:?}");
        }
    }
    let tc = c1(3, 1.6) / 1.6;
    let b = stationary::continue_states(family(3, 1.6), 0.5 * tc, 1.3 * tc, 0.02, 2000);
    assert!(folds(&b).is_empty());
    assert!(b.bump.iter().all(|p| p.p <= tc * (1.0 + 1e-9)));
    assert!(b.bump.iter().filter(|p| p.r1 > 0.02).all(|p| p.stable));
}

/// Points of the independent grid in u (even: Simpson).
const N: usize = 400;

/// Simpson's weights for (1/2) int_{-1}^{1} on N + 1 points.
fn simpson() -> (Vec<f64>, Vec<f64>) {
    let h = 2.0 / N as f64;
    let u = (0..=N).map(|j| -1.0 + h * j as f64).collect();
    let w = (0..=N)
        .map(|j| {
            let k = match j {
                0 | N => 1.0,
                j if j % 2 == 1 => 4.0,
                _ => 2.0,
            };
            k * h / 6.0
        })
        .collect();
    (u, w)
}

/// T of the d = 3 usa state with <u> = r: Newton on x = (rho(u_0) .. rho(u_N), T), the
/// residual rho - e^{(K * rho)/(beta T)} / Z and <u> - r, a finite-difference Jacobian.
fn independent_t(beta: f64, r: f64) -> f64 {
    let (u, w) = simpson();
    // (K * rho)(u_i) = (1/2) int e^{beta u v} I_0(beta s_u s_v) rho(v) dv.
    let kmat = DMatrix::from_fn(N + 1, N + 1, |i, j| {
        let s = ((1.0 - u[i] * u[i]) * (1.0 - u[j] * u[j])).max(0.0).sqrt();
        (beta * u[i] * u[j]).exp() * bessel_i(0.0, beta * s) * w[j]
    });
    let residual = |x: &DVector<f64>| -> DVector<f64> {
        let t = x[N + 1];
        let rho = x.rows(0, N + 1);
        let phi = (&kmat * rho) / (beta * t);
        let top = phi.max();
        let e: Vec<f64> = phi.iter().map(|p| (p - top).exp()).collect();
        let z: f64 = e.iter().zip(&w).map(|(a, b)| a * b).sum();
        let mut f = DVector::zeros(N + 2);
        for i in 0..=N {
            f[i] = x[i] - e[i] / z;
        }
        f[N + 1] = (0..=N).map(|j| w[j] * u[j] * x[j]).sum::<f64>() - r;
        f
    };
    // Guess: rho = e^{kappa u} normalised with coth kappa - 1/kappa = r; T from the first mode.
    let (mut lo, mut hi) = (1e-6, 100.0);
    for _ in 0..80 {
        let mid: f64 = 0.5 * (lo + hi);
        if 1.0 / mid.tanh() - 1.0 / mid < r {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let kappa = lo;
    let mut x = DVector::zeros(N + 2);
    for i in 0..=N {
        x[i] = kappa * (kappa * u[i]).exp() / kappa.sinh();
    }
    x[N + 1] = 3.0 * c1(3, beta) * r / (beta * kappa);
    for _ in 0..40 {
        let f = residual(&x);
        let mut jac = DMatrix::zeros(N + 2, N + 2);
        for j in 0..N + 2 {
            let h = 1e-7 * x[j].abs().max(1e-3);
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[j] += h;
            xm[j] -= h;
            jac.set_column(j, &((residual(&xp) - residual(&xm)) / (2.0 * h)));
        }
        let step = jac.lu().solve(&f).expect("independent Newton");
        x -= &step;
        if step.norm() < 1e-12 {
            break;
        }
    }
    assert!(residual(&x).norm() < 1e-10);
    x[N + 1]
}

#[test]
fn a_state_of_the_branch_is_the_independent_self_consistent_density() {
    for (beta, r) in [(2.0, 0.3), (2.0, 0.7), (1.6, 0.5)] {
        let s = stationary::state_at(family(3, beta), r, None).unwrap();
        let t = independent_t(beta, r);
        // Simpson's error on N = 400 points: 2e-8 relative at r = 0.7 (1.4e-7 on 200 points).
        assert!(
            (s.p - t).abs() < 1e-7 * t,
            "beta {beta} r {r}: {} vs {t}",
            s.p
        );
    }
}

/// Runs the d = 3 usa mean field from the density `rho` at the Gauss nodes plus eps P_1 for
/// `time` at temperature t; returns <u> at the end.
fn relax(beta: f64, t: f64, rho: &[f64], eps: f64, time: f64) -> f64 {
    let d = 3;
    let (u, w) = gegenbauer::nodes(d, rho.len());
    let total: f64 = w.iter().sum();
    let top = 60;
    let mut p = vec![0.0; top + 1];
    let mut a = vec![0.0; top + 1];
    for (x, (q, r)) in u.iter().zip(w.iter().zip(rho)) {
        gegenbauer::polynomials(d, top, *x, &mut p);
        for l in 1..=top {
            a[l] += gegenbauer::dimension(d, l) * q / total * r * p[l];
        }
    }
    a[1] += eps;
    let modes = (1..=top).map(|l| (l as u32, a[l], 0.0)).collect();
    let problem = MeanFieldProblem {
        d,
        kernel: Kernel::Usa,
        beta,
        heads: vec![MeanFieldHead {
            a: [[1.0, 0.0], [0.0, 1.0]],
            v: [[1.0, 0.0], [0.0, 1.0]],
        }],
        temperature: t,
        start: StartDensity {
            shape: Shape::Uniform,
            modes,
        },
        rtol: 1e-10,
        atol: 1e-14,
        t_end: time,
        samples: 2,
        grid: Some(128),
        max_grid: 256,
    };
    let run = mean_field::solve(&problem, &mut []).unwrap();
    assert!(run.solution.status.is_success());
    let last: &Vec<Complex64> = run.history.last().unwrap();
    // <u> from the state by the library's exact moment (its coefficients are its own).
    mean_field::sphere::moments(last, d).0
}

#[test]
fn the_time_stepper_leaves_the_lower_branch_and_stays_on_the_upper_in_d_3() {
    // beta = 3: the fold is at |R1| = 0.64; the lower branch's rate at 0.45 is about 0.16.
    let fam = family(3, 3.0);
    for (r1, stable) in [(0.45, false), (0.8, true)] {
        let s = stationary::state_at(fam, r1, None).unwrap();
        assert_eq!(s.rate.unwrap() < 0.0, stable, "{:?}", s.rate);
        let eps = 3e-3;
        let moved = relax(3.0, s.p, &s.rho, eps, 30.0);
        eprintln!("r1 {r1}: T {} rate {:?} moved {moved}", s.p, s.rate);
        let start = r1 + eps / 3.0;
        if stable {
            // Back on the state itself: the stepper's stationary <u> is the branch's.
            assert!((moved - r1).abs() < 1e-6, "{moved}");
        } else {
            assert!((moved - r1).abs() > 5.0 * (start - r1), "{moved}");
        }
    }
}

#[test]
fn the_uniform_rates_follow_the_dispersion_relation_in_d_4() {
    // At the uniform state (R1 -> 0 along the branch from the BP) the bump's rate is 0; the
    // uniform branch's rows carry c_1/beta - T.
    let (d, beta) = (4, 3.0);
    let tc = c1(d, beta) / beta;
    let b = stationary::continue_states(family(d, beta), 0.8 * tc, 1.2 * tc, 0.05, 200);
    let bp: Vec<f64> = b
        .uniform
        .iter()
        .filter(|p| p.point == Some("BP"))
        .map(|p| p.p)
        .collect();
    assert_eq!(bp.len(), 1);
    assert!((bp[0] - tc).abs() < 1e-7 * tc);
    for p in &b.uniform {
        assert!((p.rate - (tc - p.p)).abs() < 1e-9, "{p:?}");
    }
}

#[test]
fn the_axisymmetric_operator_at_the_uniform_state_has_the_dispersion_rates() {
    // d = 4: lambda_l = l (l + 2) (c_l / beta - T), c_l = Gamma(2) (2/beta) I_{l+1}(beta).
    let (d, beta) = (4, 3.0);
    let fam = family(d, beta);
    for t in [0.5, 0.9] {
        let want = (1..=8)
            .map(|l| {
                let c = (2.0 / beta) * bessel_i(l as f64 + 1.0, beta);
                (l * (l + 2)) as f64 * (c / beta - t)
            })
            .fold(f64::NEG_INFINITY, f64::max);
        let got = stationary::stability_sphere::leading_rate(&fam, beta, t, &[1.0; 64], 8).unwrap();
        assert!(
            (got - want).abs() < 1e-9 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }
}

/// Runs `tokdyn sweep` with a `[continuation]` over a d = 3 usa mean-field base (beta = 2,
/// A = V = I); returns (status, stderr, output folder).
fn sweep_d3(continuation: &str) -> (i32, String, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let base = "name = \"sphere-base\"\n[model]\nkernel = \"usa\"\nbeta = 2.0\nd = 3\nA = \"identity\"\nV = \"identity\"\n[tokens]\nn = 1\ninit = \"uniform\"\n[noise]\ntemperature = 0.4\n[time]\nt_end = 10.0\nsamples = 11\n[run]\nmodel = \"mean-field\"\n";
    std::fs::write(dir.path().join("base.toml"), base).unwrap();
    let file = dir.path().join("sw.toml");
    std::fs::write(
        &file,
        format!("name = \"sphere\"\nscenario = \"base.toml\"\n{continuation}"),
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = assert_cmd::Command::cargo_bin("tokdyn")
        .unwrap()
        .arg("sweep")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        out,
        dir,
    )
}

#[test]
fn the_sweep_in_d_3_writes_branches_special_points_and_the_picture() {
    let tc = c1(3, 2.0) / 2.0;
    let (code, err, out, _keep) = sweep_d3(
        "[continuation]\nparameter = \"noise.temperature\"\nfrom = 0.4\nto = 0.55\nstep = 0.01\n",
    );
    assert_eq!(code, 0, "{err}");
    let csv = std::fs::read_to_string(out.join("branches.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("branch,noise.temperature,r1_abs,stable,point")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows
        .iter()
        .all(|r| r.len() == 5 && !r.iter().any(|c| c.contains("NaN"))));
    let points: Vec<(&str, f64, f64)> = rows
        .iter()
        .filter(|r| !r[4].is_empty())
        .map(|r| (r[4], r[1].parse().unwrap(), r[2].parse().unwrap()))
        .collect();
    assert_eq!(points.len(), 2, "{points:?}");
    assert!(points
        .iter()
        .any(|(k, p, _)| *k == "BP" && (p - tc).abs() < 1e-9));
    // The fold lies above T_c (beta = 2 > beta*), its T the largest of the bump branch.
    let lp = points.iter().find(|(k, _, _)| *k == "LP").unwrap();
    assert!(lp.1 > tc && lp.2 > 0.0, "{lp:?}");
    let top = rows
        .iter()
        .filter(|r| r[0] == "2")
        .map(|r| r[1].parse::<f64>().unwrap())
        .fold(f64::NEG_INFINITY, f64::max);
    assert!((top - lp.1).abs() < 1e-12, "{top} {lp:?}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("special_points.json")).unwrap())
            .unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);
    assert!(out.join("bifurcation.png").exists());
    assert!(out.join("summary.json").exists());
}
