//! Lyapunov exponents (docs/MATH.md §"Lyapunov exponents"): the field's derivative against
//! finite differences of the field, the Benettin driver against a linear flow's eigenvalues, at
//! a fixed point against the eigenvalues of a Jacobian made by finite differences, the sum of
//! all exponents against the time average of the divergence, the chaotic scenario with two
//! tolerances, and the `[lyapunov]` section's contract.

use std::borrow::Cow;

use nalgebra::DMatrix;
use tokdyn::integrate::lyapunov::spectrum;
use tokdyn::integrate::{Dynamics, Linearization, LyapunovSettings};
use tokdyn::model::{Attention, FactoredHead, Head, Kernel, Mask, Normalization, SphereField};
use tokdyn::observe::OrderParameters;

/// A reproducible matrix with entries uniform in [-1, 1).
fn matrix(rows: usize, cols: usize, seed: u64) -> DMatrix<f64> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    DMatrix::from_fn(rows, cols, |_, _| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    })
}

fn unit_tokens(n: usize, d: usize, seed: u64) -> Vec<f64> {
    let m = matrix(n, d, seed);
    let mut x = Vec::with_capacity(n * d);
    for k in 0..n {
        let row: Vec<f64> = (0..d).map(|c| m[(k, c)]).collect();
        let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        x.extend(row.iter().map(|v| v / r));
    }
    x
}

/// The tangent part of `v` at the unit tokens `x`.
fn tangent(x: &[f64], v: &mut [f64], d: usize) {
    for (vk, xk) in v.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
        let c: f64 = vk.iter().zip(xk).map(|(a, b)| a * b).sum();
        vk.iter_mut().zip(xk).for_each(|(a, b)| *a -= c * b);
    }
}

/// DF(x) v by central differences of the production field (an independent code path).
fn difference_quotient(field: &SphereField, x: &[f64], v: &[f64], h: f64) -> Vec<f64> {
    let plus: Vec<f64> = x.iter().zip(v).map(|(a, b)| a + h * b).collect();
    let minus: Vec<f64> = x.iter().zip(v).map(|(a, b)| a - h * b).collect();
    let (mut fp, mut fm) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    field.eval(&plus, &mut fp);
    field.eval(&minus, &mut fm);
    fp.iter()
        .zip(&fm)
        .map(|(a, b)| (a - b) / (2.0 * h))
        .collect()
}

fn attention(kernel: Kernel, d: usize, factored: bool, seed: u64) -> Attention {
    let heads = vec![
        Head {
            a: matrix(d, d, seed),
            v: matrix(d, d, seed + 1),
        },
        Head {
            a: matrix(d, d, seed + 2),
            v: matrix(d, d, seed + 3),
        },
    ];
    let att = Attention::new(kernel, 1.3, heads);
    if !factored {
        return att;
    }
    let dh = 2;
    att.with_factored(vec![FactoredHead {
        q: matrix(d, dh, seed + 4),
        k: matrix(d, dh, seed + 5),
        v: matrix(d, dh, seed + 6),
        o: matrix(dh, d, seed + 7),
    }])
}

