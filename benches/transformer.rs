//! A real transformer's attention at its size: GPT-2-small's shape (d = 768, 12 heads of
//! d_h = 64), one causal `sa` layer at n = 512, evaluated with the heads kept factored
//! (Q, K, V, O) and with the same heads formed as d x d matrices (A, V); then a 12-layer
//! causal stack at n = 1024 integrated to the end (time and peak memory).
//!
//! A llama-shaped layer with and without RoPE (`-- rope`).
//!
//! Run: `cargo bench --bench transformer` (`-- eval`, `-- stack` or `-- rope` for one part). Prints the
//! time per evaluation, the speed-up, the factored products' flop rate, and whether the bytes
//! are the same at 1 and 2 threads. Figures in benches/README.md.

use std::time::Instant;

use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use tokdyn::integrate::{solve, Dynamics, Method, Piecewise, Problem};
use tokdyn::model::{Attention, FactoredHead, Kernel, Mask, SphereField};

const D: usize = 768;
const HEADS: usize = 12;

fn gaussian(rows: usize, cols: usize, std: f64, rng: &mut ChaCha8Rng) -> DMatrix<f64> {
    let normal = Normal::new(0.0, std).unwrap();
    DMatrix::from_fn(rows, cols, |_, _| normal.sample(rng))
}

/// One layer of GPT-2-small's shape with seeded factors (entries of size GPT-2's).
fn layer(seed: u64) -> Vec<FactoredHead> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dh = D / HEADS;
    (0..HEADS)
        .map(|_| FactoredHead {
            q: gaussian(D, dh, 0.2, &mut rng),
            k: gaussian(D, dh, 0.2, &mut rng),
            v: gaussian(D, dh, 0.05, &mut rng),
            o: gaussian(dh, D, 0.05, &mut rng),
        })
        .collect()
}

fn tokens(n: usize, d: usize) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let normal = Normal::new(0.0, 1.0).unwrap();
    let mut x: Vec<f64> = (0..n * d).map(|_| normal.sample(&mut rng)).collect();
    for row in x.chunks_exact_mut(d) {
        let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        row.iter_mut().for_each(|v| *v /= r);
    }
    x
}

/// The median seconds of `repeats` evaluations (after one warm-up) and the result.
fn time_eval(field: &SphereField, x: &[f64], repeats: usize) -> (f64, Vec<f64>) {
    let mut dx = vec![0.0; x.len()];
    field.eval(x, &mut dx);
    let mut times: Vec<f64> = (0..repeats)
        .map(|_| {
            let start = Instant::now();
            field.eval(x, &mut dx);
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[repeats / 2], dx)
}

fn in_pool<R: Send>(threads: usize, job: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(job)
}

/// Flops of one factored evaluation: the projections and the output (8 n d d_h per head)
/// and, under the causal mask, the pairs j <= k (2 n (n + 1) d_h per head, scores and values).
fn factored_flops(n: usize) -> f64 {
    let (n, d, dh) = (n as f64, D as f64, (D / HEADS) as f64);
    HEADS as f64 * (8.0 * n * d * dh + 2.0 * n * (n + 1.0) * dh)
}

fn evaluation() {
    let n = 512;
    let factors = layer(1);
    let factored = Attention::new(Kernel::Sa, 1.0, Vec::new())
        .with_factored(factors)
        .with_mask(Mask::Causal);
    let formed = factored.formed();
    let x = tokens(n, D);
    println!(
        "GPT-2-small shape: d = {D}, {HEADS} heads (d_h = {}), n = {n}, causal sa",
        D / HEADS
    );
    for threads in [1, 2] {
        let (t_factored, a) = in_pool(threads, || {
            time_eval(&SphereField::new(factored.clone(), n), &x, 9)
        });
        let (t_formed, b) = in_pool(threads, || {
            time_eval(&SphereField::new(formed.clone(), n), &x, 3)
        });
        let gflops = factored_flops(n) / t_factored / 1e9;
        let peak = 49.5 * threads as f64;
        let diff = a
            .iter()
            .zip(&b)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f64::max);
        println!(
            "{threads} thread(s): factored {:.1} ms, formed {:.1} ms, speed-up {:.1}x; factored {gflops:.1} GFlop/s = {:.0}% of peak {peak} GFlop/s; max |factored - formed| = {diff:.1e}",
            t_factored * 1e3,
            t_formed * 1e3,
            t_formed / t_factored,
            100.0 * gflops / peak
        );
    }
    let one = in_pool(1, || {
        time_eval(&SphereField::new(factored.clone(), n), &x, 1).1
    });
    let two = in_pool(2, || {
        time_eval(&SphereField::new(factored.clone(), n), &x, 1).1
    });
    println!("same bytes at 1 and 2 threads: {}", one == two);
}

