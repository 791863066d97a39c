//! Long runs of softmax attention whose labels and events must not depend on the output
//! sampling (docs/MATH.md §11): clusters that swing for ever are not metastable; the cluster
//! model takes over when the clusters become tight and keeps every merge; a run at rest ends;
//! one cluster circling the sphere is read at the cluster model's own resolution.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn tokdyn() -> Command {
    Command::cargo_bin("tokdyn").unwrap()
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/long_runs")
        .join(name)
}

fn run(path: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    tokdyn()
        .arg("run")
        .arg(path)
        .arg("--out")
        .arg(out)
        .args(extra)
        .assert()
        .success();
    serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// The columns of a CSV file by header name.
fn column(path: &Path, name: &str) -> Vec<f64> {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let at = reader
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {}", path.display()));
    reader
        .records()
        .map(|r| r.unwrap()[at].parse().unwrap())
        .collect()
}

/// (from_count, to_count, t) of a summary's merges.
fn merges(summary: &serde_json::Value) -> Vec<(u64, u64, f64)> {
    summary["clusters"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["from_count"].as_u64().unwrap(),
                m["to_count"].as_u64().unwrap(),
                m["t"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn clusters_that_swing_for_ever_are_not_metastable() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pairs");
    let summary = run(&data("swinging-pairs.toml"), &out, &[]);
    // Independent of the label: the two pairs are tight at every sample, never merge, and the
    // angle between them keeps swinging through the last quarter (|R1| = cos(angle / 2)).
    let counts = column(&out.join("clusters.csv"), "count");
    assert!(
        counts.iter().all(|&c| c == 2.0),
        "the pairs stay two tight clusters"
    );
    let t = column(&out.join("order.csv"), "t");
    let r1 = column(&out.join("order.csv"), "r1_abs");
    let tail: Vec<f64> = t
        .iter()
        .zip(&r1)
        .filter(|(t, _)| **t > 750.0)
        .map(|(_, r)| *r)
        .collect();
    let (lo, hi) = tail.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
        (lo.min(*r), hi.max(*r))
    });
    assert!(hi - lo > 0.3, "|R1| swings from {lo} to {hi} in the tail");
    assert_ne!(summary["label"], "metastable-clusters", "{summary}");
    assert_eq!(summary["label"], "oscillation", "{summary}");
    assert!(summary["clusters"]["metastable"].is_null());
    let reason = summary["label_reason"].as_str().unwrap();
    assert!(reason.contains("without merging"), "{reason}");
}

/// sa, beta = 16, 2000 tokens on a half circle (evenly spaced angles in [0, pi)).
const HALF_CIRCLE: &str =
    "[model]\nkernel = \"sa\"\nbeta = 16.0\nd = 2\nA = \"identity\"\nV = \"identity\"\n\
     [tokens]\nn = 2000\ninit = \"splay\"\n[time]\nt_end = 100000.0\nsamples = 2001\n";

#[test]
fn the_cluster_model_takes_over_when_the_clusters_are_tight_whatever_the_sampling() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("half.toml");
    fs::write(&path, format!("name = \"half\"\n{HALF_CIRCLE}")).unwrap();
    // The reference: the full model sampled every 0.05 up to t = 100.
    let fine = run(
        &path,
        &dir.path().join("fine"),
        &["--set", "time.t_end=100", "--set", "time.samples=2001"],
    );
    // The cluster model on a grid 50 time units apart, to t = 1e5.
    let coarse = run(&path, &dir.path().join("coarse"), &["--model", "clusters"]);
    let (m_fine, m_coarse) = (merges(&fine), merges(&coarse));
    assert!(m_fine.len() >= 2, "{fine}");
    assert_eq!(
        m_fine.iter().map(|m| (m.0, m.1)).collect::<Vec<_>>(),
        m_coarse.iter().map(|m| (m.0, m.1)).collect::<Vec<_>>(),
        "fine {m_fine:?}, coarse {m_coarse:?}"
    );
    for (a, b) in m_fine.iter().zip(&m_coarse) {
        assert!(
            (a.2 - b.2).abs() < 0.01 * a.2 + 0.1,
            "{m_fine:?} {m_coarse:?}"
        );
    }
    // The history starts with the formation, at the time the clusters became tight.
    let history = coarse["clusters"]["history"].as_array().unwrap();
    let (first, second) = (&history[0], &history[1]);
    assert_eq!(first["count"], 0);
    let formed = first["to"].as_f64().unwrap();
    assert!(formed > 0.0 && formed < 50.0, "{history:?}");
    assert_eq!(second["from"].as_f64().unwrap(), formed);
    let fine_history = fine["clusters"]["history"].as_array().unwrap();
    let fine_formed = fine_history
        .iter()
        .find(|p| p["count"].as_u64().unwrap() > 0)
        .unwrap()["from"]
        .as_f64()
        .unwrap();
    assert!((formed - fine_formed).abs() < 0.2, "{formed} {fine_formed}");
}

