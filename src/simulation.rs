//! From a checked scenario to a problem: the dynamics of the chosen model, its initial state,
//! the method and the output grid.
//!
//! | model | unknowns | initial state |
//! |---|---|---|
//! | `full` | n d token coordinates | the scenario's tokens |
//! | `phase` | n doubled angles xi_k = 2 t_k | from the tokens |
//! | `ws` | (Re Z, Im Z, psi) | Z = 0, psi = 0, with the tokens as constants |
//! | `oa` | (Re R, Im R) | r0 e^{i phi0} for `poisson`, else R2 of the tokens |
//! | `group` | Phi (d x d, column-major) | Phi = I, with the tokens as constants |

use crate::error::Error;
use crate::integrate::{Dynamics, Method, NoiseSettings, Piecewise, Problem};
use crate::model::harmonics::HarmonicsField;
use crate::model::kernel_method::{self, KernelChoice, KernelMethod};
use crate::model::spectral::SpectralField;
use crate::model::{
    Attention, FactoredHead, Head, Kernel, Mask, Normalization, Position, SphereField,
};
use crate::observe::order_parameter_r2;
use crate::reduced::{GroupFlow, OttAntonsen, PhaseModel, SecondHarmonic, WatanabeStrogatz};
use crate::scenario::{
    InitKind, KernelKind, KernelMethodKind, MaskKind, MethodKind, ModelKind, NormalizationKind,
    PositionSpec, Scenario, ScenarioError,
};

/// A scenario made ready to solve with one model.
pub struct Simulation {
    /// Which model.
    pub model: ModelKind,
    /// The vector field.
    pub dynamics: Box<dyn Dynamics + Send + Sync>,
    /// The state at t = 0.
    pub initial_state: Vec<f64>,
    /// The initial tokens (n x d), shared with the dynamics that hold them (`group`).
    pub initial_tokens: std::sync::Arc<Vec<f64>>,
    /// The integration method.
    pub method: Method,
    /// Final time.
    pub t_end: f64,
    /// Number of output samples.
    pub samples: usize,
    /// Latest time the run may go on to while its label is not certain.
    pub t_max: f64,
    /// `clusters`: the cluster model that takes over once the tokens are tight.
    pub staircase: Option<crate::reduced::staircase::ClusterPlan>,
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

    /// Solves with the observers; past t_end (up to t_max) while `watch` is not certain.
    pub fn solve(
        &self,
        observers: &mut [&mut dyn crate::observe::Observer],
    ) -> std::io::Result<crate::integrate::Solution> {
        if let Some(plan) = &self.staircase {
            let grid = (self.t_end, self.samples);
            let dynamics = self.dynamics.as_ref();
            return crate::reduced::staircase::solve_staircase(
                dynamics,
                plan,
                &self.initial_state,
                self.method,
                grid,
                observers,
            )
            .map(|(solution, _)| solution);
        }
        crate::integrate::solve_until(&self.problem(), self.method, observers, self.t_max)
    }
}

/// One layer on the sphere (post-LN), unmasked and without noise: where the flow is the
/// gradient flow of the energy (V = A symmetric) and the cluster model holds (docs/MATH.md §11).
pub fn one_free_sphere_layer(scenario: &Scenario) -> bool {
    scenario.model.layers.is_empty() && scenario.model.is_plain() && scenario.noise.is_none()
}

/// The layer whose clusters refine the label: one free layer on the sphere; elsewhere the
/// clusters are reported and the label is the order parameters' one.
pub fn cluster_attention(scenario: &Scenario) -> Option<Attention> {
    one_free_sphere_layer(scenario).then(|| attention(scenario))
}

/// The attention layer of a scenario (for a stack of layers: the first layer).
pub fn attention(scenario: &Scenario) -> Attention {
    attention_of(scenario, &scenario.model.heads, &scenario.model.factored)
}

/// The attention layers of a scenario with a stack, in order (empty without one).
pub fn layer_attentions(scenario: &Scenario) -> Vec<(Attention, f64)> {
    scenario
        .model
        .layers
        .iter()
        .map(|l| (attention_of(scenario, &l.heads, &l.factored), l.duration))
        .collect()
}

