//! The order-parameter time series of a run, kept in memory (O(samples), not O(n)).
//!
//! Besides the samples themselves it records the unwrapped angle of the cluster axis, so that
//! rotation rates mean the same in every dimension: in d = 2 the axis angle is arg R2 (the
//! doubled token angle); in d > 2 it accumulates twice the angle between consecutive leading
//! eigenvectors of S (an eigenvector is a line, so the sign is irrelevant), which equals
//! |d arg R2/dt| integrated when d = 2.

use std::io;

use num_complex::Complex64;

use super::{principal_arg, Observer, Sample};

/// Time series of the order parameters.
#[derive(Debug, Clone, Default)]
pub struct OrderSeries {
    /// Sample times.
    pub t: Vec<f64>,
    /// R2 at each sample.
    pub r2: Vec<Complex64>,
    /// R1 at each sample (when the model has it).
    pub r1: Vec<Option<f64>>,
    /// Nematic order s at each sample.
    pub nematic: Vec<f64>,
    /// Unwrapped axis angle (doubled, like arg R2); in d > 2 it is non-decreasing.
    pub axis_angle: Vec<f64>,
    /// In d > 2 the axes themselves (f32), one row of `axis_dim` per sample, while they take at
    /// most [`MAX_AXIS_NUMBERS`] numbers (then none: `axes` is cleared and stays empty).
    pub axes: Vec<f32>,
    /// The length of an axis (0 in d = 2).
    pub axis_dim: usize,
    axes_dropped: bool,
    last_axis: Option<Vec<f64>>,
}

/// The most numbers the d > 2 axes of a series keep (32 MB).
pub const MAX_AXIS_NUMBERS: usize = 1 << 23;

/// The doubled angle between two axes (lines: the sign is irrelevant), in [0, pi].
pub fn axis_distance(a: &[f32], b: &[f32]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    let c = ab.abs() / (aa * bb).sqrt();
    if c.is_finite() {
        2.0 * c.min(1.0).acos()
    } else {
        0.0
    }
}

impl OrderSeries {
    /// An empty series.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of samples recorded.
    pub fn len(&self) -> usize {
        self.t.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    /// |R2| at each sample.
    pub fn r2_abs(&self) -> Vec<f64> {
        self.r2.iter().map(|z| z.norm()).collect()
    }

    /// Appends one sample.
    pub fn push(&mut self, t: f64, order: &super::OrderParameters) {
        let angle = match (&order.axis, self.axis_angle.last()) {
            (None, None) => principal_arg(order.r2),
            (None, Some(&prev)) => {
                let step = principal_arg(order.r2 * Complex64::from_polar(1.0, -prev));
                prev + step
            }
            (Some(axis), prev) => {
                let prev = prev.copied().unwrap_or(0.0);
                let step = match &self.last_axis {
                    Some(last) => {
                        let c: f64 = last.iter().zip(axis).map(|(a, b)| a * b).sum();
                        2.0 * c.abs().min(1.0).acos()
                    }
                    None => 0.0,
                };
                self.keep_axis(axis);
                match &mut self.last_axis {
                    Some(last) => last.clone_from(axis),
                    None => self.last_axis = Some(axis.clone()),
                }
                prev + step
            }
        };
        self.t.push(t);
        self.r2.push(order.r2);
        self.r1.push(order.r1);
        self.nematic.push(order.nematic);
        self.axis_angle.push(angle);
    }
}

impl OrderSeries {
    /// Keeps a d > 2 axis while the axes fit [`MAX_AXIS_NUMBERS`].
    fn keep_axis(&mut self, axis: &[f64]) {
        if self.axes_dropped {
            return;
        }
        if self.axes.len() + axis.len() > MAX_AXIS_NUMBERS {
            self.axes = Vec::new();
            self.axes_dropped = true;
            return;
        }
        self.axis_dim = axis.len();
        self.axes.extend(axis.iter().map(|&x| x as f32));
    }

    /// The kept d > 2 axis of sample i.
    pub fn axis(&self, i: usize) -> &[f32] {
        &self.axes[i * self.axis_dim..(i + 1) * self.axis_dim]
    }
}

impl Observer for OrderSeries {
    fn sample(&mut self, sample: &Sample<'_>) -> io::Result<()> {
        self.push(sample.t, sample.order);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::OrderParameters;

    #[test]
    fn unwraps_a_steady_rotation_in_two_dimensions() {
        let mut s = OrderSeries::new();
        for i in 0..100 {
            let t = i as f64 * 0.1;
            s.push(
                t,
                &OrderParameters::from_r2(Complex64::from_polar(0.9, 1.5 * t)),
            );
        }
        let rate = (s.axis_angle[99] - s.axis_angle[0]) / (s.t[99] - s.t[0]);
        assert!((rate - 1.5).abs() < 1e-12);
    }

    #[test]
    fn accumulates_the_doubled_angle_between_axes_in_higher_dimension() {
        let mut s = OrderSeries::new();
        for i in 0..50 {
            let phi = 0.02 * i as f64;
            let order = OrderParameters {
                r2: Complex64::new(0.0, 0.0),
                r1: None,
                nematic: 1.0,
                axis: Some(vec![phi.cos(), phi.sin(), 0.0]),
            };
            s.push(i as f64, &order);
        }
        assert!((s.axis_angle[49] - 2.0 * 0.02 * 49.0).abs() < 1e-9);
    }
}
