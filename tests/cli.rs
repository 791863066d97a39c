//! End-to-end tests of the `tokdyn` binary: outputs, determinism, and every kind of bad input.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

const BASE: &str = r#"
name = "t"
[params]
v11 = 0.2
v12 = 1.0
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = "identity"
V = [["v11", "v12"], ["-v12", "-v11"]]
[tokens]
n = 64
init = "poisson"
seed = 1
r0 = 0.3
[time]
t_end = 5.0
samples = 51
"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

fn tokdyn() -> Command {
    Command::cargo_bin("tokdyn").unwrap()
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

#[test]
fn run_writes_order_summary_and_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", BASE);
    let out = dir.path().join("out");
    tokdyn()
        .args(["run"])
        .arg(&s)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let order = fs::read_to_string(out.join("order.csv")).unwrap();
    let mut lines = order.lines();
    assert_eq!(
        lines.next().unwrap(),
        "t,r2_re,r2_im,r2_abs,r2_arg,r1_abs,nematic"
    );
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 51);
    // Poisson start: R2(0) = r0 e^{i phi0}.
    assert!((rows[0][1] - 0.3).abs() < 1e-12 && rows[0][2].abs() < 1e-12);
    assert_eq!(rows[50][0], 5.0);
    for r in &rows {
        assert!((r[3] - (r[1].hypot(r[2]))).abs() < 1e-15);
        assert!(r[4] > -std::f64::consts::PI && r[4] <= std::f64::consts::PI);
        assert!((r[6] - r[3]).abs() < 1e-12, "s = |R2| in d = 2");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for key in [
        "name",
        "model",
        "kernel",
        "n",
        "d",
        "label",
        "features",
        "norm_drift_max",
        "rhs_evals",
        "wall_seconds",
        "version",
    ] {
        assert!(summary.get(key).is_some(), "summary lacks {key}");
    }
    for key in [
        "r2_abs_final",
        "r2_abs_tail_min",
        "r2_abs_tail_max",
        "r2_arg_rate",
        "nematic_final",
        "r1_abs_final",
        "period",
        "decay_rate",
    ] {
        assert!(
            summary["features"].get(key).is_some(),
            "features lack {key}"
        );
    }
    assert!(summary["norm_drift_max"].as_f64().unwrap() <= 1e-12);
    assert_eq!(summary["scenario"]["params"]["v11"].as_f64(), Some(0.2));
    let tokens = fs::read_to_string(out.join("tokens_final.csv")).unwrap();
    assert_eq!(tokens.lines().next(), Some("x1,x2"));
    assert_eq!(tokens.lines().count(), 65);
    // The run's pictures decode, are wide enough and not blank.
    for picture in ["order.png", "tokens.png", "portrait.png"] {
        let decoder = png::Decoder::new(std::io::BufReader::new(
            fs::File::open(out.join(picture)).unwrap(),
        ));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert!(info.width >= 800, "{picture}: {} px wide", info.width);
        let pixels = &buf[..info.buffer_size()];
        let step = info.color_type.samples();
        let distinct: std::collections::HashSet<&[u8]> = pixels.chunks(step).collect();
        assert!(
            distinct.len() > 20,
            "{picture}: only {} colours",
            distinct.len()
        );
    }
}

#[test]
fn set_overrides_reach_the_run_and_the_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", BASE);
    let out = dir.path().join("out");
    tokdyn()
        .arg("run")
        .arg(&s)
        .args([
            "--set",
            "params.v11=0.3",
            "--set",
            "tokens.n=32",
            "--model",
            "ws",
            "--out",
        ])
        .arg(&out)
        .assert()
        .success();
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["n"], 32);
    assert_eq!(summary["model"], "ws");
    assert_eq!(summary["scenario"]["params"]["v11"].as_f64(), Some(0.3));
    assert_eq!(summary["scenario"]["model"]["V"][0][0].as_f64(), Some(0.3));
}

#[test]
fn command_line_mistakes_say_what_would_be_right() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", BASE);
    // A wrong model name lists the valid ones, on the one error line.
    let line = fails(tokdyn().arg("run").arg(&s).args(["--model", "Full"]), 2);
    assert!(line.contains("Full") && line.contains("group"), "{line}");
    // A params name without its table is pointed to it.
    let line = fails(tokdyn().arg("run").arg(&s).args(["--set", "v11=0.3"]), 2);
    assert!(line.contains("params.v11"), "{line}");
    // Every option of compare, predict and portrait is described in --help.
    for command in ["compare", "predict", "portrait", "sweep"] {
        let out = tokdyn().args([command, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout).to_string();
        for option in ["--out", "--set"] {
            let line = help.lines().find(|l| l.trim_start().starts_with(option));
            let line = line.unwrap_or_else(|| panic!("{command}: no {option} in {help}"));
            assert!(
                line.trim().len() > option.len() + 12,
                "{command} {option} is not described: {line}"
            );
        }
    }
}

