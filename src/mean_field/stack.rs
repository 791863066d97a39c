//! The mean field of a stack of layers (docs/MATH.md §17.7): the heads are piecewise constant
//! in time,
//!
//! ```text
//! d_t rho = - div( rho v_i[rho] ) + T Lap rho     on layer i's interval [s_i, s_i + tau_i),
//! ```
//!
//! s_0 = 0, s_{i+1} = s_i + tau_i; a looped stack repeats with period sum_i tau_i. The stepper
//! never steps across a boundary: its last step in a layer is shortened to land on it, the
//! density (and its grid) carries over, and the next step uses the next layer's field (ETDRK4
//! is a one-step method: nothing else is kept). The order parameters at t = 0 and at every
//! boundary are recorded as the full model records them (`layers.csv`, the stroboscopic
//! series of a loop).

use crate::integrate::Boundary;
use crate::observe::OrderParameters;

use super::{MeanFieldHead, MeanFieldProblem};

/// One layer of the mean field: its heads (fields add) and how long it acts (> 0).
#[derive(Debug, Clone, PartialEq)]
pub struct MeanFieldLayer {
    /// The layer's heads.
    pub heads: Vec<MeanFieldHead>,
    /// How long the layer acts.
    pub duration: f64,
}

/// A stack of layers; `looped`: the stack repeats for ever (else the run ends with it).
#[derive(Debug, Clone, PartialEq)]
pub struct MeanFieldStack {
    /// The layers in order (at least one).
    pub layers: Vec<MeanFieldLayer>,
    /// Whether the stack repeats.
    pub looped: bool,
}

/// Which heads act now, when they change, and the order parameters at the changes so far.
pub(super) struct Schedule<'a> {
    stack: Option<&'a MeanFieldStack>,
    /// The current segment k = p L + i (pass p, layer i).
    k: usize,
    /// The end of the current segment (infinite: no boundary ahead).
    end: f64,
    /// t = 0 and every boundary crossed (empty without a stack).
    pub boundaries: Vec<Boundary>,
}

impl<'a> Schedule<'a> {
    /// The schedule of `stack`, or of the problem's own heads for ever.
    pub fn new(stack: Option<&'a MeanFieldStack>) -> Self {
        let stack = stack.filter(|s| !s.layers.is_empty());
        Schedule {
            stack,
            k: 0,
            end: stack.map_or(f64::INFINITY, |s| s.layers[0].duration),
            boundaries: Vec::new(),
        }
    }

    /// The heads acting now.
    pub fn heads<'b>(&'b self, p: &'b MeanFieldProblem) -> &'b [MeanFieldHead] {
        match self.stack {
            Some(s) => &s.layers[self.k % s.layers.len()].heads,
            None => &p.heads,
        }
    }

    /// Every head that may act over the run.
    pub fn all_heads<'b>(
        &'b self,
        p: &'b MeanFieldProblem,
    ) -> Box<dyn Iterator<Item = &'b MeanFieldHead> + 'b> {
        match self.stack {
            Some(s) => Box::new(s.layers.iter().flat_map(|l| l.heads.iter())),
            None => Box::new(p.heads.iter()),
        }
    }

    /// The time of the next boundary (infinite when none is ahead).
    pub fn next(&self) -> f64 {
        self.end
    }

    /// Whether `t` is on the next boundary (to round-off).
    pub fn reached(&self, t: f64) -> bool {
        self.end - t <= 4.0 * f64::EPSILON * t.abs().max(1.0)
    }

    /// Records the order parameters at t = 0 (with a stack).
    pub fn begin(&mut self, order: OrderParameters) {
        if self.stack.is_some() {
            self.boundaries.push(Boundary {
                t: 0.0,
                pass: 0,
                layer: 0,
                order,
            });
        }
    }

    /// Crosses the boundary at the end of the current segment with `order` there: the next
    /// layer acts from now on (none past the end of a stack that does not loop).
    pub fn cross(&mut self, order: OrderParameters) {
        let Some(s) = self.stack else {
            return;
        };
        let l = s.layers.len();
        self.boundaries.push(Boundary {
            t: self.end,
            pass: (self.k + 1) / l,
            layer: (self.k + 1) % l,
            order,
        });
        self.k += 1;
        self.end = if self.k >= l && !s.looped {
            f64::INFINITY
        } else {
            self.end + s.layers[self.k % l].duration
        };
    }
}

/// At a boundary (t on it to round-off): moves t onto it, records the order parameters of
/// coefficients `c` there and gives `system` (grid of n) the next layer's heads.
pub(super) fn cross_if_reached(
    p: &MeanFieldProblem,
    schedule: &mut Schedule,
    system: &mut super::System,
    (n, c): (usize, &[num_complex::Complex64]),
    t: &mut f64,
) {
    while schedule.reached(*t) {
        *t = t.max(schedule.next());
        schedule.cross(p.order(c));
        *system = p.system_with(n, schedule.heads(p));
    }
}
