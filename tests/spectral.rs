//! The spectral (Fourier–Bessel) kernel for `usa` and `sa` in d = 2 against the direct pairwise
//! sums: single fields, whole runs, the choice `auto` makes, the errors of `spectral`, and
//! thread-count independence.

use std::path::Path;

use assert_cmd::Command;
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use tokdyn::integrate::solve;
use tokdyn::model::spectral::{error_bound, Precision, SpectralField, BOUND_LIMIT};
use tokdyn::model::{Attention, Head, Kernel, KernelChoice, KernelMethod, SphereField};
use tokdyn::observe::{Observer, OrderSeries};
use tokdyn::scenario::Scenario;
use tokdyn::simulation;

fn gaussian_matrix(rng: &mut ChaCha8Rng) -> DMatrix<f64> {
    DMatrix::from_fn(2, 2, |_, _| StandardNormal.sample(rng))
}

/// A uniform angle (the direction of a Gaussian vector).
fn uniform_angle(rng: &mut ChaCha8Rng) -> f64 {
    let (x, y): (f64, f64) = (StandardNormal.sample(rng), StandardNormal.sample(rng));
    y.atan2(x)
}

/// Tokens on the unit circle: uniform angles, or two tight clusters (width 0.05) at random places.
fn tokens(n: usize, clustered: bool, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let centres = [uniform_angle(rng), uniform_angle(rng)];
    (0..n)
        .flat_map(|k| {
            let t = if clustered {
                let noise: f64 = StandardNormal.sample(rng);
                centres[k % 2] + 0.05 * noise
            } else {
                uniform_angle(rng)
            };
            [t.cos(), t.sin()]
        })
        .collect()
}

fn direct(att: &Attention, x: &[f64]) -> Vec<f64> {
    let n = x.len() / 2;
    let field = SphereField::with_kernel_method(att.clone(), n, KernelMethod::Direct).unwrap();
    assert_eq!(field.kernel_choice(), KernelChoice::Direct);
    let mut dx = vec![0.0; x.len()];
    field.eval(x, &mut dx);
    dx
}

fn spectral(att: &Attention, x: &[f64]) -> Vec<f64> {
    let field = SpectralField::new(att, x.len() / 2).unwrap();
    let mut dx = vec![0.0; x.len()];
    field.eval(x, &mut dx);
    dx
}

fn spectral_in(att: &Attention, x: &[f64], precision: Precision) -> Vec<f64> {
    let field = SpectralField::with_precision(att, x.len() / 2, precision).unwrap();
    let mut dx = vec![0.0; x.len()];
    field.eval(x, &mut dx);
    dx
}

/// The error measure of the accuracy tests: max_k |a_k - b_k| / max_k |b_k| over the tokens'
/// velocity vectors (b the direct field).
fn relative_error(a: &[f64], b: &[f64]) -> f64 {
    let norm = |v: &[f64]| v[0].hypot(v[1]);
    let diff = a
        .chunks(2)
        .zip(b.chunks(2))
        .map(|(p, q)| (p[0] - q[0]).hypot(p[1] - q[1]))
        .fold(0.0, f64::max);
    diff / b.chunks(2).map(norm).fold(0.0, f64::max)
}

