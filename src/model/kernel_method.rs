//! Which kernel evaluates the `usa` and `sa` fields (`model.kernel_method`, docs/MATH.md §1b and
//! "Softmax kernels on S^2 by spherical harmonics"): the direct pairwise sums, O(n^2); the
//! Fourier–Bessel series in d = 2 (`spectral`), O(n M); the spherical harmonics in d = 3
//! (`harmonics`), O(n L^2). `auto` takes a series only where it is exact to its bound and pays.

use super::{harmonics, spectral, Attention};

/// Which kernel evaluates the `usa` and `sa` fields (`model.kernel_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelMethod {
    /// A series where its bound holds and n is large enough to pay, direct otherwise.
    #[default]
    Auto,
    /// The pairwise sums, O(n^2).
    Direct,
    /// The Fourier–Bessel series (d = 2); an error where its bound fails.
    Spectral,
    /// The spherical-harmonics series (d = 3); an error where it does not hold or its bound
    /// fails.
    Harmonics,
}

/// The kernel a field was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelChoice {
    /// The pairwise (or, for `lsa`, moment-matrix) evaluation.
    Direct,
    /// The spectral kernel with truncation |m|, |l| <= `terms` (the largest over heads and factors).
    Spectral {
        /// The truncation M.
        terms: usize,
    },
    /// The harmonics kernel with degrees l <= `terms` (the largest over heads).
    Harmonics {
        /// The truncation degree L.
        terms: usize,
    },
}

impl KernelChoice {
    /// `"direct"`, `"spectral"` or `"harmonics"` (summary.json's `kernel_method`).
    pub fn as_str(self) -> &'static str {
        match self {
            KernelChoice::Direct => "direct",
            KernelChoice::Spectral { .. } => "spectral",
            KernelChoice::Harmonics { .. } => "harmonics",
        }
    }

    /// The truncation (M or L) of a series kernel, `None` for the direct one.
    pub fn terms(self) -> Option<usize> {
        match self {
            KernelChoice::Direct => None,
            KernelChoice::Spectral { terms } | KernelChoice::Harmonics { terms } => Some(terms),
        }
    }
}

/// Decides the kernel for n tokens at `tolerance` (the run's relative tolerance; it sets the
/// harmonics' degree and bound); `Err` (one line) when a series was asked for where it does not
/// hold or its bound fails.
pub fn choose(
    attention: &Attention,
    n: usize,
    method: KernelMethod,
    tolerance: f64,
) -> Result<KernelChoice, String> {
    match method {
        KernelMethod::Harmonics => {
            let plans = harmonics::plan(attention, n, tolerance)?;
            harmonics::check_exact(attention, &plans, n, tolerance)?;
            Ok(harmonics_choice(&plans))
        }
        KernelMethod::Auto if attention.d() == 3 => Ok(auto_harmonics(attention, n, tolerance)),
        KernelMethod::Direct => Ok(KernelChoice::Direct),
        KernelMethod::Auto | KernelMethod::Spectral => {
            let asked = method == KernelMethod::Spectral;
            Ok(match spectral::choose(attention, n, asked)? {
                Some(terms) => KernelChoice::Spectral { terms },
                None => KernelChoice::Direct,
            })
        }
    }
}

/// `auto` in d = 3: the harmonics where they hold, meet the tolerance and pay.
fn auto_harmonics(attention: &Attention, n: usize, tolerance: f64) -> KernelChoice {
    // Cheap checks first: the plans are built only for fields that may pay.
    if n < harmonics::AUTO_MIN_TOKENS {
        return KernelChoice::Direct;
    }
    match harmonics::plan(attention, n, tolerance) {
        Ok(plans)
            if harmonics::check_exact(attention, &plans, n, tolerance).is_ok()
                && harmonics::pays(&plans, n) =>
        {
            harmonics_choice(&plans)
        }
        _ => KernelChoice::Direct,
    }
}

fn harmonics_choice(plans: &[harmonics::HeadPlan]) -> KernelChoice {
    KernelChoice::Harmonics {
        terms: plans.iter().map(|p| p.degree).max().unwrap_or(0),
    }
}
