//! Tests of the whole scenario pipeline: loading, overrides, validation errors (each naming its
//! key and the file) and the initial tokens, checked against values computed independently here.

use std::path::{Path, PathBuf};

use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::*;

const BASE: &str = r#"
name = "case4-oscillation"
description = "a test"
expect = "oscillation"

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
n = 16
init = "uniform"
seed = 1

[time]
t_end = 20.0
samples = 201
"#;

fn file() -> PathBuf {
    PathBuf::from("scenarios/test.toml")
}

fn load(text: &str, sets: &[&str]) -> Result<Scenario, ScenarioError> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Scenario::from_toml_str(text, &file(), Path::new("scenarios"), &sets)
}

fn ok(text: &str) -> Scenario {
    load(text, &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// Replace `from` by `to` in BASE (which must contain `from`) and load.
fn with(from: &str, to: &str) -> Result<Scenario, ScenarioError> {
    assert!(BASE.contains(from), "BASE lacks {from:?}");
    load(&BASE.replacen(from, to, 1), &[])
}

/// The error for a modified BASE; checks it names the key and the file, and is one line.
fn error_at(from: &str, to: &str, key: &str) -> String {
    let e = with(from, to).expect_err(&format!("{from:?} -> {to:?} should fail"));
    let text = e.to_string();
    assert!(text.starts_with("scenarios/test.toml: "), "{text}");
    assert!(text.contains(key), "expected key {key} in: {text}");
    assert!(!text.contains('\n'), "{text:?}");
    text
}

fn token_scenario(init: &str, n: usize, d: usize, extra: &str) -> Scenario {
    let text = format!(
        r#"
name = "t"
[model]
kernel = "lsa"
beta = 1
d = {d}
A = "identity"
V = "identity"
[tokens]
n = {n}
init = "{init}"
{extra}
[time]
t_end = 1
samples = 2
"#
    );
    ok(&text)
}

fn r2(x: &[f64], d: usize) -> (f64, f64) {
    let n = (x.len() / d) as f64;
    let (mut re, mut im) = (0.0, 0.0);
    for row in x.chunks(d) {
        // (x1 + i x2)^2 = e^{2 i t} for a unit token in the plane.
        re += row[0] * row[0] - row[1] * row[1];
        im += 2.0 * row[0] * row[1];
    }
    (re / n, im / n)
}

fn assert_unit_rows(x: &[f64], d: usize) {
    for (k, row) in x.chunks(d).enumerate() {
        let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-14, "token {k} has norm {norm}");
    }
}

// ---------------------------------------------------------------- loading

#[test]
fn base_scenario_loads_with_defaults() {
    let s = ok(BASE);
    assert_eq!(s.name, "case4-oscillation");
    assert_eq!(s.description.as_deref(), Some("a test"));
    assert_eq!(s.expect, Some(crate::label::Label::Oscillation));
    assert_eq!(
        s.params,
        vec![("v11".to_string(), 0.2), ("v12".to_string(), 1.0)]
    );
    assert_eq!(s.model.kernel, KernelKind::Lsa);
    assert_eq!(s.model.d, 2);
    assert_eq!(s.model.heads.len(), 1);
    assert_eq!(s.model.heads[0].a, DMatrix::identity(2, 2));
    assert_eq!(
        s.model.heads[0].v,
        DMatrix::from_row_slice(2, 2, &[0.2, 1.0, -1.0, -0.2])
    );
    assert_eq!(
        (s.tokens.n, s.tokens.init, s.tokens.seed),
        (16, InitKind::Uniform, 1)
    );
    assert_eq!((s.tokens.r0, s.tokens.phi0, s.tokens.eps), (0.0, 0.0, 0.0));
    assert_eq!(s.tokens.path, None);
    assert_eq!(
        s.time,
        TimeSpec {
            t_end: 20.0,
            samples: 201,
            t_max: 20.0
        }
    );
    assert_eq!(
        s.solver,
        SolverSpec {
            method: MethodKind::Dop853,
            rtol: 1e-9,
            atol: 1e-11,
            dt: 0.01
        }
    );
    assert_eq!(s.run.model, ModelKind::Full);
    assert_eq!(
        s.output,
        OutputSpec {
            trajectory: false,
            animation: false,
            ..OutputSpec::default()
        }
    );
    assert_eq!(s.file, file());
}

#[test]
fn integers_are_accepted_for_floats() {
    let s = with("beta = 1.0", "beta = 2").unwrap();
    assert_eq!(s.model.beta, 2.0);
    let s = with("t_end = 20.0", "t_end = 5").unwrap();
    assert_eq!(s.time.t_end, 5.0);
    let s = with("v11 = 0.2", "v11 = 3").unwrap();
    assert_eq!(s.model.heads[0].v[(0, 0)], 3.0);
}

#[test]
fn negative_beta_is_allowed() {
    assert_eq!(with("beta = 1.0", "beta = -0.5").unwrap().model.beta, -0.5);
}

#[test]
fn heads_form() {
    let s = with(
        "A = \"identity\"\nV = [[\"v11\", \"v12\"], [\"-v12\", \"-v11\"]]",
        "heads = [{ A = \"identity\", V = \"zero\" }, { A = { block = [[0, 1], [-1, 0]] }, V = [[\"v11\", 0], [0, 1]] }]",
    )
    .unwrap();
    assert_eq!(s.model.heads.len(), 2);
    assert_eq!(s.model.heads[0].v, DMatrix::zeros(2, 2));
    assert_eq!(
        s.model.heads[1].a,
        DMatrix::from_row_slice(2, 2, &[0., 1., -1., 0.])
    );
    assert_eq!(
        s.model.heads[1].v,
        DMatrix::from_row_slice(2, 2, &[0.2, 0., 0., 1.])
    );
    assert!(s.resolved["model"].get("heads").is_some());
    assert!(s.resolved["model"].get("A").is_none());
}

#[test]
fn resolved_has_numbers_and_defaults_and_round_trips() {
    let s = ok(BASE);
    let r = &s.resolved;
    assert_eq!(r["model"]["V"].to_string(), "[[0.2, 1.0], [-1.0, -0.2]]");
    assert_eq!(r["model"]["A"].to_string(), "[[1.0, 0.0], [0.0, 1.0]]");
    assert_eq!(r["solver"]["method"].as_str(), Some("dop853"));
    assert_eq!(r["solver"]["rtol"].as_float(), Some(1e-9));
    assert_eq!(r["tokens"]["init"].as_str(), Some("uniform"));
    assert_eq!(r["tokens"]["eps"].as_float(), Some(0.0));
    assert_eq!(r["run"]["model"].as_str(), Some("full"));
    assert_eq!(r["output"]["trajectory"].as_bool(), Some(false));
    // The resolved table is itself a valid scenario describing the same run.
    let again = Scenario::from_table(r.clone(), &file(), Path::new("elsewhere")).unwrap();
    assert_eq!(again.model, s.model);
    assert_eq!(again.tokens, s.tokens);
    assert_eq!(again.time, s.time);
    assert_eq!(again.solver, s.solver);
    assert_eq!(again.resolved, s.resolved);
    // And it survives being written as TOML text.
    let text = toml::to_string(r).unwrap();
    let reparsed = Scenario::from_toml_str(&text, &file(), Path::new("."), &[]).unwrap();
    assert_eq!(reparsed.model, s.model);
}

#[test]
fn the_crates_own_scenarios_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        // Only scenario files (sweep files have no [model] table).
        if path.extension().is_some_and(|e| e == "toml") && text.contains("[model]") {
            if let Err(e) = Scenario::load(&path, &[]) {
                panic!("{e}");
            }
        }
    }
}

