//! Two-parameter bifurcation curves (`[codim2]`): every curve point solves its defining
//! system, the curves pass through the folds and Hopf points an independent root finder
//! (written here, with finite-difference Jacobians) finds on lines p1 = const, every BT point
//! is reported; l1 and its sign against direct integration; bad input.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use nalgebra::{DMatrix, DVector};
use num_complex::Complex64;

#[path = "common/family.rs"]
mod family;
use family::{base, coefficients, V21, V22};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

fn tokdyn() -> Command {
    let mut c = Command::cargo_bin("tokdyn").unwrap();
    c.env_remove("SLURM_ARRAY_TASK_ID");
    c
}

fn table(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (header, rows)
}

/// F(x) at (p1, p2) and its Jacobian by central differences (independent of the library's).
fn field(p1: f64, p2: f64, x: [f64; 2]) -> ([f64; 2], [[f64; 2]; 2]) {
    let sh = coefficients(p1, p2);
    let f = |x: [f64; 2]| {
        let r = sh.ott_antonsen_rhs(Complex64::new(x[0], x[1]));
        [r.re, r.im]
    };
    let h = 1e-5;
    let mut j = [[0.0; 2]; 2];
    for k in 0..2 {
        let (mut up, mut dn) = (x, x);
        up[k] += h;
        dn[k] -= h;
        let (fu, fd) = (f(up), f(dn));
        for i in 0..2 {
            j[i][k] = (fu[i] - fd[i]) / (2.0 * h);
        }
    }
    (f(x), j)
}

/// The defining system: F = 0 and det J (fold) or tr J (hopf).
fn system(kind: &str, p1: f64, p2: f64, x: [f64; 2]) -> [f64; 3] {
    let (f, j) = field(p1, p2, x);
    let g = match kind {
        "fold" => j[0][0] * j[1][1] - j[0][1] * j[1][0],
        _ => j[0][0] + j[1][1],
    };
    [f[0], f[1], g]
}

/// Newton with a finite-difference Jacobian on `g`: R^n -> R^n from `u`.
fn newton(g: &dyn Fn(&[f64]) -> Vec<f64>, mut u: Vec<f64>) -> Option<Vec<f64>> {
    let n = u.len();
    for _ in 0..50 {
        let r = g(&u);
        if r.iter().map(|v| v.abs()).fold(0.0, f64::max) < 1e-12 {
            return Some(u);
        }
        let mut m = DMatrix::zeros(n, n);
        for k in 0..n {
            let e = 1e-7;
            let (mut up, mut dn) = (u.clone(), u.clone());
            up[k] += e;
            dn[k] -= e;
            let (gu, gd) = (g(&up), g(&dn));
            for i in 0..n {
                m[(i, k)] = (gu[i] - gd[i]) / (2.0 * e);
            }
        }
        let step = m.lu().solve(&DVector::from_vec(r))?;
        for k in 0..n {
            u[k] -= step[k];
        }
        if u.iter().any(|v| !v.is_finite() || v.abs() > 10.0) {
            return None;
        }
    }
    None
}

const BOX: ([f64; 2], [f64; 2]) = ([-0.2, -0.6], [0.7, 0.4]);
const STEP: f64 = 0.01;

fn run_family(dir: &Path) -> PathBuf {
    write(dir, "base.toml", &base(0.2, -0.1));
    let s = write(
        dir,
        "s.toml",
        &format!(
            "name = \"fam\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv11 = {{ from = {}, to = {}, steps = 2 }}\nv12 = {{ from = {}, to = {}, steps = 2 }}\n[codim2]\nparameters = [\"v11\", \"v12\"]\nfrom = [{}, {}]\nto = [{}, {}]\nstep = {STEP}\ncurves = [\"fold\", \"hopf\"]\n",
            BOX.0[0], BOX.1[0], BOX.0[1], BOX.1[1], BOX.0[0], BOX.0[1], BOX.1[0], BOX.1[1]
        ),
    );
    let out = dir.join("out");
    tokdyn()
        .arg("sweep")
        .arg(&s)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    out
}

