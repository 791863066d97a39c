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
fn residual(
    kernel: Kernel,
    beta: f64,
    r: f64,
    x: &DVector<f64>,
    kmat: &DMatrix<f64>,
) -> DVector<f64> {
    let half = N / 2;
    let t = x[half + 1];
    let theta = |j: usize| 2.0 * PI * j as f64 / N as f64;
    let rho = |j: usize| x[if j <= half { j } else { N - j }];
    let dtheta = 2.0 * PI / N as f64;
    let phi: Vec<f64> = (0..N)
        .map(|i| {
            let conv: f64 = (0..N).map(|j| kmat[(i, j)] * rho(j) * dtheta).sum();
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
    f[half + 1] = (0..N)
        .map(|j| theta(j).cos() * rho(j) * dtheta)
        .sum::<f64>()
        - r;
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
        x[i] = (kappa * (2.0 * PI * i as f64 / N as f64).cos()).exp()
            / (2.0 * PI * bessel_i(0, kappa));
    }
    x[half + 1] = t0;
    // The kernel e^{beta cos(theta_i - theta_j)} on the grid.
    let kmat = DMatrix::from_fn(N, N, |i, j| {
        (beta * (2.0 * PI * (i as f64 - j as f64) / N as f64).cos()).exp()
    });
    let residual = |kernel, beta, r, x: &DVector<f64>| residual(kernel, beta, r, x, &kmat);
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
        d: 2,
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
        d: 2,
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
        assert!(
            (ours.p - theirs).abs() < 1e-8,
            "{kernel:?} {beta}: {} vs {theirs}",
            ours.p
        );
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
        let b =
            stationary::continue_states(family(Kernel::Usa, beta), 0.6 * tc, 1.2 * tc, 0.02, 4000);
        assert_eq!(
            !fold_of(&b).is_empty(),
            fold,
            "beta = {beta}: {:?}",
            fold_of(&b)
        );
    }
    // sa, beta = 5: continuous (no fold), the bump stable.
    let b = stationary::continue_states(family(Kernel::Sa, 5.0), 0.1, 0.3, 0.01, 4000);
    assert!(fold_of(&b).is_empty());
    assert!(b.bump.iter().filter(|p| p.r1 > 0.05).all(|p| p.stable));
}

