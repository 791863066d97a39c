//! The mean field (`--model mean-field`, docs/MATH.md §17) against independent results: the
//! dispersion relation of the uniform state, the Ott–Antonsen equation for lsa, the noisy
//! stationary state by its own self-consistency, mass conservation, the concentration stop and
//! the bad inputs.

use std::f64::consts::PI;

use num_complex::Complex64;
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
        d: 2,
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

/// m+ and m- of a 2 x 2 matrix: M x <-> m+ z + m- conj(z) (SPEC section 2).
fn plus_minus(m: &[[f64; 2]; 2]) -> (Complex64, Complex64) {
    (
        Complex64::new(m[0][0] + m[1][1], m[1][0] - m[0][1]) * 0.5,
        Complex64::new(m[0][0] - m[1][1], m[1][0] + m[0][1]) * 0.5,
    )
}

/// The Ott–Antonsen field of lsa with one head, written out from section 2 of the SPEC.
fn oa_field(r: Complex64, a: &[[f64; 2]; 2], v: &[[f64; 2]; 2], beta: f64) -> Complex64 {
    let (ap, am) = plus_minus(a);
    let (vp, vm) = plus_minus(v);
    let g = ap * vp * r + ap * vm + am * vp + am * vm * r.conj();
    let c = ap.conj() * vp + am.conj() * vm + ap.conj() * vm * r.conj() + am.conj() * vp * r;
    let (omega, h) = (beta * c.im, g * beta);
    Complex64::i() * omega * r + (h - h.conj() * r * r) * 0.5
}

