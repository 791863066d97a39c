//! End-to-end tests of `tokdyn sweep` and `tokdyn merge` through the binary: the paper's
//! theorems row by row, shards, resume after SIGKILL, determinism, bad input, boundary
//! refinement and failed points.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use assert_cmd::Command;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

/// The binary, outside any Slurm job array.
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

/// Runs a sweep that must succeed; returns the output folder.
fn sweep(file: &Path, out: &Path, extra: &[&str]) -> PathBuf {
    tokdyn()
        .arg("sweep")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(extra)
        .assert()
        .success();
    out.to_path_buf()
}

/// Runs a command that must fail with `code`; returns its single stderr line.
fn fails(cmd: &mut Command, code: i32) -> String {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("error:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    lines[0].to_string()
}

/// `sweep.csv` as a header and rows of cells.
fn table(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (header, rows)
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

const RESULT_HEADER: &str =
    "label,r2_abs_final,r2_abs_tail_min,r2_abs_tail_max,r2_arg_rate,period,error,t_final,reason,cluster_count";

/// Paper case 1: V = I, A = [[a11, a12], [a21, a22]].
const CASE1: &str = r#"
name = "sweep-case1"
[params]
a11 = 0.5
a12 = 0.5
a21 = -0.3
a22 = 0.5
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = [["a11", "a12"], ["a21", "a22"]]
V = "identity"
[tokens]
n = 256
init = "poisson"
seed = 1
r0 = 0.3
phi0 = 0.4
[time]
t_end = 200.0
samples = 2001
"#;

const CASE1_SWEEP: &str = r#"
name = "case1-map"
scenario = "base.toml"
model = "oa"
[axes]
a12 = { from = -0.8, to = 0.6, steps = 2 }
a11 = { from = -1.0, to = 1.0, steps = 9 }
a22 = { from = -1.0, to = 1.0, steps = 9 }
"#;

/// Paper case 4 on the OA model, long enough for the slow dynamics near v11 = v12.
const CASE4: &str = r#"
name = "sweep-case4"
[params]
v11 = 0.2
v12 = 0.5
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = "identity"
V = [["v11", "v12"], ["-v12", "-v11"]]
[tokens]
n = 512
init = "poisson"
seed = 1
r0 = 0.3
[time]
t_end = 3000.0
samples = 3001
"#;

#[test]
fn case1_theorem_holds_row_by_row_and_threads_do_not_change_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", CASE1);
    let s = write(dir.path(), "s.toml", CASE1_SWEEP);
    let out = sweep(&s, &dir.path().join("out"), &[]);
    let (header, rows) = table(&out.join("sweep.csv"));
    assert_eq!(header.join(","), format!("a12,a11,a22,{RESULT_HEADER}"));
    assert_eq!(rows.len(), 2 * 9 * 9);
    let a21 = -0.3;
    let margin = 0.05;
    let (mut clustering, mut interior) = (0, 0);
    for (i, r) in rows.iter().enumerate() {
        // First axis slowest.
        let (i12, i11, i22) = (i / 81, (i / 9) % 9, i % 9);
        let a12: f64 = r[0].parse().unwrap();
        let a11: f64 = r[1].parse().unwrap();
        let a22: f64 = r[2].parse().unwrap();
        assert_eq!(a12, if i12 == 1 { 0.6 } else { -0.8 });
        assert_eq!(
            a11,
            if i11 == 8 {
                1.0
            } else {
                -1.0 + i11 as f64 * 2.0 / 8.0
            }
        );
        assert_eq!(
            a22,
            if i22 == 8 {
                1.0
            } else {
                -1.0 + i22 as f64 * 2.0 / 8.0
            }
        );
        assert_eq!(r[9], "", "no point fails: {r:?}");
        let tr = a11 + a22;
        let det = a11 * a22 - a12 * a21;
        // Largest eigenvalue of the symmetric part of A.
        let b = (a12 + a21) / 2.0;
        let lmax = tr / 2.0 + (((a11 - a22) / 2.0).powi(2) + b * b).sqrt();
        let label = r[3].as_str();
        if tr > margin || det < -margin {
            clustering += 1;
            assert!(
                label == "converged-clusters" || label == "rotating-clusters",
                "tr A = {tr}, det A = {det}: clustering expected, got {label} ({r:?})"
            );
            assert!(r[4].parse::<f64>().unwrap() > 0.99, "{r:?}");
        } else if lmax < -margin {
            interior += 1;
            assert_eq!(label, "interior-point", "lambda_max = {lmax}: {r:?}");
        }
    }
    assert!(clustering > 80 && interior > 20, "{clustering} {interior}");
    let s = summary(&out);
    assert_eq!(s["points"], 162);
    assert_eq!(s["computed"], 162);
    assert_eq!(s["failed_points"], 0);
    let total: u64 = s["counts"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, 162);

    // Byte-identical for 1 and 2 threads (this run also used the default, 2 on CI).
    let mut bytes = Vec::new();
    for threads in ["1", "2"] {
        let o = dir.path().join(format!("t{threads}"));
        tokdyn()
            .env("RAYON_NUM_THREADS", threads)
            .arg("sweep")
            .arg(s_path(dir.path()))
            .arg("--out")
            .arg(&o)
            .assert()
            .success();
        bytes.push(fs::read(o.join("sweep.csv")).unwrap());
    }
    assert_eq!(bytes[0], bytes[1]);
    assert_eq!(bytes[0], fs::read(out.join("sweep.csv")).unwrap());
}

fn s_path(dir: &Path) -> PathBuf {
    dir.join("s.toml")
}

#[test]
fn full_model_sweep_is_byte_identical_for_one_and_two_threads() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "base.toml",
        &CASE4
            .replace("n = 512", "n = 300")
            .replace("init = \"poisson\"", "init = \"uniform\"")
            .replace("t_end = 3000.0", "t_end = 10.0")
            .replace("samples = 3001", "samples = 101"),
    );
    let s = write(
        dir.path(),
        "s.toml",
        "name = \"full\"\nscenario = \"base.toml\"\n[axes]\nv11 = { from = 0.1, to = 0.9, steps = 3 }\ntokens.seed = { from = 1, to = 2, steps = 2 }\n",
    );
    let mut bytes = Vec::new();
    for threads in ["1", "2"] {
        let o = dir.path().join(format!("t{threads}"));
        tokdyn()
            .env("RAYON_NUM_THREADS", threads)
            .arg("sweep")
            .arg(&s)
            .arg("--out")
            .arg(&o)
            .assert()
            .success();
        bytes.push(fs::read(o.join("sweep.csv")).unwrap());
    }
    assert_eq!(bytes[0], bytes[1]);
    let text = String::from_utf8(bytes.swap_remove(0)).unwrap();
    // Integer axes are written as integers.
    assert!(
        text.starts_with(&format!("v11,tokens.seed,{RESULT_HEADER}\n0.1,1,")),
        "{text}"
    );
    assert_eq!(text.lines().count(), 7);
}

