//! Extreme inputs (issue 42): every run has a bounded amount of work known before it starts,
//! overflowing scales are refused up front, tiny beta is no overflow, and no output holds a
//! non-finite number. The named tests are the cases the campaign found; the last test draws a
//! few hundred scenarios from a seeded generator over the schema and runs each under a time and
//! an address-space limit, asserting exit 0, 1 or 2, one `error:` line on failure, no output
//! folder after a failure and finite numbers in every output.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Address space each child may map (`ulimit -v`, KiB): the bounds must refuse before this.
const ADDRESS_SPACE_KIB: u64 = 3_000_000;

/// Wall time a single case may take (a hang fails the test).
const CASE_LIMIT: Duration = Duration::from_secs(20);

/// Wall time the generated cases may take together.
const FUZZ_BUDGET: Duration = Duration::from_secs(25);

/// What one run of the binary did.
struct Outcome {
    code: i32,
    stderr: String,
}

/// Runs `tokdyn ARGS` under the address-space limit, one thread, with the case's time limit.
fn tokdyn(args: &[&str], cwd: &Path) -> Outcome {
    let bin = assert_cmd::cargo::cargo_bin("tokdyn");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "ulimit -v {ADDRESS_SPACE_KIB}; exec '{}' {}",
        bin.display(),
        quoted.join(" ")
    );
    let out = assert_cmd::Command::new("sh")
        .args(["-c", &script])
        .current_dir(cwd)
        .env("RAYON_NUM_THREADS", "1")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .timeout(CASE_LIMIT)
        .output()
        .unwrap();
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

/// The contract of any run: exit 0, 1 or 2 (no kill, no abort, no hang); on failure exactly
/// one line, an `error:` line, and no output folder; on success finite numbers everywhere.
fn check_contract(o: &Outcome, out: &Path, what: &str) {
    assert!(
        matches!(o.code, 0..=2),
        "{what}: exit {} (a hang, an abort or a kill): {}",
        o.code,
        o.stderr
    );
    assert!(!o.stderr.contains("panicked"), "{what}: {}", o.stderr);
    if o.code != 0 {
        let lines: Vec<&str> = o.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let errors = lines.iter().filter(|l| l.starts_with("error:")).count();
        assert_eq!((errors, lines.len()), (1, 1), "{what}: {}", o.stderr);
        assert!(!out.exists(), "{what}: an output folder after a failure");
    } else {
        assert_finite_outputs(out, what);
    }
}

/// Every CSV cell and JSON number of a run's folder is finite (or empty / null).
fn assert_finite_outputs(dir: &Path, what: &str) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext != "csv" && ext != "json" {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        if ext == "json" {
            // serde_json writes no non-finite number; a string "inf" or "NaN" would be one.
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_json_finite(&value, &format!("{what}: {}", path.display()));
            continue;
        }
        for (row, line) in text.lines().enumerate().skip(1) {
            for cell in line.split(',') {
                let cell = cell.trim_matches('"');
                if let Ok(x) = cell.parse::<f64>() {
                    assert!(
                        x.is_finite(),
                        "{what}: {} row {row}: {cell}",
                        path.display()
                    );
                }
            }
        }
    }
}

fn assert_json_finite(v: &serde_json::Value, what: &str) {
    match v {
        serde_json::Value::String(s) => {
            let lower = s.to_ascii_lowercase();
            assert!(
                !matches!(lower.as_str(), "inf" | "-inf" | "nan" | "infinity"),
                "{what}: {s}"
            );
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| assert_json_finite(x, what)),
        serde_json::Value::Object(o) => o.values().for_each(|x| assert_json_finite(x, what)),
        _ => {}
    }
}

/// A one-layer scenario on the sphere.
fn scenario(
    kernel: &str,
    beta: &str,
    d: usize,
    v: &str,
    n: usize,
    t_end: &str,
    extra: &str,
) -> String {
    format!(
        "name = \"x\"\n[model]\nkernel = \"{kernel}\"\nbeta = {beta}\nd = {d}\nA = \"identity\"\nV = {v}\n\
         [tokens]\nn = {n}\ninit = \"uniform\"\nseed = 1\n[time]\nt_end = {t_end}\nsamples = 11\n{extra}"
    )
}

