//! The spectra of a checkpoint's heads that decide the dynamics (docs/MATH.md §9).
//!
//! For each head, with A_h = W_Q^h (W_K^h)^T / sqrt(d_h) and V_h = (W_V^h W_O^h)^T (see
//! [`crate::checkpoint`]): the eigenvalues of the symmetric part (A_h + A_h^T) / 2 (its sign
//! decides clustering against an interior state when V = I), the eigenvalues of V_h (the
//! largest real part decides clustering when A = I), and the relative commutator
//! c = |A_h V_h - V_h A_h|_F / (|A_h|_F |V_h|_F); A_h and V_h "nearly commute" when
//! c < [`NEARLY_COMMUTE`] (non-commuting A and V are what allows rotating clusters).

use nalgebra::DMatrix;
use num_complex::Complex64;
use serde::Serialize;

use super::HeadWeights;

/// Threshold of the relative commutator below which A_h and V_h count as nearly commuting.
pub const NEARLY_COMMUTE: f64 = 1e-3;

/// Eigenvalues of the symmetric part within this factor of its largest |eigenvalue| count as
/// zero in `a_sym_positive`.
pub const ROUNDING: f64 = 1e-12;

/// One row of `heads.csv`.
#[derive(Debug, Clone, Serialize)]
pub struct HeadRow {
    /// Checkpoint layer.
    pub layer: usize,
    /// Head within the layer.
    pub head: usize,
    /// The key/value head it reads (grouped-query attention, llama); the head itself otherwise.
    pub kv: usize,
    /// Smallest eigenvalue of the symmetric part of A_h.
    pub a_sym_min: f64,
    /// Largest eigenvalue of the symmetric part of A_h.
    pub a_sym_max: f64,
    /// How many eigenvalues of the symmetric part of A_h are > 0, beyond rounding
    /// ([`ROUNDING`] times the largest |eigenvalue|: a head of width d_h < d has at least
    /// d - 2 d_h zero eigenvalues, which round to either sign).
    pub a_sym_positive: usize,
    /// Smallest real part of V_h's eigenvalues.
    pub v_re_min: f64,
    /// Largest real part of V_h's eigenvalues.
    pub v_re_max: f64,
    /// Largest |imaginary part| of V_h's eigenvalues.
    pub v_im_max: f64,
    /// Spectral radius of V_h.
    pub v_radius: f64,
    /// |A V - V A|_F / (|A|_F |V|_F).
    pub commutator: f64,
    /// Whether `commutator` is below [`NEARLY_COMMUTE`].
    pub nearly_commute: bool,
}

/// The whole spectra of one head: the eigenvalues of the symmetric part of A_h (ascending) and
/// those of V_h (complex, in the order of the real Schur form; empty when it does not converge).
#[derive(Debug, Clone)]
pub struct HeadSpectra {
    /// Eigenvalues of (A_h + A_h^T) / 2, ascending.
    pub a_sym: Vec<f64>,
    /// Eigenvalues of V_h.
    pub v_eig: Vec<Complex64>,
}

/// The spectra of one head.
pub fn spectra(w: &HeadWeights) -> HeadSpectra {
    let sym = (&w.a + w.a.transpose()) * 0.5;
    let mut a_sym: Vec<f64> = sym.symmetric_eigenvalues().iter().copied().collect();
    a_sym.sort_by(f64::total_cmp);
    let v_eig = nalgebra::Schur::try_new(w.v.clone(), f64::EPSILON, 100_000)
        .map(|s| s.complex_eigenvalues().iter().copied().collect())
        .unwrap_or_default();
    HeadSpectra { a_sym, v_eig }
}

/// The row of `heads.csv` of one head: its spectra summarised.
pub fn head_row(layer: usize, head: usize, w: &HeadWeights, spectra: &HeadSpectra) -> HeadRow {
    let HeadSpectra { a_sym, v_eig } = spectra;
    let min = |it: &mut dyn Iterator<Item = f64>| it.fold(f64::INFINITY, f64::min);
    let max = |it: &mut dyn Iterator<Item = f64>| it.fold(f64::NEG_INFINITY, f64::max);
    let commutator = relative_commutator(&w.a, &w.v);
    HeadRow {
        layer,
        head,
        kv: head,
        a_sym_min: min(&mut a_sym.iter().copied()),
        a_sym_max: max(&mut a_sym.iter().copied()),
        a_sym_positive: positive_beyond_rounding(a_sym),
        v_re_min: min(&mut v_eig.iter().map(|z| z.re)),
        v_re_max: max(&mut v_eig.iter().map(|z| z.re)),
        v_im_max: max(&mut v_eig.iter().map(|z| z.im.abs())),
        v_radius: max(&mut v_eig.iter().map(|z| z.norm())),
        commutator,
        nearly_commute: commutator < NEARLY_COMMUTE,
    }
}

/// How many of `eigenvalues` exceed [`ROUNDING`] times the largest of their magnitudes.
fn positive_beyond_rounding(eigenvalues: &[f64]) -> usize {
    let scale = eigenvalues.iter().fold(0.0_f64, |m, e| m.max(e.abs()));
    eigenvalues
        .iter()
        .filter(|&&e| e > ROUNDING * scale)
        .count()
}

/// |A V - V A|_F / (|A|_F |V|_F); 0 when A or V is zero.
pub fn relative_commutator(a: &DMatrix<f64>, v: &DMatrix<f64>) -> f64 {
    let scale = a.norm() * v.norm();
    if scale == 0.0 {
        return 0.0;
    }
    (a * v - v * a).norm() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head of width r: A = Q K^T with Q, K of r columns (entries from a fixed sequence).
    fn low_rank(d: usize, r: usize) -> HeadWeights {
        let entry = |i: usize| ((i * 7919 % 1000) as f64 / 500.0) - 1.0;
        let q = DMatrix::from_fn(d, r, |i, j| entry(i * r + j + 1));
        let k = DMatrix::from_fn(d, r, |i, j| entry(3 * (i * r + j) + 2));
        HeadWeights {
            a: &q * k.transpose(),
            v: DMatrix::identity(d, d),
        }
    }

    #[test]
    fn a_head_of_width_r_has_at_most_r_positive_directions() {
        // (Q K^T + K Q^T) / 2 has rank <= 2r and at most r positive eigenvalues; the other
        // d - 2r are zero and round to either sign.
        for (d, r) in [(16, 1), (16, 3), (24, 4), (12, 6)] {
            let w = low_rank(d, r);
            let row = head_row(0, 0, &w, &spectra(&w));
            assert!(
                (1..=r).contains(&row.a_sym_positive),
                "d {d}, r {r}: {}",
                row.a_sym_positive
            );
        }
        // Full rank and positive definite: every direction counts.
        let spd = HeadWeights {
            a: DMatrix::from_fn(8, 8, |i, j| if i == j { 2.0 } else { 0.1 }),
            v: DMatrix::identity(8, 8),
        };
        assert_eq!(head_row(0, 0, &spd, &spectra(&spd)).a_sym_positive, 8);
    }
}