/// Builds one dynamics per layer with `make` and stacks them; `None` without a stack. Any
/// model built from an [`Attention`] plugs in here. Layers sharing their heads (the same
/// `Arc`) share one dynamics: `make` runs once per distinct layer.
pub fn stacked<E>(
    scenario: &Scenario,
    mut make: impl FnMut(Attention) -> Result<Box<dyn Dynamics + Send + Sync>, E>,
) -> Result<Option<Box<dyn Dynamics + Send + Sync>>, E> {
    let layers = &scenario.model.layers;
    if layers.is_empty() {
        return Ok(None);
    }
    type Shared = std::sync::Arc<dyn Dynamics + Send + Sync>;
    let mut made: std::collections::HashMap<(usize, usize), Shared> =
        std::collections::HashMap::new();
    let mut pieces = Vec::with_capacity(layers.len());
    let mut durations = Vec::with_capacity(layers.len());
    for layer in layers {
        let key = layer_identity(layer);
        let piece = match made.get(&key) {
            Some(p) => p.clone(),
            None => {
                let p: Shared = make(attention_of(scenario, &layer.heads, &layer.factored))?.into();
                made.insert(key, p.clone());
                p
            }
        };
        pieces.push(piece);
        durations.push(layer.duration);
    }
    Ok(Some(Box::new(Piecewise::shared(
        pieces,
        durations,
        scenario.model.looped,
    ))))
}

/// Which stored heads a layer uses: layers with the same pair share their matrices.
fn layer_identity(layer: &crate::scenario::LayerSpec) -> (usize, usize) {
    (
        std::sync::Arc::as_ptr(&layer.heads) as usize,
        std::sync::Arc::as_ptr(&layer.factored) as usize,
    )
}

/// An attention layer with the scenario's kernel, beta, mask and normalisation and the given
/// heads (factored heads stay factored).
fn attention_of(
    scenario: &Scenario,
    heads: &[crate::scenario::HeadSpec],
    factored: &[crate::scenario::FactorSpec],
) -> Attention {
    let kernel = match scenario.model.kernel {
        KernelKind::Lsa => Kernel::Lsa,
        KernelKind::Usa => Kernel::Usa,
        KernelKind::Sa => Kernel::Sa,
    };
    let heads = heads
        .iter()
        .map(|h| Head {
            a: h.a.clone(),
            v: h.v.clone(),
        })
        .collect();
    let factored = factored
        .iter()
        .map(|f| FactoredHead {
            q: f.q.clone(),
            k: f.k.clone(),
            v: f.v.clone(),
            o: f.o.clone(),
        })
        .collect();
    let mask = match scenario.model.mask {
        MaskKind::None => Mask::None,
        MaskKind::Causal => Mask::Causal,
    };
    let normalization = match scenario.model.normalization {
        NormalizationKind::Post => Normalization::Post,
        NormalizationKind::Pre => Normalization::Pre,
        NormalizationKind::Peri => Normalization::Peri,
        NormalizationKind::Ngpt => Normalization::Ngpt,
    };
    let layer = Attention::new(kernel, scenario.model.beta, heads)
        .with_factored(factored)
        .with_mask(mask)
        .with_normalization(normalization)
        .with_ngpt_alpha(scenario.model.ngpt_alpha);
    let position = match &scenario.model.position {
        PositionSpec::None => Position::None,
        PositionSpec::Rope { base } => Position::Rope { base: *base },
        alibi => Position::Alibi {
            slopes: alibi
                .slopes(layer.head_count(), scenario.tokens.n)
                .unwrap_or_default(),
        },
    };
    layer.with_position(position)
}

/// `model.kernel_method` of a scenario.
pub fn kernel_method(scenario: &Scenario) -> KernelMethod {
    match scenario.model.kernel_method {
        KernelMethodKind::Auto => KernelMethod::Auto,
        KernelMethodKind::Direct => KernelMethod::Direct,
        KernelMethodKind::Spectral => KernelMethod::Spectral,
        KernelMethodKind::Harmonics => KernelMethod::Harmonics,
    }
}

