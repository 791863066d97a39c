//! The axisymmetric mean field in d >= 3 (`--model mean-field`, docs/MATH.md §17.2) against
//! independent results: the dispersion relation of the uniform state (Funk–Hecke coefficients
//! by the test's own trapezoid rule in the polar angle), mass conservation, the noisy
//! stationary state by the test's own fixed point of rho = e^{Phi/T} / Z, the concentration stop
//! and the bad inputs.

use std::f64::consts::PI;

use num_complex::Complex64;
use tokdyn::mean_field::start::Shape;
use tokdyn::mean_field::{self, sphere, Kernel, MeanFieldHead, MeanFieldProblem, StartDensity};

const I2: [[f64; 2]; 2] = [[1.0, 0.0], [0.0, 1.0]];

/// P_l(cos theta) of S^{d-1}, P_l(1) = 1: Legendre (d = 3) or U_l / (l + 1) (d = 4), by their
/// own closed forms.
fn p_l(d: usize, l: usize, theta: f64) -> f64 {
    match d {
        3 => {
            let x = theta.cos();
            let (mut a, mut b) = (1.0, x);
            if l == 0 {
                return 1.0;
            }
            for k in 1..l {
                let kf = k as f64;
                (a, b) = (b, ((2.0 * kf + 1.0) * x * b - kf * a) / (kf + 1.0));
            }
            b
        }
        4 => {
            let s = theta.sin();
            if s.abs() < 1e-12 {
                return 1.0;
            }
            ((l + 1) as f64 * theta).sin() / ((l + 1) as f64 * s)
        }
        // Any d, l <= 2: P_1 = u, P_2 = (d u^2 - 1) / (d - 1) (mean zero, P_2(1) = 1).
        _ => {
            let u = theta.cos();
            [1.0, u, (d as f64 * u * u - 1.0) / (d as f64 - 1.0)][l]
        }
    }
}

/// Simpson's weights on n + 1 points of [-1, 1] (n even), for (1/2) int_{-1}^{1}.
fn simpson(n: usize) -> (Vec<f64>, Vec<f64>) {
    let h = 2.0 / n as f64;
    let u = (0..=n).map(|j| -1.0 + h * j as f64).collect();
    let w = (0..=n)
        .map(|j| {
            let k = if j == 0 || j == n {
                1.0
            } else if j % 2 == 1 {
                4.0
            } else {
                2.0
            };
            k * h / 3.0 / 2.0
        })
        .collect();
    (u, w)
}

/// The sphere's mean of g(theta): d = 3, (1/2) int g du by Simpson in u = cos theta; d >= 4,
/// int_0^pi g sin^{d-2} / int_0^pi sin^{d-2} by the trapezoid rule (periodic: spectrally
/// accurate).
fn sphere_mean(d: usize, g: impl Fn(f64) -> f64) -> f64 {
    if d == 3 {
        let (u, w) = simpson(20000);
        return u
            .iter()
            .zip(&w)
            .map(|(u, w)| w * g(u.clamp(-1.0, 1.0).acos()))
            .sum();
    }
    let n = 4000;
    let (mut num, mut den) = (0.0, 0.0);
    for j in 1..n {
        let theta = PI * j as f64 / n as f64;
        let w = theta.sin().powi(d as i32 - 2);
        num += g(theta) * w;
        den += w;
    }
    num / den
}

/// c_l = E[e^{beta t} P_l(t)] (Funk–Hecke), the test's own.
fn c_l(d: usize, beta: f64, l: usize) -> f64 {
    sphere_mean(d, |th| (beta * th.cos()).exp() * p_l(d, l, th))
}

fn problem(d: usize, kernel: Kernel, beta: f64, t: f64, start: StartDensity) -> MeanFieldProblem {
    MeanFieldProblem {
        d,
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
        max_grid: 2048,
    }
}

fn uniform_plus(l: u32, a: f64) -> StartDensity {
    StartDensity {
        shape: Shape::Uniform,
        modes: vec![(l, a, 0.0)],
    }
}

