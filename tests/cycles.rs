//! Periodic-orbit continuation (`[continuation] cycles = true`, `cycles.csv`): the cycles of a
//! supercritical Hopf point against a direct long integration of the OA equation written here
//! (period from successive upward section crossings, |R2| range, the multiplier as the
//! exponential of the integral of tr J, the decay of a perturbation); a subcritical Hopf point's
//! unstable cycles against backward-time integration; the normal form (amplitude ~ sqrt of the
//! distance to the Hopf point); a fold of cycles; bad input.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use nalgebra::DMatrix;
use num_complex::Complex64;
use tokdyn::model::{Attention, Head, Kernel};
use tokdyn::reduced::SecondHarmonic;

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

/// The random family of tests/codim2.rs: V = [[v11, v12], [V21, V22]].
const A: [[f64; 2]; 2] = [[-0.6585, 0.1559], [0.9054, 1.0743]];
const V21: f64 = 0.2307;
const V22: f64 = -0.1714;

fn base(v11: f64, v12: f64) -> String {
    format!(
        r#"
name = "family"
[params]
v11 = {v11}
v12 = {v12}
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = [[{}, {}], [{}, {}]]
V = [["v11", "v12"], [{V21}, {V22}]]
[tokens]
n = 16
init = "poisson"
r0 = 0.3
[time]
t_end = 2.0
samples = 21
"#,
        A[0][0], A[0][1], A[1][0], A[1][1]
    )
}

fn coefficients(p1: f64, p2: f64) -> SecondHarmonic {
    let a = DMatrix::from_row_slice(2, 2, &[A[0][0], A[0][1], A[1][0], A[1][1]]);
    let v = DMatrix::from_row_slice(2, 2, &[p1, p2, V21, V22]);
    SecondHarmonic::new(&Attention::new(Kernel::Lsa, 1.0, vec![Head { a, v }])).unwrap()
}

/// One row of cycles.csv.
#[derive(Debug, Clone)]
struct Row {
    branch: usize,
    p: f64,
    period: f64,
    lo: f64,
    hi: f64,
    mu: f64,
    stable: bool,
    point: String,
}

struct Run {
    header: String,
    rows: Vec<Row>,
    summary: serde_json::Value,
}

/// Sweeps v12 over [from, to] at v11 with cycles on.
fn run_cycles(dir: &Path, v11: f64, from: f64, to: f64, step: f64) -> Run {
    write(dir, "base.toml", &base(v11, -0.1));
    let s = write(
        dir,
        "s.toml",
        &format!("name = \"c\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv12 = {{ from = {from}, to = {to}, steps = 2 }}\n[continuation]\nparameter = \"v12\"\nfrom = {from}\nto = {to}\nstep = {step}\ncycles = true\n"),
    );
    let out = dir.join(format!("out{v11}"));
    tokdyn()
        .arg("sweep")
        .arg(&s)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let text = fs::read_to_string(out.join("cycles.csv")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_string();
    let rows = lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            Row {
                branch: c[0].parse().unwrap(),
                p: c[1].parse().unwrap(),
                period: c[2].parse().unwrap(),
                lo: c[3].parse().unwrap(),
                hi: c[4].parse().unwrap(),
                mu: c[5].parse().unwrap(),
                stable: c[6] == "true",
                point: c[7].to_string(),
            }
        })
        .collect();
    let summary =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    Run {
        header,
        rows,
        summary,
    }
}

/// The cycle branches started at Hopf points with l1 of the given sign.
fn branches_with(run: &Run, supercritical: bool) -> Vec<(usize, f64, Vec<Row>)> {
    run.summary["continuation"]["cycles"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| (b["hopf"]["l1"].as_f64().unwrap() < 0.0) == supercritical)
        .map(|b| {
            let k = b["branch"].as_u64().unwrap() as usize;
            let p_h = b["hopf"]["parameter"].as_f64().unwrap();
            let rows = run.rows.iter().filter(|r| r.branch == k).cloned().collect();
            (k, p_h, rows)
        })
        .collect()
}

