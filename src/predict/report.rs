//! What `tokdyn predict` reports: the OA analysis of a scenario (lsa) or its predicted clusters
//! (usa / sa), as `predict.json`'s content and a printed table, next to the simulated label when
//! the scenario's run folder has one (docs/MATH.md §5, §11). The command writes it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::cluster_report::{cluster_prediction, simulated_count, ClusterPrediction};
use super::{horizon, oa_start, predict, CycleKind, LimitCycle, Prediction};
use crate::classify::Label;
use crate::error::Error;
use crate::scenario::{KernelKind, ModelKind, Scenario};
use crate::simulation;

/// The prediction of a scenario (d = 2, lsa).
pub fn prediction(scenario: &Scenario) -> Result<Prediction, Error> {
    let sh = simulation::second_harmonic(scenario, ModelKind::Oa)?;
    Ok(predict(&sh, oa_start(scenario)?, horizon(scenario)))
}

/// [`prediction`] with every periodic orbit of the flow the ring search finds
/// ([`Prediction::add_limit_cycles`]): what `tokdyn predict` reports.
pub fn prediction_with_cycles(scenario: &Scenario) -> Result<Prediction, Error> {
    let sh = simulation::second_harmonic(scenario, ModelKind::Oa)?;
    let mut p = predict(&sh, oa_start(scenario)?, horizon(scenario));
    p.add_limit_cycles(&sh);
    Ok(p)
}

/// What `predict` writes.
#[derive(Debug, Clone, Serialize)]
pub struct PredictReport {
    /// The scenario name.
    pub name: String,
    /// The analysis of the Ott–Antonsen equation (lsa).
    #[serde(flatten)]
    pub prediction: Option<Prediction>,
    /// The clusters predicted for usa / sa (absent for lsa).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clusters: Option<ClusterPrediction>,
    /// The label of the simulation in the run folder, if there is one.
    pub simulated_label: Option<Label>,
    /// usa / sa: the count of the first clustered plateau of the simulation in the run folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated_count: Option<usize>,
    /// Whether the simulated label (lsa) or count (usa / sa: against `from_uniform`) agrees
    /// with the prediction.
    pub agrees: Option<bool>,
    /// The printed table.
    #[serde(skip)]
    pub table: String,
    /// Where `predict.json` was written.
    #[serde(skip)]
    pub path: PathBuf,
}

/// What `predict` reports for `scenario` (the OA analysis for lsa, the clusters for usa /
/// sa), compared with the run in `dir` when given; nothing is written.
pub fn report(scenario: &Scenario, dir: Option<&Path>) -> Result<PredictReport, Error> {
    simulation::require_no_noise(scenario, "predict")?;
    simulation::require_single_layer(scenario, "predict")?;
    if scenario.model.kernel != KernelKind::Lsa {
        return clusters_report(scenario, dir);
    }
    let p = prediction_with_cycles(scenario)?;
    let simulated_label = dir.and_then(crate::output::read_label);
    let dir = dir.map(Path::to_path_buf).unwrap_or_default();
    let agrees = simulated_label.map(|l| l == p.label);
    let mut table = String::new();
    fixed_point_table(&mut table, &p);
    boundary_table(&mut table, &p);
    cycle_table(&mut table, &p);
    let _ = writeln!(
        table,
        "from R2(0) = {:.4}{:+.4}i (horizon t = {}): predicted {} ({})",
        p.start.re, p.start.im, p.horizon, p.label, p.reason
    );
    comparison_table(&mut table, &dir, simulated_label, agrees);
    Ok(PredictReport {
        name: scenario.name.clone(),
        prediction: Some(p),
        clusters: None,
        simulated_label,
        simulated_count: None,
        agrees,
        table,
        path: dir.join("predict.json"),
    })
}

/// The usa / sa report: predict.json `clusters` (docs/MATH.md §11).
fn clusters_report(scenario: &Scenario, dir: Option<&Path>) -> Result<PredictReport, Error> {
    let c = cluster_prediction(scenario)?;
    let simulated_label = dir.and_then(crate::output::read_label);
    let simulated_count = dir.and_then(simulated_count);
    let dir = dir.map(Path::to_path_buf).unwrap_or_default();
    let agrees = match (c.uniform.from_uniform, simulated_count) {
        (Some(k), Some(s)) => Some(k == s),
        _ => None,
    };
    let mut table = String::new();
    cluster_table(&mut table, &c);
    if let (Some(label), Some(count)) = (simulated_label, simulated_count) {
        let _ = writeln!(
            table,
            "simulation ({}): {label}, first plateau of {count} clusters{}",
            dir.display(),
            match agrees {
                Some(true) => ", agrees",
                Some(false) => ", DISAGREES with the fastest mode",
                None => "",
            }
        );
    }
    Ok(PredictReport {
        name: scenario.name.clone(),
        prediction: None,
        clusters: Some(c),
        simulated_label,
        simulated_count,
        agrees,
        table,
        path: dir.join("predict.json"),
    })
}

