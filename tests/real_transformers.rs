//! Real transformers (docs/MATH.md §"Real transformers"): causal masks, factored heads, pre-LN
//! and beta = gamma ln n, each against an integration written out here in the models' own
//! row-vector convention (classical RK4 at a small fixed step), and the bad inputs of these
//! keys.

use std::path::Path;

use num_complex::Complex64;
use tokdyn::integrate::solve;
use tokdyn::observe::{Observer, OrderSeries};
use tokdyn::scenario::{ModelKind, Scenario};
use tokdyn::simulation;

/// Numbers in [-1, 1) from a small generator (the test's own weights).
fn numbers(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// A rows x cols matrix, row-major.
#[derive(Clone)]
struct Mat {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Mat {
    fn random(rows: usize, cols: usize, seed: u64) -> Mat {
        Mat {
            rows,
            cols,
            data: numbers(rows * cols, seed),
        }
    }
    fn at(&self, r: usize, c: usize) -> f64 {
        self.data[r * self.cols + c]
    }
    fn toml(&self) -> String {
        let rows: Vec<String> = self
            .data
            .chunks(self.cols)
            .map(|r| {
                let e: Vec<String> = r.iter().map(|v| format!("{v:?}")).collect();
                format!("[{}]", e.join(", "))
            })
            .collect();
        format!("[{}]", rows.join(", "))
    }
    /// The row vector x M.
    fn apply_row(&self, x: &[f64]) -> Vec<f64> {
        (0..self.cols)
            .map(|c| (0..self.rows).map(|r| x[r] * self.at(r, c)).sum())
            .collect()
    }
}

/// One head in the row-vector convention: scores (x_k Q)(x_j K)^T / sqrt(d_h), values x_j V O.
struct Factors {
    q: Mat,
    k: Mat,
    v: Mat,
    o: Mat,
}

fn factors(d: usize, dh: usize, seed: u64) -> Factors {
    Factors {
        q: Mat::random(d, dh, seed),
        k: Mat::random(d, dh, seed + 1),
        v: Mat::random(d, dh, seed + 2),
        o: Mat::random(dh, d, seed + 3),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kernel {
    Lsa,
    Usa,
    Sa,
}

/// The model as written in the papers: y_k = sum_h sum_{j in J(k)} w_kj x_j V O, with
/// J(k) = {j <= k} (causal) or all j, w from beta times the score (lsa: itself / |J|,
/// usa: exp / |J|, sa: softmax over J).
struct Plain {
    kernel: Kernel,
    beta: f64,
    causal: bool,
    pre: bool,
    heads: Vec<Factors>,
    d: usize,
}

impl Plain {
    fn attention(&self, z: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let n = z.len();
        let mut y = vec![vec![0.0; self.d]; n];
        for h in &self.heads {
            let dh = h.q.cols as f64;
            let q: Vec<Vec<f64>> = z.iter().map(|x| h.q.apply_row(x)).collect();
            let k: Vec<Vec<f64>> = z.iter().map(|x| h.k.apply_row(x)).collect();
            let out: Vec<Vec<f64>> = z.iter().map(|x| h.o.apply_row(&h.v.apply_row(x))).collect();
            for a in 0..n {
                let last = if self.causal { a + 1 } else { n };
                let s: Vec<f64> = (0..last)
                    .map(|b| {
                        self.beta * q[a].iter().zip(&k[b]).map(|(p, r)| p * r).sum::<f64>()
                            / dh.sqrt()
                    })
                    .collect();
                let w: Vec<f64> = match self.kernel {
                    Kernel::Lsa => s.iter().map(|v| v / last as f64).collect(),
                    Kernel::Usa => s.iter().map(|v| v.exp() / last as f64).collect(),
                    Kernel::Sa => {
                        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                        let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
                        let t: f64 = e.iter().sum();
                        e.iter().map(|v| v / t).collect()
                    }
                };
                for b in 0..last {
                    for c in 0..self.d {
                        y[a][c] += w[b] * out[b][c];
                    }
                }
            }
        }
        y
    }

    /// x' for the state x: post-LN, the tangent part at x / |x|; pre-LN, y of the directions.
    fn rate(&self, x: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let z: Vec<Vec<f64>> = x.iter().map(|r| unit(r)).collect();
        let y = self.attention(&z);
        if self.pre {
            return y;
        }
        y.iter()
            .zip(&z)
            .map(|(y, z)| {
                let r: f64 = y.iter().zip(z).map(|(a, b)| a * b).sum();
                y.iter().zip(z).map(|(a, b)| a - r * b).collect()
            })
            .collect()
    }

    /// Classical RK4 with `steps` steps per sample; the states at the samples.
    fn integrate(
        &self,
        x0: Vec<Vec<f64>>,
        dt_sample: f64,
        samples: usize,
        steps: usize,
    ) -> Vec<Vec<Vec<f64>>> {
        let h = dt_sample / steps as f64;
        let axpy = |x: &[Vec<f64>], k: &[Vec<f64>], s: f64| -> Vec<Vec<f64>> {
            x.iter()
                .zip(k)
                .map(|(a, b)| a.iter().zip(b).map(|(p, q)| p + s * q).collect())
                .collect()
        };
        let mut x = x0;
        let mut out = vec![x.clone()];
        for _ in 1..samples {
            for _ in 0..steps {
                let k1 = self.rate(&x);
                let k2 = self.rate(&axpy(&x, &k1, h / 2.0));
                let k3 = self.rate(&axpy(&x, &k2, h / 2.0));
                let k4 = self.rate(&axpy(&x, &k3, h));
                for i in 0..x.len() {
                    for c in 0..self.d {
                        x[i][c] +=
                            h / 6.0 * (k1[i][c] + 2.0 * k2[i][c] + 2.0 * k3[i][c] + k4[i][c]);
                    }
                }
                if !self.pre {
                    x = x.iter().map(|r| unit(r)).collect();
                }
            }
            out.push(x.clone());
        }
        out
    }
}

fn unit(r: &[f64]) -> Vec<f64> {
    let norm = r.iter().map(|v| v * v).sum::<f64>().sqrt();
    r.iter().map(|v| v / norm).collect()
}

/// R2 (angle of the (1, 2) projection, doubled) and |R1| of the directions.
fn order(x: &[Vec<f64>]) -> (Complex64, f64) {
    let n = x.len() as f64;
    let z: Vec<Vec<f64>> = x.iter().map(|r| unit(r)).collect();
    let r2 = z
        .iter()
        .map(|r| Complex64::from_polar(1.0, 2.0 * r[1].atan2(r[0])))
        .sum::<Complex64>()
        / n;
    let d = z[0].len();
    let mean: Vec<f64> = (0..d)
        .map(|c| z.iter().map(|r| r[c]).sum::<f64>() / n)
        .collect();
    (r2, mean.iter().map(|v| v * v).sum::<f64>().sqrt())
}

fn scenario(text: &str) -> Scenario {
    Scenario::from_toml_str(text, Path::new("t.toml"), Path::new("."), &[]).unwrap()
}

fn heads_toml(heads: &[Factors]) -> String {
    let list: Vec<String> = heads
        .iter()
        .map(|h| {
            format!(
                "{{ Q = {}, K = {}, V = {}, O = {} }}",
                h.q.toml(),
                h.k.toml(),
                h.v.toml(),
                h.o.toml()
            )
        })
        .collect();
    format!("heads = [{}]", list.join(", "))
}

/// Runs `s` with the library and `plain` from the same tokens; the largest difference in R2
/// and |R1| over the samples.
fn largest_difference(s: &Scenario, plain: &Plain) -> f64 {
    let sim = simulation::build(s, ModelKind::Full).unwrap();
    let mut series = OrderSeries::new();
    let sol = solve(
        &sim.problem(),
        sim.method,
        &mut [&mut series as &mut dyn Observer],
    )
    .unwrap();
    assert!(sol.status.is_success());
    let d = s.model.d;
    let x0: Vec<Vec<f64>> = sim.initial_state.chunks(d).map(|r| r.to_vec()).collect();
    let samples = s.time.samples;
    let states = plain.integrate(x0, s.time.t_end / (samples - 1) as f64, samples, 200);
    let mut worst: f64 = 0.0;
    for (i, x) in states.iter().enumerate() {
        let (r2, r1) = order(x);
        worst = worst.max((series.r2[i] - r2).norm());
        worst = worst.max((series.r1[i].unwrap() - r1).abs());
    }
    // The flow moved the order parameters well beyond the tolerance (a test that can fail).
    let (start, _) = order(&states[0]);
    let (end, _) = order(states.last().unwrap());
    assert!(
        (start - end).norm() > 1e-3,
        "the order parameters hardly move"
    );
    worst
}

const TIME: &str = r#"
[tokens]
n = 9
init = "uniform"
seed = 4
[time]
t_end = 2.0
samples = 5
[solver]
rtol = 1e-12
atol = 1e-14
"#;

#[test]
fn causal_factored_heads_match_the_plain_model_for_every_kernel() {
    let (d, dh) = (4, 2);
    for (kernel, word) in [
        (Kernel::Lsa, "lsa"),
        (Kernel::Usa, "usa"),
        (Kernel::Sa, "sa"),
    ] {
        let heads = vec![factors(d, dh, 10), factors(d, dh, 20)];
        let text = format!(
            "name = \"c\"\n[model]\nkernel = \"{word}\"\nbeta = 1.5\nd = {d}\nmask = \"causal\"\n{}\n{TIME}",
            heads_toml(&heads)
        );
        let s = scenario(&text);
        let plain = Plain {
            kernel,
            beta: 1.5,
            causal: true,
            pre: false,
            heads,
            d,
        };
        let err = largest_difference(&s, &plain);
        assert!(err < 1e-8, "{word}: {err:e}");
    }
}

#[test]
fn causal_pre_ln_matches_the_plain_stream() {
    let (d, dh) = (4, 2);
    for (kernel, word) in [(Kernel::Sa, "sa"), (Kernel::Lsa, "lsa")] {
        let heads = vec![factors(d, dh, 30), factors(d, dh, 40)];
        let text = format!(
            "name = \"p\"\n[model]\nkernel = \"{word}\"\nbeta = 1.0\nd = {d}\nmask = \"causal\"\nnormalization = \"pre\"\n{}\n{TIME}",
            heads_toml(&heads)
        );
        let s = scenario(&text);
        let plain = Plain {
            kernel,
            beta: 1.0,
            causal: true,
            pre: true,
            heads,
            d,
        };
        let err = largest_difference(&s, &plain);
        assert!(err < 1e-8, "{word}: {err:e}");
        // The stream leaves the sphere: its norms are data.
        let sim = simulation::build(&s, ModelKind::Full).unwrap();
        let sol = solve(&sim.problem(), sim.method, &mut []).unwrap();
        let norms: Vec<f64> = sol
            .final_state
            .chunks(d)
            .map(|r| r.iter().map(|v| v * v).sum::<f64>().sqrt())
            .collect();
        assert!(norms.iter().any(|r| (r - 1.0).abs() > 1e-2), "{norms:?}");
    }
}

#[test]
fn long_context_beta_is_gamma_log_n() {
    let d = 3;
    let heads = vec![factors(d, d, 50)];
    let gamma = 0.6;
    let text = format!(
        "name = \"l\"\n[model]\nkernel = \"sa\"\nbeta = {{ log_n = {gamma} }}\nd = {d}\n{}\n{TIME}",
        heads_toml(&heads)
    );
    let s = scenario(&text);
    let beta = gamma * 9f64.ln();
    assert!((s.model.beta - beta).abs() < 1e-15);
    assert_eq!(s.resolved["model"]["beta"].as_float(), Some(s.model.beta));
    let plain = Plain {
        kernel: Kernel::Sa,
        beta,
        causal: false,
        pre: false,
        heads,
        d,
    };
    let err = largest_difference(&s, &plain);
    assert!(err < 1e-8, "{err:e}");
}

// ---------------------------------------------------------------- bad input

fn error_of(text: &str) -> String {
    match Scenario::from_toml_str(text, Path::new("t.toml"), Path::new("."), &[]) {
        Ok(s) => match simulation::build(&s, s.run.model) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

fn model_text(kernel: &str, d: usize, model_extra: &str, heads: &str, rest: &str) -> String {
    format!(
        "name = \"e\"\n[model]\nkernel = \"{kernel}\"\nbeta = 1.0\nd = {d}\n{model_extra}\n{heads}\n[tokens]\nn = 8\n[time]\nt_end = 1.0\nsamples = 3\n{rest}"
    )
}

#[test]
fn bad_real_transformer_input_names_the_key() {
    let ok = heads_toml(&[factors(4, 2, 1)]);
    let plain = "A = \"identity\"\nV = \"identity\"";
    let cases: Vec<(String, &str)> = vec![
        // K of the wrong width.
        (
            model_text("sa", 4, "", &ok.replacen("K = [[", "K = [[0.5, ", 1), ""),
            "model.heads[0].K[0]",
        ),
        // d_h = 3 does not divide d = 4.
        (
            model_text("sa", 4, "", &heads_toml(&[factors(4, 3, 1)]), ""),
            "model.heads[0].Q",
        ),
        // O with too few rows.
        (
            model_text(
                "sa",
                4,
                "",
                &ok.replace(&factors(4, 2, 1).o.toml(), "[[1, 2, 3, 4]]"),
                "",
            ),
            "model.heads[0].O",
        ),
        (
            model_text(
                "lsa",
                2,
                "mask = \"causal\"",
                plain,
                "[run]\nmodel = \"phase\"",
            ),
            "run.model",
        ),
        (
            model_text(
                "lsa",
                3,
                "mask = \"causal\"",
                plain,
                "[run]\nmodel = \"group\"",
            ),
            "run.model",
        ),
        (
            model_text(
                "usa",
                2,
                "mask = \"causal\"\nkernel_method = \"spectral\"",
                plain,
                "",
            ),
            "model.kernel_method",
        ),
        (
            model_text(
                "lsa",
                3,
                "normalization = \"pre\"",
                plain,
                "[run]\nmodel = \"group\"",
            ),
            "run.model",
        ),
        (
            model_text("sa", 3, "", plain, "").replace("beta = 1.0", "beta = { log_n = 0 }"),
            "model.beta.log_n",
        ),
        (
            model_text("sa", 3, "", plain, "").replace("beta = 1.0", "beta = { log_n = -1.5 }"),
            "model.beta.log_n",
        ),
        (
            model_text("sa", 3, "mask = \"future\"", plain, ""),
            "model.mask",
        ),
        (
            model_text("sa", 3, "normalization = \"middle\"", plain, ""),
            "model.normalization",
        ),
    ];
    for (text, key) in cases {
        let e = error_of(&text);
        assert!(e.contains(&format!("{key}:")), "{key}: {e}");
    }
}
