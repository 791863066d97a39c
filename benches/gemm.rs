//! The matrix kernels of the pairwise field measured on its own shapes, one thread:
//! `matrixmultiply::dgemm` against the `gemm` crate (`Parallelism::None`).
//!
//! Shapes (n = 2000 tokens, d = 100): the score tile Z = X_c^T Q_b (nb x mb, inner dimension
//! d) and the value product F_b += U_c W (d x mb, inner dimension nb), for several tile sizes,
//! and the untiled products of the previous kernel (2000 x 512 x 100 and 100 x 512 x 2000).
//! Prints GFlop/s (2 m n k flops per product) for each; the best of 5 repeats of a loop that
//! runs about 0.2 s, timed by the thread's own CPU time (`/proc/thread-self/schedstat`, so that
//! other processes on a busy machine do not count). Run with `cargo bench --bench gemm`.
//!
//! `cargo bench --bench gemm -- field` instead times whole field evaluations of `usa` and `sa`
//! at n = 2000, d = 100 (random A, and A = I), by the process's CPU time (all threads; the
//! 2-core rate assumes both cores busy) and by wall time.

use std::hint::black_box;

/// Seconds this thread has spent on a CPU.
pub fn thread_cpu_seconds() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns: f64 = text
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    ns * 1e-9
}

/// (m, n, k, A row-major (true) or column-major, B column-major) - C column-major m x n.
fn time_one(m: usize, n: usize, k: usize, a_rows: bool, accumulate: bool, which: &str) -> f64 {
    let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
    let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos() * 1e-3).collect();
    let mut c = vec![0.0; m * n];
    let (a_rs, a_cs) = if a_rows { (k, 1) } else { (1, m) };
    let run = |c: &mut [f64]| unsafe {
        if which == "matrixmultiply" {
            matrixmultiply::dgemm(
                m,
                k,
                n,
                1.0,
                a.as_ptr(),
                a_rs as isize,
                a_cs as isize,
                b.as_ptr(),
                1,
                k as isize,
                if accumulate { 1.0 } else { 0.0 },
                c.as_mut_ptr(),
                1,
                m as isize,
            )
        } else {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                m as isize,
                1,
                accumulate,
                a.as_ptr(),
                a_cs as isize,
                a_rs as isize,
                b.as_ptr(),
                k as isize,
                1,
                1.0,
                1.0,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
    };
    run(&mut c);
    let flops = 2.0 * (m * n * k) as f64;
    let reps = ((0.2e9 * 20.0 / flops) as usize).max(1);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = thread_cpu_seconds();
        for _ in 0..reps {
            run(black_box(&mut c));
        }
        best = best.min((thread_cpu_seconds() - start) / reps as f64);
    }
    black_box(&c);
    flops / best / 1e9
}

/// Seconds of CPU time of the whole process (all threads), from /proc/self/stat (10 ms ticks).
fn process_cpu_seconds() -> f64 {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = text.rsplit(')').next().unwrap_or("");
    let fields: Vec<f64> = after
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // utime and stime are fields 14 and 15 of the line: 10 and 11 among the numbers after the
    // command name (the state letter, field 3, is not a number).
    (fields.get(10).unwrap_or(&0.0) + fields.get(11).unwrap_or(&0.0)) / 100.0
}

fn field_evaluations() {
    use nalgebra::DMatrix;
    use tokdyn::model::{Attention, Head, Kernel, SphereField};
    let (n, d) = (2000, 100);
    let mut state = 7u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let random = DMatrix::from_fn(d, d, |_, _| next() * (3.0 / d as f64).sqrt());
    let v = DMatrix::from_fn(d, d, |i, j| if i == j { 0.5 } else { -0.2 / d as f64 });
    let mut x: Vec<f64> = (0..n * d)
        .map(|i| (i as f64 * 0.618_033_988_7).sin())
        .collect();
    for row in x.chunks_exact_mut(d) {
        let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        row.iter_mut().for_each(|v| *v /= r);
    }
    println!("| kernel | A | ms per evaluation (CPU, both cores) | ms (wall) | GFlop/s per core (CPU) | GFlop/s 2 cores (CPU) |");
    println!("|---|---|---:|---:|---:|---:|");
    for (kernel, name, a) in [
        (Kernel::Usa, "random", random.clone()),
        (Kernel::Sa, "random", random.clone()),
        (Kernel::Usa, "I", DMatrix::identity(d, d)),
        (Kernel::Sa, "I", DMatrix::identity(d, d)),
    ] {
        let symmetric = name == "I";
        let head = Head { a, v: v.clone() };
        let field = SphereField::new(Attention::new(kernel, 1.0, vec![head]), n);
        let mut dx = vec![0.0; n * d];
        field.eval(&x, &mut dx);
        let evals = 20;
        let (cpu, wall) = (process_cpu_seconds(), std::time::Instant::now());
        for _ in 0..evals {
            field.eval(black_box(&x), &mut dx);
        }
        let cpu = (process_cpu_seconds() - cpu) / evals as f64;
        let wall = wall.elapsed().as_secs_f64() / evals as f64;
        let pairs = if symmetric { 3.0 } else { 4.0 };
        let flops = pairs * (n * n * d) as f64 + 4.0 * (n * d * d) as f64;
        println!(
            "| {kernel:?} | {name} | {:.1} | {:.1} | {:.1} | {:.1} |",
            cpu * 1e3 / 2.0,
            wall * 1e3,
            flops / cpu / 1e9,
            2.0 * flops / cpu / 1e9
        );
    }
}

