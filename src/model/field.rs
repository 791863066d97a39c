//! The sphere vector field of the full model.
//!
//! ```text
//! x_k' = P_k f_k,   f_k = sum_heads (1/n) sum_j h(beta <x_k, A x_j>) V x_j,   P_k y = y - <x_k, y> x_k
//! ```
//!
//! The field is evaluated at the normalised tokens x_k / |x_k| (docs/MATH.md §1): off the sphere
//! the plain projection makes the sphere repelling wherever <x_k, f_k> < 0, and round-off
//! would grow exponentially. With the normalised point, the derivative is tangent to the sphere
//! through x_k, so |x_k| is constant under the exact flow of the numerical field too.
//!
//! Costs per evaluation:
//! - `lsa`: (1/n) sum_j <x_k, A x_j> V x_j = V S A^T x_k with the moment matrix
//!   S = (1/n) sum_j x_j x_j^T, so O(n d^2) work and O(d^2) extra memory.
//! - `usa`, `sa`: O(n^2 d) work, never an n x n matrix (for d >= 8 tile by tile with blocked
//!   matrix products, see [`super::tiles`]; otherwise token by token):
//!   q_k = beta A^T x_k and u_j = V x_j are formed once (O(n d) memory), then
//!   f_k = (1/n) sum_j exp(<q_k, x_j>) u_j, or for `sa` the weights exp(<q_k, x_j> - m_k)
//!   divided by their sum (m_k = max_j <q_k, x_j> keeps the exponentials finite).
//!
//! Sums over tokens use fixed chunks (`parallel.rs`), so the field is bit-identical for
//! any number of threads.
//!
//! Real transformers (docs/MATH.md §9): under the causal mask token k sums
//! over j <= k only (`sa` normalises over them, `lsa` / `usa` divide by k counted from 1; the
//! symmetric-A shortcut is not used, the tiled kernel skips the tiles above the diagonal and
//! `lsa` keeps a running sum, see `linear_sums`); factored heads add their field through
//! `factored`; pre-LN (`Normalization::Pre`) evaluates at the directions z_k = x_k / |x_k| and
//! returns x_k' = f_k unprojected, so the stream's norms move and the state is never projected.
//!
//! Positions and normalisations (docs/MATH.md §16): with RoPE or ALiBi every head runs as a
//! factored head (a formed head as Q = sqrt(d) A, K = I, see `FactoredHead::from_formed`), whose
//! queries and keys `position` rotates or whose scores it biases. Peri-LN returns
//! x_k' = f_k / |f_k| (unprojected), nGPT z_k' = alpha P_k f_k / |f_k| (on the sphere); a zero
//! f_k gives a zero velocity.

use std::borrow::Cow;
use std::sync::{Mutex, OnceLock};

use nalgebra::DMatrix;
use rayon::prelude::*;

use super::factored::FactoredField;
use super::gemm::{
    pack_panels, panel_product, panels_len, product, MatMut, MatRef, Panels, MICRO_COLUMNS,
};
use super::harmonics::{HarmonicsField, DEFAULT_TOLERANCE};
use super::kernel_method::{choose, KernelChoice, KernelMethod};
use super::linear_sums::linear_sums;
use super::pairwise::{pairwise_sum, pairwise_sum_prefix, Columns};
use super::spectral::SpectralField;
use super::symmetric::{scratch_len as symmetric_scratch_len, symmetric_sums};
use super::tangent::TangentField;
use super::tiles::general_tiles_masked;
use super::tiles::{
    general_scratch_len, general_tiles, symmetric_scratch_len as symmetric_tiles_scratch_len,
    symmetric_tiles, Pairs, Tiles, SYMMETRIC_TILE, TILES,
};
use super::{Attention, Kernel, Mask, Normalization};
use crate::integrate::{Dynamics, Linearization};
use crate::observe::{order_parameters, OrderParameters};
use crate::parallel::{chunk_count, chunked_sum, for_each_chunk, TOKENS_PER_CHUNK};
use crate::simd::vectorized;

/// From this dimension on, the linear field uses blocked matrix products.
const GEMM_MIN_D: usize = 8;

/// Most numbers the symmetric tiled kernel may hold (its per-group sums, 4 (d + 1) n): 128 MB.
const SYMMETRIC_TILES_MAX_NUMBERS: usize = 1 << 24;

/// Largest |q_k| for which `sa` uses the unshifted exponentials of the symmetric kernel.
const SYMMETRIC_SOFTMAX_MAX_SCORE: f64 = 300.0;

/// Tokens per block of the products Q = beta A^T X and U = V X (a multiple of the micro-kernel's
/// 6 columns; fixed, so the bytes do not depend on the threads).
const PRODUCT_TOKENS: usize = 40 * MICRO_COLUMNS;

/// Below this many pair terms (n^2 d) the pairwise kernels run on the calling thread.
const PAIRWISE_SEQUENTIAL_WORK: usize = 1 << 17;

/// Buffers reused from one evaluation to the next (the field is the hot path: no allocation).
struct Scratch {
    /// x_k / |x_k|, n x d row-major (not for `lsa` with d < GEMM_MIN_D).
    unit: Vec<f64>,
    /// Per-chunk partial moment sums (d x d each), `lsa` only.
    partials: Vec<f64>,
    /// The moment matrix S (d x d), `lsa` only.
    moment: DMatrix<f64>,
    /// A S (d x d), `lsa` only.
    a_s: DMatrix<f64>,
    /// beta A S V^T summed over heads: column a is row a of M = beta V S A^T, `lsa` only.
    m_transposed: DMatrix<f64>,
    /// One head's contribution to M^T, `lsa` only.
    head_term: DMatrix<f64>,
    /// M itself, `lsa` with d >= GEMM_MIN_D only.
    m: DMatrix<f64>,
    /// q_k = beta A^T x_k, n x d, `usa`/`sa` only.
    query: Vec<f64>,
    /// u_j = V x_j, n x d, `usa`/`sa` only.
    value: Vec<f64>,
    /// The tokens and values coordinate by coordinate (d x n), `usa`/`sa` with d < GEMM_MIN_D.
    unit_columns: Vec<f64>,
    value_columns: Vec<f64>,
    /// Mirror buffers and per-token sums of the symmetric kernel, and its totals.
    symmetric: Vec<f64>,
    totals: Vec<f64>,
    /// One head's field before projection, n x d, `usa`/`sa` with several heads only.
    head_field: Vec<f64>,
    /// Weight tiles (and the symmetric kernel's sums), `usa`/`sa` with d >= GEMM_MIN_D only.
    weights: Vec<f64>,
    /// Tile sizes of the tiled kernels (tests use small ones).
    tiles: Tiles,
    symmetric_tile: usize,
}