#[test]
fn the_derivative_matches_finite_differences_for_every_kernel_head_mask_and_norm() {
    let (n, d) = (7, 3);
    for kernel in [Kernel::Lsa, Kernel::Usa, Kernel::Sa] {
        for factored in [false, true] {
            for mask in [Mask::None, Mask::Causal] {
                for norm in [Normalization::Post, Normalization::Pre] {
                    let att = attention(kernel, d, factored, 3)
                        .with_mask(mask)
                        .with_normalization(norm);
                    let field = SphereField::new(att, n);
                    let mut x = unit_tokens(n, d, 17);
                    if norm == Normalization::Pre {
                        // A stream off the sphere: the derivative sees 1 / |x_k|.
                        x.iter_mut()
                            .enumerate()
                            .for_each(|(i, v)| *v *= 1.0 + 0.1 * (i % 5) as f64);
                    }
                    let mut vs = Vec::new();
                    for s in 0..2 {
                        let mut v = unit_tokens(n, d, 40 + s);
                        if norm == Normalization::Post {
                            tangent(&x, &mut v, d);
                        }
                        vs.extend(v);
                    }
                    let lin = field
                        .linearization()
                        .expect("the full model has a derivative");
                    let (mut dy, mut dv) = (vec![0.0; n * d], vec![0.0; 2 * n * d]);
                    lin.field_and_derivatives(&x, &vs, &mut dy, &mut dv);
                    let mut f = vec![0.0; n * d];
                    field.eval(&x, &mut f);
                    let field_error = dy
                        .iter()
                        .zip(&f)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0, f64::max);
                    assert!(
                        field_error < 1e-12,
                        "{kernel:?} F differs by {field_error:e}"
                    );
                    for s in 0..2 {
                        let v = &vs[s * n * d..(s + 1) * n * d];
                        let expected = difference_quotient(&field, &x, v, 1e-5);
                        let got = &dv[s * n * d..(s + 1) * n * d];
                        let scale = expected.iter().fold(1e-3, |m: f64, v| m.max(v.abs()));
                        let err = got
                            .iter()
                            .zip(&expected)
                            .map(|(a, b)| (a - b).abs())
                            .fold(0.0, f64::max);
                        assert!(
                            err < 1e-7 * scale,
                            "{kernel:?} factored {factored} {mask:?} {norm:?}: DF v off by {err:e} (scale {scale:e})"
                        );
                    }
                }
            }
        }
    }
}

/// The largest entrywise difference of `a` and `b`.
fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max)
}

/// `lsa` without a mask goes by blocks of 256 tokens through the moments, on the thread pool from
/// 8 blocks: with 2100 tokens (9 blocks, a tail of 52) and two vectors at once, the field and each
/// derivative against the production field and its central differences, formed and factored.
#[test]
fn the_lsa_derivative_by_blocks_of_tokens_matches_finite_differences() {
    let (n, d) = (2100, 3);
    for factored in [false, true] {
        let field = SphereField::new(attention(Kernel::Lsa, d, factored, 9), n);
        let x = unit_tokens(n, d, 29);
        let mut vectors = Vec::new();
        for seed in [71, 73] {
            let mut v = unit_tokens(n, d, seed);
            tangent(&x, &mut v, d);
            vectors.extend(v);
        }
        let lin = field.linearization().expect("a derivative");
        let (mut dy, mut dv) = (vec![0.0; n * d], vec![0.0; 2 * n * d]);
        lin.field_and_derivatives(&x, &vectors, &mut dy, &mut dv);
        let mut f = vec![0.0; n * d];
        field.eval(&x, &mut f);
        assert!(max_diff(&dy, &f) < 1e-12, "factored {factored}: F differs");
        for (v, dvi) in vectors.chunks_exact(n * d).zip(dv.chunks_exact(n * d)) {
            let expected = difference_quotient(&field, &x, v, 1e-5);
            let scale = expected.iter().fold(1e-3, |m: f64, e| m.max(e.abs()));
            let err = max_diff(dvi, &expected);
            assert!(
                err < 1e-7 * scale,
                "factored {factored}: DF v off by {err:e} (scale {scale:e})"
            );
        }
    }
}

/// More tokens than one chunk of the pair sums (256) and a tail: the field and its derivative
/// against the production field and its central differences, every kernel, with and without
/// the causal mask, formed and factored heads.
#[test]
fn the_derivative_over_several_chunks_of_tokens_matches_finite_differences() {
    let (n, d) = (600, 3);
    for kernel in [Kernel::Lsa, Kernel::Usa, Kernel::Sa] {
        for (mask, factored) in [(Mask::None, true), (Mask::Causal, false)] {
            let att = attention(kernel, d, factored, 5).with_mask(mask);
            let field = SphereField::new(att, n);
            let x = unit_tokens(n, d, 23);
            let mut v = unit_tokens(n, d, 61);
            tangent(&x, &mut v, d);
            let lin = field.linearization().expect("a derivative");
            let (mut dy, mut dv) = (vec![0.0; n * d], vec![0.0; n * d]);
            lin.field_and_derivatives(&x, &v, &mut dy, &mut dv);
            let mut f = vec![0.0; n * d];
            field.eval(&x, &mut f);
            let what = format!("{kernel:?} {mask:?} factored {factored}");
            assert!(max_diff(&dy, &f) < 1e-12, "{what}: F differs");
            let expected = difference_quotient(&field, &x, &v, 1e-5);
            let scale = expected.iter().fold(1e-3, |m: f64, e| m.max(e.abs()));
            let err = max_diff(&dv, &expected);
            assert!(
                err < 1e-7 * scale,
                "{what}: DF v off by {err:e} (scale {scale:e})"
            );
        }
    }
}