/// The kernel the `full` model of `scenario` runs with (`Direct` for the reductions), or an
/// error at `model.kernel_method` when `spectral` or `harmonics` was asked for where it does not
/// hold (the harmonics are held to `solver.rtol`).
pub fn kernel_choice(scenario: &Scenario, model: ModelKind) -> Result<KernelChoice, ScenarioError> {
    if !matches!(model, ModelKind::Full | ModelKind::Clusters) {
        return Ok(KernelChoice::Direct);
    }
    kernel_method::choose(
        &attention(scenario),
        scenario.tokens.n,
        kernel_method(scenario),
        scenario.solver.rtol,
    )
    .map_err(|message| ScenarioError::at(&scenario.file, "model.kernel_method", message))
}

/// The integration method of a scenario: the stochastic Heun scheme when it has `[noise]`
/// (only the full model runs with noise: validation refuses the others).
pub fn method(scenario: &Scenario) -> Method {
    if let Some(noise) = &scenario.noise {
        return Method::StochasticHeun(NoiseSettings {
            temperature: noise.temperature,
            dt: noise.largest_step,
            min_step: scenario.time.t_end / crate::scenario::MAX_NOISE_STEPS,
            seed: noise.seed,
            d: scenario.model.d,
        });
    }
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
    SecondHarmonic::new(&attention(scenario).formed()).map_err(|_| not_reducible(scenario, model))
}

/// An error for commands that read one layer acting for ever (`predict`, `portrait`) when
/// the scenario has a stack of layers.
pub fn require_single_layer(scenario: &Scenario, command: &str) -> Result<(), ScenarioError> {
    if scenario.model.layers.is_empty() {
        return Ok(());
    }
    Err(ScenarioError::at(
        &scenario.file,
        "model.layers",
        format!(
            "`{command}` reads one layer acting for ever; this scenario has a stack of {} layers",
            scenario.model.layers.len()
        ),
    ))
}

/// An error for commands that run or analyse deterministic models beside (or instead of)
/// the full one (`compare`, `predict`, `portrait`) when the scenario has `[noise]`.
pub fn require_no_noise(scenario: &Scenario, command: &str) -> Result<(), ScenarioError> {
    if scenario.noise.is_none() {
        return Ok(());
    }
    Err(ScenarioError::at(
        &scenario.file,
        "noise.temperature",
        format!(
            "`{command}` reads the deterministic reduced models, which have no noise; use `tokdyn run` (full model) for noisy tokens"
        ),
    ))
}

/// Why a reduction does not apply to `scenario`.
fn not_reducible(scenario: &Scenario, model: ModelKind) -> ScenarioError {
    ScenarioError::at(
        &scenario.file,
        "run.model",
        format!(
            "the {model} reduction needs d = 2 and kernel = \"lsa\" (a pure second-harmonic field); this scenario has d = {}, kernel = \"{}\"",
            scenario.model.d, scenario.model.kernel
        ),
    )
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
    // The reductions and the group model do not hold under a mask or pre-LN (`compare` too).
    crate::scenario::check_run_model(model, &scenario.model, &scenario.file)?;
    let n = scenario.tokens.n;
    let tokens = std::sync::Arc::new(tokens);
    // The reductions and the group model read every head as A and V.
    let harmonic = |attention: &Attention| {
        SecondHarmonic::new(&attention.formed()).map_err(|_| not_reducible(scenario, model))
    };
    let layer = |attention: Attention| -> Result<Box<dyn Dynamics + Send + Sync>, ScenarioError> {
        Ok(match model {
            ModelKind::Full | ModelKind::Clusters => Box::new(
                SphereField::with_kernel(
                    attention,
                    n,
                    kernel_method(scenario),
                    scenario.solver.rtol,
                )
                .map_err(|m| ScenarioError::at(&scenario.file, "model.kernel_method", m))?,
            ),
            ModelKind::Phase => Box::new(PhaseModel::new(harmonic(&attention)?, n)),
            ModelKind::Ws => Box::new(WatanabeStrogatz::new(harmonic(&attention)?, &tokens)),
            ModelKind::Oa => Box::new(OttAntonsen::new(harmonic(&attention)?)),
            ModelKind::Group => Box::new(
                GroupFlow::new(attention.formed(), tokens.clone())
                    .ok_or_else(|| group_needs_lsa(scenario))?,
            ),
            ModelKind::MeanField => return Err(mean_field_has_no_tokens(scenario)),
        })
    };
    let dynamics = match stacked(scenario, layer)? {
        Some(stack) => stack,
        None => layer(attention(scenario))?,
    };
    let initial_state = match model {
        ModelKind::Full | ModelKind::Clusters => tokens.to_vec(),
        ModelKind::Phase => PhaseModel::state_from_tokens(&tokens),
        ModelKind::Ws => WatanabeStrogatz::initial_state(),
        ModelKind::Oa => {
            let r = if scenario.tokens.init == InitKind::Poisson {
                num_complex::Complex64::from_polar(scenario.tokens.r0, scenario.tokens.phi0)
            } else {
                order_parameter_r2(&tokens, 2)
            };
            vec![r.re, r.im]
        }
        ModelKind::Group => GroupFlow::initial_state(scenario.model.d),
        ModelKind::MeanField => return Err(mean_field_has_no_tokens(scenario)),
    };
    Ok(Simulation {
        model,
        dynamics,
        initial_state,
        initial_tokens: tokens,
        method: method(scenario),
        t_end: scenario.time.t_end,
        samples: scenario.time.samples,
        // A noisy run has no certain label to wait for: it stops at t_end.
        t_max: if scenario.noise.is_some() {
            scenario.time.t_end
        } else {
            scenario.time.t_max
        },
        staircase: (model == ModelKind::Clusters).then(|| crate::reduced::staircase::ClusterPlan {
            attention: attention(scenario),
            rule: scenario.clusters,
        }),
    })
}