fn cluster_table(table: &mut String, c: &ClusterPrediction) {
    let u = &c.uniform;
    if !u.rates.is_empty() {
        let _ = writeln!(table, "growth rates of the uniform state's modes:");
        for r in u.rates.iter().take(12) {
            let _ = writeln!(table, "  mode {:>3}: {:>14.6e}", r.mode, r.rate);
        }
    }
    let _ = writeln!(
        table,
        "clusters from the uniform state: {} ({})",
        u.from_uniform.map_or("none".to_string(), |k| k.to_string()),
        u.reason
    );
    match c.formed {
        None => {
            let _ = writeln!(
                table,
                "the tokens form no tight clusters by t_end: the cluster model predicts no merge"
            );
        }
        Some(t) => {
            let _ = writeln!(
                table,
                "{} tight cluster{} at t = {t:.4}; the cluster model's merges:{}",
                c.formed_count,
                if c.formed_count == 1 { "" } else { "s" },
                if c.merges.is_empty() { " none" } else { "" }
            );
            for m in &c.merges {
                let _ = writeln!(
                    table,
                    "  t = {:>14.6}: {} -> {}",
                    m.t, m.from_count, m.to_count
                );
            }
        }
    }
}

fn fixed_point_table(table: &mut String, p: &Prediction) {
    let _ = writeln!(table, "fixed points of the OA ODE in the unit disk:");
    let _ = writeln!(
        table,
        "  {:>10} {:>10} {:>8}  {:<28} stability",
        "Re R2", "Im R2", "|R2|", "eigenvalues"
    );
    for f in &p.fixed_points {
        let ev = format!(
            "{:.4}{:+.4}i, {:.4}{:+.4}i",
            f.eigenvalues[0].re, f.eigenvalues[0].im, f.eigenvalues[1].re, f.eigenvalues[1].im
        );
        let _ = writeln!(
            table,
            "  {:>10.6} {:>10.6} {:>8.6}  {:<28} {:?}{}",
            f.r.re,
            f.r.im,
            f.r.norm(),
            ev,
            f.stability,
            if f.on_boundary { " (boundary)" } else { "" }
        );
    }
}

fn boundary_table(table: &mut String, p: &Prediction) {
    if p.boundary_continuum {
        let _ = writeln!(
            table,
            "boundary |R2| = 1: g(phi) = 0 everywhere, every antipodal pair of clusters is fixed"
        );
        return;
    }
    if p.boundary_zeros.is_empty() {
        let _ = writeln!(
            table,
            "boundary |R2| = 1: g(phi) has no zero, clusters there rotate forever{}",
            p.boundary_circle.map_or(String::new(), |c| format!(
                " (period {:.4}, transverse multiplier {:.6}: {})",
                c.period,
                c.multiplier,
                if (c.multiplier - 1.0).abs() <= super::cycles::NEUTRAL {
                    "neutral"
                } else if c.multiplier < 1.0 {
                    "attracting"
                } else {
                    "repelling"
                }
            ))
        );
        return;
    }
    let _ = writeln!(
        table,
        "boundary |R2| = 1: zeros of g(phi) (fixed cluster axes):"
    );
    for z in &p.boundary_zeros {
        let _ = writeln!(
            table,
            "  phi = {:>9.6}  g'(phi) = {:>10.6}  transverse = {:>10.6}  {}",
            z.phi,
            z.slope,
            z.transverse,
            match (z.slope < 0.0, z.transverse < 0.0) {
                (true, true) => "attracting (both eigenvalues negative)",
                (true, false) => "attracting along the circle, repelling across it",
                (false, true) => "repelling along the circle, attracting across it",
                (false, false) => "repelling (both eigenvalues positive)",
            }
        );
    }
}

/// Isolated cycles one per line; the members of a centre's family in one line.
fn cycle_table(table: &mut String, p: &Prediction) {
    let family: Vec<&LimitCycle> = p
        .limit_cycles
        .iter()
        .filter(|c| c.kind == CycleKind::Centre)
        .collect();
    if !family.is_empty() {
        let range = |f: fn(&LimitCycle) -> f64| {
            family
                .iter()
                .map(|c| f(c))
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                    (a.min(v), b.max(v))
                })
        };
        let (pmin, pmax) = range(|c| c.period);
        let (lo, _) = range(|c| c.r_abs_min);
        let (_, hi) = range(|c| c.r_abs_max);
        let _ = writeln!(
            table,
            "a family of closed orbits around a centre (the return map is the identity to {:e}): {} found, periods {pmin:.4} to {pmax:.4}, |R2| between {lo:.4} and {hi:.4}",
            super::cycles::IDENTITY,
            family.len()
        );
    }
    for c in p
        .limit_cycles
        .iter()
        .filter(|c| c.kind != CycleKind::Centre)
    {
        let _ = writeln!(
            table,
            "limit cycle ({}, {}): period {:.4}, Floquet multiplier {:.6}, |R2| in [{:.4}, {:.4}]",
            c.kind.as_str(),
            c.label,
            c.period,
            c.multiplier,
            c.r_abs_min,
            c.r_abs_max
        );
    }
}

fn comparison_table(
    table: &mut String,
    dir: &Path,
    simulated: Option<Label>,
    agrees: Option<bool>,
) {
    match (simulated, agrees) {
        (Some(l), Some(true)) => {
            let _ = writeln!(table, "simulation ({}): {l}, agrees", dir.display());
        }
        (Some(l), _) => {
            let _ = writeln!(
                table,
                "simulation ({}): {l}, DISAGREES with the prediction{}",
                dir.display(),
                if l == Label::Undetermined {
                    " (the simulation could not decide; run it longer)"
                } else {
                    ""
                }
            );
        }
        _ => {}
    }
}