/// The vector field of the full model for n tokens in d dimensions.
///
/// ```
/// use nalgebra::DMatrix;
/// use tokdyn::model::{Attention, Head, Kernel, SphereField};
/// let head = Head { a: DMatrix::identity(2, 2), v: DMatrix::identity(2, 2) };
/// let field = SphereField::new(Attention::new(Kernel::Lsa, 1.0, vec![head]), 2);
/// // Two tokens at angles 0 and pi/2: with A = V = I, S = I/2 and f_k = x_k / 2 is radial,
/// // so the projected field vanishes.
/// let x = [1.0, 0.0, 0.0, 1.0];
/// let mut dx = [9.0; 4];
/// field.eval(&x, &mut dx);
/// assert!(dx.iter().all(|v| v.abs() < 1e-15));
/// ```
pub struct SphereField {
    attention: Attention,
    /// V^T for each head (so that V x is a run of column dot products).
    values_transposed: Vec<DMatrix<f64>>,
    /// beta A^T and V for each head packed for [`panel_product`] (`usa`/`sa`, d >= GEMM_MIN_D).
    packed_heads: Vec<[Vec<f64>; 2]>,
    n: usize,
    d: usize,
    /// Whether each head's A equals its transpose (one exponential per pair, see `symmetric`).
    symmetric_heads: Vec<bool>,
    scratch: Mutex<Scratch>,
    /// The spectral kernel, when chosen at construction (`usa`/`sa`, d = 2; see `spectral`).
    spectral: Option<SpectralField>,
    /// The harmonics kernel, when chosen at construction (`usa`/`sa`, d = 3; see `harmonics`).
    harmonics: Option<HarmonicsField>,
    /// The factored heads' field, when the layer has factored heads.
    factored: Option<FactoredField>,
    /// Whether the fused small-d `lsa` passes apply (no mask, post-LN, formed heads only).
    small_linear: bool,
    /// The field's derivative, made when first asked for (Lyapunov exponents).
    tangent: OnceLock<TangentField>,
}

impl SphereField {
    /// Prepares the field of `attention` for `n` tokens (allocates all scratch once), with the
    /// kernel `auto` picks: spectral for `usa`/`sa` in d = 2 where it is accurate and pays.
    pub fn new(attention: Attention, n: usize) -> Self {
        Self::with_kernel_method(attention.clone(), n, KernelMethod::Auto)
            .unwrap_or_else(|_| Self::direct(attention, n))
    }

    /// The field with the kernel chosen by `method`, once; `Err` (one line) where `method` asks
    /// for a series kernel that does not apply or whose error bound fails. The harmonics kernel
    /// (d = 3) is held to the default tolerance 1e-9 (see [`Self::with_kernel`]).
    pub fn with_kernel_method(
        attention: Attention,
        n: usize,
        method: KernelMethod,
    ) -> Result<Self, String> {
        Self::with_kernel(attention, n, method, DEFAULT_TOLERANCE)
    }

    /// The same with the harmonics kernel held to `tolerance` (a run's `solver.rtol`).
    pub fn with_kernel(
        attention: Attention,
        n: usize,
        method: KernelMethod,
        tolerance: f64,
    ) -> Result<Self, String> {
        let choice = choose(&attention, n, method, tolerance)?;
        let (spectral, harmonics) = match choice {
            KernelChoice::Direct => (None, None),
            KernelChoice::Spectral { .. } => (SpectralField::new(&attention, n), None),
            KernelChoice::Harmonics { .. } => {
                let plans = super::harmonics::plan(&attention, n, tolerance)?;
                (None, HarmonicsField::new(&attention, n, &plans))
            }
        };
        if spectral.is_none() && harmonics.is_none() {
            return Ok(Self::direct(attention, n));
        }
        // The direct kernel's buffers are not needed: make them for no tokens.
        let mut field = Self::direct(attention, 0);
        field.n = n;
        field.spectral = spectral;
        field.harmonics = harmonics;
        Ok(field)
    }

    /// Which kernel evaluates this field.
    pub fn kernel_choice(&self) -> KernelChoice {
        match (&self.spectral, &self.harmonics) {
            (Some(s), _) => KernelChoice::Spectral { terms: s.terms() },
            (_, Some(h)) => KernelChoice::Harmonics { terms: h.degree() },
            _ => KernelChoice::Direct,
        }
    }