/// Writes `text` as `name` in `dir` and runs `command` on it with `--out dir/out-name`.
fn run_file(
    dir: &Path,
    command: &str,
    name: &str,
    text: &str,
    extra: &[&str],
) -> (Outcome, PathBuf) {
    fs::write(dir.join(name), text).unwrap();
    let out = dir.join(format!("out-{name}"));
    let mut args = vec![command, name, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = tokdyn(&args, dir);
    check_contract(&o, &out, name);
    (o, out)
}

/// Asserts a refusal: exit 2 naming `key` and mentioning `word`.
fn refused(o: &Outcome, key: &str, word: &str) {
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(key) && o.stderr.contains(word),
        "expected {key} and {word}: {}",
        o.stderr
    );
}

#[test]
fn a_matrix_entry_of_1e100_is_refused_by_the_speed_bound() {
    let dir = tempfile::tempdir().unwrap();
    let text = scenario("lsa", "1.0", 2, "[[1e100, 0], [0, 1]]", 20, "10.0", "");
    let (o, _) = run_file(dir.path(), "run", "v.toml", &text, &[]);
    refused(&o, "time.t_end", "1e12");
    // The same in a factored head: |V| |O| = 1e100.
    let factored = "name = \"x\"\n[model]\nkernel = \"lsa\"\nbeta = 1.0\nd = 2\n\
        heads = [{ Q = [[1, 0], [0, 1]], K = [[1, 0], [0, 1]], V = [[1e100, 0], [0, 1]], O = [[1, 0], [0, 1]] }]\n\
        [tokens]\nn = 20\n[time]\nt_end = 10.0\nsamples = 11\n";
    let (o, _) = run_file(dir.path(), "run", "f.toml", factored, &[]);
    refused(&o, "time.t_end", "1e12");
}

#[test]
fn entries_from_1e154_to_1e308_are_refused_as_overflow() {
    let dir = tempfile::tempdir().unwrap();
    for big in ["1e154", "1e200", "1e308"] {
        let text = scenario(
            "lsa",
            "1.0",
            2,
            &format!("[[{big}, 0], [0, 1]]"),
            20,
            "10.0",
            "",
        );
        let (o, _) = run_file(dir.path(), "run", "big.toml", &text, &[]);
        refused(&o, "model.V", "overflow");
    }
}

#[test]
fn usa_at_beta_100_and_t_end_1e300_are_refused_by_the_speed_bound() {
    let dir = tempfile::tempdir().unwrap();
    // usa: |V| e^(beta |A|) = sqrt(2) e^100 per unit time (the spectral norm of I is 1).
    let text = scenario("usa", "100.0", 2, "\"identity\"", 20, "10.0", "");
    let (o, _) = run_file(dir.path(), "run", "usa.toml", &text, &[]);
    refused(&o, "time.t_end", "e^(|beta| |A|)");
    let text = scenario("lsa", "1.0", 2, "\"identity\"", 20, "1e300", "");
    let (o, _) = run_file(dir.path(), "run", "long.toml", &text, &[]);
    refused(&o, "time.t_end", "1e300");
    // At the edge: S t = 1 * 1e11 is accepted (the check does not refuse legal long runs), and
    // d = 100 counts the identity as 1 (its spectral norm), not 10.
    let text = scenario("usa", "5.0", 100, "\"identity\"", 4, "1e3", "");
    let (o, _) = run_file(dir.path(), "run", "d100.toml", &text, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn a_sweep_axis_of_1e11_steps_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("base.toml"),
        scenario(
            "lsa",
            "1.0",
            2,
            "\"identity\"",
            8,
            "1.0",
            "[params]\nv11 = 0.1\n",
        )
        .replace("V = \"identity\"", "V = [[\"v11\", 1.0], [-1.0, \"v11\"]]"),
    )
    .unwrap();
    let sweep = "name = \"s\"\nscenario = \"base.toml\"\n[axes]\nv11 = { from = 0.0, to = 1.0, steps = 100000000000 }\n";
    let started = Instant::now();
    let (o, _) = run_file(dir.path(), "sweep", "s.toml", sweep, &[]);
    refused(&o, "axes.v11.steps", "100000000");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn continuation_and_codim2_steps_of_5e_324_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    for f in ["random-family.toml", "sweep-case4-long.toml"] {
        fs::copy(root.join(f), dir.path().join(f)).unwrap();
    }
    let codim2 = "name = \"c\"\nscenario = \"random-family.toml\"\nmodel = \"oa\"\n[axes]\nv11 = { from = -0.2, to = 0.7, steps = 2 }\n\
        [codim2]\nparameters = [\"v11\", \"v12\"]\nfrom = [-0.2, -0.6]\nto = [0.7, 0.4]\nstep = 5e-324\ncurves = [\"fold\", \"hopf\"]\n";
    let (o, _) = run_file(dir.path(), "sweep", "c.toml", codim2, &[]);
    refused(&o, "codim2.step", "1e-9");
    let cont = "name = \"k\"\nscenario = \"sweep-case4-long.toml\"\nmodel = \"oa\"\n[axes]\nv11 = { from = 0.0, to = 1.0, steps = 2 }\n\
        [continuation]\nparameter = \"v11\"\nfrom = 0.0\nto = 1.0\nstep = 5e-324\n";
    let (o, _) = run_file(dir.path(), "sweep", "k.toml", cont, &[]);
    refused(&o, "continuation.step", "1e-9");
}