/// The error at `run.model` for the group model with a softmax kernel.
fn group_needs_lsa(scenario: &Scenario) -> ScenarioError {
    ScenarioError::at(
        &scenario.file,
        "run.model",
        format!(
            "the group model needs kernel = \"lsa\"; this scenario has kernel = \"{}\"",
            scenario.model.kernel
        ),
    )
}

/// The mean field is not a token model: the commands that need tokens (compare, ensembles,
/// sweeps) refuse it.
fn mean_field_has_no_tokens(scenario: &Scenario) -> ScenarioError {
    ScenarioError::at(
        &scenario.file,
        "run.model",
        "the mean-field model evolves a density, not tokens: run it with `tokdyn run` (compare, sweeps and ensembles take token models)",
    )
}

/// Peak memory of a mean-field run: the largest grid's stepper (about 12 coefficient vectors),
/// its stored quadrature weights (N^2 per head when A is not a R; d >= 3: the Gegenbauer
/// tables) and the kept samples.
fn mean_field_memory(scenario: &Scenario) -> u64 {
    let Some(density) = &scenario.density else {
        return 0;
    };
    if scenario.model.d >= 3 {
        // The tables P_l(u_k), P_l'(u_k): 2 m (2m/3) numbers; the stepper's vectors of
        // about 2m/3 coefficients; the kept samples (coefficients and values).
        let m = density.max_grid.min(crate::mean_field::MAX_SPHERE_GRID) as u64;
        let tables = m.saturating_mul(m).saturating_mul(16 * 2 / 3);
        let samples = (scenario.time.samples as u64)
            .saturating_mul(m)
            .saturating_mul(16 + 8);
        return tables
            .saturating_add(m.saturating_mul(16 * 16))
            .saturating_add(samples);
    }
    // Every layer's heads (a stack's layers act one at a time).
    let problem = mean_field_problem(scenario).map(|mut p| {
        if let Some(stack) = mean_field_stack(scenario) {
            p.heads = stack.layers.into_iter().flat_map(|l| l.heads).collect();
        }
        p
    });
    let cap = problem.as_ref().map_or(density.max_grid, |p| {
        if p.heads
            .iter()
            .all(|h| crate::mean_field::circle::commutes_with_rotations(&h.a))
        {
            density.max_grid
        } else {
            density.max_grid.min(crate::mean_field::MAX_QUADRATURE_GRID)
        }
    }) as u64;
    let heads = std::iter::once((scenario.model.heads.len(), scenario.model.factored.len()))
        .chain(
            scenario
                .model
                .layers
                .iter()
                .map(|l| (l.heads.len(), l.factored.len())),
        )
        .map(|(a, b)| a + b)
        .max()
        .unwrap_or(1) as u64;
    let quadrature = if problem.as_ref().is_ok_and(|p| {
        p.heads
            .iter()
            .any(|h| !crate::mean_field::circle::commutes_with_rotations(&h.a))
    }) {
        cap.saturating_mul(cap)
            .saturating_mul(8)
            .saturating_mul(heads)
    } else {
        0
    };
    let samples = (scenario.time.samples as u64)
        .saturating_mul(cap)
        .saturating_mul(16 + 8);
    cap.saturating_mul(16 * 16)
        .saturating_add(quadrature)
        .saturating_add(samples)
}

