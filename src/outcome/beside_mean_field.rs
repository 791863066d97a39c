//! The mean field beside the particles (docs/MATH.md §17.5): `compare` runs the density of a
//! token scenario (its `[density]`, else the start that matches `tokens.init`) and measures
//!
//! ```text
//! D = max_t | <|R1|>_runs(t) - |R1|_rho(t) |          (the particles' mean over the runs)
//! z = max_t | <|R1|>_runs(t) - |R1|_rho(t) | / (sd_runs(t) / sqrt(runs))   (runs >= 2)
//! ```
//!
//! and the same for the nematic order s (= |R2| in d = 2; lsa moves x and -x alike, so only
//! s compares there), over the samples both have. n tokens are a sample of the density: for iid tokens the gap
//! is of order 1/sqrt(n) (the finite-size bias of |R1|), and an ensemble's error bar shrinks
//! with the runs, so z measures the finite-size effect in units of the sampling error.

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::observe::OrderSeries;
use crate::scenario::{Scenario, ScenarioError};

/// The mean-field scenario of a token scenario: the same table with `run.model =
/// "mean-field"`, without the tables the density has no use for (`[ensemble]`, `[lyapunov]`).
/// An error says why the mean field does not apply (a mask, positions, a file start without
/// `[density]`, ...).
pub fn mean_field_twin(scenario: &Scenario) -> Result<Scenario, ScenarioError> {
    let mut table = scenario.resolved.clone();
    table.remove("ensemble");
    table.remove("lyapunov");
    let run = table
        .entry("run")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(run) = run {
        run.insert("model".into(), toml::Value::String("mean-field".into()));
    }
    Scenario::from_table(table, &scenario.file, Path::new(""))
}

/// The particles' order at each sample, [|R1|, s]: one run (no error bar) or an ensemble's
/// mean with its standard error.
#[derive(Debug, Clone, PartialEq)]
pub struct ParticleOrder {
    /// Sample times.
    pub t: Vec<f64>,
    /// [|R1|, s] (the means over the runs).
    pub mean: Vec<[f64; 2]>,
    /// Their standard errors (runs >= 2).
    pub error: Option<Vec<[f64; 2]>>,
    /// The runs averaged.
    pub runs: usize,
}

impl ParticleOrder {
    /// The order of one run's series (samples without R1 read as 0: no model here lacks it).
    pub fn of_run(series: &OrderSeries) -> Self {
        ParticleOrder {
            t: series.t.clone(),
            mean: series
                .r1
                .iter()
                .zip(&series.nematic)
                .map(|(r1, s)| [r1.unwrap_or(0.0), *s])
                .collect(),
            error: None,
            runs: 1,
        }
    }

    /// An ensemble's means of |R1| and s, with the standard errors sd / sqrt(runs).
    pub fn of_ensemble(t: &[f64], r1: (&[f64], &[f64]), s: (&[f64], &[f64]), runs: usize) -> Self {
        let root = (runs as f64).sqrt();
        ParticleOrder {
            t: t.to_vec(),
            mean: r1.0.iter().zip(s.0).map(|(a, b)| [*a, *b]).collect(),
            error: (runs >= 2).then(|| {
                r1.1.iter()
                    .zip(s.1)
                    .map(|(a, b)| [a / root, b / root])
                    .collect()
            }),
            runs,
        }
    }
}

/// One line of `compare_mean_field.csv`: [|R1|, s] of each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BesideRow {
    /// The sample time.
    pub t: f64,
    /// The particles' [|R1|, s].
    pub particles: [f64; 2],
    /// Their standard errors (ensembles).
    pub error: Option<[f64; 2]>,
    /// The density's [|R1|, s].
    pub mean_field: [f64; 2],
}

/// The `compare.mean_field` object of summary.json.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeanFieldComparison {
    /// The density's grid at the end (points).
    pub grid: usize,
    /// max over the samples of | s particles - s mean field | (s = |R2| in d = 2).
    pub max_nematic_distance: f64,
    /// That distance over the ensemble's standard error, at its largest (null for one run).
    pub max_nematic_z: Option<f64>,
    /// max over the samples of | |R1| particles - |R1| mean field |.
    pub max_r1_distance: f64,
    /// That distance over the ensemble's standard error, at its largest (null for one run).
    pub max_r1_z: Option<f64>,
    /// The particles' runs.
    pub runs: usize,
    /// The samples compared (the density may have stopped early).
    pub samples: usize,
    /// Wall time of the mean field.
    pub seconds: f64,
    /// Why the mean field stopped early, if it did.
    pub stop: Option<String>,
    /// Tokens per run.
    pub tokens: usize,
}

