//! Llama-layout checkpoints (docs/MATH.md §16): a checkpoint this test writes (grouped-query
//! heads, random RMSNorm gains, BF16) read by a scenario, against the model's own attention
//! written here the way Hugging Face's Llama computes it (RMSNorm without eps, q/k/v/o
//! projections in PyTorch [out, in] order, rotate_half RoPE, causal softmax, scores over
//! sqrt(d_h)); and the bad inputs of the layout.

use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use tokdyn::model::SphereField;
use tokdyn::scenario::Scenario;
use tokdyn::simulation;

const D: usize = 8;
const H: usize = 4;
const KV: usize = 2;
const E: usize = 4; // head_dim: H E = 16 != D
const VOCAB: usize = 20;
const THETA: f64 = 500.0;

fn bf16(v: f64) -> f64 {
    half::bf16::from_f64(v).to_f64()
}

/// A tensor's name, PyTorch shape and values (already rounded to BF16).
struct Tensor(String, Vec<usize>, Vec<f64>);

struct Weights {
    q: Vec<f64>,    // [H E, D]
    k: Vec<f64>,    // [KV E, D]
    v: Vec<f64>,    // [KV E, D]
    o: Vec<f64>,    // [D, H E]
    gain: Vec<f64>, // [D]
}

fn random(rng: &mut ChaCha8Rng, len: usize, std: f64, mean: f64) -> Vec<f64> {
    let normal = Normal::new(mean, std).unwrap();
    (0..len).map(|_| bf16(normal.sample(rng))).collect()
}

fn weights(seed: u64) -> Weights {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Weights {
        q: random(&mut rng, H * E * D, 0.5, 0.0),
        k: random(&mut rng, KV * E * D, 0.5, 0.0),
        v: random(&mut rng, KV * E * D, 0.4, 0.0),
        o: random(&mut rng, D * H * E, 0.4, 0.0),
        gain: random(&mut rng, D, 0.2, 0.3),
    }
}

fn write_checkpoint(dir: &Path, w: &Weights, config: Option<&str>) {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let embed = random(&mut rng, VOCAB * D, 1.0, 0.0);
    let l = "model.layers.0";
    let tensors = [
        Tensor("model.embed_tokens.weight".into(), vec![VOCAB, D], embed),
        Tensor(
            format!("{l}.self_attn.q_proj.weight"),
            vec![H * E, D],
            w.q.clone(),
        ),
        Tensor(
            format!("{l}.self_attn.k_proj.weight"),
            vec![KV * E, D],
            w.k.clone(),
        ),
        Tensor(
            format!("{l}.self_attn.v_proj.weight"),
            vec![KV * E, D],
            w.v.clone(),
        ),
        Tensor(
            format!("{l}.self_attn.o_proj.weight"),
            vec![D, H * E],
            w.o.clone(),
        ),
        Tensor(
            format!("{l}.input_layernorm.weight"),
            vec![D],
            w.gain.clone(),
        ),
    ];
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|Tensor(n, s, v)| {
            let bytes = v
                .iter()
                .flat_map(|x| half::bf16::from_f64(*x).to_le_bytes())
                .collect();
            (n.clone(), s.clone(), bytes)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                TensorView::new(Dtype::BF16, s.clone(), b).unwrap(),
            )
        })
        .collect();
    std::fs::write(
        dir.join("model.safetensors"),
        safetensors::serialize(views, None).unwrap(),
    )
    .unwrap();
    if let Some(config) = config {
        std::fs::write(dir.join("config.json"), config).unwrap();
    }
}

fn config(heads: usize, kv: usize, hidden: usize) -> String {
    format!(
        r#"{{"hidden_size": {hidden}, "num_attention_heads": {heads}, "num_key_value_heads": {kv}, "head_dim": {E}, "rope_theta": {THETA}, "rms_norm_eps": 1e-6}}"#
    )
}

fn scenario_text(extra: &str) -> String {
    format!(
        "name = \"llama\"\n[model]\nkernel = \"sa\"\nbeta = 1.0\n{extra}\n[model.checkpoint]\npath = \"model.safetensors\"\nformat = \"llama\"\nlayers = [0]\n\n[tokens]\ninit = \"embedding\"\nids = [1, 5, 7, 2, 19, 3, 11]\n\n[time]\nt_end = 1.0\nsamples = 3\n"
    )
}