#[test]
fn spectral_field_matches_the_direct_sums() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let n = 400;
    let mut worst: f64 = 0.0;
    let (mut in_double_doubles, mut doubles_would_fail) = (0, 0);
    for kernel in [Kernel::Usa, Kernel::Sa] {
        for heads in [1, 2] {
            for beta in [0.1, 1.0, 3.0, 8.0] {
                for clustered in [false, true] {
                    let att = Attention::new(
                        kernel,
                        beta,
                        (0..heads)
                            .map(|_| Head {
                                a: gaussian_matrix(&mut rng),
                                v: gaussian_matrix(&mut rng),
                            })
                            .collect(),
                    );
                    let x = tokens(n, clustered, &mut rng);
                    let want = direct(&att, &x);
                    let field = SpectralField::new(&att, n).unwrap();
                    let error = relative_error(&spectral(&att, &x), &want);
                    let bound = error_bound(&att).unwrap();
                    eprintln!(
                        "{kernel:?} heads {heads} beta {beta} clustered {clustered}: error {error:.2e}, bound {bound:.2e}, {:?}, M = {}",
                        field.precision(),
                        field.terms()
                    );
                    // Every case, whether or not `auto` would take the kernel (two cases here
                    // have bounds of 4e-12 and 2e-10, above BOUND_LIMIT).
                    assert!(
                        error < 1e-12,
                        "{kernel:?}, {heads} heads, beta {beta}, clustered {clustered}: {error:e} (bound {bound:e})"
                    );
                    if field.precision() == Precision::DoubleDouble {
                        in_double_doubles += 1;
                        let plain =
                            relative_error(&spectral_in(&att, &x, Precision::Double), &want);
                        if plain > 1e-12 {
                            doubles_would_fail += 1;
                        }
                    }
                    worst = worst.max(error);
                }
            }
        }
    }
    eprintln!("worst {worst:.2e}; {in_double_doubles} cases in double-doubles, {doubles_would_fail} of them above 1e-12 in doubles");
    // The double-double arithmetic is exercised, and needed: doubles fail some of these cases.
    assert!(in_double_doubles >= 12 && doubles_would_fail >= 3);
    // The comparison can fail: a kernel with a wrong sign somewhere is far off.
    let att = Attention::new(
        Kernel::Usa,
        1.0,
        vec![Head {
            a: gaussian_matrix(&mut rng),
            v: gaussian_matrix(&mut rng),
        }],
    );
    let mut flipped = att.clone();
    flipped.heads[0].a = flipped.heads[0].a.transpose();
    let x = tokens(n, false, &mut rng);
    assert!(relative_error(&spectral(&flipped, &x), &direct(&att, &x)) > 1e-3);
}

#[test]
fn the_bound_holds_token_by_token_where_the_kernel_runs() {
    // Where the kernel runs, each token's error relative to its own field (clustered tokens:
    // some fields are made of the smallest weights only) stays below the bound: in doubles at
    // beta (|a| + |b|) = 3 (`auto` takes it), in double-doubles at 20 (`spectral` accepts it).
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for (kernel, target, method, precision) in [
        (Kernel::Usa, 3.0, KernelMethod::Auto, Precision::Double),
        (Kernel::Sa, 3.0, KernelMethod::Auto, Precision::Double),
        (
            Kernel::Usa,
            20.0,
            KernelMethod::Spectral,
            Precision::DoubleDouble,
        ),
        (
            Kernel::Sa,
            20.0,
            KernelMethod::Spectral,
            Precision::DoubleDouble,
        ),
    ] {
        for _ in 0..6 {
            let mut a = gaussian_matrix(&mut rng);
            // Scale A so that beta (|a| + |b|) is at the largest `auto` accepts.
            let att = Attention::new(
                kernel,
                1.0,
                vec![Head {
                    a: a.clone(),
                    v: gaussian_matrix(&mut rng),
                }],
            );
            let exponent = 0.5 * (error_bound(&att).unwrap() / f64::EPSILON).ln();
            a *= target / exponent;
            let att = Attention::new(
                kernel,
                1.0,
                vec![Head {
                    a,
                    ..att.heads[0].clone()
                }],
            );
            let bound = error_bound(&att).unwrap();
            assert!(bound <= BOUND_LIMIT);
            assert_eq!(
                SpectralField::new(&att, 300).unwrap().precision(),
                precision
            );
            let x = tokens(300, true, &mut rng);
            let field = SphereField::with_kernel_method(att.clone(), 300, method).unwrap();
            assert!(matches!(
                field.kernel_choice(),
                KernelChoice::Spectral { .. }
            ));
            let mut got = vec![0.0; x.len()];
            field.eval(&x, &mut got);
            let want = direct(&att, &x);
            let head = &att.heads[0];
            let v_norm = head.v.norm();
            for ((g, w), xk) in got.chunks(2).zip(want.chunks(2)).zip(x.chunks(2)) {
                let error = (g[0] - w[0]).hypot(g[1] - w[1]);
                // The token's scale before projection: |V| times its mean weight (usa) or |V|
                // (sa, whose weights sum to 1).
                let mean_weight = x
                    .chunks(2)
                    .map(|xj| {
                        let ax = &head.a * nalgebra::Vector2::new(xj[0], xj[1]);
                        (xk[0] * ax[0] + xk[1] * ax[1]).exp()
                    })
                    .sum::<f64>()
                    / 300.0;
                let scale = if kernel == Kernel::Usa {
                    v_norm * mean_weight
                } else {
                    v_norm
                };
                assert!(
                    error <= 10.0 * bound * scale,
                    "{kernel:?}: {error:e} vs scale {scale:e}, bound {bound:e}"
                );
            }
        }
    }
}

