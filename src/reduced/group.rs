//! The group model: linear self-attention in any dimension as one d x d matrix flow.
//!
//! For LSA every token feels the same matrix M = beta sum_heads V S A^T, and the projected
//! linear flow x' = M x - <x, M x> x is solved by x = z / |z| with z' = M z. So, exactly,
//!
//! ```text
//! x_k(t) = Phi(t) x_k(0) / |Phi(t) x_k(0)|,    Phi' = M(t) Phi - c Phi,   Phi(0) = I,
//! M(t) = beta sum_heads V S(t) A^T,   S(t) = (1/n) sum_k y_k y_k^T,   y_k = Phi x_k(0) / |Phi x_k(0)|,
//! c = <Phi, M Phi>_F / |Phi|_F^2.
//! ```
//!
//! Phi matters only up to a positive factor: the term -c Phi removes the growth along Phi
//! (|Phi|_F is conserved by the exact flow) and [`Dynamics::project`] puts |Phi|_F back to
//! sqrt(d) (the size of I) after every step, so the entries of Phi stay of the order of token
//! coordinates and the integrator's usual error norm (atol + rtol |Phi_ij| per entry) bounds
//! the tokens' error: a change dPhi moves token k by at most |dPhi| / |Phi x_k(0)|.
//!
//! In d = 2 this is Watanabe–Strogatz (2 x 2 matrices act on the doubled angle by Moebius
//! maps); in every d it is an exact reduction to d^2 unknowns (d^2 - 1 up to scale) for any n.
//! The state is Phi column-major. Each evaluation is one read-only pass over the initial tokens
//! (O(n d^2)), in fixed chunks added in order, so results do not depend on the thread count; for
//! d >= 8 a chunk's images Phi X_c and moments Y_c Y_c^T are blocked matrix products. In d = 2,
//! while Phi is near conformal, not even that: the moment and the order parameters are power
//! series in Phi's Möbius parameter over the initial tokens' harmonics, taken once per run
//! (`reduced::moebius`, docs/MATH.md §2.1).

use crate::model::field::{dot, dot_n};
use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock};

use nalgebra::DMatrix;
use rayon::prelude::*;

use crate::integrate::Dynamics;
use crate::model::gemm::{gemm, MatMut, MatRef};
use crate::model::{Attention, Kernel};
use crate::observe::circle_order::CircleOrder;
use crate::observe::order::doubled_phase;
use crate::observe::token_source::sorted_doubled_angles;
use crate::observe::{
    order_parameters_from_sums, order_parameters_mapped, OrderParameters, PlaneMap, PlaneOrder,
    TokenSource,
};
use crate::parallel::{chunk_count, for_each_chunk, TOKENS_PER_CHUNK};
use crate::reduced::moebius::{Harmonics, Series, MAX_TERMS};
use crate::simd::vectorized;

/// From this dimension on, images and moments are blocked matrix products.
const GEMM_MIN_D: usize = 8;

/// Tokens per block of a matrix-product chunk (d >= GEMM_MIN_D).
const BLOCK_TOKENS: usize = 256;

/// Chunks evaluated at once, each with its own block buffer (fixed: the result of a chunk does
/// not depend on which buffer or thread it gets).
const WAVE: usize = 4;

/// A term of the d = 2 series costs about as much as this many tokens of the direct sum.
const SERIES_COST: usize = 8;

/// Numbers in a piece of tokens handed to observers and writers (2 MB).
const PIECE_NUMBERS: usize = 1 << 18;

/// Buffers reused from one evaluation to the next (no allocation on the hot path).
struct Scratch {
    /// Per-chunk partial sums of y y^T (d x d each, column-major).
    partials: Vec<f64>,
    /// sum_k y_k y_k^T, then S.
    moment: DMatrix<f64>,
    /// V S for one head.
    v_s: DMatrix<f64>,
    /// M = beta sum_heads V S A^T.
    m: DMatrix<f64>,
    /// WAVE blocks of BLOCK_TOKENS images (d x BLOCK_TOKENS each), d >= GEMM_MIN_D only.
    images: Vec<f64>,
    /// The initial tokens' harmonics for the d = 2 series (computed when first needed).
    harmonics: Harmonics,
}