fn load(dir: &Path, extra: &str) -> Result<Scenario, String> {
    let text = scenario_text(extra);
    Scenario::from_toml_str(&text, &dir.join("s.toml"), dir, &[]).map_err(|e| e.to_string())
}

/// W x for a PyTorch [rows, cols] weight (row-major) and a vector x of cols numbers.
fn apply(w: &[f64], rows: usize, x: &[f64]) -> Vec<f64> {
    let cols = x.len();
    (0..rows)
        .map(|r| (0..cols).map(|c| w[r * cols + c] * x[c]).sum())
        .collect()
}

fn rope(x: &[f64], position: usize) -> Vec<f64> {
    let half = x.len() / 2;
    let mut out = x.to_vec();
    for i in 0..half {
        let angle = position as f64 * THETA.powf(-2.0 * i as f64 / x.len() as f64);
        let (s, c) = angle.sin_cos();
        // x cos + rotate_half(x) sin, rotate_half(x) = [-x2, x1].
        out[i] = x[i] * c - x[i + half] * s;
        out[i + half] = x[i + half] * c + x[i] * s;
    }
    out
}

/// The model's attention update of the stream `x` (n x D): RMSNorm (no eps), grouped-query
/// heads, RoPE, causal softmax.
fn model_update(w: &Weights, x: &[f64], with_rope: bool) -> (Vec<f64>, Vec<Vec<Vec<f64>>>) {
    let n = x.len() / D;
    let normed: Vec<Vec<f64>> = x
        .chunks_exact(D)
        .map(|r| {
            let rms = (r.iter().map(|v| v * v).sum::<f64>() / D as f64).sqrt();
            r.iter().zip(&w.gain).map(|(v, g)| g * v / rms).collect()
        })
        .collect();
    let q: Vec<Vec<f64>> = normed.iter().map(|z| apply(&w.q, H * E, z)).collect();
    let k: Vec<Vec<f64>> = normed.iter().map(|z| apply(&w.k, KV * E, z)).collect();
    let v: Vec<Vec<f64>> = normed.iter().map(|z| apply(&w.v, KV * E, z)).collect();
    let mut out = vec![0.0; n * D];
    let mut all_scores = Vec::new();
    for h in 0..H {
        let g = h / (H / KV);
        let mut head_scores = Vec::new();
        let mut concat = vec![vec![0.0; E]; n];
        for t in 0..n {
            let qt = &q[t][h * E..(h + 1) * E];
            let qt = if with_rope { rope(qt, t) } else { qt.to_vec() };
            let scores: Vec<f64> = (0..=t)
                .map(|j| {
                    let kj = &k[j][g * E..(g + 1) * E];
                    let kj = if with_rope { rope(kj, j) } else { kj.to_vec() };
                    qt.iter().zip(&kj).map(|(a, b)| a * b).sum::<f64>() / (E as f64).sqrt()
                })
                .collect();
            let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
            let total: f64 = e.iter().sum();
            for (j, wj) in e.iter().enumerate() {
                for c in 0..E {
                    concat[t][c] += wj / total * v[j][g * E + c];
                }
            }
            head_scores.push(scores);
        }
        all_scores.push(head_scores);
        // o_proj's columns h E .. (h + 1) E.
        for t in 0..n {
            for r in 0..D {
                let row = &w.o[r * H * E + h * E..r * H * E + (h + 1) * E];
                out[t * D + r] += row.iter().zip(&concat[t]).map(|(a, b)| a * b).sum::<f64>();
            }
        }
    }
    (out, all_scores)
}

fn stream(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let normal = Normal::new(0.0, 1.0).unwrap();
    (0..n * D).map(|_| normal.sample(&mut rng)).collect()
}