/// y' = B y in R^4 with B = P diag(lambda) P^{-1}: its exponents are the lambda, sorted.
struct Linear {
    b: DMatrix<f64>,
}

impl Dynamics for Linear {
    fn dimension(&self) -> usize {
        self.b.nrows()
    }
    fn rhs(&self, y: &[f64], dy: &mut [f64]) {
        let out = &self.b * nalgebra::DVector::from_column_slice(y);
        dy.copy_from_slice(out.as_slice());
    }
    fn order_parameters(&self, _y: &[f64]) -> OrderParameters {
        OrderParameters::from_r2(num_complex::Complex64::new(0.0, 0.0))
    }
    fn tokens<'a>(&self, _y: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        None
    }
    fn linearization(&self) -> Option<&dyn Linearization> {
        Some(self)
    }
}

impl Linearization for Linear {
    fn tangent_dimension(&self) -> usize {
        self.b.nrows()
    }
    fn field_and_derivatives(&self, y: &[f64], v: &[f64], dy: &mut [f64], dv: &mut [f64]) {
        self.rhs(y, dy);
        let m = y.len();
        for (vi, dvi) in v.chunks_exact(m).zip(dv.chunks_exact_mut(m)) {
            self.rhs(vi, dvi);
        }
    }
}

#[test]
fn a_linear_flow_has_its_eigenvalues_as_exponents() {
    let lambdas = [0.3, -0.1, -0.5, -1.2];
    let p = matrix(4, 4, 9) + DMatrix::identity(4, 4) * 2.0;
    let b = &p
        * DMatrix::from_diagonal(&nalgebra::DVector::from_row_slice(&lambdas))
        * p.clone().try_inverse().unwrap();
    let flow = Linear { b };
    let settings = LyapunovSettings {
        exponents: 4,
        transient: 5.0,
        interval: 0.7,
    };
    let s = spectrum(
        &flow,
        &[1.0, 0.5, -0.2, 0.1],
        400.0,
        settings,
        (1e-10, 1e-12),
    )
    .unwrap();
    assert_eq!(s.exponents.len(), 4);
    for (got, want) in s.exponents.iter().zip(lambdas) {
        // The start's share of each direction decays like 1 / (t - transient).
        assert!(
            (got - want).abs() < 0.02,
            "{:?} vs {lambdas:?}",
            s.exponents
        );
    }
    assert_eq!(s.times.len(), s.estimates.len());
    assert!((s.t - 400.0).abs() < 1e-9);
    assert!((s.times[0] - 5.7).abs() < 1e-9, "{}", s.times[0]);
}

/// The tangent Jacobian of the full model at unit tokens `x` in an orthonormal basis of each
/// token's tangent plane, by central differences of the production field.
fn tangent_jacobian(field: &SphereField, x: &[f64], d: usize) -> DMatrix<f64> {
    let n = x.len() / d;
    let basis: Vec<Vec<f64>> = (0..n)
        .flat_map(|k| {
            tangent_basis(&x[k * d..(k + 1) * d])
                .into_iter()
                .map(move |b| (k, b))
        })
        .map(|(k, b)| {
            let mut v = vec![0.0; n * d];
            v[k * d..(k + 1) * d].copy_from_slice(&b);
            v
        })
        .collect();
    let m = basis.len();
    let mut j = DMatrix::zeros(m, m);
    for (col, v) in basis.iter().enumerate() {
        let dv = difference_quotient(field, x, v, 1e-6);
        for (row, u) in basis.iter().enumerate() {
            j[(row, col)] = u.iter().zip(&dv).map(|(a, b)| a * b).sum();
        }
    }
    j
}

