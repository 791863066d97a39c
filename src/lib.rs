//! # tokdyn: dynamics of transformer tokens on the sphere
//!
//! A deep encoder-only transformer at inference time moves its tokens like interacting
//! particles on the unit sphere S^{d-1}:
//!
//! ```text
//! x_k' = P_k ( (1/n) sum_j h(beta <x_k, A x_j>) V x_j ),   P_k y = y - <x_k, y> x_k.
//! ```
//!
//! The crate is organised the way the data flows:
//!
//! - [`scenario`]: the scenario file (TOML) as checked types;
//! - [`model`]: attention kernels and the sphere vector field ([`model::SphereField`]);
//! - [`reduced`]: the d = 2 LSA reductions (phase model, Watanabe–Strogatz, Ott–Antonsen);
//! - [`simulation`]: a scenario and a model choice become a problem;
//! - [`integrate`]: `solve(problem, method, observers) -> Solution` (its own steppers);
//! - [`observe`]: order parameters and observers (series, progress);
//! - [`classify`]: labels of the long-term behaviour;
//! - [`output`]: atomic output folders and file writers;
//! - [`layers`]: stacks of layers (`layers.csv`, the stroboscopic series of a loop);
//! - [`checkpoint`]: attention heads from `.safetensors` checkpoints; [`inspect`]: their spectra;
//! - [`predict`]: OA fixed points, stability, limit cycles and the predicted label;
//! - [`bifurcation`]: the OA field's derivatives and normal forms (l1, fold coefficient);
//! - [`plot`]: the pictures; [`sweep`]: grids, shards, refinement and continuation;
//! - [`run`], [`compare`], [`portrait`]: the commands, as library functions.
//!
//! ```no_run
//! use std::path::Path;
//! use tokdyn::{run::{run, RunOptions}, scenario::Scenario};
//! let scenario = Scenario::load(Path::new("scenarios/case1-clustering.toml"), &[]).unwrap();
//! let report = run(&scenario, &RunOptions::default()).unwrap();
//! println!("{}", report.summary.label);
//! ```

#![warn(missing_docs)]

pub mod bifurcation;
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
