//! The derivative of the full model's field along tangent vectors, for Lyapunov exponents
//! (docs/MATH.md §15, §15.1).
//!
//! Every head, formed or factored, is three linear maps and an optional output map: queries
//! q_k = W_q z_k, keys kappa_j = W_k z_j and values u_j = W_v z_j of the directions
//! z_k = x_k / |x_k|, scores s_kj = <q_k, kappa_j>, and a_k = W_o sum_j w_kj u_j summed over the
//! heads (formed: W_q = beta A^T, W_k = I, W_v = V; factored: W_q = beta Q^T / sqrt(d_h),
//! W_k = K^T, W_v = V^T, W_o = O^T). Along a tangent vector (dx_k), with c_k the number of
//! tokens token k sees (n, or k under the causal mask):
//!
//! ```text
//! dz_k  = (dx_k - <z_k, dx_k> z_k) / |x_k|
//! ds_kj = <W_q dz_k, kappa_j> + <q_k, W_k dz_j>
//! lsa:  w_kj = s_kj / c_k,                         da_k = W_o sum_j (ds_kj u_j + s_kj W_v dz_j) / c_k
//! usa:  w_kj = e^{s_kj} / c_k,                     da_k = W_o sum_j w_kj (ds_kj u_j + W_v dz_j)
//! sa:   w_kj = e^{s_kj} / sum_l e^{s_kl},          da_k = W_o sum_j w_kj ((ds_kj - sum_l w_kl ds_kl) u_j + W_v dz_j)
//! ```
//!
//! summed over the heads, then the normalisation's map and its derivative (post, pre, peri,
//! nGPT: `tangent_norm`). Positions (docs/MATH.md §16) enter the scores only: RoPE's rotations
//! R_k = R(p_k omega) are fixed per token, so q_k -> R_k q_k, kappa_j -> R_j kappa_j and
//! likewise dq_k -> R_k dq_k, d kappa_j -> R_j d kappa_j (every head factored, as in the field);
//! ALiBi's bias -m |k - j| is constant, so s_kj -> s_kj - m |k - j| in the weights while ds_kj
//! is unchanged.
//!
//! For `lsa` without a mask and without ALiBi the sums go through the moments
//! M = (1/n) sum_j u_j kappa_j^T and dM = (1/n) sum_j (W_v dz_j kappa_j^T + u_j (W_k dz_j)^T): a_k = W_o M q_k,
//! da_k = W_o (M W_q dz_k + dM q_k), O(n d m) work; without RoPE in two passes over fixed
//! blocks of tokens (the moments of each block added in block order, then each block's field and
//! derivatives), so that a block's arrays stay in cache. The other kernels are O(n^2 m) per vector,
//! summed token by token over columns of keys and values (`tangent_columns`: the scores and
//! weights of the state are formed once per query token and shared by the field and every
//! vector); query tokens go in fixed blocks, so the result does not depend on the number of
//! threads.

use std::sync::Mutex;

use nalgebra::DMatrix;
use rayon::prelude::*;

use super::position::{Position, RopeTable};
use super::tangent_columns::{token_sums, HeadColumns, Query, TokenScratch};
use super::tangent_norm::normalise;
use super::{Attention, Kernel, Mask, Normalization};
use crate::integrate::Linearization;

/// Query tokens per block of the pairwise sums.
const BLOCK: usize = 32;
/// Tokens per block of the moments' two passes ([`TangentField::evaluate_by_blocks`]).
const BLOCK_TOKENS: usize = 256;
/// From this many blocks the two passes run on the thread pool.
const PARALLEL_BLOCKS: usize = 8;
/// Below this many pair terms the pairwise sums run on the calling thread.
const SEQUENTIAL_WORK: usize = 1 << 16;

/// A linear map of the directions, rows x d, row-major; `None` data is the identity.
#[derive(Debug, Clone)]
struct Map {
    rows: usize,
    data: Option<Vec<f64>>,
}

