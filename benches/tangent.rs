//! The tangent flow's cost against the field's: one evaluation of the field, and one of the
//! field with the derivative along one and along three vectors
//! (`Linearization::field_and_derivatives`), sa with two heads, n = 64 and 256, d = 16, for
//! no position, RoPE, ALiBi, peri-LN and nGPT (docs/MATH.md §15.1).
//!
//! Short measurement times (10 samples, 1 s) keep the file to about a minute.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use nalgebra::DMatrix;
use tokdyn::integrate::Dynamics;
use tokdyn::model::{Attention, Head, Kernel, Normalization, Position, SphereField};

fn tokens(n: usize, d: usize, phase: f64) -> Vec<f64> {
    let mut x: Vec<f64> = (0..n * d)
        .map(|i| ((i as f64) * 0.618_033_988_7 + phase).sin())
        .collect();
    for row in x.chunks_exact_mut(d) {
        let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        row.iter_mut().for_each(|v| *v /= r);
    }
    x
}

fn attention(d: usize) -> Attention {
    let heads = (0..2)
        .map(|h| Head {
            a: DMatrix::from_fn(d, d, |i, j| {
                if i == j {
                    1.0
                } else {
                    ((i * d + j + h) as f64).sin() / d as f64
                }
            }),
            v: DMatrix::from_fn(d, d, |i, j| {
                if i == j {
                    0.5
                } else {
                    ((i + 3 * j + h) as f64).cos() / d as f64
                }
            }),
        })
        .collect();
    Attention::new(Kernel::Sa, 1.0, heads)
}

fn tangent_cost(c: &mut Criterion) {
    let d = 16;
    let variants = [
        ("plain", Position::None, Normalization::Post),
        ("rope", Position::Rope { base: 100.0 }, Normalization::Post),
        (
            "alibi",
            Position::Alibi {
                slopes: vec![0.25, 0.0625],
            },
            Normalization::Post,
        ),
        ("peri", Position::None, Normalization::Peri),
        ("ngpt", Position::None, Normalization::Ngpt),
    ];
    for (name, position, norm) in variants {
        let mut group = c.benchmark_group(format!("tangent/{name}/d{d}"));
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(300));
        group.measurement_time(Duration::from_secs(1));
        for n in [64, 256] {
            let att = attention(d)
                .with_position(position.clone())
                .with_normalization(norm);
            let field = SphereField::new(att, n);
            let x = tokens(n, d, 0.0);
            let mut dx = vec![0.0; n * d];
            group.bench_with_input(BenchmarkId::new("field", n), &n, |b, _| {
                b.iter(|| field.eval(&x, &mut dx))
            });
            let lin = field
                .linearization()
                .expect("every variant has a derivative");
            for k in [1usize, 3] {
                let v: Vec<f64> = (0..k).flat_map(|i| tokens(n, d, 1.0 + i as f64)).collect();
                let mut dv = vec![0.0; k * n * d];
                group.bench_with_input(
                    BenchmarkId::new(format!("derivative{k}"), n),
                    &n,
                    |b, _| b.iter(|| lin.field_and_derivatives(&x, &v, &mut dx, &mut dv)),
                );
            }
        }
        group.finish();
    }
}

criterion_group!(benches, tangent_cost);
criterion_main!(benches);
