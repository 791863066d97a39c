//! Sweeps whose points are ensembles, and sweeps over the noise temperature: every point's
//! label is the most frequent of its runs (as `tokdyn run` of the point's scenario counts
//! them), the bytes do not depend on the threads, on `--resume` or on shards; the transition
//! of the noisy Kuramoto model sits at the self-consistent |R1| (computed here), and a sweep
//! that goes back starts every point from the previous one's tokens.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

const SCENARIO: &str = r#"
name = "ens-point"
[model]
kernel = "usa"
beta = 0
d = 2
A = "identity"
V = "identity"
[tokens]
n = 100
seed = 5
[time]
t_end = 8.0
samples = 41
[noise]
temperature = 0.3
seed = 20
dt = 0.05
[ensemble]
runs = 5
"#;

const SWEEP: &str = r#"
name = "ens-sweep"
scenario = "point.toml"
[axes]
"noise.temperature" = { from = 0.05, to = 2.05, steps = 3 }
"#;

/// The labels in the order that breaks ties (the first wins).
const TIE_ORDER: [&str; 7] = [
    "converged-clusters",
    "rotating-clusters",
    "oscillation",
    "interior-point",
    "rotating-interior",
    "undetermined",
    "metastable-clusters",
];

fn tokdyn() -> Command {
    let mut c = Command::cargo_bin("tokdyn").unwrap();
    for v in [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_STEP",
    ] {
        c.env_remove(v);
    }
    c
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

fn sweep(file: &Path, out: &Path, threads: &str, extra: &[&str]) {
    tokdyn()
        .env("RAYON_NUM_THREADS", threads)
        .arg("sweep")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(extra)
        .assert()
        .success();
}

/// A CSV file as its header and rows.
fn table(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header = r.headers().unwrap().iter().map(String::from).collect();
    let rows = r
        .records()
        .map(|rec| rec.unwrap().iter().map(String::from).collect())
        .collect();
    (header, rows)
}

fn column(header: &[String], name: &str) -> usize {
    header.iter().position(|h| h == name).unwrap()
}

/// The most frequent label of `labels` (ties by `TIE_ORDER`) and its share.
fn most_frequent(labels: &[String]) -> (String, f64) {
    let mut best = ("", 0);
    for l in TIE_ORDER {
        let c = labels.iter().filter(|x| *x == l).count();
        if c > best.1 {
            best = (l, c);
        }
    }
    (best.0.to_string(), best.1 as f64 / labels.len() as f64)
}

#[test]
fn ensemble_points_are_the_runs_of_their_scenarios_with_shares_and_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let point = write(dir.path(), "point.toml", SCENARIO);
    let file = write(dir.path(), "sweep.toml", SWEEP);
    let one = dir.path().join("one");
    sweep(&file, &one, "1", &[]);
    let (header, rows) = table(&one.join("sweep.csv"));
    // `label_share` comes just before `cluster_count`, the last column of every sweep.
    assert_eq!(
        header[header.len() - 2..],
        ["label_share", "cluster_count"],
        "{header:?}"
    );
    assert_eq!(rows.len(), 3);
    let (lc, sc) = (column(&header, "label"), column(&header, "label_share"));
    let mut labels_seen = Vec::new();
    for row in &rows {
        // The point's ensemble as `tokdyn run` runs it: its per-run labels.
        let out = dir.path().join(format!("run-{}", row[0]));
        tokdyn()
            .arg("run")
            .arg(&point)
            .args(["--set", &format!("noise.temperature={}", row[0])])
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let (h, runs) = table(&out.join("ensemble.csv"));
        let labels: Vec<String> = runs
            .iter()
            .map(|r| r[column(&h, "label")].clone())
            .collect();
        assert_eq!(labels.len(), 5);
        let (label, share) = most_frequent(&labels);
        assert_eq!(row[lc], label, "T = {}: {labels:?}", row[0]);
        let got: f64 = row[sc].parse().unwrap();
        assert!(
            (got - share).abs() < 1e-15,
            "T = {}: {got} vs {share}",
            row[0]
        );
        // The numbers are those of the first run with the label.
        let first = labels.iter().position(|l| *l == label).unwrap();
        let r2 = column(&header, "r2_abs_final");
        assert_eq!(
            row[r2],
            runs[first][column(&h, "r2_abs_final")],
            "T = {}",
            row[0]
        );
        labels_seen.push(label);
    }
    // Ordered when cold, disordered when hot (the transition is at T = 1/2).
    assert_eq!(labels_seen[0], "converged-clusters");
    assert_eq!(labels_seen[2], "interior-point");

    // Two threads: the same bytes, transition.csv included.
    let two = dir.path().join("two");
    sweep(&file, &two, "2", &[]);
    for f in ["sweep.csv", "transition.csv"] {
        assert_eq!(
            fs::read(one.join(f)).unwrap(),
            fs::read(two.join(f)).unwrap(),
            "{f}"
        );
    }
    assert!(two.join("transition.png").exists());

    // A sweep stopped after its first point and resumed: the same bytes.
    let progress = two.join("sweep.progress");
    let text = fs::read_to_string(&progress).unwrap();
    let kept: Vec<&str> = text.lines().take(2).collect();
    assert!(kept[1].starts_with("g,"), "{text}");
    fs::write(&progress, format!("{}\n", kept.join("\n"))).unwrap();
    for f in ["sweep.csv", "transition.csv", "summary.json"] {
        fs::remove_file(two.join(f)).unwrap();
    }
    sweep(&file, &two, "2", &["--resume"]);
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(two.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["computed"], 2, "{summary}");
    for f in ["sweep.csv", "transition.csv"] {
        assert_eq!(
            fs::read(one.join(f)).unwrap(),
            fs::read(two.join(f)).unwrap(),
            "{f} after --resume"
        );
    }

    // Shards and a merge: the same sweep.csv; an unsharded --resume then draws from them.
    let sharded = dir.path().join("sharded");
    sweep(&file, &sharded, "2", &["--shard", "1/2"]);
    sweep(&file, &sharded, "2", &["--shard", "2/2"]);
    tokdyn().arg("merge").arg(&sharded).assert().success();
    assert_eq!(
        fs::read(one.join("sweep.csv")).unwrap(),
        fs::read(sharded.join("sweep.csv")).unwrap()
    );
    sweep(&file, &sharded, "2", &["--resume"]);
    assert_eq!(
        fs::read(one.join("transition.csv")).unwrap(),
        fs::read(sharded.join("transition.csv")).unwrap()
    );
}