#[test]
fn load_reads_a_file_and_resolves_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    let scen = dir.path().join("s.toml");
    let text = BASE
        .replace("init = \"uniform\"", "init = \"file\"\npath = \"x0.csv\"")
        .replace("n = 16", "n = 2")
        .replace("A = \"identity\"", "A = { file = \"a.csv\" }");
    std::fs::write(&scen, text).unwrap();
    std::fs::write(dir.path().join("x0.csv"), "3,4\n0,-2\n").unwrap();
    std::fs::write(dir.path().join("a.csv"), "1,2\n3,4\n").unwrap();
    let s = Scenario::load(&scen, &[]).unwrap();
    assert_eq!(s.file, scen);
    assert_eq!(
        s.tokens.path.as_deref(),
        Some(dir.path().join("x0.csv").as_path())
    );
    assert_eq!(
        s.model.heads[0].a,
        DMatrix::from_row_slice(2, 2, &[1., 2., 3., 4.])
    );
    assert_eq!(s.initial_tokens().unwrap(), vec![0.6, 0.8, 0.0, -1.0]);
}

#[test]
fn missing_file_names_the_file_and_the_reason() {
    let e = Scenario::load(Path::new("/nonexistent/dir/s.toml"), &[]).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("/nonexistent/dir/s.toml: cannot read: "),
        "{text}"
    );
    assert!(text.contains("No such file"), "{text}");
}