#[test]
fn shards_merged_equal_the_whole_and_a_missing_shard_is_named() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", CASE1);
    let s = write(
        dir.path(),
        "s.toml",
        &CASE1_SWEEP.replace("steps = 9", "steps = 4"),
    );
    let whole = sweep(&s, &dir.path().join("whole"), &[]);
    let sharded = dir.path().join("sharded");
    for k in 1..=3 {
        sweep(&s, &sharded, &["--shard", &format!("{k}/3")]);
        assert!(sharded.join(format!("shard-{k}-of-3.csv")).exists());
    }
    assert!(!sharded.join("sweep.csv").exists());
    let shard2 = fs::read_to_string(sharded.join("shard-2-of-3.csv")).unwrap();
    assert!(
        shard2.starts_with(&format!("index,a12,a11,a22,{RESULT_HEADER}\n1,")),
        "{shard2}"
    );
    tokdyn().arg("merge").arg(&sharded).assert().success();
    assert_eq!(
        fs::read(sharded.join("sweep.csv")).unwrap(),
        fs::read(whole.join("sweep.csv")).unwrap()
    );
    let s = summary(&sharded);
    assert_eq!(s["points"], 32);
    assert_eq!(s["counts"], summary(&whole)["counts"]);

    // Without shard 2: exit 2, naming the missing points (1, 4, 7, ...).
    fs::remove_file(sharded.join("shard-2-of-3.csv")).unwrap();
    let line = fails(tokdyn().arg("merge").arg(&sharded), 2);
    assert!(
        line.contains("11 of 32 points are missing: 1, 4, 7, 10"),
        "{line}"
    );
    assert!(line.contains("shard-2-of-3.csv"), "{line}");

    // An unsharded --resume in the shard folder takes the shards' points and computes none.
    sweep(&s_path(dir.path()), &sharded, &["--resume"]);
    let s = summary(&sharded);
    assert_eq!(
        (s["computed"].as_u64(), s["reused"].as_u64()),
        (Some(11), Some(21))
    );
    assert_eq!(
        fs::read(sharded.join("sweep.csv")).unwrap(),
        fs::read(whole.join("sweep.csv")).unwrap()
    );

    // A folder without a manifest is not a sweep.
    let line = fails(tokdyn().arg("merge").arg(dir.path()), 2);
    assert!(line.contains("sweep.json"), "{line}");
}

