//! Attention weights: the kernel h, the inverse temperature beta, the heads, the mask and the
//! normalisation (docs/MATH.md §1 and §9).
//!
//! A head is given either formed, as the d x d matrices A (query-key) and V (value), or by its
//! factors in the checkpoints' row-vector convention, Q, K, V (d x d_h) and O (d_h x d):
//!
//! ```text
//! A = Q K^T / sqrt(d_h),   value matrix (V O)^T,   so   <x_k, A x_j> = <Q^T x_k, K^T x_j> / sqrt(d_h)
//! ```
//!
//! Several heads add their fields. The causal mask lets token k attend to the tokens j <= k
//! only; pre-LN integrates the unnormalised stream instead of the tokens on the sphere; peri-LN
//! and nGPT normalise the update (docs/MATH.md §16); positions (RoPE, ALiBi) enter the scores.

use nalgebra::DMatrix;

use super::position::Position;
use super::Kernel;

/// One attention head: the query-key matrix A = Q^T K and the value matrix V.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    /// Query-key matrix A (d x d).
    pub a: DMatrix<f64>,
    /// Value matrix V (d x d).
    pub v: DMatrix<f64>,
}

/// One head kept factored (row-vector convention): A = Q K^T / sqrt(d_h), value matrix (V O)^T.
#[derive(Debug, Clone, PartialEq)]
pub struct FactoredHead {
    /// Query map Q (d x d_h).
    pub q: DMatrix<f64>,
    /// Key map K (d x d_h).
    pub k: DMatrix<f64>,
    /// Value map V (d x d_h).
    pub v: DMatrix<f64>,
    /// Output map O (d_h x d).
    pub o: DMatrix<f64>,
}

impl FactoredHead {
    /// The head's width d_h.
    pub fn d_h(&self) -> usize {
        self.q.ncols()
    }

    /// Whether the four shapes agree: Q, K, V are d x d_h and O is d_h x d, d_h >= 1.
    pub fn shapes_agree(&self) -> bool {
        let (d, dh) = self.q.shape();
        dh >= 1
            && self.k.shape() == (d, dh)
            && self.v.shape() == (d, dh)
            && self.o.shape() == (dh, d)
    }

    /// A formed head as factors with the same scores and values: Q = sqrt(d) A, K = I, V = I,
    /// O = V^T (so Q K^T / sqrt(d) = A and (V O)^T = V).
    pub fn from_formed(head: &Head) -> Self {
        let d = head.a.nrows();
        FactoredHead {
            q: &head.a * (d as f64).sqrt(),
            k: DMatrix::identity(d, d),
            v: DMatrix::identity(d, d),
            o: head.v.transpose(),
        }
    }

    /// The same head formed as d x d matrices: A = Q K^T / sqrt(d_h), V = (V O)^T.
    pub fn formed(&self) -> Head {
        let scale = 1.0 / (self.d_h() as f64).sqrt();
        Head {
            a: (&self.q * self.k.transpose()) * scale,
            v: (&self.v * &self.o).transpose(),
        }
    }
}

/// Which tokens a token attends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Mask {
    /// Every token attends to every token (encoders; tokdyn's model so far).
    #[default]
    None,
    /// Token k attends to the tokens j <= k in the given order (decoders).
    Causal,
}

/// Where the layer norm sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Normalization {
    /// Post-LN: the tokens stay on the sphere (the projected flow).
    #[default]
    Post,
    /// Pre-LN: the stream x moves by the attention of the directions x / |x|, unprojected.
    Pre,
    /// Peri-LN: the stream moves by the attention output normalised, a_k / |a_k|.
    Peri,
    /// nGPT: the tokens on the sphere move by alpha P_k a_k / |a_k|.
    Ngpt,
}

impl Normalization {
    /// Whether the tokens stay on the unit sphere (post-LN and nGPT); pre- and peri-LN move an
    /// unnormalised stream.
    pub fn on_sphere(self) -> bool {
        matches!(self, Normalization::Post | Normalization::Ngpt)
    }
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
    /// The formed heads; their fields add.
    pub heads: Vec<Head>,
    /// The factored heads (their fields add to those of `heads`).
    pub factored: Vec<FactoredHead>,
    /// The mask.
    pub mask: Mask,
    /// The normalisation.
    pub normalization: Normalization,
    /// nGPT's update rate alpha (> 0; used by [`Normalization::Ngpt`] only).
    pub ngpt_alpha: f64,
    /// The tokens' positions in the scores.
    pub position: Position,
}

impl Attention {
    /// Collects kernel, beta and heads; every matrix must be d x d for one d (checked by the
    /// scenario loader, asserted here in debug builds). No mask, post-LN, no factored heads.
    pub fn new(kernel: Kernel, beta: f64, heads: Vec<Head>) -> Self {
        debug_assert!(heads.iter().all(|h| h.a.is_square()
            && h.v.is_square()
            && h.a.nrows() == heads[0].a.nrows()
            && h.v.nrows() == heads[0].a.nrows()));
        Attention {
            kernel,
            beta,
            heads,
            factored: Vec::new(),
            mask: Mask::None,
            normalization: Normalization::Post,
            ngpt_alpha: 1.0,
            position: Position::None,
        }
    }

    /// The same layer with positions.
    pub fn with_position(mut self, position: Position) -> Self {
        self.position = position;
        self
    }

    /// The same layer with nGPT's update rate alpha.
    pub fn with_ngpt_alpha(mut self, alpha: f64) -> Self {
        self.ngpt_alpha = alpha;
        self
    }

    /// Number of heads (formed and factored).
    pub fn head_count(&self) -> usize {
        self.heads.len() + self.factored.len()
    }

    /// Every head as factors (formed heads by [`FactoredHead::from_formed`], first): the
    /// positioned field rotates or biases the d_h-dimensional queries and keys.
    pub fn all_factored(&self) -> Attention {
        let mut out = self.clone();
        out.factored = self
            .heads
            .iter()
            .map(FactoredHead::from_formed)
            .chain(self.factored.iter().cloned())
            .collect();
        out.heads.clear();
        out
    }

    /// The same layer with factored heads added (each of the layer's d).
    pub fn with_factored(mut self, factored: Vec<FactoredHead>) -> Self {
        debug_assert!(factored.iter().all(FactoredHead::shapes_agree));
        self.factored = factored;
        self
    }

    /// The same layer under `mask`.
    pub fn with_mask(mut self, mask: Mask) -> Self {
        self.mask = mask;
        self
    }

    /// The same layer with `normalization`.
    pub fn with_normalization(mut self, normalization: Normalization) -> Self {
        self.normalization = normalization;
        self
    }

    /// The dimension d of the token space.
    pub fn d(&self) -> usize {
        match (self.heads.first(), self.factored.first()) {
            (Some(h), _) => h.a.nrows(),
            (None, Some(f)) => f.q.nrows(),
            (None, None) => 0,
        }
    }

    /// Every head as d x d matrices (the reductions and the group model read A and V).
    pub fn formed(&self) -> Attention {
        let mut formed = self.clone();
        formed
            .heads
            .extend(self.factored.iter().map(FactoredHead::formed));
        formed.factored.clear();
        formed
    }

    /// Whether the plain model holds: no mask, post-LN, no positions (the reductions, the group
    /// model and the spectral kernel need it).
    pub fn is_plain(&self) -> bool {
        self.mask == Mask::None
            && self.normalization == Normalization::Post
            && self.position.is_none()
    }
}