    /// The direct (pairwise or moment-matrix) field.
    fn direct(attention: Attention, n: usize) -> Self {
        // Positions act on the d_h-dimensional queries and keys: every head factored.
        let attention = if attention.position.is_none() {
            attention
        } else {
            attention.all_factored()
        };
        let d = attention.d();
        let causal = attention.mask == Mask::Causal;
        let lsa = attention.kernel == Kernel::Lsa;
        let small_linear = lsa
            && d < GEMM_MIN_D
            && attention.is_plain()
            && attention.factored.is_empty()
            && !attention.heads.is_empty();
        // Queries and values of the formed heads: the pairwise kernels, and causal `lsa`.
        let pairwise = if lsa && !causal { 0 } else { n * d };
        let several_heads = attention.heads.len() > 1;
        let small = if lsa { d } else { 0 };
        // Under the mask the weights are not symmetric: no symmetric shortcut.
        let symmetric_heads: Vec<bool> = attention
            .heads
            .iter()
            .map(|h| !causal && is_symmetric(&h.a))
            .collect();
        let symmetric = !lsa && d < GEMM_MIN_D && symmetric_heads.contains(&true);
        let factored = (!attention.factored.is_empty()).then(|| {
            FactoredField::new(
                attention.kernel,
                (attention.beta, causal),
                &attention.factored,
                &attention.position,
                n,
            )
        });
        let scratch = Scratch {
            unit: vec![0.0; if small_linear { 0 } else { n * d }],
            partials: vec![0.0; if lsa { d * d * chunk_count(n) } else { 0 }],
            moment: DMatrix::zeros(small, small),
            a_s: DMatrix::zeros(small, small),
            m_transposed: DMatrix::zeros(small, small),
            head_term: DMatrix::zeros(small, small),
            m: DMatrix::zeros(small, small),
            query: vec![0.0; pairwise],
            value: vec![0.0; pairwise],
            unit_columns: vec![0.0; if d < GEMM_MIN_D { pairwise } else { 0 }],
            value_columns: vec![0.0; if d < GEMM_MIN_D { pairwise } else { 0 }],
            symmetric: vec![
                0.0;
                if symmetric {
                    symmetric_scratch_len(n, d)
                } else {
                    0
                }
            ],
            totals: vec![0.0; if symmetric { n } else { 0 }],
            head_field: vec![0.0; if several_heads { pairwise } else { 0 }],
            weights: vec![
                0.0;
                if !lsa && d >= GEMM_MIN_D {
                    tiled_scratch_len(n, d, symmetric_heads.contains(&true), TILES, SYMMETRIC_TILE)
                } else if lsa && causal {
                    d * d
                } else {
                    0
                }
            ],
            tiles: TILES,
            symmetric_tile: SYMMETRIC_TILE,
        };
        let values_transposed = attention.heads.iter().map(|h| h.v.transpose()).collect();
        let packed_heads = if (lsa && !causal) || d < GEMM_MIN_D {
            Vec::new()
        } else {
            attention
                .heads
                .iter()
                .map(|h| {
                    [
                        pack_square(&h.a.transpose(), attention.beta),
                        pack_square(&h.v, 1.0),
                    ]
                })
                .collect()
        };
        SphereField {
            attention,
            values_transposed,
            packed_heads,
            n,
            d,
            symmetric_heads,
            scratch: Mutex::new(scratch),
            spectral: None,
            harmonics: None,
            factored,
            small_linear,
            tangent: OnceLock::new(),
        }
    }

    /// The field with other tile sizes for the tiled kernels (tests use small tiles).
    #[cfg(test)]
    fn with_tiles(attention: Attention, n: usize, tiles: Tiles, symmetric_tile: usize) -> Self {
        let field = SphereField::direct(attention, n);
        {
            let mut scratch = field.scratch.lock().unwrap();
            if !scratch.weights.is_empty() {
                let symmetric = field.symmetric_heads.contains(&true);
                let len = tiled_scratch_len(n, field.d, symmetric, tiles, symmetric_tile);
                scratch.weights = vec![0.0; len];
                scratch.tiles = tiles;
                scratch.symmetric_tile = symmetric_tile;
            }
        }
        field
    }

    /// Number of tokens.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Dimension of the token space.
    pub fn d(&self) -> usize {
        self.d
    }

    /// The attention weights this field was built from.
    pub fn attention(&self) -> &Attention {
        &self.attention
    }

    /// Bytes of scratch memory held beside the state.
    pub fn scratch_bytes(n: usize, d: usize, kernel: Kernel, heads: usize) -> usize {
        let per_token = match kernel {
            Kernel::Lsa if d < GEMM_MIN_D => 0,
            Kernel::Lsa => d,
            // u, q, the unit tokens (twice for d < GEMM_MIN_D), one head's field.
            _ => d * (4 + usize::from(heads > 1)),
        };
        let weights = if kernel == Kernel::Lsa {
            0
        } else if d >= GEMM_MIN_D {
            // At most: A symmetric (the symmetric kernel's sums, where they fit).
            tiled_scratch_len(n, d, true, TILES, SYMMETRIC_TILE)
        } else {
            // The symmetric kernel's buffers (when A is symmetric).
            symmetric_scratch_len(n, d) + n
        };
        n.saturating_mul(per_token)
            .saturating_add(weights)
            .saturating_mul(8)
    }

    /// Writes x' into `dx` for the tokens `x` (n x d row-major; rows need not be exactly unit).
    pub fn eval(&self, x: &[f64], dx: &mut [f64]) {
        if let Some(spectral) = &self.spectral {
            return spectral.eval(x, dx);
        }
        if let Some(harmonics) = &self.harmonics {
            return harmonics.eval(x, dx);
        }
        let d = self.d;
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let scratch = &mut *guard;
        if self.small_linear {
            // Fused passes with the dimension known at compile time.
            return match d {
                1 => self.linear_field_small::<1>(scratch, x, dx),
                2 => self.linear_field_small::<2>(scratch, x, dx),
                3 => self.linear_field_small::<3>(scratch, x, dx),
                4 => self.linear_field_small::<4>(scratch, x, dx),
                5 => self.linear_field_small::<5>(scratch, x, dx),
                6 => self.linear_field_small::<6>(scratch, x, dx),
                _ => self.linear_field_small::<7>(scratch, x, dx),
            };
        }
        normalise_rows(x, &mut scratch.unit, d);
        let causal = self.attention.mask == Mask::Causal;
        match self.attention.kernel {
            _ if self.attention.heads.is_empty() => dx.fill(0.0),
            Kernel::Lsa if causal => self.causal_linear_field(scratch, dx),
            Kernel::Lsa => self.linear_field_gemm(scratch, dx),
            Kernel::Usa | Kernel::Sa => self.pairwise_field(scratch, dx),
        }
        if let Some(factored) = &self.factored {
            factored.add_field(&scratch.unit, dx);
        }
        match self.attention.normalization {
            Normalization::Post => project_rows(&scratch.unit, dx, d),
            Normalization::Pre => {}
            Normalization::Peri => normalise_updates(dx, d, 1.0),
            Normalization::Ngpt => {
                normalise_updates(dx, d, self.attention.ngpt_alpha);
                project_rows(&scratch.unit, dx, d);
            }
        }
    }