/// The OA field F and tr J (central differences) of the family at (v11, v12).
struct Field(SecondHarmonic);

impl Field {
    fn f(&self, r: Complex64) -> Complex64 {
        self.0.ott_antonsen_rhs(r)
    }

    fn trace(&self, r: Complex64) -> f64 {
        let h = 1e-6;
        let dx = (self.f(r + h) - self.f(r - h)) / (2.0 * h);
        let i = Complex64::i() * h;
        let dy = (self.f(r + i) - self.f(r - i)) / (2.0 * h);
        dx.re + dy.im
    }

    /// One RK4 step of size dt (negative: backward in time).
    fn step(&self, r: Complex64, dt: f64) -> Complex64 {
        let k1 = self.f(r);
        let k2 = self.f(r + k1 * (dt / 2.0));
        let k3 = self.f(r + k2 * (dt / 2.0));
        let k4 = self.f(r + k3 * dt);
        r + (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (dt / 6.0)
    }
}

/// What a direct integration measures on the attracting cycle (forward, or backward for
/// `dt < 0`).
struct Measured {
    period: f64,
    lo: f64,
    hi: f64,
    /// exp(integral of tr J over one period), in forward time.
    mu: f64,
}

/// Integrates from r0 for `transient` time (steps of 10 dt), then measures `periods` periods:
/// the period from successive upward crossings of Im R = level (cubic Hermite interpolation),
/// min / max |R| and the integral of tr J over the last whole period.
fn measure(field: &Field, mut r: Complex64, dt: f64, transient: f64, periods: usize) -> Measured {
    for _ in 0..(transient / (10.0 * dt.abs())) as usize {
        r = field.step(r, 10.0 * dt);
    }
    let steps = (transient / dt.abs()) as usize;
    // The level: the middle of Im R over a long stretch.
    let (mut ylo, mut yhi) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut s = r;
    for _ in 0..steps.clamp(1, 200_000) {
        s = field.step(s, dt);
        ylo = ylo.min(s.im);
        yhi = yhi.max(s.im);
    }
    let level = 0.5 * (ylo + yhi);
    let mut crossings: Vec<f64> = Vec::new();
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    let mut t = 0.0;
    let mut integral = 0.0;
    let mut integral_at: Vec<f64> = Vec::new();
    // Forward-time orientation: upward in forward time is downward backward.
    let sign = dt.signum();
    while crossings.len() <= periods {
        let r1 = field.step(r, dt);
        let (y0, y1) = (sign * (r.im - level), sign * (r1.im - level));
        let tr_mid = field.trace(field.step(r, dt / 2.0));
        let piece = dt.abs() * (field.trace(r) + 4.0 * tr_mid + field.trace(r1)) / 6.0;
        if y0 < 0.0 && y1 >= 0.0 {
            // Hermite cubic of Im R on the step: the crossing's fraction by bisection.
            let (f0, f1) = (sign * field.f(r).im * dt, sign * field.f(r1).im * dt);
            let h = |s: f64| {
                let (s2, s3) = (s * s, s * s * s);
                (2.0 * s3 - 3.0 * s2 + 1.0) * y0
                    + (s3 - 2.0 * s2 + s) * f0
                    + (-2.0 * s3 + 3.0 * s2) * y1
                    + (s3 - s2) * f1
            };
            let (mut a, mut b) = (0.0, 1.0);
            for _ in 0..60 {
                let m = 0.5 * (a + b);
                if h(m) < 0.0 {
                    a = m;
                } else {
                    b = m;
                }
            }
            let s = 0.5 * (a + b);
            crossings.push(t + s * dt.abs());
            integral_at.push(integral + s * piece);
        }
        if !crossings.is_empty() {
            lo = lo.min(r1.norm());
            hi = hi.max(r1.norm());
        }
        integral += piece;
        t += dt.abs();
        r = r1;
    }
    let n = crossings.len() - 1;
    let period = (crossings[n] - crossings[0]) / n as f64;
    let over_one = (integral_at[n] - integral_at[n - 1]) * sign;
    Measured {
        period,
        lo,
        hi,
        mu: over_one.exp(),
    }
}

/// The fixed point near r (Newton with a difference Jacobian).
fn equilibrium(field: &Field, mut r: Complex64) -> Complex64 {
    for _ in 0..50 {
        let h = 1e-7;
        let f = field.f(r);
        let dx = (field.f(r + h) - f) / h;
        let dy = (field.f(r + Complex64::i() * h) - f) / h;
        let det = dx.re * dy.im - dy.re * dx.im;
        let sx = (dy.im * f.re - dy.re * f.im) / det;
        let sy = (dx.re * f.im - dx.im * f.re) / det;
        r -= Complex64::new(sx, sy);
    }
    r
}

/// Along v12 in [-0.6, 0.4] the fixed points have a subcritical Hopf point at v11 = -0.15
/// (its unstable cycles end homoclinic) and a supercritical one at v11 = 0.25.
const V11: f64 = -0.15;
const V11_SUPER: f64 = 0.25;

#[test]
fn supercritical_cycles_match_a_direct_integration() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_cycles(dir.path(), V11_SUPER, -0.6, 0.4, 0.005);
    assert_eq!(
        run.header,
        "branch,v12,period,r2_abs_min,r2_abs_max,multiplier,stable,point"
    );
    let check = run.summary["continuation"]["cycles"]["multiplier_check"]
        .as_f64()
        .unwrap();
    assert!(check < 1e-6, "exp(int tr J) against tr M - 1: {check}");
    let supers = branches_with(&run, true);
    assert!(!supers.is_empty(), "no supercritical branch");
    let mut checked = 0;
    for (_, p_h, rows) in &supers {
        // Cycles near the Hopf point are stable.
        assert!(rows[0].stable && rows[0].mu < 1.0, "{:?}", rows[0]);
        // Two cycles that attract fast enough for a direct integration.
        let picks: Vec<&Row> = rows
            .iter()
            .filter(|r| r.point.is_empty() && r.stable && r.mu < 0.6 && r.hi < 0.95)
            .collect();
        for row in [picks.first(), picks.get(picks.len() / 2)]
            .into_iter()
            .flatten()
        {
            let field = Field(coefficients(V11_SUPER, row.p));
            let centre = equilibrium(&field, {
                let h = &run.summary["continuation"]["special_points"];
                let h = h
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|s| s["parameter"].as_f64() == Some(*p_h))
                    .unwrap();
                Complex64::new(h["r2_re"].as_f64().unwrap(), h["r2_im"].as_f64().unwrap())
            });
            // From beside the (unstable) fixed point inside the cycle.
            let transient = 16.0 * row.period / (-row.mu.ln()).max(0.05);
            let m = measure(&field, centre + 1e-3, 0.002, transient, 3);
            eprintln!("{row:?}: {} {} {} {}", m.period, m.lo, m.hi, m.mu);
            assert!(
                ((m.period - row.period) / row.period).abs() < 1e-5,
                "period {} against {}",
                row.period,
                m.period
            );
            assert!((m.lo - row.lo).abs() < 1e-5, "min |R2| {} {}", row.lo, m.lo);
            assert!((m.hi - row.hi).abs() < 1e-5, "max |R2| {} {}", row.hi, m.hi);
            assert!(
                ((m.mu - row.mu) / row.mu).abs() < 1e-4,
                "multiplier {} against {}",
                row.mu,
                m.mu
            );
            checked += 1;
        }
    }
    assert!(checked >= 2, "{checked}");
}