/// The group flow of n tokens under linear self-attention.
///
/// ```
/// use nalgebra::DMatrix;
/// use tokdyn::integrate::Dynamics;
/// use tokdyn::model::{Attention, Head, Kernel};
/// use tokdyn::reduced::GroupFlow;
/// let head = Head { a: DMatrix::identity(2, 2), v: DMatrix::identity(2, 2) };
/// let attention = Attention::new(Kernel::Lsa, 1.0, vec![head]);
/// // Two orthogonal tokens: S = I/2, M = I/2, whose projective action is trivial.
/// let flow = GroupFlow::new(attention, vec![1.0, 0.0, 0.0, 1.0].into()).unwrap();
/// let phi = GroupFlow::initial_state(2);
/// let mut dphi = [9.0; 4];
/// flow.rhs(&phi, &mut dphi);
/// assert!(dphi.iter().all(|v| v.abs() < 1e-15));
/// ```
pub struct GroupFlow {
    attention: Attention,
    /// A^T of each head.
    queries_transposed: Vec<DMatrix<f64>>,
    /// The initial tokens x_k(0), n x d row-major (read only).
    tokens: Arc<Vec<f64>>,
    n: usize,
    d: usize,
    scratch: Mutex<Scratch>,
    /// The piece of tokens handed to observers, kept between samples.
    piece: Mutex<Vec<f64>>,
    /// d = 2: the start tokens' doubled angles, sorted (made at the first sample that asks).
    sorted_angles: OnceLock<Option<Vec<u64>>>,
    /// d = 2: the start tokens' order by angle (made at the first clustered sample that asks).
    circle_order: OnceLock<Option<CircleOrder>>,
}

impl GroupFlow {
    /// The group flow of `attention` (kernel `lsa`) acting on the initial `tokens` (n x d
    /// row-major, unit rows); `None` for another kernel (its field is not one matrix).
    pub fn new(attention: Attention, tokens: Arc<Vec<f64>>) -> Option<Self> {
        if attention.kernel != Kernel::Lsa {
            return None;
        }
        let d = attention.d();
        let n = tokens.len() / d.max(1);
        let scratch = Scratch {
            partials: vec![0.0; d * d * chunk_count(n)],
            moment: DMatrix::zeros(d, d),
            v_s: DMatrix::zeros(d, d),
            m: DMatrix::zeros(d, d),
            images: vec![
                0.0;
                if d >= GEMM_MIN_D {
                    WAVE * BLOCK_TOKENS * d
                } else {
                    0
                }
            ],
            harmonics: Harmonics::default(),
        };
        let queries_transposed = attention.heads.iter().map(|h| h.a.transpose()).collect();
        Some(GroupFlow {
            attention,
            queries_transposed,
            tokens,
            n,
            d,
            scratch: Mutex::new(scratch),
            piece: Mutex::new(Vec::new()),
            sorted_angles: OnceLock::new(),
            circle_order: OnceLock::new(),
        })
    }

    /// Phi(0) = I (column-major d x d).
    pub fn initial_state(d: usize) -> Vec<f64> {
        DMatrix::<f64>::identity(d, d).as_slice().to_vec()
    }

    /// Bytes held beside the initial tokens and the d x d state (the piece of tokens made for
    /// the observers and `tokens_final.csv` included).
    pub fn scratch_bytes(n: usize, d: usize) -> usize {
        let blocks = if d >= GEMM_MIN_D {
            WAVE * BLOCK_TOKENS * d
        } else {
            0
        };
        let piece = PIECE_NUMBERS
            .max(TOKENS_PER_CHUNK.saturating_mul(d))
            .min(n.saturating_mul(d));
        // d = 2: the harmonics, the sorted doubled angles (one u64 a token) and the start
        // order by angle (two u32 a token).
        let harmonics = if d == 2 {
            (4 * (MAX_TERMS + 2) * (chunk_count(n) + 1)).saturating_add(2 * n)
        } else {
            0
        };
        (d * d)
            .saturating_mul(chunk_count(n) + 3)
            .saturating_add(harmonics)
            .saturating_add(blocks)
            .saturating_add(piece)
            .saturating_mul(8)
    }

    /// The attention weights this flow was built from.
    pub fn attention(&self) -> &Attention {
        &self.attention
    }