impl Map {
    fn of(m: &DMatrix<f64>, scale: f64) -> Self {
        let mut data = Vec::with_capacity(m.len());
        for r in 0..m.nrows() {
            data.extend((0..m.ncols()).map(|c| m[(r, c)] * scale));
        }
        Map {
            rows: m.nrows(),
            data: Some(data),
        }
    }

    fn identity(d: usize) -> Self {
        Map {
            rows: d,
            data: None,
        }
    }

    /// out (n x rows) = the map applied to each row of `input` (n x cols).
    fn apply(&self, input: &[f64], cols: usize, out: &mut Vec<f64>) {
        let n = input.len() / cols;
        out.clear();
        match &self.data {
            None => out.extend_from_slice(input),
            Some(w) => {
                out.resize(n * self.rows, 0.0);
                let rows = self.rows;
                by_width(
                    cols,
                    #[inline(always)]
                    |cols| {
                        for (o, x) in out.chunks_exact_mut(rows).zip(input.chunks_exact(cols)) {
                            for (oa, row) in o.iter_mut().zip(w.chunks_exact(cols)) {
                                *oa = dot(row, x);
                            }
                        }
                    },
                );
            }
        }
    }
}

/// One head as maps (see the module's formula), with its position terms.
#[derive(Debug, Clone)]
struct HeadMaps {
    query: Map,
    key: Map,
    value: Map,
    output: Option<Map>,
    /// RoPE: the index of the table of this head's width in [`TangentField::rope`].
    rope: Option<usize>,
    /// ALiBi: the slope m of the bias -m |k - j| of this head's scores.
    slope: Option<f64>,
}

/// The derivative of one layer's field (see the module's formula).
pub struct TangentField {
    kernel: Kernel,
    causal: bool,
    normalization: Normalization,
    ngpt_alpha: f64,
    heads: Vec<HeadMaps>,
    /// RoPE's rotations, one table per head width (empty without RoPE).
    rope: Vec<RopeTable>,
    n: usize,
    d: usize,
    /// The arrays of one evaluation, kept between evaluations: a tangent flow evaluates the
    /// field thousands of times, and arrays of n d numbers allocated afresh each time cost more
    /// than the arithmetic for the O(n) kernels (page faults and zeroing of new memory).
    workspace: Mutex<Workspace>,
}

/// The arrays of one evaluation (see [`TangentField::workspace`]).
#[derive(Default)]
struct Workspace {
    /// The directions z (n x d), their inverse norms and their variations dz (one per vector).
    z: Vec<f64>,
    inverse_norms: Vec<f64>,
    dz: Vec<Vec<f64>>,
    /// One head's queries, keys and values.
    head: HeadData,
    /// One head's sums a and da before its output map.
    a: Vec<f64>,
    da: Vec<Vec<f64>>,
}

/// Which of a head's maps [`TangentField::head_data`] applies: the moments need the keys and
/// values, their forms the queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeadPart {
    All,
    Queries,
    KeysAndValues,
}

/// A block's index, its rows of F and its rows of each DF v.
type BlockRows<'a> = (usize, &'a mut [f64], Vec<&'a mut [f64]>);

/// One block's arrays (see [`TangentField::evaluate_by_blocks`]): an evaluation's arrays for
/// the block's tokens, with its rows of the vectors and of DF v.
#[derive(Default)]
struct Block {
    /// The block's rows of each tangent vector, one after the other.
    v: Vec<f64>,
    /// The block's DF v, one vector after the other.
    dv: Vec<f64>,
    arrays: Workspace,
}

impl Block {
    /// The directions of block `b` of the state `y` and of the vectors `v`.
    fn directions(&mut self, field: &TangentField, (y, v): (&[f64], &[f64]), b: usize) {
        let rows = BLOCK_TOKENS * field.d;
        let range = b * rows..((b + 1) * rows).min(y.len());
        self.v.clear();
        for vi in v.chunks_exact(y.len().max(1)) {
            self.v.extend_from_slice(&vi[range.clone()]);
        }
        let w = &mut self.arrays;
        field.directions(
            (&y[range], &self.v),
            &mut w.z,
            &mut w.inverse_norms,
            &mut w.dz,
        );
    }
}

