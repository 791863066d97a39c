//! One evaluation of the sphere vector field, by kernel, n and d.
//!
//! - `lsa` (O(n d^2) work): n = 10^2..10^6 for d = 2 and 3, n = 10^2..10^5 for d = 100 (10^6
//!   tokens in d = 100 are 800 MB per vector and about a second per evaluation; the scaling
//!   bench covers them).
//! - `usa`, `sa` (O(n^2 d) work): n = 10^2..10^4 for d = 2, 3 and 100. The bench stops at 10^4
//!   because the work grows 100-fold per decade: 10^5 tokens take tens of seconds to minutes
//!   per evaluation on 2 cores, and criterion needs at least 10 of them per point. Larger n is
//!   measured once per point by `cargo bench --bench scaling`.
//!
//! A point whose evaluation panics is reported and skipped, so one failing case does not hide
//! the others.
//!
//! Short measurement times (10 samples, 2 s, flat sampling for the pairwise kernels) keep the
//! whole file to a few minutes.

use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use nalgebra::DMatrix;
use tokdyn::model::{Attention, Head, Kernel, SphereField};

fn tokens(n: usize, d: usize) -> Vec<f64> {
    let mut x: Vec<f64> = (0..n * d)
        .map(|i| ((i as f64) * 0.618_033_988_7).sin())
        .collect();
    for row in x.chunks_exact_mut(d) {
        let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        row.iter_mut().for_each(|v| *v /= r);
    }
    x
}

/// 10^2, 10^3, ... up to `top`.
fn decades(top: usize) -> Vec<usize> {
    std::iter::successors(Some(100usize), |n| Some(n * 10))
        .take_while(|&n| n <= top)
        .collect()
}

fn field_evaluation(c: &mut Criterion) {
    let cases = [
        (Kernel::Lsa, 2, decades(1_000_000)),
        (Kernel::Lsa, 3, decades(1_000_000)),
        (Kernel::Lsa, 100, decades(100_000)),
        (Kernel::Usa, 2, decades(10_000)),
        (Kernel::Usa, 3, decades(10_000)),
        (Kernel::Usa, 100, decades(10_000)),
        (Kernel::Sa, 2, decades(10_000)),
        (Kernel::Sa, 3, decades(10_000)),
        (Kernel::Sa, 100, decades(10_000)),
    ];
    for (kernel, d, ns) in cases {
        let mut group = c.benchmark_group(format!("field/{kernel:?}/d{d}"));
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        if kernel != Kernel::Lsa {
            // Each evaluation is long at the larger n: the same number of them per sample.
            group.sampling_mode(SamplingMode::Flat);
        }
        for n in ns {
            let a = DMatrix::from_fn(d, d, |i, j| if i == j { 1.0 } else { 0.1 / d as f64 });
            let v = DMatrix::from_fn(d, d, |i, j| if i == j { 0.5 } else { -0.2 / d as f64 });
            let field = SphereField::new(Attention::new(kernel, 1.0, vec![Head { a, v }]), n);
            let x = tokens(n, d);
            let mut dx = vec![0.0; n * d];
            let probe = panic::catch_unwind(AssertUnwindSafe(|| field.eval(&x, &mut dx)));
            if probe.is_err() {
                eprintln!(
                    "field/{kernel:?}/d{d}/{n}: the evaluation panicked (message above); skipped"
                );
                continue;
            }
            group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
                b.iter(|| field.eval(&x, &mut dx))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, field_evaluation);
criterion_main!(benches);
