//! The group model (Phi' = M Phi) against the token-by-token integration and against
//! Watanabe–Strogatz: order parameters and tokens, clustering and repelling runs, accuracy of
//! the tokens at the default tolerances, and thread-count-independent results.

use std::fs;
use std::path::Path;

use assert_cmd::Command;
use tokdyn::integrate::{solve, Solution};
use tokdyn::observe::{Observer, OrderSeries};
use tokdyn::scenario::{ModelKind, Scenario};
use tokdyn::simulation;

fn scenario(text: &str) -> Result<Scenario, String> {
    Scenario::from_toml_str(text, Path::new("test.toml"), Path::new("."), &[])
        .map_err(|e| e.to_string())
}

/// LSA with the given `[model]` weights lines, uniform tokens.
fn lsa(d: usize, weights: &str, n: usize, t_end: f64, rtol: f64, atol: f64) -> String {
    format!(
        r#"
name = "g"
[model]
kernel = "lsa"
beta = 1.0
d = {d}
{weights}
[tokens]
n = {n}
init = "uniform"
seed = 11
[time]
t_end = {t_end}
samples = 21
[solver]
rtol = {rtol}
atol = {atol}
"#
    )
}

/// Random Gaussian heads (entries N(0, 1/d)).
fn random_heads(heads: usize, seed: u64) -> String {
    if heads == 1 {
        return format!(
            "A = {{ random = \"gaussian\", seed = {seed}, scale = 1.0 }}\n\
             V = {{ random = \"gaussian\", seed = {}, scale = 1.0 }}",
            seed + 1
        );
    }
    let list: Vec<String> = (0..heads as u64)
        .map(|h| {
            format!(
                "{{ A = {{ random = \"gaussian\", seed = {}, scale = 1.0 }}, \
                 V = {{ random = \"gaussian\", seed = {}, scale = 1.0 }} }}",
                seed + 2 * h,
                seed + 2 * h + 1
            )
        })
        .collect();
    format!("heads = [{}]", list.join(", "))
}

fn run(s: &Scenario, model: ModelKind) -> (OrderSeries, Solution, Vec<f64>) {
    let sim = simulation::build(s, model).unwrap();
    let mut series = OrderSeries::new();
    let sol = solve(
        &sim.problem(),
        sim.method,
        &mut [&mut series as &mut dyn Observer],
    )
    .unwrap();
    assert!(sol.status.is_success(), "{model}: {}", sol.status);
    let tokens = sim.dynamics.tokens(&sol.final_state).unwrap().to_vec();
    (series, sol, tokens)
}

/// max over the samples of the differences in R2, R1 and s.
fn order_distance(a: &OrderSeries, b: &OrderSeries) -> f64 {
    assert_eq!(a.len(), b.len());
    let mut worst: f64 = 0.0;
    for i in 0..a.len() {
        worst = worst.max((a.r2[i] - b.r2[i]).norm());
        worst = worst.max((a.nematic[i] - b.nematic[i]).abs());
        if let (Some(x), Some(y)) = (a.r1[i], b.r1[i]) {
            worst = worst.max((x - y).abs());
        }
    }
    worst
}

fn token_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn group_against_full(text: &str, what: &str) {
    let s = scenario(text).unwrap();
    let (full, _, full_tokens) = run(&s, ModelKind::Full);
    let (group, sol, group_tokens) = run(&s, ModelKind::Group);
    let dist = order_distance(&full, &group);
    assert!(dist < 1e-8, "{what}: order parameters differ by {dist:e}");
    let dx = token_distance(&full_tokens, &group_tokens);
    eprintln!("{what}: max |d order| {dist:.1e}, max |dx| {dx:.1e}");
    assert!(dx < 1e-8, "{what}: final tokens differ by {dx:e}");
    assert_eq!(sol.final_state.len(), s.model.d * s.model.d);
    // The tokens of the group model are unit vectors by construction.
    for x in group_tokens.chunks_exact(s.model.d) {
        let r: f64 = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        assert!((r - 1.0).abs() < 1e-14);
    }
}

