//! A run's Lyapunov exponents and the label `chaotic` (docs/MATH.md §15).
//!
//! The exponents are those of the full model's flow (the group model is its exact reduction for
//! `lsa`; the cluster model follows it until the clusters are tight), computed beside the run by
//! the tangent flow of `integrate::lyapunov` from the same start over [0, t_end]: when
//! `[lyapunov]` asks for them, and (one exponent, the defaults) when the tail of a run swings
//! without a period, so that `classify::chaos` can tell chaos from a long or irregular cycle.

use serde::Serialize;

use crate::classify::{chaos, Classification};
use crate::error::Error;
use crate::integrate::lyapunov::{spectrum, LyapunovFailure};
use crate::integrate::{LyapunovSettings, Spectrum, Status};
use crate::observe::OrderSeries;
use crate::scenario::{LyapunovSpec, ModelKind, Scenario};
use crate::simulation;

/// summary.json `lyapunov`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LyapunovSummary {
    /// lambda_1 >= ... >= lambda_k at the last time.
    pub exponents: Vec<f64>,
    /// max - min of each running estimate over the last half of the times.
    pub spread: Vec<f64>,
    /// When the logarithms started to count.
    pub transient: f64,
    /// The last time.
    pub t: f64,
}

impl LyapunovSummary {
    /// The summary of a spectrum.
    pub fn of(s: &Spectrum) -> Self {
        LyapunovSummary {
            exponents: s.exponents.clone(),
            spread: s.spread.clone(),
            transient: s.transient,
            t: s.t,
        }
    }
}

/// The first exponents of `scenario` as `spec` asks (the full model's tangent flow from the
/// scenario's start, DOP853 at the scenario's tolerances).
pub fn run_spectrum(scenario: &Scenario, spec: LyapunovSpec) -> Result<Spectrum, Error> {
    let sim = simulation::build(scenario, ModelKind::Full)?;
    let settings = LyapunovSettings {
        exponents: spec.exponents,
        transient: spec.transient,
        interval: spec.interval,
    };
    let tolerances = (scenario.solver.rtol, scenario.solver.atol);
    spectrum(
        sim.dynamics.as_ref(),
        &sim.initial_state,
        scenario.time.t_end,
        settings,
        tolerances,
    )
    .map_err(|failure| {
        let status = match failure {
            LyapunovFailure::Integration(status) => status,
            // Every layer of the full model has its derivative.
            LyapunovFailure::NoLinearization => Status::NonFinite { t: 0.0 },
        };
        Error::RunFailed {
            name: scenario.name.clone(),
            model: "tangent flow (lyapunov) of the full".into(),
            status,
        }
    })
}

/// The most numbers (n d) of a `group` or `clusters` run for which the automatic exponent is
/// computed: it takes the full model's tangent flow, which those models exist to avoid (a group
/// run of 10^5 tokens spent 51 s of its 51 s there, one of 10^7 passed 6.5 GB within a minute).
const AUTO_REDUCED_NUMBERS: usize = 20_000;

/// Whether the automatic exponent is computed for a run of `model` on `numbers` = n d numbers:
/// always for the full model (about twice its own run), up to [`AUTO_REDUCED_NUMBERS`] else.
fn affordable(model: ModelKind, numbers: usize) -> bool {
    model == ModelKind::Full || numbers <= AUTO_REDUCED_NUMBERS
}

/// The exponents a run reports and its label read with them: computed when `[lyapunov]` asks
/// (then returned), or with the defaults when the tail of `c` swings without a period (then
/// returned only when they make the run `chaotic`). Noisy runs and the `oa` model keep `c`.
pub fn label_with_exponents(
    scenario: &Scenario,
    model: ModelKind,
    c: Classification,
    series: &OrderSeries,
) -> Result<(Classification, Option<Spectrum>), Error> {
    let aperiodic = scenario.noise.is_none()
        && model != ModelKind::Oa
        && chaos::tail_without_period(&c, series);
    let numbers = scenario.tokens.n.saturating_mul(scenario.model.d);
    if aperiodic && scenario.lyapunov.is_none() && !affordable(model, numbers) {
        let mut c = c;
        c.reason.push_str(&format!(
            "; lambda_1 not computed: it needs the full model's tangent flow on n d = {numbers} numbers, which the {model} model avoids (ask for it with [lyapunov])"
        ));
        return Ok((c, None));
    }
    let spec = match scenario.lyapunov {
        Some(spec) => spec,
        None if aperiodic => LyapunovSpec::default_for(scenario.time.t_end),
        None => return Ok((c, None)),
    };
    // The tangent flow runs the full model whatever model the run used.
    simulation::check_memory(scenario, ModelKind::Full)?;
    let s = run_spectrum(scenario, spec)?;
    let refined = if aperiodic {
        chaos::refine(c, s.exponents[0], s.spread[0])
    } else {
        c
    };
    let report = scenario.lyapunov.is_some() || refined.label == crate::label::Label::Chaotic;
    Ok((refined, report.then_some(s)))
}