    /// The tokens y_k = Phi x_k(0) / |Phi x_k(0)| (n x d row-major).
    pub fn tokens_of(&self, phi: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; self.n * self.d];
        self.tokens_into(phi, 0, &mut out);
        out
    }

    /// The tokens y_k for k = first, first + 1, ... into `out` (as many rows as fit and exist);
    /// the same numbers as [`GroupFlow::tokens_of`], a piece at a time.
    pub fn tokens_into(&self, phi: &[f64], first: usize, out: &mut [f64]) {
        let d = self.d;
        let start = first.min(self.n) * d;
        let end = (start + out.len() / d.max(1) * d).min(self.tokens.len());
        let x = &self.tokens[start..end];
        let out = &mut out[..end - start];
        match d {
            2 => for_each_chunk(out, d, x, d, |y, x| plane::map_tokens(phi, x, y)),
            _ if d >= GEMM_MIN_D => {
                // Row-major tokens are the columns of Y: one blocked product per chunk.
                for_each_chunk(out, d, x, d, |y, x| unit_images(phi, d, x, y))
            }
            _ => for_each_chunk(out, d, x, d, |y, x| map_tokens(phi, d, x, y)),
        }
    }

    /// Number of tokens.
    pub fn n(&self) -> usize {
        self.n
    }

    /// S = (1/n) sum_k y_k y_k^T into `s.moment`.
    fn moment(&self, phi: &[f64], s: &mut Scratch) {
        let d = self.d;
        let sums = s.moment.as_mut_slice();
        match d {
            1 => moment_small::<1>(phi, &self.tokens, &mut s.partials, sums),
            2 => match self.series(phi) {
                Some(series) => {
                    let [s11, s12, s22] = s.harmonics.projector_sums(&self.tokens, phi, &series);
                    sums.copy_from_slice(&[s11, s12, s12, s22]);
                }
                None => plane::moment(phi, &self.tokens, &mut s.partials, sums),
            },
            3 => moment_small::<3>(phi, &self.tokens, &mut s.partials, sums),
            4 => moment_small::<4>(phi, &self.tokens, &mut s.partials, sums),
            5 => moment_small::<5>(phi, &self.tokens, &mut s.partials, sums),
            6 => moment_small::<6>(phi, &self.tokens, &mut s.partials, sums),
            7 => moment_small::<7>(phi, &self.tokens, &mut s.partials, sums),
            _ => moment_blocked(phi, d, &self.tokens, &mut s.partials, &mut s.images, sums),
        }
        s.moment.scale_mut(1.0 / self.n.max(1) as f64);
    }

    /// The d = 2 series for Phi when it is cheaper than a pass over the tokens (its terms
    /// well below n) and converges fast enough (docs/MATH.md §2.1).
    fn series(&self, phi: &[f64]) -> Option<Series> {
        Series::for_phi(phi).filter(|s| SERIES_COST * s.harmonics_needed() <= self.n)
    }

    /// The order parameters in d = 2: by the series when it applies (docs/MATH.md §2.1),
    /// otherwise by one pass over the tokens.
    fn plane_order_parameters(&self, phi: &[f64]) -> OrderParameters {
        let Some(series) = self.series(phi) else {
            return plane::order_parameters(phi, &self.tokens);
        };
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let harmonics = &mut guard.harmonics;
        let [s11, s12, s22] = harmonics.projector_sums(&self.tokens, phi, &series);
        let y = harmonics.mean_direction_sum(&series);
        let moment = DMatrix::from_column_slice(2, 2, &[s11, s12, s12, s22]);
        let r2_sum = num_complex::Complex64::new(s11 - s22, 2.0 * s12);
        order_parameters_from_sums(self.n, r2_sum, &[y.re, y.im], moment)
    }

    /// M = beta sum_heads V S A^T from `s.moment` into `s.m`.
    fn coupling(&self, s: &mut Scratch) {
        let d = self.d;
        s.m.fill(0.0);
        for (head, at) in self.attention.heads.iter().zip(&self.queries_transposed) {
            if d < GEMM_MIN_D {
                // Small matrices: plain loops (a general product's set-up costs more).
                small_product(
                    1.0,
                    head.v.as_slice(),
                    s.moment.as_slice(),
                    d,
                    0.0,
                    s.v_s.as_mut_slice(),
                );
                let beta = self.attention.beta;
                small_product(
                    beta,
                    s.v_s.as_slice(),
                    at.as_slice(),
                    d,
                    1.0,
                    s.m.as_mut_slice(),
                );
            } else {
                s.v_s.gemm(1.0, &head.v, &s.moment, 0.0);
                s.m.gemm(self.attention.beta, &s.v_s, at, 1.0);
            }
        }
    }
}

impl Dynamics for GroupFlow {
    fn dimension(&self) -> usize {
        self.d * self.d
    }