struct Row {
    curve: usize,
    kind: String,
    p: [f64; 2],
    x: [f64; 2],
    point: String,
}

fn rows(out: &Path) -> Vec<Row> {
    let (header, rows) = table(&out.join("curves.csv"));
    assert_eq!(header.join(","), "curve,kind,v11,v12,r2_re,r2_im,point");
    rows.iter()
        .map(|r| {
            let f = |i: usize| r[i].parse::<f64>().unwrap();
            Row {
                curve: r[0].parse().unwrap(),
                kind: r[1].clone(),
                p: [f(2), f(3)],
                x: [f(4), f(5)],
                point: r[6].clone(),
            }
        })
        .collect()
}

fn inside(p: [f64; 2], x: [f64; 2], margin: f64) -> bool {
    (0..2).all(|k| p[k] > BOX.0[k] + margin && p[k] < BOX.1[k] - margin)
        && x[0].hypot(x[1]) < 1.0 - margin
}

#[test]
fn curves_solve_their_systems_pass_through_independent_roots_and_report_every_bt() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_family(dir.path());
    let rows = rows(&out);
    assert!(rows.iter().any(|r| r.kind == "fold"));
    assert!(rows.iter().any(|r| r.kind == "hopf"));
    // Every point solves its defining system, inside the box and the disk.
    for r in &rows {
        let system_kind = if r.kind == "fold" { "fold" } else { "hopf" };
        let g = system(system_kind, r.p[0], r.p[1], r.x);
        assert!(g.iter().all(|v| v.abs() < 1e-8), "{g:?} at {:?}", r.p);
        assert!((0..2).all(|k| r.p[k] >= BOX.0[k] - 1e-12 && r.p[k] <= BOX.1[k] + 1e-12));
        assert!(r.x[0].hypot(r.x[1]) <= 1.0 + 1e-9);
        if r.kind != "fold" {
            let (_, j) = field(r.p[0], r.p[1], r.x);
            let det = j[0][0] * j[1][1] - j[0][1] * j[1][0];
            match (r.kind.as_str(), r.point.as_str()) {
                (_, "BT") => assert!(det.abs() < 1e-6),
                ("hopf", _) => assert!(det > -1e-9, "{det}"),
                ("neutral-saddle", _) => assert!(det < 1e-9, "{det}"),
                (k, _) => panic!("kind {k}"),
            }
        }
    }
    // Consecutive rows of a curve are at most `step` apart in (p1, p2).
    for w in rows.windows(2).filter(|w| w[0].curve == w[1].curve) {
        let d = (w[0].p[0] - w[1].p[0]).hypot(w[0].p[1] - w[1].p[1]);
        assert!(d <= STEP * (1.0 + 1e-9), "{d}");
    }
    // Roots on lines p1 = const from a grid of starts lie on the traced curves.
    let mut checked = 0;
    for &p1 in &[-0.1, 0.05, 0.2, 0.35, 0.5, 0.65] {
        for kind in ["fold", "hopf"] {
            let g = |u: &[f64]| system(kind, p1, u[2], [u[0], u[1]]).to_vec();
            for i in 0..7 {
                for k in 0..5 {
                    let start = vec![
                        -0.9 + 0.3 * i as f64,
                        -0.8 + 0.4 * k as f64,
                        BOX.0[1] + 0.5 * (BOX.1[1] - BOX.0[1]),
                    ];
                    let Some(u) = newton(&g, start) else { continue };
                    if !inside([p1, u[2]], [u[0], u[1]], 0.02) {
                        continue;
                    }
                    checked += 1;
                    let near = rows
                        .iter()
                        .filter(|r| (r.kind == "fold") == (kind == "fold"))
                        .map(|r| {
                            (r.p[0] - p1).hypot(r.p[1] - u[2])
                                + (r.x[0] - u[0]).hypot(r.x[1] - u[1])
                        })
                        .fold(f64::INFINITY, f64::min);
                    assert!(near < 2.0 * STEP, "{kind} root {u:?} at v11 = {p1}: {near}");
                }
            }
        }
    }
    assert!(checked >= 6, "{checked}");
    // Every BT point an independent 4 x 4 Newton finds is reported.
    let specials: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("special_points.json")).unwrap())
            .unwrap();
    let bts: Vec<&serde_json::Value> = specials
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "BT")
        .collect();
    let bt_system = |u: &[f64]| {
        let (f, j) = field(u[2], u[3], [u[0], u[1]]);
        vec![
            f[0],
            f[1],
            j[0][0] + j[1][1],
            j[0][0] * j[1][1] - j[0][1] * j[1][0],
        ]
    };
    let mut independent = 0;
    for i in 0..5 {
        for k in 0..5 {
            let start = vec![
                -0.8 + 0.4 * i as f64,
                -0.8 + 0.4 * k as f64,
                0.2 + 0.1 * (i as f64 - 2.0),
                -0.1 + 0.1 * (k as f64 - 2.0),
            ];
            let Some(u) = newton(&bt_system, start) else {
                continue;
            };
            if !inside([u[2], u[3]], [u[0], u[1]], 0.02) {
                continue;
            }
            independent += 1;
            let found = bts.iter().any(|b| {
                let v = |k: &str| b["parameters"][k].as_f64().unwrap();
                let r = |i: usize| b["r2"][i].as_f64().unwrap();
                (v("v11") - u[2]).abs() < 1e-6
                    && (v("v12") - u[3]).abs() < 1e-6
                    && (r(0) - u[0]).abs() < 1e-6
                    && (r(1) - u[1]).abs() < 1e-6
            });
            assert!(found, "BT at {u:?} not reported: {bts:?}");
        }
    }
    assert!(independent >= 1);
    // Records: eigenvalues of a BT point are both 0; l1 only at H and GH points.
    for s in specials.as_array().unwrap() {
        let ev = s["eigenvalues"].as_array().unwrap();
        assert_eq!(ev.len(), 2);
        match s["type"].as_str().unwrap() {
            "BT" => {
                assert!(ev
                    .iter()
                    .all(|e| e[0].as_f64().unwrap().abs() < 1e-4
                        && e[1].as_f64().unwrap().abs() < 1e-4));
                assert!(s["l1"].is_null());
            }
            "GH" | "H" => assert!(s["l1"].is_number()),
            _ => assert!(s["l1"].is_null()),
        }
    }
    let rows_bt = rows.iter().filter(|r| r.point == "BT").count();
    assert!(
        rows_bt >= 2,
        "a BT point lies on the fold and the Hopf curve"
    );
}