/// The rows of the comparison, over the samples both series have.
pub fn beside_rows(particles: &ParticleOrder, mean_field: &OrderSeries) -> Vec<BesideRow> {
    let len = particles.t.len().min(mean_field.len());
    (0..len)
        .map(|i| BesideRow {
            t: particles.t[i],
            particles: particles.mean[i],
            error: particles.error.as_ref().map(|e| e[i]),
            mean_field: [mean_field.r1[i].unwrap_or(0.0), mean_field.nematic[i]],
        })
        .collect()
}

/// Error bars at or below this are the rounding of runs that agree (|R1| and s are in [0, 1]):
/// one token, or runs that all reach the same state, have no sampling error to measure by.
pub const ROUNDING_ERROR: f64 = 1e-12;

/// For quantity `q` (0: |R1|, 1: s): the largest distance and the largest distance in units
/// of the error bar (samples whose bar is only rounding, [`ROUNDING_ERROR`], do not count).
pub fn distances(rows: &[BesideRow], q: usize) -> (f64, Option<f64>) {
    let distance = |r: &BesideRow| (r.particles[q] - r.mean_field[q]).abs();
    let max = rows.iter().map(distance).fold(0.0, f64::max);
    let z = rows
        .iter()
        .filter_map(|r| {
            r.error
                .map(|e| e[q])
                .filter(|e| *e > ROUNDING_ERROR)
                .map(|e| distance(r) / e)
        })
        .reduce(f64::max);
    (max, z)
}

/// Writes `compare_mean_field.csv` (`t,particles_r1_abs,particles_r1_error,mean_field_r1_abs,
/// particles_nematic,particles_nematic_error,mean_field_nematic`; errors empty for one run).
pub fn write_beside_csv(path: &Path, rows: &[BesideRow]) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(w, "t,particles_r1_abs,particles_r1_error,mean_field_r1_abs,particles_nematic,particles_nematic_error,mean_field_nematic")?;
    let number = |x: f64| ryu::Buffer::new().format(x).to_owned();
    for r in rows {
        let error = |q: usize| r.error.map(|e| number(e[q])).unwrap_or_default();
        let (p, m) = (r.particles, r.mean_field);
        writeln!(
            w,
            "{},{},{},{},{},{},{}",
            number(r.t),
            number(p[0]),
            error(0),
            number(m[0]),
            number(p[1]),
            error(1),
            number(m[1])
        )?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(errors: Option<&[f64]>) -> Vec<BesideRow> {
        let p = [0.5, 0.4, 0.3];
        let m = [0.5, 0.45, 0.2];
        (0..3)
            .map(|i| BesideRow {
                t: i as f64,
                particles: [p[i], 1.0],
                error: errors.map(|e| [e[i], 0.0]),
                mean_field: [m[i], 1.0],
            })
            .collect()
    }

    #[test]
    fn distance_is_the_largest_gap_and_z_its_largest_ratio() {
        let (d, z) = distances(&rows(None), 0);
        assert!((d - 0.1).abs() < 1e-15);
        assert_eq!(z, None);
        let (d, z) = distances(&rows(Some(&[0.01, 0.01, 0.05])), 0);
        assert!((d - 0.1).abs() < 1e-15);
        // 0.05 / 0.01 = 5 beats 0.1 / 0.05 = 2.
        assert!((z.unwrap() - 5.0).abs() < 1e-12);
        // No gap and no error bar in s.
        assert_eq!(distances(&rows(Some(&[0.01, 0.01, 0.05])), 1), (0.0, None));
        // Bars of rounding (runs of one token all at |R1| = 1): no z, not 1e17 of them.
        let (d, z) = distances(&rows(Some(&[1e-17, 2e-16, 0.0])), 0);
        assert!((d - 0.1).abs() < 1e-15);
        assert_eq!(z, None);
    }
}