    /// dPhi = M Phi - (<Phi, M Phi>_F / |Phi|_F^2) Phi.
    fn rhs(&self, phi: &[f64], dphi: &mut [f64]) {
        let d = self.d;
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        self.moment(phi, s);
        self.coupling(s);
        if d < GEMM_MIN_D {
            small_product(1.0, s.m.as_slice(), phi, d, 0.0, dphi);
        } else {
            gemm(
                1.0,
                MatRef::columns(s.m.as_slice(), d, d),
                MatRef::columns(phi, d, d),
                0.0,
                MatMut::columns(dphi, d, d),
            );
        }
        let size = dot(phi, phi);
        let growth = if size > 0.0 {
            dot(phi, dphi) / size
        } else {
            0.0
        };
        dphi.iter_mut().zip(phi).for_each(|(v, p)| *v -= growth * p);
    }

    /// Phi <- sqrt(d) Phi / |Phi|_F. The tokens are unit vectors whatever Phi is, so the
    /// distance from the manifold is 0.
    fn project(&self, phi: &mut [f64]) -> f64 {
        let size = dot(phi, phi).sqrt();
        if size > 0.0 && size.is_finite() {
            let scale = (self.d as f64).sqrt() / size;
            phi.iter_mut().for_each(|v| *v *= scale);
        }
        0.0
    }

    fn order_parameters(&self, phi: &[f64]) -> OrderParameters {
        let d = self.d;
        if d >= GEMM_MIN_D {
            return order_blocked(phi, d, &self.tokens);
        }
        if d == 2 {
            return self.plane_order_parameters(phi);
        }
        order_parameters_mapped(&self.tokens, d, d, |x, buffer| {
            buffer.resize(x.len(), 0.0);
            map_tokens(phi, d, x, buffer);
            &buffer[..]
        })
    }

    fn tokens<'a>(&self, phi: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        Some(Cow::Owned(self.tokens_of(phi)))
    }

    /// The tokens in pieces of about `PIECE_NUMBERS` numbers (whole chunks), made into one
    /// buffer: no n x d copy.
    fn token_pieces(
        &self,
        phi: &[f64],
        f: &mut dyn FnMut(usize, &[f64]) -> std::io::Result<()>,
    ) -> Option<std::io::Result<()>> {
        let d = self.d.max(1);
        let chunks = (PIECE_NUMBERS / (TOKENS_PER_CHUNK * d)).max(1);
        let rows = (chunks * TOKENS_PER_CHUNK).min(self.n);
        // The piece buffer is kept from call to call (one per sample: no 2 MB of fresh zeroed
        // pages each time); it is taken out while `f` runs, so `f` may use the flow.
        let mut buffer = std::mem::take(&mut *self.piece.lock().unwrap_or_else(|e| e.into_inner()));
        buffer.resize(rows * d, 0.0);
        let mut result = Ok(());
        for first in (0..self.n).step_by(rows.max(1)) {
            let m = rows.min(self.n - first);
            self.tokens_into(phi, first, &mut buffer[..m * d]);
            result = f(first, &buffer[..m * d]);
            if result.is_err() {
                break;
            }
        }
        *self.piece.lock().unwrap_or_else(|e| e.into_inner()) = buffer;
        Some(result)
    }

    fn token_source<'a>(&'a self, phi: &'a [f64]) -> Option<Box<dyn TokenSource + 'a>> {
        Some(Box::new(GroupTokens { flow: self, phi }))
    }
}

/// The group model's tokens at one Phi, made on demand (docs/MATH.md §2.2).
struct GroupTokens<'a> {
    flow: &'a GroupFlow,
    phi: &'a [f64],
}

impl TokenSource for GroupTokens<'_> {
    fn n(&self) -> usize {
        self.flow.n
    }

    fn d(&self) -> usize {
        self.flow.d
    }

    fn rows(&self, first: usize, out: &mut [f64]) {
        self.flow.tokens_into(self.phi, first, out)
    }

    /// d = 2 with det Phi > 0 (always so for the exact flow from Phi(0) = I).
    fn plane_map(&self) -> Option<PlaneMap<'_>> {
        let p = self.plane_p()?;
        let sorted = self
            .flow
            .sorted_angles
            .get_or_init(|| sorted_doubled_angles(&self.flow.tokens))
            .as_deref()?;
        Some(PlaneMap { p, sorted })
    }

    /// d = 2 with det Phi != 0, with the start tokens' order by angle (made once). The exact
    /// det Phi is positive, but once Phi squeezes the circle (cond Phi near 1e12) the computed
    /// one may round to either sign: [`PlaneOrder`] reads the order backwards then.
    fn plane_order(&self) -> Option<PlaneOrder<'_>> {
        if self.flow.d != 2 {
            return None;
        }
        let p = [self.phi[0], self.phi[2], self.phi[1], self.phi[3]];
        let order = self
            .flow
            .circle_order
            .get_or_init(|| CircleOrder::of(&self.flow.tokens))
            .as_ref()?;
        PlaneOrder::new(p, order, &self.flow.tokens)
    }
}