#[test]
fn auto_picks_spectral_where_it_holds_and_falls_back_where_it_fails() {
    let head = |beta_scale: f64| Head {
        a: DMatrix::identity(2, 2) * beta_scale,
        v: DMatrix::from_row_slice(2, 2, &[0.2, 1.0, -1.0, -0.2]),
    };
    for kernel in [Kernel::Usa, Kernel::Sa] {
        let att = Attention::new(kernel, 1.0, vec![head(1.0)]);
        let field = SphereField::new(att.clone(), 1000);
        let KernelChoice::Spectral { terms } = field.kernel_choice() else {
            panic!("auto should take the spectral kernel at beta = 1, A = I, n = 1000");
        };
        assert!((10..=30).contains(&terms), "{terms}");
        // Few tokens: direct.
        assert_eq!(
            SphereField::new(att.clone(), 10).kernel_choice(),
            KernelChoice::Direct
        );
        // beta = 40: the bound eps e^80 is hopeless; auto falls back, spectral is refused.
        let hot = Attention::new(kernel, 40.0, vec![head(1.0)]);
        assert!(error_bound(&hot).unwrap() > 1.0);
        let auto = SphereField::with_kernel_method(hot.clone(), 1000, KernelMethod::Auto).unwrap();
        assert_eq!(auto.kernel_choice(), KernelChoice::Direct);
        let Err(message) = SphereField::with_kernel_method(hot, 1000, KernelMethod::Spectral)
        else {
            panic!("spectral at beta = 40 must be refused");
        };
        assert!(
            message.contains("bound") && message.contains("1e-13"),
            "{message}"
        );
        // LSA and d = 3 never take it.
        let lsa = Attention::new(Kernel::Lsa, 1.0, vec![head(1.0)]);
        assert_eq!(
            SphereField::new(lsa.clone(), 1000).kernel_choice(),
            KernelChoice::Direct
        );
        assert!(SphereField::with_kernel_method(lsa, 1000, KernelMethod::Spectral).is_err());
    }
}

#[test]
fn spectral_field_is_the_same_for_any_thread_count() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let n = 10_000; // several chunks of tokens
                    // beta 0.7: doubles; beta 6: double-doubles.
    for (kernel, beta) in [
        (Kernel::Usa, 0.7),
        (Kernel::Sa, 0.7),
        (Kernel::Usa, 6.0),
        (Kernel::Sa, 6.0),
    ] {
        let att = Attention::new(
            kernel,
            beta,
            (0..2)
                .map(|_| Head {
                    a: gaussian_matrix(&mut rng),
                    v: gaussian_matrix(&mut rng),
                })
                .collect(),
        );
        let x = tokens(n, false, &mut rng);
        let field = SpectralField::new(&att, n).unwrap();
        let eval_with = |threads| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut dx = vec![0.0; 2 * n];
            pool.install(|| field.eval(&x, &mut dx));
            dx
        };
        let one = eval_with(1);
        assert_eq!(one, eval_with(2));
        assert_eq!(one, eval_with(5));
    }
}

