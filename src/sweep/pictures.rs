//! The pictures of a sweep, drawn from its results: `regime_map.png` when the grid has two
//! axes with more than one value each (the first axis on x), `bifurcation.png` when it has one
//! (tail min and max of |R2| against the parameter, with the continued OA branches beneath,
//! Hopf points labelled `H super` / `H sub` by the sign of l1, and the continued cycles' min
//! and max |R2| with their LPC / HC / SNIC points), and `codim2.png` when the sweep
//! has `[codim2]` over the same two axes (the curves over the regime map).
//!
//! Titles state the model and what is held fixed: the base `[params]` that are not axes, and
//! the start (the token initialisation; R(0) = r0 e^{i phi0} for a Poisson start). A branch
//! point whose two eigenvalues lie on the imaginary axis (|Re| <= 1e-9 |lambda|, not both 0) is
//! drawn as a centre.

use std::path::Path;

use num_complex::Complex64;

use super::row::Outcome;
use super::spec::Plan;
use crate::bifurcation::codim2::{self, Curve, CurveKind, CurvePoint};
use crate::bifurcation::continuation::BranchPoint;
use crate::bifurcation::cycles::CycleBranch;
use crate::classify::Label;
use crate::error::Error;
use crate::plot;
use crate::plot::bifurcation::FixedKind;
use crate::plot::codim2::{CurveStyle, Overlay};
use crate::scenario::InitKind;

fn label_of(o: &Outcome) -> Option<Label> {
    o.label
}

/// The second title line: the fixed params and the start.
fn fixed_text(plan: &Plan, varying: &[usize]) -> String {
    let axis_params: Vec<&str> = varying
        .iter()
        .filter_map(|&a| plan.axes[a].key.strip_prefix("params."))
        .collect();
    let fixed: Vec<String> = plan
        .base
        .params
        .iter()
        .filter(|(name, _)| !axis_params.contains(&name.as_str()))
        .map(|(name, v)| format!("{name} = {}", plot::short_number(*v)))
        .collect();
    let t = &plan.base.tokens;
    let start = match t.init {
        InitKind::Poisson => format!(
            "start: poisson, R(0) = {} e^(i {})",
            plot::short_number(t.r0),
            plot::short_number(t.phi0)
        ),
        other => format!("start: {other}, seed {}", t.seed),
    };
    let mut parts = Vec::new();
    if !fixed.is_empty() {
        parts.push(format!("fixed: {}", fixed.join(", ")));
    }
    parts.push(format!(
        "{}, n = {}, d = {}",
        plan.base.model.kernel, plan.base.tokens.n, plan.base.model.d
    ));
    parts.push(start);
    parts.push(format!(
        "t_end = {}",
        plot::short_number(plan.base.time.t_end)
    ));
    parts.join("; ")
}

/// How a continued branch point is drawn.
fn branch_kind(pt: &BranchPoint) -> FixedKind {
    let scale = pt.eigenvalues.iter().map(|e| e.norm()).fold(0.0, f64::max);
    let neutral = scale > 0.0 && pt.eigenvalues.iter().all(|e| e.re.abs() <= 1e-9 * scale);
    if neutral {
        FixedKind::Centre
    } else if pt.stable() {
        FixedKind::Stable
    } else {
        FixedKind::Unstable
    }
}

/// Two curves per cycle branch (min and max |R2|, from its Hopf point), split where the
/// stability changes.
fn cycle_lines(cycles: &[CycleBranch]) -> Vec<plot::CycleLine> {
    let mut out = Vec::new();
    for b in cycles {
        let Some(first) = b.points.first() else {
            continue;
        };
        for max in [false, true] {
            let mut pieces: Vec<plot::CycleLine> = Vec::new();
            // From the Hopf point, or from the first cycle of a predicted orbit's branch.
            let mut last = match b.hopf {
                Some(h) => (h.p, h.r.norm()),
                None => (
                    first.p,
                    if max {
                        first.r2_abs_max
                    } else {
                        first.r2_abs_min
                    },
                ),
            };
            for c in &b.points {
                let xy = (c.p, if max { c.r2_abs_max } else { c.r2_abs_min });
                match pieces.last_mut() {
                    Some((line, s)) if *s == c.stable() => line.push(xy),
                    _ => pieces.push((vec![last, xy], c.stable())),
                }
                last = xy;
            }
            out.extend(pieces);
        }
    }
    out
}