/// One head's queries, keys and values of the state and of each tangent vector.
#[derive(Default)]
struct HeadData {
    q: Vec<f64>,
    key: Vec<f64>,
    val: Vec<f64>,
    dq: Vec<Vec<f64>>,
    dkey: Vec<Vec<f64>>,
    dval: Vec<Vec<f64>>,
    m: usize,
    p: usize,
    /// ALiBi's slope: the scores s_kj - m |k - j|.
    slope: Option<f64>,
}

impl TangentField {
    /// The derivative of the field of `attention` for `n` tokens.
    pub fn new(attention: &Attention, n: usize) -> Self {
        // As the forward field: with positions every head is factored.
        let positioned;
        let attention = if attention.position.is_none() {
            attention
        } else {
            positioned = attention.all_factored();
            &positioned
        };
        let d = attention.d();
        let beta = attention.beta;
        let mut heads: Vec<HeadMaps> = attention
            .heads
            .iter()
            .map(|h| HeadMaps {
                query: Map::of(&h.a.transpose(), beta),
                key: Map::identity(d),
                value: Map::of(&h.v, 1.0),
                output: None,
                rope: None,
                slope: None,
            })
            .collect();
        heads.extend(attention.factored.iter().map(|f| {
            let scale = beta / (f.d_h() as f64).sqrt();
            HeadMaps {
                query: Map::of(&f.q.transpose(), scale),
                key: Map::of(&f.k.transpose(), 1.0),
                value: Map::of(&f.v.transpose(), 1.0),
                output: Some(Map::of(&f.o.transpose(), 1.0)),
                rope: None,
                slope: None,
            }
        }));
        let mut rope: Vec<RopeTable> = Vec::new();
        match &attention.position {
            Position::None => {}
            Position::Rope { base } => {
                for head in &mut heads {
                    let width = head.query.rows;
                    let index = match rope.iter().position(|t| t.d_h() == width) {
                        Some(i) => i,
                        None => {
                            rope.push(RopeTable::new(n, width, *base));
                            rope.len() - 1
                        }
                    };
                    head.rope = Some(index);
                }
            }
            Position::Alibi { slopes } => {
                for (head, m) in heads.iter_mut().zip(slopes) {
                    head.slope = Some(*m);
                }
            }
        }
        TangentField {
            kernel: attention.kernel,
            causal: attention.mask == Mask::Causal,
            normalization: attention.normalization,
            ngpt_alpha: attention.ngpt_alpha,
            heads,
            rope,
            n,
            d,
            workspace: Mutex::new(Workspace::default()),
        }
    }

    /// Whether the state is on the spheres (post-LN, nGPT) rather than a free stream.
    fn on_sphere(&self) -> bool {
        self.normalization.on_sphere()
    }

    /// The directions z (with their inverse norms) and their variations dz of the vectors `v`
    /// (k of them, n x d each), into `z`, `inverse_norms` and `dz`.
    fn directions(
        &self,
        (y, v): (&[f64], &[f64]),
        z: &mut Vec<f64>,
        inverse_norms: &mut Vec<f64>,
        dz: &mut Vec<Vec<f64>>,
    ) {
        z.clear();
        z.extend_from_slice(y);
        inverse_norms.clear();
        dz.resize_with(v.len() / y.len().max(1), Vec::new);
        by_width(
            self.d,
            #[inline(always)]
            |d| {
                for row in z.chunks_exact_mut(d) {
                    let inv = 1.0 / dot(row, row).sqrt();
                    row.iter_mut().for_each(|a| *a *= inv);
                    inverse_norms.push(inv);
                }
                for (out, vi) in dz.iter_mut().zip(v.chunks_exact(y.len())) {
                    out.clear();
                    out.extend_from_slice(vi);
                    for ((o, zk), inv) in out
                        .chunks_exact_mut(d)
                        .zip(z.chunks_exact(d))
                        .zip(inverse_norms.iter())
                    {
                        let radial = dot(o, zk);
                        o.iter_mut()
                            .zip(zk)
                            .for_each(|(a, b)| *a = (*a - radial * b) * inv);
                    }
                }
            },
        );
    }