/// d >= 3: each added degree l must be resolved by the largest grid (l <= (2m - 1)/3 for
/// m = min(max_grid, the sphere's largest grid) Gauss nodes).
fn check_sphere_modes(
    scenario: &Scenario,
    modes: &[(u32, f64, f64)],
    max_grid: usize,
) -> Result<(), ScenarioError> {
    use crate::mean_field::{sphere::top_degree, MAX_SPHERE_GRID};
    let m = max_grid.min(MAX_SPHERE_GRID);
    match modes.iter().position(|x| x.0 as usize > top_degree(m)) {
        Some(i) => Err(ScenarioError::at(
            &scenario.file,
            format!("density.modes[{i}]"),
            format!(
                "degree {} is past the largest grid's degree {} ({m} Gauss nodes keep l <= (2m - 1)/3)",
                modes[i].0,
                top_degree(m)
            ),
        )),
        None => Ok(()),
    }
}

/// The mean-field problem of a scenario (d = 2, or d >= 3 axisymmetric with A = a I, V = v I;
/// the scenario was checked for it).
pub fn mean_field_problem(
    scenario: &Scenario,
) -> Result<crate::mean_field::MeanFieldProblem, ScenarioError> {
    use crate::mean_field::{Kernel as MfKernel, StartDensity};
    let density = scenario.density.as_ref().ok_or_else(|| {
        ScenarioError::at(&scenario.file, "run.model", "not a mean-field scenario")
    })?;
    let heads = mean_field_heads(&scenario.model.heads, &scenario.model.factored);
    let start = StartDensity {
        shape: density.init,
        modes: density.modes.clone(),
    };
    if scenario.model.d >= 3 {
        check_sphere_modes(scenario, &density.modes, density.max_grid)?;
    }
    let minimum = if scenario.model.d >= 3 {
        crate::mean_field::sphere::start_minimum(&start, scenario.model.d)
    } else {
        start.minimum()
    };
    if minimum.is_nan() || minimum < 0.0 {
        return Err(ScenarioError::at(
            &scenario.file,
            "density.modes",
            format!("the start density is negative (its minimum is {minimum:.3e}): a density must be >= 0 and of mass 1; make the modes' amplitudes smaller"),
        ));
    }
    let problem = crate::mean_field::MeanFieldProblem {
        d: scenario.model.d,
        kernel: match scenario.model.kernel {
            KernelKind::Lsa => MfKernel::Lsa,
            KernelKind::Usa => MfKernel::Usa,
            KernelKind::Sa => MfKernel::Sa,
        },
        beta: scenario.model.beta,
        heads,
        temperature: scenario.noise.map_or(0.0, |n| n.temperature),
        start,
        rtol: scenario.solver.rtol,
        atol: scenario.solver.atol,
        t_end: scenario.time.t_end,
        samples: scenario.time.samples,
        grid: density.grid,
        max_grid: density.max_grid,
    };
    check_start_resolved(scenario, &problem)?;
    Ok(problem)
}

/// A start the largest grid does not resolve is refused before the run (it would stop at
/// t = 0 as concentrated), naming the key that made it narrow.
fn check_start_resolved(
    scenario: &Scenario,
    problem: &crate::mean_field::MeanFieldProblem,
) -> Result<(), ScenarioError> {
    use crate::mean_field::start::Shape;
    let stack = mean_field_stack(scenario);
    let Some(u) = crate::mean_field::unresolved_start(problem, stack.as_ref()) else {
        return Ok(());
    };
    let (key, what) = match problem.start.shape {
        Shape::VonMises { kappa, .. } => ("density.kappa", format!("kappa = {kappa:e}")),
        Shape::Poisson { r0, .. } => ("density.r0", format!("r0 = {r0}")),
        Shape::Uniform => ("density.modes", "its modes".to_string()),
    };
    Err(ScenarioError::at(
        &scenario.file,
        key,
        format!(
            "the start density ({what}) is narrower than the largest grid resolves: on {} points the top third of its modes holds {:.2e} of their weight (at most {:.0e}); make it wider or raise density.max_grid",
            u.grid, u.tail, u.tolerance
        ),
    ))
}