#[test]
fn a_run_that_cannot_change_ends_and_repeats_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rest.toml");
    fs::write(
        &path,
        "name = \"rest\"\n[model]\nkernel = \"sa\"\nbeta = 2.0\nd = 2\nA = \"identity\"\nV = \"identity\"\n\
         [tokens]\nn = 50\ninit = \"uniform\"\n[time]\nt_end = 1e12\nsamples = 2001\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let long = run(&path, &dir.path().join("long"), &["--model", "clusters"]);
    assert!(started.elapsed().as_secs_f64() < 60.0);
    assert_eq!(long["t_final"], 1e12);
    assert_eq!(long["clusters"]["count"], 1);
    assert_eq!(long["label"], "converged-clusters");
    // Every sample after the rest repeats the state.
    let order = dir.path().join("long/order.csv");
    let r2_re = column(&order, "r2_re");
    assert_eq!(r2_re.len(), 2001);
    assert!(r2_re[10..].iter().all(|v| *v == r2_re[10]));
    // The state it rests in is where the full model goes: its final tokens at t = 1e4.
    let full = dir.path().join("full");
    run(
        &path,
        &full,
        &["--set", "time.t_end=1e4", "--set", "time.samples=11"],
    );
    let read = |p: &Path| -> Vec<f64> {
        fs::read_to_string(p)
            .unwrap()
            .lines()
            .skip(1)
            .flat_map(|l| {
                l.split(',')
                    .map(|v| v.parse::<f64>().unwrap())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let (a, b) = (
        read(&dir.path().join("long/tokens_final.csv")),
        read(&full.join("tokens_final.csv")),
    );
    assert_eq!(a.len(), b.len());
    // One point (every token at the same place), which the full model reaches too, up to the
    // cluster model's approximation of clusters of non-zero diameter.
    let spread = a
        .chunks_exact(2)
        .map(|x| (x[0] - a[0]).abs().max((x[1] - a[1]).abs()))
        .fold(0.0, f64::max);
    assert!(spread < 1e-8, "{spread}");
    let gap = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    assert!(gap < 1e-4, "{gap}");
}

#[test]
fn one_cluster_circling_the_sphere_is_read_at_its_own_resolution() {
    let dir = tempfile::tempdir().unwrap();
    let path = data("one-circling-cluster.toml");
    // Once per unit time: the axis turns by about 1.7 rad between samples.
    let coarse = run(&path, &dir.path().join("coarse"), &[]);
    // Ten samples per unit time resolve it for the order parameters.
    let fine = run(
        &path,
        &dir.path().join("fine"),
        &["--set", "time.samples=25001"],
    );
    assert_eq!(fine["label"], "rotating-clusters", "{fine}");
    assert_eq!(coarse["label"], fine["label"], "{coarse}");
    // The rate the coarse run reports (the centre's angle per unit time) is half the turning
    // of arg R2 (a doubled angle) that the fine samples measure.
    let reason = coarse["label_reason"].as_str().unwrap();
    let rate: f64 = reason
        .split("moves at ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("{reason}"));
    let doubled = fine["features"]["r2_arg_rate"].as_f64().unwrap().abs();
    assert!(
        (2.0 * rate - doubled).abs() < 0.03 * doubled,
        "{rate} {doubled}"
    );
}

#[test]
fn one_cluster_on_the_circle_turns_at_its_closed_form_rate() {
    // Paper case 3 with sa: one tight cluster, whose point obeys theta' = <J y, V y> =
    // 0.4 - 0.1 sin(2 theta) > 0 for V = [[1, -0.4], [0.4, 0.8]]; it turns for ever with period
    // T = 2 pi / sqrt(0.4^2 - 0.1^2), a mean rate of sqrt(0.15).
    let dir = tempfile::tempdir().unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/case3-rotating-clusters.toml");
    let summary = run(
        &path,
        &dir.path().join("sa"),
        &[
            "--set",
            "model.kernel=sa",
            "--set",
            "tokens.n=64",
            "--set",
            "time.t_end=30",
            "--set",
            "time.samples=301",
        ],
    );
    assert_eq!(summary["clusters"]["count"], 1, "{summary}");
    assert_eq!(summary["label"], "rotating-clusters", "{summary}");
    let reason = summary["label_reason"].as_str().unwrap();
    let rate: f64 = reason
        .split("moves at ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("{reason}"));
    let exact = 0.15f64.sqrt();
    assert!((rate - exact).abs() < 0.02 * exact, "{rate} {exact}");
}
