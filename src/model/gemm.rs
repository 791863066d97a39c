//! Dense matrix products C = alpha A B + beta C on slices with explicit strides.
//!
//! The field's products read the tokens in place: the row-major n x d token array is the d x n
//! matrix X with strides (1, d) and its transpose X^T with strides (d, 1). These go straight to
//! a blocked kernel for every shape: the `gemm` crate's (faer's kernels, run single-threaded
//! with `Parallelism::None`: the callers split the work into fixed parts themselves), which
//! measured 5-20% faster than `matrixmultiply`'s on the field's tiles (benches/README.md);
//! [`gemm_with`] keeps both. (nalgebra's own product is avoided: it falls back to a
//! column-by-column loop when a dimension is at most 5, and that loop mishandles views whose
//! rows are not contiguous, dimforge/nalgebra#1616: it read and wrote past the buffer when the
//! last block held 1..5 query tokens.) Every call checks that each matrix lies inside its slice
//! before handing the pointers over.
//!
//! The field's hot products use [`panel_product`] instead: the left operand packed once by the
//! caller ([`pack_panels`], panels of 8 rows) and the `gemm` crate's 8 x 6 AVX2/FMA micro-kernel
//! called block by block, with no packing or allocation per call (the crate's own driver
//! allocates its packing buffers on every call and repacks operands the field reuses).

/// A matrix inside a slice: entry (i, j) at `data[i * row_stride + j * column_stride]`; the
/// slice `S` is `&[f64]` ([`MatRef`]) or `&mut [f64]` ([`MatMut`]).
#[derive(Clone, Copy)]
pub struct Mat<S> {
    /// The entries.
    pub data: S,
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Distance in the slice between two rows.
    pub row_stride: usize,
    /// Distance in the slice between two columns.
    pub column_stride: usize,
}

/// A matrix read in place.
pub type MatRef<'a> = Mat<&'a [f64]>;

/// A matrix written in place.
pub type MatMut<'a> = Mat<&'a mut [f64]>;

impl<S: AsRef<[f64]>> Mat<S> {
    /// Column-major rows x cols (column j contiguous).
    pub fn columns(data: S, rows: usize, cols: usize) -> Self {
        Mat {
            data,
            rows,
            cols,
            row_stride: 1,
            column_stride: rows,
        }
    }

    /// Row-major rows x cols (row i contiguous).
    pub fn rows(data: S, rows: usize, cols: usize) -> Self {
        Mat {
            data,
            rows,
            cols,
            row_stride: cols,
            column_stride: 1,
        }
    }

    /// Whether every entry lies inside the slice.
    fn fits(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1) * self.row_stride + (self.cols - 1) * self.column_stride
                < self.data.as_ref().len()
    }
}

/// The matrix kernel behind [`gemm()`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `matrixmultiply::dgemm` (the slower here; kept so the tests hold the two kernels equal).
    #[cfg_attr(not(test), allow(dead_code))]
    MatrixMultiply,
    /// The `gemm` crate (faer's kernels), single-threaded (`Parallelism::None`).
    Gemm,
}

/// The kernel [`gemm()`] uses (the faster on the field's shapes, see benches/README.md).
pub const BACKEND: Backend = Backend::Gemm;

/// C = alpha A B + beta C (beta = 0: C is not read), with [`BACKEND`].
///
/// # Panics
/// When the shapes do not match or a matrix reaches outside its slice (a bug in the caller).
pub fn gemm(alpha: f64, a: MatRef<'_>, b: MatRef<'_>, beta: f64, c: MatMut<'_>) {
    gemm_with(BACKEND, alpha, a, b, beta, c)
}

/// C = A B, with [`BACKEND`] ([`gemm()`] with alpha = 1, beta = 0).
///
/// # Panics
/// As [`gemm()`].
pub fn product(a: MatRef<'_>, b: MatRef<'_>, c: MatMut<'_>) {
    gemm(1.0, a, b, 0.0, c)
}