/// The theory curve over the plotted axes `x`, `y` (other axes at their first value).
fn theory_curve(plan: &Plan, x: usize, y: usize) -> Option<plot::Theory> {
    let text = plan.theory.as_ref()?;
    const M: usize = 201;
    let grid = |a: usize| -> Vec<f64> {
        let ax = &plan.axes[a];
        (0..M)
            .map(|i| ax.from + (ax.to - ax.from) * i as f64 / (M - 1) as f64)
            .collect()
    };
    let (xs, ys) = (grid(x), grid(y));
    let mut coords: Vec<f64> = plan.axes.iter().map(|a| a.value(0)).collect();
    let mut f = Vec::with_capacity(M * M);
    for &xv in &xs {
        for &yv in &ys {
            coords[x] = xv;
            coords[y] = yv;
            let params = super::spec::theory_params(&plan.axes, &plan.base, &coords);
            f.push(crate::scenario::evaluate_expression(text, &params).unwrap_or(f64::NAN));
        }
    }
    Some(plot::Theory {
        segments: plot::zero_level(&f, &xs, &ys),
        text: format!("theory: {text} = 0"),
    })
}

/// The curves of `[codim2]` in the map's coordinates, when its parameters are the map's axes.
fn codim2_overlay(plan: &Plan, curves: &[Curve], x: usize, y: usize) -> Option<Overlay> {
    let spec = plan.codim2.as_ref()?;
    let (kx, ky) = (&plan.axes[x].key, &plan.axes[y].key);
    let swap = if spec.keys[0] == *kx && spec.keys[1] == *ky {
        false
    } else if spec.keys[0] == *ky && spec.keys[1] == *kx {
        true
    } else {
        return None;
    };
    let at = |p: [f64; 2]| if swap { (p[1], p[0]) } else { (p[0], p[1]) };
    let style = |pt: &CurvePoint| match pt.kind {
        CurveKind::Fold => CurveStyle::Fold,
        CurveKind::NeutralSaddle => CurveStyle::NeutralSaddle,
        CurveKind::Hopf if pt.l1.is_some_and(|l| l > 0.0) => CurveStyle::HopfSubcritical,
        CurveKind::Hopf => CurveStyle::HopfSupercritical,
    };
    let mut overlay = Overlay::default();
    for c in curves {
        let mut pieces: Vec<(Vec<(f64, f64)>, CurveStyle)> = Vec::new();
        for pt in c.points.iter().filter(|p| p.special.is_none()) {
            let (xy, s) = (at(pt.p), style(pt));
            match pieces.last_mut() {
                Some((line, k)) if *k == s => line.push(xy),
                Some((line, _)) => {
                    let last = *line.last().unwrap_or(&xy);
                    pieces.push((vec![last, xy], s));
                }
                None => pieces.push((vec![xy], s)),
            }
        }
        overlay.curves.extend(pieces);
    }
    for pt in codim2::unique_specials(curves) {
        let (px, py) = at(pt.p);
        overlay
            .points
            .push((px, py, pt.special.unwrap_or("").to_string()));
    }
    Some(overlay)
}

