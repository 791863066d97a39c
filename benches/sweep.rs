//! Sweep throughput in points per second: the OA model (the usual way to map regimes) and the
//! full model (n = 256, d = 2), both on paper case 4 (A = I, V = [[v11, v12], [-v12, -v11]]).

use std::fs;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tokdyn::sweep::{sweep, SweepOptions};

const BASE: &str = r#"
name = "bench-case4"
[params]
v11 = 0.2
v12 = 1.0
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = "identity"
V = [["v11", "v12"], ["-v12", "-v11"]]
[tokens]
n = 256
init = "poisson"
r0 = 0.3
[time]
t_end = 100.0
samples = 501
"#;

fn sweep_throughput(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("base.toml"), BASE).unwrap();
    let mut group = c.benchmark_group("sweep");
    group.sample_size(10);
    for (model, steps) in [("oa", 8usize), ("full", 2)] {
        let file = dir.path().join(format!("{model}.toml"));
        fs::write(
            &file,
            format!(
                "name = \"bench-{model}\"\nscenario = \"base.toml\"\nmodel = \"{model}\"\n[axes]\nv11 = {{ from = 0.0, to = 1.0, steps = {steps} }}\nv12 = {{ from = 0.0, to = 1.0, steps = {steps} }}\n"
            ),
        )
        .unwrap();
        let options = SweepOptions {
            out: Some(dir.path().join(format!("out-{model}"))),
            ..SweepOptions::default()
        };
        group.throughput(Throughput::Elements((steps * steps) as u64));
        group.bench_function(format!("{model}/points"), |b| {
            b.iter(|| sweep(&file, &options).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, sweep_throughput);
criterion_main!(benches);
