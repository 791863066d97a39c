//! Positions (RoPE, ALiBi) and normalisations (peri-LN, nGPT) against a naive O(n^2 d)
//! implementation written here from docs/MATH.md §16: each pair's score formed with the key
//! rotated by the relative angle (p_j - p_k) omega (the field rotates queries and keys by
//! their absolute angles), the bias -m |p_k - p_j|, the kernel's weights, then the
//! normalisation of the update. Properties: a common shift of the positions changes nothing
//! under RoPE, ALiBi with zero slopes is no position.

use nalgebra::{DMatrix, DVector};
use tokdyn::model::{
    Attention, FactoredHead, Head, Kernel, Mask, Normalization, Position, SphereField,
};

fn lcg(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

fn matrix(rows: usize, cols: usize, seed: u64, scale: f64) -> DMatrix<f64> {
    let mut r = lcg(seed);
    DMatrix::from_fn(rows, cols, |_, _| scale * r())
}

/// n random rows of d numbers with norms from 0.6 to 1.6 (a stream; the field normalises).
fn stream(n: usize, d: usize, seed: u64) -> Vec<f64> {
    let mut r = lcg(seed);
    let mut x = Vec::with_capacity(n * d);
    for k in 0..n {
        let row: Vec<f64> = (0..d).map(|_| r()).collect();
        let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        let scale = 0.6 + k as f64 / n as f64;
        x.extend(row.iter().map(|v| v / norm * scale));
    }
    x
}

fn factored_heads(d: usize, heads: usize, d_h: usize, seed: u64) -> Vec<FactoredHead> {
    (0..heads as u64)
        .map(|h| FactoredHead {
            q: matrix(d, d_h, seed + 4 * h, 0.8),
            k: matrix(d, d_h, seed + 4 * h + 1, 0.8),
            v: matrix(d, d_h, seed + 4 * h + 2, 0.7),
            o: matrix(d_h, d, seed + 4 * h + 3, 0.7),
        })
        .collect()
}

/// The key vector rotated by the relative angle: pairs (i, i + e/2) by t omega_i.
fn rotate(v: &DVector<f64>, t: f64, base: f64) -> DVector<f64> {
    let e = v.len();
    let half = e / 2;
    let mut out = v.clone();
    for i in 0..half {
        let angle = t * base.powf(-2.0 * i as f64 / e as f64);
        let (s, c) = angle.sin_cos();
        out[i] = c * v[i] - s * v[i + half];
        out[i + half] = s * v[i] + c * v[i + half];
    }
    out
}

/// One head as a naive implementation sees it: query map (scores <Qt z_k, R Kt z_j> with the
/// scale already in Qt), key map and value map (d x d).
struct NaiveHead {
    qt: DMatrix<f64>,
    kt: DMatrix<f64>,
    value: DMatrix<f64>,
}

fn naive_heads(att: &Attention) -> Vec<NaiveHead> {
    let formed = att.heads.iter().map(|h| NaiveHead {
        qt: h.a.transpose() * att.beta,
        kt: DMatrix::identity(h.a.nrows(), h.a.nrows()),
        value: h.v.clone(),
    });
    let factored = att.factored.iter().map(|f| NaiveHead {
        qt: f.q.transpose() * (att.beta / (f.q.ncols() as f64).sqrt()),
        kt: f.k.transpose(),
        value: (&f.v * &f.o).transpose(),
    });
    formed.chain(factored).collect()
}

/// docs/MATH.md §16 pair by pair, with positions p_k = k + offset.
fn naive_field(att: &Attention, x: &[f64], d: usize, offset: f64) -> Vec<f64> {
    let n = x.len() / d;
    let z: Vec<DVector<f64>> = x
        .chunks_exact(d)
        .map(|r| {
            let v = DVector::from_column_slice(r);
            let norm = v.norm();
            v / norm
        })
        .collect();
    let mut out = vec![0.0; n * d];
    for (h, head) in naive_heads(att).iter().enumerate() {
        for k in 0..n {
            let pk = k as f64 + offset;
            let q = &head.qt * &z[k];
            let count = if att.mask == Mask::Causal { k + 1 } else { n };
            let scores: Vec<f64> = (0..count)
                .map(|j| {
                    let pj = j as f64 + offset;
                    let key = &head.kt * &z[j];
                    match &att.position {
                        Position::None => q.dot(&key),
                        Position::Rope { base } => q.dot(&rotate(&key, pj - pk, *base)),
                        Position::Alibi { slopes } => q.dot(&key) - slopes[h] * (pk - pj).abs(),
                    }
                })
                .collect();
            let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores
                .iter()
                .map(|&s| match att.kernel {
                    Kernel::Lsa => s / count as f64,
                    Kernel::Usa => s.exp() / count as f64,
                    Kernel::Sa => (s - top).exp(),
                })
                .collect();
            let total: f64 = match att.kernel {
                Kernel::Sa => weights.iter().sum(),
                _ => 1.0,
            };
            let mut f = DVector::zeros(d);
            for (j, w) in weights.iter().enumerate() {
                f += &head.value * &z[j] * (w / total);
            }
            for c in 0..d {
                out[k * d + c] += f[c];
            }
        }
    }
    for k in 0..n {
        let a = DVector::from_column_slice(&out[k * d..(k + 1) * d]);
        let projected = &a - &z[k] * z[k].dot(&a);
        let v = match att.normalization {
            Normalization::Post => projected,
            Normalization::Pre => a.clone(),
            Normalization::Peri => &a / a.norm(),
            Normalization::Ngpt => projected * (att.ngpt_alpha / a.norm()),
        };
        out[k * d..(k + 1) * d].copy_from_slice(v.as_slice());
    }
    out
}

fn field(att: &Attention, x: &[f64]) -> Vec<f64> {
    let d = att.d();
    let n = x.len() / d;
    let mut dx = vec![0.0; n * d];
    SphereField::new(att.clone(), n).eval(x, &mut dx);
    dx
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

const KERNELS: [Kernel; 3] = [Kernel::Lsa, Kernel::Usa, Kernel::Sa];
const MASKS: [Mask; 2] = [Mask::None, Mask::Causal];

#[test]
fn rope_and_alibi_on_factored_heads_match_the_pairwise_formula() {
    let (n, d, d_h) = (37, 8, 4);
    let x = stream(n, d, 3);
    let positions = [
        Position::Rope { base: 10.0 },
        Position::Rope { base: 10000.0 },
        Position::Alibi {
            slopes: vec![0.3, 0.05],
        },
    ];
    for kernel in KERNELS {
        for mask in MASKS {
            for position in &positions {
                let att = Attention::new(kernel, 1.1, Vec::new())
                    .with_factored(factored_heads(d, 2, d_h, 11))
                    .with_mask(mask)
                    .with_position(position.clone());
                let got = field(&att, &x);
                let expected = naive_field(&att, &x, d, 0.0);
                let what = format!("{kernel:?} {mask:?} {position:?}");
                assert!(max_diff(&got, &expected) < 1e-12, "{what}");
                // The positions change the field (the test could fail).
                let plain = naive_field(&att.clone().with_position(Position::None), &x, d, 0.0);
                assert!(max_diff(&got, &plain) > 1e-4, "{what}: no effect");
            }
        }
    }
}

#[test]
fn formed_heads_with_positions_are_the_factored_head_q_a_k_identity() {
    // d = 2 (the lost-in-the-middle setting) and d = 6 with two formed heads.
    for (d, heads) in [(2, 1), (6, 2)] {
        let n = 29;
        let x = stream(n, d, 5);
        let formed: Vec<Head> = (0..heads as u64)
            .map(|h| Head {
                a: matrix(d, d, 40 + h, 1.0),
                v: matrix(d, d, 50 + h, 1.0),
            })
            .collect();
        for kernel in KERNELS {
            for mask in MASKS {
                for position in [
                    Position::Rope { base: 100.0 },
                    Position::Alibi {
                        slopes: Position::standard_slopes(heads),
                    },
                ] {
                    let att = Attention::new(kernel, 1.3, formed.clone())
                        .with_mask(mask)
                        .with_position(position.clone());
                    let got = field(&att, &x);
                    let expected = naive_field(&att, &x, d, 0.0);
                    let what = format!("d={d} {kernel:?} {mask:?} {position:?}");
                    assert!(max_diff(&got, &expected) < 1e-12, "{what}");
                }
            }
        }
    }
}

#[test]
fn a_common_shift_of_the_positions_changes_nothing_under_rope() {
    let (n, d) = (25, 8);
    let x = stream(n, d, 7);
    for kernel in KERNELS {
        let att = Attention::new(kernel, 0.9, Vec::new())
            .with_factored(factored_heads(d, 2, 4, 21))
            .with_mask(Mask::Causal)
            .with_position(Position::Rope { base: 50.0 });
        let got = field(&att, &x);
        for offset in [17.0, 1000.0] {
            let shifted = naive_field(&att, &x, d, offset);
            assert!(
                max_diff(&got, &shifted) < 1e-10,
                "{kernel:?} shift {offset}"
            );
        }
        // ALiBi is shift-invariant too; an absolute rotation of the keys alone is not.
        let keys_only: Vec<f64> = {
            let mut a = att.clone();
            a.position = Position::None;
            naive_field(&a, &x, d, 0.0)
        };
        assert!(max_diff(&got, &keys_only) > 1e-4);
    }
}

#[test]
fn alibi_with_zero_slopes_is_no_position() {
    let (n, d) = (31, 6);
    let x = stream(n, d, 9);
    for kernel in KERNELS {
        for mask in MASKS {
            let att = Attention::new(
                kernel,
                1.2,
                vec![Head {
                    a: matrix(d, d, 60, 1.0),
                    v: matrix(d, d, 61, 1.0),
                }],
            )
            .with_factored(factored_heads(d, 1, 2, 31))
            .with_mask(mask);
            let zero = att.clone().with_position(Position::Alibi {
                slopes: vec![0.0, 0.0],
            });
            let diff = max_diff(&field(&att, &x), &field(&zero, &x));
            assert!(diff < 1e-12, "{kernel:?} {mask:?}: {diff}");
        }
    }
}

#[test]
fn peri_ln_and_ngpt_normalise_the_update() {
    let (n, d) = (33, 6);
    let x = stream(n, d, 13);
    for kernel in KERNELS {
        for mask in MASKS {
            for (normalization, alpha) in [
                (Normalization::Peri, 1.0),
                (Normalization::Ngpt, 1.0),
                (Normalization::Ngpt, 0.37),
            ] {
                for position in [
                    Position::None,
                    Position::Rope { base: 30.0 },
                    Position::Alibi {
                        slopes: vec![0.1, 0.2],
                    },
                ] {
                    let att = Attention::new(
                        kernel,
                        0.8,
                        vec![Head {
                            a: matrix(d, d, 70, 1.0),
                            v: matrix(d, d, 71, 1.0),
                        }],
                    )
                    .with_factored(factored_heads(d, 1, 2, 72))
                    .with_mask(mask)
                    .with_normalization(normalization)
                    .with_ngpt_alpha(alpha)
                    .with_position(position.clone());
                    let got = field(&att, &x);
                    let expected = naive_field(&att, &x, d, 0.0);
                    let what =
                        format!("{kernel:?} {mask:?} {normalization:?} {alpha} {position:?}");
                    assert!(max_diff(&got, &expected) < 1e-12, "{what}");
                    // Speeds: peri moves each stream row at speed 1, nGPT at most alpha.
                    for (k, v) in got.chunks_exact(d).enumerate() {
                        let speed = v.iter().map(|c| c * c).sum::<f64>().sqrt();
                        match normalization {
                            Normalization::Peri => {
                                assert!((speed - 1.0).abs() < 1e-12, "{what} {k}")
                            }
                            _ => assert!(speed <= alpha + 1e-12, "{what} {k}"),
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn positioned_fields_ignore_the_thread_count() {
    let (n, d) = (300, 8);
    let x = stream(n, d, 17);
    for position in [
        Position::Rope { base: 10000.0 },
        Position::Alibi {
            slopes: vec![0.01, 0.2],
        },
    ] {
        let att = Attention::new(Kernel::Sa, 1.0, Vec::new())
            .with_factored(factored_heads(d, 2, 4, 41))
            .with_mask(Mask::Causal)
            .with_position(position);
        let f = SphereField::new(att, n);
        let eval_with = |threads| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut dx = vec![0.0; n * d];
            pool.install(|| f.eval(&x, &mut dx));
            dx
        };
        assert_eq!(eval_with(1), eval_with(2));
    }
}

// ---------------------------------------------------------------- scenarios and bad input

use std::path::Path;
use tokdyn::scenario::Scenario;
use tokdyn::simulation;

fn error_of(text: &str) -> String {
    match Scenario::from_toml_str(text, Path::new("t.toml"), Path::new("."), &[]) {
        Ok(s) => match simulation::build(&s, s.run.model) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

fn text(kernel: &str, d: usize, model_extra: &str, rest: &str) -> String {
    format!(
        "name = \"e\"\n[model]\nkernel = \"{kernel}\"\nbeta = 1.0\nd = {d}\nA = \"identity\"\nV = \"identity\"\n{model_extra}\n[tokens]\nn = 8\n[time]\nt_end = 1.0\nsamples = 3\n{rest}"
    )
}

#[test]
fn bad_positions_and_normalisations_name_the_key() {
    let rope = "position = { rope = { base = 10000.0 } }";
    let alibi = "position = { alibi = { slopes = \"standard\" } }";
    let cases: Vec<(String, &str)> = vec![
        (text("sa", 3, rope, ""), "model.position.rope"),
        (
            text(
                "sa",
                4,
                "position = { alibi = { slopes = [0.5, 0.25] } }",
                "",
            ),
            "model.position.alibi.slopes",
        ),
        (
            text("sa", 4, "position = { alibi = { slopes = [-0.5] } }", ""),
            "model.position.alibi.slopes",
        ),
        (
            text("sa", 4, "position = { rope = { base = 0.5 } }", ""),
            "model.position.rope.base",
        ),
        (
            text("sa", 4, "position = { sinusoid = {} }", ""),
            "model.position",
        ),
        (
            text("sa", 4, "normalization = \"ngpt\"\nngpt_alpha = 0.0", ""),
            "model.ngpt_alpha",
        ),
        (
            text("sa", 4, "normalization = \"ngpt\"\nngpt_alpha = -2", ""),
            "model.ngpt_alpha",
        ),
        (
            text("sa", 4, "normalization = \"middle\"", ""),
            "model.normalization",
        ),
        (
            text(
                "usa",
                2,
                &format!("{alibi}\nkernel_method = \"spectral\""),
                "",
            ),
            "model.kernel_method",
        ),
        (
            text(
                "usa",
                2,
                "normalization = \"peri\"\nkernel_method = \"spectral\"",
                "",
            ),
            "model.kernel_method",
        ),
        (
            text(
                "sa",
                3,
                &format!("{alibi}\nkernel_method = \"harmonics\""),
                "",
            ),
            "model.kernel_method",
        ),
        (
            text("lsa", 4, rope, "[run]\nmodel = \"group\""),
            "run.model",
        ),
        (
            text("sa", 4, alibi, "[run]\nmodel = \"clusters\""),
            "run.model",
        ),
        (
            text(
                "lsa",
                4,
                "normalization = \"ngpt\"",
                "[run]\nmodel = \"group\"",
            ),
            "run.model",
        ),
        // `[lyapunov]` with positions, peri-LN and nGPT runs (tests/lyapunov_positions.rs).
        (
            text(
                "sa",
                4,
                "normalization = \"peri\"",
                "[noise]\ntemperature = 0.1",
            ),
            "noise.temperature",
        ),
    ];
    for (text, key) in cases {
        let e = error_of(&text);
        assert!(e.contains(&format!("{key}:")), "{key}: {e}");
    }
}

#[test]
fn auto_takes_the_direct_kernel_with_positions() {
    // usa in d = 2 with n large enough that auto would take the spectral kernel without them.
    let plain = text("usa", 2, "", "").replace("n = 8", "n = 4000");
    let s = Scenario::from_toml_str(&plain, Path::new("t.toml"), Path::new("."), &[]).unwrap();
    let choice = simulation::kernel_choice(&s, s.run.model).unwrap();
    assert_eq!(choice.as_str(), "spectral");
    let positioned = text("usa", 2, "position = { alibi = { slope_per_n = 2.0 } }", "")
        .replace("n = 8", "n = 4000");
    let s = Scenario::from_toml_str(&positioned, Path::new("t.toml"), Path::new("."), &[]).unwrap();
    assert_eq!(
        simulation::kernel_choice(&s, s.run.model).unwrap().as_str(),
        "direct"
    );
}

#[test]
fn the_cli_refuses_bad_positions_with_one_error_line_and_no_folder() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        text(
            "sa",
            4,
            "position = { alibi = { slopes = [0.5, 0.25] } }",
            "",
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let assert = assert_cmd::Command::cargo_bin("tokdyn")
        .unwrap()
        .args([
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .assert()
        .code(2);
    let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error:") && stderr.contains("model.position.alibi.slopes"));
    assert!(!out.exists());
}
