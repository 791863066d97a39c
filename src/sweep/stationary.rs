//! A sweep whose base is a mean field (A = V = I) with `[continuation]`: the branches of
//! stationary densities (`bifurcation::stationary`, docs/MATH.md §17.6) instead of a grid.
//! Everything is computed before the folder is touched; then `branches.csv`,
//! `special_points.json`, `bifurcation.png` and `summary.json` are written.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::bifurcation::spec::ContinuationSpec;
use crate::bifurcation::stationary::{self, report, Branches, Family, StatePoint};
use crate::error::Error;
use crate::output::{write_atomic, write_json_atomic};
use crate::plot;
use crate::plot::bifurcation::FixedKind;

use super::spec::Plan;
use super::SweepOptions;

/// The continuation of the plan when it is one of stationary densities.
pub fn family(plan: &Plan) -> Option<(&ContinuationSpec, Family)> {
    let c = plan.continuation.as_ref()?;
    c.stationary.map(|f| (c, f))
}

/// The branches of a stationary continuation; an interruption is exit 130 like the others.
pub fn compute(c: &ContinuationSpec, family: Family) -> Result<Branches, Error> {
    let branches = stationary::continue_states(family, c.from, c.to, c.step, c.max_points);
    if crate::interrupt::is_requested() {
        return Err(Error::Interrupted("during the continuation".into()));
    }
    Ok(branches)
}

/// Polylines of a branch split where its stability changes.
fn lines(points: &[StatePoint]) -> Vec<(Vec<(f64, f64)>, FixedKind)> {
    plot::bifurcation::pieces_by_kind(points.iter().map(|pt| {
        let kind = if pt.stable {
            FixedKind::Stable
        } else {
            FixedKind::Unstable
        };
        ((pt.p, pt.r1), kind)
    }))
}

/// The picture's title: the fixed data of the family.
fn title(plan: &Plan, c: &ContinuationSpec, family: &Family) -> String {
    let kernel = plan.base.model.kernel;
    let fixed = match family.parameter {
        stationary::Parameter::Temperature => {
            format!("beta = {}", plot::short_number(family.other))
        }
        stationary::Parameter::Beta => format!("T = {}", plot::short_number(family.other)),
    };
    format!(
        "{}\nstationary densities of the mean field: {kernel}, d = {}{}, A = V = I, {fixed}; {} from {} to {}",
        plan.name,
        family.d,
        if family.d == 2 { "" } else { " (axisymmetric)" },
        c.parameter,
        plot::short_number(c.from),
        plot::short_number(c.to)
    )
}

/// Runs a stationary continuation sweep (no shards: it has no grid); returns the folder.
pub fn run(
    plan: &Plan,
    options: &SweepOptions,
    shard: bool,
    started: Instant,
) -> Result<PathBuf, Error> {
    let Some((c, family)) = family(plan) else {
        return Err(Error::Input(
            "not a continuation of stationary densities".into(),
        ));
    };
    if shard {
        return Err(Error::Input(format!(
            "{}: continuation: a continuation of stationary densities has no grid to shard: run it without --shard",
            plan.file.display()
        )));
    }
    let branches = compute(c, family)?;
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| crate::output::default_folder(&plan.name));
    let dir = crate::output::resolve_out(&out)?;
    crate::output::check_replaceable(&dir, crate::output::ResultKind::Sweep)?;
    fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    write(plan, c, &family, &branches, &dir, options, started)?;
    Ok(dir)
}

/// Writes the folder's files.
fn write(
    plan: &Plan,
    c: &ContinuationSpec,
    family: &Family,
    branches: &Branches,
    dir: &Path,
    options: &SweepOptions,
    started: Instant,
) -> Result<(), Error> {
    let csv_path = dir.join("branches.csv");
    let text = report::csv(&c.parameter, branches);
    write_atomic(&csv_path, text.as_bytes()).map_err(Error::io(&csv_path))?;
    let special_path = dir.join("special_points.json");
    let records = report::specials(&c.parameter, branches);
    write_json_atomic(&special_path, &records).map_err(Error::io(&special_path))?;
    for stale in ["sweep.csv", "boundaries.csv", "cycles.csv", "curves.csv"] {
        let path = dir.join(stale);
        if path.exists() {
            fs::remove_file(&path).map_err(Error::io(&path))?;
        }
    }
    let mut drawn = lines(&branches.uniform);
    drawn.extend(lines(&branches.bump));
    let special: Vec<(f64, f64, String)> = branches
        .uniform
        .iter()
        .chain(&branches.bump)
        .filter_map(|p| p.point.map(|s| (p.p, p.r1, s.to_string())))
        .collect();
    let diagram = plot::Bifurcation {
        p_name: &c.parameter,
        points: &[],
        branches: &drawn,
        cycles: &[],
        special: &special,
        title: &title(plan, c, family),
        densities: true,
    };
    diagram
        .write(plan.base.output.figure, dir)
        .map_err(Error::io(&dir.join("bifurcation.png")))?;
    let mut summary = super::grid_summary(plan, &[], 0, options);
    summary.points = 0;
    summary.continuation = Some(report::summary(
        &c.parameter,
        c.from,
        c.to,
        c.step,
        branches,
    ));
    summary.wall_seconds = started.elapsed().as_secs_f64();
    let json = dir.join("summary.json");
    write_json_atomic(&json, &summary).map_err(Error::io(&json))
}