    /// The causal linear field: per head f_k = (1/k) sum_{j<=k} <q_k, x_j> u_j (k from 1),
    /// by the running sums of `linear_sums`.
    fn causal_linear_field(&self, s: &mut Scratch, dx: &mut [f64]) {
        let d = self.d;
        let several_heads = self.attention.heads.len() > 1;
        for h in 0..self.attention.heads.len() {
            self.queries_and_values(h, s);
            let target: &mut [f64] = if several_heads {
                &mut s.head_field
            } else {
                &mut *dx
            };
            let (q, x, u) = (&s.query, &s.unit, &s.value);
            linear_sums(q, x, u, (d, d), true, &mut s.weights, target);
            if several_heads {
                if h == 0 {
                    dx.copy_from_slice(&s.head_field);
                } else {
                    dx.iter_mut().zip(&s.head_field).for_each(|(o, f)| *o += f);
                }
            }
        }
    }

    /// The linear field for d = D < GEMM_MIN_D in two passes over the tokens: the moment matrix
    /// S = (1/n) sum_j u_j u_j^T of the unit tokens u_j = x_j / |x_j| (as x_j x_j^T / |x_j|^2,
    /// no square root), then x_k' = P_k M u_k with M = beta sum_heads V S A^T.
    fn linear_field_small<const D: usize>(&self, s: &mut Scratch, x: &[f64], dx: &mut [f64]) {
        let mut sums = [0.0; GEMM_MIN_D * GEMM_MIN_D];
        chunked_sum(x, D, D * D, &mut s.partials, &mut sums, |rows, acc| {
            vectorized(
                #[inline(always)]
                || moment_sums::<D>(rows, acc),
            )
        });
        let inv_n = 1.0 / self.n as f64;
        for a in 0..D {
            for b in a..D {
                s.moment[(a, b)] = sums[a * D + b] * inv_n;
                s.moment[(b, a)] = sums[a * D + b] * inv_n;
            }
        }
        self.form_m_transposed(s);
        let mut m = [[0.0; D]; D];
        for (a, row) in m.iter_mut().enumerate() {
            for (b, mab) in row.iter_mut().enumerate() {
                *mab = s.m_transposed[(b, a)];
            }
        }
        for_each_chunk(dx, D, x, D, |out, rows| {
            vectorized(
                #[inline(always)]
                || projected_linear_map::<D>(&m, rows, out),
            )
        });
    }

    /// M^T = beta sum_heads A S V^T from the moment matrix; its column a (contiguous) is row a
    /// of M.
    fn form_m_transposed(&self, s: &mut Scratch) {
        s.m_transposed.fill(0.0);
        for (head, vt) in self.attention.heads.iter().zip(&self.values_transposed) {
            s.a_s.gemm(1.0, &head.a, &s.moment, 0.0);
            s.head_term.gemm(self.attention.beta, &s.a_s, vt, 0.0);
            s.m_transposed += &s.head_term;
        }
    }

    /// The linear field for larger d with blocked matrix products: per chunk of m tokens
    /// (X_c, d x m) the partial moment X_c X_c^T, then F_c = M X_c.
    fn linear_field_gemm(&self, s: &mut Scratch, dx: &mut [f64]) {
        let d = self.d;
        chunked_sum(
            &s.unit,
            d,
            d * d,
            &mut s.partials,
            s.moment.as_mut_slice(),
            |rows, acc| {
                let m = rows.len() / d;
                // Row-major tokens are X (d x m, column k = token k); the same numbers read
                // row-major are X^T (m x d).
                product(
                    MatRef::columns(rows, d, m),
                    MatRef::rows(rows, m, d),
                    MatMut::columns(acc, d, d),
                );
            },
        );
        s.moment.scale_mut(1.0 / self.n as f64);
        self.form_m_transposed(s);
        s.m.tr_copy_from(&s.m_transposed);
        let m_matrix = s.m.as_slice();
        for_each_chunk(dx, d, &s.unit, d, |out, unit| {
            let m = unit.len() / d;
            product(
                MatRef::columns(m_matrix, d, d),
                MatRef::columns(unit, d, m),
                MatMut::columns(out, d, m),
            );
        });
    }

    /// f_k = sum_heads (1/n) sum_j exp(<q_k, x_j>) u_j (`usa`) or the softmax-weighted mean (`sa`).
    fn pairwise_field(&self, s: &mut Scratch, dx: &mut [f64]) {
        let several_heads = self.attention.heads.len() > 1;
        if several_heads {
            dx.fill(0.0);
        }
        for h in 0..self.attention.heads.len() {
            self.queries_and_values(h, s);
            // Taken out of the scratch for the head's sums (no allocation), then put back.
            let mut head_field = std::mem::take(&mut s.head_field);
            let target: &mut [f64] = if several_heads {
                &mut head_field
            } else {
                &mut *dx
            };
            if self.d >= GEMM_MIN_D {
                self.tiled_sums(h, s, target);
            } else {
                self.token_sums(h, s, target);
            }
            if several_heads {
                dx.iter_mut().zip(&head_field).for_each(|(o, h)| *o += h);
            }
            s.head_field = head_field;
        }
    }