#[test]
fn malformed_toml_names_the_file_line_and_column() {
    let text = BASE.replace("beta = 1.0", "beta = = 1.0");
    let e = load(&text, &[]).unwrap_err().to_string();
    assert!(
        e.starts_with("scenarios/test.toml: line 12, column 8: "),
        "{e}"
    );
    assert!(e.contains("invalid TOML"), "{e}");
    assert!(!e.contains('\n'), "{e:?}");
    let e = load("name = \"x\"\nname = \"y\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 2"), "{e}");
}

// ---------------------------------------------------------------- overrides

#[test]
fn set_overrides_apply_in_order() {
    let s = load(
        BASE,
        &[
            "params.v11=0.3",
            "model.beta=2",
            "tokens.n=4000",
            "tokens.init=splay",
            "solver.method=rk4",
            "solver.dt=0.5",
            "run.model=oa",
            "model.A=zero",
            "model.kernel=lsa",
            "output.animation=true",
            "params.v11=0.4",
            "name=other-name",
        ],
    )
    .unwrap();
    assert_eq!(
        s.model.heads[0].v,
        DMatrix::from_row_slice(2, 2, &[0.4, 1.0, -1.0, -0.4])
    );
    assert_eq!(s.model.beta, 2.0);
    assert_eq!(s.tokens.n, 4000);
    assert_eq!(s.tokens.init, InitKind::Splay);
    assert_eq!(s.solver.method, MethodKind::Rk4);
    assert_eq!(s.solver.dt, 0.5);
    assert_eq!(s.run.model, ModelKind::Oa);
    assert_eq!(s.model.heads[0].a, DMatrix::zeros(2, 2));
    assert!(s.output.animation);
    assert_eq!(s.name, "other-name");
    // The resolved table reflects the overrides.
    assert_eq!(s.resolved["params"]["v11"].as_float(), Some(0.4));
    assert_eq!(s.resolved["run"]["model"].as_str(), Some("oa"));
}

