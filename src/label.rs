//! The behaviour labels (docs/MATH.md §6): the words the classifier writes, a scenario's
//! `expect` names, and the pictures and sweep tables count. They live below every stage that
//! uses them (scenario, classify, predict, plot, sweep).

use serde::{Deserialize, Serialize};

/// The labels of docs/MATH.md §6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Label {
    /// The tokens settle into clusters (s -> 1) whose axis stops.
    ConvergedClusters,
    /// Clusters form (s -> 1) and their axis keeps turning.
    RotatingClusters,
    /// s keeps swinging with a steady amplitude (periodic orbits).
    Oscillation,
    /// s converges below 1: no clustering, a resting interior state.
    InteriorPoint,
    /// s converges below 1 while the axis keeps turning (a rotating wave).
    RotatingInterior,
    /// None of the above could be decided; the reason says what to change.
    Undetermined,
    /// The tokens sit in k >= 1 tight clusters that are not the final state (a saddle of the
    /// cluster model, or clusters that will still merge).
    MetastableClusters,
    /// The tail swings without a period and the largest Lyapunov exponent is positive beyond
    /// its spread (docs/MATH.md §15).
    Chaotic,
}

impl Label {
    /// Every label, in the order of docs/MATH.md §6.
    pub const ALL: [Label; 8] = [
        Label::ConvergedClusters,
        Label::RotatingClusters,
        Label::Oscillation,
        Label::InteriorPoint,
        Label::RotatingInterior,
        Label::Undetermined,
        Label::MetastableClusters,
        Label::Chaotic,
    ];

    /// The label's word in outputs (and in a scenario's `expect`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Label::ConvergedClusters => "converged-clusters",
            Label::RotatingClusters => "rotating-clusters",
            Label::Oscillation => "oscillation",
            Label::InteriorPoint => "interior-point",
            Label::RotatingInterior => "rotating-interior",
            Label::Undetermined => "undetermined",
            Label::MetastableClusters => "metastable-clusters",
            Label::Chaotic => "chaotic",
        }
    }

    /// The label of a word, if it is one.
    pub fn from_word(word: &str) -> Option<Label> {
        Label::ALL.into_iter().find(|l| l.as_str() == word)
    }
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