#[test]
fn a_cluster_threshold_of_1e_300_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = scenario(
        "sa",
        "1.0",
        2,
        "\"identity\"",
        20,
        "10.0",
        "[clusters]\nthreshold = 1e-300\n",
    );
    let (o, _) = run_file(dir.path(), "run", "t.toml", &text, &[]);
    refused(&o, "clusters.threshold", "1e-12");
}

#[test]
fn d_5000_is_refused_before_allocating_under_a_memory_limit() {
    // Two 5000 x 5000 matrices and their resolved text need about 9 GB; the child may map 3 GB.
    let dir = tempfile::tempdir().unwrap();
    let text = scenario("usa", "1.0", 5000, "\"identity\"", 2, "10.0", "");
    let (o, _) = run_file(dir.path(), "run", "d.toml", &text, &[]);
    refused(&o, "model.d", "refused before allocating");
}

#[test]
fn tiny_beta_runs_under_the_spectral_kernel() {
    // beta = 1e-100 and log_n = 5e-324: the Bessel values of a tiny argument, not an overflow.
    let dir = tempfile::tempdir().unwrap();
    for beta in ["1e-100", "{ log_n = 5e-324 }"] {
        for kernel in ["usa", "sa"] {
            let text = scenario(kernel, beta, 2, "\"identity\"", 300, "1.0", "");
            let mut orders = Vec::new();
            for method in ["spectral", "direct"] {
                let (o, out) = run_file(
                    dir.path(),
                    "run",
                    &format!("{kernel}-{method}.toml"),
                    &text,
                    &["--set", &format!("model.kernel_method={method}")],
                );
                assert_eq!(o.code, 0, "{kernel} {beta} {method}: {}", o.stderr);
                let summary: serde_json::Value =
                    serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap())
                        .unwrap();
                assert_eq!(summary["kernel_method"], method);
                orders.push(read_column(&out.join("order.csv"), "r1_abs"));
            }
            // Both kernels follow the same flow (beta -> 0: attention to the mean).
            let gap = orders[0]
                .iter()
                .zip(&orders[1])
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(
                gap < 1e-6,
                "{kernel} {beta}: spectral and direct differ by {gap}"
            );
        }
    }
}