#[test]
fn group_equals_full_on_random_weights_with_one_and_three_heads() {
    for d in [2, 3, 8, 16] {
        for heads in [1, 3] {
            let text = lsa(d, &random_heads(heads, 5 + d as u64), 48, 4.0, 1e-10, 1e-12);
            group_against_full(&text, &format!("d = {d}, {heads} heads"));
        }
    }
}

#[test]
fn group_equals_full_while_tokens_cluster() {
    // A = V = I: two antipodal clusters, Phi becomes ill-conditioned (sigma_2 / sigma_1 ~ e^{-t}).
    let s = scenario(&lsa(
        3,
        "A = \"identity\"\nV = \"identity\"",
        40,
        20.0,
        1e-10,
        1e-12,
    ))
    .unwrap();
    let (full, _, _) = run(&s, ModelKind::Full);
    assert!(
        full.nematic.last().unwrap() > &0.999,
        "the run must cluster"
    );
    group_against_full(
        &lsa(
            3,
            "A = \"identity\"\nV = \"identity\"",
            40,
            20.0,
            1e-10,
            1e-12,
        ),
        "clustering",
    );
}

#[test]
fn group_equals_full_where_the_sphere_repels() {
    // A = I, V negative definite: convergence to an interior point, <x, M x> < 0.
    let v = "V = [[-1.0, 0.3, 0.0], [0.3, -0.8, 0.1], [0.0, 0.1, -1.2]]";
    let text = lsa(3, &format!("A = \"identity\"\n{v}"), 40, 20.0, 1e-10, 1e-12);
    group_against_full(&text, "repelling sphere");
}

#[test]
fn group_equals_watanabe_strogatz_in_the_plane() {
    let weights = "A = [[0.3, -1.1], [0.7, 0.4]]\nV = [[0.9, 0.2], [-0.5, 0.6]]";
    let s = scenario(&lsa(2, weights, 64, 10.0, 1e-11, 1e-13)).unwrap();
    let (ws, _, _) = run(&s, ModelKind::Ws);
    let (group, _, _) = run(&s, ModelKind::Group);
    for i in 0..ws.len() {
        let d = (ws.r2[i] - group.r2[i]).norm();
        assert!(d < 1e-9, "sample {i}: |dR2| = {d:e}");
    }
}

#[test]
fn group_equals_full_with_enough_tokens_for_the_plane_series() {
    // n = 3000: while Phi stays near conformal the d = 2 group model sums the series of the
    // initial tokens' harmonics instead of passing over them (docs/MATH.md §2.1); the case-4
    // oscillation stays there, the clustering run (A = V = I) leaves it for the direct pass.
    let oscillation = "A = \"identity\"\nV = [[0.2, 1.0], [-1.0, -0.2]]";
    let clustering = "A = \"identity\"\nV = \"identity\"";
    for (weights, what) in [(oscillation, "oscillation"), (clustering, "clustering")] {
        let text = lsa(2, weights, 3000, 20.0, 1e-10, 1e-12);
        group_against_full(&text, &format!("n = 3000, {what}"));
    }
}

