//! The closed vocabularies of a scenario file: kernel, solver method, model, initial state,
//! and the behaviour labels an `expect` may name.
//!
//! Each kind parses from its file word (`FromStr`, with an error that lists the valid words),
//! prints as that word (`Display`) and serialises as that word (serde), so that provenance
//! files, CSV columns and the command line all use the same spelling.

use std::fmt;
use std::str::FromStr;

use crate::label::Label;

/// The words of the behaviour labels (docs/MATH.md §6) that `expect` may name: those of
/// [`Label`], in the order of [`Label::ALL`].
pub const LABELS: [&str; 8] = [
    Label::ALL[0].as_str(),
    Label::ALL[1].as_str(),
    Label::ALL[2].as_str(),
    Label::ALL[3].as_str(),
    Label::ALL[4].as_str(),
    Label::ALL[5].as_str(),
    Label::ALL[6].as_str(),
    Label::ALL[7].as_str(),
];

/// A word that is not one of a kind's file words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownWord {
    /// What was being parsed: "kernel", "method", "model" or "init".
    pub what: &'static str,
    /// The word that was given.
    pub found: String,
    /// The valid words, in their canonical order.
    pub valid: &'static [&'static str],
}

impl fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} `{}` (valid: {})",
            self.what,
            self.found.escape_debug(),
            self.valid.join(", ")
        )
    }
}

impl std::error::Error for UnknownWord {}