#[test]
fn small_modes_grow_at_the_dispersion_rate_on_the_sphere() {
    let cases = [
        (3, Kernel::Usa, 2.0, 0.1),
        (3, Kernel::Usa, 5.0, 0.5),
        (3, Kernel::Sa, 3.0, 0.05),
        (4, Kernel::Usa, 3.0, 0.2),
    ];
    for (d, kernel, beta, t) in cases {
        for l in 1..=3usize {
            // From f = 1 +- eps P_l: the difference cancels the quadratic terms.
            let eps = 1e-5;
            let dt = 0.5;
            let mut ends = [0.0; 2];
            for (end, sign) in ends.iter_mut().zip([1.0, -1.0]) {
                let mut p = problem(d, kernel, beta, t, uniform_plus(l as u32, sign * eps));
                p.grid = Some(64);
                let len = sphere::top_degree(64) + 1;
                let mut c = vec![Complex64::new(0.0, 0.0); len];
                c[0].re = 1.0;
                c[l].re = sign * eps;
                assert!(mean_field::advance_fixed_grid(&p, &mut c, dt) > 0);
                *end = c[l].re;
            }
            let measured = ((ends[0] - ends[1]) / (2.0 * eps)).ln() / dt;
            let mut factor = c_l(d, beta, l) / beta;
            if kernel == Kernel::Sa {
                factor /= c_l(d, beta, 0);
            }
            let expected = (l * (l + d - 2)) as f64 * (factor - t);
            eprintln!("d {d} {kernel:?} beta {beta} l {l}: {measured:.10} vs {expected:.10}");
            assert!(
                (measured - expected).abs() <= 1e-4 * expected.abs(),
                "d {d} {kernel:?} beta {beta} l {l}: {measured} vs {expected}"
            );
        }
    }
}

#[test]
fn small_modes_grow_at_the_dispersion_rate_in_high_dimension() {
    // d = 40 and 200 (the state's orthonormal modes and the Gauss nodes must hold there):
    // T = half of T_c = c_1 / beta (sa: c_1 / (beta c_0)), so mode 1 grows and mode 2 decays.
    for (d, kernel) in [(40, Kernel::Usa), (200, Kernel::Usa), (200, Kernel::Sa)] {
        let beta = 3.0;
        let scale = |l: usize| {
            let c = c_l(d, beta, l) / beta;
            if kernel == Kernel::Sa {
                c / c_l(d, beta, 0)
            } else {
                c
            }
        };
        let t = 0.5 * scale(1);
        for l in 1..=2usize {
            let eps = 1e-5;
            let dt = 0.5 / t / d as f64;
            let mut ends = [0.0; 2];
            for (end, sign) in ends.iter_mut().zip([1.0, -1.0]) {
                let mut p = problem(d, kernel, beta, t, uniform_plus(l as u32, sign * eps));
                p.grid = Some(64);
                let mut c = vec![Complex64::new(0.0, 0.0); sphere::top_degree(64) + 1];
                c[0].re = 1.0;
                c[l].re = sign * eps;
                assert!(mean_field::advance_fixed_grid(&p, &mut c, dt) > 0);
                *end = c[l].re;
            }
            let measured = ((ends[0] - ends[1]) / (2.0 * eps)).ln() / dt;
            let expected = (l * (l + d - 2)) as f64 * (scale(l) - t);
            eprintln!("d {d} {kernel:?} l {l}: {measured:.10} vs {expected:.10}");
            assert!(
                (measured - expected).abs() <= 1e-4 * expected.abs(),
                "d {d} {kernel:?} l {l}: {measured} vs {expected}"
            );
        }
    }
}

#[test]
fn mass_is_conserved_with_heads_noise_and_softmax() {
    for (d, kernel) in [
        (3, Kernel::Sa),
        (4, Kernel::Usa),
        (5, Kernel::Lsa),
        (120, Kernel::Sa),
    ] {
        let mut p = problem(d, kernel, 3.0, 0.2, uniform_plus(1, 0.3));
        p.heads.push(MeanFieldHead {
            a: [[-0.5, 0.0], [0.0, -0.5]],
            v: [[0.7, 0.0], [0.0, 0.7]],
        });
        p.start.modes.push((3, 0.2, 0.0));
        p.t_end = 3.0;
        p.samples = 4;
        p.rtol = 1e-9;
        let r = mean_field::solve(&p, &mut []).unwrap();
        assert!(r.solution.status.is_success());
        // The density's integral over S^{d-1}: |S^{d-2}| int rho(u) (1 - u^2)^{(d-3)/2} du,
        // by a Gauss rule of twice the grid (exact for the polynomial), rho summed from the
        // coefficients with the test's own closed forms of |S^{d-1}|.
        let area = |k: usize| 2.0 * PI.powf(k as f64 / 2.0) / gamma_half(k as f64 / 2.0);
        let (u, w) = tokdyn::mean_field::gegenbauer::nodes(d, 2 * r.summary.grid);
        for c in &r.history {
            let rho = sphere::density_on(c, d, &u);
            let mass: f64 = area(d - 1) * rho.iter().zip(&w).map(|(r, w)| r * w).sum::<f64>();
            assert!((mass - 1.0).abs() < 1e-12, "d {d} {kernel:?}: mass {mass}");
        }
    }
}

