//! Deterministic parallel sums over tokens.
//!
//! Floating-point addition is not associative, so a sum whose grouping depends on how rayon
//! splits the work would change in the last bits with the thread count. Every sum over tokens in
//! tokdyn therefore goes through fixed-size chunks of [`TOKENS_PER_CHUNK`] tokens: each chunk is
//! reduced on whatever thread picks it up, and the chunk results are added in chunk order. The
//! result is bit-identical for any `RAYON_NUM_THREADS`.

use rayon::prelude::*;

/// Tokens per chunk of work; fixed, so that results do not depend on the thread count.
pub const TOKENS_PER_CHUNK: usize = 2048;

/// Runs `work` on a thread of rayon's global pool and returns its result. Called from outside
/// the pool, every parallel loop hands its work to a worker and puts the caller to sleep until it
/// is done: two context switches per loop, some 20 us, more than a field evaluation of a few
/// tokens (n = 4, d = 100 spent 40% of its time in them). From inside, a loop starts on the
/// calling thread. The results are the same bits: every sum over tokens is chunked
/// independently of the threads. The command line and the Python module run their commands so.
pub fn on_the_pool<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| work())
}

/// Number of chunks that `n` tokens are split into.
pub fn chunk_count(n: usize) -> usize {
    n.div_ceil(TOKENS_PER_CHUNK).max(1)
}

/// Sums a per-chunk quantity of `width` numbers over the tokens of `data` (rows of `stride`
/// numbers), deterministically.
///
/// `partials` is caller-owned scratch of at least `width * chunk_count(n)` numbers, so that the
/// hot path does not allocate; `kernel(rows, acc)` adds the contribution of `rows` into `acc`
/// (which starts at zero). The chunk results are added in order into `out` (overwritten).
pub fn chunked_sum<K>(
    data: &[f64],
    stride: usize,
    width: usize,
    partials: &mut [f64],
    out: &mut [f64],
    kernel: K,
) where
    K: Fn(&[f64], &mut [f64]) + Sync,
{
    let n = data.len() / stride;
    let chunks = chunk_count(n);
    if chunks == 1 {
        // One chunk: no thread hand-off (it costs more than the work for small n).
        out[..width].fill(0.0);
        kernel(data, &mut out[..width]);
        return;
    }
    let partials = &mut partials[..width * chunks];
    partials
        .par_chunks_mut(width)
        .zip(data.par_chunks(TOKENS_PER_CHUNK * stride))
        .for_each(|(acc, rows)| {
            acc.fill(0.0);
            kernel(rows, acc);
        });
    out[..width].fill(0.0);
    for acc in partials.chunks(width) {
        for (o, a) in out.iter_mut().zip(acc) {
            *o += a;
        }
    }
}

/// Applies `f` to matching chunks of [`TOKENS_PER_CHUNK`] rows of `out` (rows of `out_stride`)
/// and `input` (rows of `in_stride`), in parallel when there is more than one chunk.
pub fn for_each_chunk<F>(out: &mut [f64], out_stride: usize, input: &[f64], in_stride: usize, f: F)
where
    F: Fn(&mut [f64], &[f64]) + Sync + Send,
{
    if input.len() <= TOKENS_PER_CHUNK * in_stride {
        f(out, input);
    } else {
        out.par_chunks_mut(TOKENS_PER_CHUNK * out_stride)
            .zip(input.par_chunks(TOKENS_PER_CHUNK * in_stride))
            .for_each(|(o, i)| f(o, i));
    }
}

/// The mean over tokens of a complex per-token quantity, with its scratch kept between calls.
pub struct ComplexMean {
    partials: std::sync::Mutex<Vec<f64>>,
}

impl ComplexMean {
    /// Scratch for `n` tokens.
    pub fn new(n: usize) -> Self {
        ComplexMean {
            partials: std::sync::Mutex::new(vec![0.0; 2 * chunk_count(n)]),
        }
    }

    /// (1/n) sum_k f(row_k), rows of `stride` numbers; deterministic for any thread count.
    pub fn mean<F>(&self, data: &[f64], stride: usize, f: F) -> num_complex::Complex64
    where
        F: Fn(&[f64]) -> num_complex::Complex64 + Sync,
    {
        let n = data.len() / stride;
        let mut guard = self.partials.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = [0.0; 2];
        chunked_sum(data, stride, 2, &mut guard, &mut out, |rows, acc| {
            for row in rows.chunks_exact(stride) {
                let z = f(row);
                acc[0] += z.re;
                acc[1] += z.im;
            }
        });
        num_complex::Complex64::new(out[0], out[1]) / n.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_sum_is_the_same_for_any_thread_count() {
        let data: Vec<f64> = (0..50_001).map(|i| (i as f64 * 0.37).sin()).collect();
        let run = |threads| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut partials = vec![0.0; 2 * chunk_count(data.len())];
                let mut out = [0.0; 2];
                chunked_sum(&data, 1, 2, &mut partials, &mut out, |rows, acc| {
                    for x in rows {
                        acc[0] += x;
                        acc[1] += x * x;
                    }
                });
                out
            })
        };
        let one = run(1);
        assert_eq!(one, run(2));
        assert_eq!(one, run(7));
        let plain: f64 = data.iter().sum();
        assert!((one[0] - plain).abs() < 1e-9);
    }

    // The examples of the documentation (the module is internal, so not doctests).
    #[test]
    fn chunked_sum_adds_every_row() {
        use crate::parallel::{chunk_count, chunked_sum};
        let data: Vec<f64> = (0..10_000).map(|i| i as f64).collect();
        let mut partials = vec![0.0; chunk_count(data.len())];
        let mut out = [0.0];
        chunked_sum(&data, 1, 1, &mut partials, &mut out, |rows, acc| {
            acc[0] += rows.iter().sum::<f64>()
        });
        assert_eq!(out[0], 49_995_000.0);
    }

    #[test]
    fn for_each_chunk_covers_every_row() {
        use crate::parallel::for_each_chunk;
        let x = vec![1.0; 10_000];
        let mut y = vec![0.0; 10_000];
        for_each_chunk(&mut y, 1, &x, 1, |out, inp| {
            out.iter_mut().zip(inp).for_each(|(o, i)| *o = 2.0 * i)
        });
        assert!(y.iter().all(|v| *v == 2.0));
    }

    #[test]
    fn complex_mean_of_antipodal_angles() {
        use crate::parallel::ComplexMean;
        use num_complex::Complex64;
        let angles = [0.0, std::f64::consts::PI];
        let mean = ComplexMean::new(angles.len())
            .mean(&angles, 1, |t| Complex64::from_polar(1.0, 2.0 * t[0]));
        assert!((mean - Complex64::new(1.0, 0.0)).norm() < 1e-15);
    }
}
