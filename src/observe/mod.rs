//! Observers: what the integrator reports at each output sample.
//!
//! The integrator calls [`Observer::sample`] once per output sample with a [`Sample`]: the time,
//! the state, its [`OrderParameters`] and, when some observer asked for them, the tokens.
//! Writers, series recorders and progress reporting are observers; every hook defaults to
//! doing nothing.

pub mod circle_order;
pub mod cluster_series;
pub mod clusters;
pub mod leading_pair;
pub mod order;
pub mod plane_clusters;
pub mod progress;
pub mod series;
pub mod start_bound;
pub mod token_source;
pub mod unclustered;

pub use order::{
    order_parameter_r2, order_parameters, order_parameters_from_sums, order_parameters_mapped,
    principal_arg, OrderParameters,
};
pub use progress::Progress;
pub use series::{axis_distance, OrderSeries};
pub use token_source::{PlaneMap, PlaneOrder, TokenSource};

use std::io;

/// One output sample, as handed to observers.
pub struct Sample<'a> {
    /// Index of the sample, 0 for t = 0.
    pub index: usize,
    /// The time.
    pub t: f64,
    /// The model's state vector.
    pub state: &'a [f64],
    /// Order parameters of the state.
    pub order: &'a OrderParameters,
    /// Tokens n x d row-major, when the model has them and an observer wants them.
    pub tokens: Option<&'a [f64]>,
}

/// What a run tells its observers before the first sample.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// Number of output samples.
    pub samples: usize,
    /// Final time.
    pub t_end: f64,
}

/// Something the integrator calls at the start, at every output sample and at the end.
pub trait Observer {
    /// Whether [`Sample::tokens`] should be filled in (it costs O(n d) for reduced models).
    fn wants_tokens(&self) -> bool {
        false
    }
    /// Whether the tokens are wanted at sample `index` (defaults to [`Observer::wants_tokens`];
    /// an observer that keeps a few snapshots says no elsewhere, so reduced models do not make
    /// the tokens at every sample).
    fn wants_tokens_at(&self, _index: usize) -> bool {
        self.wants_tokens()
    }
    /// Whether this observer takes a sample's tokens in pieces ([`Observer::sample_tokens`]);
    /// when every observer that wants them does, a model that makes its tokens (the group
    /// model) hands them over that way and [`Sample::tokens`] is `None`.
    fn takes_token_pieces(&self) -> bool {
        false
    }
    /// Tokens `first, first + 1, ...` of sample `index` (whole rows, n x d row-major), in order
    /// from token 0, before [`Observer::sample`] is called for that sample.
    fn sample_tokens(&mut self, _index: usize, _first: usize, _rows: &[f64]) -> io::Result<()> {
        Ok(())
    }
    /// Sample `index`'s tokens from a model that makes them on demand ([`TokenSource`]), before
    /// any piece of them: true when this observer read what it needs there, and then no pieces
    /// of this sample come to it (false, the default: the pieces come as usual).
    fn sample_source(&mut self, _index: usize, _source: &dyn TokenSource) -> io::Result<bool> {
        Ok(false)
    }
    /// Called once before the first sample.
    fn start(&mut self, _info: &RunInfo) -> io::Result<()> {
        Ok(())
    }
    /// Called at every output sample, t = 0 included.
    fn sample(&mut self, _sample: &Sample<'_>) -> io::Result<()> {
        Ok(())
    }
    /// A change of the tight clusters found between samples, at its own time, by a run that
    /// looks for them (the staircase of `--model clusters`: the hand-over and every merge of
    /// the cluster model); called before the first sample after it.
    fn clusters_event(&mut self, _event: &cluster_series::ClusterEvent) -> io::Result<()> {
        Ok(())
    }
    /// Asked at the checkpoints of a run that may go on past t_end (see
    /// the integrator's `solve_until`): true when this observer has seen enough to stop.
    fn enough(&mut self) -> bool {
        false
    }
    /// Called once after the last sample (also after a failed run).
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}
