//! Cluster detection at one sample against one field evaluation, n = 10^5 (docs: benches/README.md).
//!
//! Configurations: uniform tokens (not clustered: the d = 2 sort runs over all of them, the
//! leader pass of d >= 3 stops at its cap) and three tight clusters (every token verified).
//! The field is `sa` with A = V = I (the kernel `auto` picks: spectral in d = 2, direct in
//! d = 3), one evaluation; a dop853 step costs 12 of them, a sample at least one step.

use std::time::Instant;

use nalgebra::DMatrix;
use tokdyn::model::{Attention, Head, Kernel, KernelMethod, SphereField};
use tokdyn::observe::clusters::{detect_clusters, ClusterRule};

fn uniform(n: usize, d: usize) -> Vec<f64> {
    let mut x: Vec<f64> = (0..n * d)
        .map(|i| ((i as f64) * 0.618_033_988_7).sin() + ((i * i) as f64 * 1e-3).cos())
        .collect();
    for row in x.chunks_exact_mut(d) {
        let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        row.iter_mut().for_each(|v| *v /= r);
    }
    x
}

fn three_clusters(n: usize, d: usize) -> Vec<f64> {
    let mut x = Vec::with_capacity(n * d);
    for k in 0..n {
        let a = (k % 3) as f64 * 2.1 + 1e-4 * ((k as f64) * 0.37).sin();
        let mut row = vec![0.0; d];
        row[0] = a.cos();
        row[1] = a.sin();
        if d > 2 {
            row[2] = 1e-4 * ((k as f64) * 0.11).cos();
        }
        let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        x.extend(row.iter().map(|v| v / r));
    }
    x
}

fn best_of<T>(times: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..times {
        let t = Instant::now();
        out = Some(f());
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, out.unwrap())
}

fn main() {
    let n = 100_000;
    for d in [2, 3] {
        let i = DMatrix::identity(d, d);
        let attention = Attention::new(Kernel::Sa, 4.0, vec![Head { a: i.clone(), v: i }]);
        let field = SphereField::with_kernel_method(attention, n, KernelMethod::Auto).unwrap();
        let x = uniform(n, d);
        let mut dx = vec![0.0; n * d];
        let (field_s, _) = best_of(if d == 2 { 3 } else { 1 }, || field.eval(&x, &mut dx));
        for (what, tokens) in [
            ("uniform", uniform(n, d)),
            ("three clusters", three_clusters(n, d)),
        ] {
            let (s, c) = best_of(5, || detect_clusters(&tokens, d, ClusterRule::default()));
            println!(
                "d = {d}, n = {n}, {what}: detection {:.2} ms (count {}), one field evaluation {:.1} ms, ratio to one dop853 step {:.4}",
                s * 1e3,
                c.count,
                field_s * 1e3,
                s / (12.0 * field_s)
            );
        }
    }
}