/// A layer's heads for the mean field (its first two rows and columns: d = 2, or d >= 3
/// where they are multiples of I), factored heads formed as A = Q K^T / sqrt(d_h),
/// V = (V O)^T.
fn mean_field_heads(
    heads: &[crate::scenario::HeadSpec],
    factored: &[crate::scenario::FactorSpec],
) -> Vec<crate::mean_field::MeanFieldHead> {
    let two = |m: &nalgebra::DMatrix<f64>| [[m[(0, 0)], m[(0, 1)]], [m[(1, 0)], m[(1, 1)]]];
    let formed = factored.iter().map(|f| {
        FactoredHead {
            q: f.q.clone(),
            k: f.k.clone(),
            v: f.v.clone(),
            o: f.o.clone(),
        }
        .formed()
    });
    heads
        .iter()
        .map(|h| (h.a.clone(), h.v.clone()))
        .chain(formed.map(|h| (h.a, h.v)))
        .map(|(a, v)| crate::mean_field::MeanFieldHead {
            a: two(&a),
            v: two(&v),
        })
        .collect()
}

/// The stack of layers of a mean-field scenario (`None` for one layer acting for ever).
pub fn mean_field_stack(scenario: &Scenario) -> Option<crate::mean_field::MeanFieldStack> {
    let layers = &scenario.model.layers;
    (!layers.is_empty()).then(|| crate::mean_field::MeanFieldStack {
        layers: layers
            .iter()
            .map(|l| crate::mean_field::MeanFieldLayer {
                heads: mean_field_heads(&l.heads, &l.factored),
                duration: l.duration,
            })
            .collect(),
        looped: scenario.model.looped,
    })
}

/// Rough peak memory of a run in bytes: the solver's working vectors (about 28 states for
/// dop853 in `ode_solvers`, plus its bounded list of accepted states) and the field's scratch.
pub fn memory_estimate(scenario: &Scenario, model: ModelKind) -> u64 {
    let n = scenario.tokens.n as u64;
    let d = scenario.model.d as u64;
    let state = match model {
        ModelKind::Full | ModelKind::Clusters => n.saturating_mul(d),
        ModelKind::Phase => n,
        ModelKind::Ws | ModelKind::Oa => 3,
        ModelKind::Group => d.saturating_mul(d),
        ModelKind::MeanField => return mean_field_memory(scenario),
    }
    .saturating_mul(8);
    let choice = kernel_choice(scenario, model).unwrap_or(KernelChoice::Direct);
    let scratch = match (model, choice) {
        (ModelKind::Full | ModelKind::Clusters, KernelChoice::Spectral { terms }) => {
            SpectralField::scratch_bytes(scenario.tokens.n, 2 * terms) as u64
        }
        (ModelKind::Full | ModelKind::Clusters, KernelChoice::Harmonics { terms }) => {
            HarmonicsField::scratch_bytes(scenario.tokens.n, terms, scenario.model.heads.len())
                as u64
        }
        (ModelKind::Full | ModelKind::Clusters, KernelChoice::Direct) => {
            SphereField::scratch_bytes(
                scenario.tokens.n,
                scenario.model.d,
                attention(scenario).kernel,
                scenario.model.heads.len(),
            )
            .saturating_add(factored_scratch_bytes(scenario)) as u64
        }
        (ModelKind::Group, _) => {
            GroupFlow::scratch_bytes(scenario.tokens.n, scenario.model.d) as u64
        }
        _ => n.saturating_mul(8 * 4),
    };
    // The initial tokens, and the final ones made for tokens_final.csv (the group model makes
    // them a piece at a time, in its scratch).
    let copies = if matches!(model, ModelKind::Group) {
        1
    } else {
        2
    };
    let tokens = n.saturating_mul(d).saturating_mul(8 * copies);
    // The order-parameter series kept for the classifier and the pictures: t, R2, |R1|,
    // nematic and their copies, about 64 bytes a sample.
    let series = (scenario.time.samples as u64).saturating_mul(64);
    state
        .saturating_add(series)
        .saturating_mul(30)
        .saturating_add(scratch)
        .saturating_add(tokens)
        .saturating_add(stack_and_snapshot_bytes(scenario))
        .saturating_add(64 << 20)
}