#[test]
fn lsa_from_a_poisson_density_follows_the_ott_antonsen_equation() {
    // A general A (not a rotation: the quadrature path) and a rotation (the FFT path).
    let v = [[0.3, 1.1], [-0.7, 0.2]];
    for a in [[[0.4, 1.2], [-0.5, 0.9]], [[0.8, -0.6], [0.6, 0.8]]] {
        let (r0, phi0, beta) = (0.4, 0.7, 1.3);
        let mut p = problem(
            Kernel::Lsa,
            beta,
            0.0,
            StartDensity {
                shape: Shape::Poisson { r0, phi0 },
                modes: vec![],
            },
        );
        p.heads = vec![MeanFieldHead { a, v }];
        p.t_end = 3.0;
        p.samples = 7;
        p.rtol = 1e-13;
        let r = run(&p);
        // OA by RK4 with a small fixed step.
        let mut z = Complex64::from_polar(r0, phi0);
        let dt = 1e-4;
        let f = |z: Complex64| oa_field(z, &a, &v, beta);
        let mut worst = 0.0f64;
        for (i, c) in r.history.iter().enumerate() {
            let t = r.times[i];
            let want_steps = (t / dt).round() as usize;
            let done = ((r.times[i.saturating_sub(1)]) / dt).round() as usize;
            if i > 0 {
                for _ in done..want_steps {
                    let k1 = f(z);
                    let k2 = f(z + k1 * (dt / 2.0));
                    let k3 = f(z + k2 * (dt / 2.0));
                    let k4 = f(z + k3 * dt);
                    z += (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (dt / 6.0);
                }
            }
            let r2 = mean_field::order_parameters(c).r2;
            worst = worst.max((r2 - z).norm());
        }
        eprintln!(
            "A = {a:?}: max |R2 - R_OA| = {worst:.2e}, grid {}, {}",
            r.summary.grid, r.summary.kernel
        );
        assert!(worst < 1e-8, "A = {a:?}: {worst}");
    }
}

#[test]
fn mass_is_conserved_with_heads_noise_and_softmax() {
    for kernel in [Kernel::Sa, Kernel::Usa, Kernel::Lsa] {
        let mut p = problem(kernel, 2.0, 0.2, uniform_plus(2, 0.1));
        p.heads = vec![
            MeanFieldHead {
                a: [[1.0, 0.5], [0.2, 0.8]],
                v: [[1.0, 0.3], [-0.2, 0.9]],
            },
            MeanFieldHead {
                a: [[0.6, -0.8], [0.8, 0.6]],
                v: I2,
            },
        ];
        p.rtol = 1e-9;
        p.atol = 1e-12;
        p.t_end = 5.0;
        p.samples = 11;
        let r = run(&p);
        let n = r.summary.grid;
        let rho = r.densities();
        for (i, row) in rho.chunks(n).enumerate() {
            let mass: f64 = row.iter().sum::<f64>() * 2.0 * PI / n as f64;
            assert!(
                (mass - 1.0).abs() < 1e-12,
                "{kernel:?} sample {i}: mass {mass}"
            );
            assert!(row.iter().all(|x| x.is_finite()));
        }
    }
}

/// The stable bump of usa (A = V = I) at temperature T by its self-consistency
/// rho = e^{Phi/T} / Z, Phi = (1/beta) K * rho, solved by Newton on the cosine moments
/// r_m = <cos m theta> (even densities), with K * rho(theta) = I_0 + 2 sum I_m r_m cos m theta.
#[allow(clippy::needless_range_loop)] // Gaussian elimination reads best with indices
fn self_consistent_bump(beta: f64, t: f64, guess_kappa: f64) -> f64 {
    const M: usize = 48;
    const Q: usize = 1024;
    let bessel: Vec<f64> = (0..=M).map(|m| bessel_i(m as f64, beta)).collect();
    let cosines: Vec<Vec<f64>> = (0..=M)
        .map(|m| {
            (0..Q)
                .map(|j| (m as f64 * 2.0 * PI * j as f64 / Q as f64).cos())
                .collect()
        })
        .collect();
    let map = |r: &[f64]| -> Vec<f64> {
        let w: Vec<f64> = (0..Q)
            .map(|j| {
                let mut phi = bessel[0];
                for m in 1..=M {
                    phi += 2.0 * bessel[m] * r[m - 1] * cosines[m][j];
                }
                (phi / beta / t).exp()
            })
            .collect();
        let z: f64 = w.iter().sum();
        (1..=M)
            .map(|m| w.iter().zip(&cosines[m]).map(|(a, b)| a * b).sum::<f64>() / z)
            .collect()
    };
    // Start from the von Mises moments I_m(kappa) / I_0(kappa).
    let mut r: Vec<f64> = (1..=M)
        .map(|m| bessel_i(m as f64, guess_kappa) / bessel_i(0.0, guess_kappa))
        .collect();
    for _ in 0..30 {
        let g = map(&r);
        let f: Vec<f64> = r.iter().zip(&g).map(|(a, b)| a - b).collect();
        if f.iter().map(|x| x.abs()).fold(0.0, f64::max) < 1e-15 {
            break;
        }
        // Jacobian of r - G(r) by differences, then Gaussian elimination.
        let h = 1e-7;
        let mut jac = vec![vec![0.0; M + 1]; M];
        for k in 0..M {
            let mut rk = r.clone();
            rk[k] += h;
            let gk = map(&rk);
            for i in 0..M {
                jac[i][k] = (if i == k { 1.0 } else { 0.0 }) - (gk[i] - g[i]) / h;
            }
        }
        for i in 0..M {
            jac[i][M] = -f[i];
        }
        for col in 0..M {
            let piv = (col..M)
                .max_by(|&a, &b| jac[a][col].abs().total_cmp(&jac[b][col].abs()))
                .unwrap();
            jac.swap(col, piv);
            for row in 0..M {
                if row != col {
                    let factor = jac[row][col] / jac[col][col];
                    for k in col..=M {
                        jac[row][k] -= factor * jac[col][k];
                    }
                }
            }
        }
        for i in 0..M {
            r[i] += jac[i][M] / jac[i][i];
        }
    }
    r[0]
}

#[test]
fn the_noisy_bump_of_usa_is_the_self_consistent_state() {
    let (beta, t) = (5.0, 5.2);
    let want = self_consistent_bump(beta, t, 5.0);
    // The value of SPEC 8a, found there by the same kind of computation.
    assert!((want - 0.79900123).abs() < 5e-9, "{want}");
    let mut p = problem(
        Kernel::Usa,
        beta,
        t,
        StartDensity {
            shape: Shape::VonMises {
                kappa: 5.0,
                mean: 1.0,
            },
            modes: vec![],
        },
    );
    p.rtol = 1e-10;
    p.atol = 1e-13;
    p.t_end = 100.0;
    p.samples = 11;
    let r = run(&p);
    let got = mean_field::order_parameters(r.history.last().unwrap())
        .r1
        .unwrap();
    eprintln!(
        "bump: run {got}, self-consistency {want}, steps {}",
        r.solution.accepted_steps
    );
    assert!((got - want).abs() < 1e-8, "{got} vs {want}");
}

const BASE: &str = r#"
name = "mf"
[model]
kernel = "usa"
beta = 6.0
d = 2
A = "identity"
V = "identity"
[tokens]
n = 1
[time]
t_end = 1.0
samples = 101
[run]
model = "mean-field"
"#;

/// Runs `tokdyn run` on BASE with `extra` appended; returns (status, stderr, output folder).
fn cli(extra: &str, sets: &[&str]) -> (i32, String, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mf.toml");
    std::fs::write(&file, format!("{BASE}\n{extra}")).unwrap();
    let out = dir.path().join("out");
    let mut cmd = assert_cmd::Command::cargo_bin("tokdyn").unwrap();
    cmd.arg("run").arg(&file).arg("--out").arg(&out);
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    let o = cmd.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        out,
        dir,
    )
}

