//! The commands: the top layer of the crate (docs/DESIGN.md, "Layers"). One file a command
//! (`tokdyn run`, `compare`, `predict`, `portrait`, `sweep`, `merge`, `inspect`; an ensemble
//! is `run` of a scenario with `[ensemble]`). A command reads its options, checks the
//! resources (memory, disk), stages its output folder, calls the stages below, writes the
//! files and pictures and prints its lines; no stage imports a command. Each file's `cli` is
//! what `main` calls; the other public functions are the same command for the library and
//! the Python module (no printing).

pub mod compare;
pub mod ensemble;
pub mod inspect;
pub mod merge;
pub mod portrait;
pub mod predict;
pub mod run;
pub mod sweep;
