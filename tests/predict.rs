//! `predict` (the OA attractor reached from R(0)) against the simulated label of the full model
//! on random (A, V) in d = 2, from Poisson starts (the OA manifold).

use std::path::Path;

use rayon::prelude::*;
use tokdyn::classify::{classify, Label};
use tokdyn::integrate::solve;
use tokdyn::observe::{Observer, OrderSeries};
use tokdyn::predict::command::prediction;
use tokdyn::scenario::{ModelKind, Scenario};
use tokdyn::simulation;

fn random_scenario(k: u64) -> Scenario {
    let text = format!(
        r#"
name = "random-{k}"
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = {{ random = "gaussian", seed = {k}, scale = 1.0 }}
V = {{ random = "gaussian", seed = {}, scale = 1.0 }}
[tokens]
n = 256
init = "poisson"
r0 = 0.3
phi0 = 0.7
[time]
t_end = 300.0
samples = 1201
"#,
        10_000 + k
    );
    Scenario::from_toml_str(&text, Path::new("random.toml"), Path::new("."), &[]).unwrap()
}

#[test]
fn prediction_agrees_with_simulation_on_random_weights() {
    let cases = 200;
    let outcomes: Vec<(u64, Label, Label, String, String)> = (0..cases as u64)
        .into_par_iter()
        .map(|k| {
            let s = random_scenario(k);
            let sim = simulation::build(&s, ModelKind::Full).unwrap();
            let mut series = OrderSeries::new();
            let sol = solve(
                &sim.problem(),
                sim.method,
                &mut [&mut series as &mut dyn Observer],
            )
            .unwrap();
            assert!(sol.status.is_success(), "case {k}: {}", sol.status);
            let simulated = classify(&series);
            let predicted = prediction(&s).unwrap();
            (
                k,
                simulated.label,
                predicted.label,
                simulated.reason,
                predicted.reason,
            )
        })
        .collect();
    let mut agree = 0;
    let mut unexplained = Vec::new();
    for (k, sim, pred, sim_reason, pred_reason) in &outcomes {
        if sim == pred {
            agree += 1;
        } else {
            eprintln!(
                "case {k}: simulated {sim} ({sim_reason}) vs predicted {pred} ({pred_reason})"
            );
        }
        if sim == pred {
        } else if *sim != Label::Undetermined && *pred != Label::Undetermined {
            unexplained.push(format!(
                "case {k}: simulated {sim} ({sim_reason}) vs predicted {pred} ({pred_reason})"
            ));
        }
    }
    let mut counts = std::collections::BTreeMap::new();
    for (_, sim, _, _, _) in &outcomes {
        *counts.entry(sim.as_str()).or_insert(0) += 1;
    }
    eprintln!("agreement {agree}/{cases}; simulated labels: {counts:?}");
    for u in &unexplained {
        eprintln!("{u}");
    }
    assert!(
        agree as f64 >= 0.98 * cases as f64,
        "agreement {agree}/{cases}"
    );
    assert!(unexplained.is_empty(), "{unexplained:#?}");
}
