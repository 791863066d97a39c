//! The pairwise sums of the `usa` and `sa` fields for d >= 8, one tile of pairs at a time.
//!
//! ```text
//! Z   = X_c^T Q_b                      z_jk = <q_k, x_j>, j in key tile c, k in query tile b
//! W   = exp(Z - 1 m_b^T)               m = 0 (usa); running column maxima (sa)
//! F_b += U_c W,   t_b += W^T 1         U = V X, F_b the d x |b| sums of query tile b
//! usa: f_k = F_k / n                   sa: f_k = F_k / t_k
//! ```
//!
//! A tile of weights (|c| x |b|, [`Tiles`]) is made by one matrix product, exponentiated while it
//! sits in cache and consumed by a second product, so no n x n (or n x m) matrix is ever written
//! out. X^T and U are packed once per evaluation into the micro-kernel's panels
//! ([`super::gemm::pack_panels`]) and every tile reads its block of them in place; Q_b and W
//! are read unpacked, so no product packs or allocates anything. For `sa` the shift is the running maximum of each query's scores: when a tile raises it
//! from m to m', the sums so far are multiplied by exp(m - m') first (the online softmax), so the
//! exponentials stay at most 1 whatever the scores.
//!
//! When A = A^T the scores are symmetric, z_jk = z_kj, and [`symmetric_tiles`] makes only the
//! tiles c >= b (half of the score product, half of the exponentials): each such tile W feeds
//! F_b += U_c W and, for c > b, F_c += U_b W^T. The weights are unshifted (the caller allows
//! `sa` only while |z| <= max_k |q_k| keeps exp finite).
//!
//! Causal mask (token k attends to j <= k): a query tile b stops at the last key tile that holds
//! a key j <= max b, the scores above the diagonal are set to -inf before the exponential (a
//! zero weight; the first key tile always holds j = 0, so every running maximum is finite
//! from the first tile on), and `usa` divides by k (counted from 1) instead of n.
//!
//! Factored heads use the same tiles with keys and queries of another width than the values
//! (`Pairs::key_d`, `Pairs::value_d`).
//!
//! Thread-count independence: the query tiles are cut into [`QUERY_GROUPS`] fixed groups (the
//! symmetric kernel's tile rows into [`GROUPS`]); each group runs its tiles in a fixed order on
//! one thread (the symmetric kernel into its own n x d accumulator), and the groups'
//! accumulators are added in group order. The products run
//! single-threaded inside a group, so the bytes do not depend on the number of threads.

use rayon::prelude::*;

use super::exp::{exp_in_place, exp_shifted_sum};
use super::gemm::{pack_panels, panel_product, panels_len, MatMut, MatRef, Panels, PANEL};
use crate::simd::{add_in_lanes, LANES};

/// Groups of tile rows of the symmetric kernel run in parallel, each into its own sums (fixed,
/// so results never depend on the threads).
pub const GROUPS: usize = 4;

/// At most this many groups of query tiles of the general kernel run in parallel (each query
/// tile's sums are its own, so the grouping changes no result). Many small groups let 2-4
/// threads finish together: n = 2000 makes 34 groups of one tile (8 groups of 5 tiles left one
/// thread idle for most of a group at the end).
pub const QUERY_GROUPS: usize = 64;

/// Tile sizes: key tokens (rows of a weight tile, a multiple of 8) and query tokens (columns).
#[derive(Clone, Copy, Debug)]
pub struct Tiles {
    /// Keys per tile.
    pub keys: usize,
    /// Queries per tile.
    pub queries: usize,
}

/// The tile sizes of the field (chosen by measurement, see benches/README.md).
pub const TILES: Tiles = Tiles {
    keys: 128,
    queries: 60,
};

/// Square tiles of the symmetric kernel (one size for both sides of the score matrix; a
/// multiple of 8).
pub const SYMMETRIC_TILE: usize = 120;

/// Numbers of scratch [`general_tiles`] needs for n tokens in d dimensions.
pub fn general_scratch_len(n: usize, d: usize, tiles: Tiles) -> usize {
    general_scratch_len_of(n, d, d, tiles)
}

