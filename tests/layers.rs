//! Stacks of layers, looped stacks and checkpoints: the checkpoint mapping against a direct
//! implementation of multi-head attention, layer boundaries hit exactly, the stroboscopic
//! series of a loop, `inspect`, and bad checkpoints.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use tokdyn::integrate::solve;
use tokdyn::scenario::{ModelKind, Scenario};
use tokdyn::simulation;

// ---------------------------------------------------------------- writing checkpoints

/// A tensor to write: name, shape, values (rounded to the dtype when written).
struct Tensor {
    name: String,
    shape: Vec<usize>,
    values: Vec<f64>,
}

/// The value a dtype stores for `v`, widened back to f64.
fn rounded(dtype: Dtype, v: f64) -> f64 {
    match dtype {
        Dtype::F32 => f64::from(v as f32),
        Dtype::F16 => half::f16::from_f64(v).to_f64(),
        Dtype::BF16 => half::bf16::from_f64(v).to_f64(),
        _ => v,
    }
}

fn encode(dtype: Dtype, values: &[f64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &v in values {
        match dtype {
            Dtype::F32 => out.extend((v as f32).to_le_bytes()),
            Dtype::F16 => out.extend(half::f16::from_f64(v).to_le_bytes()),
            Dtype::BF16 => out.extend(half::bf16::from_f64(v).to_le_bytes()),
            Dtype::I32 => out.extend((v as i32).to_le_bytes()),
            _ => out.extend(v.to_le_bytes()),
        }
    }
    out
}

fn serialize(tensors: &[Tensor], dtype: Dtype) -> Vec<u8> {
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|t| (t.name.clone(), t.shape.clone(), encode(dtype, &t.values)))
        .collect();
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(n, s, b)| (n.clone(), TensorView::new(dtype, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize(views, None).unwrap()
}

fn gaussian(rng: &mut ChaCha8Rng, len: usize, std: f64) -> Vec<f64> {
    let normal = Normal::new(0.0, std).unwrap();
    (0..len).map(|_| normal.sample(rng)).collect()
}

/// A random checkpoint in the gpt2 or bert layout (`layers` attention blocks, width d,
/// vocabulary `vocab`), with seeded weights; `prefix` adds `transformer.` / `bert.`.
fn random_checkpoint(
    format: &str,
    layers: usize,
    d: usize,
    vocab: usize,
    seed: u64,
    prefix: bool,
) -> Vec<Tensor> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (qk, vo) = (0.35, 0.15);
    let mut t = Vec::new();
    let p = match (format, prefix) {
        ("gpt2", true) => "transformer.",
        ("bert", true) => "bert.",
        _ => "",
    };
    let emb = if format == "gpt2" {
        "wte.weight"
    } else {
        "embeddings.word_embeddings.weight"
    };
    t.push(Tensor {
        name: format!("{p}{emb}"),
        shape: vec![vocab, d],
        values: gaussian(&mut rng, vocab * d, 1.0),
    });
    for l in 0..layers {
        if format == "gpt2" {
            // c_attn = [W_Q | W_K | W_V] column blocks.
            let mut c_attn = vec![0.0; d * 3 * d];
            let q = gaussian(&mut rng, d * d, qk);
            let k = gaussian(&mut rng, d * d, qk);
            let v = gaussian(&mut rng, d * d, vo);
            for r in 0..d {
                for c in 0..d {
                    c_attn[r * 3 * d + c] = q[r * d + c];
                    c_attn[r * 3 * d + d + c] = k[r * d + c];
                    c_attn[r * 3 * d + 2 * d + c] = v[r * d + c];
                }
            }
            t.push(Tensor {
                name: format!("{p}h.{l}.attn.c_attn.weight"),
                shape: vec![d, 3 * d],
                values: c_attn,
            });
            t.push(Tensor {
                name: format!("{p}h.{l}.attn.c_proj.weight"),
                shape: vec![d, d],
                values: gaussian(&mut rng, d * d, vo),
            });
            t.push(Tensor {
                name: format!("{p}h.{l}.attn.c_attn.bias"),
                shape: vec![3 * d],
                values: gaussian(&mut rng, 3 * d, 1.0),
            });
        } else {
            for (part, std) in [
                ("self.query", qk),
                ("self.key", qk),
                ("self.value", vo),
                ("output.dense", vo),
            ] {
                t.push(Tensor {
                    name: format!("{p}encoder.layer.{l}.attention.{part}.weight"),
                    shape: vec![d, d],
                    values: gaussian(&mut rng, d * d, std),
                });
            }
        }
    }
    t
}

/// The row-vector maps W_Q, W_K, W_V, W_O of layer `l` (x -> x W), from the written values
/// as the dtype stores them: written independently of the library's reader.
fn direct_maps(
    tensors: &[Tensor],
    format: &str,
    l: usize,
    d: usize,
    dtype: Dtype,
) -> [DMatrix<f64>; 4] {
    let get = |suffix: &str| {
        let t = tensors.iter().find(|t| t.name.ends_with(suffix)).unwrap();
        let vals: Vec<f64> = t.values.iter().map(|&v| rounded(dtype, v)).collect();
        DMatrix::from_row_slice(t.shape[0], t.shape[1], &vals)
    };
    if format == "gpt2" {
        let c = get(&format!("h.{l}.attn.c_attn.weight"));
        [
            c.columns(0, d).into_owned(),
            c.columns(d, d).into_owned(),
            c.columns(2 * d, d).into_owned(),
            get(&format!("h.{l}.attn.c_proj.weight")),
        ]
    } else {
        let w = |part: &str| get(&format!("encoder.layer.{l}.attention.{part}.weight")).transpose();
        [
            w("self.query"),
            w("self.key"),
            w("self.value"),
            w("output.dense"),
        ]
    }
}

/// Multi-head softmax attention of tokens X (rows) without biases and norms, in the models'
/// own convention: out = sum_h softmax(X W_Q^h (X W_K^h)^T / sqrt(d_h)) X W_V^h W_O^h; with
/// `causal`, the scores of keys j > k are -inf (a decoder's mask).
fn attention_output(
    x: &DMatrix<f64>,
    maps: &[DMatrix<f64>; 4],
    heads: usize,
    causal: bool,
) -> DMatrix<f64> {
    let (n, d) = x.shape();
    let dh = d / heads;
    let mut out = DMatrix::zeros(n, d);
    for h in 0..heads {
        let q = x * maps[0].columns(h * dh, dh);
        let k = x * maps[1].columns(h * dh, dh);
        let v = x * maps[2].columns(h * dh, dh);
        let mut scores = &q * k.transpose() / (dh as f64).sqrt();
        if causal {
            for r in 0..n {
                for c in r + 1..n {
                    scores[(r, c)] = f64::NEG_INFINITY;
                }
            }
        }
        for mut row in scores.row_iter_mut() {
            let m = row.max();
            row.apply(|s| *s = (*s - m).exp());
            let total = row.sum();
            row /= total;
        }
        out += scores * v * maps[3].rows(h * dh, dh);
    }
    out
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

fn scenario_text(
    path: &str,
    format: &str,
    layers: &str,
    heads: usize,
    extra_tokens: &str,
) -> String {
    format!(
        r#"
name = "ckpt"
[model]
kernel = "sa"
beta = 1.0
[model.checkpoint]
path = "{path}"
format = "{format}"
layers = {layers}
heads = {heads}
[tokens]
init = "embedding"
ids = [3, 0, 7, 7, 11, 2]
{extra_tokens}
[time]
t_end = 1.0
samples = 3
"#
    )
}

// ---------------------------------------------------------------- the mapping

#[test]
fn checkpoint_field_is_the_attention_output_projected_on_the_tangent_space() {
    let dir = tempfile::tempdir().unwrap();
    let (d, heads, vocab) = (16, 4, 12);
    let mut checked = 0;
    for (format, prefix) in [
        ("gpt2", false),
        ("gpt2", true),
        ("bert", false),
        ("bert", true),
    ] {
        for dtype in [Dtype::F32, Dtype::F16, Dtype::BF16] {
            let tensors = random_checkpoint(format, 2, d, vocab, 7, prefix);
            let file = format!("{format}-{prefix}-{dtype:?}.safetensors");
            write_file(dir.path(), &file, &serialize(&tensors, dtype));
            // The default mask (gpt2: causal, bert: none), then each one set.
            for (center, mask) in [false, true]
                .into_iter()
                .flat_map(|c| [(c, None), (c, Some("none")), (c, Some("causal"))])
            {
                let text = scenario_text(
                    &file,
                    format,
                    "[1, 0]",
                    heads,
                    &format!("center = {center}"),
                );
                let sets: Vec<String> = mask
                    .map(|m| format!("model.mask={m}"))
                    .into_iter()
                    .collect();
                let causal =
                    mask.unwrap_or(if format == "gpt2" { "causal" } else { "none" }) == "causal";
                let s =
                    Scenario::from_toml_str(&text, Path::new("s.toml"), dir.path(), &sets).unwrap();
                assert_eq!((s.model.d, s.tokens.n, s.model.layers.len()), (d, 6, 2));
                let sim = simulation::build(&s, ModelKind::Full).unwrap();

                // The initial tokens: normalised embedding rows (centred when asked).
                let emb = tensors
                    .iter()
                    .find(|t| {
                        t.name.ends_with("embeddings.weight") || t.name.ends_with("wte.weight")
                    })
                    .unwrap();
                let e = DMatrix::from_row_slice(
                    vocab,
                    d,
                    &emb.values
                        .iter()
                        .map(|&v| rounded(dtype, v))
                        .collect::<Vec<_>>(),
                );
                let mean = e.row_mean();
                let mut x = DMatrix::zeros(6, d);
                for (k, &id) in [3usize, 0, 7, 7, 11, 2].iter().enumerate() {
                    let mut row = e.row(id).into_owned();
                    if center {
                        row -= &mean;
                    }
                    x.set_row(k, &(&row / row.norm()));
                }
                let x0 = DMatrix::from_row_slice(6, d, &sim.initial_state);
                assert!((&x0 - &x).amax() < 1e-14, "{format} {dtype:?}: tokens");

                // The field of the first layer of the stack is checkpoint layer 1.
                let maps = direct_maps(&tensors, format, 1, d, dtype);
                let y = attention_output(&x, &maps, heads, causal);
                let mut dy = vec![0.0; 6 * d];
                sim.dynamics.rhs(&sim.initial_state, &mut dy);
                let got = DMatrix::from_row_slice(6, d, &dy);
                for k in 0..6 {
                    let yk = y.row(k);
                    let xk = x.row(k);
                    let tangent = yk - xk * yk.dot(&xk);
                    let err = (got.row(k) - &tangent).amax();
                    assert!(
                        err < 1e-12 * (1.0 + tangent.amax()),
                        "{format} {dtype:?} token {k}: {err:e}"
                    );
                    assert!(
                        tangent.amax() > 1e-3,
                        "a field that can be told apart from zero"
                    );
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 72);
}

// ---------------------------------------------------------------- layer boundaries

const TWO_LAYERS: &str = r#"
name = "stack"
[model]
kernel = "usa"
beta = 1.0
d = 3
[[model.layers]]
A = { random = "gaussian", seed = 3 }
V = { random = "gaussian", seed = 4 }
duration = 1.3
[[model.layers]]
heads = [{ A = "identity", V = { random = "gaussian", seed = 5 } }, { A = "zero", V = "identity" }]
duration = 0.7
[tokens]
n = 20
init = "uniform"
seed = 2
[time]
t_end = 2.0
samples = 7
[solver]
rtol = 1e-11
atol = 1e-13
"#;

fn final_state(
    s: &Scenario,
    model: ModelKind,
    tokens: Option<Vec<f64>>,
) -> tokdyn::integrate::Solution {
    let sim = match tokens {
        Some(t) => simulation::build_with_tokens(s, model, t).unwrap(),
        None => simulation::build(s, model).unwrap(),
    };
    let solution = solve(&sim.problem(), sim.method, &mut []).unwrap();
    assert!(solution.status.is_success());
    solution
}

#[test]
fn a_two_layer_run_equals_two_one_layer_runs_chained() {
    let base = Path::new("s.toml");
    let stack = Scenario::from_toml_str(TWO_LAYERS, base, Path::new("."), &[]).unwrap();
    let whole = final_state(&stack, ModelKind::Full, None);
    // Samples at t = 0, 1/3, ..., 2: the boundary t = 1.3 is not on the grid.
    assert_eq!(whole.boundaries.len(), 3);
    assert_eq!(whole.boundaries[1].t, 1.3);
    assert_eq!(whole.boundaries[2].t, 2.0);

    // The same two layers as two single-layer scenarios, the second from the first's end.
    let first = TWO_LAYERS
        .replace("[[model.layers]]\nA = ", "A = ")
        .replace("duration = 1.3\n", "")
        .replace(
            "[[model.layers]]\nheads = [{ A = \"identity\", V = { random = \"gaussian\", seed = 5 } }, { A = \"zero\", V = \"identity\" }]\nduration = 0.7\n",
            "",
        )
        .replace("t_end = 2.0", "t_end = 1.3");
    let one = Scenario::from_toml_str(&first, base, Path::new("."), &[]).unwrap();
    assert!(one.model.layers.is_empty());
    let mid = final_state(&one, ModelKind::Full, None);
    let second = TWO_LAYERS
        .replace(
            "[[model.layers]]\nA = { random = \"gaussian\", seed = 3 }\nV = { random = \"gaussian\", seed = 4 }\nduration = 1.3\n[[model.layers]]\n",
            "",
        )
        .replace("duration = 0.7\n", "")
        .replace("t_end = 2.0", "t_end = 0.7");
    let two = Scenario::from_toml_str(&second, base, Path::new("."), &[]).unwrap();
    assert!(two.model.layers.is_empty());
    let end = final_state(&two, ModelKind::Full, Some(mid.final_state.clone()));
    let diff = whole
        .final_state
        .iter()
        .zip(&end.final_state)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(diff < 1e-12, "two-layer run vs chained runs: {diff:e}");
    // The order parameters at the boundary are those at the end of the first run.
    let r_mid = one.model.heads.len();
    assert_eq!(r_mid, 1);
    let sim = simulation::build(&one, ModelKind::Full).unwrap();
    let o = sim.dynamics.order_parameters(&mid.final_state);
    assert!((o.r2 - whole.boundaries[1].order.r2).norm() < 1e-12);
    // Stepping across the boundary with either layer alone is far off.
    let layer0_only = Scenario::from_toml_str(
        &first.replace("t_end = 1.3", "t_end = 2.0"),
        base,
        Path::new("."),
        &[],
    )
    .unwrap();
    let wrong = final_state(&layer0_only, ModelKind::Full, None);
    let far = wrong
        .final_state
        .iter()
        .zip(&whole.final_state)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(far > 1e-3, "{far}");
}

#[test]
fn reductions_follow_the_stack_like_the_full_model() {
    let text = r#"
name = "stack2"
[model]
kernel = "lsa"
beta = 1.0
d = 2
[[layers]]
A = "identity"
V = "identity"
duration = 1.5
[[layers]]
A = [[1.0, 0.5], [-0.5, 0.2]]
V = [[0.2, 1.0], [-1.0, -0.2]]
duration = 2.5
[tokens]
n = 32
init = "poisson"
r0 = 0.3
[time]
t_end = 4.0
samples = 9
[solver]
rtol = 1e-11
atol = 1e-13
"#;
    let s = Scenario::from_toml_str(text, Path::new("s.toml"), Path::new("."), &[]).unwrap();
    let full = final_state(&s, ModelKind::Full, None);
    for model in [ModelKind::Phase, ModelKind::Ws, ModelKind::Group] {
        let red = final_state(&s, model, None);
        for (a, b) in full.boundaries.iter().zip(&red.boundaries) {
            assert_eq!(a.t, b.t);
            assert!(
                (a.order.r2 - b.order.r2).norm() < 1e-9,
                "{model}: {a:?} {b:?}"
            );
        }
        assert_eq!(red.boundaries.len(), 3);
    }
}

#[test]
fn the_group_model_follows_a_stack_in_three_dimensions() {
    // Phi' = M(t) Phi stays exact when M changes at the layer boundaries.
    let text = r#"
name = "stack3"
[model]
kernel = "lsa"
beta = 1.0
d = 3
[[model.layers]]
A = { random = "gaussian", seed = 4 }
V = { random = "gaussian", seed = 5 }
duration = 1.0
[[model.layers]]
heads = [{ A = "identity", V = { random = "gaussian", seed = 6 } }, { A = { random = "gaussian", seed = 7 }, V = "identity" }]
duration = 2.0
[tokens]
n = 50
init = "uniform"
seed = 3
[time]
t_end = 3.0
samples = 7
[solver]
rtol = 1e-11
atol = 1e-13
"#;
    let s = Scenario::from_toml_str(text, Path::new("s.toml"), Path::new("."), &[]).unwrap();
    let full = final_state(&s, ModelKind::Full, None);
    let group = final_state(&s, ModelKind::Group, None);
    assert_eq!(full.boundaries.len(), group.boundaries.len());
    for (a, b) in full.boundaries.iter().zip(&group.boundaries) {
        assert_eq!(a.t, b.t);
        assert!((a.order.r2 - b.order.r2).norm() < 1e-9, "{a:?} {b:?}");
        assert!(
            (a.order.nematic - b.order.nematic).abs() < 1e-9,
            "{a:?} {b:?}"
        );
    }
}

// ---------------------------------------------------------------- looped stacks

/// Layer 2 is layer 1's flow backwards (F_{-V/2} = -F_V / 2 acting twice as long), so every
/// pass returns the tokens to where they started: the stroboscopic series is constant.
const LOOP: &str = r#"
name = "loop"
[model]
kernel = "lsa"
beta = 1.0
d = 3
loop = true
[[model.layers]]
A = "identity"
V = "identity"
duration = 1.0
[[model.layers]]
A = "identity"
V = [[-0.5, 0, 0], [0, -0.5, 0], [0, 0, -0.5]]
duration = 2.0
[tokens]
n = 40
init = "uniform"
seed = 9
[time]
t_end = 60.0
samples = 601
[solver]
rtol = 1e-12
atol = 1e-14
"#;

#[test]
fn a_looped_stack_returns_to_its_start_every_pass_and_is_read_stroboscopically() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_file(dir.path(), "loop.toml", LOOP.as_bytes());
    let out = dir.path().join("out");
    let assert = Command::cargo_bin("tokdyn")
        .unwrap()
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    let csv = fs::read_to_string(out.join("layers.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "t,pass,layer,r2_re,r2_im,r2_abs,r2_arg,r1_abs,nematic"
    );
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    // t = 0 and two boundaries per pass, 20 passes.
    assert_eq!(rows.len(), 1 + 2 * 20);
    let start = &rows[0];
    let mut swing: f64 = 0.0;
    for r in &rows {
        if r[2] == 0.0 {
            assert_eq!(r[0], 3.0 * r[1]);
            for c in 3..9 {
                assert!(
                    (r[c] - start[c]).abs() < 1e-8,
                    "pass {}: column {c}: {} vs {}",
                    r[1],
                    r[c],
                    start[c]
                );
            }
        } else {
            assert_eq!(r[0], 3.0 * r[1] + 1.0);
            swing = swing.max((r[8] - start[8]).abs());
        }
    }
    assert!(swing > 1e-2, "within a pass the tokens move: {swing}");
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["stack"]["classified_on"], "stroboscopic");
    assert_eq!(summary["stack"]["passes"], 20);
    assert_eq!(summary["stack"]["loop"], true);
    let reason = summary["label_reason"].as_str().unwrap();
    assert!(reason.contains("stroboscopic"), "{reason}");
    assert!(stdout.contains("stroboscopic"), "{stdout}");
    // A fixed point of the pass map, not clustered: the tokens come back every pass.
    assert_eq!(summary["label"], "interior-point", "{reason}");
}

#[test]
fn the_resolved_scenario_of_a_checkpoint_run_reruns() {
    let dir = tempfile::tempdir().unwrap();
    let tensors = random_checkpoint("bert", 2, 8, 12, 5, true);
    write_file(
        dir.path(),
        "b.safetensors",
        &serialize(&tensors, Dtype::BF16),
    );
    let text = scenario_text("b.safetensors", "bert", "[1, 0, 1]", 2, "center = true");
    let s = Scenario::from_toml_str(&text, Path::new("s.toml"), dir.path(), &[]).unwrap();
    let checkpoint = s.resolved["model"]["checkpoint"].as_table().unwrap();
    assert_eq!(checkpoint["layers"].as_array().unwrap().len(), 3);
    assert!(s.resolved["model"].get("heads").is_none());
    // The resolved table is a scenario of its own, with the same tokens and layers.
    let again =
        Scenario::from_table(s.resolved.clone(), Path::new("r.toml"), Path::new("/")).unwrap();
    assert_eq!(again.initial_tokens().unwrap(), s.initial_tokens().unwrap());
    assert_eq!(again.model.layers, s.model.layers);
}

// ---------------------------------------------------------------- inspect

#[test]
fn inspect_lists_tensors_and_the_spectra_of_every_head() {
    let dir = tempfile::tempdir().unwrap();
    let (d, heads) = (16, 4);
    for format in ["gpt2", "bert"] {
        let tensors = random_checkpoint(format, 2, d, 10, 11, format == "bert");
        let path = write_file(
            dir.path(),
            &format!("{format}.safetensors"),
            &serialize(&tensors, Dtype::F16),
        );
        let out = dir.path().join(format!("inspect-{format}"));
        let assert = Command::cargo_bin("tokdyn")
            .unwrap()
            .args([
                "inspect",
                path.to_str().unwrap(),
                "--heads",
                "4",
                "--out",
                out.to_str().unwrap(),
            ])
            .assert()
            .success();
        let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
        assert!(
            stdout.contains(&format!(
                "format {format}, d = 16, 2 attention layers: [0, 1]"
            )),
            "{stdout}"
        );
        assert!(stdout.contains("F16"), "{stdout}");
        let csv = fs::read_to_string(out.join("heads.csv")).unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let rows: Vec<Vec<String>> = lines
            .map(|l| l.split(',').map(String::from).collect())
            .collect();
        assert_eq!(rows.len(), 2 * heads);
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        for row in &rows {
            let (l, h): (usize, usize) = (row[0].parse().unwrap(), row[1].parse().unwrap());
            let maps = direct_maps(&tensors, format, l, d, Dtype::F16);
            let dh = d / heads;
            let a = maps[0].columns(h * dh, dh) * maps[1].columns(h * dh, dh).transpose()
                / (dh as f64).sqrt();
            let v = (maps[2].columns(h * dh, dh) * maps[3].rows(h * dh, dh)).transpose();
            let sym = (&a + a.transpose()) / 2.0;
            let eig = sym.symmetric_eigenvalues();
            let max: f64 = row[col("a_sym_max")].parse().unwrap();
            assert!((max - eig.max()).abs() < 1e-10 * (1.0 + max.abs()));
            // rank d_h each: A_h and V_h have d - d_h zero eigenvalues.
            let radius: f64 = row[col("v_radius")].parse().unwrap();
            let trace_bound = v.norm();
            assert!(radius > 0.0 && radius <= trace_bound + 1e-12);
            let comm: f64 = row[col("commutator")].parse().unwrap();
            let direct = (&a * &v - &v * &a).norm() / (a.norm() * v.norm());
            assert!((comm - direct).abs() < 1e-12);
        }
    }
}

// ---------------------------------------------------------------- bad checkpoints

fn run_fails(dir: &Path, text: &str) -> String {
    let scenario = write_file(dir, "bad.toml", text.as_bytes());
    let out = Command::cargo_bin("tokdyn")
        .unwrap()
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--out",
            dir.join("o").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("bad.toml"), "{stderr}");
    stderr
}

#[test]
fn bad_checkpoints_are_input_errors_naming_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let d = 8;
    let good = random_checkpoint("gpt2", 2, d, 10, 1, false);
    let text = |file: &str| scenario_text(file, "gpt2", "[0, 1]", 2, "");

    // Missing tensor.
    let missing: Vec<Tensor> = random_checkpoint("gpt2", 2, d, 10, 1, false)
        .into_iter()
        .filter(|t| t.name != "h.1.attn.c_proj.weight")
        .collect();
    write_file(
        dir.path(),
        "missing.safetensors",
        &serialize(&missing, Dtype::F32),
    );
    let e = run_fails(dir.path(), &text("missing.safetensors"));
    assert!(
        e.contains("`h.1.attn.c_proj.weight`") && e.contains("missing"),
        "{e}"
    );

    // Wrong shape.
    let mut wrong = random_checkpoint("gpt2", 2, d, 10, 1, false);
    let t = wrong
        .iter_mut()
        .find(|t| t.name == "h.0.attn.c_attn.weight")
        .unwrap();
    t.shape = vec![d, 2 * d];
    t.values.truncate(2 * d * d);
    write_file(
        dir.path(),
        "shape.safetensors",
        &serialize(&wrong, Dtype::F32),
    );
    let e = run_fails(dir.path(), &text("shape.safetensors"));
    assert!(
        e.contains("`h.0.attn.c_attn.weight`") && e.contains("[8, 24]") && e.contains("[8, 16]"),
        "{e}"
    );

    // Heads not dividing d.
    write_file(
        dir.path(),
        "good.safetensors",
        &serialize(&good, Dtype::F32),
    );
    let e = run_fails(
        dir.path(),
        &scenario_text("good.safetensors", "gpt2", "[0]", 3, ""),
    );
    assert!(
        e.contains("model.checkpoint.heads") && e.contains("does not divide d = 8"),
        "{e}"
    );

    // Truncated file.
    let bytes = serialize(&good, Dtype::F32);
    write_file(dir.path(), "cut.safetensors", &bytes[..bytes.len() - 100]);
    let e = run_fails(dir.path(), &text("cut.safetensors"));
    assert!(e.contains("truncated") && e.contains('`'), "{e}");
    let last = {
        // The tensor whose data are cut: the one stored last (names are sorted in the file).
        let mut names: Vec<&str> = good.iter().map(|t| t.name.as_str()).collect();
        names.sort();
        names.last().unwrap().to_string()
    };
    assert!(e.contains(&format!("`{last}`")), "{e}");

    // Unknown dtype (an unsupported one, and one safetensors does not know).
    let ints = serialize(&good, Dtype::I32);
    write_file(dir.path(), "int.safetensors", &ints);
    let e = run_fails(dir.path(), &text("int.safetensors"));
    assert!(
        e.contains("dtype I32 is not supported") && e.contains("`h.0.attn.c_attn.weight`"),
        "{e}"
    );
    let mut odd = bytes.clone();
    let header_len = u64::from_le_bytes(odd[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8(odd[8..8 + header_len].to_vec()).unwrap();
    let pos = header.find("\"F32\"").unwrap();
    odd[8 + pos..8 + pos + 5].copy_from_slice(b"\"F7X\"");
    write_file(dir.path(), "odd.safetensors", &odd);
    let e = run_fails(dir.path(), &text("odd.safetensors"));
    assert!(
        e.contains("unknown dtype `F7X`") && e.contains("tensor `"),
        "{e}"
    );

    // Token ids out of range.
    let e = run_fails(
        dir.path(),
        &scenario_text("good.safetensors", "gpt2", "[0]", 2, "")
            .replace("ids = [3, 0, 7, 7, 11, 2]", "ids = [3, 10]"),
    );
    assert!(
        e.contains("tokens.ids") && e.contains("`wte.weight`") && e.contains("token id 10"),
        "{e}"
    );

    // Format, model.d mismatch, and the two spellings of the stack at once.
    let e = run_fails(
        dir.path(),
        &text("good.safetensors").replace("format = \"gpt2\"", "format = \"t5\""),
    );
    assert!(e.contains("model.checkpoint.format"), "{e}");
    // A gpt2 file read as llama: its llama tensors are missing.
    let e = run_fails(
        dir.path(),
        &text("good.safetensors").replace("format = \"gpt2\"", "format = \"llama\""),
    );
    assert!(e.contains("model.checkpoint"), "{e}");
    let e = run_fails(
        dir.path(),
        &text("good.safetensors").replace("beta = 1.0", "beta = 1.0\nd = 4"),
    );
    assert!(e.contains("model.d") && e.contains("d = 8"), "{e}");
    let both = TWO_LAYERS.to_string() + "\n[[layers]]\nA = \"identity\"\nV = \"identity\"\n";
    let e = run_fails(dir.path(), &both);
    assert!(e.contains("layers") && e.contains("not both"), "{e}");
    let e = run_fails(
        dir.path(),
        &TWO_LAYERS.replace("t_end = 2.0", "t_end = 2.5"),
    );
    assert!(
        e.contains("time.t_end") && e.contains("2.5") && e.contains("t = 2"),
        "{e}"
    );
}

// ---------------------------------------------------------------- the example checkpoint

/// The seeded checkpoint of `scenarios/real-tiny-gpt2.toml`: gpt2 layout, 2 layers, 4 heads,
/// d = 64, vocabulary 128, F32. `TOKDYN_WRITE_EXAMPLE=1 cargo test --release --test layers
/// example` writes it; otherwise the test checks that the file in `scenarios/` is this one.
#[test]
fn example_checkpoint_is_the_seeded_one() {
    let bytes = serialize(
        &random_checkpoint("gpt2", 2, 64, 128, 2026, false),
        Dtype::F32,
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tiny-gpt2.safetensors");
    if std::env::var_os("TOKDYN_WRITE_EXAMPLE").is_some() {
        fs::write(&path, &bytes).unwrap();
    }
    assert!(bytes.len() < 200 * 1024);
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "regenerate with TOKDYN_WRITE_EXAMPLE=1"
    );
}

/// `scenarios/tiny-gpt2-causal.safetensors` (the `real-gpt2-causal` scenario's checkpoint):
/// 2 layers of width 32, a vocabulary of 64, seeded weights. `TOKDYN_WRITE_EXAMPLE=1 cargo test
/// example` writes it; otherwise the test checks that the file in `scenarios/` is this one.
#[test]
fn example_causal_checkpoint_is_the_seeded_one() {
    let bytes = serialize(
        &random_checkpoint("gpt2", 2, 32, 64, 2028, false),
        Dtype::F32,
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tiny-gpt2-causal.safetensors");
    if std::env::var_os("TOKDYN_WRITE_EXAMPLE").is_some() {
        fs::write(&path, &bytes).unwrap();
    }
    assert!(bytes.len() < 64 * 1024);
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "regenerate with TOKDYN_WRITE_EXAMPLE=1"
    );
}
