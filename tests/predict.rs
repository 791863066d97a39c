//! `predict` (decided from the OA phase space: fixed points, boundary zeros, cycles of the
//! return map, the attractor reached from R(0)) against long OA simulations labelled by the
//! run's own classifier (going on while uncertain, up to t_max), on random (A, V), on the
//! case-4 critical line and on both sides of the regime boundaries and of a fold.

use std::path::Path;

use rayon::prelude::*;
use tokdyn::classify::{classify, CertaintyWatch, Label};
use tokdyn::predict::report::prediction;
use tokdyn::predict::CycleKind;
use tokdyn::scenario::Scenario;
use tokdyn::simulation;

/// A d = 2 LSA scenario run on the OA model from a Poisson start.
fn scenario(a: &str, v: &str, t_end: f64) -> Scenario {
    let text = format!(
        r#"
name = "predict-test"
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = {a}
V = {v}
[tokens]
n = 256
init = "poisson"
r0 = 0.3
phi0 = 0.7
[time]
t_end = {t_end}
samples = {}
t_max = {}
[run]
model = "oa"
"#,
        (t_end * 4.0) as usize + 1,
        2.0 * t_end
    );
    Scenario::from_toml_str(&text, Path::new("predict.toml"), Path::new("."), &[]).unwrap()
}

/// The label of the long OA simulation (the classifier, continuing while uncertain).
fn simulated(s: &Scenario) -> (Label, String) {
    let sim = simulation::build(s, s.run.model).unwrap();
    let mut watch = CertaintyWatch::default();
    let solution = sim.solve(&mut [&mut watch]).unwrap();
    assert!(solution.status.is_success(), "{}", solution.status);
    let c = classify(&watch.series);
    (c.label, c.reason)
}

/// (case, simulated, predicted, simulated reason, predicted reason) for each scenario.
type Outcome = (String, Label, Label, String, String);

fn compare(cases: Vec<(String, Scenario)>) -> Vec<Outcome> {
    cases
        .into_par_iter()
        .map(|(name, s)| {
            let (sim, sim_reason) = simulated(&s);
            let p = prediction(&s).unwrap();
            (name, sim, p.label, sim_reason, p.reason)
        })
        .collect()
}

/// Prints every disagreement; returns the number of agreements.
fn report(outcomes: &[Outcome]) -> usize {
    let mut agree = 0;
    for (name, sim, pred, sim_reason, pred_reason) in outcomes {
        if sim == pred {
            agree += 1;
        } else {
            eprintln!(
                "DISAGREEMENT {name}: simulated {sim} ({sim_reason}) vs predicted {pred} ({pred_reason})"
            );
        }
    }
    agree
}

