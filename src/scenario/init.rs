//! The initial tokens of a scenario (docs/MATH.md §7), exactly:
//!
//! - `splay`: t_k = pi k / n, token (cos t_k, sin t_k, 0, ..., 0);
//! - `circle`: t_k = 2 pi k / n (evenly spaced on the whole circle), token as for splay;
//! - `poisson`: s_k = e^{2 pi i k / n}, c = r0 e^{i phi0}, w_k = (s_k + c) / (1 + conj(c) s_k),
//!   t_k = arg(w_k) / 2, token as for splay; then R2(0) = c up to O(r0^n);
//! - `eps > 0` perturbs splay and poisson starts with N(0, eps^2) draws from
//!   `ChaCha8Rng::seed_from_u64(seed)` (`StandardNormal * eps`): in d = 2 added to each t_k in k
//!   order; in d > 2 added to every coordinate (row-major), each row then renormalised. It has
//!   no effect on `uniform` and `file` starts;
//! - `uniform`: for each token in order, d `StandardNormal` draws from
//!   `ChaCha8Rng::seed_from_u64(seed)`, normalised (a zero draw is redrawn);
//! - `file`: an n x d `.npy` (float64 or float32) or `.csv`, rows normalised;
//! - `embedding`: rows `tokens.ids` of a checkpoint's embedding matrix (centred when asked, plus
//!   the position embeddings where the checkpoint has them; kept unnormalised for pre- and
//!   peri-LN, whose stream starts at the rows), else normalised.
//!
//! The result is n x d row-major: token k is `[k*d .. (k+1)*d]`.

use std::f64::consts::PI;

use num_complex::Complex64;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::error::ScenarioError;
use super::kinds::InitKind;
use super::numfile::read_table;
use super::Scenario;

/// The initial tokens of a checked scenario.
pub fn initial_tokens(s: &Scenario) -> Result<Vec<f64>, ScenarioError> {
    let (n, d) = (s.tokens.n, s.model.d);
    let mut x = reserve_tokens(s)?;
    let tok = &s.tokens;
    match tok.init {
        InitKind::Splay => {
            let angles = (0..n).map(|k| PI * k as f64 / n as f64).collect();
            planar(&mut x, angles, d, tok.eps, tok.seed);
        }
        InitKind::Circle => {
            let angles = (0..n).map(|k| 2.0 * PI * k as f64 / n as f64).collect();
            planar(&mut x, angles, d, tok.eps, tok.seed);
        }
        InitKind::Poisson => {
            let angles = poisson_angles(n, Complex64::from_polar(tok.r0, tok.phi0));
            planar(&mut x, angles, d, tok.eps, tok.seed);
        }
        InitKind::Uniform => uniform(&mut x, n, d, tok.seed),
        InitKind::Embedding => {
            let Some(rows) = &tok.embedding else {
                return Err(ScenarioError::at(
                    &s.file,
                    "tokens.ids",
                    "missing: init = \"embedding\" needs ids",
                ));
            };
            let start = x.len();
            normalised_rows(&mut x, rows, d, |k| {
                ScenarioError::at(
                    &s.file,
                    "tokens.ids",
                    format!("token {k} has a zero embedding row (after centring)"),
                )
            })?;
            // Pre- and peri-LN move the stream: it starts where the model's does, at the rows.
            if !s.model.normalization.on_sphere() {
                x[start..].copy_from_slice(rows);
            }
        }
        InitKind::File => {
            let Some(path) = &tok.path else {
                return Err(ScenarioError::at(
                    &s.file,
                    "tokens.path",
                    "missing: init = \"file\" needs a path",
                ));
            };
            let data = read_table(path, n, d)
                .map_err(|message| ScenarioError::at(&s.file, "tokens.path", message))?;
            normalised_rows(&mut x, &data, d, |k| {
                ScenarioError::at(
                    &s.file,
                    "tokens.path",
                    format!(
                        "`{}`: token {} (row {}) has zero length",
                        path.display(),
                        k,
                        k + 1
                    ),
                )
            })?;
        }
    }
    Ok(x)
}