/// |R1| after advancing the mean field from `rho` (grid values) plus eps cos(theta) / pi.
fn relax(beta: f64, t: f64, rho: &[f64], eps: f64, time: f64) -> f64 {
    let m = rho.len();
    let values: Vec<f64> = (0..m)
        .map(|j| rho[j] + eps * (2.0 * PI * j as f64 / m as f64).cos() / PI)
        .collect();
    // On 128 points (the density is resolved there: its modes past 40 are below 1e-16).
    let m = 128;
    let mut c = mean_field::circle::resample(&mean_field::circle::analyse(&values), m);
    mean_field::circle::truncate(&mut c);
    let identity = [[1.0, 0.0], [0.0, 1.0]];
    let problem = MeanFieldProblem {
        d: 2,
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
        rtol: 1e-8,
        atol: 1e-12,
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

/// A mean-field base scenario (usa, beta = 5, A = V = I) with `extra` lines.
fn base_scenario(extra: &str) -> String {
    format!(
        r#"name = "stationary-base"
[model]
kernel = "usa"
beta = 5.0
d = 2
A = "identity"
V = "identity"
{extra}
[tokens]
n = 1
init = "uniform"

[noise]
temperature = 5.2

[time]
t_end = 10.0
samples = 11

[run]
model = "mean-field"
"#
    )
}

/// Runs `tokdyn sweep` on a sweep file `sweep` over the base `base`; returns (status, stderr,
/// output folder).
fn sweep(base: &str, sweep: &str) -> (i32, String, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("base.toml"), base).unwrap();
    let file = dir.path().join("sw.toml");
    std::fs::write(
        &file,
        format!("name = \"stationary\"\nscenario = \"base.toml\"\n{sweep}"),
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

const TEMPERATURE: &str =
    "[continuation]\nparameter = \"noise.temperature\"\nfrom = 4.5\nto = 5.6\nstep = 0.05\n";

#[test]
fn the_sweep_writes_branches_special_points_and_the_picture() {
    let (code, err, out, _keep) = sweep(&base_scenario(""), TEMPERATURE);
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
    let points: Vec<(&str, f64)> = rows
        .iter()
        .filter(|r| !r[4].is_empty())
        .map(|r| (r[4], r[1].parse().unwrap()))
        .collect();
    assert_eq!(points.len(), 2, "{points:?}");
    let tc = bessel_i(1, 5.0) / 5.0;
    assert!(points
        .iter()
        .any(|(k, p)| *k == "BP" && (p - tc).abs() < 1e-9));
    assert!(points
        .iter()
        .any(|(k, p)| *k == "LP" && (p - 5.42591587).abs() < 1e-6));
    // The uniform branch: r1 = 0, stable exactly above T_c.
    for r in rows.iter().filter(|r| r[0] == "1") {
        let p: f64 = r[1].parse().unwrap();
        assert_eq!(r[2].parse::<f64>().unwrap(), 0.0);
        if (p - tc).abs() > 1e-9 {
            assert_eq!(r[3] == "true", p > tc, "{r:?}");
        }
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("special_points.json")).unwrap())
            .unwrap();
    let list = json.as_array().unwrap();
    assert_eq!(list.len(), 2);
    for record in list {
        assert!(record["type"] == "BP" || record["type"] == "LP");
        assert!(record["parameters"]["noise.temperature"].is_f64());
        assert!(record["r1"].is_f64());
    }
    assert!(out.join("bifurcation.png").exists());
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["continuation"]["bump_end"], "range");
}

#[test]
fn bad_continuations_are_one_error_line_and_no_folder() {
    let cases: Vec<(String, String, &str)> = vec![
        (
            base_scenario(""),
            TEMPERATURE.replace("noise.temperature", "model.d"),
            "continuation.parameter",
        ),
        (
            base_scenario("").replace("A = \"identity\"", "A = [[1.0, 0.2], [0.0, 1.0]]"),
            TEMPERATURE.into(),
            "continuation",
        ),
        (
            base_scenario("").replace("V = \"identity\"", "V = [[0.0, 1.0], [-1.0, 0.0]]"),
            TEMPERATURE.into(),
            "continuation",
        ),
        (
            base_scenario("").replace("\"usa\"", "\"lsa\""),
            TEMPERATURE.into(),
            "continuation",
        ),
        (
            base_scenario("mask = \"causal\""),
            TEMPERATURE.into(),
            "model.mask",
        ),
        (
            base_scenario("[model.position.alibi]\nslopes = [0.5]"),
            TEMPERATURE.into(),
            "model.position",
        ),
        (
            base_scenario(""),
            TEMPERATURE.replace("from = 4.5", "from = -1.0"),
            "continuation.from",
        ),
        (
            base_scenario("").replace("temperature = 5.2", "temperature = 0.0"),
            TEMPERATURE.replace("noise.temperature", "model.beta"),
            "noise.temperature",
        ),
        (
            base_scenario("").replace("d = 2", "d = 40"),
            TEMPERATURE.into(),
            "model.d",
        ),
    ];
    for (base, sw, key) in cases {
        let (code, err, out, _keep) = sweep(&base, &sw);
        assert_eq!(code, 2, "{key}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].starts_with("error: "), "{err}");
        assert!(lines[0].contains(key), "{key}: {err}");
        assert!(lines[0].contains(".toml"), "{err}");
        assert!(!out.exists(), "{key}: a folder was written");
    }
}

#[test]
fn the_sweep_follows_beta_too() {
    // T = c_1(beta = 1) / 1: the BP is at beta = 1 (usa); beta* = 2.45 is beyond the range,
    // so no fold.
    let base = base_scenario("").replace(
        "temperature = 5.2",
        &format!("temperature = {}", bessel_i(1, 1.0)),
    );
    let sw = "[continuation]\nparameter = \"model.beta\"\nfrom = 0.8\nto = 1.6\nstep = 0.05\n";
    let (code, err, out, _keep) = sweep(&base, sw);
    assert_eq!(code, 0, "{err}");
    let csv = std::fs::read_to_string(out.join("branches.csv")).unwrap();
    assert!(csv.starts_with("branch,model.beta,r1_abs,stable,point\n"));
    let bp: Vec<f64> = csv
        .lines()
        .filter(|l| l.ends_with(",BP"))
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(bp.len(), 1);
    assert!((bp[0] - 1.0).abs() < 1e-9, "{bp:?}");
    assert!(!csv.contains("LP"));
    // Supercritical in beta: the bump exists above beta = 1 and is stable there.
    let bumps: Vec<(f64, f64, bool)> = csv
        .lines()
        .filter(|l| l.starts_with("2,"))
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            (c[1].parse().unwrap(), c[2].parse().unwrap(), c[3] == "true")
        })
        .collect();
    assert!(bumps.iter().all(|b| b.0 >= 1.0 - 1e-9));
    assert!(
        bumps.iter().filter(|b| b.1 > 0.05).all(|b| b.2),
        "{bumps:?}"
    );
}