#[test]
fn bad_codim2_input_is_exit_2_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", &base(0.2, -0.1));
    let head = "name = \"fam\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv11 = { from = 0.0, to = 0.4, steps = 2 }\n[codim2]\n";
    for (body, key) in [
        (
            "parameters = [\"v11\", \"v13\"]\nfrom = [0, 0]\nto = [1, 1]\n",
            "codim2.parameters[1]",
        ),
        (
            "parameters = [\"v11\", \"v12\"]\nfrom = [0, 0]\nto = [1, 0]\n",
            "codim2.to[1]",
        ),
        (
            "parameters = [\"v11\", \"v12\"]\nfrom = [0, 0]\nto = [1, 1]\nstep = 0\n",
            "codim2.step",
        ),
        (
            "parameters = [\"v11\", \"v12\"]\nfrom = [0, 0]\nto = [1, 1]\nstep = -1\n",
            "codim2.step",
        ),
        (
            "parameters = [\"v11\"]\nfrom = [0, 0]\nto = [1, 1]\n",
            "codim2.parameters",
        ),
        (
            "parameters = [\"v11\", \"v12\"]\nfrom = [0, 0]\nto = [1, 1]\ncurves = [\"cusp\"]\n",
            "codim2.curves[0]",
        ),
    ] {
        let s = write(dir.path(), "s.toml", &format!("{head}{body}"));
        let out = tokdyn()
            .arg("sweep")
            .arg(&s)
            .arg("--out")
            .arg(dir.path().join("out"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{body}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error:") && err.contains(key),
            "{key}: {err}"
        );
        assert!(!dir.path().join("out").exists());
    }
}