/// A stack's distinct layers (their matrices in the field, once each), the order parameters
/// at every layer boundary up to t_max (at most [`crate::scenario::MAX_LAYER_SEGMENTS`]), and
/// the token snapshots kept for `tokens.png` (at most 12, plus the chosen defaults).
fn stack_and_snapshot_bytes(scenario: &Scenario) -> u64 {
    let n = scenario.tokens.n as u64;
    let d = scenario.model.d;
    let snapshots = (scenario.output.snapshots.len() as u64 + 6)
        .saturating_mul(n)
        .saturating_mul(d as u64)
        .saturating_mul(8);
    let layers = &scenario.model.layers;
    if layers.is_empty() {
        return snapshots;
    }
    let mut distinct: Vec<(usize, usize)> = layers.iter().map(layer_identity).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let heads = layers
        .iter()
        .map(|l| l.heads.len() + l.factored.len())
        .max()
        .unwrap_or(1);
    let matrices = crate::memory::layer_entries(heads, d)
        .saturating_mul(distinct.len() as u64)
        .saturating_mul(8);
    let pass: f64 = layers.iter().map(|l| l.duration).sum();
    let segments = if scenario.model.looped {
        ((scenario.time.t_max / pass).ceil().max(1.0) * layers.len() as f64)
            .min(crate::scenario::MAX_LAYER_SEGMENTS)
    } else {
        layers.len() as f64
    } as u64;
    // Pass ends keep the cluster axis too (d numbers), for the stroboscopic series.
    let passes = segments / layers.len().max(1) as u64 + 1;
    matrices
        .saturating_add(segments.saturating_mul(crate::memory::BOUNDARY_BYTES))
        .saturating_add(passes.saturating_mul(8 * d as u64))
        .saturating_add(snapshots)
}

/// Bytes of the factored heads' scratch (the widest head of the scenario's first layer).
fn factored_scratch_bytes(scenario: &Scenario) -> usize {
    let kernel = attention(scenario).kernel;
    let widest = scenario.model.factored.iter().map(|f| f.q.ncols()).max();
    widest.map_or(0, |d_h| {
        crate::model::factored_scratch_numbers(scenario.tokens.n, d_h, kernel).saturating_mul(8)
    })
}

/// The smallest and largest norm of a pre-LN stream (summary.json `stream_norms`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct NormRange {
    /// min_k |x_k|.
    pub min: f64,
    /// max_k |x_k|.
    pub max: f64,
}

/// The norms' range of the full model's final stream under pre-LN; `None` otherwise.
pub fn stream_norms(scenario: &Scenario, model: ModelKind, state: &[f64]) -> Option<NormRange> {
    let pre = !scenario.model.normalization.on_sphere();
    if !pre || model != ModelKind::Full || state.is_empty() {
        return None;
    }
    let norms = state
        .chunks_exact(scenario.model.d)
        .map(|x| x.iter().map(|v| v * v).sum::<f64>().sqrt());
    let (min, max) = norms.fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
        (lo.min(r), hi.max(r))
    });
    Some(NormRange { min, max })
}

/// Memory available to this process (Linux `MemAvailable`), if known.
pub fn memory_available() -> Option<u64> {
    crate::memory::available()
}

/// Refuses, before allocating, a run that cannot fit in memory.
pub fn check_memory(scenario: &Scenario, model: ModelKind) -> Result<(), Error> {
    let need = memory_estimate(scenario, model);
    if let Some(available) = memory_available() {
        if need > available {
            return Err(Error::Input(format!(
                "{}: tokens.n: n = {}, d = {} needs about {:.1} GiB with the {model} model, more than the {:.1} GiB available",
                scenario.file.display(),
                scenario.tokens.n,
                scenario.model.d,
                need as f64 / (1u64 << 30) as f64,
                available as f64 / (1u64 << 30) as f64
            )));
        }
    }
    Ok(())
}
