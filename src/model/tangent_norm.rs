//! The derivative of the normalisations around the attention output, for the tangent flow
//! (docs/MATH.md §15.1).
//!
//! With a_k the attention output of the directions (summed over heads), da_k its derivative
//! along a tangent vector, z_k = x_k / |x_k|, dz_k its derivative, g_k = a_k / |a_k| and
//! P_g y = y - <g, y> g:
//!
//! ```text
//! post:  F_k = P_{z_k} a_k,                 dF_k = da_k - (<dz_k, a_k> + <z_k, da_k>) z_k - <z_k, a_k> dz_k
//! pre:   F_k = a_k,                         dF_k = da_k
//! peri:  F_k = g_k,                         dF_k = P_{g_k} da_k / |a_k|
//! nGPT:  b_k = alpha g_k, db_k = alpha P_{g_k} da_k / |a_k|,
//!        F_k = P_{z_k} b_k,                 dF_k = db_k - (<dz_k, b_k> + <z_k, db_k>) z_k - <z_k, b_k> dz_k
//! ```
//!
//! A zero a_k gives F_k = 0 and dF_k = 0, as the forward field does (the map has no derivative
//! there).

use super::Normalization;

/// Applies the normalisation `norm` (nGPT's rate `alpha`) to the outputs `a` (n x d) and to
/// their derivatives `da` (one n x d block per vector), given the directions `z` and their
/// derivatives `dz` (see the module's formula).
pub(super) fn normalise(
    (norm, alpha): (Normalization, f64),
    (z, dz): (&[f64], &[Vec<f64>]),
    a: &mut [f64],
    da: &mut [f64],
    d: usize,
) {
    match norm {
        Normalization::Pre => {}
        Normalization::Post => project(z, dz, a, da, d),
        Normalization::Peri => unit_updates(a, da, d, 1.0),
        Normalization::Ngpt => {
            unit_updates(a, da, d, alpha);
            project(z, dz, a, da, d);
        }
    }
}

/// Post-LN's projection P_{z_k} and its derivative.
fn project(z: &[f64], dz: &[Vec<f64>], a: &mut [f64], da: &mut [f64], d: usize) {
    for (dvi, dzi) in da.chunks_exact_mut(a.len()).zip(dz) {
        for (((df, ak), zk), dzk) in dvi
            .chunks_exact_mut(d)
            .zip(a.chunks_exact(d))
            .zip(z.chunks_exact(d))
            .zip(dzi.chunks_exact(d))
        {
            let radial_change = dot(dzk, ak) + dot(zk, df);
            let radial = dot(zk, ak);
            for c in 0..d {
                df[c] -= radial_change * zk[c] + radial * dzk[c];
            }
        }
    }
    for (ak, zk) in a.chunks_exact_mut(d).zip(z.chunks_exact(d)) {
        let radial = dot(zk, ak);
        ak.iter_mut().zip(zk).for_each(|(x, b)| *x -= radial * b);
    }
}

/// a_k <- scale a_k / |a_k| and da_k <- scale P_{g_k} da_k / |a_k| (zero where a_k = 0).
fn unit_updates(a: &mut [f64], da: &mut [f64], d: usize, scale: f64) {
    let len = a.len();
    let mut g = vec![0.0; d];
    for (k, ak) in a.chunks_exact_mut(d).enumerate() {
        let norm = dot(ak, ak).sqrt();
        let rows = da
            .chunks_exact_mut(len)
            .map(|dvi| &mut dvi[k * d..(k + 1) * d]);
        if norm == 0.0 {
            rows.for_each(|dak| dak.fill(0.0));
            continue;
        }
        g.iter_mut()
            .zip(ak.iter())
            .for_each(|(gc, x)| *gc = x / norm);
        let c = scale / norm;
        for dak in rows {
            let along = dot(&g, dak);
            dak.iter_mut()
                .zip(&g)
                .for_each(|(x, gc)| *x = c * (*x - along * gc));
        }
        // As the forward field: f_k <- (scale / |f_k|) f_k.
        ak.iter_mut().for_each(|v| *v *= c);
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
