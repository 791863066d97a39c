//! `compare` runs the mean field beside the particles (docs/MATH.md §17.5): on the
//! Ott–Antonsen manifold n lsa tokens follow the density exactly (up to O(r0^n)); a noisy
//! ensemble's stationary |R1| is the density's within its error bars; what the mean field
//! cannot run is refused for a noisy compare and skipped for a deterministic one.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn tokdyn() -> Command {
    Command::cargo_bin("tokdyn").unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `tokdyn compare FILE --out OUT`, which must succeed.
fn compare(file: &Path, out: &Path) {
    tokdyn()
        .args(["compare", file.to_str().unwrap(), "--out"])
        .arg(out)
        .assert()
        .success();
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// compare.csv-like rows of compare_mean_field.csv as numbers (empty cells as NaN).
fn beside(dir: &Path) -> (String, Vec<Vec<f64>>) {
    let text = std::fs::read_to_string(dir.join("compare_mean_field.csv")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_string();
    let rows = lines
        .map(|l| {
            l.split(',')
                .map(|c| c.parse().unwrap_or(f64::NAN))
                .collect()
        })
        .collect();
    (header, rows)
}

const HEADER: &str = "t,particles_r1_abs,particles_r1_error,mean_field_r1_abs,particles_nematic,particles_nematic_error,mean_field_nematic";

#[test]
fn lsa_tokens_on_the_oa_manifold_follow_the_density() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "spiral.toml",
        r#"
name = "spiral"
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = [[-0.2, 1.5], [-1.5, 0.1]]
V = "identity"
[tokens]
n = 200
init = "poisson"
r0 = 0.3
phi0 = 0.5
[time]
t_end = 20.0
samples = 81
"#,
    );
    let out = dir.path().join("out");
    compare(&file, &out);
    let compare = &json(&out.join("summary.json"))["compare"];
    // The density is the Poisson kernel of R2(0) = c, as the tokens' angles are; the
    // particles' R2 solves OA to O(r0^n), the density's exactly.
    let gap = compare["mean_field_vs_full"].as_f64().unwrap();
    assert!(gap < 1e-6, "max |R2 - R2_rho| = {gap:e}");
    assert!(gap > 0.0);
    let (header, rows) = beside(&out);
    assert_eq!(header, HEADER);
    assert_eq!(rows.len(), 81);
    for r in &rows {
        // One run: no error bars; s = |R2| of the particles and of the density agree.
        assert!(r[2].is_nan() && r[5].is_nan());
        assert!((r[4] - r[6]).abs() < 1e-6, "{r:?}");
    }
    let m = &compare["mean_field"];
    assert_eq!(m["runs"], 1);
    assert_eq!(m["tokens"], 200);
    assert!(m["max_nematic_distance"].as_f64().unwrap() < 1e-6);
    assert!(m["max_r1_z"].is_null());
}

#[test]
fn a_noisy_ensemble_settles_on_the_stationary_density_within_its_error_bars() {
    let dir = tempfile::tempdir().unwrap();
    // usa, beta = 5, T = 4 < T_c = 4.867: the uniform state is unstable and the one-bump
    // state holds the tokens; the particles start uniform (random phases), the density from
    // uniform plus a small first mode, so only the stationary part is compared.
    let file = write(
        dir.path(),
        "noisy.toml",
        r#"
name = "noisy"
[model]
kernel = "usa"
beta = 5.0
d = 2
A = "identity"
V = "identity"
[tokens]
n = 300
init = "uniform"
seed = 3
[density]
init = "uniform"
modes = [[1, 0.05, 0.0]]
[noise]
temperature = 4.0
seed = 11
[ensemble]
runs = 6
[time]
t_end = 10.0
samples = 21
"#,
    );
    let out = dir.path().join("out");
    compare(&file, &out);
    for name in ["ensemble.csv", "ensemble_order.csv", "ensemble.png"] {
        assert!(out.join(name).is_file(), "{name}");
    }
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["ensemble"]["runs"], 6);
    let (header, rows) = beside(&out);
    assert_eq!(header, HEADER);
    // The columns are ensemble_order.csv's means and sd / sqrt(runs).
    let order = std::fs::read_to_string(out.join("ensemble_order.csv")).unwrap();
    let first: Vec<f64> = order
        .lines()
        .nth(10)
        .unwrap()
        .split(',')
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(first[1], rows[9][1]);
    assert!((first[2] / 6f64.sqrt() - rows[9][2]).abs() < 1e-15);
    let n = 300.0;
    let tail: Vec<&Vec<f64>> = rows.iter().filter(|r| r[0] >= 6.0).collect();
    assert!(tail.len() >= 8);
    for r in tail {
        let (particles, error, density) = (r[1], r[2], r[3]);
        // The density holds the bump (|R1| about 0.95 at T = 4).
        assert!(density > 0.9, "{r:?}");
        // Within 4 standard errors plus the finite-size bias O(1 / n).
        assert!(
            (particles - density).abs() <= 4.0 * error + 2.0 / n,
            "t = {}: particles {particles} +- {error}, density {density}",
            r[0]
        );
    }
    let m = &summary["compare"]["mean_field"];
    assert_eq!(m["runs"], 6);
    assert!(m["max_r1_z"].as_f64().unwrap() > 0.0);
}

#[test]
fn what_the_mean_field_cannot_run_is_refused_with_noise_and_skipped_without() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"
name = "masked"
[model]
kernel = "usa"
beta = 1.0
d = 2
A = "identity"
V = "identity"
mask = "causal"
[tokens]
n = 20
seed = 1
[time]
t_end = 2.0
samples = 11
"#;
    // Without noise: lsa in d = 3 with an A that is not a multiple of I (the mean field
    // needs A and V multiples of I there) compares full and group only.
    let file = write(
        dir.path(),
        "d3.toml",
        r#"
name = "d3"
[model]
kernel = "lsa"
beta = 1.0
d = 3
A = [[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]]
V = "identity"
[tokens]
n = 20
seed = 1
[time]
t_end = 2.0
samples = 11
"#,
    );
    let out = dir.path().join("plain");
    compare(&file, &out);
    assert!(!out.join("compare_mean_field.csv").exists());
    assert!(json(&out.join("summary.json"))["compare"]
        .get("mean_field")
        .is_none());
    let noisy = write(
        dir.path(),
        "noisy.toml",
        &format!("{text}[noise]\ntemperature = 0.5\n"),
    );
    let out = dir.path().join("noisy");
    let assert = tokdyn()
        .args(["compare", noisy.to_str().unwrap(), "--out"])
        .arg(&out)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.contains("noise.temperature"));
    assert!(stderr.contains("mask"), "{stderr}");
    assert!(!out.exists());
}