    /// One head's queries, keys and values of z and of each dz, into `data`.
    fn head_data(
        &self,
        head: &HeadMaps,
        (z, dz): (&[f64], &[Vec<f64>]),
        data: &mut HeadData,
        part: HeadPart,
    ) {
        let d = self.d;
        let apply = |map: &Map, x: &mut Vec<f64>, dx: &mut Vec<Vec<f64>>| {
            map.apply(z, d, x);
            dx.resize_with(dz.len(), Vec::new);
            for (out, v) in dx.iter_mut().zip(dz) {
                map.apply(v, d, out);
            }
        };
        let table = head.rope.map(|i| &self.rope[i]);
        // R(p_k omega) is fixed per token: q_k -> R_k q_k and dq_k -> R_k dq_k, keys alike.
        let rotate = |x: &mut Vec<f64>, dx: &mut Vec<Vec<f64>>| {
            if let Some(table) = table {
                table.rotate(x);
                dx.iter_mut().for_each(|v| table.rotate(v));
            }
        };
        if part != HeadPart::KeysAndValues {
            apply(&head.query, &mut data.q, &mut data.dq);
            rotate(&mut data.q, &mut data.dq);
        }
        if part != HeadPart::Queries {
            apply(&head.key, &mut data.key, &mut data.dkey);
            rotate(&mut data.key, &mut data.dkey);
            apply(&head.value, &mut data.val, &mut data.dval);
        }
        data.m = head.query.rows;
        data.p = head.value.rows;
        data.slope = head.slope;
    }

    /// a (n x p) and da (one n x p per vector) of one head before its output map, into `a`
    /// and `da`.
    fn head_sums(&self, h: &HeadData, a: &mut Vec<f64>, da: &mut Vec<Vec<f64>>) {
        if self.kernel == Kernel::Lsa && !self.causal && h.slope.is_none() {
            self.linear_sums(h, a, da);
            return;
        }
        let (n, p, kv) = (self.n, h.p, h.dq.len());
        let cols = HeadColumns::of((&h.key, &h.dkey), (&h.val, &h.dval), n);
        let width = p * (1 + kv);
        let mut per_token = vec![0.0; n * width];
        let block = |(b, out): (usize, &mut [f64])| {
            let mut scratch = TokenScratch::default();
            for (i, o) in out.chunks_exact_mut(width).enumerate() {
                let k = b * BLOCK + i;
                let query = Query {
                    q: &h.q,
                    dq: &h.dq,
                    m: h.m,
                    k,
                    count: if self.causal { k + 1 } else { n },
                    slope: h.slope,
                };
                token_sums(self.kernel, &cols, &query, &mut scratch, o);
            }
        };
        if n * n * (h.m + p) * (1 + kv) < SEQUENTIAL_WORK {
            per_token
                .chunks_mut(BLOCK * width)
                .enumerate()
                .for_each(block);
        } else {
            per_token
                .par_chunks_mut(BLOCK * width)
                .enumerate()
                .for_each(block);
        }
        split_rows(&per_token, (n, p, kv), a, da);
    }

    /// The `lsa` sums without a mask through the moments M and dM (O(n m p)).
    fn linear_sums(&self, h: &HeadData, a: &mut Vec<f64>, da: &mut Vec<Vec<f64>>) {
        let mut moments = Vec::new();
        moments_into(h, 1.0 / self.n as f64, &mut moments);
        moment_forms(h, &moments, a, da);
    }