impl GroupTokens<'_> {
    /// Phi row-major when d = 2, det Phi > 0 and every entry is finite.
    fn plane_p(&self) -> Option<[f64; 4]> {
        if self.flow.d != 2 {
            return None;
        }
        let p = [self.phi[0], self.phi[2], self.phi[1], self.phi[3]];
        let det = p[0] * p[3] - p[1] * p[2];
        (det > 0.0 && det.is_finite() && p.iter().all(|v| v.is_finite())).then_some(p)
    }
}

/// out = alpha a b + keep out for d x d column-major matrices (keep is 0 or 1), by plain loops.
fn small_product(alpha: f64, a: &[f64], b: &[f64], d: usize, keep: f64, out: &mut [f64]) {
    for j in 0..d {
        for i in 0..d {
            let sum: f64 = (0..d).map(|k| a[i + k * d] * b[k + j * d]).sum();
            out[i + j * d] = keep * out[i + j * d] + alpha * sum;
        }
    }
}

/// y_k = Phi x_k / |Phi x_k| for the rows x_k (a zero image stays zero).
fn map_tokens(phi: &[f64], d: usize, x: &[f64], y: &mut [f64]) {
    for (y, x) in y.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
        y.fill(0.0);
        for (b, xb) in x.iter().enumerate() {
            let column = &phi[b * d..(b + 1) * d];
            y.iter_mut().zip(column).for_each(|(ya, p)| *ya += p * xb);
        }
        let size = dot(y, y).sqrt();
        if size > 0.0 {
            y.iter_mut().for_each(|v| *v /= size);
        }
    }
}

/// sum_k z_k z_k^T / |z_k|^2 with z_k = Phi x_k, for d = D < GEMM_MIN_D, in fixed chunks.
fn moment_small<const D: usize>(phi: &[f64], x: &[f64], partials: &mut [f64], sums: &mut [f64]) {
    let p: [[f64; D]; D] = std::array::from_fn(|a| std::array::from_fn(|b| phi[b * D + a]));
    let mut upper = [0.0; GEMM_MIN_D * GEMM_MIN_D];
    crate::parallel::chunked_sum(x, D, D * D, partials, &mut upper, |rows, acc| {
        vectorized(
            #[inline(always)]
            || image_moments::<D>(&p, rows, acc),
        )
    });
    for a in 0..D {
        for b in a..D {
            sums[a + b * D] = upper[a * D + b];
            sums[b + a * D] = upper[a * D + b];
        }
    }
}

/// acc[a D + b] += z_a z_b / |z|^2 (b >= a) with z = P x, over the rows x (P row by row).
#[inline(always)]
fn image_moments<const D: usize>(p: &[[f64; D]; D], rows: &[f64], acc: &mut [f64]) {
    let mut sums = [[0.0; D]; D];
    for row in rows.chunks_exact(D) {
        let x: &[f64; D] = row.try_into().expect("rows of D numbers");
        let z: [f64; D] = std::array::from_fn(|a| dot_n(&p[a], x));
        let norm = dot_n(&z, &z);
        let inv = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        for a in 0..D {
            let za = z[a] * inv;
            for b in a..D {
                sums[a][b] += za * z[b];
            }
        }
    }
    for a in 0..D {
        for b in a..D {
            acc[a * D + b] += sums[a][b];
        }
    }
}

