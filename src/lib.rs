//! # tokdyn: dynamics of transformer tokens on the sphere
//!
//! A deep encoder-only transformer at inference time moves its tokens like interacting
//! particles on the unit sphere S^{d-1}:
//!
//! ```text
//! x_k' = P_k ( (1/n) sum_j h(beta <x_k, A x_j>) V x_j ),   P_k y = y - <x_k, y> x_k.
//! ```
//!
//! The crate is organised in layers, each importing only the ones below it (docs/DESIGN.md,
//! "Layers"; checked by `tests/architecture.rs`), from the bottom:
//!
//! - [`label`], [`figure`]: the behaviour labels and picture formats every layer names;
//!   [`input`], [`memory`], [`interrupt`]: reading files, memory and signal guards;
//! - [`observe`]: order parameters, tight clusters and observers (series, progress);
//!   [`checkpoint`]: attention heads from `.safetensors` checkpoints and their spectra;
//! - [`scenario`]: the scenario file (TOML) as checked types; [`integrate`]:
//!   `solve(problem, method, observers) -> Solution` (DOP853, the noisy step);
//! - [`model`]: attention kernels, masks, factored heads and the sphere field
//!   ([`model::SphereField`]); [`reduced`]: phase model, Watanabe–Strogatz, Ott–Antonsen, the
//!   group model and the cluster model;
//! - [`classify`]: labels of the long-term behaviour (metastability, stationary states);
//! - [`error`]: what a user can meet; [`layers`]: stacks of layers;
//! - [`simulation`]: a scenario and a model choice become a problem; [`output`]: atomic
//!   output folders, file writers, run options;
//! - [`outcome`]: one run's label and `summary.json`; [`predict`]: OA fixed points, limit
//!   cycles, the predicted label and clusters;
//! - [`bifurcation`]: normal forms (l1, fold coefficient) and periodic orbits; [`ensemble`]:
//!   many seeds; [`plot`]: the pictures;
//! - [`sweep`]: grids, shards, refinement, continuation, codim 2, cycles;
//! - [`command`]: the commands (`run`, `compare`, `predict`, `portrait`, `sweep`, `merge`,
//!   `inspect`), as library functions.
//!
//! ```no_run
//! use std::path::Path;
//! use tokdyn::{command::run::run, output::RunOptions, scenario::Scenario};
//! let scenario = Scenario::load(Path::new("scenarios/case1-clustering.toml"), &[]).unwrap();
//! let report = run(&scenario, &RunOptions::default()).unwrap();
//! println!("{}", report.summary.label);
//! ```

#![warn(missing_docs)]

pub mod bifurcation;
pub mod cells;
pub mod checkpoint;
pub mod classify;
pub mod command;
pub mod ensemble;
pub mod error;
pub mod figure;
pub mod input;
pub mod integrate;
pub mod interrupt;
pub mod label;
pub mod layers;
pub mod mean_field;
pub mod memory;
pub mod model;
pub mod observe;
pub mod outcome;
pub mod output;
pub(crate) mod parallel;
pub mod plot;
pub mod predict;
pub mod reduced;
pub mod scenario;
pub(crate) mod simd;
pub mod simulation;
pub mod sweep;

pub use error::Error;
pub use parallel::on_the_pool;