/// Numbers of scratch [`general_tiles`] needs for n tokens with keys of `key_d` and values of
/// `value_d` numbers.
pub fn general_scratch_len_of(n: usize, key_d: usize, value_d: usize, tiles: Tiles) -> usize {
    packed_len(n, key_d, value_d)
        + n.div_ceil(tiles_per_group(n, tiles) * tiles.queries) * group_len(tiles)
}

/// Query tiles per group of the general kernel (at most [`QUERY_GROUPS`] groups).
fn tiles_per_group(n: usize, tiles: Tiles) -> usize {
    n.div_ceil(tiles.queries).div_ceil(QUERY_GROUPS).max(1)
}

/// Numbers of scratch [`symmetric_tiles`] needs for n tokens in d dimensions.
pub fn symmetric_scratch_len(n: usize, d: usize, tile: usize) -> usize {
    packed_len(n, d, d) + GROUPS * (tile * tile + (d + 1) * n)
}

/// The keys X^T (n x key_d) and the values U (value_d x n), packed for the micro-kernel.
fn packed_len(n: usize, key_d: usize, value_d: usize) -> usize {
    panels_len(n, key_d) + panels_len(value_d, n)
}

/// One group's weight tile, running maxima and totals.
fn group_len(tiles: Tiles) -> usize {
    tiles.keys * tiles.queries + 2 * tiles.queries
}

/// The inputs of the tiled kernels for n tokens, each array row-major: keys and queries of
/// `key_d` numbers, values of `value_d`.
#[derive(Clone, Copy)]
pub struct Pairs<'a> {
    /// The keys: the unit tokens x_j (formed heads) or K^T x_j (factored heads), n x key_d.
    pub keys: &'a [f64],
    /// The queries q_k = beta A^T x_k (or beta Q^T x_k / sqrt(d_h)), n x key_d.
    pub query: &'a [f64],
    /// The values u_j = V x_j (or V^T x_j), n x value_d.
    pub value: &'a [f64],
    /// Width of keys and queries.
    pub key_d: usize,
    /// Width of the values (and of the sums written).
    pub value_d: usize,
}

impl Pairs<'_> {
    fn n(&self) -> usize {
        self.keys.len() / self.key_d
    }

    /// Q_b for the query tokens `from..to` (key_d x |b|).
    fn queries(&self, from: usize, to: usize) -> MatRef<'_> {
        let e = self.key_d;
        MatRef::columns(&self.query[from * e..to * e], e, to - from)
    }
}

/// X^T and U packed once per evaluation (read by every tile, never packed again).
#[derive(Clone, Copy)]
struct Packed<'a> {
    /// X^T, n x d: a key tile's X_c^T is rows c.
    keys: Panels<'a>,
    /// U, d x n: a key tile's U_c is depth c.
    values: Panels<'a>,
}

/// Packs X^T and U into the front of `scratch`; returns them and the rest of `scratch`.
fn pack<'s>(pairs: Pairs<'_>, scratch: &'s mut [f64]) -> (Packed<'s>, &'s mut [f64]) {
    let (n, e, d) = (pairs.n(), pairs.key_d, pairs.value_d);
    let (keys, rest) = scratch.split_at_mut(panels_len(n, e));
    let (values, rest) = rest.split_at_mut(panels_len(d, n));
    rayon::join(
        || pack_panels(MatRef::rows(pairs.keys, n, e), keys),
        || pack_panels(MatRef::columns(pairs.value, d, n), values),
    );
    let packed = Packed {
        keys: Panels::new(keys, n, e),
        values: Panels::new(values, d, n),
    };
    (packed, rest)
}

/// Writes f_k (n x d row-major) for any A: the `usa` sums / n, or the `sa` weighted means.
///
/// `scratch` holds at least [`general_scratch_len`] numbers; `tiles.keys` is a multiple of 8.
pub fn general_tiles(
    pairs: Pairs<'_>,
    f: &mut [f64],
    softmax: bool,
    tiles: Tiles,
    scratch: &mut [f64],
) {
    general_tiles_masked(pairs, f, softmax, false, tiles, scratch)
}