#[test]
fn a_llama_layer_is_the_models_own_attention_on_the_rms_normalised_stream() {
    let dir = tempfile::tempdir().unwrap();
    let w = weights(1);
    write_checkpoint(dir.path(), &w, Some(&config(H, KV, D)));
    let s = load(dir.path(), "").unwrap();
    // The llama defaults: causal, pre-LN, RoPE from rope_theta.
    assert_eq!(s.model.mask.to_string(), "causal");
    assert_eq!(s.model.normalization.to_string(), "pre");
    assert_eq!(
        s.model.position,
        tokdyn::scenario::PositionSpec::Rope { base: THETA }
    );
    assert_eq!(s.model.layers[0].factored.len(), H);
    let n = 7;
    let x = stream(n, 3);
    let (attention, _) = simulation::layer_attentions(&s).remove(0);
    let mut dx = vec![0.0; n * D];
    SphereField::new(attention, n).eval(&x, &mut dx);
    let (expected, _) = model_update(&w, &x, true);
    let scale = expected.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    for (a, b) in dx.iter().zip(&expected) {
        assert!((a - b).abs() < 1e-12 * scale, "{a} vs {b}");
    }
    // Without RoPE the update differs (the test could fail).
    let (plain, _) = model_update(&w, &x, false);
    assert!(dx
        .iter()
        .zip(&plain)
        .any(|(a, b)| (a - b).abs() > 1e-3 * scale));
}

#[test]
fn folded_heads_give_the_models_scores_and_unfolded_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let w = weights(2);
    write_checkpoint(dir.path(), &w, Some(&config(H, KV, D)));
    let n = 6;
    let x = stream(n, 4);
    let (_, model_scores) = model_update(&w, &x, false);
    let z: Vec<Vec<f64>> = x
        .chunks_exact(D)
        .map(|r| {
            let norm = r.iter().map(|v| v * v).sum::<f64>().sqrt();
            r.iter().map(|v| v / norm).collect()
        })
        .collect();
    for (fold, expect_equal) in [("", true), ("fold_norm = false", false)] {
        let extra = "position = \"none\"";
        let text =
            scenario_text(extra).replace("layers = [0]\n", &format!("layers = [0]\n{fold}\n"));
        let s =
            Scenario::from_toml_str(&text, &dir.path().join("s.toml"), dir.path(), &[]).unwrap();
        let heads = &s.model.layers[0].factored;
        let mut worst: f64 = 0.0;
        for (h, head) in heads.iter().enumerate() {
            let project = |m: &nalgebra::DMatrix<f64>, v: &[f64]| -> Vec<f64> {
                (0..E)
                    .map(|c| (0..D).map(|r| m[(r, c)] * v[r]).sum())
                    .collect()
            };
            for t in 0..n {
                let q = project(&head.q, &z[t]);
                for j in 0..=t {
                    let k = project(&head.k, &z[j]);
                    let score =
                        q.iter().zip(&k).map(|(a, b)| a * b).sum::<f64>() / (E as f64).sqrt();
                    worst = worst.max((score - model_scores[h][t][j]).abs());
                }
            }
        }
        assert_eq!(worst < 1e-12, expect_equal, "{fold}: {worst}");
    }
}

#[test]
fn bad_llama_checkpoints_name_the_key() {
    let cases: Vec<(Option<String>, &str, &str)> = vec![
        (None, "", "model.checkpoint.config"),
        (Some(config(H, 3, D)), "", "model.checkpoint.config"),
        (Some(config(H, KV, 12)), "", "model.checkpoint.config"),
        (Some(config(2, KV, D)), "", "model.checkpoint"),
        (
            Some(config(H, KV, D)),
            "position = { rope = { base = 10000.0 } }\nd = 6",
            "model.d",
        ),
        (
            Some("{\"hidden_size\": 8}".into()),
            "",
            "model.checkpoint.config",
        ),
    ];
    for (config, extra, key) in cases {
        let dir = tempfile::tempdir().unwrap();
        write_checkpoint(dir.path(), &weights(3), config.as_deref());
        let e = match load(dir.path(), extra) {
            Ok(s) => match simulation::build(&s, s.run.model) {
                Ok(_) => panic!("accepted: {config:?} {extra}"),
                Err(e) => e.to_string(),
            },
            Err(e) => e,
        };
        assert!(e.contains(&format!("{key}:")), "{key}: {e}");
    }
}

// ---------------------------------------------------------------- gpt2 position embeddings