/// An empty buffer with room for the n x d tokens, or the error saying why there is none.
fn reserve_tokens(s: &Scenario) -> Result<Vec<f64>, ScenarioError> {
    let (n, d) = (s.tokens.n, s.model.d);
    if d < 2 {
        return Err(ScenarioError::at(
            &s.file,
            "model.d",
            format!("must be an integer >= 2, found {d}"),
        ));
    }
    let len = n
        .checked_mul(d)
        .ok_or_else(|| ScenarioError::at(&s.file, "tokens.n", "n * d overflows"))?;
    let mut x = Vec::new();
    if x.try_reserve_exact(len).is_err() {
        return Err(ScenarioError::at(
            &s.file,
            "tokens.n",
            format!("cannot allocate {n} tokens in d = {d} ({len} numbers)"),
        ));
    }
    Ok(x)
}

/// The angles t_k = arg(w_k) / 2 of the Poisson start, w_k = (s_k + c) / (1 + conj(c) s_k).
fn poisson_angles(n: usize, c: Complex64) -> Vec<f64> {
    (0..n)
        .map(|k| {
            let s_k = Complex64::from_polar(1.0, 2.0 * PI * k as f64 / n as f64);
            let w_k = (s_k + c) / (1.0 + c.conj() * s_k);
            w_k.arg() / 2.0
        })
        .collect()
}

/// Appends n uniform tokens: d standard normal draws each, normalised (a zero draw redrawn).
fn uniform(x: &mut Vec<f64>, n: usize, d: usize, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut row = vec![0.0; d];
    for _ in 0..n {
        loop {
            for v in row.iter_mut() {
                *v = StandardNormal.sample(&mut rng);
            }
            let norm = norm(&row);
            if norm > 0.0 && norm.is_finite() {
                x.extend(row.iter().map(|v| v / norm));
                break;
            }
        }
    }
}

/// Appends the rows of `data` (d wide), each normalised; a zero row k is `zero_row(k)`.
fn normalised_rows(
    x: &mut Vec<f64>,
    data: &[f64],
    d: usize,
    zero_row: impl Fn(usize) -> ScenarioError,
) -> Result<(), ScenarioError> {
    for (k, row) in data.chunks_exact(d).enumerate() {
        let norm = norm(row);
        if !(norm > 0.0 && norm.is_finite()) {
            return Err(zero_row(k));
        }
        x.extend(row.iter().map(|v| v / norm));
    }
    Ok(())
}

/// Euclidean norm; rescaled when the plain sum of squares over- or underflows.
fn norm(row: &[f64]) -> f64 {
    let plain = row.iter().map(|v| v * v).sum::<f64>().sqrt();
    if plain.is_finite() && plain > f64::MIN_POSITIVE {
        return plain;
    }
    let big = row.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if big == 0.0 || !big.is_finite() {
        return big;
    }
    big * row
        .iter()
        .map(|v| (v / big) * (v / big))
        .sum::<f64>()
        .sqrt()
}

/// Tokens at the given angles in the (1, 2) plane, with the `eps` perturbation.
fn planar(x: &mut Vec<f64>, mut angles: Vec<f64>, d: usize, eps: f64, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut noise = move || -> f64 {
        let z: f64 = StandardNormal.sample(&mut rng);
        z * eps
    };
    if eps > 0.0 && d == 2 {
        for t in angles.iter_mut() {
            *t += noise();
        }
    }
    for t in angles {
        let start = x.len();
        x.push(t.cos());
        x.push(t.sin());
        x.extend(std::iter::repeat_n(0.0, d.saturating_sub(2)));
        if eps > 0.0 && d > 2 {
            let row = &mut x[start..];
            for v in row.iter_mut() {
                *v += noise();
            }
            let norm = norm(row);
            if norm > 0.0 {
                for v in row.iter_mut() {
                    *v /= norm;
                }
            }
        }
    }
}