/// A numeric column of a CSV file.
fn read_column(path: &Path, name: &str) -> Vec<f64> {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = header.iter().position(|h| *h == name).unwrap();
    lines
        .map(|l| l.split(',').nth(i).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn an_energy_past_a_double_is_empty_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    for beta in ["1e3", "1e10", "1e100", "1e300"] {
        let text = scenario("sa", beta, 2, "\"identity\"", 20, "1.0", "");
        let (o, out) = run_file(dir.path(), "run", "e.toml", &text, &[]);
        assert_eq!(o.code, 0, "{beta}: {}", o.stderr);
        let energy = fs::read_to_string(out.join("clusters.csv")).unwrap();
        assert!(
            energy.lines().skip(1).all(|l| l.ends_with(',')),
            "{beta}: {energy}"
        );
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        let reason = summary["clusters"]["energy_omitted"].as_str().unwrap();
        assert!(reason.contains("exceeds the largest double"), "{reason}");
    }
    // beta = 712: every term e^712 overflows but E = e^712 / (2 * 712) (one cluster, in the
    // limit) is a double: written, from its logarithm.
    let text = scenario("sa", "712.0", 2, "\"identity\"", 20, "1.0", "");
    let (o, out) = run_file(dir.path(), "run", "e2.toml", &text, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let energy = read_column(&out.join("clusters.csv"), "energy");
    let upper = (712.0f64 - (2.0f64 * 712.0).ln()).exp();
    assert!(energy
        .iter()
        .all(|&e| e.is_finite() && e > 0.0 && e <= upper * (1.0 + 1e-12)));
}

/// A small deterministic generator (xorshift64*), so a failing case reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
    /// `usual` two times in three, else one of `extremes`.
    fn mostly<'a>(&mut self, usual: &'a str, extremes: &[&'a str]) -> &'a str {
        if self.next().is_multiple_of(3) {
            self.pick(extremes)
        } else {
            usual
        }
    }
}

/// One scenario drawn over the schema's extreme values (each knob usual two times in three).
fn draw(rng: &mut Rng) -> String {
    let extremes = [
        "0.0", "-1.0", "1e-300", "5e-324", "1e3", "1e100", "1e154", "1e308", "-1e308",
    ];
    let kernel = rng.pick(&["lsa", "usa", "sa"]);
    let beta = match rng.next() % 6 {
        0 => format!(
            "{{ log_n = {} }}",
            rng.pick(&["5e-324", "1.0", "1e10", "-1"])
        ),
        _ => rng.mostly("1.0", &extremes).to_string(),
    };
    let d = rng.mostly("2", &["3", "1", "20000", "5000"]);
    let entry = rng.mostly("0.5", &extremes);
    let matrix = |rng: &mut Rng| match rng.next() % 4 {
        0 => "\"identity\"".to_string(),
        1 => "\"zero\"".to_string(),
        2 => format!(
            "{{ random = \"gaussian\", seed = 3, scale = {} }}",
            rng.mostly("1.0", &extremes)
        ),
        _ => format!("{{ block = [[{entry}, 0.3], [-0.3, 1.0]], rest = \"identity\" }}"),
    };
    let (a, v) = (matrix(rng), matrix(rng));
    let n = rng.mostly("12", &["1", "2", "0", "64"]);
    let init = rng.pick(&["uniform", "splay", "poisson"]);
    let t_end = rng.mostly("2.0", &["1e-300", "1e300", "1e30", "1e-9", "20.0"]);
    let samples = rng.mostly("11", &["2", "1", "100000000000"]);
    let mut text = format!(
        "name = \"g\"\n[model]\nkernel = \"{kernel}\"\nbeta = {beta}\nd = {d}\nA = {a}\nV = {v}\n\
         [tokens]\nn = {n}\ninit = \"{init}\"\nseed = 1\nr0 = 0.3\n[time]\nt_end = {t_end}\nsamples = {samples}\n"
    );
    match rng.next() % 5 {
        0 => text.push_str(&format!(
            "[clusters]\nthreshold = {}\n",
            rng.pick(&["1e-300", "0.1", "3.0", "1e-12"])
        )),
        1 => text.push_str(&format!(
            "[solver]\nmethod = \"{}\"\ndt = {}\n",
            rng.pick(&["rk4", "dopri5", "dop853"]),
            rng.pick(&["0.01", "1e-300", "5e-324", "1e300"])
        )),
        2 => text.push_str(&format!(
            "[run]\nmodel = \"{}\"\n",
            rng.pick(&["full", "oa", "group", "clusters", "phase", "ws"])
        )),
        _ => {}
    }
    text
}

#[test]
fn generated_extreme_scenarios_keep_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0xA076_1D64_78BD_642F);
    let started = Instant::now();
    let mut codes = [0usize; 3];
    let mut cases = 0;
    while started.elapsed() < FUZZ_BUDGET && cases < 400 {
        let text = draw(&mut rng);
        let name = format!("g{cases}.toml");
        let (o, _) = run_file(dir.path(), "run", &name, &text, &[]);
        codes[o.code as usize] += 1;
        // Every generated input's trouble is known before it runs: no run fails midway.
        assert_ne!(
            o.code, 1,
            "a run failed instead of a refusal: {text}{}",
            o.stderr
        );
        let _ = fs::remove_dir_all(dir.path().join(format!("out-{name}")));
        cases += 1;
    }
    eprintln!("{cases} generated cases, exits 0 / 1 / 2: {codes:?}");
    // The generator reaches both sides: runs that finish and inputs refused.
    assert!(
        cases >= 50 && codes[0] > 0 && codes[2] > 0,
        "{cases} cases: {codes:?}"
    );
}
