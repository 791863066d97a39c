//! Clusters and metastability (softmax attention): clusters.csv, summary.json `clusters`, the
//! metastable-clusters label, the energy, the cluster model and compare for usa / sa.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn tokdyn() -> Command {
    Command::cargo_bin("tokdyn").unwrap()
}

fn scenario(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    fs::write(&p, format!("name = \"{name}\"\n{body}")).unwrap();
    p
}

fn softmax(kernel: &str, beta: f64, d: usize, tokens: &str, time: &str) -> String {
    format!(
        "[model]\nkernel = \"{kernel}\"\nbeta = {beta}\nd = {d}\nA = \"identity\"\nV = \"identity\"\n\
         [tokens]\n{tokens}\n[time]\n{time}\n"
    )
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

/// I_k(x) by its power series (independent of the crate's Bessel code).
fn bessel_i(k: u32, x: f64) -> f64 {
    let mut term = (x / 2.0).powi(k as i32) / (1..=k).map(f64::from).product::<f64>();
    let mut sum = 0.0;
    for m in 0..200u32 {
        sum += term;
        term *= (x / 2.0).powi(2) / (f64::from(m + 1) * f64::from(m + 1 + k));
    }
    sum
}

/// The fastest mode of the uniform state on the circle: argmax_k k^2 I_k(beta).
fn fastest_mode(beta: f64) -> usize {
    (1..40u32)
        .max_by(|&a, &b| {
            let f = |k: u32| f64::from(k * k) * bessel_i(k, beta);
            f(a).total_cmp(&f(b))
        })
        .unwrap() as usize
}

/// `tokdyn predict` of a scenario into `out`: its predict.json.
fn predict(path: &Path, out: &Path) -> serde_json::Value {
    tokdyn()
        .arg("predict")
        .arg(path)
        .arg("--out")
        .arg(out)
        .assert()
        .success();
    serde_json::from_str(&fs::read_to_string(out.join("predict.json")).unwrap()).unwrap()
}

/// The fastest degree of the uniform state on S^2: argmax_l l (l + 1) i_l(beta), with the
/// modified spherical Bessel function i_l(x) = sqrt(pi / 2x) I_{l+1/2}(x) by its power series
/// x^l sum_m (x^2 / 2)^m / (m! (2l + 2m + 1)!!).
fn fastest_degree_s2(beta: f64) -> usize {
    let i = |l: u32| -> f64 {
        let mut term = beta.powi(l as i32) / (1..=l).map(|j| f64::from(2 * j + 1)).product::<f64>();
        let mut sum = 0.0;
        for m in 0..200u32 {
            sum += term;
            term *= beta * beta / 2.0 / (f64::from(m + 1) * f64::from(2 * l + 2 * m + 3));
        }
        sum
    };
    (1..30u32)
        .max_by(|&a, &b| {
            let f = |l: u32| f64::from(l * (l + 1)) * i(l);
            f(a).total_cmp(&f(b))
        })
        .unwrap() as usize
}

#[test]
fn predict_names_the_fastest_mode_only_for_scalar_weights_and_a_near_uniform_start() {
    let dir = tempfile::tempdir().unwrap();
    // d = 3, uniform start of many tokens: the fastest spherical harmonic (usa and sa share
    // it: one head, the rates differ by a positive factor).
    for beta in [1.0, 9.0, 30.0] {
        let s = scenario(
            dir.path(),
            "sphere",
            &softmax(
                "sa",
                beta,
                3,
                "n = 1500\nseed = 3",
                "t_end = 0.1\nsamples = 3",
            ),
        );
        let p = predict(&s, &dir.path().join(format!("s{beta}")));
        let c = &p["clusters"];
        assert_eq!(
            c["from_uniform"].as_u64().map(|k| k as usize),
            Some(fastest_degree_s2(beta)),
            "{p}"
        );
        assert!(c["start_moment"].as_f64().unwrap() <= c["tolerance"].as_f64().unwrap());
        assert!(p.get("fixed_points").is_none(), "no OA analysis for usa");
    }
    assert_eq!(fastest_degree_s2(1.0), 1);
    // Not near uniform (all tokens in a small cap), and A not a multiple of I: null.
    let s = scenario(
        dir.path(),
        "cap",
        &softmax(
            "sa",
            4.0,
            2,
            "n = 50\ninit = \"splay\"",
            "t_end = 0.5\nsamples = 3",
        ),
    );
    let p = predict(&s, &dir.path().join("cap"));
    assert!(p["clusters"]["from_uniform"].is_null(), "{p}");
    assert!(p["clusters"]["start_moment"].as_f64().unwrap() > 0.1);
    assert_eq!(p["clusters"]["fastest_mode"], 3);
    let s = scenario(
        dir.path(),
        "skew",
        "[model]\nkernel = \"sa\"\nbeta = 4.0\nd = 2\nA = [[1.0, 0.3], [0.0, 1.0]]\nV = \"identity\"\n\
          [tokens]\nn = 50\ninit = \"circle\"\n[time]\nt_end = 0.5\nsamples = 3\n",
    );
    let p = predict(&s, &dir.path().join("skew"));
    assert!(p["clusters"]["from_uniform"].is_null(), "{p}");
    assert!(p["clusters"]["rates"].as_array().unwrap().is_empty());
    // A causal mask: refused with one error line at model.mask, nothing written.
    let s = scenario(
        dir.path(),
        "masked",
        &softmax("sa", 2.0, 2, "n = 20\nseed = 1", "t_end = 1.0\nsamples = 3")
            .replace("[model]\n", "[model]\nmask = \"causal\"\n"),
    );
    let out = tokdyn()
        .arg("predict")
        .arg(&s)
        .arg("--out")
        .arg(dir.path().join("masked"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error:") && err.contains("model.mask"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
    assert!(!dir.path().join("masked").exists());
    // lsa keeps its predict.json: the OA analysis, no `clusters`, keys in their order.
    let s = scenario(
        dir.path(),
        "lsa",
        &softmax(
            "lsa",
            1.0,
            2,
            "n = 50\nseed = 1",
            "t_end = 1.0\nsamples = 3",
        ),
    );
    predict(&s, &dir.path().join("lsa"));
    let text = fs::read_to_string(dir.path().join("lsa/predict.json")).unwrap();
    let keys = [
        "\"name\"",
        "\"fixed_points\"",
        "\"boundary_zeros\"",
        "\"boundary_continuum\"",
        "\"boundary_circle\"",
        "\"limit_cycles\"",
        "\"start\"",
        "\"end\"",
        "\"horizon\"",
        "\"label\"",
        "\"reason\"",
        "\"simulated_label\"",
        "\"agrees\"",
    ];
    let at: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(
        !text.contains("\"clusters\"") && !text.contains("simulated_count"),
        "{text}"
    );
}

fn csv_rows(path: &Path) -> (String, Vec<Vec<String>>) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_string();
    let rows = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    (header, rows)
}

#[test]
fn the_evenly_spaced_circle_start_sits_in_the_fastest_modes_clusters() {
    let dir = tempfile::tempdir().unwrap();
    for (beta, t_end) in [(2.0, 40.0), (5.0, 40.0), (10.0, 40.0), (16.0, 22.0)] {
        let k_star = fastest_mode(beta);
        let s = scenario(
            dir.path(),
            "circle",
            &softmax(
                "sa",
                beta,
                2,
                "n = 400\ninit = \"circle\"\neps = 0.01\nseed = 1",
                &format!("t_end = {t_end}\nsamples = 111"),
            ),
        );
        let out = dir.path().join(format!("o{beta}"));
        let summary = run(&s, &out, &[]);
        let predicted = predict(&s, &out);
        let p = &predicted["clusters"];
        assert_eq!(
            p["from_uniform"].as_u64().map(|k| k as usize),
            Some(k_star),
            "beta {beta}: {predicted}"
        );
        assert_eq!(predicted["simulated_count"], p["from_uniform"]);
        assert_eq!(predicted["agrees"], true);
        let c = &summary["clusters"];
        assert_eq!(
            summary["label"], "metastable-clusters",
            "beta {beta}: {summary}"
        );
        assert_eq!(c["count"].as_u64().unwrap() as usize, k_star, "beta {beta}");
        assert_eq!(c["metastable"]["count"], c["count"]);
        // The first clustered plateau is the fastest mode's.
        let first = c["history"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["count"].as_u64().unwrap() > 0)
            .unwrap();
        assert_eq!(first["count"].as_u64().unwrap() as usize, k_star);
    }
    assert_eq!(
        [2.0, 5.0, 10.0, 16.0].map(fastest_mode),
        [2, 3, 4, 6],
        "the published counts"
    );
}

#[test]
fn the_issues_examples_are_labelled_right() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("sa", 4.0, 2, "metastable-clusters", Some(2)),
        ("sa", 9.0, 2, "metastable-clusters", Some(3)),
        ("sa", 4.0, 3, "metastable-clusters", Some(2)),
        ("usa", 1.0, 3, "converged-clusters", Some(1)),
    ];
    for (i, (kernel, beta, d, label, count)) in cases.into_iter().enumerate() {
        let s = scenario(
            dir.path(),
            "ex",
            &softmax(
                kernel,
                beta,
                d,
                "n = 300\nseed = 2",
                "t_end = 50.0\nsamples = 201",
            ),
        );
        let summary = run(&s, &dir.path().join(format!("o{i}")), &[]);
        assert_eq!(
            summary["label"], label,
            "{kernel} beta {beta} d {d}: {summary}"
        );
        assert_eq!(
            summary["clusters"]["count"].as_u64().map(|c| c as usize),
            count
        );
    }
}