#[test]
fn a_continuation_that_cannot_start_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // A = V = I-like family without folds or Hopf points in the box: V = [[1 + v11, v12], [0, 1]].
    let text = base(0.0, 0.0)
        .replace(
            "A = [[-0.6585, 0.1559], [0.9054, 1.0743]]",
            "A = \"identity\"",
        )
        .replace(
            &format!("V = [[\"v11\", \"v12\"], [{V21}, {V22}]]"),
            "V = [[\"1 + v11\", \"v12\"], [0.0, 1.0]]",
        );
    write(dir.path(), "base.toml", &text);
    let s = write(
        dir.path(),
        "s.toml",
        "name = \"none\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv11 = { from = 0.0, to = 0.1, steps = 2 }\n[codim2]\nparameters = [\"v11\", \"v12\"]\nfrom = [0.0, 0.0]\nto = [0.1, 0.1]\n",
    );
    let out = dir.path().join("out");
    let o = tokdyn()
        .arg("sweep")
        .arg(&s)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("codim2: no fold or Hopf point found"), "{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert!(summary["codim2"]["message"]
        .as_str()
        .unwrap()
        .contains("cannot start"));
    let (header, rows) = table(&out.join("curves.csv"));
    assert_eq!(header.len(), 7);
    assert!(rows.is_empty());
}

#[test]
fn a_long_continuation_reports_progress_and_stops_on_a_signal() {
    use std::io::BufRead;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", &base(0.2, -0.1));
    // A step of 1e-6 over [-0.2, 0.7]: far more than ten seconds of work.
    let s = write(
        dir.path(),
        "s.toml",
        "name = \"long\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv11 = { from = -0.2, to = 0.7, steps = 2 }\n[continuation]\nparameter = \"v11\"\nfrom = -0.2\nto = 0.7\nstep = 1e-6\nmax_points = 100000000\n",
    );
    let out = dir.path().join("out");
    // Before the spawn: the child's clock starts after this one, however the two are scheduled.
    let started = Instant::now();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tokdyn"))
        .arg("sweep")
        .arg(&s)
        .arg("--out")
        .arg(&out)
        .env_remove("SLURM_ARRAY_TASK_ID")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    // The batch log's first line comes at the tenth second.
    let line = rx.recv_timeout(Duration::from_secs(40)).unwrap();
    assert!(line.starts_with("long continuation: seed "), "{line}");
    assert!(line.contains("s left"), "{line}");
    assert!(started.elapsed() >= Duration::from_secs(10));
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let signalled = Instant::now();
    let status = child.wait().unwrap();
    assert!(signalled.elapsed() < Duration::from_secs(5));
    assert!(!status.success());
    assert!(!out.join("branches.csv").exists());
}