/// d - 1 orthonormal vectors orthogonal to the unit vector `x` (Gram–Schmidt on e_1..e_d).
fn tangent_basis(x: &[f64]) -> Vec<Vec<f64>> {
    let d = x.len();
    let mut found: Vec<Vec<f64>> = vec![x.to_vec()];
    for c in 0..d {
        let mut e = vec![0.0; d];
        e[c] = 1.0;
        for f in &found {
            let p: f64 = e.iter().zip(f).map(|(a, b)| a * b).sum();
            e.iter_mut().zip(f).for_each(|(a, b)| *a -= p * b);
        }
        let r = e.iter().map(|a| a * a).sum::<f64>().sqrt();
        if r > 1e-6 && found.len() < d {
            found.push(e.iter().map(|a| a / r).collect());
        }
    }
    found.split_off(1)
}

#[test]
fn at_a_fixed_point_the_exponents_are_the_real_parts_of_the_jacobians_eigenvalues() {
    // Consensus of n tokens at e_3 is an equilibrium when V e_3 is along e_3.
    let (n, d) = (3, 3);
    for kernel in [Kernel::Usa, Kernel::Sa, Kernel::Lsa] {
        let mut v = matrix(d, d, 21);
        v[(0, 2)] = 0.0;
        v[(1, 2)] = 0.0;
        v[(2, 2)] = 0.8;
        let att = Attention::new(
            kernel,
            1.0,
            vec![Head {
                a: matrix(d, d, 22),
                v,
            }],
        );
        let field = SphereField::new(att, n);
        let x: Vec<f64> = (0..n).flat_map(|_| [0.0, 0.0, 1.0]).collect();
        let j = tangent_jacobian(&field, &x, d);
        let mut expected: Vec<f64> = j.complex_eigenvalues().iter().map(|z| z.re).collect();
        expected.sort_by(|a, b| b.total_cmp(a));
        let settings = LyapunovSettings {
            exponents: n * (d - 1),
            transient: 2.0,
            interval: 0.5,
        };
        let s = spectrum(&field, &x, 300.0, settings, (1e-11, 1e-13)).unwrap();
        for (got, want) in s.exponents.iter().zip(&expected) {
            // Jordan-free generic eigenvalues: the estimates converge like 1 / t.
            assert!(
                (got - want).abs() < 0.02 * (1.0 + want.abs()),
                "{kernel:?}: exponents {:?} vs real parts {expected:?}",
                s.exponents
            );
        }
    }
}

/// Records the state at every sample.
#[derive(Default)]
struct States {
    t: Vec<f64>,
    y: Vec<Vec<f64>>,
}

impl tokdyn::observe::Observer for States {
    fn sample(&mut self, s: &tokdyn::observe::Sample<'_>) -> std::io::Result<()> {
        self.t.push(s.t);
        self.y.push(s.state.to_vec());
        Ok(())
    }
}

