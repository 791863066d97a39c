//! From a checked scenario to a problem: the dynamics of the chosen model, its initial state,
//! the method and the output grid.
//!
//! | model | unknowns | initial state |
//! |---|---|---|
//! | `full` | n d token coordinates | the scenario's tokens |
//! | `phase` | n doubled angles xi_k = 2 t_k | from the tokens |
//! | `ws` | (Re Z, Im Z, psi) | Z = 0, psi = 0, with the tokens as constants |
//! | `oa` | (Re R, Im R) | r0 e^{i phi0} for `poisson`, else R2 of the tokens |

use crate::integrate::{Dynamics, Method, Problem};
use crate::model::spectral::{self, KernelChoice, KernelMethod, SpectralField};
use crate::model::{Attention, Head, Kernel, SphereField};
use crate::observe::order_parameter_r2;
use crate::reduced::{OttAntonsen, PhaseModel, SecondHarmonic, WatanabeStrogatz};
use crate::scenario::{
    InitKind, KernelKind, KernelMethodKind, MethodKind, ModelKind, Scenario, ScenarioError,
};

/// A scenario made ready to solve with one model.
pub struct Simulation {
    /// Which model.
    pub model: ModelKind,
    /// The vector field.
    pub dynamics: Box<dyn Dynamics + Send + Sync>,
    /// The state at t = 0.
    pub initial_state: Vec<f64>,
    /// The initial tokens (n x d).
    pub initial_tokens: Vec<f64>,
    /// The integration method.
    pub method: Method,
    /// Final time.
    pub t_end: f64,
    /// Number of output samples.
    pub samples: usize,
}

impl Simulation {
    /// The problem to hand to [`crate::integrate::solve`].
    pub fn problem(&self) -> Problem<'_> {
        Problem {
            dynamics: self.dynamics.as_ref(),
            initial_state: self.initial_state.clone(),
            t_end: self.t_end,
            samples: self.samples,
        }
    }
}

/// The attention layer of a scenario.
pub fn attention(scenario: &Scenario) -> Attention {
    let kernel = match scenario.model.kernel {
        KernelKind::Lsa => Kernel::Lsa,
        KernelKind::Usa => Kernel::Usa,
        KernelKind::Sa => Kernel::Sa,
    };
    let heads = scenario
        .model
        .heads
        .iter()
        .map(|h| Head {
            a: h.a.clone(),
            v: h.v.clone(),
        })
        .collect();
    Attention::new(kernel, scenario.model.beta, heads)
}

/// `model.kernel_method` of a scenario.
pub fn kernel_method(scenario: &Scenario) -> KernelMethod {
    match scenario.model.kernel_method {
        KernelMethodKind::Auto => KernelMethod::Auto,
        KernelMethodKind::Direct => KernelMethod::Direct,
        KernelMethodKind::Spectral => KernelMethod::Spectral,
    }
}

/// The kernel the `full` model of `scenario` runs with (`Direct` for the reductions), or an
/// error at `model.kernel_method` when `spectral` was asked for where it does not hold.
pub fn kernel_choice(scenario: &Scenario, model: ModelKind) -> Result<KernelChoice, ScenarioError> {
    if model != ModelKind::Full {
        return Ok(KernelChoice::Direct);
    }
    spectral::choose(
        &attention(scenario),
        scenario.tokens.n,
        kernel_method(scenario),
    )
    .map_err(|message| ScenarioError::at(&scenario.file, "model.kernel_method", message))
}

/// The integration method of a scenario.
pub fn method(scenario: &Scenario) -> Method {
    let s = &scenario.solver;
    match s.method {
        MethodKind::Dop853 => Method::Dop853 {
            rtol: s.rtol,
            atol: s.atol,
        },
        MethodKind::Dopri5 => Method::Dopri5 {
            rtol: s.rtol,
            atol: s.atol,
        },
        MethodKind::Rk4 => Method::Rk4 { dt: s.dt },
    }
}