/// sum_k y_k y_k^T for d >= GEMM_MIN_D: per chunk, blocks of tokens X_b (d x m) go to
/// Y_b = Phi X_b with unit columns, then acc += Y_b Y_b^T; chunks in waves of WAVE (one block
/// buffer each), their sums added in chunk order.
fn moment_blocked(
    phi: &[f64],
    d: usize,
    x: &[f64],
    partials: &mut [f64],
    images: &mut [f64],
    sums: &mut [f64],
) {
    let n = x.len() / d;
    let chunks = chunk_count(n);
    let partials = &mut partials[..d * d * chunks];
    let chunk = |((acc, rows), buffer): ((&mut [f64], &[f64]), &mut [f64])| {
        acc.fill(0.0);
        for block in rows.chunks(BLOCK_TOKENS * d) {
            let m = block.len() / d;
            let y = &mut buffer[..m * d];
            unit_images(phi, d, block, y);
            gemm(
                1.0,
                MatRef::columns(y, d, m),
                MatRef::rows(y, m, d),
                1.0,
                MatMut::columns(acc, d, d),
            );
        }
    };
    let wave_tokens = WAVE * TOKENS_PER_CHUNK * d;
    for (accs, rows) in partials.chunks_mut(WAVE * d * d).zip(x.chunks(wave_tokens)) {
        if accs.len() == d * d {
            chunk(((accs, rows), &mut images[..]));
        } else {
            accs.par_chunks_mut(d * d)
                .zip(rows.par_chunks(TOKENS_PER_CHUNK * d))
                .zip(images.par_chunks_mut(BLOCK_TOKENS * d))
                .for_each(chunk);
        }
    }
    sums.fill(0.0);
    for acc in partials.chunks(d * d) {
        sums.iter_mut().zip(acc).for_each(|(s, a)| *s += a);
    }
}

/// The order parameters for d >= GEMM_MIN_D with blocked products: per chunk, Y_b = Phi X_b
/// with unit columns, then the sums of e^{2 i t}, of y and Y_b Y_b^T (the sums of
/// [`crate::observe::order_parameters`], grouped by blocks; chunks added in order).
fn order_blocked(phi: &[f64], d: usize, x: &[f64]) -> OrderParameters {
    let n = x.len() / d;
    let width = 2 + d + d * d;
    let mut partials = vec![0.0; width * chunk_count(n)];
    let mut sums = vec![0.0; width];
    crate::parallel::chunked_sum(x, d, width, &mut partials, &mut sums, |rows, acc| {
        let mut buffer = vec![0.0; BLOCK_TOKENS * d];
        for block in rows.chunks(BLOCK_TOKENS * d) {
            let m = block.len() / d;
            let y = &mut buffer[..m * d];
            unit_images(phi, d, block, y);
            for column in y.chunks_exact(d) {
                let w = doubled_phase(column[0], column[1]);
                acc[0] += w.re;
                acc[1] += w.im;
                acc[2..2 + d]
                    .iter_mut()
                    .zip(column)
                    .for_each(|(s, v)| *s += v);
            }
            gemm(
                1.0,
                MatRef::columns(y, d, m),
                MatRef::rows(y, m, d),
                1.0,
                MatMut::columns(&mut acc[2 + d..], d, d),
            );
        }
    });
    let moment = DMatrix::from_column_slice(d, d, &sums[2 + d..]);
    let r2_sum = num_complex::Complex64::new(sums[0], sums[1]);
    order_parameters_from_sums(n, r2_sum, &sums[2..2 + d], moment)
}

/// Y = Phi X for the tokens `block` (d x m), columns made unit (a zero image stays zero).
fn unit_images(phi: &[f64], d: usize, block: &[f64], y: &mut [f64]) {
    let m = block.len() / d;
    gemm(
        1.0,
        MatRef::columns(phi, d, d),
        MatRef::columns(block, d, m),
        0.0,
        MatMut::columns(y, d, m),
    );
    for column in y.chunks_exact_mut(d) {
        let size = dot(column, column).sqrt();
        let inv = if size > 0.0 { 1.0 / size } else { 0.0 };
        column.iter_mut().for_each(|v| *v *= inv);
    }
}

/// The plane (d = 2): with (a, b) = Phi x, y y^T = (a^2, ab; ab, b^2) / (a^2 + b^2) needs no
/// square root. Tokens go through in blocks of [`plane::LANES`], split into their two
/// coordinates, with one division per token and no branch (a zero image gives 0 by a select),
/// so the loops become 4-wide vector code; the lanes' sums are added in a fixed order.
mod plane {
    use crate::observe::{order_parameters_from_sums, OrderParameters};
    use crate::parallel::{chunk_count, chunked_sum};
    use crate::simd::vectorized;
    use nalgebra::DMatrix;
    use num_complex::Complex64;

    /// Tokens per block (two 4-wide vectors a coordinate).
    pub const LANES: usize = 8;

    /// The tokens of a block in lane order: what two in-lane unpacks of pairs of 4-wide loads
    /// give, so the split into coordinates costs no lane crossing (the sums' order is fixed).
    const ORDER: [usize; LANES] = [0, 2, 1, 3, 4, 6, 5, 7];