    /// q_k = beta A^T x_k and u_j = V x_j of head `h` for every token.
    fn queries_and_values(&self, h: usize, s: &mut Scratch) {
        let d = self.d;
        if d >= GEMM_MIN_D {
            // Q = beta A^T X and U = V X in fixed blocks of PRODUCT_TOKENS tokens (a multiple
            // of the micro-kernel's width, so every column is summed as in one product), with
            // beta A^T and V packed once.
            let [at, v] = &self.packed_heads[h];
            let (at, v) = (Panels::new(at, d, d), Panels::new(v, d, d));
            let block = PRODUCT_TOKENS * d;
            s.query
                .par_chunks_mut(block)
                .zip(s.value.par_chunks_mut(block))
                .zip(s.unit.par_chunks(block))
                .for_each(|((q, u), x)| {
                    let m = x.len() / d;
                    let x = MatRef::columns(x, d, m);
                    panel_product(at, x, false, MatMut::columns(q, d, m));
                    panel_product(v, x, false, MatMut::columns(u, d, m));
                });
            return;
        }
        let beta = self.attention.beta;
        let a = self.attention.heads[h].a.as_slice();
        let vt = self.values_transposed[h].as_slice();
        // (A^T x)_c = column c of A (column-major) . x; (V x)_c = column c of V^T . x
        for_each_chunk(&mut s.query, d, &s.unit, d, |q, x| {
            for (q, x) in q.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
                for (c, qc) in q.iter_mut().enumerate() {
                    *qc = beta * dot(&a[c * d..(c + 1) * d], x);
                }
            }
        });
        for_each_chunk(&mut s.value, d, &s.unit, d, |u, x| {
            for (u, x) in u.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
                for (c, uc) in u.iter_mut().enumerate() {
                    *uc = dot(&vt[c * d..(c + 1) * d], x);
                }
            }
        });
    }

    /// Head `h`'s f_k into `target` for d >= GEMM_MIN_D, tile by tile (see `tiles`).
    fn tiled_sums(&self, h: usize, s: &mut Scratch, target: &mut [f64]) {
        let d = self.d;
        let softmax = self.attention.kernel == Kernel::Sa;
        let pairs = Pairs {
            keys: &s.unit,
            query: &s.query,
            value: &s.value,
            key_d: d,
            value_d: d,
        };
        if self.attention.mask == Mask::Causal {
            return general_tiles_masked(pairs, target, softmax, true, s.tiles, &mut s.weights);
        }
        // A symmetric form: half the score tiles (for softmax only while the unshifted
        // exponentials stay far from overflow: |z| <= |q_k|).
        let symmetric_form = self.symmetric_heads[h]
            && symmetric_tiles_fit(self.n, d)
            && (!softmax || max_row_norm(&s.query, d) <= SYMMETRIC_SOFTMAX_MAX_SCORE);
        if symmetric_form {
            symmetric_tiles(pairs, target, softmax, s.symmetric_tile, &mut s.weights);
        } else {
            general_tiles(pairs, target, softmax, s.tiles, &mut s.weights);
        }
    }

    /// Head `h`'s f_k into `target` for d < GEMM_MIN_D, token by token from the coordinate
    /// columns (or pair by pair once for a symmetric A, see `symmetric`).
    fn token_sums(&self, h: usize, s: &mut Scratch, target: &mut [f64]) {
        let (n, d) = (self.n, self.d);
        let softmax = self.attention.kernel == Kernel::Sa;
        for (j, (x, u)) in s
            .unit
            .chunks_exact(d)
            .zip(s.value.chunks_exact(d))
            .enumerate()
        {
            for c in 0..d {
                s.unit_columns[c * n + j] = x[c];
                s.value_columns[c * n + j] = u[c];
            }
        }
        let columns = Columns {
            tokens: &s.unit_columns,
            values: &s.value_columns,
            n,
        };
        let inv_n = 1.0 / n as f64;
        // A symmetric form gives w_kj = w_jk: one exponential per pair (for softmax only while
        // the unshifted exponentials stay far from overflow: |z| <= |q_k|).
        let symmetric_form = self.symmetric_heads[h]
            && (!softmax || max_row_norm(&s.query, d) <= SYMMETRIC_SOFTMAX_MAX_SCORE)
            && n * n * d >= PAIRWISE_SEQUENTIAL_WORK;
        if symmetric_form {
            let totals = softmax.then_some(&mut s.totals[..]);
            symmetric_sums(&s.query, columns, target, totals, &mut s.symmetric);
            for (k, f) in target.chunks_exact_mut(d).enumerate() {
                let scale = if softmax { 1.0 / s.totals[k] } else { inv_n };
                f.iter_mut().for_each(|v| *v *= scale);
            }
            return;
        }
        let causal = self.attention.mask == Mask::Causal;
        let one_token = |(k, (f, q)): (usize, (&mut [f64], &[f64]))| {
            if causal {
                // The tokens j <= k, averaged over k + 1 for usa.
                pairwise_sum_prefix(q, columns, k + 1, softmax, f);
                if !softmax {
                    let inv = 1.0 / (k + 1) as f64;
                    f.iter_mut().for_each(|v| *v *= inv);
                }
                return;
            }
            pairwise_sum(q, columns, softmax, f);
            if !softmax {
                f.iter_mut().for_each(|v| *v *= inv_n);
            }
        };
        if n * n * d < PAIRWISE_SEQUENTIAL_WORK {
            target
                .chunks_mut(d)
                .zip(s.query.chunks(d))
                .enumerate()
                .for_each(one_token);
        } else {
            target
                .par_chunks_mut(d)
                .zip(s.query.par_chunks(d))
                .enumerate()
                .with_min_len(16)
                .for_each(one_token);
        }
    }
}

impl Dynamics for SphereField {
    fn dimension(&self) -> usize {
        self.n * self.d
    }

    fn rhs(&self, y: &[f64], dy: &mut [f64]) {
        self.eval(y, dy);
    }

    /// x_k <- x_k / |x_k|; returns max_k | |x_k| - 1 | before. Pre- and peri-LN: the stream
    /// is the state (its norms are data), nothing is projected.
    fn project(&self, y: &mut [f64]) -> f64 {
        if !self.attention.normalization.on_sphere() {
            return 0.0;
        }
        let d = self.d;
        let normalise = |chunk: &mut [f64]| {
            let mut drift: f64 = 0.0;
            for x in chunk.chunks_exact_mut(d) {
                let r = dot(x, x).sqrt();
                drift = drift.max((r - 1.0).abs());
                x.iter_mut().for_each(|v| *v /= r);
            }
            drift
        };
        if y.len() <= TOKENS_PER_CHUNK * d {
            normalise(y)
        } else {
            y.par_chunks_mut(TOKENS_PER_CHUNK * d)
                .map(normalise)
                .reduce(|| 0.0, f64::max)
        }
    }

    fn order_parameters(&self, y: &[f64]) -> OrderParameters {
        if !self.attention.normalization.on_sphere() {
            return directions_order_parameters(y, self.d);
        }
        order_parameters(y, self.d)
    }

    fn tokens<'a>(&self, y: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        Some(Cow::Borrowed(y))
    }

    /// The field's exact derivative: every kernel, head, mask, position and normalisation.
    fn linearization(&self) -> Option<&dyn Linearization> {
        Some(
            self.tangent
                .get_or_init(|| TangentField::new(&self.attention, self.n)),
        )
    }
}