/// [`general_tiles`], under the causal mask when `causal` (f_k then sums over j <= k only, and
/// `usa` divides by k counted from 1); f is n x value_d.
///
/// `scratch` holds at least [`general_scratch_len_of`] numbers.
pub fn general_tiles_masked(
    pairs: Pairs<'_>,
    f: &mut [f64],
    softmax: bool,
    causal: bool,
    tiles: Tiles,
    scratch: &mut [f64],
) {
    assert!(tiles.keys.is_multiple_of(PANEL) && tiles.keys > 0 && tiles.queries > 0);
    let (n, d) = (pairs.n(), pairs.value_d);
    let (packed, scratch) = pack(pairs, scratch);
    let per_group = tiles_per_group(n, tiles) * tiles.queries;
    let kind = TileKind { softmax, causal };
    let group = |(g, (fg, s)): (usize, (&mut [f64], &mut [f64]))| {
        for (i, fb) in fg.chunks_mut(tiles.queries * d).enumerate() {
            let from = g * per_group + i * tiles.queries;
            query_tile(pairs, packed, from, fb, kind, tiles, s);
        }
    };
    f.par_chunks_mut(per_group * d)
        .zip(scratch.par_chunks_mut(group_len(tiles)))
        .enumerate()
        .with_max_len(1)
        .for_each(group);
}

/// What a tile computes: softmax or not, masked or not.
#[derive(Clone, Copy)]
struct TileKind {
    softmax: bool,
    causal: bool,
}

/// The sums of the query tokens from..from + |b| over every key tile (under the causal mask,
/// the key tiles up to the last query), scaled (see the module).
fn query_tile(
    pairs: Pairs<'_>,
    packed: Packed<'_>,
    from: usize,
    fb: &mut [f64],
    kind: TileKind,
    tiles: Tiles,
    s: &mut [f64],
) {
    let TileKind { softmax, causal } = kind;
    let (n, e, d) = (pairs.n(), pairs.key_d, pairs.value_d);
    let mb = fb.len() / d;
    let (w, rest) = s.split_at_mut(tiles.keys * tiles.queries);
    let (maxima, totals) = rest.split_at_mut(tiles.queries);
    let (maxima, totals) = (&mut maxima[..mb], &mut totals[..mb]);
    maxima.fill(if softmax { f64::NEG_INFINITY } else { 0.0 });
    totals.fill(0.0);
    fb.fill(0.0);
    let queries = pairs.queries(from, from + mb);
    let last_key = if causal { from + mb } else { n };
    for c0 in (0..last_key).step_by(tiles.keys) {
        let c1 = (c0 + tiles.keys).min(n);
        let nc = c1 - c0;
        let w = &mut w[..nc * mb];
        let keys = packed.keys.block(c0..c1, 0..e);
        panel_product(keys, queries, false, MatMut::columns(w, nc, mb));
        if causal && c1 > from + 1 {
            mask_above_diagonal(w, nc, c0, from);
        }
        if softmax {
            softmax_step(w, nc, maxima, totals, fb, d);
        } else {
            exp_in_place(w);
        }
        let values = packed.values.block(0..d, c0..c1);
        let weights = MatRef::columns(w, nc, mb);
        panel_product(values, weights, true, MatMut::columns(fb, d, mb));
    }
    if softmax {
        scale_columns(fb, d, Some(&*totals), n);
    } else if causal {
        scale_causal(fb, d, from);
    } else {
        scale_columns(fb, d, None, n);
    }
}

/// Scores z_jk of keys j > k set to -inf (weight 0): column k of the tile (query from + k)
/// keeps rows j = c0 + r <= from + k.
fn mask_above_diagonal(w: &mut [f64], rows: usize, c0: usize, from: usize) {
    for (k, column) in w.chunks_exact_mut(rows).enumerate() {
        let keep = (from + k + 1).saturating_sub(c0).min(rows);
        column[keep..].fill(f64::NEG_INFINITY);
    }
}