/// The second-harmonic coefficients, or an error at `run.model` naming why they do not apply.
pub fn second_harmonic(
    scenario: &Scenario,
    model: ModelKind,
) -> Result<SecondHarmonic, ScenarioError> {
    SecondHarmonic::new(&attention(scenario)).map_err(|_| {
        ScenarioError::at(
            &scenario.file,
            "run.model",
            format!(
                "the {model} reduction needs d = 2 and kernel = \"lsa\" (a pure second-harmonic field); this scenario has d = {}, kernel = \"{}\"",
                scenario.model.d, scenario.model.kernel
            ),
        )
    })
}

/// Builds the simulation of `scenario` with `model`.
pub fn build(scenario: &Scenario, model: ModelKind) -> Result<Simulation, ScenarioError> {
    let tokens = scenario.initial_tokens()?;
    build_with_tokens(scenario, model, tokens)
}

/// Builds the simulation of `scenario` with `model` from given initial tokens.
pub fn build_with_tokens(
    scenario: &Scenario,
    model: ModelKind,
    tokens: Vec<f64>,
) -> Result<Simulation, ScenarioError> {
    let n = scenario.tokens.n;
    let (dynamics, initial_state): (Box<dyn Dynamics + Send + Sync>, Vec<f64>) = match model {
        ModelKind::Full => (
            Box::new(
                SphereField::with_kernel_method(attention(scenario), n, kernel_method(scenario))
                    .map_err(|m| ScenarioError::at(&scenario.file, "model.kernel_method", m))?,
            ),
            tokens.clone(),
        ),
        ModelKind::Phase => (
            Box::new(PhaseModel::new(second_harmonic(scenario, model)?, n)),
            PhaseModel::state_from_tokens(&tokens),
        ),
        ModelKind::Ws => (
            Box::new(WatanabeStrogatz::new(
                second_harmonic(scenario, model)?,
                &tokens,
            )),
            WatanabeStrogatz::initial_state(),
        ),
        ModelKind::Oa => {
            let sh = second_harmonic(scenario, model)?;
            let r = if scenario.tokens.init == InitKind::Poisson {
                num_complex::Complex64::from_polar(scenario.tokens.r0, scenario.tokens.phi0)
            } else {
                order_parameter_r2(&tokens, 2)
            };
            (Box::new(OttAntonsen::new(sh)), vec![r.re, r.im])
        }
    };
    Ok(Simulation {
        model,
        dynamics,
        initial_state,
        initial_tokens: tokens,
        method: method(scenario),
        t_end: scenario.time.t_end,
        samples: scenario.time.samples,
    })
}

/// Rough peak memory of a run in bytes: the solver's working vectors (about 28 states for
/// dop853 in `ode_solvers`, plus its bounded list of accepted states) and the field's scratch.
pub fn memory_estimate(scenario: &Scenario, model: ModelKind) -> u64 {
    let n = scenario.tokens.n as u64;
    let d = scenario.model.d as u64;
    let state = match model {
        ModelKind::Full => n.saturating_mul(d),
        ModelKind::Phase => n,
        ModelKind::Ws | ModelKind::Oa => 3,
    }
    .saturating_mul(8);
    let spectral = kernel_choice(scenario, model)
        .ok()
        .and_then(KernelChoice::terms);
    let scratch = match model {
        ModelKind::Full if spectral.is_some() => {
            SpectralField::scratch_bytes(scenario.tokens.n, 2 * spectral.unwrap_or(0)) as u64
        }
        ModelKind::Full => SphereField::scratch_bytes(
            scenario.tokens.n,
            scenario.model.d,
            attention(scenario).kernel,
            scenario.model.heads.len(),
        ) as u64,
        _ => n.saturating_mul(8 * 4),
    };
    let tokens = n.saturating_mul(d).saturating_mul(8 * 2);
    // The order-parameter series kept for the classifier and the pictures: t, R2, |R1|,
    // nematic and their copies, about 64 bytes a sample.
    let series = (scenario.time.samples as u64).saturating_mul(64);
    state
        .saturating_add(series)
        .saturating_mul(30)
        .saturating_add(scratch)
        .saturating_add(tokens)
        .saturating_add(64 << 20)
}

/// Memory available to this process (Linux `MemAvailable`), if known.
pub fn memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