    /// Phi (column-major) as (p00, p01, p10, p11).
    fn entries(phi: &[f64]) -> [f64; 4] {
        [phi[0], phi[2], phi[1], phi[3]]
    }

    /// The blocks of `rows` (x1, x2 pairs): full ones, then the rest padded with zero tokens
    /// (whose images are zero and add nothing).
    #[inline(always)]
    fn for_blocks(rows: &[f64], mut f: impl FnMut(&[f64; 2 * LANES])) {
        let mut blocks = rows.chunks_exact(2 * LANES);
        for block in &mut blocks {
            f(block.try_into().expect("a block of 2 LANES numbers"));
        }
        let rest = blocks.remainder();
        if !rest.is_empty() {
            let mut padded = [0.0; 2 * LANES];
            padded[..rest.len()].copy_from_slice(rest);
            f(&padded);
        }
    }

    /// The images (a, b) = Phi x of one block and 1 / (a^2 + b^2) (0 for a zero image).
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    fn images(
        p: &[f64; 4],
        block: &[f64; 2 * LANES],
    ) -> ([f64; LANES], [f64; LANES], [f64; LANES]) {
        let x1: [f64; LANES] = std::array::from_fn(|i| block[2 * ORDER[i]]);
        let x2: [f64; LANES] = std::array::from_fn(|i| block[2 * ORDER[i] + 1]);
        let a: [f64; LANES] = std::array::from_fn(|i| p[0] * x1[i] + p[1] * x2[i]);
        let b: [f64; LANES] = std::array::from_fn(|i| p[2] * x1[i] + p[3] * x2[i]);
        let inv = std::array::from_fn(|i| {
            let norm = a[i] * a[i] + b[i] * b[i];
            let q = 1.0 / norm;
            if norm > 0.0 {
                q
            } else {
                0.0
            }
        });
        (a, b, inv)
    }

    /// Adds the lanes of `sums` (lane 0 first) to `acc`.
    #[inline(always)]
    fn add_lanes<const W: usize>(sums: &[[f64; LANES]; W], acc: &mut [f64]) {
        for (a, lanes) in acc.iter_mut().zip(sums) {
            *a += lanes.iter().fold(0.0, |s, v| s + v);
        }
    }

    /// Lane `i` of `sums[0..3]` += (a^2, ab, b^2) / |z|^2 (with `inv` = 1 / |z|^2).
    #[inline(always)]
    fn add_projector<const W: usize>(
        sums: &mut [[f64; LANES]; W],
        i: usize,
        a: f64,
        b: f64,
        inv: f64,
    ) {
        let ai = a * inv;
        sums[0][i] += ai * a;
        sums[1][i] += ai * b;
        sums[2][i] += b * b * inv;
    }

    /// acc += (sum a^2/|z|^2, sum ab/|z|^2, sum b^2/|z|^2) over the tokens `rows`.
    #[inline(always)]
    fn moment_rows(p: &[f64; 4], rows: &[f64], acc: &mut [f64]) {
        let mut sums = [[0.0; LANES]; 3];
        for_blocks(
            rows,
            #[inline(always)]
            |block| {
                let (a, b, inv) = images(p, block);
                for i in 0..LANES {
                    add_projector(&mut sums, i, a[i], b[i], inv[i]);
                }
            },
        );
        add_lanes(&sums, acc);
    }

    /// sum_k y_k y_k^T (column-major 2 x 2 into `out`) for the tokens `x`, in fixed chunks.
    pub fn moment(phi: &[f64], x: &[f64], partials: &mut [f64], out: &mut [f64]) {
        let p = entries(phi);
        let mut sums = [0.0; 3];
        chunked_sum(x, 2, 3, partials, &mut sums, |rows, acc| {
            vectorized(
                #[inline(always)]
                || moment_rows(&p, rows, acc),
            )
        });
        out.copy_from_slice(&[sums[0], sums[1], sums[1], sums[2]]);
    }

    /// acc += the moment sums and (sum y1, sum y2) with y = z / |z|.
    #[inline(always)]
    fn order_rows(p: &[f64; 4], rows: &[f64], acc: &mut [f64]) {
        let mut sums = [[0.0; LANES]; 5];
        for_blocks(
            rows,
            #[inline(always)]
            |block| {
                let (a, b, inv) = images(p, block);
                for i in 0..LANES {
                    add_projector(&mut sums, i, a[i], b[i], inv[i]);
                    let r = inv[i].sqrt();
                    sums[3][i] += a[i] * r;
                    sums[4][i] += b[i] * r;
                }
            },
        );
        add_lanes(&sums, acc);
    }