/// I_0 and I_1 by their power series.
fn bessel_i01(x: f64) -> (f64, f64) {
    let (mut i0, mut i1) = (0.0, 0.0);
    let (mut t0, mut t1) = (1.0, x / 2.0);
    for k in 0..300 {
        i0 += t0;
        i1 += t1;
        let k = k as f64;
        t0 *= (x / 2.0) * (x / 2.0) / ((k + 1.0) * (k + 1.0));
        t1 *= (x / 2.0) * (x / 2.0) / ((k + 1.0) * (k + 2.0));
    }
    (i0, i1)
}

/// The ordered root of r = I_1(r / T) / I_0(r / T) (0 for T >= 1/2), by iteration from 1.
fn kuramoto_r(temperature: f64) -> f64 {
    let mut r: f64 = 1.0;
    for _ in 0..50_000 {
        let (i0, i1) = bessel_i01(r / temperature);
        r = i1 / i0;
        if r < 1e-9 {
            return 0.0;
        }
    }
    r
}

#[test]
fn the_noisy_kuramoto_transition_sits_at_the_self_consistent_order_there_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let text = SCENARIO
        .replace("n = 100", "n = 600")
        .replace("t_end = 8.0\nsamples = 41", "t_end = 40.0\nsamples = 201")
        .replace("runs = 5", "runs = 2");
    write(dir.path(), "point.toml", &text);
    let file = write(
        dir.path(),
        "sweep.toml",
        &SWEEP.replace(
            "{ from = 0.05, to = 2.05, steps = 3 }",
            "{ from = 0.25, to = 0.75, steps = 2, back = true }",
        ),
    );
    let out = dir.path().join("out");
    sweep(&file, &out, "2", &[]);
    let (h, rows) = table(&out.join("transition.csv"));
    let legs: Vec<&str> = rows.iter().map(|r| r[column(&h, "leg")].as_str()).collect();
    assert_eq!(legs, ["out", "out", "back"]);
    let n = 600.0f64;
    for row in &rows {
        let t: f64 = row[0].parse().unwrap();
        let r1: f64 = row[column(&h, "r1_mean")].parse().unwrap();
        let mean_field: f64 = row[column(&h, "mean_field_r1")].parse().unwrap();
        let expected = kuramoto_r(t);
        assert!(
            (mean_field - expected).abs() < 1e-6,
            "T = {t}: mean field {mean_field} vs {expected}"
        );
        eprintln!("T = {t} ({}): |R1| {r1} vs {expected}", row[1]);
        if t < 0.5 {
            assert!((r1 - expected).abs() < 0.05, "T = {t}: {r1} vs {expected}");
        } else {
            assert!(r1 < 4.0 / n.sqrt(), "T = {t}: {r1}");
        }
    }
    let (sh, srows) = table(&out.join("sweep.csv"));
    let temps: Vec<&str> = srows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(temps, ["0.25", "0.75", "0.25"]);
    assert!(!sh.contains(&"r1_mean".to_string()), "{sh:?}");
    assert!(out.join("transition.png").exists());
}