/// f_k = F_k / k for the queries from + 1, from + 2, ... (the causal average, k from 1).
fn scale_causal(fb: &mut [f64], d: usize, from: usize) {
    for (k, column) in fb.chunks_exact_mut(d).enumerate() {
        let scale = 1.0 / (from + k + 1) as f64;
        column.iter_mut().for_each(|v| *v *= scale);
    }
}

/// Online softmax step: raises each column's running maximum to cover this tile (rescaling the
/// sums and totals so far by exp(old - new)), then replaces the column by exp(z - maximum) and
/// adds it to the column's total, in one pass.
fn softmax_step(
    w: &mut [f64],
    rows: usize,
    maxima: &mut [f64],
    totals: &mut [f64],
    fb: &mut [f64],
    d: usize,
) {
    for (k, column) in w.chunks_exact_mut(rows).enumerate() {
        let top = lane_max(column);
        if top > maxima[k] {
            let mut factor = [maxima[k] - top];
            exp_in_place(&mut factor);
            totals[k] *= factor[0];
            fb[k * d..(k + 1) * d]
                .iter_mut()
                .for_each(|v| *v *= factor[0]);
            maxima[k] = top;
        }
        totals[k] += exp_shifted_sum(column, maxima[k]);
    }
}

/// The largest of `values` (NaN ignored; -inf when there is none), in lanes that vectorise.
fn lane_max(values: &[f64]) -> f64 {
    let mut acc = [f64::NEG_INFINITY; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, v) in acc.iter_mut().zip(chunk) {
            *a = if *v > *a { *v } else { *a };
        }
    }
    for (a, v) in acc.iter_mut().zip(chunks.remainder()) {
        *a = if *v > *a { *v } else { *a };
    }
    acc.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// f_k = F_k / n (`totals` None) or F_k / t_k.
fn scale_columns(fb: &mut [f64], d: usize, totals: Option<&[f64]>, n: usize) {
    let inv_n = 1.0 / n as f64;
    for (k, column) in fb.chunks_exact_mut(d).enumerate() {
        let scale = totals.map_or(inv_n, |t| 1.0 / t[k]);
        column.iter_mut().for_each(|v| *v *= scale);
    }
}

/// The sum of `values` in a fixed order (LANES partial sums, then added in lane order).
fn lane_sum(values: &[f64]) -> f64 {
    let mut acc = [0.0; LANES];
    add_in_lanes(&mut acc, values);
    acc.iter().sum()
}

/// Writes f_k (n x d row-major) for a symmetric A: the `usa` sums / n, or (`softmax`) the
/// weighted means with unshifted weights. One exponential per pair (see the module).
///
/// `scratch` holds at least [`symmetric_scratch_len`] numbers; `tile` is a multiple of 8.
pub fn symmetric_tiles(
    pairs: Pairs<'_>,
    f: &mut [f64],
    softmax: bool,
    tile: usize,
    scratch: &mut [f64],
) {
    assert!(tile.is_multiple_of(PANEL) && tile > 0);
    assert_eq!(pairs.key_d, pairs.value_d);
    let (n, d) = (pairs.n(), pairs.value_d);
    let count = n.div_ceil(tile);
    let scratch = &mut scratch[..symmetric_scratch_len(n, d, tile)];
    let (packed, scratch) = pack(pairs, scratch);
    let (weights, sums) = scratch.split_at_mut(GROUPS * tile * tile);
    let group = |(g, (w, acc)): (usize, (&mut [f64], &mut [f64]))| {
        acc.fill(0.0);
        let (acc, totals) = acc.split_at_mut(n * d);
        // Tile rows b dealt to the groups back and forth (0 1 2 3 3 2 1 0 ...): row b holds
        // count - b tiles, so each group gets a share of long and short rows.
        for b in (0..count).filter(|&b| snake(b) == g) {
            symmetric_row(pairs, packed, b, tile, w, acc, totals);
        }
    };
    weights
        .par_chunks_mut(tile * tile)
        .zip(sums.par_chunks_mut((d + 1) * n))
        .enumerate()
        .with_max_len(1)
        .for_each(group);
    // f = the groups' sums added in group order, then scaled.
    let (first, rest) = sums.split_at_mut((d + 1) * n);
    for other in rest.chunks_exact((d + 1) * n) {
        first.iter_mut().zip(other).for_each(|(a, b)| *a += b);
    }
    f.copy_from_slice(&first[..n * d]);
    scale_columns(f, d, if softmax { Some(&first[n * d..]) } else { None }, n);
}