#[test]
fn group_tokens_are_as_accurate_as_full_ones_at_the_same_tolerance() {
    // Against a tight reference (full model, rtol 1e-13), at the default rtol 1e-9 / atol 1e-11:
    // a random field and clustering ones (where Phi becomes nearly rank one: cond(Phi) ~ 5e14 at t = 40).
    let cases = [
        (3, random_heads(1, 21)),
        (3, "A = \"identity\"\nV = \"identity\"".to_string()),
        (
            2,
            "A = [[1.0, 0.5], [-0.5, 1.0]]\nV = [[1.0, 0.2], [0.1, 0.8]]".to_string(),
        ),
        (8, random_heads(1, 31)),
    ];
    let mut worst_condition: f64 = 0.0;
    for (d, weights) in cases {
        let reference = scenario(&lsa(d, &weights, 40, 40.0, 1e-13, 1e-15)).unwrap();
        let (_, _, exact) = run(&reference, ModelKind::Full);
        let loose = scenario(&lsa(d, &weights, 40, 40.0, 1e-9, 1e-11)).unwrap();
        let (_, _, full) = run(&loose, ModelKind::Full);
        let (_, sol, group) = run(&loose, ModelKind::Group);
        let phi = nalgebra::DMatrix::from_column_slice(d, d, &sol.final_state);
        let sv = phi.singular_values();
        worst_condition = worst_condition.max(sv.max() / sv.min());
        let (e_full, e_group) = (
            token_distance(&full, &exact),
            token_distance(&group, &exact),
        );
        eprintln!("d = {d}: token error full {e_full:.1e}, group {e_group:.1e}");
        // Within 3x full's error, or a tenth of rtol when full happens to land closer.
        assert!(
            e_group <= (3.0 * e_full).max(1e-10),
            "d = {d}: token error {e_group:e} (group) vs {e_full:e} (full)"
        );
    }
    // The clustering cases did reach an ill-conditioned Phi.
    assert!(worst_condition > 1e12, "cond(Phi) only {worst_condition:e}");
}

#[test]
fn group_results_ignore_the_thread_count() {
    // n > 2048: several chunks; d = 2 (fused pass) and d = 9 (blocked products).
    for d in [2, 9] {
        let s = scenario(&lsa(d, &random_heads(1, 41), 5000, 2.0, 1e-9, 1e-11)).unwrap();
        let with_threads = |threads| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let (series, sol, tokens) = run(&s, ModelKind::Group);
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let r2: Vec<f64> = series.r2.iter().flat_map(|z| [z.re, z.im]).collect();
                (
                    bits(&r2),
                    bits(&series.nematic),
                    bits(&sol.final_state),
                    bits(&tokens),
                )
            })
        };
        assert_eq!(with_threads(1), with_threads(3), "d = {d}");
    }
}

#[test]
fn group_needs_linear_attention() {
    let text = lsa(3, &random_heads(1, 1), 10, 1.0, 1e-9, 1e-11)
        .replace("kernel = \"lsa\"", "kernel = \"usa\"")
        + "[run]\nmodel = \"group\"\n";
    let err = scenario(&text).unwrap_err();
    assert!(err.contains("run.model") && err.contains("lsa"), "{err}");
}

#[test]
fn compare_runs_full_and_group_outside_the_plane() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    fs::write(&file, lsa(3, &random_heads(3, 2), 30, 2.0, 1e-11, 1e-13)).unwrap();
    let out = dir.path().join("out");
    Command::cargo_bin("tokdyn")
        .unwrap()
        .arg("compare")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let csv = fs::read_to_string(out.join("compare.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "t,full_re,full_im,phase_re,phase_im,ws_re,ws_im,oa_re,oa_im,group_re,group_im"
    );
    // phase, ws and oa did not run: their columns are empty.
    assert!(lines.next().unwrap().contains(",,,,,,"));
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let c = &summary["compare"];
    assert!(c["group_vs_full"].as_f64().unwrap() < 1e-8, "{c}");
    assert!(c["ws_vs_full"].is_null());
    assert!(c["seconds"]["group"].as_f64().unwrap() >= 0.0);
    assert_eq!(c["unknowns"]["group"].as_u64(), Some(9));
}

