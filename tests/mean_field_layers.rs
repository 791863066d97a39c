//! The mean field of stacks of layers and of factored heads (`--model mean-field`,
//! docs/MATH.md §17.7) against independent results: a stack of equal layers is the single
//! layer, lsa from a Poisson density follows the Ott–Antonsen equation integrated piecewise
//! here, factored heads are their formed matrices, a loop that undoes itself comes back every
//! pass, and the refusals that remain.

use std::path::Path;

use num_complex::Complex64;
use tokdyn::mean_field::start::Shape;
use tokdyn::mean_field::{
    self, Kernel, MeanFieldHead, MeanFieldLayer, MeanFieldProblem, MeanFieldStack, StartDensity,
};
use tokdyn::scenario::Scenario;
use tokdyn::simulation;

const I2: [[f64; 2]; 2] = [[1.0, 0.0], [0.0, 1.0]];

fn rotation(angle: f64, scale: f64) -> [[f64; 2]; 2] {
    let (s, c) = angle.sin_cos();
    [[scale * c, -scale * s], [scale * s, scale * c]]
}

fn problem(kernel: Kernel, beta: f64, start: StartDensity) -> MeanFieldProblem {
    MeanFieldProblem {
        d: 2,
        kernel,
        beta,
        heads: vec![MeanFieldHead { a: I2, v: I2 }],
        temperature: 0.0,
        start,
        rtol: 1e-12,
        atol: 1e-16,
        t_end: 1.0,
        samples: 11,
        grid: None,
        max_grid: 4096,
    }
}

fn layer(heads: Vec<MeanFieldHead>, duration: f64) -> MeanFieldLayer {
    MeanFieldLayer { heads, duration }
}

#[test]
fn a_stack_of_equal_layers_is_the_single_layer() {
    let start = StartDensity {
        shape: Shape::VonMises {
            kappa: 0.8,
            mean: 0.3,
        },
        modes: vec![(3, 0.05, 0.4)],
    };
    let heads = vec![
        MeanFieldHead {
            a: [[0.9, 0.3], [-0.2, 1.1]],
            v: [[0.5, -0.4], [0.3, 0.8]],
        },
        MeanFieldHead {
            a: rotation(0.4, 1.2),
            v: I2,
        },
    ];
    let mut p = problem(Kernel::Usa, 0.7, start);
    p.heads = heads.clone();
    p.rtol = 1e-9;
    let one = mean_field::solve(&p, &mut []).unwrap();
    assert!(one.summary.stop.is_none(), "{:?}", one.summary.stop);
    // A boundary on a sample time (0.5, samples 0.1 apart), one within round-off of a sample
    // (0.3 against 3 * 0.1 = 0.30000000000000004) and one between samples.
    for durations in [[0.5, 0.5], [0.3, 0.7], [0.35, 0.65]] {
        let stack = MeanFieldStack {
            layers: durations.iter().map(|&t| layer(heads.clone(), t)).collect(),
            looped: false,
        };
        let two = mean_field::solve_stack(&p, Some(&stack), &mut []).unwrap();
        assert!(
            two.solution.status.is_success(),
            "{:?}",
            two.solution.status
        );
        assert_eq!(one.history.len(), two.history.len());
        let mut worst = 0.0f64;
        for (a, b) in one.history.iter().zip(&two.history) {
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(b) {
                worst = worst.max((x - y).norm());
            }
        }
        eprintln!("durations {durations:?}: max coefficient difference {worst:.2e}");
        if durations[0] == 0.5 {
            // The same steps: the boundary falls where a sample already cut a step.
            assert_eq!(worst, 0.0, "{durations:?}");
        } else if durations[0] == 0.3 {
            assert!(worst < 1e-12, "{durations:?}: {worst}");
        } else {
            assert!(worst < 1e-8, "{durations:?}: {worst}");
        }
        // t = 0, the boundary, the end: their order parameters are the samples' there.
        let b = &two.solution.boundaries;
        assert_eq!(
            b.len(),
            3,
            "{:?} {:?}",
            b.iter().map(|b| b.t).collect::<Vec<_>>(),
            two.times
        );
        assert_eq!((b[1].pass, b[1].layer, b[2].pass, b[2].layer), (0, 1, 1, 0));
        assert_eq!(b[1].t, durations[0]);
        let last = mean_field::order_parameters(two.history.last().unwrap());
        assert!((b[2].order.r2 - last.r2).norm() < 1e-14);
    }
}