    /// The order parameters of the tokens y_k = Phi x_k / |Phi x_k| in one pass: with S the
    /// moment, R2 = S_11 - S_22 + 2 i S_12 (e^{2 i t} = (y1^2 - y2^2 + 2 i y1 y2) for unit y),
    /// R1 from sum y_k, s from S, as [`crate::observe::order_parameters`] defines them.
    pub fn order_parameters(phi: &[f64], x: &[f64]) -> OrderParameters {
        let n = x.len() / 2;
        let p = entries(phi);
        let mut partials = vec![0.0; 5 * chunk_count(n)];
        let mut sums = [0.0; 5];
        chunked_sum(x, 2, 5, &mut partials, &mut sums, |rows, acc| {
            vectorized(
                #[inline(always)]
                || order_rows(&p, rows, acc),
            )
        });
        let [s11, s12, s22, y1, y2] = sums;
        let moment = DMatrix::from_column_slice(2, 2, &[s11, s12, s12, s22]);
        let r2_sum = Complex64::new(s11 - s22, 2.0 * s12);
        order_parameters_from_sums(n, r2_sum, &[y1, y2], moment)
    }

    /// y = z / |z| with z = Phi x for the rows x (a zero image stays zero): the same
    /// arithmetic as the general map, vectorised.
    pub fn map_tokens(phi: &[f64], x: &[f64], y: &mut [f64]) {
        let p = entries(phi);
        vectorized(
            #[inline(always)]
            || {
                for (y, x) in y.chunks_exact_mut(2).zip(x.chunks_exact(2)) {
                    let a = p[0] * x[0] + p[1] * x[1];
                    let b = p[2] * x[0] + p[3] * x[1];
                    let size = (a * a + b * b).sqrt();
                    let (a, b) = if size > 0.0 {
                        (a / size, b / size)
                    } else {
                        (a, b)
                    };
                    y[0] = a;
                    y[1] = b;
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Head;

    #[test]
    fn the_plane_series_is_the_pass_over_the_tokens() {
        let n = 5000;
        let tokens: Vec<f64> = (0..n)
            .flat_map(|k| {
                let t = 3.0 * (k as f64 * 2.4).sin() + 1e-3 * k as f64;
                [t.cos(), t.sin()]
            })
            .collect();
        let head = Head {
            a: DMatrix::identity(2, 2),
            v: DMatrix::identity(2, 2),
        };
        let attention = Attention::new(Kernel::Lsa, 1.0, vec![head]);
        let flow = GroupFlow::new(attention, Arc::new(tokens.clone())).unwrap();
        let mut s = flow.scratch.lock().unwrap();
        for phi in [
            [1.0, 0.2, -0.1, 0.9],
            [2.0, 0.0, 0.0, 1.0],
            [0.3, -1.0, 1.2, 0.1],
        ] {
            assert!(flow.series(&phi).is_some(), "{phi:?}");
            flow.moment(&phi, &mut s);
            let by_series = s.moment.clone() * n as f64;
            let mut direct = [0.0; 4];
            plane::moment(&phi, &tokens, &mut s.partials, &mut direct);
            for (a, b) in by_series.iter().zip(direct) {
                assert!((a - b).abs() <= 1e-14 * n as f64, "{phi:?}: {a} vs {b}");
            }
        }
        drop(s);
        for phi in [
            [1.0, 0.2, -0.1, 0.9],
            [0.3, -1.0, 1.2, 0.1],
            [1.0, 0.0, 0.0, 4.0],
        ] {
            let by_series = flow.order_parameters(&phi);
            let direct = plane::order_parameters(&phi, &tokens);
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-14;
            assert!(close(by_series.r2.re, direct.r2.re) && close(by_series.r2.im, direct.r2.im));
            assert!(close(by_series.nematic, direct.nematic), "{phi:?}");
            assert!(
                close(by_series.r1.unwrap(), direct.r1.unwrap()),
                "{phi:?}: {:?} vs {:?}",
                by_series.r1,
                direct.r1
            );
        }
        // Far from conformal (|q| = 0.9), or too few tokens for the terms: the direct pass.
        assert!(flow.series(&[1.0, 0.0, 0.0, 19.0]).is_none());
        let few = GroupFlow::new(flow.attention.clone(), Arc::new(tokens[..40].to_vec())).unwrap();
        assert!(few.series(&[1.0, 0.2, -0.1, 0.9]).is_none());
    }
}
