//! Ensembles and noise (docs: benches/README.md, "Ensembles and noise").
//!
//! 1. An ensemble of 1000 noisy runs of n = 128 in d = 2 (usa, beta = 1, A = V = I, T = 0.3)
//!    against the same 1000 runs one after the other (`tokdyn run` in memory, seed by seed):
//!    CPU time of the process (getrusage, user + system) for both, and the ensemble's wall time
//!    (CPU / wall near 2 on two cores means both were used). CPU time, not wall time, is the
//!    figure to compare on a machine that other jobs load.
//! 2. The cost of a step at n = 10^5 (d = 2, usa, spectral kernel): a noisy run (stochastic
//!    Heun, 2 field evaluations a step) against a deterministic one (dop853), CPU per step and
//!    per field evaluation.
//!
//! `cargo bench --bench ensemble` (`-- quick` for 200 runs and n = 2 10^4).

use std::time::Instant;

use tokdyn::ensemble;
use tokdyn::output::RunOptions;
use tokdyn::scenario::{ModelKind, Scenario};

/// `struct rusage` of Linux x86_64/aarch64: two `timeval`s, then 14 longs.
#[repr(C)]
struct Rusage {
    fields: [i64; 18],
}

extern "C" {
    fn getrusage(who: i32, usage: *mut Rusage) -> i32;
}

/// CPU seconds (user + system) of this process so far.
fn cpu_seconds() -> f64 {
    let mut u = Rusage { fields: [0; 18] };
    // SAFETY: `u` is a writable `struct rusage`; RUSAGE_SELF = 0.
    let rc = unsafe { getrusage(0, &mut u) };
    assert_eq!(rc, 0, "getrusage failed");
    let f = &u.fields;
    (f[0] + f[2]) as f64 + (f[1] + f[3]) as f64 * 1e-6
}

/// CPU seconds (user + system) of each thread of this process, by thread id, from
/// /proc/self/task/*/stat (clock ticks of 1/100 s).
fn thread_cpu() -> std::collections::BTreeMap<u64, f64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let Ok(tid) = task.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // Fields after the command name (which ends with ')'): state is field 3, utime 14.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| {
            f.get(i - 3)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        out.insert(tid, (ticks(14) + ticks(15)) / 100.0);
    }
    out
}

/// The CPU seconds each thread spent between two [`thread_cpu`] readings, largest first.
fn thread_shares(
    before: &std::collections::BTreeMap<u64, f64>,
    after: &std::collections::BTreeMap<u64, f64>,
) -> Vec<f64> {
    let mut spent: Vec<f64> = after
        .iter()
        .map(|(tid, t)| t - before.get(tid).copied().unwrap_or(0.0))
        .filter(|t| *t > 0.0)
        .collect();
    spent.sort_by(|a, b| b.total_cmp(a));
    spent
}

fn scenario(text: &str) -> Scenario {
    let table: toml::Table = text.parse().unwrap();
    Scenario::from_table(table, "bench.toml".as_ref(), "".as_ref()).unwrap()
}

fn noisy(n: usize, runs: usize, t_end: f64, dt: f64, noise: bool) -> Scenario {
    let noise = if noise {
        format!("[noise]\ntemperature = 0.3\nseed = 11\ndt = {dt}\n")
    } else {
        String::new()
    };
    scenario(&format!(
        "name = \"bench\"\n[model]\nkernel = \"usa\"\nbeta = 1.0\nd = 2\nA = \"identity\"\nV = \"identity\"\n\
         [tokens]\nn = {n}\nseed = 3\n[time]\nt_end = {t_end}\nsamples = 11\n{noise}[ensemble]\nruns = {runs}\n"
    ))
}

fn ensemble_against_singles(runs: usize) {
    let s = noisy(128, runs, 5.0, 0.02, true);
    let options = RunOptions::default();
    let cpu0 = cpu_seconds();
    let wall0 = Instant::now();
    for i in 0..runs {
        let member = ensemble::member(&s, i);
        tokdyn::outcome::run_in_memory(&member, &options, &mut []).unwrap();
    }
    let singles_cpu = cpu_seconds() - cpu0;
    let singles_wall = wall0.elapsed().as_secs_f64();
    let threads0 = thread_cpu();
    let cpu0 = cpu_seconds();
    let wall0 = Instant::now();
    let e = ensemble::simulate(&s, ModelKind::Full).unwrap();
    let ensemble_cpu = cpu_seconds() - cpu0;
    let ensemble_wall = wall0.elapsed().as_secs_f64();
    let per_thread = thread_shares(&threads0, &thread_cpu());
    assert_eq!(e.rows.len(), runs);
    println!(
        "ensemble of {runs} runs, n = 128, d = 2, {} threads: CPU {ensemble_cpu:.2} s, wall {ensemble_wall:.2} s (CPU / wall {:.2}); \
         the single runs one after the other: CPU {singles_cpu:.2} s, wall {singles_wall:.2} s; \
         ensemble CPU / singles CPU = {:.3}; CPU seconds by thread during the ensemble: {:?}",
        rayon::current_num_threads(),
        ensemble_cpu / ensemble_wall,
        ensemble_cpu / singles_cpu,
        per_thread
            .iter()
            .map(|t| (t * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    );
}

/// CPU seconds per step and per field evaluation of one run.
fn per_step(s: &Scenario) -> (f64, f64, u64) {
    let sim = tokdyn::simulation::build(s, ModelKind::Full).unwrap();
    let cpu0 = cpu_seconds();
    let solution = sim.solve(&mut []).unwrap();
    let cpu = cpu_seconds() - cpu0;
    let steps = solution.accepted_steps + solution.rejected_steps;
    (
        cpu / steps.max(1) as f64,
        cpu / solution.rhs_evals.max(1) as f64,
        steps,
    )
}

fn noisy_step_against_deterministic(n: usize) {
    let mut deterministic = noisy(n, 1, 2.0, 0.05, false);
    deterministic.ensemble = None;
    let mut stochastic = noisy(n, 1, 0.5, 0.05, true);
    stochastic.ensemble = None;
    let (d_step, d_eval, d_steps) = per_step(&deterministic);
    let (s_step, s_eval, s_steps) = per_step(&stochastic);
    println!(
        "n = {n}, d = 2, usa: deterministic (dop853) {:.1} ms CPU a step ({d_steps} steps), {:.2} ms an evaluation; \
         noisy (stochastic Heun, dt = 0.05) {:.1} ms CPU a step ({s_steps} steps), {:.2} ms an evaluation; \
         noisy / deterministic a step = {:.3}, an evaluation = {:.3}",
        d_step * 1e3,
        d_eval * 1e3,
        s_step * 1e3,
        s_eval * 1e3,
        s_step / d_step,
        s_eval / d_eval
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    ensemble_against_singles(if quick { 200 } else { 1000 });
    noisy_step_against_deterministic(if quick { 20_000 } else { 100_000 });
}
