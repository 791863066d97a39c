//! The field of heads kept factored: scores from d_h-dimensional queries and keys, values
//! through V then O, no d x d matrix formed (docs/MATH.md §9).
//!
//! For one head with factors Q, K, V (d x d_h) and O (d_h x d), row-vector convention,
//!
//! ```text
//! q_k = (beta / sqrt(d_h)) Q^T x_k,   kappa_j = K^T x_j,   w_j = V^T x_j      (d_h numbers each)
//! F_k = sum_j weight_kj w_j            (the usa / sa / lsa sums of the tiled or linear kernels)
//! f_k += O^T F_k                       (d numbers)
//! ```
//!
//! with weight_kj = h(<q_k, kappa_j>) and the kernel's normalisation (1/n, 1/k under the causal
//! mask, or the softmax total), which is the formed head's field since
//! <x_k, A x_j> = <Q^T x_k, K^T x_j> / sqrt(d_h) and (V O)^T x_j = O^T w_j. Per head and
//! evaluation: 3 n d d_h for the projections, n^2 d_h (twice) for the pairs, n d d_h for O.
//! The projections run in fixed blocks of tokens and the pairs in the tiled kernel's fixed
//! groups (`tiles`), so the bytes do not depend on the threads.
//!
//! Positions (docs/MATH.md §16, `position`): RoPE rotates q_k and kappa_k by R(p_k omega) after
//! the projections; ALiBi sums the biased scores token by token instead of the tiles.

use std::sync::Mutex;

use nalgebra::DMatrix;
use rayon::prelude::*;

use super::gemm::{pack_panels, panel_product, panels_len, MatMut, MatRef, Panels, MICRO_COLUMNS};
use super::linear_sums::linear_sums;
use super::position::{alibi_sums, BiasedPairs, Position, RopeTable};
use super::tiles::{general_scratch_len_of, general_tiles_masked, Pairs, TILES};
use super::{FactoredHead, Kernel};

/// Tokens per block of the projections (a multiple of the micro-kernel's width; fixed).
const BLOCK_TOKENS: usize = 40 * MICRO_COLUMNS;

/// One head's maps packed for [`panel_product`].
struct PackedHead {
    d_h: usize,
    /// (beta / sqrt(d_h)) Q^T, K^T, V^T (d_h x d each).
    maps: [Vec<f64>; 3],
    /// O^T (d x d_h).
    output: Vec<f64>,
}

/// Buffers reused from one evaluation to the next.
struct Scratch {
    query: Vec<f64>,
    keys: Vec<f64>,
    values: Vec<f64>,
    sums: Vec<f64>,
    /// The tiled kernel's scratch (or the linear kernel's d_h x d_h sums).
    weights: Vec<f64>,
}

/// The factored heads of one layer, ready to add their field.
pub struct FactoredField {
    kernel: Kernel,
    causal: bool,
    n: usize,
    d: usize,
    heads: Vec<PackedHead>,
    /// RoPE's rotations, one table per head width (empty without RoPE).
    rope: Vec<RopeTable>,
    /// ALiBi's slope of each head (`None` without ALiBi).
    slopes: Option<Vec<f64>>,
    scratch: Mutex<Scratch>,
}

/// A rows x depth matrix packed, each entry times `scale`.
fn packed(m: MatRef<'_>, scale: f64) -> Vec<f64> {
    let mut out = vec![0.0; panels_len(m.rows, m.cols)];
    pack_panels(m, &mut out);
    out.iter_mut().for_each(|v| *v *= scale);
    out
}

/// M^T of a column-major DMatrix, as a row-major view (cols x rows).
fn transposed(m: &DMatrix<f64>) -> MatRef<'_> {
    MatRef::rows(m.as_slice(), m.ncols(), m.nrows())
}

impl FactoredField {
    /// Packs the heads' maps for `n` tokens (all scratch allocated once). RoPE needs every
    /// head's d_h even and ALiBi one slope per head (checked by the scenario loader).
    pub fn new(
        kernel: Kernel,
        (beta, causal): (f64, bool),
        heads: &[FactoredHead],
        position: &Position,
        n: usize,
    ) -> Self {
        let d = heads.first().map_or(0, |h| h.q.nrows());
        let heads: Vec<PackedHead> = heads
            .iter()
            .map(|h| {
                let d_h = h.d_h();
                let scale = beta / (d_h as f64).sqrt();
                PackedHead {
                    d_h,
                    maps: [
                        packed(transposed(&h.q), scale),
                        packed(transposed(&h.k), 1.0),
                        packed(transposed(&h.v), 1.0),
                    ],
                    output: packed(transposed(&h.o), 1.0),
                }
            })
            .collect();
        let widest = heads.iter().map(|h| h.d_h).max().unwrap_or(0);
        let mut rope: Vec<RopeTable> = Vec::new();
        if let Position::Rope { base } = position {
            for h in &heads {
                if rope.iter().all(|t| t.d_h() != h.d_h) {
                    rope.push(RopeTable::new(n, h.d_h, *base));
                }
            }
        }
        let slopes = match position {
            Position::Alibi { slopes } => {
                debug_assert_eq!(slopes.len(), heads.len());
                Some(slopes.clone())
            }
            _ => None,
        };
        let weights = match kernel {
            Kernel::Lsa => widest * widest,
            _ => general_scratch_len_of(n, widest, widest, TILES),
        };
        let scratch = Scratch {
            query: vec![0.0; n * widest],
            keys: vec![0.0; n * widest],
            values: vec![0.0; n * widest],
            sums: vec![0.0; n * widest],
            weights: vec![0.0; weights],
        };
        FactoredField {
            kernel,
            causal,
            n,
            d,
            heads,
            rope,
            slopes,
            scratch: Mutex::new(scratch),
        }
    }