#[test]
fn the_sum_of_all_exponents_is_the_time_average_of_the_divergence() {
    // Liouville: the volume of n (d - 1) tangent vectors grows at the trace of the tangent
    // Jacobian, so sum_i lambda_i = (1 / (t_end - t0)) int_{t0}^{t_end} div F dt exactly.
    let (n, d) = (3, 3);
    for (kernel, factored) in [(Kernel::Sa, false), (Kernel::Usa, true)] {
        let att = attention(kernel, d, factored, 31);
        let field = SphereField::new(att, n);
        let x0 = unit_tokens(n, d, 5);
        let (t0, t_end) = (2.0, 22.0);
        let settings = LyapunovSettings {
            exponents: n * (d - 1),
            transient: t0,
            interval: 0.5,
        };
        let tol = (1e-11, 1e-13);
        let s = spectrum(&field, &x0, t_end, settings, tol).unwrap();
        let total: f64 = s.exponents.iter().sum();
        let problem = tokdyn::integrate::Problem {
            dynamics: &field,
            initial_state: x0.clone(),
            t_end,
            samples: 2201,
        };
        let mut states = States::default();
        let method = tokdyn::integrate::Method::Dop853 {
            rtol: 1e-11,
            atol: 1e-13,
        };
        tokdyn::integrate::solve(&problem, method, &mut [&mut states]).unwrap();
        // Simpson's rule over [t0, t_end] (2000 intervals of 0.01).
        let first = states.t.iter().position(|t| *t >= t0 - 1e-9).unwrap();
        let traces: Vec<f64> = states.y[first..]
            .iter()
            .map(|y| tangent_jacobian(&field, y, d).trace())
            .collect();
        let h = (t_end - t0) / (traces.len() - 1) as f64;
        let simpson: f64 = traces
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let w = if i == 0 || i + 1 == traces.len() {
                    1.0
                } else if i % 2 == 1 {
                    4.0
                } else {
                    2.0
                };
                w * v
            })
            .sum::<f64>()
            * h
            / 3.0;
        let average = simpson / (t_end - t0);
        assert!(
            (total - average).abs() < 1e-5 * (1.0 + average.abs()),
            "{kernel:?}: sum of exponents {total} vs mean divergence {average}"
        );
    }
}

fn tokdyn() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("tokdyn").unwrap()
}

/// A small sa scenario in d = 3 with a `[lyapunov]` section of `lines`.
fn small_scenario(lines: &str) -> String {
    format!(
        r#"name = "ly"
[model]
kernel = "sa"
beta = 1.0
d = 3
A = [[0.3, -1.1, 0.4], [0.9, 0.2, -0.5], [-0.3, 0.7, 0.1]]
V = [[0.5, 0.8, -0.2], [-0.9, 0.1, 0.6], [0.3, -0.4, 0.2]]
[tokens]
n = 4
init = "uniform"
seed = 3
[time]
t_end = 40.0
samples = 401
[lyapunov]
{lines}
"#
    )
}

#[test]
fn bad_lyapunov_settings_are_one_error_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for (lines, key) in [
        ("exponents = 0", "lyapunov.exponents"),
        ("exponents = 9", "lyapunov.exponents"),
        ("transient = 40.0", "lyapunov.transient"),
        ("transient = -1.0", "lyapunov.transient"),
        ("interval = 0.0", "lyapunov.interval"),
        ("interval = -2.0", "lyapunov.interval"),
        ("interval = 1e-300", "lyapunov.interval"),
        ("steps = 3", "steps"),
    ] {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, small_scenario(lines)).unwrap();
        let out = dir.path().join("out");
        let assert = tokdyn()
            .arg("run")
            .arg(&path)
            .arg("--out")
            .arg(&out)
            .assert()
            .code(2);
        let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{lines}: {stderr}");
        assert!(
            stderr.starts_with("error:") && stderr.contains(key),
            "{lines}: {stderr}"
        );
        assert!(!out.exists(), "{lines}: nothing may be written");
    }
}

