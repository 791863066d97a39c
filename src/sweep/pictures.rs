//! The pictures of a sweep, drawn from its results: `regime_map.png` when the grid has two
//! axes with more than one value each (the first axis on x), `bifurcation.png` when it has one
//! (tail min and max of |R2| against the parameter, with the continued OA branches beneath).

use std::path::Path;

use num_complex::Complex64;

use super::continuation::BranchPoint;
use super::point::Outcome;
use super::spec::Plan;
use crate::classify::Label;
use crate::error::Error;
use crate::plot;

fn label_of(o: &Outcome) -> Option<Label> {
    o.cells.first().and_then(|w| Label::from_word(w))
}

fn number(o: &Outcome, column: usize) -> f64 {
    o.cells
        .get(column)
        .and_then(|c| c.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Draws the pictures that fit the grid; grids of other shapes get none.
pub fn draw(
    plan: &Plan,
    outcomes: &[(Vec<f64>, &Outcome)],
    boundary: &[Vec<f64>],
    branches: &[Vec<BranchPoint>],
    dir: &Path,
) -> Result<(), Error> {
    let varying: Vec<usize> = (0..plan.axes.len())
        .filter(|&a| plan.axes[a].steps > 1)
        .collect();
    let title = format!("{} ({} model)", plan.name, plan.model);
    let io = |e| Error::io(dir)(e);
    match varying.as_slice() {
        [x, y] if outcomes.len() == plan.axes[*x].steps * plan.axes[*y].steps => {
            let values = |a: usize| -> Vec<f64> {
                (0..plan.axes[a].steps)
                    .map(|i| plan.axes[a].value(i))
                    .collect()
            };
            let labels: Vec<Option<Label>> = outcomes.iter().map(|(_, o)| label_of(o)).collect();
            let points: Vec<(f64, f64)> = boundary.iter().map(|c| (c[*x], c[*y])).collect();
            plot::regime_map(
                &plan.axes[*x].name,
                &values(*x),
                &plan.axes[*y].name,
                &values(*y),
                &labels,
                &points,
                &title,
                dir,
            )
            .map_err(io)
        }
        [p] => {
            // Branches belong under this picture only when they were continued in its parameter.
            let same = plan
                .continuation
                .as_ref()
                .is_some_and(|c| c.key == plan.axes[*p].key);
            let branches = if same { branches } else { &[] };
            let points: Vec<(f64, f64, f64, Option<Label>)> = outcomes
                .iter()
                .map(|(c, o)| (c[*p], number(o, 2), number(o, 3), label_of(o)))
                .collect();
            let lines: Vec<(Vec<(f64, f64)>, bool)> = branches
                .iter()
                .flat_map(|b| {
                    // Split each branch where its stability changes.
                    let mut pieces: Vec<(Vec<(f64, f64)>, bool)> = Vec::new();
                    for pt in b {
                        let xy = (pt.p, pt.r.norm());
                        match pieces.last_mut() {
                            Some((line, stable)) if *stable == pt.stable() => line.push(xy),
                            Some((line, _)) => {
                                let last = *line.last().unwrap_or(&xy);
                                pieces.push((vec![last, xy], pt.stable()));
                            }
                            None => pieces.push((vec![xy], pt.stable())),
                        }
                    }
                    pieces
                })
                .collect();
            let special: Vec<(f64, f64, String)> = branches
                .iter()
                .flatten()
                .filter_map(|pt| {
                    pt.special
                        .map(|s| (pt.p, Complex64::norm(pt.r), s.to_string()))
                })
                .collect();
            plot::bifurcation_plot(&plan.axes[*p].name, &points, &lines, &special, &title, dir)
                .map_err(io)
        }
        _ => Ok(()),
    }
}