#[test]
fn clusters_csv_agrees_with_single_linkage_of_the_final_tokens() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (d, beta)) in [(2, 9.0), (3, 4.0), (5, 6.0)].into_iter().enumerate() {
        let s = scenario(
            dir.path(),
            "sl",
            &softmax(
                "sa",
                beta,
                d,
                "n = 150\nseed = 5",
                "t_end = 30.0\nsamples = 61",
            ),
        );
        let out = dir.path().join(format!("o{i}"));
        let summary = run(&s, &out, &[]);
        let (header, rows) = csv_rows(&out.join("clusters.csv"));
        assert_eq!(header, "t,count,largest,diameter,separation,energy");
        assert_eq!(rows.len(), 61);
        let last = rows.last().unwrap();
        let count: usize = last[1].parse().unwrap();
        assert_eq!(
            summary["clusters"]["count"].as_u64().unwrap() as usize,
            count
        );
        // Single linkage at the threshold over all pairs of the final tokens.
        let (_, tokens) = csv_rows(&out.join("tokens_final.csv"));
        let x: Vec<Vec<f64>> = tokens
            .iter()
            .map(|r| r.iter().map(|v| v.parse().unwrap()).collect())
            .collect();
        let theta = summary["clusters"]["threshold"].as_f64().unwrap();
        let angle = |a: &[f64], b: &[f64]| {
            let c: f64 = a.iter().zip(b).map(|(p, q)| p * q).sum();
            c.clamp(-1.0, 1.0).acos()
        };
        let n = x.len();
        let mut group: Vec<usize> = (0..n).collect();
        for a in 0..n {
            for b in 0..n {
                if group[a] != group[b] && angle(&x[a], &x[b]) <= theta {
                    let (keep, drop) = (group[a].min(group[b]), group[a].max(group[b]));
                    group
                        .iter_mut()
                        .filter(|g| **g == drop)
                        .for_each(|g| *g = keep);
                }
            }
        }
        let mut distinct = group.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(count > 0, "d = {d}: the run should end clustered");
        assert_eq!(distinct.len(), count, "d = {d}");
        let mut sizes: Vec<usize> = distinct
            .iter()
            .map(|g| group.iter().filter(|h| *h == g).count())
            .collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let reported: Vec<usize> = summary["clusters"]["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(sizes, reported);
    }
}