    /// Whether the moments serve every head and no head rotates its tokens: then the field goes
    /// by blocks of tokens ([`Self::evaluate_by_blocks`]).
    fn by_blocks(&self) -> bool {
        self.kernel == Kernel::Lsa
            && !self.causal
            && self
                .heads
                .iter()
                .all(|h| h.slope.is_none() && h.rope.is_none())
    }

    /// F(y) and DF(y) v through each head's moments, in two passes over blocks of [`BLOCK_TOKENS`]
    /// tokens: the first sums the moments of each block (added in block order), the second forms
    /// each block's field and derivatives. A block's arrays stay in cache where arrays of n d
    /// numbers did not; the blocks are fixed, so the result does not depend on the threads.
    fn evaluate_by_blocks(&self, y: &[f64], v: &[f64], dy: &mut [f64], dv: &mut [f64]) {
        let (n, d) = (self.n, self.d);
        let blocks = n.div_ceil(BLOCK_TOKENS);
        let block_moments = |blk: &mut Block, b: usize| {
            blk.directions(self, (y, v), b);
            let mut out = Vec::new();
            for head in &self.heads {
                let w = &mut blk.arrays;
                self.head_data(head, (&w.z, &w.dz), &mut w.head, HeadPart::KeysAndValues);
                moments_into(&w.head, 1.0 / n as f64, &mut out);
            }
            out
        };
        let partials: Vec<Vec<f64>> = if blocks < PARALLEL_BLOCKS {
            let mut blk = Block::default();
            (0..blocks).map(|b| block_moments(&mut blk, b)).collect()
        } else {
            (0..blocks)
                .into_par_iter()
                .map_init(Block::default, block_moments)
                .collect()
        };
        let mut partials = partials.into_iter();
        let mut moments = partials.next().unwrap_or_default();
        for partial in partials {
            moments.iter_mut().zip(&partial).for_each(|(a, b)| *a += b);
        }
        let rows = BLOCK_TOKENS * d;
        let mut dv_blocks: Vec<_> = dv
            .chunks_mut(y.len().max(1))
            .map(|vi| vi.chunks_mut(rows))
            .collect();
        let jobs: Vec<BlockRows<'_>> = dy
            .chunks_mut(rows)
            .enumerate()
            .map(|(b, dyb)| {
                (
                    b,
                    dyb,
                    dv_blocks.iter_mut().flat_map(|it| it.next()).collect(),
                )
            })
            .collect();
        let form = |blk: &mut Block, (b, dyb, dvb): BlockRows<'_>| {
            blk.directions(self, (y, v), b);
            self.block_forms(blk, &moments, dyb, dvb);
        };
        if blocks < PARALLEL_BLOCKS {
            let mut blk = Block::default();
            jobs.into_iter().for_each(|job| form(&mut blk, job));
        } else {
            jobs.into_par_iter().for_each_init(Block::default, form);
        }
    }

    /// One block's F and DF v (its directions in `blk`) from every head's moments.
    fn block_forms(&self, blk: &mut Block, moments: &[f64], dy: &mut [f64], dv: Vec<&mut [f64]>) {
        let (d, len) = (self.d, dy.len());
        dy.fill(0.0);
        zeroed(&mut blk.dv, dv.len() * len);
        let w = &mut blk.arrays;
        let mut offset = 0;
        for head in &self.heads {
            self.head_data(head, (&w.z, &w.dz), &mut w.head, HeadPart::Queries);
            let h = &w.head;
            let size = h.p * h.m * (1 + h.dq.len());
            moment_forms(h, &moments[offset..offset + size], &mut w.a, &mut w.da);
            offset += size;
            add_output(head.output.as_ref(), &w.a, h.p, d, dy);
            for (dvi, dai) in blk.dv.chunks_exact_mut(len).zip(&w.da) {
                add_output(head.output.as_ref(), dai, h.p, d, dvi);
            }
        }
        let zdz = (w.z.as_slice(), w.dz.as_slice());
        normalise(
            (self.normalization, self.ngpt_alpha),
            zdz,
            dy,
            &mut blk.dv,
            d,
        );
        for (out, src) in dv.into_iter().zip(blk.dv.chunks_exact(len)) {
            out.copy_from_slice(src);
        }
    }

    /// F(y) and DF(y) v (the module's formula).
    fn evaluate(&self, y: &[f64], v: &[f64], dy: &mut [f64], dv: &mut [f64]) {
        if self.by_blocks() {
            self.evaluate_by_blocks(y, v, dy, dv);
            return;
        }
        // A second caller at the same time (none in the tangent flow) works in arrays of its own.
        let mut own = Workspace::default();
        let mut guard = self.workspace.try_lock().ok();
        let ws = guard.as_deref_mut().unwrap_or(&mut own);
        let d = self.d;
        let Workspace {
            z,
            inverse_norms,
            dz,
            head: data,
            a,
            da,
        } = ws;
        self.directions((y, v), z, inverse_norms, dz);
        dy.fill(0.0);
        dv.fill(0.0);
        for head in &self.heads {
            self.head_data(head, (z, dz), data, HeadPart::All);
            self.head_sums(data, a, da);
            add_output(head.output.as_ref(), a, data.p, d, dy);
            for (dvi, dai) in dv.chunks_exact_mut(y.len()).zip(da.iter()) {
                add_output(head.output.as_ref(), dai, data.p, d, dvi);
            }
        }
        normalise((self.normalization, self.ngpt_alpha), (z, dz), dy, dv, d);
    }
}

