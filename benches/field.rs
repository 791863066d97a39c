//! One evaluation of the sphere vector field, by kernel, n and d.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
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

fn field_evaluation(c: &mut Criterion) {
    let cases = [
        (Kernel::Lsa, 2, vec![100, 10_000, 1_000_000]),
        (Kernel::Lsa, 100, vec![100, 10_000]),
        (Kernel::Usa, 2, vec![100, 1_000, 4_000]),
        (Kernel::Sa, 3, vec![100, 1_000]),
        (Kernel::Usa, 100, vec![100, 1_000]),
    ];
    for (kernel, d, ns) in cases {
        let mut group = c.benchmark_group(format!("field/{kernel:?}/d{d}"));
        group.sample_size(10);
        for n in ns {
            let a = DMatrix::from_fn(d, d, |i, j| if i == j { 1.0 } else { 0.1 / d as f64 });
            let v = DMatrix::from_fn(d, d, |i, j| if i == j { 0.5 } else { -0.2 / d as f64 });
            let field = SphereField::new(Attention::new(kernel, 1.0, vec![Head { a, v }]), n);
            let x = tokens(n, d);
            let mut dx = vec![0.0; n * d];
            group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
                b.iter(|| field.eval(&x, &mut dx))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, field_evaluation);
criterion_main!(benches);
