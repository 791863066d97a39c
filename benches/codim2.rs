//! A two-parameter bifurcation diagram (`[codim2]`: the fold and Hopf curves of one random
//! (A, V) family with all their special points) against the 41 x 41 OA regime map of the same
//! box, the grid way of finding the same boundaries.

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use tokdyn::sweep::{sweep, SweepOptions};

fn codim2(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let dir = tempfile::tempdir().unwrap();
    let base = root.join("random-family.toml");
    let mut group = c.benchmark_group("codim2");
    group.sample_size(10);
    let curves = dir.path().join("curves.toml");
    std::fs::write(
        &curves,
        format!(
            "name = \"bench-curves\"\nscenario = \"{}\"\nmodel = \"oa\"\nlabel = \"predict\"\n[axes]\nv11 = {{ from = 0.2, to = 0.2, steps = 1 }}\n[codim2]\nparameters = [\"v11\", \"v12\"]\nfrom = [-0.2, -0.6]\nto = [0.7, 0.4]\nstep = 0.005\n",
            base.display()
        ),
    )
    .unwrap();
    let map = dir.path().join("map.toml");
    std::fs::write(
        &map,
        format!(
            "name = \"bench-map\"\nscenario = \"{}\"\nmodel = \"oa\"\n[axes]\nv11 = {{ from = -0.2, to = 0.7, steps = 41 }}\nv12 = {{ from = -0.6, to = 0.4, steps = 41 }}\n",
            base.display()
        ),
    )
    .unwrap();
    for (name, file) in [("curves", &curves), ("map-41x41", &map)] {
        let options = SweepOptions {
            out: Some(dir.path().join(format!("out-{name}"))),
            ..SweepOptions::default()
        };
        group.bench_function(name, |b| b.iter(|| sweep(file, &options).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, codim2);
criterion_main!(benches);