#[test]
fn a_killed_sweep_resumes_without_recomputing_and_ends_with_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", CASE4);
    let s = write(
        dir.path(),
        "s.toml",
        "name = \"resume\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv12 = { from = 0.3, to = 0.7, steps = 5 }\nv11 = { from = 0.0, to = 1.0, steps = 12 }\n",
    );
    let points = 60;
    let out = dir.path().join("out");
    let progress = out.join("sweep.progress");
    let exe = assert_cmd::cargo::cargo_bin("tokdyn");
    let mut child = std::process::Command::new(&exe)
        .arg("sweep")
        .arg(&s)
        .arg("--out")
        .arg(&out)
        .env("RAYON_NUM_THREADS", "1")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let finished_lines = |p: &Path| {
        fs::read_to_string(p)
            .map(|t| t.lines().filter(|l| l.starts_with("g,")).count())
            .unwrap_or(0)
    };
    while finished_lines(&progress) < 8 {
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended early");
        assert!(started.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = finished_lines(&progress);
    assert!(before < points, "killed too late: {before}");
    assert!(!out.join("sweep.csv").exists());
    // A torn last line, as if the kill came in the middle of a write.
    let mut f = fs::OpenOptions::new().append(true).open(&progress).unwrap();
    std::io::Write::write_all(&mut f, b"g,59,oscilla").unwrap();
    drop(f);

    sweep(&s, &out, &["--resume"]);
    let s1 = summary(&out);
    assert_eq!(s1["reused"], before);
    assert_eq!(s1["computed"], points - before);
    // Every point is in the progress file exactly once: nothing was computed twice.
    let text = fs::read_to_string(&progress).unwrap();
    let mut indices: Vec<usize> = text
        .lines()
        .filter(|l| l.starts_with("g,"))
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    indices.sort();
    assert_eq!(indices, (0..points).collect::<Vec<_>>());

    let whole = sweep(&s, &dir.path().join("whole"), &[]);
    assert_eq!(
        fs::read(out.join("sweep.csv")).unwrap(),
        fs::read(whole.join("sweep.csv")).unwrap()
    );
    // Resuming a finished sweep computes nothing; without --resume it starts over.
    sweep(&s, &out, &["--resume"]);
    assert_eq!(summary(&out)["computed"], 0);
    assert_eq!(
        fs::read(out.join("sweep.csv")).unwrap(),
        fs::read(whole.join("sweep.csv")).unwrap()
    );
}

#[test]
fn bad_sweep_files_are_one_error_line_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", CASE4);
    let head = "name = \"bad\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "unknown axis",
            format!("{head}[axes]\nv13 = {{ from = 0, to = 1, steps = 3 }}\n"),
            "axes.v13: unknown axis",
        ),
        (
            "steps = 0",
            format!("{head}[axes]\nv11 = {{ from = 0, to = 1, steps = 0 }}\n"),
            "axes.v11.steps: must be an integer >= 1",
        ),
        (
            "fractional steps",
            format!("{head}[axes]\nv11 = {{ from = 0, to = 1, steps = 2.5 }}\n"),
            "axes.v11.steps",
        ),
        (
            "unknown key",
            format!("{head}resolution = 3\n[axes]\nv11 = {{ from = 0, to = 1, steps = 3 }}\n"),
            "resolution: unknown key",
        ),
        (
            "unknown axis key",
            format!("{head}[axes]\nv11 = {{ from = 0, to = 1, num = 3 }}\n"),
            "axes.v11.num: unknown key",
        ),
        (
            "non-finite",
            format!("{head}[axes]\nv11 = {{ from = nan, to = 1, steps = 3 }}\n"),
            "axes.v11.from",
        ),
        (
            "missing scenario file",
            "name = \"bad\"\nscenario = \"nowhere.toml\"\n[axes]\nv11 = { from = 0, to = 1, steps = 3 }\n".to_string(),
            "scenario: cannot read",
        ),
        (
            "n sweeping into 0",
            format!("{head}[axes]\ntokens.n = {{ from = 100, to = 0, steps = 5 }}\n"),
            "axes.tokens.n: at the grid corner (tokens.n = 0)",
        ),
        (
            "unknown scenario key",
            format!("{head}[axes]\nmodel.gamma = {{ from = 0, to = 1, steps = 3 }}\n"),
            "axes.model.gamma: unknown axis",
        ),
        (
            "no axes",
            format!("{head}[axes]\n"),
            "axes: needs at least one axis",
        ),
        (
            "malformed toml",
            format!("{head}[axes\n"),
            "invalid TOML",
        ),
        (
            "unknown label source",
            format!("{head}label = \"theory\"\n[axes]\nv11 = {{ from = 0, to = 1, steps = 3 }}\n"),
            "label: \"theory\" is not a label source",
        ),
        (
            "predict on the full model",
            "name = \"bad\"\nscenario = \"base.toml\"\nmodel = \"full\"\nlabel = \"predict\"\n[axes]\nv11 = { from = 0, to = 1, steps = 3 }\n".to_string(),
            "label: \"predict\" analyses the OA model",
        ),
    ];
    for (what, text, expected) in cases {
        let s = write(dir.path(), "s.toml", &text);
        let out = dir.path().join("out");
        let line = fails(tokdyn().arg("sweep").arg(&s).arg("--out").arg(&out), 2);
        assert!(line.contains("s.toml: "), "{what}: {line}");
        assert!(line.contains(expected), "{what}: {line}");
        assert!(!out.exists(), "{what}: nothing is written");
    }
    let s = write(
        dir.path(),
        "s.toml",
        &format!("{head}[axes]\nv11 = {{ from = 0, to = 1, steps = 3 }}\n"),
    );
    for shard in ["3/2", "0/2", "1", "a/b"] {
        let line = fails(
            tokdyn()
                .arg("sweep")
                .arg(&s)
                .args(["--shard", shard])
                .arg("--out")
                .arg(dir.path().join("out")),
            2,
        );
        assert!(line.contains("s.toml: --shard:"), "{line}");
    }
    // Inside a Slurm job array, an inconsistent task id is bad input too.
    let line = fails(
        tokdyn()
            .arg("sweep")
            .arg(&s)
            .arg("--out")
            .arg(dir.path().join("out"))
            .env("SLURM_ARRAY_TASK_ID", "7")
            .env("SLURM_ARRAY_TASK_MIN", "0")
            .env("SLURM_ARRAY_TASK_COUNT", "4"),
        2,
    );
    assert!(line.contains("SLURM_ARRAY_TASK_ID"), "{line}");
}