/// m+ and m- of a 2 x 2 matrix: M x <-> m+ z + m- conj(z).
fn plus_minus(m: &[[f64; 2]; 2]) -> (Complex64, Complex64) {
    (
        Complex64::new(m[0][0] + m[1][1], m[1][0] - m[0][1]) * 0.5,
        Complex64::new(m[0][0] - m[1][1], m[1][0] + m[0][1]) * 0.5,
    )
}

/// The Ott–Antonsen field of lsa with one head (written out independently of the crate).
fn oa_field(r: Complex64, a: &[[f64; 2]; 2], v: &[[f64; 2]; 2], beta: f64) -> Complex64 {
    let (ap, am) = plus_minus(a);
    let (vp, vm) = plus_minus(v);
    let g = ap * vp * r + ap * vm + am * vp + am * vm * r.conj();
    let c = ap.conj() * vp + am.conj() * vm + ap.conj() * vm * r.conj() + am.conj() * vp * r;
    let (omega, h) = (beta * c.im, g * beta);
    Complex64::i() * omega * r + (h - h.conj() * r * r) * 0.5
}

/// RK4 from t0 to t1 (inside one layer) with steps of at most 1e-4.
fn rk4(mut z: Complex64, t0: f64, t1: f64, f: impl Fn(Complex64) -> Complex64) -> Complex64 {
    let steps = ((t1 - t0) / 1e-4).ceil().max(1.0) as usize;
    let dt = (t1 - t0) / steps as f64;
    for _ in 0..steps {
        let k1 = f(z);
        let k2 = f(z + k1 * (dt / 2.0));
        let k3 = f(z + k2 * (dt / 2.0));
        let k4 = f(z + k3 * dt);
        z += (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (dt / 6.0);
    }
    z
}

#[test]
fn lsa_from_a_poisson_density_follows_the_ott_antonsen_equation_layer_by_layer() {
    let (r0, phi0, beta) = (0.4, 0.7, 1.3);
    let first = (I2, I2);
    // Rotations (the FFT path) and general matrices (the quadrature path) for layer 2.
    let seconds = [
        (rotation(0.6, 1.0), rotation(-0.9, 0.8)),
        ([[0.4, 1.2], [-0.5, 0.9]], [[0.3, 1.1], [-0.7, 0.2]]),
    ];
    let (tau1, tau2) = (0.8, 1.2);
    for second in seconds {
        let mut p = problem(
            Kernel::Lsa,
            beta,
            StartDensity {
                shape: Shape::Poisson { r0, phi0 },
                modes: vec![],
            },
        );
        p.t_end = 2.0;
        p.samples = 9;
        p.rtol = 1e-13;
        let stack = MeanFieldStack {
            layers: vec![
                layer(
                    vec![MeanFieldHead {
                        a: first.0,
                        v: first.1,
                    }],
                    tau1,
                ),
                layer(
                    vec![MeanFieldHead {
                        a: second.0,
                        v: second.1,
                    }],
                    tau2,
                ),
            ],
            looped: false,
        };
        let r = mean_field::solve_stack(&p, Some(&stack), &mut []).unwrap();
        assert!(r.solution.status.is_success());
        let field = |k: usize| {
            let (a, v) = if k == 0 { first } else { second };
            move |z: Complex64| oa_field(z, &a, &v, beta)
        };
        let mut z = Complex64::from_polar(r0, phi0);
        let mut t = 0.0;
        let mut worst = 0.0f64;
        for (i, c) in r.history.iter().enumerate() {
            let target = r.times[i];
            while t < target {
                let (k, end) = if t < tau1 {
                    (0, tau1)
                } else {
                    (1, tau1 + tau2)
                };
                let to = target.min(end);
                z = rk4(z, t, to, field(k));
                t = to;
            }
            let r2 = mean_field::order_parameters(c).r2;
            worst = worst.max((r2 - z).norm());
        }
        eprintln!(
            "layer 2 = {second:?}: max |R2 - R_OA| = {worst:.2e}, grid {}, {}",
            r.summary.grid, r.summary.kernel
        );
        assert!(worst < 1e-8, "{second:?}: {worst}");
        // Without the stack (layer 1 for ever) the end differs: the second layer acted.
        let mut single = p.clone();
        single.heads = vec![MeanFieldHead {
            a: first.0,
            v: first.1,
        }];
        let s = mean_field::solve(&single, &mut []).unwrap();
        let end = mean_field::order_parameters(s.history.last().unwrap()).r2;
        assert!((end - z).norm() > 1e-3);
    }
}

fn scenario(text: &str) -> Scenario {
    Scenario::from_toml_str(text, Path::new("mf.toml"), Path::new("."), &[]).unwrap()
}

/// The densities of a scenario's mean field at every sample.
fn densities(s: &Scenario) -> Vec<Vec<Complex64>> {
    let p = simulation::mean_field_problem(s).unwrap();
    let stack = simulation::mean_field_stack(s);
    let r = mean_field::solve_stack(&p, stack.as_ref(), &mut []).unwrap();
    assert!(r.solution.status.is_success());
    r.history
}

fn matrix(m: &[[f64; 2]]) -> String {
    let rows: Vec<String> = m
        .iter()
        .map(|r| format!("[{:?}, {:?}]", r[0], r[1]))
        .collect();
    format!("[{}]", rows.join(", "))
}

#[test]
fn factored_heads_are_their_formed_matrices() {
    // Two heads of width d_h = 1 in d = 2: A = Q K^T / sqrt(1), V = (V O)^T, formed here.
    let q = [[0.7, -0.4], [1.1, 0.3]];
    let k = [[0.9, 0.5], [-0.6, 1.2]];
    let v = [[0.8, 0.2], [-0.3, 0.6]];
    let o = [[1.0, -0.5], [0.4, 0.9]];
    let mut factored = Vec::new();
    let mut formed = Vec::new();
    for h in 0..2 {
        let col = |m: &[[f64; 2]; 2]| [[m[0][h]], [m[1][h]]];
        let (qh, kh, vh, oh) = (col(&q), col(&k), col(&v), [o[h]]);
        factored.push(format!(
            "{{ Q = [[{:?}], [{:?}]], K = [[{:?}], [{:?}]], V = [[{:?}], [{:?}]], O = {} }}",
            qh[0][0],
            qh[1][0],
            kh[0][0],
            kh[1][0],
            vh[0][0],
            vh[1][0],
            matrix(&oh)
        ));
        let a: Vec<[f64; 2]> = (0..2)
            .map(|i| [qh[i][0] * kh[0][0], qh[i][0] * kh[1][0]])
            .collect();
        // (V O)^T: entry (i, j) = V_j O_i.
        let value: Vec<[f64; 2]> = (0..2)
            .map(|i| [vh[0][0] * oh[0][i], vh[1][0] * oh[0][i]])
            .collect();
        formed.push(format!("{{ A = {}, V = {} }}", matrix(&a), matrix(&value)));
    }
    let text = |heads: &[String]| {
        format!(
            "name = \"f\"\n[model]\nkernel = \"sa\"\nbeta = 1.5\nd = 2\nheads = [{}]\n[tokens]\nn = 1\n[time]\nt_end = 0.5\nsamples = 6\n[solver]\nrtol = 1e-9\n[density]\ninit = \"von-mises\"\nkappa = 1.0\nmodes = [[2, 0.05, 0.3]]\n[run]\nmodel = \"mean-field\"\n",
            heads.join(", ")
        )
    };
    let a = densities(&scenario(&text(&factored)));
    let b = densities(&scenario(&text(&formed)));
    let mut worst = 0.0f64;
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.len(), y.len());
        for (p, q) in x.iter().zip(y) {
            worst = worst.max((p - q).norm());
        }
    }
    eprintln!("factored against formed: {worst:.2e}");
    assert!(worst < 1e-12, "{worst}");
}