#[test]
fn the_energy_equals_its_formula_at_zero_and_never_decreases() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (kernel, d)) in [("usa", 2), ("sa", 2), ("usa", 3), ("sa", 3), ("lsa", 3)]
        .into_iter()
        .enumerate()
    {
        let beta = 3.0;
        let n = 60;
        let s = scenario(
            dir.path(),
            "en",
            &softmax(
                kernel,
                beta,
                d,
                &format!("n = {n}\ninit = \"circle\""),
                "t_end = 20.0\nsamples = 101",
            ),
        );
        // Start off the symmetric state: perturb by eps.
        let out = dir.path().join(format!("o{i}"));
        run(&s, &out, &["--set", "tokens.eps=0.3"]);
        let (_, rows) = csv_rows(&out.join("clusters.csv"));
        let energy: Vec<f64> = rows.iter().map(|r| r[5].parse().unwrap()).collect();
        for w in energy.windows(2) {
            assert!(w[1] >= w[0] - 1e-12 * w[0].abs(), "{kernel} d {d}: {w:?}");
        }
        assert!(
            energy.last().unwrap() > &(energy[0] + 1e-6),
            "{kernel} d {d}"
        );
        // At t = 0 with eps = 0 (tokens at 2 pi k / n) the formula by hand.
        let out0 = dir.path().join(format!("z{i}"));
        run(
            &s,
            &out0,
            &["--set", "time.t_end=0.1", "--set", "time.samples=2"],
        );
        let (_, rows) = csv_rows(&out0.join("clusters.csv"));
        let e0: f64 = rows[0][5].parse().unwrap();
        let t: Vec<f64> = (0..n)
            .map(|k| 2.0 * std::f64::consts::PI * k as f64 / n as f64)
            .collect();
        let mut sum = 0.0;
        for a in &t {
            for b in &t {
                let dot = (a - b).cos();
                sum += if kernel == "lsa" {
                    beta * dot * dot
                } else {
                    (beta * dot).exp() / beta
                };
            }
        }
        let want = sum / (2.0 * (n * n) as f64);
        assert!(
            (e0 - want).abs() < 1e-10 * want,
            "{kernel} d {d}: {e0} vs {want}"
        );
    }
    // No energy where V != A.
    let s = scenario(
        dir.path(),
        "none",
        &softmax("sa", 2.0, 2, "n = 20", "t_end = 1.0\nsamples = 3")
            .replace("V = \"identity\"", "V = [[1.0, 0.5], [-0.5, 1.0]]"),
    );
    let out = dir.path().join("none");
    run(&s, &out, &[]);
    let (_, rows) = csv_rows(&out.join("clusters.csv"));
    assert!(rows.iter().all(|r| r[5].is_empty()));
}

