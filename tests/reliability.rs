//! Output folders that never lose or mix results, and inputs that cannot hang the program:
//! locks between real processes, shards at once, SIGTERM, special files, the `--out` rules
//! and the limits of the scenario checks.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Std, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;

const BASE: &str = r#"
name = "t"
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

fn exe() -> PathBuf {
    assert_cmd::cargo::cargo_bin("tokdyn")
}

fn tokdyn() -> Command {
    let mut c = Command::cargo_bin("tokdyn").unwrap();
    c.env_remove("SLURM_ARRAY_TASK_ID");
    c
}

/// A background `tokdyn` process.
fn spawn(args: &[&std::ffi::OsStr]) -> Child {
    Std::new(exe())
        .args(args)
        .env("RAYON_NUM_THREADS", "1")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs a command that must fail with `code` within `limit`; returns its single stderr line.
fn fails_within(cmd: &mut Command, code: i32, limit: Duration) -> String {
    let started = Instant::now();
    let out = cmd.timeout(limit * 10).output().unwrap();
    let elapsed = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(elapsed < limit, "took {elapsed:?}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("error:"), "{err}");
    lines[0].to_string()
}

fn fails(cmd: &mut Command, code: i32) -> String {
    fails_within(cmd, code, Duration::from_secs(60))
}

fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn hidden_entries(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

fn sweep_file(dir: &Path, name: &str, steps: usize) -> PathBuf {
    write(
        dir,
        name,
        &format!(
            "name = \"grid\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv11 = {{ from = 0.0, to = 1.0, steps = {steps} }}\nv12 = {{ from = 0.3, to = 0.8, steps = {steps} }}\n"
        ),
    )
}

fn slow_base() -> String {
    BASE.replace("t_end = 5.0", "t_end = 2000.0")
        .replace("samples = 51", "samples = 2001")
}

#[test]
fn a_second_sweep_on_the_same_folder_is_refused_and_the_first_stays_whole() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", &slow_base());
    let big = sweep_file(dir.path(), "big.toml", 10);
    let other = sweep_file(dir.path(), "other.toml", 9);
    let out = dir.path().join("out");
    let progress = out.join("sweep.progress");
    let mut first = spawn(&[
        "sweep".as_ref(),
        big.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    wait_until(
        "the first sweep's first point",
        Duration::from_secs(60),
        || fs::read_to_string(&progress).is_ok_and(|t| t.lines().count() >= 2),
    );
    let line = fails(tokdyn().arg("sweep").arg(&other).arg("--out").arg(&out), 2);
    assert!(
        line.contains(&format!("in use by process {}", first.id())),
        "{line}"
    );
    let status = first.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let csv = fs::read(out.join("sweep.csv")).unwrap();
    assert_eq!(String::from_utf8_lossy(&csv).lines().count(), 101);
    let manifest = fs::read_to_string(out.join("sweep.json")).unwrap();
    assert!(manifest.contains("\"points\": 100"));
    // The progress file holds the first sweep's points only, each once.
    let text = fs::read_to_string(&progress).unwrap();
    let mut indices: Vec<usize> = text
        .lines()
        .filter(|l| l.starts_with("g,"))
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    indices.sort();
    assert_eq!(indices, (0..100).collect::<Vec<_>>());
    // --resume trusts it and writes the same bytes, computing nothing.
    tokdyn()
        .arg("sweep")
        .arg(&big)
        .arg("--out")
        .arg(&out)
        .arg("--resume")
        .assert()
        .success();
    assert_eq!(fs::read(out.join("sweep.csv")).unwrap(), csv);
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["computed"], 0);
    assert!(
        hidden_entries(dir.path()).is_empty(),
        "{:?}",
        hidden_entries(dir.path())
    );
}

#[test]
fn three_shards_started_at_once_in_one_folder_merge_to_the_unsharded_bytes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", BASE);
    let s = sweep_file(dir.path(), "s.toml", 6);
    let whole = dir.path().join("whole");
    tokdyn()
        .arg("sweep")
        .arg(&s)
        .arg("--out")
        .arg(&whole)
        .assert()
        .success();
    let out = dir.path().join("sharded");
    let children: Vec<Child> = ["1/3", "2/3", "3/3"]
        .iter()
        .map(|k| {
            spawn(&[
                "sweep".as_ref(),
                s.as_os_str(),
                "--out".as_ref(),
                out.as_os_str(),
                "--shard".as_ref(),
                k.as_ref(),
            ])
        })
        .collect();
    for child in children {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    tokdyn().arg("merge").arg(&out).assert().success();
    assert_eq!(
        fs::read(out.join("sweep.csv")).unwrap(),
        fs::read(whole.join("sweep.csv")).unwrap()
    );
    // A shard of another grid in that folder is refused.
    let other = sweep_file(dir.path(), "other.toml", 5);
    let line = fails(
        tokdyn()
            .arg("sweep")
            .arg(&other)
            .arg("--out")
            .arg(&out)
            .arg("--shard")
            .arg("1/2"),
        2,
    );
    assert!(line.contains("different sweep"), "{line}");
}

fn staging_folders(parent: &Path) -> Vec<String> {
    hidden_entries(parent)
        .into_iter()
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

#[test]
fn sigterm_stops_a_run_leaves_no_staging_folder_and_keeps_the_old_result() {
    let dir = tempfile::tempdir().unwrap();
    let quick = write(dir.path(), "quick.toml", BASE);
    let out = dir.path().join("out");
    tokdyn()
        .arg("run")
        .arg(&quick)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let before = fs::read(out.join("order.csv")).unwrap();
    // Two samples only: progress must come from the integrator's time, not from samples.
    let long = write(
        dir.path(),
        "long.toml",
        &BASE
            .replace("n = 64", "n = 256")
            .replace("t_end = 5.0", "t_end = 1e9")
            .replace("samples = 51", "samples = 2"),
    );
    let mut child = spawn(&[
        "run".as_ref(),
        long.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    let started = Instant::now();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    // A batch log's first progress line comes at the tenth second.
    let progress = rx.recv_timeout(Duration::from_secs(40)).unwrap();
    assert!(progress.starts_with("t: t = "), "{progress}");
    let first = started.elapsed();
    assert!(
        first >= Duration::from_secs(10) && first < Duration::from_secs(20),
        "{first:?}"
    );
    assert!(!staging_folders(dir.path()).is_empty());
    let killed = Std::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let signalled = Instant::now();
    let status = child.wait().unwrap();
    assert!(signalled.elapsed() < Duration::from_secs(10));
    reader.join().unwrap();
    let rest: Vec<String> = rx.try_iter().collect();
    assert_eq!(status.code(), Some(143), "{rest:?}");
    let last = rest.last().cloned().unwrap_or_default();
    assert!(last.starts_with("error: interrupted at t = "), "{rest:?}");
    assert!(staging_folders(dir.path()).is_empty());
    assert!(
        hidden_entries(dir.path()).is_empty(),
        "{:?}",
        hidden_entries(dir.path())
    );
    assert_eq!(fs::read(out.join("order.csv")).unwrap(), before);
}

#[test]
fn a_fifo_or_a_device_as_input_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.toml");
    assert!(Std::new("mkfifo").arg(&fifo).status().unwrap().success());
    let second = Duration::from_secs(1);
    for input in [fifo.as_path(), Path::new("/dev/zero")] {
        let line = fails_within(tokdyn().arg("run").arg(input), 2, second);
        assert!(line.contains("not a regular file"), "{line}");
        let line = fails_within(tokdyn().arg("sweep").arg(input), 2, second);
        assert!(line.contains("not a regular file"), "{line}");
    }
    // tokens.path and a sweep's base scenario.
    let fifo_csv = dir.path().join("x0.csv");
    assert!(Std::new("mkfifo")
        .arg(&fifo_csv)
        .status()
        .unwrap()
        .success());
    let s = write(
        dir.path(),
        "s.toml",
        &BASE.replace("init = \"poisson\"", "init = \"file\"\npath = \"x0.csv\""),
    );
    let line = fails_within(tokdyn().arg("run").arg(&s), 2, second);
    assert!(
        line.contains("tokens.path") && line.contains("FIFO"),
        "{line}"
    );
    let sw = write(
        dir.path(),
        "sw.toml",
        "name = \"g\"\nscenario = \"/dev/zero\"\n[axes]\nv11 = { from = 0.0, to = 1.0, steps = 2 }\n",
    );
    let line = fails_within(tokdyn().arg("sweep").arg(&sw), 2, second);
    assert!(
        line.contains("scenario") && line.contains("device"),
        "{line}"
    );
}

#[test]
fn out_rules_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", BASE);
    // An existing regular file: exit 2, the file untouched.
    let file = write(dir.path(), "notes.txt", "keep me");
    let line = fails(tokdyn().arg("run").arg(&s).arg("--out").arg(&file), 2);
    assert!(line.contains("--out"), "{line}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "keep me");
    // A folder that is not a result: exit 2, untouched.
    let line = fails(tokdyn().arg("run").arg(&s).arg("--out").arg(dir.path()), 2);
    assert!(line.contains("not a tokdyn result"), "{line}");
    assert!(s.exists());
    // A sweep on a run's folder: exit 2, the run's summary untouched.
    let run = dir.path().join("run");
    tokdyn()
        .arg("run")
        .arg(&s)
        .arg("--out")
        .arg(&run)
        .assert()
        .success();
    let summary = fs::read(run.join("summary.json")).unwrap();
    write(dir.path(), "base.toml", BASE);
    let sw = sweep_file(dir.path(), "sw.toml", 2);
    let line = fails(tokdyn().arg("sweep").arg(&sw).arg("--out").arg(&run), 2);
    assert!(line.contains("not from `tokdyn sweep`"), "{line}");
    assert_eq!(fs::read(run.join("summary.json")).unwrap(), summary);
    // A symlink is followed: the link stays, the result is where it points.
    let real = dir.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    tokdyn()
        .arg("run")
        .arg(&s)
        .arg("--out")
        .arg(&link)
        .assert()
        .success();
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(real.join("summary.json").exists());
    // The root cannot be a result.
    let line = fails(tokdyn().arg("run").arg(&s).arg("--out").arg("/"), 2);
    assert!(line.contains("root"), "{line}");
}

#[test]
fn continuation_values_are_checked_before_the_first_point() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", BASE);
    let s = write(
        dir.path(),
        "s.toml",
        "name = \"c\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\nv11 = { from = 0.0, to = 1.0, steps = 3 }\n[continuation]\nparameter = \"v11\"\nfrom = -1e308\nto = 1.0\n",
    );
    let out = dir.path().join("out");
    let line = fails(tokdyn().arg("sweep").arg(&s).arg("--out").arg(&out), 2);
    assert!(line.contains("continuation.from"), "{line}");
    assert!(!out.join("sweep.csv").exists());
    assert!(!out.join("sweep.progress").exists());
}

#[test]
fn scenario_limits() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("samples = 51", "samples = 1000000000", "time.samples"),
        (
            "samples = 51",
            "samples = 4611686018427387904",
            "time.samples",
        ),
        ("t_end = 5.0", "t_end = 5e-324", "time.t_end"),
    ];
    for (from, to, key) in cases {
        let s = write(dir.path(), "s.toml", &BASE.replace(from, to));
        let line = fails(tokdyn().arg("run").arg(&s), 2);
        assert!(line.contains(key), "{line}");
    }
    let long = "x".repeat(100_000);
    let s = write(
        dir.path(),
        "d.toml",
        &format!("description = \"{long}\"\n{BASE}"),
    );
    let line = fails(tokdyn().arg("run").arg(&s), 2);
    assert!(line.contains("description"), "{line}");
    assert!(line.len() < 300, "{} characters", line.len());
    // A huge offending value is quoted with at most about 80 characters.
    let s = write(
        dir.path(),
        "k.toml",
        &BASE.replace("kernel = \"lsa\"", &format!("kernel = \"{long}\"")),
    );
    let line = fails(tokdyn().arg("run").arg(&s), 2);
    assert!(line.contains("kernel"), "{line}");
    assert!(line.len() < 400, "{} characters: {line}", line.len());
}