#[test]
fn a_concentrating_density_stops_with_its_peaks_and_no_nan() {
    let (code, err, out, _keep) = cli("[density]\nmodes = [[3, 0.05, 0.0]]\nmax_grid = 256\n", &[]);
    assert_eq!(code, 0, "{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let mf = &summary["mean_field"];
    let stop = &mf["stop"];
    let t = stop["t"].as_f64().unwrap();
    assert!(t > 0.0 && t < 1.0, "{mf}");
    let peaks = stop["peaks"].as_array().unwrap();
    assert_eq!(peaks.len(), 3, "{mf}");
    let mass: f64 = peaks.iter().map(|p| p["mass"].as_f64().unwrap()).sum();
    assert!((mass - 1.0).abs() < 1e-2, "{mf}");
    for p in peaks {
        assert!(
            (p["mass"].as_f64().unwrap() - 1.0 / 3.0).abs() < 0.02,
            "{mf}"
        );
    }
    let order = std::fs::read_to_string(out.join("order.csv")).unwrap();
    assert!(!order.to_lowercase().contains("nan") && !order.contains("inf"));
    let rows = order.lines().count() - 1;
    assert_eq!(rows as u64, summary["samples"].as_u64().unwrap());
    let npy = std::fs::read(out.join("density.npy")).unwrap();
    let header = u16::from_le_bytes([npy[8], npy[9]]) as usize;
    let values: Vec<f64> = npy[10 + header..]
        .chunks(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(values.len(), rows * mf["grid"].as_u64().unwrap() as usize);
    assert!(values.iter().all(|x| x.is_finite()));
    let grid = std::fs::read_to_string(out.join("density_grid.csv")).unwrap();
    assert!(grid.starts_with("theta\n"));
    assert!(out.join("density.png").exists());
    let reason = summary["label_reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("the run stopped at t = {t:.6}"))
            && reason.contains("max_grid"),
        "{reason}"
    );
}

#[test]
fn a_start_the_largest_grid_resolves_runs() {
    // kappa = 20 on 256 points: the top third (k >= 57) holds about I_57(20) / I_0(20), with
    // I_k(kappa) ~ (kappa / 2)^k / k! for k >> kappa: 1e-27. The noise (T = 100) widens it.
    let extra = "[density]\ninit = \"von-mises\"\nkappa = 20.0\nmax_grid = 256\n[noise]\ntemperature = 100.0\n";
    let (code, err, out, _keep) = cli(extra, &[]);
    assert_eq!(code, 0, "{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert!(summary["mean_field"]["stop"].is_null(), "{summary}");
}

#[test]
fn bad_inputs_are_one_error_line_and_no_folder() {
    let cases: &[(&str, &[&str], &str)] = &[
        ("", &["model.mask=causal"], "model.mask"),
        ("", &["tokens.init=file", "tokens.path=x.csv"], "tokens"),
        ("[density]\nmodes = [[2, 0.6, 0.0]]\n", &[], "density.modes"),
        ("[density]\ngrid = 0\n", &[], "density.grid"),
        ("[density]\ngrid = 2.5\n", &[], "density.grid"),
        (
            "[density]\ngrid = 512\nmax_grid = 256\n",
            &[],
            "density.grid",
        ),
        ("[density]\ninit = \"gauss\"\n", &[], "density.init"),
        (
            "[density]\ninit = \"von-mises\"\nkappa = -1\n",
            &[],
            "density.kappa",
        ),
        ("[ensemble]\nruns = 3\n", &[], "ensemble"),
        (
            "[model.position.alibi]\nslopes = [0.5]\n",
            &[],
            "model.position",
        ),
        ("[noise]\ntemperature = 1e300\n", &[], "noise.temperature"),
        // Starts narrower than the largest grid resolves: von Mises modes fall as
        // e^{-k^2 / (2 kappa)}, Poisson modes as r0^{k/2}; 256 points keep |k| <= 85, whose top
        // third (k >= 57) then holds about e^{-1.6} (kappa = 1000) and 0.999^28 of the weight.
        (
            "[density]\ninit = \"von-mises\"\nkappa = 1000.0\nmax_grid = 256\n",
            &[],
            "density.kappa",
        ),
        (
            "[density]\ninit = \"poisson\"\nr0 = 0.999\nmax_grid = 256\n",
            &[],
            "density.r0",
        ),
    ];
    for (extra, sets, key) in cases {
        let (code, err, out, _keep) = cli(extra, sets);
        assert_eq!(code, 2, "{extra} {sets:?}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(
            lines[0].starts_with("error:") && lines[0].contains(key),
            "{key}: {err}"
        );
        assert!(!out.exists(), "{extra} {sets:?}: a folder was written");
    }
}
