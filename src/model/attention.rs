//! Attention weights: the kernel h, the inverse temperature beta and one or more heads (A, V).
//!
//! A = Q^T K (query/key) and V (value) are d x d. Several heads add their fields.

use nalgebra::DMatrix;

use super::Kernel;

/// One attention head: the query-key matrix A = Q^T K and the value matrix V.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    /// Query-key matrix A (d x d).
    pub a: DMatrix<f64>,
    /// Value matrix V (d x d).
    pub v: DMatrix<f64>,
}

/// The self-attention layer that drives the tokens: kernel, beta and heads, all of dimension d.
///
/// ```
/// use nalgebra::DMatrix;
/// use tokdyn::model::{Attention, Head, Kernel};
/// let head = Head { a: DMatrix::identity(2, 2), v: DMatrix::identity(2, 2) };
/// let attention = Attention::new(Kernel::Lsa, 1.0, vec![head]);
/// assert_eq!(attention.d(), 2);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Attention {
    /// The kernel h.
    pub kernel: Kernel,
    /// Inverse temperature beta.
    pub beta: f64,
    /// The heads; their fields add.
    pub heads: Vec<Head>,
}

impl Attention {
    /// Collects kernel, beta and heads; every matrix must be d x d for one d (checked by the
    /// scenario loader, asserted here in debug builds).
    pub fn new(kernel: Kernel, beta: f64, heads: Vec<Head>) -> Self {
        debug_assert!(!heads.is_empty());
        debug_assert!(heads.iter().all(|h| h.a.is_square()
            && h.v.is_square()
            && h.a.nrows() == heads[0].a.nrows()
            && h.v.nrows() == heads[0].a.nrows()));
        Attention {
            kernel,
            beta,
            heads,
        }
    }

    /// The dimension d of the token space.
    pub fn d(&self) -> usize {
        self.heads.first().map_or(0, |h| h.a.nrows())
    }
}
