//! The full particle system on the sphere.
//!
//! Tokens x_1..x_n on S^{d-1} move by
//!
//! ```text
//! x_k' = P_k ( sum_heads (1/n) sum_j h(beta <x_k, A x_j>) V x_j ),   P_k y = y - <x_k, y> x_k
//! ```
//!
//! with h(y) = y (linear self-attention, [`Kernel::Lsa`]), h(y) = exp(y) (unnormalised softmax,
//! [`Kernel::Usa`]), or the normalised softmax weights exp(beta <x_k, A x_j>) / sum_l exp(beta
//! <x_k, A x_l>) without the 1/n ([`Kernel::Sa`]). [`attention`] holds the weights,
//! [`field`] evaluates the vector field, `pairwise` and `exp` are its inner loops for the
//! exponential kernels, and [`spectral`] (with `bessel`) evaluates `usa` and `sa` in d = 2
//! in O(n M) work, [`harmonics`] in d = 3 in O(n L^2) ([`kernel_method`] chooses).

pub mod attention;
pub(crate) mod bessel;
pub(crate) mod ddouble;
pub mod energy;
// Its docs link the crate-private `tiles` (for `--document-private-items`).
pub(crate) mod exp;
pub(crate) mod factored;
#[allow(rustdoc::private_intra_doc_links)]
pub mod field;
pub(crate) mod gemm;
pub mod harmonics;
pub mod kernel_method;
pub(crate) mod linear_sums;
pub(crate) mod pairwise;
pub mod position;
pub mod spectral;
pub(crate) mod symmetric;
pub mod tangent;
pub(crate) mod tangent_columns;
pub(crate) mod tangent_norm;
// The tiled kernels are public only to the `gemm` benchmark (cargo feature `bench-internals`).
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod tiles;
#[cfg(not(feature = "bench-internals"))]
pub(crate) mod tiles;

pub use attention::{Attention, FactoredHead, Head, Mask, Normalization};
pub use field::SphereField;
pub use kernel_method::{KernelChoice, KernelMethod};
pub use position::Position;

/// The attention kernel h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Linear self-attention, h(y) = y (`lsa`).
    Lsa,
    /// Unnormalised softmax, h(y) = exp(y) (`usa`).
    Usa,
    /// Softmax normalised over the tokens j, without the 1/n (`sa`).
    Sa,
}

/// Numbers of scratch the factored heads of width d_h need for n tokens.
pub fn factored_scratch_numbers(n: usize, d_h: usize, kernel: Kernel) -> usize {
    factored::FactoredField::scratch_numbers(n, d_h, kernel)
}