#[test]
fn slurm_array_variables_pick_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", CASE1);
    let s = write(
        dir.path(),
        "s.toml",
        &CASE1_SWEEP.replace("steps = 9", "steps = 2"),
    );
    let out = dir.path().join("out");
    tokdyn()
        .arg("sweep")
        .arg(&s)
        .arg("--out")
        .arg(&out)
        .env("SLURM_ARRAY_TASK_ID", "11")
        .env("SLURM_ARRAY_TASK_MIN", "10")
        .env("SLURM_ARRAY_TASK_COUNT", "3")
        .assert()
        .success();
    let text = fs::read_to_string(out.join("shard-2-of-3.csv")).unwrap();
    let indices: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(indices, ["1", "4", "7"]);
}

#[test]
fn case4_boundary_is_found_within_1e3_of_v11_equal_v12_and_the_fold_is_there() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", CASE4);
    // v12 values off the v11 grid and its midpoints, so that bisection never lands on v11 = v12.
    let s = write(
        dir.path(),
        "s.toml",
        r#"
name = "case4-boundary"
scenario = "base.toml"
model = "oa"
[axes]
v11 = { from = 0.2, to = 0.8, steps = 4 }
v12 = { from = 0.337, to = 0.737, steps = 3 }
[refine]
tolerance = 1e-3
[continuation]
parameter = "v11"
from = 0.2
to = 0.8
"#,
    );
    let out = sweep(&s, &dir.path().join("out"), &[]);
    let (header, rows) = table(&out.join("boundaries.csv"));
    assert_eq!(
        header.join(","),
        "axis,position,v11,v12,label_below,label_above,bracket"
    );
    let mut along = [0, 0];
    for r in &rows {
        let (position, v11, v12): (f64, f64, f64) = (
            r[1].parse().unwrap(),
            r[2].parse().unwrap(),
            r[3].parse().unwrap(),
        );
        let bracket: f64 = r[6].parse().unwrap();
        assert!(bracket <= 1e-3, "{r:?}");
        assert!((v11 - v12).abs() < 1e-3, "boundary off v11 = v12: {r:?}");
        match r[0].as_str() {
            "v11" => {
                along[0] += 1;
                assert_eq!(position, v11);
                // Below v11 = v12 oscillation, above convergence.
                assert_eq!(
                    (r[4].as_str(), r[5].as_str()),
                    ("oscillation", "converged-clusters"),
                    "{r:?}"
                );
            }
            "v12" => {
                along[1] += 1;
                assert_eq!(position, v12);
                assert_eq!(
                    (r[4].as_str(), r[5].as_str()),
                    ("converged-clusters", "oscillation"),
                    "{r:?}"
                );
            }
            other => panic!("axis {other}"),
        }
    }
    // The diagonal crosses every v12 row and the v11 columns 0.4 and 0.6.
    assert_eq!(along, [3, 2], "{rows:?}");
    let s = summary(&out);
    assert_eq!(s["refine"]["boundaries"], 5);
    assert_eq!(s["refine"]["unresolved"], 0);

    // Continuation along v11 at the base v12 = 0.5: one fold, at v11 = v12, on |R2| = 1.
    let (header, rows) = table(&out.join("branches.csv"));
    assert_eq!(
        header.join(","),
        "branch,v11,r2_re,r2_im,r2_abs,stable,unstable,point,ev1_re,ev1_im,ev2_re,ev2_im"
    );
    let folds: Vec<&Vec<String>> = rows.iter().filter(|r| r[7] == "LP").collect();
    assert_eq!(folds.len(), 1, "{folds:?}");
    let p: f64 = folds[0][1].parse().unwrap();
    let r_abs: f64 = folds[0][4].parse().unwrap();
    assert!((p - 0.5).abs() < 1e-6, "fold at v11 = {p}");
    assert!((r_abs - 1.0).abs() < 1e-6);
    // Every regular point is a fixed point in the disk, stable ones on |R2| = 1 past the fold.
    for r in rows.iter().filter(|r| r[7].is_empty()) {
        let p: f64 = r[1].parse().unwrap();
        assert!((0.2..=0.8).contains(&p) && r[4].parse::<f64>().unwrap() <= 1.0 + 1e-9);
        if r[5] == "true" {
            assert!(
                p > 0.5 && (r[4].parse::<f64>().unwrap() - 1.0).abs() < 1e-9,
                "{r:?}"
            );
        }
    }
}

