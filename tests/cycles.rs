//! Periodic-orbit continuation (`[continuation] cycles = true`, `cycles.csv`): the cycles of a
//! supercritical Hopf point against a direct long integration of the OA equation written here
//! (RK4; started where its own return map to a half-line has a fixed point; the period from
//! successive crossings, the |R2| range, the multiplier as the exponential of the integral of
//! tr J); a subcritical Hopf point's unstable cycles against backward-time integration and its
//! homoclinic end; the normal form (amplitude ~ sqrt of the
//! distance to the Hopf point); a fold of cycles; bad input.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use num_complex::Complex64;
use tokdyn::reduced::SecondHarmonic;

#[path = "common/family.rs"]
mod family;
use family::{base, coefficients};

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
    run_cycles_at(dir, v11, -0.1, from, to, step)
}

/// [`run_cycles`] with the base scenario at v12 = `v12`.
fn run_cycles_at(dir: &Path, v11: f64, v12: f64, from: f64, to: f64, step: f64) -> Run {
    write(dir, "base.toml", &base(v11, v12));
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

/// One crossing of the half-line {Im(R - c) = 0, Re(R - c) > 0} within the RK4 step r -> r1
/// (dt): the fraction of the step and Re(R - c) there (cubic Hermite interpolation).
fn crossing(
    field: &Field,
    c: Complex64,
    r: Complex64,
    r1: Complex64,
    dt: f64,
) -> Option<(f64, f64)> {
    let (y0, y1) = ((r - c).im, (r1 - c).im);
    if (y0 < 0.0) == (y1 < 0.0) || (r - c).re <= 0.0 {
        return None;
    }
    let (f0, f1) = (field.f(r) * dt, field.f(r1) * dt);
    let hermite = |s: f64, a: f64, b: f64, fa: f64, fb: f64| {
        let (s2, s3) = (s * s, s * s * s);
        (2.0 * s3 - 3.0 * s2 + 1.0) * a
            + (s3 - 2.0 * s2 + s) * fa
            + (-2.0 * s3 + 3.0 * s2) * b
            + (s3 - s2) * fb
    };
    let (mut a, mut b) = (0.0, 1.0);
    let up = y1 > y0;
    for _ in 0..60 {
        let m = 0.5 * (a + b);
        if (hermite(m, y0, y1, f0.im, f1.im) < 0.0) == up {
            a = m;
        } else {
            b = m;
        }
    }
    let s = 0.5 * (a + b);
    let x = hermite(s, (r - c).re, (r1 - c).re, f0.re, f1.re);
    Some((s, x))
}

/// The return map of the half-line from c + x (RK4 steps dt): where the orbit crosses it
/// next, in the same direction.
fn return_map(field: &Field, c: Complex64, x: f64, dt: f64) -> f64 {
    let mut r = c + x;
    let mut away = false;
    for _ in 0..50_000_000 {
        let r1 = field.step(r, dt);
        away |= (r1 - c).re < 0.0;
        if away {
            if let Some((_, x1)) = crossing(field, c, r, r1, dt) {
                return x1;
            }
        }
        r = r1;
    }
    f64::NAN
}

/// The innermost cycle through the half-line from c within x < x_max: a scan for the first
/// sign change of P(x) - x from x = 1e-3, then bisection.
fn cycle_crossing(field: &Field, c: Complex64, x_max: f64, dt: f64) -> f64 {
    let g = |x: f64| return_map(field, c, x, dt) - x;
    let mut lo = 1e-3;
    let g_lo = g(lo);
    let mut hi = f64::NAN;
    for k in 1..=32 {
        let x = x_max * k as f64 / 32.0;
        let gx = g(x);
        assert!(gx.is_finite(), "the orbit from x = {x} does not return");
        if (gx < 0.0) != (g_lo < 0.0) {
            hi = x;
            break;
        }
        lo = x;
    }
    assert!(hi.is_finite(), "no sign change of P(x) - x below {x_max}");
    for _ in 0..45 {
        let m = 0.5 * (lo + hi);
        if (g(m) < 0.0) == (g_lo < 0.0) {
            lo = m;
        } else {
            hi = m;
        }
    }
    0.5 * (lo + hi)
}

/// The x with |c + x| = min(h + 0.02, 0.995): outside a cycle whose max |R| is h.
fn outer(c: Complex64, h: f64) -> f64 {
    let h = (h + 0.02).min(0.995);
    -c.re + (h * h - c.im * c.im).sqrt()
}

/// A long integration (RK4 steps dt, backward in time for dt < 0) from c + x over `periods`
/// returns to the half-line: the mean period, min / max |R| and exp(integral of tr J) over the
/// last period (in forward time).
fn measure(field: &Field, c: Complex64, x: f64, dt: f64, periods: usize) -> Measured {
    let mut r = c + x;
    let (mut t, mut integral) = (0.0, 0.0);
    let mut crossings = vec![(0.0, 0.0)];
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    let mut away = false;
    while crossings.len() <= periods {
        let r1 = field.step(r, dt);
        let tr_mid = field.trace(field.step(r, dt / 2.0));
        let piece = dt * (field.trace(r) + 4.0 * tr_mid + field.trace(r1)) / 6.0;
        away |= (r1 - c).re < 0.0;
        if away {
            if let Some((s, _)) = crossing(field, c, r, r1, dt) {
                crossings.push((t + s * dt.abs(), integral + s * piece));
                away = false;
                if crossings.len() == periods {
                    lo = f64::INFINITY;
                    hi = 0.0;
                }
            }
        }
        lo = lo.min(r1.norm());
        hi = hi.max(r1.norm());
        integral += piece;
        t += dt.abs();
        r = r1;
    }
    let n = crossings.len() - 1;
    Measured {
        period: crossings[n].0 / n as f64,
        lo,
        hi,
        mu: (dt.signum() * (crossings[n].1 - crossings[n - 1].1)).exp(),
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
            .filter(|r| r.point.is_empty() && r.mu < 0.95 && r.period < 2.0 * rows[0].period)
            .collect();
        for row in [picks.first(), picks.last()].into_iter().flatten() {
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
            // The cycle's crossing of the half-line from the fixed point inside, found by
            // the integration's own return map, then a long integration from there.
            let x = cycle_crossing(&field, centre, outer(centre, row.hi), 0.002);
            let m = measure(&field, centre, x, 0.002, 20);
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
                (m.mu.ln() - row.mu.ln()).abs() < 1e-6,
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
            .find(|r| r.point.is_empty() && r.mu > 1.02)
            .unwrap();
        let field = Field(coefficients(V11, row.p));
        let centre = equilibrium(
            &field,
            Complex64::new(
                list["hopf"]["r2"][0].as_f64().unwrap(),
                list["hopf"]["r2"][1].as_f64().unwrap(),
            ),
        );
        let x = cycle_crossing(&field, centre, outer(centre, row.hi), -0.002);
        let m = measure(&field, centre, x, -0.002, 20);
        eprintln!("{p_h} {row:?}: {} {} {} {}", m.period, m.lo, m.hi, m.mu);
        assert!(((m.period - row.period) / row.period).abs() < 1e-5);
        assert!((m.lo - row.lo).abs() < 1e-5 && (m.hi - row.hi).abs() < 1e-5);
        assert!(
            (m.mu.ln() - row.mu.ln()).abs() < 1e-6,
            "{} {}",
            m.mu,
            row.mu
        );
        // These cycles grow into a homoclinic orbit: the period's law T = -a ln|p - p*| + b
        // has a = 1 / min(lambda_u, -lambda_s) of the saddle (the cycles are unstable).
        assert_eq!(list["end"], "HC");
        assert_eq!(rows.last().unwrap().point, "HC");
        let law = &list["law"];
        let (a, theory) = (
            law["a"].as_f64().unwrap(),
            law["a_theory"].as_f64().unwrap(),
        );
        let ev = law["saddle_eigenvalues"].as_array().unwrap();
        let (ls, lu) = (ev[0].as_f64().unwrap(), ev[1].as_f64().unwrap());
        assert!(ls < 0.0 && lu > 0.0 && lu + ls > 0.0, "{ls} {lu}");
        assert!((theory - 1.0 / -ls).abs() < 1e-9 * theory);
        assert!(
            ((a - theory) / theory).abs() < 0.02,
            "a = {a}, theory {theory}"
        );
        let last = rows.last().unwrap();
        assert!(last.period > 20.0 * rows[0].period && last.mu > 1e6);
    }
}

/// v11 = -0.13: the stable cycles of the supercritical Hopf point turn back at a fold of
/// cycles (LPC) and go on unstable.
#[test]
fn a_fold_of_cycles_has_multiplier_one_and_turns_the_branch() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_cycles(dir.path(), -0.13, -0.6, 0.4, 0.005);
    let (_, _, rows) = &branches_with(&run, true)[0];
    let k = rows.iter().position(|r| r.point == "LPC").expect("an LPC");
    let (before, lpc, after) = (&rows[k - 1], &rows[k], &rows[k + 1]);
    assert!((lpc.mu - 1.0).abs() < 1e-6, "{lpc:?}");
    // p is extreme there: both neighbours on the same side.
    assert!(
        (before.p - lpc.p) * (after.p - lpc.p) > 0.0,
        "{before:?} {lpc:?} {after:?}"
    );
    // Stability changes across it (stable before, unstable after, or the reverse).
    assert_ne!(before.stable, after.stable);
    assert!((before.mu - 1.0) * (after.mu - 1.0) < 0.0);
    // Exactly one: a turn of p in round-off near the homoclinic end is not an LPC.
    assert_eq!(rows.iter().filter(|r| r.point == "LPC").count(), 1);
}

#[test]
fn near_the_hopf_point_the_amplitude_grows_like_the_square_root_of_the_distance() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_cycles(dir.path(), V11_SUPER, -0.6, 0.4, 0.002);
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

#[test]
fn a_branch_ends_exactly_at_the_interval_end() {
    // The supercritical cycles of v11 = 0.25 grow while v12 falls from the Hopf point at
    // about -0.0722; the interval stops them at -0.08.
    let dir = tempfile::tempdir().unwrap();
    let run = run_cycles(dir.path(), V11_SUPER, -0.08, 0.0, 0.005);
    let (k, p_h, rows) = &branches_with(&run, true)[0];
    assert!(*p_h > -0.08 && *p_h < -0.07);
    assert_eq!(
        run.summary["continuation"]["cycles"]["list"][k - 1]["end"],
        "interval"
    );
    let last = rows.last().unwrap();
    assert_eq!(last.p, -0.08);
    assert!(rows
        .iter()
        .all(|r| (-0.08..=0.0).contains(&r.p) && r.stable));
}

/// The repelling focus of the field (tr J > 0, det J > 0) that a stable cycle surrounds:
/// Newton from a grid of seeds over the disk.
fn source(field: &Field) -> Complex64 {
    let h = 1e-6;
    let det = |r: Complex64| {
        let dx = (field.f(r + h) - field.f(r - h)) / (2.0 * h);
        let i = Complex64::i() * h;
        let dy = (field.f(r + i) - field.f(r - i)) / (2.0 * h);
        dx.re * dy.im - dy.re * dx.im
    };
    (-9..=9)
        .flat_map(|i| (-9..=9).map(move |j| Complex64::new(i as f64 / 10.0, j as f64 / 10.0)))
        .filter(|s| s.norm() < 0.95)
        .map(|s| equilibrium(field, s))
        .find(|r| {
            r.norm() < 0.99 && field.f(*r).norm() < 1e-12 && field.trace(*r) > 0.0 && det(*r) > 0.0
        })
        .expect("a repelling focus")
}

#[test]
fn a_cycle_predict_finds_is_continued_without_a_hopf_point() {
    // v11 = 0.25: the supercritical Hopf point at v12 = -0.0722 lies outside [-0.1, -0.075];
    // predict finds its grown stable cycle at the base value v12 = -0.085.
    const BASE: f64 = -0.085;
    let dir = tempfile::tempdir().unwrap();
    let run = run_cycles_at(dir.path(), V11_SUPER, BASE, -0.1, -0.075, 0.002);
    let list = run.summary["continuation"]["cycles"]["list"]
        .as_array()
        .unwrap();
    let started: Vec<&serde_json::Value> = list.iter().filter(|b| b["hopf"].is_null()).collect();
    assert_eq!(started.len(), 2, "{list:?}");
    for b in &started {
        let o = &b["predicted"];
        assert_eq!(o["parameter"].as_f64(), Some(BASE));
        assert_eq!(o["kind"], "stable");
        let period = o["period"].as_f64().unwrap();
        let k = b["branch"].as_u64().unwrap() as usize;
        let rows: Vec<&Row> = run.rows.iter().filter(|r| r.branch == k).collect();
        // The branch passes through predict's orbit.
        assert_eq!(rows[0].p, BASE, "{:?}", rows[0]);
        assert!(
            (rows[0].period / period - 1.0).abs() < 1e-6,
            "{:?}",
            rows[0]
        );
        let up = o["direction"] == "up";
        assert!(rows.iter().all(|r| (r.p >= BASE) == up || r.p == BASE));
    }
    // Predict's period against a direct integration at the base value.
    let k0 = started[0]["branch"].as_u64().unwrap() as usize;
    let first = run.rows.iter().find(|r| r.branch == k0).unwrap();
    let field = Field(coefficients(V11_SUPER, BASE));
    let centre = source(&field);
    let x = cycle_crossing(&field, centre, outer(centre, first.hi), 0.002);
    let direct = measure(&field, centre, x, 0.002, 20).period;
    assert!(
        (direct / first.period - 1.0).abs() < 1e-5,
        "{first:?} {direct}"
    );
    // At another parameter value: the branch's period against a direct integration.
    let row = run
        .rows
        .iter()
        .filter(|r| {
            started
                .iter()
                .any(|b| b["branch"].as_u64() == Some(r.branch as u64))
        })
        .rfind(|r| r.point.is_empty() && r.mu < 0.95 && (r.p - BASE).abs() > 0.005)
        .expect("a cycle away from the base value");
    let field = Field(coefficients(V11_SUPER, row.p));
    let centre = source(&field);
    let x = cycle_crossing(&field, centre, outer(centre, row.hi), 0.002);
    let m = measure(&field, centre, x, 0.002, 20);
    assert!(
        ((m.period - row.period) / row.period).abs() < 1e-5,
        "period {} against {} at {}",
        row.period,
        m.period,
        row.p
    );
    // With the Hopf point inside [-0.1, 0], predict's cycle at the base value -0.08 lies on
    // the Hopf point's branch (which passes -0.08): it is not traced again.
    let run = run_cycles_at(dir.path(), V11_SUPER, -0.08, -0.1, 0.0, 0.002);
    let list = run.summary["continuation"]["cycles"]["list"]
        .as_array()
        .unwrap();
    assert!(list.iter().all(|b| !b["hopf"].is_null()), "{list:?}");
    let hopf_rows: Vec<f64> = run.rows.iter().map(|r| r.p).collect();
    assert!(hopf_rows.iter().any(|p| *p < -0.08) && hopf_rows.iter().any(|p| *p > -0.08));
}