/// The order parameters of the directions z_k = x_k / |x_k| of a pre-LN stream.
fn directions_order_parameters(y: &[f64], d: usize) -> OrderParameters {
    crate::observe::order_parameters_mapped(y, d, d, |rows, buffer| {
        buffer.clear();
        buffer.extend_from_slice(rows);
        for z in buffer.chunks_exact_mut(d) {
            let inv = 1.0 / dot(z, z).sqrt();
            z.iter_mut().for_each(|v| *v *= inv);
        }
        buffer
    })
}

/// scale M (d x d) packed for [`panel_product`].
fn pack_square(m: &DMatrix<f64>, scale: f64) -> Vec<f64> {
    let d = m.nrows();
    let mut packed = vec![0.0; panels_len(d, d)];
    pack_panels(MatRef::columns(m.as_slice(), d, d), &mut packed);
    packed.iter_mut().for_each(|v| *v *= scale);
    packed
}

/// Whether the symmetric tiled kernel's per-group sums fit its memory bound.
fn symmetric_tiles_fit(n: usize, d: usize) -> bool {
    symmetric_tiles_scratch_len(n, d, SYMMETRIC_TILE) <= SYMMETRIC_TILES_MAX_NUMBERS
}

/// Scratch numbers of the tiled kernels (the symmetric one's where A may be symmetric).
fn tiled_scratch_len(n: usize, d: usize, symmetric: bool, tiles: Tiles, tile: usize) -> usize {
    let general = general_scratch_len(n, d, tiles);
    if symmetric && symmetric_tiles_fit(n, d) {
        general.max(symmetric_tiles_scratch_len(n, d, tile))
    } else {
        general
    }
}

/// acc[a D + b] += sum_k x_ka x_kb / |x_k|^2 (b >= a) over the rows x_k.
#[inline(always)]
fn moment_sums<const D: usize>(rows: &[f64], acc: &mut [f64]) {
    let mut sums = [[0.0; D]; D];
    for row in rows.chunks_exact(D) {
        let x: &[f64; D] = row.try_into().expect("rows of D numbers");
        let inv = 1.0 / dot_n(x, x);
        for a in 0..D {
            let xa = x[a] * inv;
            for b in a..D {
                sums[a][b] += xa * x[b];
            }
        }
    }
    for a in 0..D {
        for b in a..D {
            acc[a * D + b] += sums[a][b];
        }
    }
}

/// f_k = P_k M u_k with u_k = x_k / |x_k|, for the rows x_k.
#[inline(always)]
fn projected_linear_map<const D: usize>(m: &[[f64; D]; D], rows: &[f64], out: &mut [f64]) {
    for (f, row) in out.chunks_exact_mut(D).zip(rows.chunks_exact(D)) {
        let x: &[f64; D] = row.try_into().expect("rows of D numbers");
        let inv = 1.0 / dot_n(x, x).sqrt();
        let u: [f64; D] = std::array::from_fn(|a| x[a] * inv);
        let mu: [f64; D] = std::array::from_fn(|a| dot_n(&m[a], &u));
        let radial = dot_n(&u, &mu);
        for a in 0..D {
            f[a] = mu[a] - radial * u[a];
        }
    }
}

/// Whether A = A^T exactly.
fn is_symmetric(a: &DMatrix<f64>) -> bool {
    a.is_square() && (0..a.nrows()).all(|i| (0..i).all(|j| a[(i, j)] == a[(j, i)]))
}

/// max_k |q_k| over the rows of `q`.
fn max_row_norm(q: &[f64], d: usize) -> f64 {
    q.chunks_exact(d)
        .map(|r| dot(r, r))
        .fold(0.0, f64::max)
        .sqrt()
}

#[inline(always)]
pub(crate) fn dot_n<const D: usize>(a: &[f64; D], b: &[f64; D]) -> f64 {
    let mut sum = a[0] * b[0];
    for c in 1..D {
        sum += a[c] * b[c];
    }
    sum
}

pub(crate) use crate::simd::dot;

/// unit_k = x_k / |x_k|.
fn normalise_rows(x: &[f64], unit: &mut [f64], d: usize) {
    for_each_chunk(unit, d, x, d, |u, x| {
        for (u, x) in u.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
            let inv = 1.0 / dot(x, x).sqrt();
            u.iter_mut().zip(x).for_each(|(ua, xa)| *ua = xa * inv);
        }
    });
}

/// f_k <- scale f_k / |f_k| (a zero f_k stays zero): peri-LN (scale 1) and nGPT (alpha).
fn normalise_updates(f: &mut [f64], d: usize, scale: f64) {
    f.par_chunks_mut(TOKENS_PER_CHUNK * d).for_each(|chunk| {
        for f in chunk.chunks_exact_mut(d) {
            let norm = dot(f, f).sqrt();
            if norm > 0.0 {
                let c = scale / norm;
                f.iter_mut().for_each(|v| *v *= c);
            }
        }
    });
}