#[test]
fn default_output_folder_is_output_name() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", BASE);
    tokdyn()
        .current_dir(dir.path())
        .arg("run")
        .arg(&s)
        .assert()
        .success();
    assert!(dir.path().join("output/t/order.csv").exists());
    // Nothing but the finished folder is left beside it.
    assert_eq!(fs::read_dir(dir.path().join("output")).unwrap().count(), 1);
}

#[test]
fn order_csv_is_byte_identical_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    // USA in d = 3 with more tokens than one chunk, so the parallel sums really split.
    let text = BASE
        .replace("kernel = \"lsa\"", "kernel = \"usa\"")
        .replace("d = 2", "d = 3")
        .replace(
            "V = [[\"v11\", \"v12\"], [\"-v12\", \"-v11\"]]",
            "V = { random = \"gaussian\", seed = 4 }",
        )
        .replace("n = 64", "n = 2500")
        .replace("init = \"poisson\"", "init = \"uniform\"")
        .replace("t_end = 5.0", "t_end = 0.5")
        .replace("samples = 51", "samples = 6");
    let s = write(dir.path(), "s.toml", &text);
    let mut outputs = Vec::new();
    for threads in ["1", "2", "3"] {
        let out = dir.path().join(format!("out{threads}"));
        tokdyn()
            .env("RAYON_NUM_THREADS", threads)
            .arg("run")
            .arg(&s)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        outputs.push((
            fs::read(out.join("order.csv")).unwrap(),
            fs::read(out.join("tokens_final.csv")).unwrap(),
        ));
    }
    assert!(outputs.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn trajectory_npy_has_every_sample() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{BASE}\n[output]\ntrajectory = true\n");
    let s = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    tokdyn()
        .arg("run")
        .arg(&s)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let bytes = fs::read(out.join("trajectory.npy")).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    assert_eq!(npy.shape(), &[51, 64, 2]);
    let data: Vec<f64> = npy.into_vec().unwrap();
    let last = &data[50 * 128..];
    let final_csv = fs::read_to_string(out.join("tokens_final.csv")).unwrap();
    let first: Vec<f64> = final_csv
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(&last[..2], &first[..]);
}

#[test]
fn bad_input_is_one_error_line_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "malformed toml",
            BASE.replace("beta = 1.0", "beta = = 1"),
            "s.toml",
        ),
        (
            "unknown key",
            BASE.replace("beta = 1.0", "beta = 1.0\nbeat = 2"),
            "beat",
        ),
        (
            "unknown table key",
            BASE.replace("[time]", "[time]\nt_ned = 3"),
            "t_ned",
        ),
        (
            "wrong shape",
            BASE.replace(
                "V = [[\"v11\", \"v12\"], [\"-v12\", \"-v11\"]]",
                "V = [[1.0, 2.0]]",
            ),
            "model.V",
        ),
        (
            "unknown param",
            BASE.replace("\"-v11\"]]", "\"-v13\"]]"),
            "v13",
        ),
        (
            "division by zero",
            BASE.replace("\"-v11\"]]", "\"1/(v11-v11)\"]]"),
            "model.V",
        ),
        (
            "non-finite number",
            BASE.replace("beta = 1.0", "beta = nan"),
            "model.beta",
        ),
        ("n = 0", BASE.replace("n = 64", "n = 0"), "tokens.n"),
        ("negative n", BASE.replace("n = 64", "n = -3"), "tokens.n"),
        ("d < 2", BASE.replace("d = 2", "d = 1"), "model.d"),
        (
            "t_end <= 0",
            BASE.replace("t_end = 5.0", "t_end = 0.0"),
            "time.t_end",
        ),
        (
            "samples < 2",
            BASE.replace("samples = 51", "samples = 1"),
            "time.samples",
        ),
        (
            "rtol <= 0",
            format!("{BASE}\n[solver]\nrtol = 0.0\n"),
            "solver.rtol",
        ),
        (
            "atol <= 0",
            format!("{BASE}\n[solver]\natol = -1e-9\n"),
            "solver.atol",
        ),
        (
            "bad name",
            BASE.replace("name = \"t\"", "name = \"Bad Name\""),
            "name",
        ),
        (
            "bad kernel",
            BASE.replace("kernel = \"lsa\"", "kernel = \"tanh\""),
            "model.kernel",
        ),
        (
            "missing init file",
            BASE.replace("init = \"poisson\"", "init = \"file\"\npath = \"nope.csv\""),
            "nope.csv",
        ),
        (
            "reduction in d = 3",
            BASE.replace("d = 2", "d = 3").replace(
                "V = [[\"v11\", \"v12\"], [\"-v12\", \"-v11\"]]",
                "V = \"identity\"",
            ) + "\n[run]\nmodel = \"oa\"\n",
            "run.model",
        ),
        (
            "too large",
            BASE.replace("n = 64", "n = 100000000000"),
            "tokens.n",
        ),
        (
            "missing required key",
            BASE.replace("beta = 1.0\n", ""),
            "beta",
        ),
    ];
    for (what, text, needle) in cases {
        let s = write(dir.path(), "s.toml", &text);
        let out = dir.path().join("never");
        let line = fails(tokdyn().arg("run").arg(&s).arg("--out").arg(&out), 2);
        assert!(line.contains(needle), "{what}: {line}");
        assert!(!out.exists(), "{what}: an output folder was written");
    }
    // Malformed init file content.
    write(dir.path(), "x0.csv", "1.0,0.0\n0.0,abc\n");
    let text = BASE
        .replace("n = 64", "n = 2")
        .replace("init = \"poisson\"", "init = \"file\"\npath = \"x0.csv\"");
    let s = write(dir.path(), "s.toml", &text);
    let line = fails(tokdyn().arg("run").arg(&s), 2);
    assert!(line.contains("x0.csv"), "{line}");
    // Command-line mistakes.
    fails(tokdyn().args(["run"]), 2);
    fails(tokdyn().args(["run", "missing.toml"]), 2);
    let s = write(dir.path(), "s.toml", BASE);
    fails(tokdyn().arg("run").arg(&s).args(["--model", "xyz"]), 2);
    let line = fails(
        tokdyn().arg("run").arg(&s).args(["--set", "model.nope=1"]),
        2,
    );
    assert!(line.contains("nope"), "{line}");
    let line = fails(tokdyn().arg("run").arg(&s).args(["--set", "novalue"]), 2);
    assert!(line.contains("novalue"), "{line}");
}