/// Gamma(z), z a positive multiple of 1/2.
fn gamma_half(z: f64) -> f64 {
    let (mut w, mut g) = if z.fract() == 0.0 {
        (1.0, 1.0)
    } else {
        (0.5, PI.sqrt())
    };
    while w < z - 0.25 {
        g *= w;
        w += 1.0;
    }
    g
}

/// <u> of the stationary state rho = e^{Phi/T} / Z of usa on S^2 (A = V = I), Phi =
/// (1/beta) K * rho: the test's own damped fixed point on the Legendre moments a_0 ..= a_L,
/// integrals by Simpson's rule in u.
fn self_consistent_mean(beta: f64, t: f64, guess: f64) -> f64 {
    let top = 40;
    let c: Vec<f64> = (0..=top).map(|l| c_l(3, beta, l)).collect();
    let (u, w) = simpson(4000);
    let table: Vec<Vec<f64>> = u
        .iter()
        .map(|&x| {
            (0..=top)
                .map(|l| p_l(3, l, x.clamp(-1.0, 1.0).acos()))
                .collect()
        })
        .collect();
    let mut a = vec![0.0; top + 1];
    a[0] = 1.0;
    a[1] = 3.0 * guess;
    for _ in 0..5000 {
        let phi: Vec<f64> = table
            .iter()
            .map(|p| (0..=top).map(|l| c[l] * a[l] * p[l]).sum::<f64>() / beta / t)
            .collect();
        let shift = phi.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let f: Vec<f64> = phi.iter().map(|x| (x - shift).exp()).collect();
        let z: f64 = f.iter().zip(&w).map(|(f, w)| f * w).sum();
        let next: Vec<f64> = (0..=top)
            .map(|l| {
                let m: f64 = (0..u.len()).map(|j| w[j] * f[j] * table[j][l]).sum();
                (2 * l + 1) as f64 * m / z
            })
            .collect();
        let change: f64 = next.iter().zip(&a).map(|(x, y)| (x - y).abs()).sum();
        a = next
            .iter()
            .zip(&a)
            .map(|(x, y)| 0.5 * x + 0.5 * y)
            .collect();
        if change < 1e-14 {
            break;
        }
    }
    a[1] / 3.0
}

#[test]
fn the_noisy_bump_on_the_sphere_is_the_self_consistent_state() {
    // usa, d = 3, beta = 2: T_c = c_1 / beta = 0.487; at T = 0.35 the bump is stable.
    let (beta, t) = (2.0, 0.35);
    let expected = self_consistent_mean(beta, t, 0.6);
    assert!(expected > 0.3, "{expected}");
    let mut p = problem(
        3,
        Kernel::Usa,
        beta,
        t,
        StartDensity {
            shape: Shape::VonMises {
                kappa: 2.0,
                mean: 0.0,
            },
            modes: vec![],
        },
    );
    p.t_end = 80.0;
    p.samples = 3;
    p.rtol = 1e-10;
    let r = mean_field::solve(&p, &mut []).unwrap();
    assert!(r.solution.status.is_success());
    let last = r.history.last().unwrap();
    let measured = sphere::moments(last, 3).0;
    eprintln!("<u>: run {measured:.10}, fixed point {expected:.10}");
    assert!(
        (measured - expected).abs() < 1e-7,
        "{measured} vs {expected}"
    );
}

const BASE: &str = r#"
name = "mf-sphere"
[model]
kernel = "usa"
beta = 3.0
d = 3
[tokens]
n = 1
init = "uniform"
[time]
t_end = 20.0
samples = 41
[solver]
rtol = 1e-8
atol = 1e-12
[run]
model = "mean-field"
"#;

