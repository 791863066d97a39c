//! What a continuation of stationary densities writes (SPEC 9, docs/MATH.md §17.6):
//! `branches.csv` (`branch,<parameter>,r1_abs,stable,point`: branch 1 the uniform state, 2 the
//! one-bump states; `point` BP where the bump branch leaves the uniform state, LP at a fold),
//! the records of `special_points.json` (`{type, parameters: {name: value}, r1}`) and the
//! summary.json `continuation` object.

use serde::Serialize;

use super::{Branches, StatePoint};
use crate::cells::{csv_text, fmt_f64};

/// One record of `special_points.json`.
#[derive(Debug, Clone, Serialize)]
pub struct SpecialRecord {
    /// BP or LP.
    #[serde(rename = "type")]
    pub kind: String,
    /// The parameter's value by name.
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// |R1| there.
    pub r1: f64,
}

/// The rows of both branches: (branch number, point).
fn rows(b: &Branches) -> impl Iterator<Item = (usize, &StatePoint)> {
    b.uniform
        .iter()
        .map(|p| (1, p))
        .chain(b.bump.iter().map(|p| (2, p)))
}

/// `branches.csv`.
pub fn csv(parameter: &str, b: &Branches) -> String {
    let columns = ["branch", parameter, "r1_abs", "stable", "point"].map(String::from);
    let rows: Vec<Vec<String>> = rows(b)
        .map(|(n, p)| {
            vec![
                n.to_string(),
                fmt_f64(p.p),
                fmt_f64(p.r1),
                p.stable.to_string(),
                p.point.unwrap_or("").to_string(),
            ]
        })
        .collect();
    csv_text(&columns, rows)
}

/// The records of `special_points.json`, in the order of the rows.
pub fn specials(parameter: &str, b: &Branches) -> Vec<SpecialRecord> {
    rows(b)
        .filter_map(|(_, p)| {
            p.point.map(|kind| SpecialRecord {
                kind: kind.to_string(),
                parameters: [(parameter.to_string(), serde_json::json!(p.p))]
                    .into_iter()
                    .collect(),
                r1: p.r1,
            })
        })
        .collect()
}

/// summary.json's `continuation` object.
pub fn summary(parameter: &str, from: f64, to: f64, step: f64, b: &Branches) -> serde_json::Value {
    serde_json::json!({
        "kind": "stationary densities",
        "parameter": parameter,
        "from": from,
        "to": to,
        "step": step,
        "branches": if b.bump.is_empty() { 1 } else { 2 },
        "points": b.uniform.len() + b.bump.len(),
        "bump_end": b.end,
        "modes": b.modes,
        "grid": b.grid,
        "special_points": specials(parameter, b),
    })
}
