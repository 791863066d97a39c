//! `summary.json` of a run: typed fields, written as words and numbers only by serde.

use std::path::PathBuf;

use serde::Serialize;

use crate::classify::{Classification, Features, Label};
use crate::integrate::Solution;
use crate::model::KernelChoice;
use crate::output::RunOptions;
use crate::scenario::{KernelKind, KernelMethodKind, ModelKind, Scenario};
use crate::simulation;

/// `summary.json`: typed fields, written as words and numbers only by serde.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The scenario's name.
    pub name: String,
    /// The scenario's description.
    pub description: Option<String>,
    /// The model that ran.
    pub model: ModelKind,
    /// The attention kernel.
    pub kernel: KernelKind,
    /// `spectral` or `harmonics` when that series evaluated the field, else `direct`.
    pub kernel_method: KernelMethodKind,
    /// The series' truncation: M of the spectral kernel (|m|, |l| <= M) or the degree L of the
    /// harmonics; null for the direct kernel.
    pub spectral_terms: Option<usize>,
    /// Number of tokens.
    pub n: usize,
    /// Dimension of the tokens.
    pub d: usize,
    /// The label of the long-term behaviour.
    pub label: Label,
    /// Why the classifier chose the label (and, for `undetermined`, what to change).
    pub label_reason: String,
    /// The numbers the label was read from.
    pub features: Features,
    /// The label the scenario expects, if it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect: Option<Label>,
    /// Whether the run showed the expected label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect_met: Option<bool>,
    /// Largest | |x_k| - 1 | of the tokens handed to the observers.
    pub norm_drift_max: f64,
    /// Largest | |x_k| - 1 | the integrator reached between two projections.
    pub norm_drift_step_max: f64,
    /// Evaluations of the vector field.
    pub rhs_evals: u64,
    /// Accepted integrator steps.
    pub accepted_steps: u64,
    /// Rejected integrator steps.
    pub rejected_steps: u64,
    /// Output samples written.
    pub samples: usize,
    /// The scenario's `time.t_end`.
    pub t_end: f64,
    /// Time of the last sample: t_end, or later when the run went on until its label was
    /// certain (at most time.t_max).
    pub t_final: f64,
    /// Wall time of the integration, observers included.
    pub wall_seconds: f64,
    /// Where the run's wall time went (not deterministic, like `wall_seconds`).
    pub timings: Timings,
    /// The version of tokdyn that ran.
    pub version: String,
    /// The tokens' seed.
    pub seed: u64,
    /// The command line, for provenance.
    pub command_line: Vec<String>,
    /// The scenario file as given.
    pub scenario_file: String,
    /// The scenario after `--set`, with every default and matrix written out.
    pub scenario: toml::Table,
    /// `tokdyn compare`: the reductions against the full model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<super::CompareSummary>,
    /// For a stack of layers: its size, passes, and what the label was read on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<crate::layers::StackInfo>,
    /// Pre-LN: the range of the stream's norms |x_k| at the last sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_norms: Option<simulation::NormRange>,
    /// The tight clusters (models with tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clusters: Option<crate::classify::metastable::RunClusters>,
    /// `[lyapunov]` (or a run labelled `chaotic`): the first Lyapunov exponents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lyapunov: Option<super::lyapunov::LyapunovSummary>,
    /// `--model mean-field`: the grid, the tail of the modes, why the run stopped early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_field: Option<crate::mean_field::MeanFieldSummary>,
    /// The rows of clusters.csv, for the Python module (not written to summary.json).
    #[serde(skip)]
    pub cluster_rows: Vec<crate::observe::cluster_series::ClusterRow>,
}

impl Summary {
    /// The summary of a finished run.
    pub fn new(
        scenario: &Scenario,
        model: ModelKind,
        solution: &Solution,
        classification: &Classification,
        options: &RunOptions,
    ) -> Self {
        let label = classification.label;
        let choice = simulation::kernel_choice(scenario, model).unwrap_or(KernelChoice::Direct);
        Summary {
            name: scenario.name.clone(),
            description: scenario.description.clone(),
            model,
            kernel: scenario.model.kernel,
            kernel_method: match choice {
                KernelChoice::Direct => KernelMethodKind::Direct,
                KernelChoice::Spectral { .. } => KernelMethodKind::Spectral,
                KernelChoice::Harmonics { .. } => KernelMethodKind::Harmonics,
            },
            spectral_terms: choice.terms(),
            n: scenario.tokens.n,
            d: scenario.model.d,
            expect_met: scenario.expect.map(|e| e == label),
            expect: scenario.expect,
            label,
            label_reason: classification.reason.clone(),
            features: classification.features.clone(),
            norm_drift_max: solution.norm_drift_max,
            norm_drift_step_max: solution.step_drift_max,
            rhs_evals: solution.rhs_evals,
            accepted_steps: solution.accepted_steps,
            rejected_steps: solution.rejected_steps,
            samples: solution.samples,
            t_end: scenario.time.t_end,
            t_final: solution.t_last,
            wall_seconds: solution.wall.as_secs_f64(),
            timings: Timings::of(solution),
            version: env!("CARGO_PKG_VERSION").to_string(),
            seed: scenario.tokens.seed,
            command_line: options.command_line.clone(),
            scenario_file: scenario.file.display().to_string(),
            scenario: scenario.resolved.clone(),
            compare: None,
            stack: None,
            stream_norms: simulation::stream_norms(scenario, model, &solution.final_state),
            clusters: None,
            lyapunov: None,
            mean_field: None,
            cluster_rows: Vec::new(),
        }
    }
}

/// summary.json `timings`: seconds of a run's wall time spent in the flow (the field and the
/// integrator), the observers (order parameters, clusters and the other observers, the
/// classifier's look at the clusters), the pictures and the writing of files. Parts that run
/// concurrently (the pictures beside `tokens_final.csv`) each count their own wall time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Timings {
    /// The field and the integrator.
    pub flow: f64,
    /// Order parameters, clusters and other observers.
    pub observers: f64,
    /// Drawing the pictures.
    pub pictures: f64,
    /// Writing files other than the observers' streams and summary.json itself.
    pub writing: f64,
}

impl Timings {
    /// The flow and observer times of an integration (no pictures or files yet).
    pub fn of(solution: &Solution) -> Self {
        let observers = solution.observing.as_secs_f64();
        Timings {
            flow: (solution.wall.as_secs_f64() - observers).max(0.0),
            observers,
            pictures: 0.0,
            writing: 0.0,
        }
    }
}

/// What a finished run hands back.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The output folder.
    pub dir: PathBuf,
    /// The summary written there.
    pub summary: Summary,
}