#[test]
fn overflow_is_refused_up_front_and_keeps_the_old_result() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "s.toml", BASE);
    let out = dir.path().join("out");
    tokdyn()
        .arg("run")
        .arg(&good)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let before = fs::read(out.join("order.csv")).unwrap();
    let text = BASE
        .replace("kernel = \"lsa\"", "kernel = \"usa\"")
        .replace("beta = 1.0", "beta = 800.0")
        .replace("A = \"identity\"", "A = [[1.0, 0.0], [0.0, 1.0]]");
    let bad = write(dir.path(), "s.toml", &text);
    // e^(beta |A|) = e^800 overflows: refused before the run (issue 42), not a failure at t = 0.
    let line = fails(tokdyn().arg("run").arg(&bad).arg("--out").arg(&out), 2);
    assert!(line.contains("model.beta"), "{line}");
    assert!(line.contains("overflows"), "{line}");
    assert_eq!(fs::read(out.join("order.csv")).unwrap(), before);
    assert_eq!(
        fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.'))
            .count(),
        0
    );
}

#[test]
fn compare_writes_the_table_and_agrees_with_the_full_model() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(
        dir.path(),
        "s.toml",
        &format!("{BASE}\n[solver]\nrtol = 1e-11\natol = 1e-13\n"),
    );
    let out = dir.path().join("out");
    let assert = tokdyn()
        .arg("compare")
        .arg(&s)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    for m in ["full", "phase", "ws", "oa", "group"] {
        assert!(stdout.contains(m), "{stdout}");
    }
    let csv = fs::read_to_string(out.join("compare.csv")).unwrap();
    assert_eq!(
        csv.lines().next().unwrap(),
        "t,full_re,full_im,phase_re,phase_im,ws_re,ws_im,oa_re,oa_im,group_re,group_im"
    );
    assert_eq!(csv.lines().count(), 52);
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let c = &summary["compare"];
    for k in ["phase_vs_full", "ws_vs_full", "oa_vs_full", "group_vs_full"] {
        assert!(c[k].as_f64().unwrap() < 1e-8, "{k}: {}", c[k]);
    }
    for k in ["full", "phase", "ws", "oa", "group"] {
        assert!(c["seconds"][k].as_f64().unwrap() >= 0.0);
    }
    // For usa / sa compare runs full and the cluster model (tests/clusters.rs).
}

#[test]
fn structural_stability_pair_reaches_the_same_state() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let dir = tempfile::tempdir().unwrap();
    let mut finals = Vec::new();
    for name in ["stability-poisson", "stability-perturbed"] {
        let out = dir.path().join(name);
        tokdyn()
            .arg("run")
            .arg(root.join(format!("{name}.toml")))
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["expect_met"], true, "{name}: {}", summary["label"]);
        let order = fs::read_to_string(out.join("order.csv")).unwrap();
        let first: Vec<f64> = order
            .lines()
            .nth(1)
            .unwrap()
            .split(',')
            .map(|v| v.parse().unwrap())
            .collect();
        let last: Vec<f64> = order
            .lines()
            .last()
            .unwrap()
            .split(',')
            .map(|v| v.parse().unwrap())
            .collect();
        finals.push((summary["label"].clone(), first, last));
    }
    assert_eq!(finals[0].0, finals[1].0);
    // The perturbed start is really off the manifold's start...
    assert!(
        (finals[0].1[1] - finals[1].1[1]).abs() + (finals[0].1[2] - finals[1].1[2]).abs() > 1e-3
    );
    // ...and ends at the same R2.
    assert!(
        (finals[0].2[1] - finals[1].2[1]).abs() < 1e-3
            && (finals[0].2[2] - finals[1].2[2]).abs() < 1e-3
    );
}

#[test]
fn a_missing_argument_is_named_on_the_one_error_line() {
    let out = tokdyn().arg("run").assert().code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error:") && err.contains("<SCENARIO>"),
        "{err}"
    );
}
