//! What a run hands back to Python: the order-parameter series, the final tokens and, when
//! asked for, every sample's tokens (samples x n x d), recorded by an observer.

use std::io;

use num_complex::Complex64;
use tokdyn::error::Error;
use tokdyn::observe::{Observer, Sample};
use tokdyn::scenario::Scenario;

/// Records every sample of a run.
pub struct Recorder {
    rec: Recording,
    keep_trajectory: bool,
}

/// A finished recording.
pub struct Recording {
    pub t: Vec<f64>,
    pub r2: Vec<Complex64>,
    /// R1, NaN for models without it (`oa`).
    pub r1: Vec<f64>,
    pub nematic: Vec<f64>,
    /// The tokens of the last sample (n x d row-major), when the model carries them.
    pub tokens: Option<Vec<f64>>,
    /// All samples' tokens (samples x n x d), with `trajectory=True`.
    pub trajectory: Option<Vec<f64>>,
    pub n: usize,
    pub d: usize,
}

impl Recorder {
    /// A recorder for `scenario`; with `trajectory`, reserves samples x n x d numbers first and
    /// refuses (bad input) when they cannot be had.
    pub fn new(scenario: &Scenario, trajectory: bool) -> Result<Self, Error> {
        let (n, d, samples) = (scenario.tokens.n, scenario.model.d, scenario.time.samples);
        let mut store = Vec::new();
        if trajectory {
            let need = samples.checked_mul(n).and_then(|v| v.checked_mul(d));
            if need.is_none_or(|k| store.try_reserve_exact(k).is_err()) {
                return Err(Error::Input(format!(
                    "{}: trajectory: {samples} samples x {n} tokens x {d} numbers do not fit in memory; lower time.samples or pass trajectory=False",
                    scenario.file.display()
                )));
            }
        }
        Ok(Recorder {
            rec: Recording {
                t: Vec::with_capacity(samples),
                r2: Vec::with_capacity(samples),
                r1: Vec::with_capacity(samples),
                nematic: Vec::with_capacity(samples),
                tokens: None,
                trajectory: trajectory.then_some(store),
                n,
                d,
            },
            keep_trajectory: trajectory,
        })
    }

    /// The recording.
    pub fn finish(self) -> Recording {
        self.rec
    }
}

impl Observer for Recorder {
    fn wants_tokens(&self) -> bool {
        true
    }

    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        let rec = &mut self.rec;
        rec.t.push(s.t);
        rec.r2.push(s.order.r2);
        rec.r1.push(s.order.r1.unwrap_or(f64::NAN));
        rec.nematic.push(s.order.nematic);
        if let Some(tokens) = s.tokens {
            match &mut rec.tokens {
                Some(last) => last.copy_from_slice(tokens),
                None => rec.tokens = Some(tokens.to_vec()),
            }
            if self.keep_trajectory {
                if let Some(tr) = &mut rec.trajectory {
                    tr.extend_from_slice(tokens);
                }
            }
        }
        Ok(())
    }
}