/// The group that runs tile row b.
fn snake(b: usize) -> usize {
    let (round, place) = (b / GROUPS, b % GROUPS);
    if round % 2 == 0 {
        place
    } else {
        GROUPS - 1 - place
    }
}

/// The tiles c >= b of tile row b: F_b += U_c W, and for c > b F_c += U_b W^T (and the totals).
fn symmetric_row(
    pairs: Pairs<'_>,
    packed: Packed<'_>,
    b: usize,
    tile: usize,
    w: &mut [f64],
    acc: &mut [f64],
    totals: &mut [f64],
) {
    let (n, d) = (pairs.n(), pairs.value_d);
    let (b0, b1) = (b * tile, ((b + 1) * tile).min(n));
    let mb = b1 - b0;
    let queries = pairs.queries(b0, b1);
    for c0 in (b0..n).step_by(tile) {
        let c1 = (c0 + tile).min(n);
        let nc = c1 - c0;
        let w = &mut w[..nc * mb];
        let keys = packed.keys.block(c0..c1, 0..d);
        panel_product(keys, queries, false, MatMut::columns(w, nc, mb));
        exp_in_place(w);
        let values = packed.values.block(0..d, c0..c1);
        let fb = MatMut::columns(&mut acc[b0 * d..b1 * d], d, mb);
        panel_product(values, MatRef::columns(w, nc, mb), true, fb);
        for (column, total) in w.chunks_exact(nc).zip(&mut totals[b0..b1]) {
            *total += lane_sum(column);
        }
        if c0 == b0 {
            continue;
        }
        // W^T (mb x nc): entry (k, j) = w[j + k nc].
        let transposed = MatRef {
            data: w,
            rows: mb,
            cols: nc,
            row_stride: nc,
            column_stride: 1,
        };
        let values = packed.values.block(0..d, b0..b1);
        let fc = MatMut::columns(&mut acc[c0 * d..c1 * d], d, nc);
        panel_product(values, transposed, true, fc);
        let row_totals = &mut totals[c0..c1];
        for column in w.chunks_exact(nc) {
            row_totals.iter_mut().zip(column).for_each(|(t, v)| *t += v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator in [-1, 1).
    fn numbers(len: usize, seed: u64) -> Vec<f64> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    /// n unit tokens, queries beta A^T x_k and values V x_j (A symmetric when asked).
    fn pairs_data(n: usize, d: usize, beta: f64, symmetric: bool) -> [Vec<f64>; 3] {
        let mut unit = numbers(n * d, 1 + n as u64);
        for row in unit.chunks_exact_mut(d) {
            let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
            row.iter_mut().for_each(|v| *v /= r);
        }
        let mut a = numbers(d * d, 2);
        if symmetric {
            for i in 0..d {
                for j in 0..i {
                    a[i * d + j] = a[j * d + i];
                }
            }
        }
        let v = numbers(d * d, 3);
        let apply = |m: &[f64], transpose: bool, scale: f64| -> Vec<f64> {
            unit.chunks_exact(d)
                .flat_map(|x| {
                    (0..d).map(move |r| {
                        let entry = |c: usize| {
                            if transpose {
                                m[c * d + r]
                            } else {
                                m[r * d + c]
                            }
                        };
                        scale * (0..d).map(|c| entry(c) * x[c]).sum::<f64>()
                    })
                })
                .collect()
        };
        let query = apply(&a, true, beta);
        let value = apply(&v, false, 1.0);
        [unit, query, value]
    }

    /// f_k written out pair by pair (sa with the exact maximum as shift).
    fn pair_by_pair(data: &[Vec<f64>; 3], d: usize, softmax: bool) -> Vec<f64> {
        let [unit, query, value] = data;
        let n = unit.len() / d;
        let mut f = vec![0.0; n * d];
        for k in 0..n {
            let z: Vec<f64> = (0..n)
                .map(|j| (0..d).map(|c| query[k * d + c] * unit[j * d + c]).sum())
                .collect();
            let shift = if softmax {
                z.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            } else {
                0.0
            };
            let w: Vec<f64> = z.iter().map(|z| (z - shift).exp()).collect();
            let scale = if softmax {
                1.0 / w.iter().sum::<f64>()
            } else {
                1.0 / n as f64
            };
            for c in 0..d {
                f[k * d + c] = scale * (0..n).map(|j| w[j] * value[j * d + c]).sum::<f64>();
            }
        }
        f
    }

    fn run_in_pool<R: Send>(threads: usize, job: impl FnOnce() -> R + Send) -> R {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(job)
    }

    fn assert_close(got: &[f64], expected: &[f64], what: &str) {
        let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (g, e) in got.iter().zip(expected) {
            assert!((g - e).abs() <= 1e-12 * scale, "{what}: {g} vs {e}");
        }
    }

    /// Runs `kernel` on the pairs of `data` on one thread and on three: checks the first
    /// against [`pair_by_pair`] and the second against the first, byte for byte.
    fn check_kernel(
        data: &[Vec<f64>; 3],
        d: usize,
        softmax: bool,
        what: &str,
        mut kernel: impl FnMut(Pairs<'_>, &mut [f64]) + Send,
    ) {
        let pairs = Pairs {
            keys: &data[0],
            query: &data[1],
            value: &data[2],
            key_d: d,
            value_d: d,
        };
        let n = data[0].len() / d;
        let mut f = vec![f64::NAN; n * d];
        run_in_pool(1, || kernel(pairs, &mut f));
        assert_close(&f, &pair_by_pair(data, d, softmax), what);
        let mut other = vec![0.0; n * d];
        run_in_pool(3, || kernel(pairs, &mut other));
        assert_eq!(f, other, "{what}: thread count changed the bytes");
    }

    #[test]
    fn general_tiles_match_the_pairs_whatever_the_last_tile_holds() {
        let d = 9;
        let tiles = Tiles {
            keys: 16,
            queries: 8,
        };
        // The last query tile holds 1..5 tokens (n mod 8), the last key tile 1..5 or more.
        for n in [8 * 4 + 1, 8 * 5 + 2, 8 * 6 + 3, 8 * 3 + 4, 8 * 7 + 5, 3] {
            for (softmax, beta) in [(false, 1.3), (true, 1.3), (true, 60.0)] {
                let data = pairs_data(n, d, beta, false);
                let mut scratch = vec![f64::NAN; general_scratch_len(n, d, tiles)];
                let what = format!("n {n} softmax {softmax} beta {beta}");
                check_kernel(&data, d, softmax, &what, |pairs, f| {
                    general_tiles(pairs, f, softmax, tiles, &mut scratch)
                });
            }
        }
    }

    #[test]
    fn symmetric_tiles_match_the_pairs_whatever_the_last_tile_holds() {
        let d = 10;
        let tile = 8;
        for n in [8 * 4 + 1, 8 * 5 + 2, 8 * 6 + 3, 8 * 3 + 4, 8 * 9 + 5, 5] {
            for softmax in [false, true] {
                let data = pairs_data(n, d, 1.7, true);
                let mut scratch = vec![f64::NAN; symmetric_scratch_len(n, d, tile)];
                let what = format!("n {n} softmax {softmax}");
                check_kernel(&data, d, softmax, &what, |pairs, f| {
                    symmetric_tiles(pairs, f, softmax, tile, &mut scratch)
                });
            }
        }
    }

    #[test]
    fn every_tile_row_goes_to_one_group_and_the_groups_share_the_work() {
        let count = 33;
        let mut work = [0usize; GROUPS];
        for b in 0..count {
            work[snake(b)] += count - b;
        }
        let (least, most) = (work.iter().min().unwrap(), work.iter().max().unwrap());
        assert!(most - least <= count, "{work:?}");
    }
}