fn write_f32(path: &Path, tensors: &[Tensor]) {
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|Tensor(n, s, v)| {
            let bytes = v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect();
            (n.clone(), s.clone(), bytes)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
            )
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

#[test]
fn gpt2_embedding_starts_add_the_position_embeddings() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let f32s = |v: Vec<f64>| {
        v.into_iter()
            .map(|x| f64::from(x as f32))
            .collect::<Vec<_>>()
    };
    let wte = f32s(random(&mut rng, VOCAB * D, 1.0, 0.0));
    let wpe = f32s(random(&mut rng, 10 * D, 0.5, 0.0));
    let qkv = f32s(random(&mut rng, D * 3 * D, 0.3, 0.0));
    let proj = f32s(random(&mut rng, D * D, 0.3, 0.0));
    write_f32(
        &dir.path().join("g.safetensors"),
        &[
            Tensor("wte.weight".into(), vec![VOCAB, D], wte.clone()),
            Tensor("wpe.weight".into(), vec![10, D], wpe.clone()),
            Tensor("h.0.attn.c_attn.weight".into(), vec![D, 3 * D], qkv),
            Tensor("h.0.attn.c_proj.weight".into(), vec![D, D], proj),
        ],
    );
    let ids = [4usize, 4, 9, 0, 13];
    let text = |extra: &str| {
        format!(
            "name = \"g\"\n[model]\nkernel = \"sa\"\nbeta = 1.0\n[model.checkpoint]\npath = \"g.safetensors\"\nformat = \"gpt2\"\nlayers = [0]\nheads = 2\n[tokens]\ninit = \"embedding\"\nids = {ids:?}\n{extra}\n[time]\nt_end = 1.0\nsamples = 3\n"
        )
    };
    let start = |extra: &str| -> Result<Vec<f64>, String> {
        let s = Scenario::from_toml_str(&text(extra), &dir.path().join("s.toml"), dir.path(), &[])
            .map_err(|e| e.to_string())?;
        Ok(simulation::build(&s, s.run.model)
            .map_err(|e| e.to_string())?
            .initial_state)
    };
    let expected = |with_positions: bool| -> Vec<f64> {
        ids.iter()
            .enumerate()
            .flat_map(|(k, &id)| {
                let row: Vec<f64> = (0..D)
                    .map(|c| wte[id * D + c] + if with_positions { wpe[k * D + c] } else { 0.0 })
                    .collect();
                let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt();
                row.into_iter().map(move |v| v / norm)
            })
            .collect()
    };
    let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-14);
    let default = start("").unwrap();
    assert!(close(&default, &expected(true)));
    // Tokens 1 and 2 share an id: only their positions tell them apart.
    assert!((0..D).any(|c| (default[c] - default[D + c]).abs() > 1e-3));
    assert!(close(
        &start("positions = false").unwrap(),
        &expected(false)
    ));
    // More tokens than positions, and positions asked of a file without them.
    let long = text("").replace(&format!("{ids:?}"), &format!("{:?}", [1usize; 11]));
    let e = Scenario::from_toml_str(&long, &dir.path().join("s.toml"), dir.path(), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tokens.positions:") && e.contains("11 tokens"),
        "{e}"
    );
}

#[test]
fn inspect_reads_a_llama_checkpoint_and_says_which_heads_share_keys() {
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(dir.path(), &weights(6), Some(&config(H, KV, D)));
    let out = dir.path().join("inspect");
    let ckpt = dir.path().join("model.safetensors");
    let report =
        tokdyn::command::inspect::inspect(&ckpt, Some(H), None, Some(out.clone())).unwrap();
    assert_eq!(report.format.to_string(), "llama");
    let kv: Vec<usize> = report.heads.iter().map(|r| r.kv).collect();
    assert_eq!(kv, vec![0, 0, 1, 1]);
    // Heads of width E = 4: at most 4 positive directions of sym(A_h).
    assert!(report.heads.iter().all(|r| r.a_sym_positive <= E));
    let csv = std::fs::read_to_string(out.join("heads.csv")).unwrap();
    assert!(csv.starts_with("layer,head,kv,"), "{csv}");
    // Wrong head count, and no config.json.
    assert!(tokdyn::command::inspect::inspect(&ckpt, Some(2), None, None).is_err());
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    let e = tokdyn::command::inspect::inspect(&ckpt, Some(H), None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("config.json"), "{e}");
}