#[test]
fn continuation_finds_the_hopf_point_at_zero_trace() {
    let dir = tempfile::tempdir().unwrap();
    // The slowly decaying spiral of docs/MATH.md §6 (A = [[-0.2, 1.5], [-1.5, a22]], V = I):
    // the interior fixed point loses stability where tr A = 0.
    write(
        dir.path(),
        "base.toml",
        &CASE1
            .replace("a11 = 0.5", "a11 = -0.2")
            .replace("a12 = 0.5", "a12 = 1.5")
            .replace("a21 = -0.3", "a21 = -1.5")
            .replace("a22 = 0.5", "a22 = 0.1"),
    );
    let s = write(
        dir.path(),
        "s.toml",
        "name = \"hopf\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\na22 = { from = 0.0, to = 0.4, steps = 5 }\n[continuation]\nparameter = \"a22\"\nfrom = 0.0\nto = 0.4\nstep = 0.01\n",
    );
    let out = sweep(&s, &dir.path().join("out"), &[]);
    let (_, rows) = table(&out.join("branches.csv"));
    let hopf: Vec<&Vec<String>> = rows.iter().filter(|r| r[7] == "H").collect();
    assert_eq!(hopf.len(), 1, "{rows:?}");
    let h = hopf[0];
    let cell = |i: usize| h[i].parse::<f64>().unwrap();
    assert!((cell(1) - 0.2).abs() < 1e-8, "{h:?}");
    // A purely imaginary pair there.
    assert!(cell(8).abs() < 1e-8 && cell(10).abs() < 1e-8, "{h:?}");
    assert!(cell(9).abs() > 0.5, "{h:?}");
    // Stable before, unstable after.
    let branch = &h[0];
    for r in rows.iter().filter(|r| &r[0] == branch && r[7].is_empty()) {
        let p: f64 = r[1].parse().unwrap();
        if p < 0.19 {
            assert_eq!(r[5], "true", "{r:?}");
        } else if p > 0.21 {
            assert_eq!(r[6], "2", "{r:?}");
        }
    }
    // The grid agrees: an interior point below tr A = 0, clusters above.
    let (_, grid) = table(&out.join("sweep.csv"));
    assert_eq!(grid[0][1], "interior-point");
    assert_eq!(grid[4][1], "converged-clusters");
}