const BASE: &str = r#"
name = "mfl"
[model]
kernel = "usa"
beta = 1.0
d = 2
[tokens]
n = 1
[time]
t_end = 6.0
samples = 13
[density]
init = "von-mises"
kappa = 1.0
modes = [[2, 0.1, 0.5]]
[run]
model = "mean-field"
"#;

/// Runs `tokdyn run` on BASE with `extra` appended to `[model]`.
fn cli(model: &str, extra: &str) -> (i32, String, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mf.toml");
    let text = BASE.replace("d = 2\n", &format!("d = 2\n{model}\n"));
    std::fs::write(&file, format!("{text}\n{extra}")).unwrap();
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
fn a_loop_that_undoes_itself_comes_back_every_pass_and_is_labelled_on_its_passes() {
    // Layer 2 is layer 1 with V -> -V: the field reverses, so each pass ends where it began.
    let model = "loop = true\n[[model.layers]]\nA = \"identity\"\nV = \"identity\"\nduration = 0.25\n[[model.layers]]\nA = \"identity\"\nV = [[-1, 0], [0, -1]]\nduration = 0.25\n";
    let (code, err, out, _keep) = cli(model, "");
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(out.join("layers.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "t,pass,layer,r2_re,r2_im,r2_abs,r2_arg,r1_abs,nematic"
    );
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 1 + 2 * 12);
    let start = rows[0].clone();
    let mut swing = 0.0f64;
    for r in &rows[1..] {
        if r[2] == 0.0 {
            assert_eq!(r[0], 0.5 * r[1]);
            for c in [3, 4, 7, 8] {
                assert!((r[c] - start[c]).abs() < 1e-7, "pass {}: {r:?}", r[1]);
            }
        } else {
            swing = swing.max((r[8] - start[8]).abs());
        }
    }
    assert!(swing > 1e-3, "within a pass the density moves: {swing}");
    let order = std::fs::read_to_string(out.join("order.csv")).unwrap();
    assert!(!order.to_lowercase().contains("nan"));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["stack"]["classified_on"], "stroboscopic",
        "{summary}"
    );
    assert_eq!(summary["stack"]["passes"], 12);
    let reason = summary["label_reason"].as_str().unwrap();
    assert!(reason.contains("stroboscopic"), "{reason}");
    assert_eq!(summary["label"], "interior-point", "{reason}");
}