#[test]
fn token_pieces_are_the_tokens_and_feed_the_snapshots_alike() {
    use tokdyn::observe::{order_parameters, RunInfo, Sample};
    use tokdyn::plot::TokenSnapshots;
    // n = 150001: two pieces in d = 2 and 3; the snapshot and kymograph strides (76) do not
    // divide the piece boundaries.
    let n = 150_001;
    for d in [2, 3] {
        let s = scenario(&lsa(d, &random_heads(1, 7), n, 1.0, 1e-9, 1e-11)).unwrap();
        let sim = simulation::build(&s, ModelKind::Group).unwrap();
        // Some Phi away from the identity.
        let phi: Vec<f64> = (0..d * d)
            .map(|i| (i as f64 * 0.77).sin() + if i % (d + 1) == 0 { 1.5 } else { 0.0 })
            .collect();
        let whole = sim.dynamics.tokens(&phi).unwrap().to_vec();
        let (mut pieces, mut firsts) = (Vec::new(), Vec::new());
        let mut collect = |first: usize, rows: &[f64]| {
            firsts.push(first);
            pieces.extend_from_slice(rows);
            Ok(())
        };
        sim.dynamics
            .token_pieces(&phi, &mut collect)
            .unwrap()
            .unwrap();
        assert!(firsts.len() > 1, "d = {d}: one piece only");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&pieces), bits(&whole), "d = {d}");

        // The one-pass order parameters against those of the tokens themselves.
        let (fast, slow) = (
            sim.dynamics.order_parameters(&phi),
            order_parameters(&whole, d),
        );
        assert!((fast.r2 - slow.r2).norm() < 1e-13, "d = {d}");
        assert!(
            (fast.r1.unwrap() - slow.r1.unwrap()).abs() < 1e-13,
            "d = {d}"
        );
        assert!((fast.nematic - slow.nematic).abs() < 1e-13, "d = {d}");

        // Snapshots fed whole and in pieces keep the same tokens and angle histograms.
        let info = RunInfo {
            samples: 3,
            t_end: 2.0,
        };
        let (mut a, mut b) = (
            TokenSnapshots::new(3, n, d, 3),
            TokenSnapshots::new(3, n, d, 3),
        );
        a.start(&info).unwrap();
        b.start(&info).unwrap();
        for index in 0..3 {
            let sample = |tokens| Sample {
                index,
                t: index as f64,
                state: &phi,
                order: &fast,
                tokens,
            };
            a.sample(&sample(Some(&whole))).unwrap();
            let mut feed = |first: usize, rows: &[f64]| b.sample_tokens(index, first, rows);
            sim.dynamics.token_pieces(&phi, &mut feed).unwrap().unwrap();
            b.sample(&sample(None)).unwrap();
        }
        assert_eq!(a.candidates(), b.candidates(), "d = {d}");
        assert!(!a.candidates().is_empty());
        assert_eq!(
            a.history().histograms(),
            b.history().histograms(),
            "d = {d}"
        );
    }
}

#[test]
fn a_group_run_reports_where_its_time_went() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    let text = lsa(
        2,
        "A = \"identity\"\nV = [[1.0, 0.3], [-0.3, 0.5]]",
        400,
        5.0,
        1e-9,
        1e-11,
    ) + "[run]\nmodel = \"group\"\n";
    fs::write(&file, text).unwrap();
    let out = dir.path().join("out");
    Command::cargo_bin("tokdyn")
        .unwrap()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let timings = summary["timings"].as_object().expect("timings");
    let keys: Vec<&str> = timings.keys().map(String::as_str).collect();
    assert_eq!(keys, ["flow", "observers", "pictures", "writing"]);
    for (key, v) in timings {
        let v = v.as_f64().unwrap_or(f64::NAN);
        assert!(v.is_finite() && v >= 0.0, "{key}: {v}");
    }
    // The integration's wall time is the flow's and the observers' (and a run whose label
    // needs an exponent adds its tangent flow to the flow).
    let wall = summary["wall_seconds"].as_f64().unwrap();
    let flow = timings["flow"].as_f64().unwrap();
    let observers = timings["observers"].as_f64().unwrap();
    assert!(flow > 0.0, "the flow of a group run takes time");
    assert!(
        observers > 0.0 && observers <= wall,
        "{observers} of {wall}"
    );
    assert!(
        flow + observers >= wall * 0.999,
        "{flow} + {observers} < {wall}"
    );
    assert!(timings["pictures"].as_f64().unwrap() > 0.0);
}