/// [`gemm()`] with the given kernel (the same numbers up to rounding: the order of the sums differs).
///
/// # Panics
/// As [`gemm()`].
pub fn gemm_with(
    backend: Backend,
    alpha: f64,
    a: MatRef<'_>,
    b: MatRef<'_>,
    beta: f64,
    c: MatMut<'_>,
) {
    assert!(
        a.cols == b.rows && c.rows == a.rows && c.cols == b.cols,
        "gemm: shapes"
    );
    assert!(a.fits() && b.fits() && c.fits(), "gemm: outside a slice");
    if c.rows == 0 || c.cols == 0 {
        return;
    }
    if a.cols == 0 {
        // An empty sum: C = beta C.
        for j in 0..c.cols {
            for i in 0..c.rows {
                let v = &mut c.data[i * c.row_stride + j * c.column_stride];
                *v = if beta == 0.0 { 0.0 } else { beta * *v };
            }
        }
        return;
    }
    if backend == Backend::Gemm {
        // SAFETY: as below. The crate computes dst = alpha dst + beta lhs rhs, reading dst only
        // when asked; with Parallelism::None it runs on the calling thread.
        unsafe {
            gemm::gemm(
                c.rows,
                c.cols,
                a.cols,
                c.data.as_mut_ptr(),
                c.column_stride as isize,
                c.row_stride as isize,
                beta != 0.0,
                a.data.as_ptr(),
                a.column_stride as isize,
                a.row_stride as isize,
                b.data.as_ptr(),
                b.column_stride as isize,
                b.row_stride as isize,
                beta,
                alpha,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
        return;
    }
    // SAFETY: the asserts above keep every index of every matrix inside its slice, and `c`
    // is borrowed mutably, so it does not alias `a` or `b`.
    unsafe {
        matrixmultiply::dgemm(
            a.rows,
            a.cols,
            b.cols,
            alpha,
            a.data.as_ptr(),
            a.row_stride as isize,
            a.column_stride as isize,
            b.data.as_ptr(),
            b.row_stride as isize,
            b.column_stride as isize,
            beta,
            c.data.as_mut_ptr(),
            c.row_stride as isize,
            c.column_stride as isize,
        );
    }
}

/// Rows of a packed panel (the micro-kernel's MR: two 4-wide vectors).
pub const PANEL: usize = 8;

/// Columns of the right-hand side one micro-kernel call consumes (its NR).
pub const MICRO_COLUMNS: usize = 6;

/// Numbers [`pack_panels`] writes for a rows x depth matrix.
pub fn panels_len(rows: usize, depth: usize) -> usize {
    rows.div_ceil(PANEL) * PANEL * depth
}

/// Packs the rows x depth matrix `a` into panels of [`PANEL`] rows, the layout the
/// micro-kernel reads: entry (i PANEL + r, p) goes to `out[(i depth + p) PANEL + r]`, and the
/// rows past the last are zero. `out` holds at least [`panels_len`] numbers.
///
/// # Panics
/// When `a` reaches outside its slice or `out` is too short (a bug in the caller).
pub fn pack_panels(a: MatRef<'_>, out: &mut [f64]) {
    assert!(a.fits());
    let depth = a.cols;
    if depth == 0 {
        return;
    }
    let out = &mut out[..panels_len(a.rows, depth)];
    for (i, panel) in out.chunks_exact_mut(PANEL * depth).enumerate() {
        let rows = (i * PANEL..((i + 1) * PANEL).min(a.rows)).len();
        for (p, column) in panel.chunks_exact_mut(PANEL).enumerate() {
            for (r, v) in column.iter_mut().enumerate() {
                *v = if r < rows {
                    a.data[(i * PANEL + r) * a.row_stride + p * a.column_stride]
                } else {
                    0.0
                };
            }
        }
    }
}

/// A block of a matrix packed by [`pack_panels`]: rows `from..from + rows` (`from` a multiple
/// of [`PANEL`]) and depth `at..at + depth` of the whole packed matrix.
#[derive(Clone, Copy)]
pub struct Panels<'a> {
    data: &'a [f64],
    rows: usize,
    depth: usize,
    /// Numbers from one panel to the next (PANEL x the whole depth).
    panel_stride: usize,
}

impl<'a> Panels<'a> {
    /// The whole rows x depth matrix packed in `data`.
    pub fn new(data: &'a [f64], rows: usize, depth: usize) -> Self {
        Panels {
            data: &data[..panels_len(rows, depth)],
            rows,
            depth,
            panel_stride: PANEL * depth,
        }
    }

    /// Rows `rows` (the start a multiple of [`PANEL`]) and depth `depth` of this block.
    ///
    /// # Panics
    /// When the ranges leave the block or the rows start inside a panel.
    pub fn block(&self, rows: std::ops::Range<usize>, depth: std::ops::Range<usize>) -> Self {
        assert!(
            rows.start.is_multiple_of(PANEL) && rows.end <= self.rows && depth.end <= self.depth
        );
        let start = rows.start / PANEL * self.panel_stride + depth.start * PANEL;
        Panels {
            data: &self.data[start.min(self.data.len())..],
            rows: rows.len(),
            depth: depth.len(),
            panel_stride: self.panel_stride,
        }
    }

    /// Whether every number the micro-kernel reads lies inside the slice.
    fn fits(&self) -> bool {
        self.rows == 0
            || self.depth == 0
            || (self.rows - 1) / PANEL * self.panel_stride + self.depth * PANEL <= self.data.len()
    }
}

/// C = A B (`accumulate` false: C is not read) or C += A B, with A packed ([`Panels`]) and B,
/// C in place with any strides; no allocation. The `gemm` crate's AVX2/FMA micro-kernel
/// (8 x 6) where the CPU has it, else a portable one; each C entry is one sum over the depth in
/// order, so the result does not depend on how the caller splits the columns.
///
/// # Panics
/// When the shapes do not match or a matrix reaches outside its slice (a bug in the caller).
pub fn panel_product(a: Panels<'_>, b: MatRef<'_>, accumulate: bool, c: MatMut<'_>) {
    assert!(
        a.depth == b.rows && c.rows == a.rows && c.cols == b.cols,
        "panel_product: shapes"
    );
    assert!(
        a.fits() && b.fits() && c.fits(),
        "panel_product: outside a slice"
    );
    if c.rows == 0 || c.cols == 0 {
        return;
    }
    if a.depth == 0 {
        if !accumulate {
            for j in 0..c.cols {
                for i in 0..c.rows {
                    c.data[i * c.row_stride + j * c.column_stride] = 0.0;
                }
            }
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; the asserts above keep every entry the kernel
        // reads or writes inside its slice (it reads whole panels of PANEL rows, which `fits`
        // counts), and `c` is borrowed mutably, so it does not alias `a` or `b`.
        unsafe { fma_product(a, b, accumulate, c) };
        return;
    }
    portable_product(a, b, accumulate, c)
}

/// [`panel_product`] with the `gemm` crate's micro-kernels.
///
/// # Safety
/// The CPU has AVX2 and FMA, and the matrices passed [`panel_product`]'s checks.
#[cfg(target_arch = "x86_64")]
unsafe fn fma_product(a: Panels<'_>, b: MatRef<'_>, accumulate: bool, c: MatMut<'_>) {
    use gemm_f64::microkernel::fma::f64::UKR;
    let (rows, cols) = (c.rows, c.cols);
    let (alpha, status) = if accumulate { (1.0, 1) } else { (0.0, 0) };
    for j in (0..cols).step_by(MICRO_COLUMNS) {
        let nj = MICRO_COLUMNS.min(cols - j);
        for i in 0..rows.div_ceil(PANEL) {
            let mi = PANEL.min(rows - i * PANEL);
            let kernel = UKR[mi.div_ceil(4) - 1][nj - 1];
            kernel(
                mi,
                nj,
                a.depth,
                c.data
                    .as_mut_ptr()
                    .add(i * PANEL * c.row_stride + j * c.column_stride),
                a.data.as_ptr().add(i * a.panel_stride),
                b.data.as_ptr().add(j * b.column_stride),
                c.column_stride as isize,
                c.row_stride as isize,
                PANEL as isize,
                b.row_stride as isize,
                b.column_stride as isize,
                alpha,
                1.0,
                status,
                false,
                false,
                false,
                std::ptr::null(),
            );
        }
    }
}

/// [`panel_product`] in plain code (the same blocks, sums over the depth in order).
fn portable_product(a: Panels<'_>, b: MatRef<'_>, accumulate: bool, c: MatMut<'_>) {
    for j in (0..c.cols).step_by(MICRO_COLUMNS) {
        let nj = MICRO_COLUMNS.min(c.cols - j);
        for i in 0..c.rows.div_ceil(PANEL) {
            let mi = PANEL.min(c.rows - i * PANEL);
            let panel = &a.data[i * a.panel_stride..];
            let mut acc = [[0.0; PANEL]; MICRO_COLUMNS];
            for p in 0..a.depth {
                let column = &panel[p * PANEL..(p + 1) * PANEL];
                for (l, sums) in acc.iter_mut().enumerate().take(nj) {
                    let v = b.data[p * b.row_stride + (j + l) * b.column_stride];
                    sums.iter_mut().zip(column).for_each(|(s, x)| *s += x * v);
                }
            }
            for (l, sums) in acc.iter().enumerate().take(nj) {
                for (r, s) in sums.iter().enumerate().take(mi) {
                    let v = &mut c.data[(i * PANEL + r) * c.row_stride + (j + l) * c.column_stride];
                    *v = if accumulate { *v + s } else { *s };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_major_times_identity_written_column_major() {
        // A = [[1, 2], [3, 4]] (row-major), B = I: C = A, written column-major.
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [1.0, 0.0, 0.0, 1.0];
        let mut c = [0.0; 4];
        gemm(
            1.0,
            MatRef::rows(&a, 2, 2),
            MatRef::columns(&b, 2, 2),
            0.0,
            MatMut::columns(&mut c, 2, 2),
        );
        assert_eq!(c, [1.0, 3.0, 2.0, 4.0]);
    }

    #[test]
    fn every_shape_and_layout_matches_the_triple_loop() {
        for (m, k, n) in [
            (1, 1, 1),
            (3, 7, 2),
            (9, 100, 1),
            (6, 6, 6),
            (17, 5, 33),
            (100, 37, 5),
        ] {
            let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.31).sin()).collect();
            let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.17).cos()).collect();
            let mut expected = vec![0.0; m * n];
            for i in 0..m {
                for j in 0..n {
                    expected[i + j * m] = (0..k).map(|l| a[i * k + l] * b[l + j * k]).sum();
                }
            }
            for backend in [Backend::MatrixMultiply, Backend::Gemm] {
                let mut c = vec![f64::NAN; m * n];
                gemm_with(
                    backend,
                    1.0,
                    MatRef::rows(&a, m, k),
                    MatRef::columns(&b, k, n),
                    0.0,
                    MatMut::columns(&mut c, m, n),
                );
                for (x, y) in c.iter().zip(&expected) {
                    assert!((x - y).abs() < 1e-12, "{backend:?} {m}x{k}x{n}: {x} vs {y}");
                }
                // C = 0.5 A B + 2 C, with B stored row-major this time (entry (l, j) at l n + j).
                let bt: Vec<f64> = (0..k * n).map(|i| b[i / n + (i % n) * k]).collect();
                let mut c2 = vec![1.0; m * n];
                gemm_with(
                    backend,
                    0.5,
                    MatRef::rows(&a, m, k),
                    MatRef {
                        data: &bt,
                        rows: k,
                        cols: n,
                        row_stride: n,
                        column_stride: 1,
                    },
                    2.0,
                    MatMut::columns(&mut c2, m, n),
                );
                for (x, y) in c2.iter().zip(&expected) {
                    assert!(
                        (x - (0.5 * y + 2.0)).abs() < 1e-12,
                        "{backend:?} {m}x{k}x{n}"
                    );
                }
            }
        }
    }

    /// C = A B pair by pair, C column-major rows x cols, A (rows x depth) row-major, B
    /// (depth x cols) with entry (p, j) at p * b_rs + j * b_cs.
    fn triple_loop(
        a: &[f64],
        b: &[f64],
        rows: usize,
        depth: usize,
        cols: usize,
        b_rs: usize,
        b_cs: usize,
    ) -> Vec<f64> {
        let mut c = vec![0.0; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                c[i + j * rows] = (0..depth)
                    .map(|p| a[i * depth + p] * b[p * b_rs + j * b_cs])
                    .sum();
            }
        }
        c
    }

    #[test]
    fn packed_panels_times_any_matrix_match_the_triple_loop() {
        // Rows and columns whose last panel / micro-tile holds 1..8 / 1..6 entries, blocks that
        // start at a later panel and a later depth, B column-major and transposed.
        let (all_rows, all_depth) = (29, 23);
        let a: Vec<f64> = (0..all_rows * all_depth)
            .map(|i| (i as f64 * 0.37).sin())
            .collect();
        let mut packed = vec![f64::NAN; panels_len(all_rows, all_depth)];
        pack_panels(MatRef::rows(&a, all_rows, all_depth), &mut packed);
        let whole = Panels::new(&packed, all_rows, all_depth);
        for (r0, r1, p0, p1, cols) in [
            (0, 29, 0, 23, 13),
            (8, 9, 3, 20, 1),
            (16, 21, 0, 1, 5),
            (0, 12, 7, 23, 6),
            (8, 29, 22, 23, 7),
            (24, 27, 5, 9, 12),
        ] {
            let (rows, depth) = (r1 - r0, p1 - p0);
            let sub: Vec<f64> = (r0..r1)
                .flat_map(|i| (p0..p1).map(move |p| (i, p)))
                .map(|(i, p)| a[i * all_depth + p])
                .collect();
            let b: Vec<f64> = (0..depth * cols).map(|i| (i as f64 * 0.11).cos()).collect();
            for (b_rs, b_cs) in [(1, depth), (cols, 1)] {
                let expected = triple_loop(&sub, &b, rows, depth, cols, b_rs, b_cs);
                let bm = MatRef {
                    data: &b,
                    rows: depth,
                    cols,
                    row_stride: b_rs,
                    column_stride: b_cs,
                };
                let block = whole.block(r0..r1, p0..p1);
                let mut c = vec![f64::NAN; rows * cols];
                panel_product(block, bm, false, MatMut::columns(&mut c, rows, cols));
                let mut portable = vec![1.0; rows * cols];
                portable_product(block, bm, true, MatMut::columns(&mut portable, rows, cols));
                for ((x, y), e) in c.iter().zip(&portable).zip(&expected) {
                    assert!((x - e).abs() < 1e-12, "{rows}x{depth}x{cols}: {x} vs {e}");
                    assert!(
                        (y - 1.0 - e).abs() < 1e-12,
                        "portable {rows}x{depth}x{cols}"
                    );
                }
                // C += A B.
                panel_product(block, bm, true, MatMut::columns(&mut c, rows, cols));
                for (x, e) in c.iter().zip(&expected) {
                    assert!((x - 2.0 * e).abs() < 1e-12, "{rows}x{depth}x{cols} +=");
                }
            }
        }
    }

    #[test]
    #[should_panic]
    fn a_block_starting_inside_a_panel_is_refused() {
        let packed = vec![0.0; panels_len(16, 3)];
        let _ = Panels::new(&packed, 16, 3).block(4..16, 0..3);
    }

    #[test]
    #[should_panic]
    fn a_matrix_outside_its_slice_is_refused() {
        let a = [1.0; 5];
        let mut c = [0.0; 4];
        gemm(
            1.0,
            MatRef::rows(&a, 2, 3),
            MatRef::columns(&a, 3, 1),
            0.0,
            MatMut::columns(&mut c, 2, 1),
        );
    }
}