#[test]
fn a_sweep_that_goes_back_starts_each_point_from_the_previous_tokens() {
    // Nearly noiseless Kuramoto from uniform tokens, too short to synchronise in one point:
    // carried over from point to point, the order keeps growing, so the point back at the
    // first temperature is more ordered than the first (a fresh start would repeat it).
    let dir = tempfile::tempdir().unwrap();
    let text = SCENARIO
        .replace("n = 100", "n = 200")
        .replace("t_end = 8.0\nsamples = 41", "t_end = 2.0\nsamples = 21")
        .replace("runs = 5", "runs = 3");
    write(dir.path(), "point.toml", &text);
    let file = write(
        dir.path(),
        "sweep.toml",
        &SWEEP.replace(
            "{ from = 0.05, to = 2.05, steps = 3 }",
            "{ from = 0.0, to = 0.002, steps = 2, back = true }",
        ),
    );
    let out = dir.path().join("out");
    sweep(&file, &out, "2", &[]);
    let (h, rows) = table(&out.join("transition.csv"));
    let r: Vec<f64> = rows
        .iter()
        .map(|row| row[column(&h, "r1_mean")].parse().unwrap())
        .collect();
    assert_eq!(r.len(), 3);
    assert!(r[0] < 0.5, "{r:?}");
    assert!(r[1] > r[0] + 0.1 && r[2] > r[1] + 0.05, "{r:?}");

    // Not shardable; other grids cannot go back.
    let out = tokdyn()
        .arg("sweep")
        .arg(&file)
        .args(["--shard", "1/2", "--out"])
        .arg(dir.path().join("s"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error:") && err.contains("back"), "{err}");
    let two_axes = SWEEP.replace(
        "{ from = 0.05, to = 2.05, steps = 3 }",
        "{ from = 0.0, to = 0.002, steps = 2, back = true }\n\"tokens.seed\" = { from = 1, to = 2, steps = 2 }",
    );
    let file = write(dir.path(), "two.toml", &two_axes);
    let out = tokdyn().arg("sweep").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("one axis"), "{err}");

    // Runs above the bound: refused before any point, nothing written.
    let never = dir.path().join("never");
    let out = tokdyn()
        .arg("sweep")
        .arg(dir.path().join("sweep.toml"))
        .args(["--set", "ensemble.runs=100001", "--out"])
        .arg(&never)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error:") && err.contains("ensemble.runs"),
        "{err}"
    );
    assert!(!never.join("sweep.csv").exists() && !never.join("sweep.progress").exists());
}