/// Draws the pictures that fit the grid; grids of other shapes get none.
pub fn draw(
    plan: &Plan,
    outcomes: &[(Vec<f64>, &Outcome)],
    boundary: &[Vec<f64>],
    branches: &[Vec<BranchPoint>],
    cycles: &[CycleBranch],
    curves: &[Curve],
    dir: &Path,
) -> Result<(), Error> {
    let varying: Vec<usize> = (0..plan.axes.len())
        .filter(|&a| plan.axes[a].points() > 1)
        .collect();
    let title = format!(
        "{} ({} model)\n{}",
        plan.name,
        plan.model,
        fixed_text(plan, &varying)
    );
    let figure = plan.base.output.figure;
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
            let theory = theory_curve(plan, *x, *y);
            if let Some(overlay) = codim2_overlay(plan, curves, *x, *y) {
                plot::codim2_map(
                    &plan.axes[*x].name,
                    &values(*x),
                    &plan.axes[*y].name,
                    &values(*y),
                    &labels,
                    &overlay,
                    &title,
                    figure,
                    dir,
                )
                .map_err(io)?;
            }
            let (xs, ys) = (values(*x), values(*y));
            let map = plot::RegimeMap::plain(
                (&plan.axes[*x].name, &xs),
                (&plan.axes[*y].name, &ys),
                &labels,
                &points,
                theory.as_ref(),
                &title,
            );
            let shares: Vec<Option<f64>> = outcomes.iter().map(|(_, o)| o.label_share).collect();
            let map = if plan.layout().share {
                map.with_shares(&shares)
            } else {
                map
            };
            map.write(figure, dir).map_err(io)
        }
        [p] => {
            // Branches belong under this picture only when they were continued in its parameter.
            let same = plan
                .continuation
                .as_ref()
                .is_some_and(|c| c.key == plan.axes[*p].key);
            let branches = if same { branches } else { &[] };
            let cycles = if same { cycles } else { &[] };
            let points: Vec<(f64, f64, f64, Option<Label>)> = outcomes
                .iter()
                .map(|(c, o)| {
                    (
                        c[*p],
                        o.r2_abs_tail_min.unwrap_or(f64::NAN),
                        o.r2_abs_tail_max.unwrap_or(f64::NAN),
                        label_of(o),
                    )
                })
                .collect();
            let lines: Vec<(Vec<(f64, f64)>, FixedKind)> = branches
                .iter()
                .flat_map(|b| {
                    // Split each branch where its kind changes.
                    plot::bifurcation::pieces_by_kind(
                        b.iter().map(|pt| ((pt.p, pt.r.norm()), branch_kind(pt))),
                    )
                })
                .collect();
            let mut special: Vec<(f64, f64, String)> = branches
                .iter()
                .flatten()
                .filter_map(|pt| {
                    pt.special.map(|s| {
                        let name = match pt.l1 {
                            Some(l1) if l1 < 0.0 => format!("{s} super"),
                            Some(l1) if l1 > 0.0 => format!("{s} sub"),
                            _ => s.to_string(),
                        };
                        (pt.p, Complex64::norm(pt.r), name)
                    })
                })
                .collect();
            special.extend(cycles.iter().flat_map(|b| {
                b.points
                    .iter()
                    .filter_map(|c| c.special.map(|s| (c.p, c.r2_abs_max, s.to_string())))
            }));
            let diagram = plot::Bifurcation {
                p_name: &plan.axes[*p].name,
                points: &points,
                branches: &lines,
                cycles: &cycle_lines(cycles),
                special: &special,
                title: &title,
                densities: false,
            };
            diagram.write(figure, dir).map_err(io)?;
            draw_cluster_diagram(plan, outcomes, *p, &title, dir).map_err(io)
        }
        _ => Ok(()),
    }
}

/// Whether the sweep draws `cluster_diagram.png`: its one varying axis is `model.beta`, its
/// points are simulated, and they keep their cluster histories for it.
pub fn draws_cluster_diagram(plan: &Plan) -> bool {
    let mut varying = plan.axes.iter().filter(|a| a.steps > 1);
    let beta = matches!((varying.next(), varying.next()), (Some(a), None) if a.key == "model.beta");
    beta && plan.label_source == super::spec::LabelSource::Simulation
        && plan.model != crate::scenario::ModelKind::Oa
}

/// `cluster_diagram.png` of a sweep over beta, from the points' cluster histories; none when
/// a point has no history (failed, or read from a shard file).
fn draw_cluster_diagram(
    plan: &Plan,
    outcomes: &[(Vec<f64>, &Outcome)],
    axis: usize,
    title: &str,
    dir: &Path,
) -> std::io::Result<()> {
    if !draws_cluster_diagram(plan) {
        return Ok(());
    }
    let Some(mut columns) = outcomes
        .iter()
        .map(|(c, o)| o.cluster_history.clone().map(|h| (c[axis], h)))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(());
    };
    columns.sort_by(|a, b| a.0.total_cmp(&b.0));
    let view = plot::cluster_diagram::DiagramView {
        title: format!("{title}\ncount of tight clusters"),
        columns,
        t_first: plan.base.time.t_end / (plan.base.time.samples.max(2) - 1) as f64,
    };
    plot::cluster_diagram::cluster_diagram_plot(&view, plan.base.output.figure, dir)
}
