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

/// A matrix inside a slice: entry (i, j) at `data[i * row_stride + j * column_stride]`.
#[derive(Clone, Copy)]
pub struct MatRef<'a> {
    pub data: &'a [f64],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub column_stride: usize,
}

/// A writable matrix inside a slice, laid out like [`MatRef`].
pub struct MatMut<'a> {
    pub data: &'a mut [f64],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub column_stride: usize,
}

impl<'a> MatRef<'a> {
    /// Column-major rows x cols (column j contiguous).
    pub fn columns(data: &'a [f64], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows,
            cols,
            row_stride: 1,
            column_stride: rows,
        }
    }

    /// Row-major rows x cols (row i contiguous).
    pub fn rows(data: &'a [f64], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
            column_stride: 1,
        }
    }
}

impl<'a> MatMut<'a> {
    /// Column-major rows x cols (column j contiguous).
    pub fn columns(data: &'a mut [f64], rows: usize, cols: usize) -> Self {
        MatMut {
            data,
            rows,
            cols,
            row_stride: 1,
            column_stride: rows,
        }
    }
}

/// Whether every entry of a rows x cols matrix with these strides lies below `len`.
fn fits(len: usize, rows: usize, cols: usize, row_stride: usize, column_stride: usize) -> bool {
    rows == 0 || cols == 0 || (rows - 1) * row_stride + (cols - 1) * column_stride < len
}

/// The matrix kernel behind [`gemm()`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `matrixmultiply::dgemm`.
    MatrixMultiply,
    /// The `gemm` crate (faer's kernels), single-threaded (`Parallelism::None`).
    Gemm,
}

/// The kernel [`gemm()`] uses (the faster on the field's shapes, see benches/README.md).
pub const BACKEND: Backend = Backend::Gemm;

/// C = alpha A B + beta C (beta = 0: C is not read), with [`BACKEND`].
///
/// ```
/// use tokdyn::model::gemm::{gemm, MatMut, MatRef};
/// // A = [[1, 2], [3, 4]] (row-major), B = I: C = A, written column-major.
/// let a = [1.0, 2.0, 3.0, 4.0];
/// let b = [1.0, 0.0, 0.0, 1.0];
/// let mut c = [0.0; 4];
/// gemm(1.0, MatRef::rows(&a, 2, 2), MatRef::columns(&b, 2, 2), 0.0, MatMut::columns(&mut c, 2, 2));
/// assert_eq!(c, [1.0, 3.0, 2.0, 4.0]);
/// ```
///
/// # Panics
/// When the shapes do not match or a matrix reaches outside its slice (a bug in the caller).
pub fn gemm(alpha: f64, a: MatRef<'_>, b: MatRef<'_>, beta: f64, c: MatMut<'_>) {
    gemm_with(BACKEND, alpha, a, b, beta, c)
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
    assert!(fits(
        a.data.len(),
        a.rows,
        a.cols,
        a.row_stride,
        a.column_stride
    ));
    assert!(fits(
        b.data.len(),
        b.rows,
        b.cols,
        b.row_stride,
        b.column_stride
    ));
    assert!(fits(
        c.data.len(),
        c.rows,
        c.cols,
        c.row_stride,
        c.column_stride
    ));
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

#[cfg(test)]
mod tests {
    use super::*;

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