/// RK4 on the OA field at (v11, v12) from r for time t; the largest and smallest distance
/// from `centre` over the last `tail` time units.
fn integrate(
    p1: f64,
    p2: f64,
    mut r: Complex64,
    t: f64,
    tail: f64,
    centre: Complex64,
) -> (f64, f64) {
    let sh = coefficients(p1, p2);
    let dt = 0.05;
    let steps = (t / dt) as usize;
    let keep = ((t - tail) / dt) as usize;
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for k in 0..steps {
        let f = |r: Complex64| sh.ott_antonsen_rhs(r);
        let k1 = f(r);
        let k2 = f(r + k1 * (dt / 2.0));
        let k3 = f(r + k2 * (dt / 2.0));
        let k4 = f(r + k3 * dt);
        r += (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (dt / 6.0);
        if k >= keep {
            let d = (r - centre).norm();
            lo = lo.min(d);
            hi = hi.max(d);
        }
    }
    (lo, hi)
}

#[test]
fn l1_decides_what_direct_integration_shows_near_each_hopf_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut signs = [0, 0];
    for v11 in [-0.15, 0.25] {
        write(dir.path(), "base.toml", &base(v11, -0.1));
        let s = write(
            dir.path(),
            "s.toml",
            "name = \"h\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv12 = { from = -0.6, to = 0.4, steps = 2 }\n[continuation]\nparameter = \"v12\"\nfrom = -0.6\nto = 0.4\nstep = 0.005\n",
        );
        let out = dir.path().join(format!("out{v11}"));
        tokdyn()
            .arg("sweep")
            .arg(&s)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        let specials: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(out.join("special_points.json")).unwrap())
                .unwrap();
        for h in summary["continuation"]["special_points"]
            .as_array()
            .unwrap()
        {
            if h["point"] != "H" {
                assert!(h["l1"].is_null());
                continue;
            }
            let l1 = h["l1"].as_f64().unwrap();
            let p = h["parameter"].as_f64().unwrap();
            let rh = Complex64::new(h["r2_re"].as_f64().unwrap(), h["r2_im"].as_f64().unwrap());
            // special_points.json carries the same l1.
            assert!(specials
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["type"] == "H" && s["l1"].as_f64() == Some(l1)));
            if l1.abs() < 0.01 || rh.norm() > 0.9 {
                continue;
            }
            // The unstable side: tr J > 0 there.
            let tr = |q: f64| {
                let g = |u: &[f64]| {
                    let (f, _) = field(v11, q, [u[0], u[1]]);
                    f.to_vec()
                };
                let x = newton(&g, vec![rh.re, rh.im]).unwrap();
                let (_, j) = field(v11, q, [x[0], x[1]]);
                (j[0][0] + j[1][1], Complex64::new(x[0], x[1]))
            };
            // The unstable side (tr J > 0) at a distance where tr J = target: the amplitude
            // grows or decays at the rate target / 2.
            let slope = (tr(p + 1e-4).0 - tr(p - 1e-4).0) / 2e-4;
            let amplitude = |target: f64| {
                let q = p + target / slope;
                let (t, c) = tr(q);
                assert!((t - target).abs() < 0.2 * target, "{t} {target}");
                integrate(v11, q, c + 1e-3, 30.0 / target, 300.0, c)
            };
            if l1 < 0.0 {
                // Supercritical: a small stable cycle, its size ~ sqrt(distance).
                signs[0] += 1;
                let (lo1, hi1) = amplitude(2e-4);
                let (lo4, hi4) = amplitude(8e-4);
                assert!(hi1 < 0.2 && lo1 > 0.05 * hi1, "{lo1} {hi1}");
                eprintln!("super l1 = {l1}: {lo1} {hi1} {lo4} {hi4}");
                let ratio = (lo4 + hi4) / (lo1 + hi1);
                assert!(
                    (ratio - 2.0).abs() < 0.3,
                    "amplitude ratio {ratio} (l1 = {l1})"
                );
            } else {
                // Subcritical: no small cycle on the unstable side; the orbit leaves.
                signs[1] += 1;
                let (_, hi) = amplitude(1e-3);
                eprintln!("sub l1 = {l1}: {hi}");
                assert!(
                    hi > 0.15,
                    "stayed within {hi} of the Hopf point (l1 = {l1})"
                );
            }
        }
    }
    assert!(signs[0] >= 1 && signs[1] >= 1, "{signs:?}");
}