#[test]
fn set_errors_name_the_file_and_key() {
    let e = load(BASE, &["model.kernal=usa"]).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/test.toml: "), "{e}");
    assert!(
        e.contains("model.kernal") && e.contains("unknown key"),
        "{e}"
    );
    let e = load(BASE, &["foo=1"]).unwrap_err().to_string();
    assert!(e.contains("unknown key `foo`"), "{e}");
    let e = load(BASE, &["model.beta"]).unwrap_err().to_string();
    assert!(e.contains("KEY=VALUE"), "{e}");
    // A set value that is wrong is reported like the same value in the file.
    let e = load(BASE, &["model.kernel=softmax"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("model.kernel") && e.contains("lsa, usa, sa"),
        "{e}"
    );
    let e = load(BASE, &["tokens.n=0"]).unwrap_err().to_string();
    assert!(e.contains("tokens.n"), "{e}");
    let e = load(BASE, &["model.V=[[\"v13\", 0], [0, 1]]"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.V[0][0]: unknown param `v13`"), "{e}");
    let e = load(BASE, &["params.v11=abc"]).unwrap_err().to_string();
    assert!(e.contains("params.v11: expected a number"), "{e}");
}

#[test]
fn a_new_param_via_set_is_harmless() {
    let s = load(BASE, &["params.extra=1.5"]).unwrap();
    assert_eq!(s.params.last(), Some(&("extra".to_string(), 1.5)));
}

// ---------------------------------------------------------------- validation

#[test]
fn unknown_keys_anywhere_are_errors() {
    error_at(
        "description = \"a test\"",
        "descripton = \"a test\"",
        "descripton",
    );
    error_at(
        "kernel = \"lsa\"",
        "kernel = \"lsa\"\nkernal = 1",
        "model.kernal",
    );
    error_at("seed = 1", "seed = 1\nsed = 2", "tokens.sed");
    error_at("samples = 201", "samples = 201\nsample = 2", "time.sample");
    error_at(
        "[time]",
        "[solver]\nmethod = \"rk4\"\nstep = 1\n[time]",
        "solver.step",
    );
    error_at("[time]", "[run]\nmodle = \"oa\"\n[time]", "run.modle");
    error_at("[time]", "[output]\nmovie = true\n[time]", "output.movie");
    error_at("[time]", "[extras]\nx = 1\n[time]", "extras");
}

#[test]
fn missing_required_keys_are_named() {
    error_at("name = \"case4-oscillation\"", "", "name");
    error_at("kernel = \"lsa\"", "", "model.kernel");
    error_at("d = 2", "", "model.d");
    error_at("n = 16", "", "tokens.n");
    error_at("t_end = 20.0", "", "time.t_end");
    error_at("samples = 201", "", "time.samples");
}

#[test]
fn bad_words_are_errors_listing_the_valid_ones() {
    let e = error_at("kernel = \"lsa\"", "kernel = \"softmax\"", "model.kernel");
    assert!(e.contains("lsa, usa, sa"), "{e}");
    let e = error_at("init = \"uniform\"", "init = \"random\"", "tokens.init");
    assert!(e.contains("uniform, poisson, splay, file"), "{e}");
    let e = error_at(
        "[time]",
        "[solver]\nmethod = \"euler\"\n[time]",
        "solver.method",
    );
    assert!(e.contains("dop853, dopri5, rk4"), "{e}");
    let e = error_at("[time]", "[run]\nmodel = \"kuramoto\"\n[time]", "run.model");
    assert!(e.contains("full, phase, ws, oa"), "{e}");
}

#[test]
fn numbers_out_of_range_are_errors() {
    error_at("beta = 1.0", "beta = nan", "model.beta");
    error_at("beta = 1.0", "beta = inf", "model.beta");
    error_at("d = 2", "d = 1", "model.d");
    error_at("d = 2", "d = -3", "model.d");
    error_at("n = 16", "n = 0", "tokens.n");
    error_at("n = 16", "n = -1", "tokens.n");
    error_at("n = 16", "n = 1.5", "tokens.n");
    error_at("t_end = 20.0", "t_end = 0", "time.t_end");
    error_at("t_end = 20.0", "t_end = -1.0", "time.t_end");
    error_at("t_end = 20.0", "t_end = inf", "time.t_end");
    error_at("samples = 201", "samples = 1", "time.samples");
    error_at("[time]", "[solver]\nrtol = 0\n[time]", "solver.rtol");
    error_at("[time]", "[solver]\natol = -1e-3\n[time]", "solver.atol");
    error_at("[time]", "[solver]\ndt = 0.0\n[time]", "solver.dt");
    error_at("[time]", "[solver]\ndt = nan\n[time]", "solver.dt");
    error_at("seed = 1", "seed = 1\nr0 = 1.0", "tokens.r0");
    error_at("seed = 1", "seed = 1\nr0 = -0.1", "tokens.r0");
    error_at("seed = 1", "seed = 1\nphi0 = inf", "tokens.phi0");
    error_at("seed = 1", "seed = 1\neps = -0.1", "tokens.eps");
    error_at("seed = 1", "seed = -1", "tokens.seed");
    error_at("v11 = 0.2", "v11 = nan", "params.v11");
}

#[test]
fn n_times_d_must_not_overflow() {
    let e = error_at("n = 16", "n = 9223372036854775807", "tokens.n");
    assert!(e.contains("too large"), "{e}");
    let e = error_at("d = 2", "d = 9223372036854775807", "model.d");
    assert!(e.contains("too large"), "{e}");
    let e = error_at("d = 2", "d = 16385", "model.d");
    assert!(e.contains("at most 16384"), "{e}");
}

#[test]
fn names_labels_and_params_are_checked() {
    error_at("name = \"case4-oscillation\"", "name = \"Case 4\"", "name");
    error_at("name = \"case4-oscillation\"", "name = \"\"", "name");
    error_at("name = \"case4-oscillation\"", "name = \"../x\"", "name");
    let e = error_at(
        "expect = \"oscillation\"",
        "expect = \"oscilation\"",
        "expect",
    );
    assert!(e.contains("converged-clusters"), "{e}");
    error_at("v12 = 1.0", "v12 = 1.0\npi = 3", "params.pi");
    error_at("v12 = 1.0", "v12 = 1.0\n\"2x\" = 3", "params.2x");
    error_at("v12 = 1.0", "v12 = \"0.5\"", "params.v12");
}

#[test]
fn matrix_errors_name_the_key() {
    let e = error_at(
        "V = [[\"v11\", \"v12\"], [\"-v12\", \"-v11\"]]",
        "V = [[\"v11\", \"v12\"], [\"v13\", \"-v11\"]]",
        "model.V[1][0]",
    );
    assert_eq!(
        e,
        "scenarios/test.toml: model.V[1][0]: unknown param `v13` (params are: v11, v12)"
    );
    let e = error_at("d = 2", "d = 3", "model.V");
    assert!(e.contains("expected 3 rows (d = 3), found 2"), "{e}");
    error_at(
        "A = \"identity\"",
        "A = [[\"1/0\", 0], [0, 1]]",
        "model.A[0][0]",
    );
    error_at("A = \"identity\"", "A = \"eye\"", "model.A");
    error_at(
        "A = \"identity\"",
        "A = { file = \"nope.npy\" }",
        "model.A.file",
    );
}

#[test]
fn matrix_form_exclusivity() {
    error_at(
        "A = \"identity\"",
        "A = \"identity\"\nheads = []",
        "model.heads",
    );
    error_at("A = \"identity\"\n", "", "model.A");
    error_at(
        "V = [[\"v11\", \"v12\"], [\"-v12\", \"-v11\"]]",
        "",
        "model.V",
    );
    error_at(
        "A = \"identity\"\nV = [[\"v11\", \"v12\"], [\"-v12\", \"-v11\"]]",
        "heads = []",
        "model.heads",
    );
    error_at(
        "A = \"identity\"\nV = [[\"v11\", \"v12\"], [\"-v12\", \"-v11\"]]",
        "heads = [{ A = \"identity\", V = \"zero\" }, { A = \"identity\", V = \"eye\" }]",
        "model.heads[1].V",
    );
    error_at(
        "A = \"identity\"\nV = [[\"v11\", \"v12\"], [\"-v12\", \"-v11\"]]",
        "heads = [{ A = \"identity\" }]",
        "model.heads[0].V",
    );
}

#[test]
fn init_file_and_path_go_together() {
    let e = error_at("init = \"uniform\"", "init = \"file\"", "tokens.path");
    assert!(e.contains("missing"), "{e}");
    let e = error_at("seed = 1", "seed = 1\npath = \"x.csv\"", "tokens.path");
    assert!(e.contains("only used with init = \"file\""), "{e}");
    // poisson needs nothing else.
    let s = with("init = \"uniform\"", "init = \"poisson\"").unwrap();
    assert_eq!((s.tokens.r0, s.tokens.phi0), (0.0, 0.0));
}

#[test]
fn reductions_need_d2_and_lsa() {
    for model in ["phase", "ws", "oa"] {
        let s = load(BASE, &[&format!("run.model={model}")]).unwrap();
        assert_eq!(s.run.model.to_string(), model);
    }
    let e = load(
        BASE,
        &[
            "run.model=oa",
            "model.kernel=usa",
            "model.d=3",
            "model.A=identity",
            "model.V=identity",
        ],
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "scenarios/test.toml: run.model: the oa reduction needs d = 2 and kernel = \"lsa\" \
         (a pure second-harmonic field); this scenario has d = 3, kernel = \"usa\""
    );
    let e = load(BASE, &["run.model=ws", "model.kernel=sa"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("run.model") && e.contains("kernel = \"sa\""),
        "{e}"
    );
    // The full model has no such restriction.
    assert!(load(BASE, &["model.kernel=usa"]).is_ok());
}

// ---------------------------------------------------------------- initial tokens

#[test]
fn poisson_start_has_r2_equal_to_c() {
    let (r0, phi0) = (0.3, 0.7);
    let s = token_scenario("poisson", 64, 2, "r0 = 0.3\nphi0 = 0.7");
    let x = s.initial_tokens().unwrap();
    assert_eq!(x.len(), 64 * 2);
    assert_unit_rows(&x, 2);
    let (re, im) = r2(&x, 2);
    assert!((re - r0 * f64::cos(phi0)).abs() < 1e-12, "re {re}");
    assert!((im - r0 * f64::sin(phi0)).abs() < 1e-12, "im {im}");
}

#[test]
fn poisson_with_r0_zero_is_the_splay_up_to_angle_wrapping() {
    let x = token_scenario("poisson", 10, 2, "")
        .initial_tokens()
        .unwrap();
    let y = token_scenario("splay", 10, 2, "").initial_tokens().unwrap();
    // Same doubled angles: (x1 + i x2)^2 agree.
    for (a, b) in x.chunks(2).zip(y.chunks(2)) {
        assert!((a[0] * a[0] - a[1] * a[1] - (b[0] * b[0] - b[1] * b[1])).abs() < 1e-12);
        assert!((a[0] * a[1] - b[0] * b[1]).abs() < 1e-12);
    }
}

#[test]
fn splay_start_is_at_pi_k_over_n_with_zero_r2() {
    let n = 12;
    let x = token_scenario("splay", n, 2, "").initial_tokens().unwrap();
    for k in 0..n {
        let t = std::f64::consts::PI * k as f64 / n as f64;
        assert!((x[2 * k] - t.cos()).abs() < 1e-15, "token {k}");
        assert!((x[2 * k + 1] - t.sin()).abs() < 1e-15, "token {k}");
    }
    let (re, im) = r2(&x, 2);
    assert!(re.abs() < 1e-12 && im.abs() < 1e-12, "R2 = {re} + {im}i");
}

#[test]
fn splay_and_poisson_lie_in_the_first_plane_for_d_above_2() {
    for init in ["splay", "poisson"] {
        let x = token_scenario(init, 8, 4, "r0 = 0.5")
            .initial_tokens()
            .unwrap();
        assert_unit_rows(&x, 4);
        for row in x.chunks(4) {
            assert_eq!((row[2], row[3]), (0.0, 0.0));
        }
    }
}

#[test]
fn uniform_tokens_are_unit_and_isotropic() {
    let (n, d) = (20000, 3);
    let x = token_scenario("uniform", n, d, "seed = 5")
        .initial_tokens()
        .unwrap();
    assert_eq!(x.len(), n * d);
    assert_unit_rows(&x, d);
    for i in 0..d {
        let mean = x.iter().skip(i).step_by(d).sum::<f64>() / n as f64;
        let second = x.iter().skip(i).step_by(d).map(|v| v * v).sum::<f64>() / n as f64;
        // Each coordinate has variance 1/d: the mean's standard error is sqrt(1/(d n)) ~ 0.004.
        assert!(mean.abs() < 0.025, "coordinate {i}: mean {mean}");
        assert!(
            (second - 1.0 / d as f64).abs() < 0.02,
            "coordinate {i}: {second}"
        );
    }
}

#[test]
fn uniform_tokens_follow_the_documented_draws() {
    let (n, d) = (5, 3);
    let x = token_scenario("uniform", n, d, "seed = 9")
        .initial_tokens()
        .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for k in 0..n {
        let z: Vec<f64> = (0..d).map(|_| StandardNormal.sample(&mut rng)).collect();
        let norm = z.iter().map(|v| v * v).sum::<f64>().sqrt();
        for i in 0..d {
            assert!((x[k * d + i] - z[i] / norm).abs() < 1e-15);
        }
    }
}

#[test]
fn seeds_decide_the_tokens() {
    let a = token_scenario("uniform", 6, 3, "seed = 1")
        .initial_tokens()
        .unwrap();
    let b = token_scenario("uniform", 6, 3, "seed = 1")
        .initial_tokens()
        .unwrap();
    let c = token_scenario("uniform", 6, 3, "seed = 2")
        .initial_tokens()
        .unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    let a = token_scenario("splay", 6, 2, "seed = 1\neps = 0.1")
        .initial_tokens()
        .unwrap();
    let b = token_scenario("splay", 6, 2, "seed = 1\neps = 0.1")
        .initial_tokens()
        .unwrap();
    let c = token_scenario("splay", 6, 2, "seed = 2\neps = 0.1")
        .initial_tokens()
        .unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn eps_perturbs_angles_in_d2_exactly_as_documented() {
    let (n, eps) = (7, 0.05);
    let x = token_scenario("splay", n, 2, "seed = 4\neps = 0.05")
        .initial_tokens()
        .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    for k in 0..n {
        let z: f64 = StandardNormal.sample(&mut rng);
        let t = std::f64::consts::PI * k as f64 / n as f64 + eps * z;
        assert!((x[2 * k] - t.cos()).abs() < 1e-15);
        assert!((x[2 * k + 1] - t.sin()).abs() < 1e-15);
    }
}

#[test]
fn eps_moves_tokens_by_about_eps() {
    let eps = 1e-3;
    for d in [2usize, 3, 5] {
        let n = 400;
        let base = token_scenario("poisson", n, d, "r0 = 0.4")
            .initial_tokens()
            .unwrap();
        let moved = token_scenario("poisson", n, d, "r0 = 0.4\neps = 0.001\nseed = 3")
            .initial_tokens()
            .unwrap();
        assert_unit_rows(&moved, d);
        let mean_sq = base
            .chunks(d)
            .zip(moved.chunks(d))
            .map(|(a, b)| a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum::<f64>())
            .sum::<f64>()
            / n as f64;
        // The tangential part of the noise has d - 1 components of variance eps^2.
        let expected = eps * ((d - 1) as f64).sqrt();
        let rms = mean_sq.sqrt();
        assert!(
            rms > 0.8 * expected && rms < 1.2 * expected,
            "d = {d}: rms displacement {rms}, expected about {expected}"
        );
        if d > 2 {
            assert!(
                moved.chunks(d).any(|row| row[2] != 0.0),
                "tokens should leave the plane"
            );
        }
    }
}

#[test]
fn file_tokens_are_read_and_normalised() {
    let dir = tempfile::tempdir().unwrap();
    let scen = dir.path().join("s.toml");
    let write = |extra: &str| {
        let text = format!(
            "name = \"f\"\n[model]\nkernel = \"lsa\"\nbeta = 1\nd = 3\nA = \"identity\"\nV = \"identity\"\n\
             [tokens]\nn = 2\ninit = \"file\"\n{extra}\n[time]\nt_end = 1\nsamples = 2\n"
        );
        std::fs::write(&scen, text).unwrap();
        Scenario::load(&scen, &[]).unwrap()
    };
    super::numfile::tests::write_npy(
        &dir.path().join("x.npy"),
        &[2, 3],
        &[2., 0., 0., 1., 2., 2.],
    );
    let s = write("path = \"x.npy\"");
    let x = s.initial_tokens().unwrap();
    let want = [1., 0., 0., 1. / 3., 2. / 3., 2. / 3.];
    for (a, b) in x.iter().zip(want) {
        assert!((a - b).abs() < 1e-15);
    }

    // Wrong shape, zero row, non-finite value, bad extension: errors at tokens.path naming the file.
    std::fs::write(dir.path().join("short.csv"), "1,0,0\n").unwrap();
    std::fs::write(dir.path().join("zero.csv"), "1,0,0\n0,0,0\n").unwrap();
    std::fs::write(dir.path().join("nan.csv"), "1,0,0\n0,nan,0\n").unwrap();
    std::fs::write(dir.path().join("x.txt"), "1,0,0\n0,1,0\n").unwrap();
    for (name, what) in [
        ("short.csv", "found 1 rows"),
        ("zero.csv", "zero length"),
        ("nan.csv", "not finite"),
        ("x.txt", ".npy or .csv"),
        ("absent.csv", "cannot read"),
    ] {
        let s = write(&format!("path = \"{name}\""));
        let e = s.initial_tokens().unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: tokens.path: ", scen.display())),
            "{e}"
        );
        assert!(e.contains(name) && e.contains(what), "{name}: {e}");
    }
    let s = write("path = \"x.npy\"");
    let mut s3 = s.clone();
    s3.tokens.n = 3;
    let e = s3.initial_tokens().unwrap_err().to_string();
    assert!(e.contains("expected shape (3, 3), found (2, 3)"), "{e}");
}

#[test]
fn hand_built_scenarios_do_not_panic() {
    let mut s = token_scenario("splay", 3, 2, "");
    s.model.d = 0;
    assert!(s.initial_tokens().is_err());
    s.model.d = 1;
    assert!(s.initial_tokens().is_err());
    let mut s = token_scenario("uniform", 3, 2, "");
    s.tokens.n = usize::MAX;
    assert!(s.initial_tokens().is_err());
}