#[test]
fn the_refusals_that_remain() {
    let stack = "[[model.layers]]\nA = \"identity\"\nV = \"identity\"\nduration = 3.0\n[[model.layers]]\nA = [[1, 0.5], [0, 1]]\nV = \"identity\"\nduration = 3.0\n";
    let factored = "heads = [{ Q = [[1, 0], [0, 1]], K = [[1, 0], [0, 1]], V = [[1, 0], [0, 1]], O = [[1, 0], [0, 1]] }]\n";
    // Both run now.
    for model in [stack, factored] {
        let (code, err, out, _keep) = cli(model, "");
        assert_eq!(code, 0, "{model}: {err}");
        assert!(out.join("order.csv").exists());
        assert_eq!(out.join("layers.csv").exists(), model == stack);
    }
    let sphere = |m: &str| m.replace("[[1, 0.5], [0, 1]]", "[[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]");
    let cases: Vec<(String, &str, &str)> = vec![
        (format!("mask = \"causal\"\n{stack}"), "", "model.mask"),
        (
            stack.to_string(),
            "[model.position.alibi]\nslopes = [0.5]\n",
            "model.position",
        ),
        (format!("mask = \"causal\"\n{factored}"), "", "model.mask"),
        // d >= 3: every layer's A and V multiples of I.
        (sphere(stack), "", "model.layers[1].A"),
    ];
    for (model, extra, key) in &cases {
        let (code, err, out, _keep) = if key.starts_with("model.layers[1]") {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("mf.toml");
            let text = BASE
                .replace("d = 2\n", &format!("d = 3\n{model}\n"))
                .replace(
                    "init = \"von-mises\"\nkappa = 1.0\nmodes = [[2, 0.1, 0.5]]\n",
                    "",
                );
            std::fs::write(&file, text).unwrap();
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
        } else {
            cli(model, extra)
        };
        assert_eq!(code, 2, "{key}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(
            lines[0].starts_with("error:") && lines[0].contains(key),
            "{key}: {err}"
        );
        assert!(!out.exists(), "{key}: a folder was written");
    }
}