/// The bound on `lyapunov.exponents` is the tangent dimension: n (d - 1) for tokens on the
/// spheres (post-LN, nGPT), n d for a pre- or peri-LN stream; the error line states the one
/// that applies, and the bound itself is accepted.
#[test]
fn the_exponents_bound_is_the_tangent_dimension_of_the_normalisation() {
    let dir = tempfile::tempdir().unwrap();
    // n = 4, d = 3: n (d - 1) = 8, n d = 12.
    for (norm, bound, formula) in [
        ("post", 8, "n (d - 1) = 8"),
        ("ngpt", 8, "n (d - 1) = 8"),
        (
            "pre",
            12,
            "n d (a pre- or peri-LN stream is not on the spheres) = 12",
        ),
        (
            "peri",
            12,
            "n d (a pre- or peri-LN stream is not on the spheres) = 12",
        ),
    ] {
        let text = small_scenario(&format!("exponents = {}", bound + 1))
            .replace(
                "[model]\n",
                &format!("[model]\nnormalization = \"{norm}\"\n"),
            )
            .replace("t_end = 40.0", "t_end = 4.0")
            .replace("samples = 401", "samples = 41");
        let path = dir.path().join(format!("{norm}.toml"));
        std::fs::write(&path, &text).unwrap();
        let out = dir.path().join(format!("{norm}-refused"));
        let assert = tokdyn()
            .arg("run")
            .arg(&path)
            .arg("--out")
            .arg(&out)
            .assert()
            .code(2);
        let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{norm}: {stderr}");
        assert!(
            stderr.starts_with("error:")
                && stderr.contains("lyapunov.exponents")
                && stderr.contains(formula)
                && stderr.contains(&format!("found {}", bound + 1)),
            "{norm}: {stderr}"
        );
        assert!(!out.exists(), "{norm}: nothing may be written");
        // The bound itself: every exponent of the tangent spaces.
        std::fs::write(
            &path,
            text.replace(
                &format!("exponents = {}", bound + 1),
                &format!("exponents = {bound}"),
            ),
        )
        .unwrap();
        let out = dir.path().join(norm);
        tokdyn()
            .arg("run")
            .arg(&path)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let csv = std::fs::read_to_string(out.join("lyapunov.csv")).unwrap();
        let header = csv.lines().next().unwrap();
        assert_eq!(header.split(',').count(), 1 + bound, "{norm}: {header}");
    }
}

#[test]
fn a_run_writes_lyapunov_csv_and_the_summary_identically_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ly.toml");
    // 8 = n (d - 1): every exponent.
    std::fs::write(
        &path,
        small_scenario("exponents = 8\ntransient = 4.0\ninterval = 0.5"),
    )
    .unwrap();
    let mut previous: Option<(String, serde_json::Value)> = None;
    for threads in ["1", "2"] {
        let out = dir.path().join(format!("out{threads}"));
        tokdyn()
            .env("RAYON_NUM_THREADS", threads)
            .arg("run")
            .arg(&path)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let csv = std::fs::read_to_string(out.join("lyapunov.csv")).unwrap();
        let mut lines = csv.lines();
        assert_eq!(
            lines.next().unwrap(),
            "t,lambda1,lambda2,lambda3,lambda4,lambda5,lambda6,lambda7,lambda8"
        );
        // One row per interval after the transient: 4.5, 5.0, ..., 40.
        assert_eq!(lines.count(), 72);
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        let ly = summary["lyapunov"].clone();
        assert_eq!(ly["exponents"].as_array().unwrap().len(), 8);
        assert_eq!(ly["spread"].as_array().unwrap().len(), 8);
        assert_eq!(ly["transient"].as_f64(), Some(4.0));
        assert_eq!(ly["t"].as_f64(), Some(40.0));
        let e: Vec<f64> = ly["exponents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert!(e.iter().all(|v| v.is_finite()));
        if let Some((csv0, ly0)) = &previous {
            assert_eq!(csv0, &csv, "lyapunov.csv differs between thread counts");
            assert_eq!(ly0, &ly);
        }
        previous = Some((csv, ly));
    }
}