/// Start tokens for `lsa` scenarios given by file: uniform angles, or three tight clusters.
fn plane_tokens(n: usize, clustered: bool, seed: u64) -> Vec<f64> {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .flat_map(|k| {
            let t = if clustered {
                [0.4, 2.1, -1.7][k % 3] + 1e-3 * rng.random_range(-1.0..1.0)
            } else {
                rng.random_range(-3.2..3.2)
            };
            [f64::cos(t), f64::sin(t)]
        })
        .collect()
}

#[test]
fn tokens_made_on_demand_feed_the_observers_as_the_whole_tokens_do() {
    use tokdyn::integrate::Dynamics;
    use tokdyn::model::{Attention, Head, Kernel};
    use tokdyn::observe::cluster_series::ClusterSeries;
    use tokdyn::observe::clusters::ClusterRule;
    use tokdyn::observe::{RunInfo, Sample};
    use tokdyn::plot::TokenSnapshots;
    use tokdyn::reduced::GroupFlow;
    let n = 40_001;
    let head = Head {
        a: nalgebra::DMatrix::identity(2, 2),
        v: nalgebra::DMatrix::identity(2, 2),
    };
    // Phi column-major: the identity, a rotation and shear, a squeeze (kappa 400), a near
    // collapse (kappa 1e8: the column is counted along the start order).
    let maps: [[f64; 4]; 4] = [
        [1.0, 0.0, 0.0, 1.0],
        [0.8, -0.9, 0.7, 1.1],
        [20.0, 0.3, -0.1, 0.05],
        [1e4, 0.0, 0.0, 1e-4],
    ];
    for clustered in [false, true] {
        let x = plane_tokens(n, clustered, 3);
        let attention = Attention::new(Kernel::Lsa, 1.0, vec![head.clone()]);
        let flow = GroupFlow::new(attention, x.into()).unwrap();
        let info = RunInfo {
            samples: maps.len(),
            t_end: 3.0,
        };
        let (mut a, mut b) = (
            TokenSnapshots::new(maps.len(), n, 2, maps.len()),
            TokenSnapshots::new(maps.len(), n, 2, maps.len()),
        );
        let rule = ClusterRule::default();
        let (mut ca, mut cb) = (
            ClusterSeries::new(rule, 2, None),
            ClusterSeries::new(rule, 2, None),
        );
        a.start(&info).unwrap();
        b.start(&info).unwrap();
        let mut served = 0;
        for (index, phi) in maps.iter().enumerate() {
            let whole = flow.tokens_of(phi);
            let order = flow.order_parameters(phi);
            let sample = |tokens| Sample {
                index,
                t: index as f64,
                state: phi,
                order: &order,
                tokens,
            };
            // The reference: the whole tokens.
            a.sample(&sample(Some(&whole))).unwrap();
            ca.sample(&sample(Some(&whole))).unwrap();
            // On demand, the pieces only for an observer the source did not serve.
            let source = flow.token_source(phi).unwrap();
            for o in [&mut b as &mut dyn Observer, &mut cb] {
                if o.sample_source(index, &*source).unwrap() {
                    served += 1;
                } else {
                    let mut feed = |first: usize, rows: &[f64]| o.sample_tokens(index, first, rows);
                    flow.token_pieces(phi, &mut feed).unwrap().unwrap();
                }
                o.sample(&sample(None)).unwrap();
            }
        }
        let what = if clustered { "clustered" } else { "uniform" };
        assert_eq!(a.candidates(), b.candidates(), "{what}");
        assert_eq!(a.history().histograms(), b.history().histograms(), "{what}");
        assert_eq!(ca.rows(), cb.rows(), "{what}");
        assert_eq!(ca.summary(), cb.summary(), "{what}");
        // The kymograph from the sorted angles for the three first maps, the last (kappa 1e8)
        // by bisection along the start order (MATH §11.3); the clusters: uniform tokens by the
        // leading tokens' test (at least at the identity), clustered ones by the bisection for
        // all four (kappa 1e8 by the bound local to each arc).
        if clustered {
            assert_eq!(served, 8, "{what}");
        } else {
            assert!(served >= 4, "{what}: {served} served");
        }
    }
}