/// f_k <- f_k - <x_k, f_k> x_k.
fn project_rows(unit: &[f64], f: &mut [f64], d: usize) {
    for_each_chunk(f, d, unit, d, |f, x| {
        for (f, x) in f.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
            let radial = dot(x, f);
            f.iter_mut().zip(x).for_each(|(fa, xa)| *fa -= radial * xa);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Head;

    fn random_matrix(d: usize, seed: u64) -> DMatrix<f64> {
        // A small deterministic generator is enough for test matrices.
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        DMatrix::from_fn(d, d, |_, _| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
    }

    fn random_tokens(n: usize, d: usize, seed: u64) -> Vec<f64> {
        let m = random_matrix(n.max(d), seed);
        let mut x: Vec<f64> = m.as_slice()[..n * d].to_vec();
        for row in x.chunks_exact_mut(d) {
            let r = dot(row, row).sqrt();
            row.iter_mut().for_each(|v| *v /= r);
        }
        x
    }

    /// Tiles of 64 keys x 32 queries: several tiles each way at a few hundred tokens.
    const SMALL_TILES: Tiles = Tiles {
        keys: 64,
        queries: 32,
    };

    /// The field of `att` at the tokens `x` (rows of d) in [`SMALL_TILES`] and chunks of 32
    /// tokens, evaluated on one thread and on `threads`; checks the two give the same bytes.
    fn small_tiles_field(att: Attention, x: &[f64], d: usize, threads: usize) -> Vec<f64> {
        let n = x.len() / d;
        let field = SphereField::with_tiles(att, n, SMALL_TILES, 32);
        let eval_with = |threads| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut dx = vec![0.0; n * d];
            pool.install(|| field.eval(x, &mut dx));
            dx
        };
        let one = eval_with(1);
        assert_eq!(
            one,
            eval_with(threads),
            "{threads} threads changed the bytes"
        );
        one
    }

    /// The formula of docs/MATH.md §1, written out pair by pair (formed heads; the causal
    /// mask sums over j <= k with 1/k; pre-LN evaluates at x / |x| and does not project).
    fn direct_field(att: &Attention, x: &[f64], d: usize) -> Vec<f64> {
        let n = x.len() / d;
        let unit: Vec<f64> = x
            .chunks_exact(d)
            .flat_map(|r| {
                let norm = dot(r, r).sqrt();
                r.iter().map(move |v| v / norm)
            })
            .collect();
        let x = &unit[..];
        let mut out = vec![0.0; n * d];
        for head in &att.heads {
            for k in 0..n {
                let xk = nalgebra::DVector::from_column_slice(&x[k * d..(k + 1) * d]);
                let mut f = nalgebra::DVector::zeros(d);
                let mut weights = Vec::new();
                let count = if att.mask == Mask::Causal { k + 1 } else { n };
                for j in 0..count {
                    let xj = nalgebra::DVector::from_column_slice(&x[j * d..(j + 1) * d]);
                    let y = att.beta * xk.dot(&(&head.a * &xj));
                    weights.push(match att.kernel {
                        Kernel::Lsa => y,
                        _ => y.exp(),
                    });
                }
                let total: f64 = weights.iter().sum();
                for (j, w) in weights.iter().enumerate() {
                    let xj = nalgebra::DVector::from_column_slice(&x[j * d..(j + 1) * d]);
                    let scale = match att.kernel {
                        Kernel::Sa => w / total,
                        _ => w / count as f64,
                    };
                    f += &head.v * xj * scale;
                }
                for c in 0..d {
                    out[k * d + c] += f[c];
                }
            }
        }
        if att.normalization == Normalization::Pre {
            return out;
        }
        for k in 0..n {
            let xk = &x[k * d..(k + 1) * d];
            let fk = out[k * d..(k + 1) * d].to_vec();
            let radial = dot(xk, &fk);
            for c in 0..d {
                out[k * d + c] = fk[c] - radial * xk[c];
            }
        }
        out
    }

    #[test]
    fn every_kernel_matches_the_pairwise_formula() {
        for kernel in [Kernel::Lsa, Kernel::Usa, Kernel::Sa] {
            for (d, heads) in [(2, 1), (3, 2), (5, 1), (9, 2), (12, 1)] {
                let n = 37;
                let att = random_attention(kernel, d, heads, 10);
                let x = random_tokens(n, d, 5);
                let field = SphereField::new(att.clone(), n);
                assert_matches_formula(&field, &att, &x, &format!("{kernel:?} d={d}"));
            }
        }
    }

    #[test]
    fn blocked_pairwise_kernels_match_the_formula_and_ignore_the_thread_count() {
        // n = 300 in tiles of 64 keys x 32 queries: several tiles each way, ragged last ones.
        let (n, d) = (300, 9);
        for kernel in [Kernel::Usa, Kernel::Sa] {
            let att = random_attention(kernel, d, 1, 31);
            let x = random_tokens(n, d, 33);
            let expected = direct_field(&att, &x, d);
            let one = small_tiles_field(att, &x, d, 3);
            assert_close(&one, &expected, 1e-12, &format!("{kernel:?}"));
        }
    }

    #[test]
    fn symmetric_forms_take_one_exponential_per_pair_and_match_the_formula() {
        for (kernel, d) in [
            (Kernel::Usa, 3),
            (Kernel::Sa, 3),
            (Kernel::Usa, 12),
            (Kernel::Sa, 12),
        ] {
            let n = 300;
            let r = random_matrix(d, 51);
            let a = &r + r.transpose();
            assert!(is_symmetric(&a));
            let att = Attention::new(
                kernel,
                0.9,
                vec![Head {
                    a,
                    v: random_matrix(d, 52),
                }],
            );
            let x = random_tokens(n, d, 53);
            let expected = direct_field(&att, &x, d);
            let field = SphereField::new(att, n);
            let mut dx = vec![0.0; n * d];
            field.eval(&x, &mut dx);
            for (a, b) in dx.iter().zip(&expected) {
                assert!((a - b).abs() < 1e-12, "{kernel:?}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn last_blocks_of_one_to_five_tokens_are_right() {
        // n = 257 in tiles of 64 keys x 32 queries (symmetric: 32) leaves 1 token in the last
        // tiles; n = 2049: chunks of 2048 tokens leave 1.
        // (These shapes once sent the products through a loop that wrote past its buffer.)
        for (kernel, n) in [(Kernel::Usa, 257), (Kernel::Sa, 257), (Kernel::Lsa, 2049)] {
            let d = 9;
            let att = random_attention(kernel, d, 1, 41);
            let x = random_tokens(n, d, 43);
            let field = SphereField::with_tiles(att.clone(), n, SMALL_TILES, 32);
            assert_matches_formula(&field, &att, &x, &format!("{kernel:?} n={n}"));
        }
    }

    #[test]
    fn field_is_tangent_and_lsa_is_odd_in_each_token() {
        let d = 3;
        let n = 11;
        let att = Attention::new(
            Kernel::Lsa,
            1.3,
            vec![Head {
                a: random_matrix(d, 1),
                v: random_matrix(d, 2),
            }],
        );
        let field = SphereField::new(att, n);
        let x = random_tokens(n, d, 9);
        let mut dx = vec![0.0; n * d];
        field.eval(&x, &mut dx);
        for (f, xk) in dx.chunks_exact(d).zip(x.chunks_exact(d)) {
            assert!(dot(f, xk).abs() < 1e-14);
        }
        // Flip token 4 to its antipode: its velocity flips, the others do not change.
        let mut flipped = x.clone();
        flipped[4 * d..5 * d].iter_mut().for_each(|v| *v = -*v);
        let mut dy = vec![0.0; n * d];
        field.eval(&flipped, &mut dy);
        for k in 0..n {
            let sign = if k == 4 { -1.0 } else { 1.0 };
            for c in 0..d {
                assert!((dy[k * d + c] - sign * dx[k * d + c]).abs() < 1e-14);
            }
        }
    }

    fn random_attention(kernel: Kernel, d: usize, heads: usize, seed: u64) -> Attention {
        Attention::new(
            kernel,
            0.7,
            (0..heads as u64)
                .map(|h| Head {
                    a: random_matrix(d, seed + 2 * h),
                    v: random_matrix(d, seed + 2 * h + 1),
                })
                .collect(),
        )
    }

    /// Checks `field` (of `att`) at the tokens `x` against [`direct_field`].
    fn assert_matches_formula(field: &SphereField, att: &Attention, x: &[f64], what: &str) {
        let d = att.heads[0].a.nrows();
        let mut dx = vec![0.0; x.len()];
        field.eval(x, &mut dx);
        assert_close(&dx, &direct_field(att, x, d), 1e-12, what);
    }

    fn assert_close(got: &[f64], expected: &[f64], tol: f64, what: &str) {
        for (a, b) in got.iter().zip(expected) {
            assert!((a - b).abs() < tol, "{what}: {a} vs {b}");
        }
    }

    #[test]
    fn causal_mask_matches_the_pairs_j_up_to_k_for_every_kernel() {
        for kernel in [Kernel::Lsa, Kernel::Usa, Kernel::Sa] {
            for (d, heads, n) in [(2, 1, 37), (3, 2, 37), (5, 1, 300), (9, 2, 37), (12, 1, 37)] {
                let att = random_attention(kernel, d, heads, 10).with_mask(Mask::Causal);
                let x = random_tokens(n, d, 5);
                let mut dx = vec![0.0; n * d];
                SphereField::new(att.clone(), n).eval(&x, &mut dx);
                let expected = direct_field(&att, &x, d);
                assert_close(&dx, &expected, 1e-12, &format!("{kernel:?} d={d} n={n}"));
                // The mask changes the field (the test could fail).
                let mut open = vec![0.0; n * d];
                SphereField::new(att.clone().with_mask(Mask::None), n).eval(&x, &mut open);
                assert!(dx.iter().zip(&open).any(|(a, b)| (a - b).abs() > 1e-6));
            }
        }
    }

    #[test]
    fn causal_tiles_skip_the_upper_tiles_and_ignore_the_thread_count() {
        // Symmetric A too: under the mask the symmetric shortcut must not be taken.
        let (n, d) = (300, 9);
        for kernel in [Kernel::Usa, Kernel::Sa] {
            for symmetric in [false, true] {
                let mut att = random_attention(kernel, d, 1, 31).with_mask(Mask::Causal);
                if symmetric {
                    let a = att.heads[0].a.clone();
                    att.heads[0].a = &a + a.transpose();
                }
                let x = random_tokens(n, d, 33);
                let expected = direct_field(&att, &x, d);
                let one = small_tiles_field(att, &x, d, 2);
                assert_close(&one, &expected, 1e-12, &format!("{kernel:?} {symmetric}"));
            }
        }
    }

    /// Random factored heads of width d / heads.
    fn random_factors(d: usize, heads: usize, seed: u64) -> Vec<crate::model::FactoredHead> {
        let dh = d / heads;
        (0..heads as u64)
            .map(|h| {
                let m = |s: u64| random_matrix(d, seed + 4 * h + s);
                crate::model::FactoredHead {
                    q: m(0).columns(0, dh).into_owned(),
                    k: m(1).columns(0, dh).into_owned(),
                    v: m(2).columns(0, dh).into_owned(),
                    o: m(3).rows(0, dh).into_owned(),
                }
            })
            .collect()
    }

    #[test]
    fn factored_heads_equal_the_same_heads_formed() {
        for kernel in [Kernel::Lsa, Kernel::Usa, Kernel::Sa] {
            for mask in [Mask::None, Mask::Causal] {
                for (d, heads, n) in [(12, 3, 150), (6, 2, 40), (16, 4, 70)] {
                    let factors = random_factors(d, heads, 70);
                    let factored = Attention::new(kernel, 1.3, Vec::new())
                        .with_factored(factors)
                        .with_mask(mask);
                    let formed = factored.formed();
                    assert!(formed.factored.is_empty() && formed.heads.len() == heads);
                    let x = random_tokens(n, d, 71);
                    let mut a = vec![0.0; n * d];
                    let mut b = vec![0.0; n * d];
                    SphereField::new(factored, n).eval(&x, &mut a);
                    SphereField::new(formed.clone(), n).eval(&x, &mut b);
                    let what = format!("{kernel:?} {mask:?} d={d}");
                    assert_close(&a, &b, 1e-12, &what);
                    assert_close(&a, &direct_field(&formed, &x, d), 1e-12, &what);
                }
            }
        }
    }

    #[test]
    fn pre_ln_moves_the_stream_by_the_unprojected_field_of_the_directions() {
        let (n, d) = (40, 5);
        for kernel in [Kernel::Lsa, Kernel::Usa, Kernel::Sa] {
            let att = random_attention(kernel, d, 2, 90).with_normalization(Normalization::Pre);
            // A stream with norms from 0.5 to 2.5.
            let mut x = random_tokens(n, d, 91);
            for (k, row) in x.chunks_exact_mut(d).enumerate() {
                let r = 0.5 + 2.0 * k as f64 / n as f64;
                row.iter_mut().for_each(|v| *v *= r);
            }
            let field = SphereField::new(att.clone(), n);
            let mut dx = vec![0.0; n * d];
            field.eval(&x, &mut dx);
            assert_close(
                &dx,
                &direct_field(&att, &x, d),
                1e-12,
                &format!("{kernel:?}"),
            );
            // Not tangent: the norms move; and nothing is projected.
            assert!(dx
                .chunks_exact(d)
                .zip(x.chunks_exact(d))
                .any(|(f, x)| dot(f, x).abs() > 1e-3));
            let mut y = x.clone();
            assert_eq!(field.project(&mut y), 0.0);
            assert_eq!(y, x);
        }
    }
}