#[test]
fn on_a_periodic_orbit_lambda1_is_zero_and_the_next_the_transverse_floquet_rate() {
    // One token (n = 1): lsa with A = I and sa both give x' = V x - <x, V x> x, the projected
    // linear flow, solved by x(t) = e^{tV} x0 / |e^{tV} x0|. With V = P diag([[a, -b], [b, a]], mu) P^{-1}
    // and a > mu, x(t) tends to the periodic orbit in the plane of the complex pair (period
    // 2 pi / b); its transverse Floquet multiplier over a period is e^{(mu - a) 2 pi / b}, so the
    // exponents are 0 and mu - a.
    let (a, b, mu) = (0.3, 1.7, -0.4);
    let block = DMatrix::from_row_slice(3, 3, &[a, -b, 0.0, b, a, 0.0, 0.0, 0.0, mu]);
    let p = matrix(3, 3, 77) * 0.4 + DMatrix::identity(3, 3);
    let v = &p * block * p.clone().try_inverse().unwrap();
    for kernel in [Kernel::Lsa, Kernel::Sa] {
        let att = Attention::new(
            kernel,
            1.0,
            vec![Head {
                a: DMatrix::identity(3, 3),
                v: v.clone(),
            }],
        );
        let field = SphereField::new(att, 1);
        let settings = LyapunovSettings {
            exponents: 2,
            transient: 40.0,
            interval: 1.0,
        };
        let x0 = unit_tokens(1, 3, 8);
        let s = spectrum(&field, &x0, 640.0, settings, (1e-11, 1e-13)).unwrap();
        let floquet = (mu - a) * 1.0;
        assert!(
            s.exponents[0].abs() < 5e-3,
            "{kernel:?}: lambda1 = {}",
            s.exponents[0]
        );
        assert!(
            s.exponents[0].abs() <= 2.0 * s.spread[0] + 1e-4,
            "{kernel:?}: {:?} spread {:?}",
            s.exponents,
            s.spread
        );
        assert!(
            (s.exponents[1] - floquet).abs() < 5e-3,
            "{kernel:?}: lambda2 = {} vs {floquet}",
            s.exponents[1]
        );
    }
}

/// The search that found `scenarios/chaotic-sa-d3.toml` (run by hand:
/// `cargo test --release --test lyapunov -- --ignored --nocapture`): sa, d = 3, n = 4..6,
/// one or two heads with entries uniform in [-sqrt 3, sqrt 3), lambda_1 over [0, 1500].
#[test]
#[ignore]
fn search_chaotic_cases() {
    let d = 3;
    let first: u64 = std::env::var("SEARCH_FROM")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    for draw in first..first + 2000 {
        let n = 4 + (draw % 3) as usize;
        let heads: Vec<Head> = (0..1 + (draw / 3) % 2)
            .map(|h| Head {
                a: matrix(d, d, 1000 * draw + 2 * h) * 3f64.sqrt(),
                v: matrix(d, d, 1000 * draw + 2 * h + 1) * 3f64.sqrt(),
            })
            .collect();
        let field = SphereField::new(Attention::new(Kernel::Sa, 1.0, heads), n);
        let x0 = unit_tokens(n, d, draw + 7);
        let settings = LyapunovSettings {
            exponents: 1,
            transient: 300.0,
            interval: 1.0,
        };
        if let Ok(s) = spectrum(&field, &x0, 1500.0, settings, (1e-9, 1e-11)) {
            if s.exponents[0] > 0.005 {
                println!(
                    "draw {draw} n {n}: lambda1 {:.5} spread {:.5}",
                    s.exponents[0], s.spread[0]
                );
            }
        }
    }
}

/// The chaotic scenario found by the search: `chaotic` at two tolerances a hundred times
/// apart, with exponents that agree within their spreads and stay beyond twice them.
#[test]
fn the_chaotic_case_is_chaotic_at_two_tolerances_with_agreeing_exponents() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenario = root.join("scenarios/chaotic-sa-d3.toml");
    let dir = tempfile::tempdir().unwrap();
    let mut found = Vec::new();
    for tol in ["1e-9", "1e-11"] {
        let out = dir.path().join(tol);
        tokdyn()
            .arg("run")
            .arg(&scenario)
            .arg("--set")
            .arg(format!("solver.rtol={tol}"))
            .arg("--set")
            .arg(format!("solver.atol={tol}"))
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
        let s: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(s["label"], "chaotic", "{tol}: {}", s["label_reason"]);
        let l = s["lyapunov"]["exponents"][0].as_f64().unwrap();
        let spread = s["lyapunov"]["spread"][0].as_f64().unwrap();
        assert!(l > 2.0 * spread, "{tol}: lambda_1 {l}, spread {spread}");
        found.push((l, spread));
    }
    let ((a, sa), (b, sb)) = (found[0], found[1]);
    assert!((a - b).abs() <= sa + sb, "{a} +- {sa} against {b} +- {sb}");
}