impl Linearization for TangentField {
    fn tangent_dimension(&self) -> usize {
        if self.on_sphere() {
            self.n * (self.d - 1)
        } else {
            self.n * self.d
        }
    }

    fn field_and_derivatives(&self, y: &[f64], v: &[f64], dy: &mut [f64], dv: &mut [f64]) {
        self.evaluate(y, v, dy, dv);
    }

    /// Post-LN and nGPT: v_k <- v_k - <z_k, v_k> z_k (the tangent space of each sphere); pre-
    /// and peri-LN: the stream moves in all of R^{n d}, nothing to project.
    fn project_tangents(&self, y: &[f64], v: &mut [f64]) {
        if !self.on_sphere() || y.is_empty() {
            return;
        }
        let d = self.d;
        for vi in v.chunks_exact_mut(y.len()) {
            for (vk, xk) in vi.chunks_exact_mut(d).zip(y.chunks_exact(d)) {
                let c = dot(xk, vk) / dot(xk, xk);
                vk.iter_mut().zip(xk).for_each(|(a, b)| *a -= c * b);
            }
        }
    }
}

/// Appends one head's moments [M, dM_1, ..., dM_kv] (p x m each) over the tokens of `h`, with
/// the factor `inv` = 1/n: M = inv sum_j u_j kappa_j^T, dM_i = inv sum_j (du_ij kappa_j^T +
/// u_j dkappa_ij^T) (the first sum over the tokens, then the second).
fn moments_into(h: &HeadData, inv: f64, out: &mut Vec<f64>) {
    let (m, p) = (h.m, h.p);
    let start = out.len();
    out.resize(start + p * m * (1 + h.dval.len()), 0.0);
    let (big_m, dms) = out[start..].split_at_mut(p * m);
    by_widths(
        m,
        p,
        #[inline(always)]
        |m, p| {
            let moment = |u: &[f64], kappa: &[f64], acc: &mut [f64]| {
                for (uj, kj) in u.chunks_exact(p).zip(kappa.chunks_exact(m)) {
                    for (row, ua) in acc.chunks_exact_mut(m).zip(uj) {
                        axpy(ua * inv, kj, row);
                    }
                }
            };
            moment(&h.val, &h.key, big_m);
            for (i, dm) in dms.chunks_exact_mut(p * m).enumerate() {
                moment(&h.dval[i], &h.key, dm);
                moment(&h.val, &h.dkey[i], dm);
            }
        },
    );
}