/// Runs `tokdyn run` on BASE with `extra` appended; returns (status, stderr, output folder).
fn cli(extra: &str) -> (i32, String, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mf.toml");
    let (head, tail) = BASE.split_once("[tokens]").unwrap();
    let (model_extra, rest) = extra.split_once("---").unwrap_or(("", extra));
    std::fs::write(
        &file,
        format!("{head}{model_extra}\n[tokens]{tail}\n{rest}"),
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = assert_cmd::Command::cargo_bin("tokdyn")
        .unwrap()
        .arg("run")
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
fn a_concentrating_density_on_the_sphere_stops_with_its_peak_and_no_nan() {
    // T = 0, beta = 3: the first mode grows and most of the mass gathers at the pole u = 1;
    // the mass near u = -1 leaves slowly (the push there is of order e^{-2 beta}), a second
    // peak.
    let (code, err, out, _keep) = cli(
        "A = \"identity\"\nV = \"identity\"\n---[density]\nmodes = [[1, 0.1]]\nmax_grid = 256\n",
    );
    assert_eq!(code, 0, "{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let mf = &summary["mean_field"];
    let stop = &mf["stop"];
    let t = stop["t"].as_f64().unwrap();
    assert!(t > 0.5 && t < 20.0, "{mf}");
    let peaks = stop["peaks"].as_array().unwrap();
    assert!(!peaks.is_empty(), "{mf}");
    let mass: f64 = peaks.iter().map(|p| p["mass"].as_f64().unwrap()).sum();
    assert!((mass - 1.0).abs() < 1e-2, "{mf}");
    assert!(peaks[0]["theta"].as_f64().unwrap() < 0.1, "{mf}");
    assert!(peaks[0]["mass"].as_f64().unwrap() > 0.5, "{mf}");
    let order = std::fs::read_to_string(out.join("order.csv")).unwrap();
    assert!(!order.to_lowercase().contains("nan") && !order.contains("inf"));
    let rows = order.lines().count() - 1;
    assert_eq!(rows as u64, summary["samples"].as_u64().unwrap());
    // R1 = <u> rises towards 1.
    let last: Vec<&str> = order.lines().last().unwrap().split(',').collect();
    let header: Vec<&str> = order.lines().next().unwrap().split(',').collect();
    let r1 = header.iter().position(|h| *h == "r1_abs").unwrap();
    assert!(last[r1].parse::<f64>().unwrap() > 0.3, "{order}");
    let npy = std::fs::read(out.join("density.npy")).unwrap();
    let header = u16::from_le_bytes([npy[8], npy[9]]) as usize;
    let values: Vec<f64> = npy[10 + header..]
        .chunks(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(values.len(), rows * mf["grid"].as_u64().unwrap() as usize);
    assert!(values.iter().all(|x| x.is_finite()));
    let grid = std::fs::read_to_string(out.join("density_grid.csv")).unwrap();
    assert!(grid.starts_with("u\n"));
    let u: Vec<f64> = grid.lines().skip(1).map(|l| l.parse().unwrap()).collect();
    assert_eq!(u.len(), mf["grid"].as_u64().unwrap() as usize);
    assert!(u.windows(2).all(|p| p[0] < p[1]) && u[0] > -1.0 && u[u.len() - 1] < 1.0);
    assert!(out.join("density.png").exists());
}

#[test]
fn bad_inputs_on_the_sphere_are_one_error_line_and_no_folder() {
    let id = "A = \"identity\"\nV = \"identity\"\n";
    let cases: Vec<(String, &str)> = vec![
        (
            "A = [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 1.0]]\nV = \"identity\"\n---".into(),
            "model.A",
        ),
        (
            "A = \"identity\"\nV = [[1.0, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]\n---".into(),
            "model.V",
        ),
        (
            format!("{id}---[density]\ninit = \"poisson\"\nr0 = 0.3\n"),
            "density.init",
        ),
        (
            format!("{id}---[density]\ninit = \"von-mises\"\nkappa = 1.0\nmean = 0.5\n"),
            "density.mean",
        ),
        (
            format!("{id}---[density]\nmodes = [[2, 0.1, 0.5]]\n"),
            "density.modes[0]",
        ),
        (
            format!("{id}---[density]\nmodes = [[1, 2.0]]\n"),
            "density.modes",
        ),
        (
            format!("{id}---[density]\nmodes = [[50, 0.1]]\nmax_grid = 64\n"),
            "density.modes[0]",
        ),
        (format!("{id}mask = \"causal\"\n---"), "model.mask"),
        (format!("{id}---[density]\ngrid = 0\n"), "density.grid"),
    ];
    for (extra, key) in &cases {
        let (code, err, out, _keep) = cli(extra);
        assert_eq!(code, 2, "{extra}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(
            lines[0].starts_with("error:") && lines[0].contains(key),
            "{key}: {err}"
        );
        assert!(!out.exists(), "{extra}: a folder was written");
    }
    // tokens.init = "file" without [density].
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mf.toml");
    let text = BASE.replace("init = \"uniform\"", "init = \"file\"\npath = \"x.csv\"");
    let (head, tail) = text.split_once("[tokens]").unwrap();
    std::fs::write(&file, format!("{head}{id}\n[tokens]{tail}")).unwrap();
    let out = dir.path().join("out");
    let o = assert_cmd::Command::cargo_bin("tokdyn")
        .unwrap()
        .args([
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error:") && err.contains("tokens"), "{err}");
    assert!(!out.exists());
}