/// Peak resident memory of this process (Linux VmHWM), in MB.
fn peak_memory_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// CPU seconds this process has used (user + system, Linux /proc/self/stat), which a busy
/// machine does not inflate the way it inflates wall time.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn stack() {
    let (n, layers) = (1024, 12);
    let pieces: Vec<Box<dyn Dynamics + Send + Sync>> = (0..layers)
        .map(|l| {
            let attention = Attention::new(Kernel::Sa, 1.0, Vec::new())
                .with_factored(layer(100 + l as u64))
                .with_mask(Mask::Causal);
            Box::new(SphereField::new(attention, n)) as Box<dyn Dynamics + Send + Sync>
        })
        .collect();
    let stack = Piecewise::new(pieces, vec![1.0; layers], false);
    let problem = Problem {
        dynamics: &stack,
        initial_state: tokens(n, D),
        t_end: layers as f64,
        samples: layers + 1,
    };
    let start = Instant::now();
    let cpu_start = cpu_seconds().unwrap_or(f64::NAN);
    let solution = solve(
        &problem,
        Method::Dop853 {
            rtol: 1e-8,
            atol: 1e-10,
        },
        &mut [],
    )
    .unwrap();
    println!(
        "12-layer causal stack, n = {n}, d = {D}: {:.1} s ({:.1} CPU s) to t = {}, {} evaluations ({:.0} ms each), success {}, peak memory {:.0} MB",
        start.elapsed().as_secs_f64(),
        cpu_seconds().unwrap_or(f64::NAN) - cpu_start,
        solution.t_last,
        solution.rhs_evals,
        start.elapsed().as_secs_f64() * 1e3 / solution.rhs_evals as f64,
        solution.status.is_success(),
        peak_memory_mb().unwrap_or(f64::NAN)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let only = args.iter().skip(1).find(|a| !a.starts_with('-'));
    if only.is_none_or(|a| a == "eval") {
        evaluation();
    }
    if only.is_none_or(|a| a == "stack") {
        stack();
    }
    if only.is_none_or(|a| a == "rope") {
        rope();
    }
}

/// A llama-shaped layer (d = 2048, 32 heads of d_h = 64 sharing 8 key/value heads), causal sa
/// at n = 512: one field evaluation with RoPE (base 10000) against the same layer without.
fn rope() {
    let (d, heads, kv, dh, n) = (2048, 32, 8, 64, 512);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let shared: Vec<(DMatrix<f64>, DMatrix<f64>)> = (0..kv)
        .map(|_| {
            (
                gaussian(d, dh, 0.03, &mut rng),
                gaussian(d, dh, 0.03, &mut rng),
            )
        })
        .collect();
    let factors: Vec<FactoredHead> = (0..heads)
        .map(|h| {
            let (k, v) = &shared[h / (heads / kv)];
            FactoredHead {
                q: gaussian(d, dh, 0.03, &mut rng),
                k: k.clone(),
                v: v.clone(),
                o: gaussian(dh, d, 0.03, &mut rng),
            }
        })
        .collect();
    let plain = Attention::new(Kernel::Sa, 1.0, Vec::new())
        .with_factored(factors)
        .with_mask(Mask::Causal);
    let rotary = plain
        .clone()
        .with_position(tokdyn::model::Position::Rope { base: 10000.0 });
    let x = tokens(n, d);
    println!(
        "llama shape: d = {d}, {heads} heads / {kv} kv heads (d_h = {dh}), n = {n}, causal sa"
    );
    let flops = heads as f64 * (8.0 * (n * d * dh) as f64 + 2.0 * (n * (n + 1) * dh) as f64);
    for threads in [1, 2] {
        let (t_plain, _) = in_pool(threads, || {
            time_eval(&SphereField::new(plain.clone(), n), &x, 5)
        });
        let (t_rope, _) = in_pool(threads, || {
            time_eval(&SphereField::new(rotary.clone(), n), &x, 5)
        });
        let peak = 49.5 * threads as f64;
        println!(
            "{threads} thread(s): no RoPE {:.1} ms, RoPE {:.1} ms, ratio {:.3}; RoPE {:.1} GFlop/s = {:.0}% of peak {peak} GFlop/s",
            t_plain * 1e3,
            t_rope * 1e3,
            t_rope / t_plain,
            flops / t_rope / 1e9,
            100.0 * flops / t_rope / 1e9 / peak
        );
    }
}