/// n unit tokens in d dimensions, queries beta A^T x (A random, or I) and values V x.
fn token_pairs(n: usize, d: usize, identity: bool) -> [Vec<f64>; 3] {
    let mut state = 11u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let mut unit: Vec<f64> = (0..n * d).map(|_| next()).collect();
    for row in unit.chunks_exact_mut(d) {
        let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        row.iter_mut().for_each(|v| *v /= r);
    }
    let a: Vec<f64> = (0..d * d)
        .map(|i| {
            if identity {
                f64::from(u8::from(i % (d + 1) == 0))
            } else {
                next() * (3.0 / d as f64).sqrt()
            }
        })
        .collect();
    let v: Vec<f64> = (0..d * d).map(|_| next() / d as f64).collect();
    let apply = |m: &[f64]| -> Vec<f64> {
        unit.chunks_exact(d)
            .flat_map(|x| (0..d).map(move |r| (0..d).map(|c| m[r * d + c] * x[c]).sum::<f64>()))
            .collect()
    };
    let (query, value) = (apply(&a), apply(&v));
    [unit, query, value]
}

/// The tiled kernels alone on one thread (`cargo bench --bench gemm -- tiles`): GFlop/s by
/// the thread's CPU time for several tile sizes, n = 2000, d = 100.
fn tile_sizes() {
    use tokdyn::model::tiles::{
        general_scratch_len, general_tiles, symmetric_scratch_len, symmetric_tiles, Pairs, Tiles,
    };
    let (n, d) = (2000, 100);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let time = |run: &mut (dyn FnMut() + Send)| {
        pool.install(|| {
            run();
            let mut best = f64::INFINITY;
            for _ in 0..3 {
                let start = thread_cpu_seconds();
                for _ in 0..3 {
                    run();
                }
                best = best.min((thread_cpu_seconds() - start) / 3.0);
            }
            best
        })
    };
    let random = token_pairs(n, d, false);
    println!("| kernel | tile (keys x queries) | ms per evaluation (one core) | GFlop/s |");
    println!("|---|---|---:|---:|");
    let flops = 4.0 * (n * n * d) as f64;
    for (keys, queries) in [
        (128, 60),
        (128, 64),
        (256, 60),
        (128, 120),
        (256, 120),
        (64, 60),
        (96, 60),
        (192, 60),
        (128, 48),
        (128, 90),
    ] {
        for softmax in [false, true] {
            let pairs = Pairs {
                keys: &random[0],
                query: &random[1],
                value: &random[2],
                key_d: d,
                value_d: d,
            };
            let tiles = Tiles { keys, queries };
            let mut scratch = vec![0.0; general_scratch_len(n, d, tiles)];
            let mut f = vec![0.0; n * d];
            let t = time(&mut || general_tiles(pairs, &mut f, softmax, tiles, &mut scratch));
            let name = if softmax { "sa" } else { "usa" };
            println!(
                "| {name} random A | {keys} x {queries} | {:.1} | {:.1} |",
                t * 1e3,
                flops / t / 1e9
            );
        }
    }
    let identity = token_pairs(n, d, true);
    let flops = 3.0 * (n * n * d) as f64;
    for tile in [64, 96, 120, 144] {
        for softmax in [false, true] {
            let pairs = Pairs {
                keys: &identity[0],
                query: &identity[1],
                value: &identity[2],
                key_d: d,
                value_d: d,
            };
            let mut scratch = vec![0.0; symmetric_scratch_len(n, d, tile)];
            let mut f = vec![0.0; n * d];
            let t = time(&mut || symmetric_tiles(pairs, &mut f, softmax, tile, &mut scratch));
            let name = if softmax { "sa" } else { "usa" };
            println!(
                "| {name} A = I (symmetric) | {tile} x {tile} | {:.1} | {:.1} (3 n^2 d) |",
                t * 1e3,
                flops / t / 1e9
            );
        }
    }
}

fn main() {
    if std::env::args().any(|a| a == "field") {
        return field_evaluations();
    }
    if std::env::args().any(|a| a == "tiles") {
        return tile_sizes();
    }
    let (n, d) = (2000, 100);
    let mut shapes = vec![];
    for (nb, mb) in [
        (64, 64),
        (128, 64),
        (128, 128),
        (256, 64),
        (256, 128),
        (256, 256),
        (512, 128),
    ] {
        shapes.push((format!("Z tile {nb}x{mb}x{d}"), nb, mb, d, true, false));
        shapes.push((format!("F tile {d}x{mb}x{nb} (+=)"), d, mb, nb, false, true));
    }
    shapes.push((format!("Z full {n}x512x{d}"), n, 512, d, true, false));
    shapes.push((format!("F full {d}x512x{n}"), d, 512, n, false, false));
    println!("| shape (m x n x k) | matrixmultiply GFlop/s | gemm GFlop/s |");
    println!("|---|---:|---:|");
    for (name, m, nn, k, a_rows, acc) in shapes {
        let mm = time_one(m, nn, k, a_rows, acc, "matrixmultiply");
        let gg = time_one(m, nn, k, a_rows, acc, "gemm");
        println!("| {name} | {mm:.1} | {gg:.1} |");
    }
}