/// Defines a file-word enum with `ALL`, `WORDS`, `as_str`, `FromStr`, `Display` and serde.
macro_rules! word_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal, [$($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)?]
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every variant, in canonical order.
            pub const ALL: [Self; [$($word),+].len()] = [$(Self::$variant),+];
            /// The file words, in the order of `ALL`.
            pub const WORDS: &'static [&'static str] = &[$($word),+];

            /// The word used in scenario files.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word),+
                }
            }
        }

        impl FromStr for $name {
            type Err = UnknownWord;
            fn from_str(s: &str) -> Result<Self, UnknownWord> {
                match s {
                    $($word => Ok(Self::$variant),)+
                    _ => Err(UnknownWord { what: $what, found: s.to_string(), valid: Self::WORDS }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let word = <String as serde::Deserialize>::deserialize(deserializer)?;
                word.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

word_enum!(
    /// The attention kernel h (docs/MATH.md §1).
    KernelKind, "kernel", [
        /// Linear self-attention, h(y) = y.
        Lsa = "lsa",
        /// Unnormalised softmax, h(y) = exp(y).
        Usa = "usa",
        /// Normalised softmax (no 1/n).
        Sa = "sa",
    ]
);

word_enum!(
    /// Which kernel evaluates `usa` and `sa` (`model.kernel_method`): the spectral one in d = 2
    /// or the harmonics in d = 3 where their error bounds hold, or the direct pairwise sums.
    #[derive(Default)]
    KernelMethodKind, "kernel_method", [
        /// Spectral where accurate and worth it, direct otherwise.
        #[default]
        Auto = "auto",
        /// The pairwise sums.
        Direct = "direct",
        /// The spectral (Fourier-Bessel) kernel; an error where its bound fails.
        Spectral = "spectral",
        /// The spherical-harmonics kernel (d = 3); an error where its bound fails.
        Harmonics = "harmonics",
    ]
);

word_enum!(
    /// The time integrator.
    MethodKind, "method", [
        /// Dormand-Prince 8(5,3), adaptive.
        Dop853 = "dop853",
        /// Dormand-Prince 5(4), adaptive.
        Dopri5 = "dopri5",
        /// Classical Runge-Kutta 4 with fixed step `dt`.
        Rk4 = "rk4",
    ]
);

word_enum!(
    /// Which system to integrate: the full particles or one of the d = 2 LSA reductions.
    ModelKind, "model", [
        /// The full particle system.
        Full = "full",
        /// The d = 2 phase (Kuramoto-type) model.
        Phase = "phase",
        /// The Watanabe-Strogatz reduction.
        Ws = "ws",
        /// The Ott-Antonsen reduction.
        Oa = "oa",
        /// The exact group model (LSA in any d as a d x d matrix flow).
        Group = "group",
        /// The full model until tight clusters form, then k weighted points (any kernel, any d).
        Clusters = "clusters",
        /// The tokens' density as n -> infinity (d = 2).
        MeanField = "mean-field",
    ]
);

word_enum!(
    /// How the initial tokens are placed.
    InitKind, "init", [
        /// Independent uniform points on the sphere.
        Uniform = "uniform",
        /// The Poisson (Ott-Antonsen manifold) state with R2(0) = r0 e^{i phi0}.
        Poisson = "poisson",
        /// Equally spaced doubled angles.
        Splay = "splay",
        /// Read from a .npy or .csv file.
        File = "file",
        /// Rows of a checkpoint's embedding matrix (`tokens.ids`).
        Embedding = "embedding",
        /// Equally spaced angles on the whole circle, t_k = 2 pi k / n.
        Circle = "circle",
    ]
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        for k in KernelKind::ALL {
            assert_eq!(k.to_string().parse::<KernelKind>(), Ok(k));
        }
        for k in MethodKind::ALL {
            assert_eq!(k.to_string().parse::<MethodKind>(), Ok(k));
        }
        for k in ModelKind::ALL {
            assert_eq!(k.to_string().parse::<ModelKind>(), Ok(k));
        }
        for k in InitKind::ALL {
            assert_eq!(k.to_string().parse::<InitKind>(), Ok(k));
        }
        assert_eq!(KernelKind::ALL.len(), 3);
        assert_eq!(MethodKind::ALL.len(), 3);
        assert_eq!(ModelKind::ALL.len(), 7);
        assert_eq!(InitKind::ALL.len(), 6);
    }

    #[test]
    fn file_words_are_exact() {
        assert_eq!("lsa".parse::<KernelKind>(), Ok(KernelKind::Lsa));
        assert_eq!("usa".parse::<KernelKind>(), Ok(KernelKind::Usa));
        assert_eq!("sa".parse::<KernelKind>(), Ok(KernelKind::Sa));
        assert_eq!("dopri5".parse::<MethodKind>(), Ok(MethodKind::Dopri5));
        assert_eq!("oa".parse::<ModelKind>(), Ok(ModelKind::Oa));
        assert_eq!("splay".parse::<InitKind>(), Ok(InitKind::Splay));
        assert!("LSA".parse::<KernelKind>().is_err());
        assert!(" lsa".parse::<KernelKind>().is_err());
    }

    #[test]
    fn unknown_word_lists_the_valid_ones() {
        let err = "softmax".parse::<KernelKind>().unwrap_err().to_string();
        assert_eq!(err, "unknown kernel `softmax` (valid: lsa, usa, sa)");
        let err = "euler".parse::<MethodKind>().unwrap_err().to_string();
        assert!(err.contains("dop853, dopri5, rk4"), "{err}");
    }

    #[test]
    fn serialises_as_the_file_word() {
        assert_eq!(serde_json::to_string(&ModelKind::Ws).unwrap(), "\"ws\"");
        assert_eq!(
            serde_json::to_string(&InitKind::Poisson).unwrap(),
            "\"poisson\""
        );
        let k: KernelKind = serde_json::from_str("\"usa\"").unwrap();
        assert_eq!(k, KernelKind::Usa);
        assert!(serde_json::from_str::<KernelKind>("\"x\"").is_err());
    }
}

word_enum!(
    /// `model.mask`: which tokens a token attends to.
    MaskKind, "mask", [
        /// Every token (encoders).
        None = "none",
        /// The tokens j <= k (decoders).
        Causal = "causal",
    ]
);

word_enum!(
    /// `model.normalization`: where the layer norm sits.
    #[derive(Default)]
    NormalizationKind, "normalization", [
        /// Post-LN: the tokens on the sphere (the default).
        #[default]
        Post = "post",
        /// Pre-LN: the unnormalised stream, moved by the attention of its directions.
        Pre = "pre",
        /// Peri-LN: the stream moved by the normalised attention output.
        Peri = "peri",
        /// nGPT: the tokens on the sphere, moved at rate alpha along the normalised output.
        Ngpt = "ngpt",
    ]
);

impl NormalizationKind {
    /// Whether the tokens stay on the unit sphere (post-LN and nGPT).
    pub fn on_sphere(self) -> bool {
        matches!(self, NormalizationKind::Post | NormalizationKind::Ngpt)
    }
}
