//! The tangent flow with positions (RoPE, ALiBi) and the peri-LN and nGPT normalisations
//! (docs/MATH.md §15.1): the exact derivative against central
//! differences of the production field, the tangent spaces kept on the spheres, lambda_1 at a
//! fixed point against the eigenvalues of a Jacobian made by finite differences, and one
//! `[lyapunov]` run per variant from the command line.

use nalgebra::DMatrix;
use tokdyn::integrate::lyapunov::spectrum;
use tokdyn::integrate::{Dynamics, LyapunovSettings};
use tokdyn::model::{
    Attention, FactoredHead, Head, Kernel, Mask, Normalization, Position, SphereField,
};

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

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The tangent part of `v` at the unit tokens `x`.
fn tangent(x: &[f64], v: &mut [f64], d: usize) {
    for (vk, xk) in v.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
        let c = dot(vk, xk);
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

/// Two heads given by A and V, and (when `factored`) one factored head of width 2.
fn attention(kernel: Kernel, d: usize, factored: bool, seed: u64) -> Attention {
    let heads = (0..2)
        .map(|h| Head {
            a: matrix(d, d, seed + 2 * h),
            v: matrix(d, d, seed + 2 * h + 1),
        })
        .collect();
    let att = Attention::new(kernel, 1.3, heads);
    if !factored {
        return att;
    }
    att.with_factored(vec![FactoredHead {
        q: matrix(d, 2, seed + 4),
        k: matrix(d, 2, seed + 5),
        v: matrix(d, 2, seed + 6),
        o: matrix(2, d, seed + 7),
    }])
}

/// The variants of this file: a position and a normalisation.
fn variants(heads: usize) -> Vec<(&'static str, Position, Normalization)> {
    let slopes: Vec<f64> = (0..heads).map(|h| 0.3 + 0.25 * h as f64).collect();
    vec![
        ("rope", Position::Rope { base: 10.0 }, Normalization::Post),
        ("alibi", Position::Alibi { slopes }, Normalization::Post),
        ("peri", Position::None, Normalization::Peri),
        ("ngpt", Position::None, Normalization::Ngpt),
        (
            "rope+peri",
            Position::Rope { base: 10.0 },
            Normalization::Peri,
        ),
        (
            "alibi+ngpt",
            Position::Alibi {
                slopes: vec![0.5; heads],
            },
            Normalization::Ngpt,
        ),
    ]
}

/// One variant's checks at one point: F equals the field, DF v equals the difference
/// quotient, and on the spheres <x_k, DF v> + <v_k, F_k> = 0 (the derivative of
/// <x_k, F_k> = 0, which keeps tangent vectors tangent).
fn check_derivative(field: &SphereField, x: &[f64], vs: &[f64], on_sphere: bool, what: &str) {
    let len = x.len();
    let d = field.d();
    let lin = field
        .linearization()
        .expect("every variant has a derivative");
    let (mut dy, mut dv) = (vec![0.0; len], vec![0.0; vs.len()]);
    lin.field_and_derivatives(x, vs, &mut dy, &mut dv);
    let mut f = vec![0.0; len];
    field.eval(x, &mut f);
    let field_error = dy
        .iter()
        .zip(&f)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(field_error < 1e-12, "{what}: F differs by {field_error:e}");
    for (v, got) in vs.chunks_exact(len).zip(dv.chunks_exact(len)) {
        let expected = difference_quotient(field, x, v, 1e-5);
        let scale = expected.iter().fold(1e-3, |m: f64, v| m.max(v.abs()));
        let err = got
            .iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(
            err < 1e-7 * scale,
            "{what}: DF v off by {err:e} (scale {scale:e})"
        );
        if on_sphere {
            for ((xk, vk), (fk, dfk)) in x
                .chunks_exact(d)
                .zip(v.chunks_exact(d))
                .zip(f.chunks_exact(d).zip(got.chunks_exact(d)))
            {
                let drift = dot(xk, dfk) + dot(vk, fk);
                assert!(
                    drift.abs() < 1e-12 * scale,
                    "{what}: radial drift {drift:e}"
                );
            }
        }
    }
}

#[test]
fn the_derivative_with_positions_and_normalisations_matches_finite_differences() {
    let (n, d) = (6, 4);
    for kernel in [Kernel::Lsa, Kernel::Usa, Kernel::Sa] {
        for factored in [false, true] {
            let heads = if factored { 3 } else { 2 };
            for mask in [Mask::None, Mask::Causal] {
                for (name, position, norm) in variants(heads) {
                    let att = attention(kernel, d, factored, 5)
                        .with_mask(mask)
                        .with_normalization(norm)
                        .with_ngpt_alpha(0.7)
                        .with_position(position);
                    let field = SphereField::new(att, n);
                    let on_sphere = norm.on_sphere();
                    let mut x = unit_tokens(n, d, 23);
                    if !on_sphere {
                        // A stream off the sphere: the derivative sees 1 / |x_k|.
                        x.iter_mut()
                            .enumerate()
                            .for_each(|(i, v)| *v *= 1.0 + 0.1 * (i % 5) as f64);
                    }
                    let mut vs = Vec::new();
                    for s in 0..2 {
                        let mut v = unit_tokens(n, d, 60 + s);
                        if on_sphere {
                            tangent(&x, &mut v, d);
                        }
                        vs.extend(v);
                    }
                    let what = format!("{kernel:?} factored {factored} {mask:?} {name}");
                    check_derivative(&field, &x, &vs, on_sphere, &what);
                }
            }
        }
    }
}

#[test]
fn positions_change_the_derivative() {
    // The check above could pass with the positions ignored in both the field and its
    // derivative: the derivatives with and without them must differ.
    let (n, d) = (6, 4);
    let x = unit_tokens(n, d, 23);
    let mut v = unit_tokens(n, d, 61);
    tangent(&x, &mut v, d);
    let derivative = |position: Position| {
        let att = attention(Kernel::Sa, d, false, 5).with_position(position);
        let field = SphereField::new(att, n);
        let (mut dy, mut dv) = (vec![0.0; n * d], vec![0.0; n * d]);
        field
            .linearization()
            .unwrap()
            .field_and_derivatives(&x, &v, &mut dy, &mut dv);
        dv
    };
    let plain = derivative(Position::None);
    for position in [
        Position::Rope { base: 10.0 },
        Position::Alibi {
            slopes: vec![0.5, 0.5],
        },
    ] {
        let got = derivative(position.clone());
        let change = got
            .iter()
            .zip(&plain)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(
            change > 1e-3,
            "{position:?} changes DF v by {change:e} only"
        );
    }
}

/// The tangent Jacobian at unit tokens `x` in an orthonormal basis of each token's tangent
/// plane, by central differences of the production field.
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
            j[(row, col)] = dot(u, &dv);
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
            let p = dot(&e, f);
            e.iter_mut().zip(f).for_each(|(a, b)| *a -= p * b);
        }
        let r = dot(&e, &e).sqrt();
        if r > 1e-6 && found.len() < d {
            found.push(e.iter().map(|a| a / r).collect());
        }
    }
    found.split_off(1)
}