fn scenario(kernel: &str, method: &str, beta: f64) -> Scenario {
    let text = format!(
        r#"
name = "spectral"
[model]
kernel = "{kernel}"
kernel_method = "{method}"
beta = {beta}
d = 2
A = [[0.6, -0.4], [0.3, 0.8]]
V = [[0.2, 1.0], [-1.0, -0.2]]
[tokens]
n = 300
seed = 4
[time]
t_end = 4.0
samples = 41
[solver]
rtol = 1e-11
atol = 1e-13
"#
    );
    Scenario::from_toml_str(&text, Path::new("spectral.toml"), Path::new("."), &[]).unwrap()
}

fn run(s: &Scenario) -> (OrderSeries, Vec<f64>) {
    let sim = simulation::build(s, s.run.model).unwrap();
    let mut series = OrderSeries::new();
    let solution = solve(
        &sim.problem(),
        sim.method,
        &mut [&mut series as &mut dyn Observer],
    )
    .unwrap();
    assert!(solution.status.is_success());
    (series, solution.final_state)
}

#[test]
fn whole_runs_with_auto_match_the_direct_kernel() {
    for kernel in ["usa", "sa"] {
        let auto = scenario(kernel, "auto", 1.0);
        assert!(matches!(
            simulation::kernel_choice(&auto, auto.run.model).unwrap(),
            KernelChoice::Spectral { .. }
        ));
        let (series_auto, final_auto) = run(&auto);
        let (series_direct, final_direct) = run(&scenario(kernel, "direct", 1.0));
        let token_diff = final_auto
            .iter()
            .zip(&final_direct)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        let r2_diff = series_auto
            .r2
            .iter()
            .zip(&series_direct.r2)
            .map(|(a, b)| (a - b).norm())
            .fold(0.0, f64::max);
        eprintln!("{kernel}: token diff {token_diff:.2e}, R2 diff {r2_diff:.2e}");
        assert!(
            token_diff < 1e-8 && r2_diff < 1e-8,
            "{kernel}: {token_diff:e}, {r2_diff:e}"
        );
        // ... and they did move: the comparison is not between two unchanged states.
        assert!((series_auto.r2[0] - series_auto.r2[40]).norm() > 1e-3);
    }
}

#[test]
fn cli_reports_the_kernel_and_refuses_spectral_where_its_bound_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    let text = r#"
name = "s"
[model]
kernel = "sa"
beta = 1.0
d = 2
A = "identity"
V = [[0.2, 1.0], [-1.0, -0.2]]
[tokens]
n = 200
[time]
t_end = 1.0
samples = 11
"#;
    std::fs::write(&file, text).unwrap();
    let summary = |method: &str| -> serde_json::Value {
        let out = dir.path().join(method);
        Command::cargo_bin("tokdyn")
            .unwrap()
            .arg("run")
            .arg(&file)
            .arg("--out")
            .arg(&out)
            .args(["--set", &format!("model.kernel_method={method}")])
            .assert()
            .success();
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
    };
    let auto = summary("auto");
    assert_eq!(auto["kernel_method"], "spectral");
    assert!(auto["spectral_terms"].as_u64().is_some_and(|m| m > 5));
    let direct = summary("direct");
    assert_eq!(direct["kernel_method"], "direct");
    assert!(direct["spectral_terms"].is_null());
    assert_eq!(auto["label"], direct["label"]);

    let out = Command::cargo_bin("tokdyn")
        .unwrap()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(dir.path().join("hot"))
        .args([
            "--set",
            "model.kernel_method=spectral",
            "--set",
            "model.beta=40",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error:") && err.contains("model.kernel_method") && err.contains("bound"),
        "{err}"
    );
    let out = Command::cargo_bin("tokdyn")
        .unwrap()
        .arg("run")
        .arg(&file)
        .args(["--set", "model.kernel_method=fast"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("kernel_method"));
}
