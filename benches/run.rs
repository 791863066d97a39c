//! Whole runs of a small scenario, so that a slow-down of the integrator (more steps, more field
//! evaluations, slower projection or observers) shows, not only one of the field.
//!
//! Paper case 4 (`scenarios/case4-oscillation.toml`: d = 2, A = I, V = [[0.2, 1], [-1, -0.2]],
//! DOP853 at rtol 1e-9) to t_end = 50 with 501 samples, through the library:
//! - `run/solve/lsa` (n = 512) and `run/solve/usa` (n = 256: at n = 512 one USA run took about
//!   19 s on 2 cores, too long for 10 samples): `simulation::build` once, then
//!   `integrate::solve` with an in-memory order-parameter series (the integrator and the field);
//! - `run/command/lsa` (n = 512): `run::run`, the whole `tokdyn run` (files, classification,
//!   pictures).
//!
//! Before timing, each solve prints its numbers of field evaluations and steps and its time
//! without observers, so a slow-down from more steps can be told from a slower step or slower
//! observers.

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use tokdyn::command::run::run;
use tokdyn::integrate::solve;
use tokdyn::observe::OrderSeries;
use tokdyn::output::RunOptions;
use tokdyn::scenario::{ModelKind, Scenario};
use tokdyn::simulation::{self, Simulation};

fn scenario(kernel: &str, n: usize) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/case4-oscillation.toml");
    let sets = [
        format!("model.kernel={kernel}"),
        format!("tokens.n={n}"),
        "time.t_end=50".to_string(),
        "time.samples=501".to_string(),
    ];
    Scenario::load(&path, &sets).expect("case4-oscillation loads")
}

/// Prints the work of one solve and its time with and without observers.
fn report(kernel: &str, n: usize, sim: &Simulation) {
    let mut series = OrderSeries::new();
    let once = solve(&sim.problem(), sim.method, &mut [&mut series]).unwrap();
    let bare = solve(&sim.problem(), sim.method, &mut []).unwrap();
    eprintln!(
        "run/solve/{kernel} (n = {n}): {} field evaluations, {} accepted and {} rejected steps, {:.3} s ({:.3} s without observers)",
        once.rhs_evals,
        once.accepted_steps,
        once.rejected_steps,
        once.wall.as_secs_f64(),
        bare.wall.as_secs_f64()
    );
}

fn whole_runs(c: &mut Criterion) {
    let mut group = c.benchmark_group("run");
    group.sample_size(10);
    // Runs take 0.1 to 10 s: the same number of them in every sample.
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    for (kernel, n) in [("lsa", 512), ("usa", 256)] {
        let scenario = scenario(kernel, n);
        let sim = simulation::build(&scenario, ModelKind::Full).expect("builds");
        let mut reported = false;
        group.bench_function(format!("solve/{kernel}"), |b| {
            if !reported {
                report(kernel, n, &sim);
                reported = true;
            }
            b.iter(|| {
                let mut series = OrderSeries::new();
                let solution = solve(&sim.problem(), sim.method, &mut [&mut series]).unwrap();
                assert!(solution.status.is_success());
                solution.rhs_evals
            })
        });
    }
    let dir = tempfile::tempdir().expect("temporary folder");
    let scenario = scenario("lsa", 512);
    let options = RunOptions {
        out: Some(dir.path().join("case4")),
        ..RunOptions::default()
    };
    group.bench_function("command/lsa", |b| {
        b.iter(|| run(&scenario, &options).unwrap().summary.rhs_evals)
    });
    group.finish();
}

criterion_group!(benches, whole_runs);
criterion_main!(benches);
