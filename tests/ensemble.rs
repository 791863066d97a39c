//! Ensembles: every row is the single run with its seeds, the statistics follow from the
//! rows (Wilson intervals and means computed here), the bytes do not depend on the thread
//! count, and bad `[ensemble]` input is refused before any run.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

const NOISY: &str = r#"
name = "ens"
[model]
kernel = "usa"
beta = 0
d = 2
A = "identity"
V = "identity"
[tokens]
n = 40
seed = 5
[time]
t_end = 4.0
samples = 41
[noise]
temperature = 0.4
seed = 20
dt = 0.05
[ensemble]
runs = 5
"#;

fn tokdyn() -> Command {
    Command::cargo_bin("tokdyn").unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn run(file: &Path, out: &Path, sets: &[String], threads: &str) {
    let mut cmd = tokdyn();
    cmd.env("RAYON_NUM_THREADS", threads)
        .arg("run")
        .arg(file)
        .arg("--out")
        .arg(out);
    for s in sets {
        cmd.args(["--set", s]);
    }
    cmd.assert().success();
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The rows of ensemble.csv as cells.
fn rows(dir: &Path) -> (String, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(dir.join("ensemble.csv")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_string();
    let rows = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    (header, rows)
}

fn number(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn rows_are_the_single_runs_with_their_seeds_for_noisy_and_deterministic_runs() {
    let dir = tempfile::tempdir().unwrap();
    let noisy = write(dir.path(), "noisy.toml", NOISY);
    // Without noise: lsa from uniform tokens, the seeds change the start.
    let plain = NOISY
        .replace("[noise]\ntemperature = 0.4\nseed = 20\ndt = 0.05\n", "")
        .replace("usa", "lsa")
        .replace("runs = 5", "runs = 3");
    let plain = write(dir.path(), "plain.toml", &plain);
    for (file, noise) in [(&noisy, true), (&plain, false)] {
        let out = dir.path().join("ensemble");
        run(file, &out, &[], "2");
        // The same scenario without [ensemble]: a plain single run.
        let text = std::fs::read_to_string(file).unwrap();
        let cut = text.find("[ensemble]").unwrap();
        let single_file = write(dir.path(), "single.toml", &text[..cut]);
        let (header, rows) = rows(&out);
        assert_eq!(
            header,
            "run,seed,label,cluster_count,r2_abs_final,nematic_final,r1_abs_final,t_final"
        );
        for (i, row) in rows.iter().enumerate() {
            let single = dir.path().join(format!("single-{i}"));
            let mut sets = vec![format!("tokens.seed={}", 5 + i)];
            if noise {
                sets.push(format!("noise.seed={}", 20 + i));
            }
            run(&single_file, &single, &sets, "1");
            let s = json(&single.join("summary.json"));
            let f = &s["features"];
            assert_eq!(row[0], i.to_string());
            assert_eq!(row[1], (5 + i).to_string());
            assert_eq!(row[2], s["label"].as_str().unwrap(), "run {i}");
            assert_eq!(
                row[3],
                s["clusters"]["count"].to_string(),
                "run {i} cluster_count"
            );
            // serde_json reads decimals to within an ulp (not correctly rounded): 4e-16.
            for (k, key) in [
                (4, "r2_abs_final"),
                (5, "nematic_final"),
                (6, "r1_abs_final"),
            ] {
                let (a, b) = (row[k].parse::<f64>().unwrap(), number(&f[key]));
                assert!(
                    (a - b).abs() <= 4e-16 * b.abs(),
                    "run {i} {key}: {a} vs {b}"
                );
            }
            assert_eq!(row[7].parse::<f64>().unwrap(), number(&s["t_final"]));
        }
    }
}

/// The Wilson 95% interval, written out here.
fn wilson(k: f64, n: f64) -> (f64, f64) {
    let z = 1.959_963_984_540_054_f64;
    let p = k / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[test]
fn statistics_follow_from_the_rows_and_bytes_do_not_depend_on_threads() {
    let dir = tempfile::tempdir().unwrap();
    // T near the Kuramoto transition with few tokens: some runs ordered, some not.
    let text = NOISY
        .replace("temperature = 0.4", "temperature = 0.3")
        .replace("runs = 5", "runs = 12")
        .replace("n = 40", "n = 16");
    let file = write(dir.path(), "e.toml", &text);
    let (one, two) = (dir.path().join("one"), dir.path().join("two"));
    run(&file, &one, &[], "1");
    run(&file, &two, &[], "2");
    for name in ["ensemble.csv", "ensemble_order.csv"] {
        assert_eq!(
            std::fs::read(one.join(name)).unwrap(),
            std::fs::read(two.join(name)).unwrap(),
            "{name}"
        );
    }
    for pic in ["ensemble.png", "ensemble.svg", "ensemble.pdf"] {
        assert!(one.join(pic).exists(), "{pic}");
    }
    let (_, rows) = rows(&one);
    let summary = json(&one.join("summary.json"));
    let e = &summary["ensemble"];
    assert_eq!(e["runs"], 12);
    let labels = e["labels"].as_object().unwrap();
    let mut total = 0;
    let mut best = (0, String::new());
    for (word, stat) in labels {
        let count = rows.iter().filter(|r| &r[2] == word).count();
        total += count;
        assert_eq!(stat["count"], count, "{word}");
        assert!((number(&stat["share"]) - count as f64 / 12.0).abs() < 1e-15);
        let (lo, hi) = wilson(count as f64, 12.0);
        assert!((number(&stat["low"]) - lo).abs() < 1e-12, "{word} low");
        assert!((number(&stat["high"]) - hi).abs() < 1e-12, "{word} high");
        if count > best.0 {
            best = (count, word.clone());
        }
    }
    assert_eq!(total, 12, "every row's label is counted");
    let mut counts: Vec<u64> = rows.iter().map(|r| r[3].parse().unwrap()).collect();
    counts.sort_unstable();
    let q = &e["cluster_count"];
    assert_eq!(q["min"], counts[0]);
    assert_eq!(q["max"], counts[11]);
    assert_eq!(number(&q["median"]), 0.5 * (counts[5] + counts[6]) as f64);
    assert_eq!(summary["label"].as_str().unwrap(), best.1);
    // summary.json is run 0's, its clusters included (every model with tokens has them).
    assert_eq!(
        summary["clusters"]["count"].to_string(),
        rows[0][3],
        "{summary}"
    );
    // The last row of ensemble_order.csv (t = t_end) is the mean and sd of the rows' finals.
    let order = std::fs::read_to_string(one.join("ensemble_order.csv")).unwrap();
    let mut lines = order.lines();
    assert_eq!(
        lines.next().unwrap(),
        "t,r1_mean,r1_sd,nematic_mean,nematic_sd"
    );
    let last: Vec<f64> = lines
        .last()
        .unwrap()
        .split(',')
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(last[0], 4.0);
    for (k, column) in [(6, 1), (5, 3)] {
        let v: Vec<f64> = rows.iter().map(|r| r[k].parse().unwrap()).collect();
        let mean = v.iter().sum::<f64>() / 12.0;
        let sd = (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 11.0).sqrt();
        assert!((last[column] - mean).abs() < 1e-12, "mean of column {k}");
        assert!((last[column + 1] - sd).abs() < 1e-12, "sd of column {k}");
    }
}

#[test]
fn bad_ensemble_input_is_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "e.toml", NOISY);
    for set in [
        "ensemble.runs=0",
        "ensemble.runs=-3",
        "ensemble.runs=100001",
        "ensemble.rns=2",
    ] {
        let out = tokdyn()
            .arg("run")
            .arg(&file)
            .arg("--out")
            .arg(dir.path().join("never"))
            .args(["--set", set])
            .assert()
            .code(2)
            .get_output()
            .stderr
            .clone();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("error:") && text.contains("ensemble."),
            "{set}: {text}"
        );
    }
    assert!(!dir.path().join("never").exists());
}