    /// Numbers of scratch for `heads` factored heads of width d_h: four n x d_h arrays and the
    /// tiled kernel's buffers.
    pub fn scratch_numbers(n: usize, d_h: usize, kernel: Kernel) -> usize {
        let weights = match kernel {
            Kernel::Lsa => d_h * d_h,
            _ => general_scratch_len_of(n, d_h, d_h, TILES),
        };
        n.saturating_mul(4 * d_h).saturating_add(weights)
    }

    /// f += sum over the heads of O^T F for the unit tokens `unit` (n x d row-major).
    pub fn add_field(&self, unit: &[f64], f: &mut [f64]) {
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        for (h, head) in self.heads.iter().enumerate() {
            self.project(head, unit, s);
            if let Some(table) = self.rope.iter().find(|t| t.d_h() == head.d_h) {
                let len = self.n * head.d_h;
                table.rotate(&mut s.query[..len]);
                table.rotate(&mut s.keys[..len]);
            }
            match &self.slopes {
                Some(slopes) => self.biased_sums(head, slopes[h], s),
                None => self.head_sums(head, s),
            }
            self.add_output(head, s, f);
        }
    }

    /// q, kappa and w of every token: the three maps times the tokens, block by block.
    fn project(&self, head: &PackedHead, unit: &[f64], s: &mut Scratch) {
        let (d, e) = (self.d, head.d_h);
        let len = self.n * e;
        let maps = [&head.maps[0], &head.maps[1], &head.maps[2]].map(|m| Panels::new(m, e, d));
        s.query[..len]
            .par_chunks_mut(BLOCK_TOKENS * e)
            .zip(s.keys[..len].par_chunks_mut(BLOCK_TOKENS * e))
            .zip(s.values[..len].par_chunks_mut(BLOCK_TOKENS * e))
            .zip(unit.par_chunks(BLOCK_TOKENS * d))
            .for_each(|(((q, k), w), x)| {
                let m = x.len() / d;
                let x = MatRef::columns(x, d, m);
                for (map, out) in maps.iter().zip([q, k, w]) {
                    panel_product(*map, x, false, MatMut::columns(out, e, m));
                }
            });
    }

    /// F_k of one head (n x d_h) into `s.sums`.
    fn head_sums(&self, head: &PackedHead, s: &mut Scratch) {
        let e = head.d_h;
        let len = self.n * e;
        let (query, keys, values) = (&s.query[..len], &s.keys[..len], &s.values[..len]);
        let sums = &mut s.sums[..len];
        match self.kernel {
            Kernel::Lsa => linear_sums(
                query,
                keys,
                values,
                (e, e),
                self.causal,
                &mut s.weights,
                sums,
            ),
            Kernel::Usa | Kernel::Sa => {
                let pairs = Pairs {
                    keys,
                    query,
                    value: values,
                    key_d: e,
                    value_d: e,
                };
                let softmax = self.kernel == Kernel::Sa;
                general_tiles_masked(pairs, sums, softmax, self.causal, TILES, &mut s.weights);
            }
        }
    }

    /// F_k of one head under ALiBi with slope `slope` into `s.sums`.
    fn biased_sums(&self, head: &PackedHead, slope: f64, s: &mut Scratch) {
        let e = head.d_h;
        let len = self.n * e;
        let pairs = BiasedPairs {
            query: &s.query[..len],
            keys: &s.keys[..len],
            values: &s.values[..len],
            key_d: e,
            value_d: e,
        };
        alibi_sums(pairs, self.kernel, self.causal, slope, &mut s.sums[..len]);
    }

    /// f_k += O^T F_k, block by block.
    fn add_output(&self, head: &PackedHead, s: &Scratch, f: &mut [f64]) {
        let (d, e) = (self.d, head.d_h);
        let output = Panels::new(&head.output, d, e);
        f.par_chunks_mut(BLOCK_TOKENS * d)
            .zip(s.sums[..self.n * e].par_chunks(BLOCK_TOKENS * e))
            .for_each(|(out, sums)| {
                let m = sums.len() / e;
                let sums = MatRef::columns(sums, e, m);
                panel_product(output, sums, true, MatMut::columns(out, d, m));
            });
    }
}
