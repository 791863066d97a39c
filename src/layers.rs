//! Outputs of a stack of layers: `layers.csv` and the stroboscopic series of a looped stack.
//!
//! `layers.csv` holds the order parameters at t = 0 and at every layer boundary s_i + p T
//! (layer i, pass p, T = sum of the layers' durations). For a looped stack the rows at the
//! ends of the passes, t = p T (p = 0, 1, 2, ...), are the stroboscopic series x(pT): the map
//! x(pT) -> x((p+1)T) is one pass through the stack, and its long-term behaviour is what the
//! classifier reads for looped stacks (a fixed point of the pass map is a state the loop
//! returns to; within a pass the field changes with the layer and need not settle).

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;

use serde::Serialize;

use crate::classify::{classify, Classification};
use crate::integrate::Boundary;
use crate::observe::OrderSeries;
use crate::scenario::Scenario;

/// Passes needed before the stroboscopic series is read instead of the samples.
pub const MIN_PASSES: usize = 8;

#[derive(Serialize)]
struct LayerRow {
    t: f64,
    pass: usize,
    layer: usize,
    r2_re: f64,
    r2_im: f64,
    r2_abs: f64,
    r2_arg: f64,
    r1_abs: Option<f64>,
    nematic: f64,
}

/// Writes `layers.csv`: `t,pass,layer,r2_re,r2_im,r2_abs,r2_arg,r1_abs,nematic`, one row at
/// t = 0 and one per boundary (`pass` passes and `layer` layers completed at time t).
pub fn write_layers_csv(path: &Path, boundaries: &[Boundary]) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(BufWriter::new(File::create(path)?));
    for b in boundaries {
        w.serialize(LayerRow {
            t: b.t,
            pass: b.pass,
            layer: b.layer,
            r2_re: b.order.r2.re,
            r2_im: b.order.r2.im,
            r2_abs: b.order.r2.norm(),
            r2_arg: b.order.r2_arg(),
            r1_abs: b.order.r1,
            nematic: b.order.nematic,
        })
        .map_err(io::Error::other)?;
    }
    w.flush()
}

/// The stroboscopic series: the order parameters at t = 0 and at the end of every pass.
pub fn stroboscopic(boundaries: &[Boundary]) -> OrderSeries {
    let mut series = OrderSeries::new();
    for b in boundaries.iter().filter(|b| b.layer == 0) {
        series.push(b.t, &b.order);
    }
    series
}

/// What the summary says about a stack.
#[derive(Debug, Clone, Serialize)]
pub struct StackInfo {
    /// Layers in one pass.
    pub layers: usize,
    /// Whether the stack repeats.
    #[serde(rename = "loop")]
    pub looped: bool,
    /// Time of one pass.
    pub pass_time: f64,
    /// Passes completed by the end of the run.
    pub passes: usize,
    /// What the label was read on.
    pub classified_on: ClassifiedOn,
}

/// The series a stack's label was read on (written `samples` or `stroboscopic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassifiedOn {
    /// The output samples.
    Samples,
    /// The states at the ends of the passes of a looped stack.
    Stroboscopic,
}

/// The label of a run with a stack: for a looped stack with at least [`MIN_PASSES`] passes,
/// read on the stroboscopic series (and the reason says so); otherwise on the samples.
pub fn classify_stack(
    scenario: &Scenario,
    series: &OrderSeries,
    boundaries: &[Boundary],
) -> (Classification, StackInfo) {
    let pass_time: f64 = scenario.model.layers.iter().map(|l| l.duration).sum();
    let strobe = stroboscopic(boundaries);
    let passes = strobe.len().saturating_sub(1);
    let looped = scenario.model.looped;
    let mut info = StackInfo {
        layers: scenario.model.layers.len(),
        looped,
        pass_time,
        passes,
        classified_on: ClassifiedOn::Samples,
    };
    if !looped {
        return (classify(series), info);
    }
    if passes < MIN_PASSES {
        let mut c = classify(series);
        c.reason = format!(
            "looped stack, but only {passes} passes (fewer than {MIN_PASSES}): read on the samples; {}",
            c.reason
        );
        return (c, info);
    }
    let mut c = classify(&strobe);
    c.reason = format!(
        "looped stack: read on the stroboscopic series (the state at the end of each of the \
         {passes} passes, one pass = {pass_time}); {}",
        c.reason
    );
    info.classified_on = ClassifiedOn::Stroboscopic;
    (c, info)
}