#[test]
fn a_failing_point_is_recorded_and_the_sweep_goes_on() {
    // A point that cannot run (here 1/p at p = 0) is one row with its error; the points
    // around it run. (Scales that overflow at a grid corner are refused before any point
    // runs: see tests/campaign.rs.)
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "base.toml",
        r#"
name = "sweep-usa"
[params]
p = 1.0
[model]
kernel = "usa"
beta = 1.0
d = 2
A = [["1/p", 0], [0, 1]]
V = "identity"
[tokens]
n = 32
init = "uniform"
seed = 2
[time]
t_end = 10.0
samples = 101
"#,
    );
    let s = write(
        dir.path(),
        "s.toml",
        "name = \"usa\"\nscenario = \"base.toml\"\n[axes]\np = { from = -1.0, to = 1.0, steps = 3 }\n",
    );
    let out = sweep(&s, &dir.path().join("out"), &[]);
    let text = fs::read_to_string(out.join("sweep.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("p,{RESULT_HEADER}"));
    assert!(lines[2].starts_with("0.0,,,,,,,"), "{text}");
    assert!(lines[2].contains("model.A[0][0]"), "{text}");
    assert!(lines[3].starts_with("1.0,converged-clusters,"), "{text}");
    let s = summary(&out);
    assert_eq!(s["failed_points"].as_u64(), Some(1));
    assert_eq!(s["failed"][0], 1);
}

#[test]
fn the_sweep_files_in_scenarios_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    for name in ["case4-map", "case4-map-boundary", "sweep-case1-map"] {
        let plan = tokdyn::sweep::spec::load(&root.join(format!("{name}.toml")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(plan.name, name);
        assert_eq!(plan.model.as_str(), "oa");
    }
}

#[test]
fn predicted_labels_of_case4_agree_with_the_theorem_in_the_same_columns() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", CASE4);
    // v12 never equals v11: every point is away from the boundary |v11| = |v12|.
    let s = write(
        dir.path(),
        "s.toml",
        r#"
name = "case4-predict"
scenario = "base.toml"
model = "oa"
label = "predict"
[axes]
v11 = { from = 0.0, to = 1.0, steps = 6 }
v12 = { from = 0.1, to = 0.9, steps = 5 }
"#,
    );
    let out = sweep(&s, &dir.path().join("out"), &[]);
    let (header, rows) = table(&out.join("sweep.csv"));
    assert_eq!(header.join(","), format!("v11,v12,{RESULT_HEADER}"));
    assert_eq!(rows.len(), 30);
    let mut disagreements = Vec::new();
    for r in &rows {
        let (v11, v12): (f64, f64) = (r[0].parse().unwrap(), r[1].parse().unwrap());
        let expected = if v11 == 0.0 {
            "rotating-interior"
        } else if v11.abs() < v12.abs() {
            "oscillation"
        } else {
            "converged-clusters"
        };
        // No simulation ran: its numbers are empty, the reason is the prediction's.
        assert!(r[3..10].iter().all(|c| c.is_empty()), "{r:?}");
        assert!(!r[10].is_empty(), "{r:?}");
        if r[2] != expected {
            disagreements.push(format!("({v11}, {v12}): {} ({})", r[2], r[10]));
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}