/// a_k = M q_k and da_ik = M dq_ik + dM_i q_k for the tokens of `h`, from one head's moments
/// [M, dM_1, ..., dM_kv] (see [`moments_into`]), into `a` and `da`.
fn moment_forms(h: &HeadData, moments: &[f64], a: &mut Vec<f64>, da: &mut Vec<Vec<f64>>) {
    let (m, p) = (h.m, h.p);
    let tokens = h.q.len() / m.max(1);
    let (big_m, dms) = moments.split_at(p * m);
    zeroed(a, tokens * p);
    da.resize_with(h.dq.len(), Vec::new);
    by_widths(
        m,
        p,
        #[inline(always)]
        |m, p| {
            let apply = |mat: &[f64], x: &[f64], out: &mut [f64]| {
                for (o, row) in out.iter_mut().zip(mat.chunks_exact(m)) {
                    *o += dot(row, x);
                }
            };
            for (ak, qk) in a.chunks_exact_mut(p).zip(h.q.chunks_exact(m)) {
                apply(big_m, qk, ak);
            }
            for ((dai, dm), dq) in da.iter_mut().zip(dms.chunks_exact(p * m)).zip(&h.dq) {
                zeroed(dai, tokens * p);
                for ((out, dqk), qk) in dai
                    .chunks_exact_mut(p)
                    .zip(dq.chunks_exact(m))
                    .zip(h.q.chunks_exact(m))
                {
                    apply(big_m, dqk, out);
                    apply(dm, qk, out);
                }
            }
        },
    );
}

/// Splits per-token rows [a_k, da_k(1), ..., da_k(kv)] into a and the da of each vector.
fn split_rows(
    rows: &[f64],
    (n, p, kv): (usize, usize, usize),
    a: &mut Vec<f64>,
    da: &mut Vec<Vec<f64>>,
) {
    let width = p * (1 + kv);
    a.clear();
    a.reserve(n * p);
    da.resize_with(kv, Vec::new);
    da.iter_mut().for_each(|dai| {
        dai.clear();
        dai.reserve(n * p);
    });
    for row in rows.chunks_exact(width) {
        a.extend_from_slice(&row[..p]);
        for (i, dai) in da.iter_mut().enumerate() {
            dai.extend_from_slice(&row[p * (1 + i)..p * (2 + i)]);
        }
    }
}

/// `f(width)`, with the width a constant for 2 and 3 (the common d of the flows with many
/// tokens): the small loops inside then unroll.
#[inline(always)]
fn by_width<R>(width: usize, mut f: impl FnMut(usize) -> R) -> R {
    match width {
        2 => f(2),
        3 => f(3),
        _ => f(width),
    }
}

/// `f(m, p)`, with the widths constants when both are 2 or both 3 (see [`by_width`]).
#[inline(always)]
fn by_widths<R>(m: usize, p: usize, mut f: impl FnMut(usize, usize) -> R) -> R {
    if m == p {
        by_width(
            m,
            #[inline(always)]
            |w| f(w, w),
        )
    } else {
        f(m, p)
    }
}

/// `v` as `len` zeros, in its own memory when it has the room.
fn zeroed(v: &mut Vec<f64>, len: usize) {
    v.clear();
    v.resize(len, 0.0);
}

/// out (n x d) += W_o a_k for each token (a: n x p; no map: p = d).
fn add_output(output: Option<&Map>, a: &[f64], p: usize, d: usize, out: &mut [f64]) {
    match output.and_then(|o| o.data.as_ref()) {
        None => out.iter_mut().zip(a).for_each(|(o, x)| *o += x),
        Some(w) => {
            for (o, ak) in out.chunks_exact_mut(d).zip(a.chunks_exact(p)) {
                for (oc, row) in o.iter_mut().zip(w.chunks_exact(p)) {
                    *oc += dot(row, ak);
                }
            }
        }
    }
}

fn axpy(c: f64, x: &[f64], y: &mut [f64]) {
    y.iter_mut().zip(x).for_each(|(a, b)| *a += c * b);
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