#[test]
fn subcritical_cycles_are_unstable_and_match_backward_integration() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_cycles(dir.path(), V11, -0.6, 0.4, 0.005);
    let subs = branches_with(&run, false);
    assert!(!subs.is_empty(), "no subcritical branch");
    for (k, p_h, rows) in &subs {
        let list = &run.summary["continuation"]["cycles"]["list"][k - 1];
        assert!(list["hopf"]["l1"].as_f64().unwrap() > 0.0);
        assert_eq!(list["hopf"]["criticality"], "subcritical");
        // Near the Hopf point: unstable, multiplier > 1.
        let near: Vec<&Row> = rows.iter().take(3).collect();
        assert!(near.iter().all(|r| !r.stable && r.mu > 1.0), "{near:?}");
        // Backward in time the unstable cycle attracts.
        let row = rows
            .iter()
            .find(|r| r.point.is_empty() && r.mu > 1.05 && r.hi < 0.97)
            .unwrap();
        let field = Field(coefficients(V11, row.p));
        let centre = equilibrium(
            &field,
            Complex64::new(
                list["hopf"]["r2"][0].as_f64().unwrap(),
                list["hopf"]["r2"][1].as_f64().unwrap(),
            ),
        );
        let transient = 16.0 * row.period / row.mu.ln().max(0.05);
        let m = measure(&field, centre + 1e-3, -0.002, transient, 3);
        eprintln!("{p_h} {row:?}: {} {} {} {}", m.period, m.lo, m.hi, m.mu);
        assert!(((m.period - row.period) / row.period).abs() < 1e-5);
        assert!((m.lo - row.lo).abs() < 1e-5 && (m.hi - row.hi).abs() < 1e-5);
        assert!(((m.mu - row.mu) / row.mu).abs() < 1e-4);
    }
}