#[test]
fn prediction_agrees_with_long_oa_simulations_on_random_weights() {
    // `scale = 1` in d = 2: entries N(0, 1/2).
    let cases: Vec<(String, Scenario)> = (0..300u64)
        .map(|k| {
            let a = format!(r#"{{ random = "gaussian", seed = {k}, scale = 1.0 }}"#);
            let v = format!(
                r#"{{ random = "gaussian", seed = {}, scale = 1.0 }}"#,
                10_000 + k
            );
            (
                format!("seeds {k}/{}", 10_000 + k),
                scenario(&a, &v, 20_000.0),
            )
        })
        .collect();
    let outcomes = compare(cases);
    let agree = report(&outcomes);
    let mut counts = std::collections::BTreeMap::new();
    for (_, _, pred, _, _) in &outcomes {
        *counts.entry(pred.as_str()).or_insert(0) += 1;
    }
    eprintln!("agreement {agree}/300; predicted labels: {counts:?}");
    assert!(agree >= 297, "agreement {agree}/300");
}

fn case4(v11: f64, v12: f64) -> Scenario {
    scenario(
        "\"identity\"",
        &format!("[[{v11}, {v12}], [{}, {}]]", -v12, -v11),
        20_000.0,
    )
}

/// The case-4 theorem: |v11| < |v12| oscillation; v11 = 0 != v12 rotating-interior;
/// |v11| >= |v12| != 0 converged-clusters.
fn theorem(v11: f64, v12: f64) -> Label {
    if v11 == 0.0 {
        Label::RotatingInterior
    } else if v11.abs() < v12.abs() {
        Label::Oscillation
    } else {
        Label::ConvergedClusters
    }
}

#[test]
fn case4_diagonal_and_both_sides_of_its_boundaries() {
    let mut points = Vec::new();
    for v in [0.3, 0.7, 1.2] {
        // The critical line, and 1e-2 on either side of it.
        points.push((v, v));
        points.push((v, -v));
        points.push((v - 0.01, v));
        points.push((v + 0.01, v));
    }
    // Either side of v11 = 0.
    points.extend([(0.0, 0.8), (0.01, 0.8), (-0.01, 0.8)]);
    let cases = points
        .iter()
        .map(|&(v11, v12)| (format!("case 4 v11 = {v11}, v12 = {v12}"), case4(v11, v12)))
        .collect();
    let outcomes = compare(cases);
    report(&outcomes);
    for ((v11, v12), (name, sim, pred, _, reason)) in points.iter().zip(&outcomes) {
        assert_eq!(*pred, theorem(*v11, *v12), "{name}: {reason}");
        assert_eq!(sim, pred, "{name}");
    }
}

#[test]
fn both_sides_of_a_saddle_node_on_the_boundary_circle() {
    // A = I, V = [[1 + b, -w], [w, 1 - b]]: g(phi) = 2 w + 2 b sin(-phi)... has zeros exactly
    // when |w| <= |b| (v+ = 1 + i w, v- = b, g = 2 Im v+ + 2 Im(v- e^{-i phi})).
    let b = 0.5;
    let mut cases = Vec::new();
    for w in [b - 0.01, b + 0.01] {
        let v = format!("[[{}, {}], [{w}, {}]]", 1.0 + b, -w, 1.0 - b);
        cases.push((
            format!("fold w = {w}"),
            scenario("\"identity\"", &v, 20_000.0),
        ));
    }
    let outcomes = compare(cases);
    report(&outcomes);
    assert_eq!(outcomes[0].2, Label::ConvergedClusters, "{}", outcomes[0].4);
    assert_eq!(outcomes[1].2, Label::RotatingClusters, "{}", outcomes[1].4);
    for (name, sim, pred, _, _) in &outcomes {
        assert_eq!(sim, pred, "{name}");
    }
}

#[test]
fn a_slow_spiral_is_not_a_centre_and_a_centre_is() {
    // V = I, A = [[-0.2, 1.5], [-1.5, 0.1]]: linearisation -0.025 +- 0.74 i at an interior
    // point, a slow spiral (multiplier about exp(-0.21) per turn).
    let s = scenario("[[-0.2, 1.5], [-1.5, 0.1]]", "\"identity\"", 2000.0);
    let p = prediction(&s).unwrap();
    assert_eq!(p.label, Label::InteriorPoint, "{}", p.reason);
    assert!(p.limit_cycles.iter().all(|c| c.kind != CycleKind::Centre));
    // Case 4, |v11| < |v12|: every orbit closes, the return map is the identity.
    let p = prediction(&case4(0.2, 1.0)).unwrap();
    assert_eq!(p.label, Label::Oscillation, "{}", p.reason);
    let c = &p.limit_cycles[0];
    assert_eq!(c.kind, CycleKind::Centre, "{}", p.reason);
    assert!((c.multiplier - 1.0).abs() < 1e-6);
    // The orbit closes: its last point returns next to its first.
    let (first, last) = (c.orbit[0], c.orbit[c.orbit.len() - 1]);
    let step = (c.orbit[1] - c.orbit[0]).norm();
    assert!((first - last).norm() < 2.0 * step);
}

#[test]
fn the_portrait_draws_the_cycles_predict_finds() {
    use tokdyn::plot::portrait::CycleKind as Drawn;
    // Case 4, |v11| < |v12|: closed orbits around the centre, drawn dotted; each curve is a
    // closed orbit of the OA flow (the field is tangent to it: it turns around the centre).
    let s = case4(0.2, 1.0);
    let sh = simulation::second_harmonic(&s, tokdyn::scenario::ModelKind::Oa).unwrap();
    let curves = tokdyn::command::portrait::cycles(&s, &sh);
    assert!(!curves.is_empty());
    for c in &curves {
        assert_eq!(c.kind, Drawn::Neutral);
        let step = (c.points[1] - c.points[0]).norm();
        assert!((c.points[0] - c.points[c.points.len() - 1]).norm() < 2.0 * step);
    }
    // V = I with a slow spiral into an interior point: no cycle to draw.
    let s = scenario("[[-0.2, 1.5], [-1.5, 0.1]]", "\"identity\"", 2000.0);
    let sh = simulation::second_harmonic(&s, tokdyn::scenario::ModelKind::Oa).unwrap();
    assert!(tokdyn::command::portrait::cycles(&s, &sh).is_empty());
}