#[test]
fn at_a_fixed_point_lambda1_is_the_largest_real_part_of_the_jacobians_eigenvalues() {
    // Consensus at e_4 is an equilibrium when every head's V maps e_4 along e_4: each a_k is
    // then a positive multiple of V e_4, radial, whatever the positions do to the weights.
    let (n, d) = (3, 4);
    let heads = |seed: u64| -> Vec<Head> {
        (0..2)
            .map(|h| {
                let mut v = matrix(d, d, seed + 2 * h + 1) * 0.5;
                for r in 0..d - 1 {
                    v[(r, d - 1)] = 0.0;
                }
                v[(d - 1, d - 1)] = 0.8;
                Head {
                    a: matrix(d, d, seed + 2 * h),
                    v,
                }
            })
            .collect()
    };
    let cases = [
        (
            "sa rope causal",
            Attention::new(Kernel::Sa, 1.0, heads(31))
                .with_mask(Mask::Causal)
                .with_position(Position::Rope { base: 10.0 }),
        ),
        (
            "usa alibi ngpt",
            Attention::new(Kernel::Usa, 1.0, heads(41))
                .with_position(Position::Alibi {
                    slopes: vec![0.4, 0.9],
                })
                .with_normalization(Normalization::Ngpt)
                .with_ngpt_alpha(0.6),
        ),
    ];
    for (what, att) in cases {
        let field = SphereField::new(att, n);
        let x: Vec<f64> = (0..n).flat_map(|_| [0.0, 0.0, 0.0, 1.0]).collect();
        let mut f = vec![0.0; n * d];
        field.eval(&x, &mut f);
        assert!(f.iter().all(|v| v.abs() < 1e-14), "{what}: not at rest");
        let j = tangent_jacobian(&field, &x, d);
        let mut expected: Vec<f64> = j.complex_eigenvalues().iter().map(|z| z.re).collect();
        expected.sort_by(|a, b| b.total_cmp(a));
        let settings = LyapunovSettings {
            exponents: 2,
            transient: 2.0,
            interval: 0.5,
        };
        let s = spectrum(&field, &x, 300.0, settings, (1e-11, 1e-13)).unwrap();
        let (got, want) = (s.exponents[0], expected[0]);
        assert!(
            (got - want).abs() < 0.02 * (1.0 + want.abs()),
            "{what}: lambda_1 {got} vs largest real part {want} (all {expected:?})"
        );
        // The fixed point is not neutral: the comparison could fail.
        assert!(want.abs() > 0.05, "{what}: {expected:?}");
    }
}