#[test]
fn near_the_hopf_point_the_amplitude_grows_like_the_square_root_of_the_distance() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_cycles(dir.path(), V11, -0.6, 0.4, 0.002);
    let mut fitted = 0;
    for supercritical in [true, false] {
        for (_, p_h, rows) in branches_with(&run, supercritical) {
            // The cycles within 0.1 of |R2| amplitude of the Hopf point.
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.point.is_empty() && r.hi - r.lo < 0.06)
                .map(|r| (((r.p - p_h).abs()).ln(), (r.hi - r.lo).ln()))
                .collect();
            if pts.len() < 4 {
                continue;
            }
            let n = pts.len() as f64;
            let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
            let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
            let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
            let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
            let slope = sxy / sxx;
            eprintln!(
                "super {supercritical}: exponent {slope} over {} points",
                pts.len()
            );
            assert!((slope - 0.5).abs() < 0.05, "exponent {slope}");
            fitted += 1;
        }
    }
    assert!(fitted >= 1);
}

#[test]
fn cycles_must_be_a_bool_and_need_a_hopf_point() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", &base(V11, -0.1));
    let s = write(
        dir.path(),
        "s.toml",
        "name = \"c\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv12 = { from = -0.6, to = 0.4, steps = 2 }\n[continuation]\nparameter = \"v12\"\nfrom = -0.6\nto = 0.4\ncycles = \"yes\"\n",
    );
    let out = tokdyn()
        .arg("sweep")
        .arg(&s)
        .arg("--out")
        .arg(dir.path().join("o1"))
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.starts_with("error:") && err.contains("continuation.cycles"),
        "{err}"
    );
    // No Hopf point between -0.6 and -0.5 (v11 = -0.15): refused before the grid runs.
    let s = write(
        dir.path(),
        "s.toml",
        "name = \"c\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv12 = { from = -0.6, to = -0.5, steps = 2 }\n[continuation]\nparameter = \"v12\"\nfrom = -0.6\nto = -0.5\ncycles = true\n",
    );
    let o2 = dir.path().join("o2");
    let out = tokdyn()
        .arg("sweep")
        .arg(&s)
        .arg("--out")
        .arg(&o2)
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.starts_with("error:") && err.contains("continuation.cycles") && err.contains("Hopf"),
        "{err}"
    );
    assert!(!o2.join("sweep.csv").exists());
}