#[test]
fn a_bad_threshold_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["0.0", "-1", "3.141592653589793", "3.2", "nan"] {
        let s = scenario(
            dir.path(),
            "bad",
            &format!(
                "{}[clusters]\nthreshold = {bad}\n",
                softmax("sa", 2.0, 2, "n = 20", "t_end = 1.0\nsamples = 3")
            ),
        );
        let out = tokdyn()
            .arg("run")
            .arg(&s)
            .arg("--out")
            .arg(dir.path().join("x"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(
            err.starts_with("error:") && err.contains("clusters.threshold"),
            "{err}"
        );
        assert!(!dir.path().join("x").exists());
    }
}

#[test]
fn compare_runs_full_and_the_cluster_model_for_softmax_kernels() {
    let dir = tempfile::tempdir().unwrap();
    for kernel in ["usa", "sa"] {
        let s = scenario(
            dir.path(),
            "cmp",
            &softmax(
                kernel,
                4.0,
                2,
                "n = 200\nseed = 2",
                "t_end = 30.0\nsamples = 61",
            ),
        );
        let out = dir.path().join(kernel);
        let assert = tokdyn()
            .arg("compare")
            .arg(&s)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
        assert!(stdout.contains("clusters"), "{stdout}");
        let (header, rows) = csv_rows(&out.join("compare.csv"));
        assert_eq!(
            header,
            "t,full_re,full_im,clusters_re,clusters_im,full_count,clusters_count"
        );
        assert_eq!(rows.len(), 61);
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        let c = &summary["compare"];
        assert!(c["seconds"]["clusters"].as_f64().unwrap() >= 0.0);
        // Once the cluster model has taken over it keeps the full model's count and R2.
        let last = rows.last().unwrap();
        assert_eq!(last[5], last[6], "{kernel}");
        assert!(
            c["clusters_vs_full"].as_f64().unwrap() < 1e-3,
            "{kernel}: {c}"
        );
        assert!(c["merges"]["full"].is_array() && c["merges"]["clusters"].is_array());
    }
}

/// The first merge from `from` clusters in a summary's merges.
fn merge_from(summary: &serde_json::Value, from: u64) -> f64 {
    summary["clusters"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["from_count"].as_u64() == Some(from))
        .unwrap_or_else(|| panic!("no merge from {from}: {summary}"))["t"]
        .as_f64()
        .unwrap()
}

#[test]
fn the_cluster_model_merges_when_the_full_model_does_and_follows_the_staircase() {
    let dir = tempfile::tempdir().unwrap();
    let s = scenario(
        dir.path(),
        "stair",
        &softmax(
            "sa",
            6.0,
            2,
            "n = 100\nseed = 2",
            "t_end = 200.0\nsamples = 2001",
        ),
    );
    let full = run(&s, &dir.path().join("full"), &[]);
    let reduced = run(&s, &dir.path().join("clusters"), &["--model", "clusters"]);
    assert_eq!(reduced["model"], "clusters");
    let (t_full, t_model) = (merge_from(&full, 3), merge_from(&reduced, 3));
    assert!(
        (t_model - t_full).abs() < 0.02 * t_full,
        "full {t_full}, cluster model {t_model}"
    );
    // On to one cluster, far beyond what the full model could reach here, in seconds.
    let started = std::time::Instant::now();
    let long = run(
        &s,
        &dir.path().join("long"),
        &[
            "--model",
            "clusters",
            "--set",
            "time.t_end=1e6",
            "--set",
            "time.samples=2001",
        ],
    );
    assert!(started.elapsed().as_secs_f64() < 20.0);
    // predict names the same merge from the scenario's run.
    let p = predict(&s, &dir.path().join("predicted"));
    let predicted = p["clusters"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["from_count"] == 3)
        .unwrap_or_else(|| panic!("{p}"))["t"]
        .as_f64()
        .unwrap();
    assert!(
        (predicted - t_full).abs() < 0.02 * t_full,
        "{predicted} {t_full}"
    );
    assert_eq!(
        p["clusters"]["merges"].as_array().unwrap().last().unwrap()["to_count"],
        1
    );
    assert_eq!(long["t_final"], 1e6);
    assert_eq!(long["clusters"]["count"], 1, "{long}");
    let merges = long["clusters"]["merges"].as_array().unwrap();
    assert_eq!(merges.last().unwrap()["to_count"], 1);
}

#[test]
fn the_cluster_model_is_the_ode_of_weighted_points() {
    use tokdyn::integrate::{solve, Dynamics, Method, Problem};
    use tokdyn::model::{Attention, Head, Kernel};
    use tokdyn::observe::OrderSeries;
    use tokdyn::reduced::clusters::ClusterModel;
    // Three points on the circle with 5, 3 and 2 tokens, sa with A = V = I, beta = 3: in
    // angles, a' = sum_b w_b e^{beta cos(b - a)} sin(b - a) / sum_b w_b e^{beta cos(b - a)}.
    let (beta, w) = (3.0, [0.5, 0.3, 0.2]);
    let angles0 = [0.0, 1.9, 4.1];
    let field = |a: &[f64; 3]| {
        let mut out = [0.0; 3];
        for i in 0..3 {
            let (mut num, mut den) = (0.0, 0.0);
            for j in 0..3 {
                let e = w[j] * (beta * (a[j] - a[i]).cos()).exp();
                num += e * (a[j] - a[i]).sin();
                den += e;
            }
            out[i] = num / den;
        }
        out
    };
    // Classical RK4 with a small step, written here.
    let (t_end, h) = (4.0, 1e-3);
    let mut a = angles0;
    for _ in 0..(t_end / h) as usize {
        let add = |x: &[f64; 3], k: &[f64; 3], s: f64| {
            [x[0] + s * k[0], x[1] + s * k[1], x[2] + s * k[2]]
        };
        let k1 = field(&a);
        let k2 = field(&add(&a, &k1, h / 2.0));
        let k3 = field(&add(&a, &k2, h / 2.0));
        let k4 = field(&add(&a, &k3, h));
        for i in 0..3 {
            a[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
        }
    }
    let i = nalgebra::DMatrix::identity(2, 2);
    let model = ClusterModel::new(
        Attention::new(Kernel::Sa, beta, vec![Head { a: i.clone(), v: i }]),
        vec![5, 3, 2],
    );
    let state: Vec<f64> = angles0
        .iter()
        .flat_map(|t: &f64| [t.cos(), t.sin()])
        .collect();
    let problem = Problem {
        dynamics: &model,
        initial_state: state,
        t_end,
        samples: 5,
    };
    let mut series = OrderSeries::new();
    let method = Method::Dop853 {
        rtol: 1e-12,
        atol: 1e-14,
    };
    let solution = solve(&problem, method, &mut [&mut series]).unwrap();
    let y = &solution.final_state;
    for k in 0..3 {
        let (c, s) = (a[k].cos(), a[k].sin());
        assert!(
            (y[2 * k] - c).abs() < 1e-9 && (y[2 * k + 1] - s).abs() < 1e-9,
            "point {k}"
        );
    }
    assert_eq!(model.tokens(y).unwrap().len(), 20);
}

#[test]
fn the_cluster_model_without_tight_clusters_says_undetermined_and_why() {
    let dir = tempfile::tempdir().unwrap();
    // V = -I pushes the tokens apart: they never gather, so the cluster model never starts.
    let s = scenario(
        dir.path(),
        "apart",
        "[model]\nkernel = \"sa\"\nbeta = 2.0\nd = 2\nA = \"identity\"\nV = [[-1.0, 0.0], [0.0, -1.0]]\n\
         [tokens]\nn = 60\nseed = 4\n[time]\nt_end = 5.0\nsamples = 41\n",
    );
    let out = dir.path().join("apart");
    let summary = run(&s, &out, &["--model", "clusters"]);
    assert_eq!(summary["label"], "undetermined", "{summary}");
    let reason = summary["label_reason"].as_str().unwrap();
    assert!(reason.contains("never took over"), "{reason}");
    assert_eq!(summary["clusters"]["count"], 0);
    for file in ["order.csv", "clusters.csv", "tokens_final.csv"] {
        assert!(out.join(file).exists(), "{file}");
    }
    // The full model of the same scenario keeps its own label.
    let full = run(&s, &dir.path().join("full"), &[]);
    assert_ne!(full["label"], "metastable-clusters");
    assert!(
        reason.contains(full["label"].as_str().unwrap()),
        "{reason} / {full}"
    );
}

#[test]
fn a_sweep_of_beta_reports_each_points_cluster_count_and_draws_the_diagram() {
    let dir = tempfile::tempdir().unwrap();
    scenario(
        dir.path(),
        "base",
        &softmax(
            "sa",
            2.0,
            2,
            "n = 120\ninit = \"circle\"\neps = 0.01\nseed = 1",
            "t_end = 30.0\nsamples = 61",
        ),
    );
    let sweep_file = dir.path().join("s.toml");
    fs::write(
        &sweep_file,
        "name = \"betas\"\nscenario = \"base.toml\"\n[axes]\nmodel.beta = { from = 2.0, to = 10.0, steps = 3 }\n",
    )
    .unwrap();
    let out = dir.path().join("sweep");
    let sweep = |extra: &[&str]| {
        tokdyn()
            .arg("sweep")
            .arg(&sweep_file)
            .arg("--out")
            .arg(&out)
            .args(extra)
            .assert()
            .success();
    };
    sweep(&[]);
    let text = fs::read_to_string(out.join("sweep.csv")).unwrap();
    let header = text.lines().next().unwrap();
    assert!(header.ends_with(",reason,cluster_count"), "{header}");
    assert!(out.join("cluster_diagram.png").exists());
    // Each point's count is what the run of that scenario reports.
    for line in text.lines().skip(1) {
        let beta = line.split(',').next().unwrap();
        let count = line.rsplit(',').next().unwrap();
        let summary = run(
            &dir.path().join("base.toml"),
            &dir.path().join(format!("b{beta}")),
            &["--set", &format!("model.beta={beta}")],
        );
        assert_eq!(count, summary["clusters"]["count"].to_string(), "{line}");
        // ... and so is its label (refined by the clusters, as the run refines it).
        assert_eq!(
            line.split(',').nth(1).unwrap(),
            summary["label"].as_str().unwrap(),
            "{line}"
        );
        assert!(count.parse::<usize>().unwrap() >= 2, "{line}");
    }
    // A resumed sweep (every point read back from the progress file) writes the same bytes and
    // still has each point's history for the diagram.
    fs::remove_file(out.join("cluster_diagram.png")).unwrap();
    sweep(&["--resume"]);
    assert_eq!(fs::read_to_string(out.join("sweep.csv")).unwrap(), text);
    assert!(out.join("cluster_diagram.png").exists());
}

#[test]
fn merge_refuses_a_shard_written_without_cluster_count() {
    let dir = tempfile::tempdir().unwrap();
    scenario(
        dir.path(),
        "base",
        &softmax("sa", 2.0, 2, "n = 20\nseed = 1", "t_end = 1.0\nsamples = 5"),
    );
    let sweep_file = dir.path().join("s.toml");
    fs::write(
        &sweep_file,
        "name = \"old\"\nscenario = \"base.toml\"\n[axes]\nmodel.beta = { from = 1.0, to = 2.0, steps = 2 }\n",
    )
    .unwrap();
    let out = dir.path().join("sh");
    tokdyn()
        .arg("sweep")
        .arg(&sweep_file)
        .arg("--out")
        .arg(&out)
        .arg("--shard")
        .arg("1/1")
        .assert()
        .success();
    let shard = out.join("shard-1-of-1.csv");
    // The file as an older tokdyn wrote it: without the last column.
    let old: String = fs::read_to_string(&shard)
        .unwrap()
        .lines()
        .map(|l| format!("{}\n", &l[..l.rfind(',').unwrap()]))
        .collect();
    fs::write(&shard, old).unwrap();
    let merged = tokdyn().arg("merge").arg(&out).output().unwrap();
    let err = String::from_utf8_lossy(&merged.stderr).to_string();
    assert_eq!(merged.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error:") && err.contains("cluster_count"),
        "{err}"
    );
    assert!(!out.join("sweep.csv").exists());
}

#[test]
fn a_last_merge_in_the_tail_is_convergence_not_an_oscillation() {
    // sa on the circle (beta = 5, n = 128): 3 clusters, then 2, which merge at t ~ 9600, inside
    // the last quarter of a run to t = 12000. After the merge s = 1 up to rounding, whose peaks
    // once read as a period-16 oscillation of s between 0.31 and 1.
    let dir = tempfile::tempdir().unwrap();
    let s = scenario(
        dir.path(),
        "last-merge",
        &softmax(
            "sa",
            5.0,
            2,
            "n = 128\ninit = \"circle\"\neps = 0.01\nseed = 2",
            "t_end = 12000.0\nsamples = 2401",
        ),
    );
    let summary = run(&s, &dir.path().join("o"), &[]);
    let merges = summary["clusters"]["merges"].as_array().unwrap();
    let last = merges.last().unwrap();
    let (t_last, to) = (
        last["t"].as_f64().unwrap(),
        last["to_count"].as_u64().unwrap(),
    );
    assert_eq!(to, 1, "{summary}");
    assert!(
        t_last > 9000.0,
        "the last merge falls in the tail: {summary}"
    );
    // One tight cluster: every s after the merge is 1 to within its squared diameter.
    let order = fs::read_to_string(dir.path().join("o/order.csv")).unwrap();
    let after: Vec<f64> = order
        .lines()
        .skip(1)
        .map(|l| {
            l.split(',')
                .map(|x| x.parse::<f64>().unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|r| r[0] > t_last)
        .map(|r| r[6])
        .collect();
    assert!(after.iter().all(|s| (s - 1.0).abs() < 1e-6));
    assert_eq!(summary["label"], "converged-clusters", "{summary}");
    assert_eq!(summary["clusters"]["count"], 1);
    assert!(
        summary["features"]["period"].is_null(),
        "no period: {summary}"
    );
}