fn tokdyn() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("tokdyn").unwrap()
}

/// A small scenario in d = 4 with two heads, `model_extra` in `[model]` and one exponent.
fn scenario(kernel: &str, model_extra: &str) -> String {
    format!(
        r#"name = "lyp"
[model]
kernel = "{kernel}"
beta = 1.0
d = 4
heads = [
  {{ A = [[0.3, -1.1, 0.4, 0.2], [0.9, 0.2, -0.5, 0.1], [-0.3, 0.7, 0.1, -0.6], [0.2, 0.1, 0.5, 0.3]], V = [[0.5, 0.8, -0.2, 0.1], [-0.9, 0.1, 0.6, 0.3], [0.3, -0.4, 0.2, -0.1], [0.1, 0.2, -0.3, 0.4]] }},
  {{ A = [[0.6, 0.1, -0.4, 0.3], [-0.2, 0.5, 0.3, 0.1], [0.4, -0.3, 0.2, 0.5], [0.1, 0.4, -0.2, 0.3]], V = [[0.2, -0.3, 0.4, 0.1], [0.5, 0.1, -0.2, 0.3], [-0.1, 0.6, 0.2, -0.4], [0.3, 0.2, 0.1, 0.5]] }},
]
{model_extra}
[tokens]
n = 5
init = "uniform"
seed = 4
[time]
t_end = 20.0
samples = 41
[lyapunov]
exponents = 3
transient = 2.0
interval = 0.5
"#
    )
}

#[test]
fn a_lyapunov_run_per_variant_writes_finite_exponents() {
    let dir = tempfile::tempdir().unwrap();
    let variants = [
        ("sa", "position = { rope = { base = 100.0 } }"),
        ("usa", "position = { alibi = { slopes = \"standard\" } }"),
        ("sa", "normalization = \"peri\""),
        ("lsa", "normalization = \"ngpt\"\nngpt_alpha = 0.5"),
    ];
    for (i, (kernel, extra)) in variants.iter().enumerate() {
        for mask in ["none", "causal"] {
            let path = dir.path().join(format!("v{i}{mask}.toml"));
            let text = scenario(kernel, &format!("{extra}\nmask = \"{mask}\""));
            std::fs::write(&path, text).unwrap();
            let out = dir.path().join(format!("out{i}{mask}"));
            tokdyn()
                .arg("run")
                .arg(&path)
                .arg("--out")
                .arg(&out)
                .assert()
                .success();
            let csv = std::fs::read_to_string(out.join("lyapunov.csv")).unwrap();
            let mut lines = csv.lines();
            assert_eq!(lines.next().unwrap(), "t,lambda1,lambda2,lambda3");
            // One row per interval after the transient: 2.5, 3.0, ..., 20.
            let rows: Vec<&str> = lines.collect();
            assert_eq!(rows.len(), 36, "{extra} {mask}");
            for row in rows {
                let values: Vec<f64> = row.split(',').map(|v| v.parse().unwrap()).collect();
                assert_eq!(values.len(), 4);
                assert!(values.iter().all(|v| v.is_finite()), "{extra}: {row}");
            }
        }
    }
}

#[test]
fn a_run_with_positions_is_byte_identical_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rope.toml");
    std::fs::write(
        &path,
        scenario(
            "sa",
            "position = { rope = { base = 100.0 } }\nnormalization = \"ngpt\"",
        ),
    )
    .unwrap();
    let mut previous: Option<String> = None;
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
        if let Some(csv0) = &previous {
            assert_eq!(csv0, &csv, "lyapunov.csv differs between thread counts");
        }
        previous = Some(csv);
    }
}
