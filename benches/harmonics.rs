//! The spherical-harmonics kernel against the direct kernel, one field evaluation on S^2
//! (d = 3, A = I, V = I, tokens uniform on the sphere; docs/DESIGN.md "Harmonics kernel").
//!
//! `cargo bench --bench harmonics` prints, for `usa` and `sa` at beta = 4, the CPU seconds of
//! one evaluation (CPU seconds, all threads) for each n and each kernel, their ratio, the degree L, and for the harmonics
//! the arithmetic rate (about 20 flops per harmonic per token per head) and the peak resident
//! memory. `-- --large` adds n = 10^5 and 10^6 (harmonics only); `-- --beta B` changes beta.

use std::hint::black_box;

use nalgebra::DMatrix;
use tokdyn::model::{Attention, Head, Kernel, KernelChoice, KernelMethod, SphereField};

/// Uniform-ish points on S^2: the Fibonacci sphere, turned so that no axis is special.
fn tokens(n: usize) -> Vec<f64> {
    let golden = std::f64::consts::PI * (3.0 - 5f64.sqrt());
    (0..n)
        .flat_map(|k| {
            let z = 1.0 - (2.0 * k as f64 + 1.0) / n as f64;
            let r = (1.0 - z * z).sqrt();
            let phi = golden * k as f64;
            let (x, y) = (r * phi.cos(), r * phi.sin());
            // A fixed rotation about (1, 1, 1).
            let c = 0.3f64.cos();
            let s = 0.3f64.sin() / 3f64.sqrt();
            let t = (1.0 - c) / 3.0;
            [
                (c + t) * x + (t - s) * y + (t + s) * z,
                (t + s) * x + (c + t) * y + (t - s) * z,
                (t - s) * x + (t + s) * y + (c + t) * z,
            ]
        })
        .collect()
}

/// CPU seconds (user + system, all threads) of this process so far, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let rest = text.rsplit(')').next().unwrap_or("");
    let fields: Vec<f64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0.0))
        .collect();
    (fields.get(11).unwrap_or(&0.0) + fields.get(12).unwrap_or(&0.0)) / 100.0
}

/// CPU seconds of one evaluation (all threads; evaluations for at least `min_time` seconds of
/// CPU and at least 3): the machine is shared, so wall time would count other processes.
fn cpu_per_eval(field: &SphereField, x: &[f64], min_time: f64) -> f64 {
    let mut dx = vec![0.0; x.len()];
    field.eval(x, &mut dx);
    let start = cpu_seconds();
    let mut count = 0;
    while count < 3 || cpu_seconds() - start < min_time {
        field.eval(black_box(x), &mut dx);
        black_box(&dx);
        count += 1;
    }
    (cpu_seconds() - start) / count as f64
}

/// Peak resident memory (VmHWM) in MB.
fn peak_memory_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let large = args.iter().any(|a| a == "--large");
    let beta = args
        .iter()
        .position(|a| a == "--beta")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(4.0);
    let mut sizes: Vec<usize> = match std::env::var("HARMONICS_SIZES") {
        Ok(list) => list.split(',').filter_map(|s| s.parse().ok()).collect(),
        Err(_) => vec![500, 1000, 2000, 5000, 10_000, 20_000],
    };
    if large {
        sizes.extend([100_000, 1_000_000]);
    }
    println!(
        "threads {}, beta {beta}, A = V = I, d = 3",
        rayon::current_num_threads()
    );
    println!("kernel n L direct_s harmonics_s ratio harmonics_gflops peak_mb");
    for kernel in [Kernel::Usa, Kernel::Sa] {
        for &n in &sizes {
            let x = tokens(n);
            let attention = Attention::new(
                kernel,
                beta,
                vec![Head {
                    a: DMatrix::identity(3, 3),
                    v: DMatrix::identity(3, 3),
                }],
            );
            let harmonics =
                SphereField::with_kernel_method(attention.clone(), n, KernelMethod::Harmonics)
                    .expect("A = I at this beta is within the limit");
            let KernelChoice::Harmonics { terms } = harmonics.kernel_choice() else {
                unreachable!("harmonics were asked for")
            };
            let fast = cpu_per_eval(&harmonics, &x, 0.5);
            let direct = (n <= 20_000).then(|| {
                let field =
                    SphereField::with_kernel_method(attention, n, KernelMethod::Direct).unwrap();
                cpu_per_eval(&field, &x, 0.5)
            });
            // About 20 flops per harmonic per token: 10 for the moments (4 products and sums,
            // the recurrence) and 10 for the evaluation of one head.
            let flops = 20.0 * ((terms + 1) * (terms + 1)) as f64 * n as f64;
            println!(
                "{} {n} {terms} {} {fast:.3e} {} {:.2} {:.0}",
                if kernel == Kernel::Usa { "usa" } else { "sa" },
                direct.map_or("-".into(), |d| format!("{d:.3e}")),
                direct.map_or("-".into(), |d| format!("{:.1}", d / fast)),
                flops / fast * 1e-9,
                peak_memory_mb(),
            );
        }
    }
}
