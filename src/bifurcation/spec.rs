//! What a sweep file asks of the bifurcation analysis: `[continuation]` (pseudo-arclength
//! continuation of OA fixed points along one parameter, docs/MATH.md §10, or on a mean-field
//! base of stationary densities, §17.6) and `[codim2]` (fold
//! and Hopf curves in two parameters). The sweep file's reader (`sweep::spec`) builds them.

use serde::Serialize;

/// `[continuation]`: pseudo-arclength continuation of OA fixed points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContinuationSpec {
    /// The parameter as written.
    pub parameter: String,
    /// Its dotted scenario key.
    pub key: String,
    /// First value.
    pub from: f64,
    /// Last value.
    pub to: f64,
    /// Arclength step.
    pub step: f64,
    /// Most points per branch.
    pub max_points: usize,
    /// `cycles = true`: continue the periodic orbits born at the Hopf points (`cycles.csv`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cycles: bool,
    /// On a mean-field base: the family of stationary densities continued instead of OA fixed
    /// points (`bifurcation::stationary`).
    #[serde(skip)]
    pub stationary: Option<super::stationary::Family>,
}

/// A curve type of `[codim2]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CurveType {
    /// Folds of fixed points: F = 0, det J = 0.
    Fold,
    /// Hopf points (and neutral saddles): F = 0, tr J = 0.
    Hopf,
}

/// `[codim2]`: fold and Hopf curves in two parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Codim2Spec {
    /// The two parameters as written.
    pub parameters: [String; 2],
    /// Their dotted scenario keys.
    pub keys: [String; 2],
    /// The box's lower corner (as written: `from`).
    pub from: [f64; 2],
    /// The box's other corner.
    pub to: [f64; 2],
    /// Largest arclength step.
    pub step: f64,
    /// The curve types to trace.
    pub curves: Vec<CurveType>,
    /// Most points per curve and direction.
    pub max_points: usize,
}
