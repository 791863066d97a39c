//! Counter-based Gaussian increments: the normals of token k at step j of a run with seed s
//! are a pure function of (s, j, k) (docs/MATH.md, "Noise").
//!
//! ```text
//! key(s, j, k) = mix(mix(mix(s) ^ j) ^ k),   u_i = mix(key + (i + 1) gamma)   (SplitMix64)
//! ```
//!
//! `mix` is the SplitMix64 finaliser (a bijection of u64 with full avalanche) and gamma the
//! golden-ratio increment, so each (seed, step, token) owns an independent stream of 64-bit
//! words; normals come from pairs of words by the Marsaglia polar method. Nothing depends on
//! which thread draws a token's increments or in which order, so a noisy run has the same
//! bytes for any thread count.

/// The golden-ratio increment of SplitMix64.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The stream of one token at one step.
pub struct TokenStream {
    state: u64,
}

impl TokenStream {
    /// The stream of token `token` at step `step` of the run with `seed`.
    pub fn new(seed: u64, step: u64, token: u64) -> Self {
        TokenStream {
            state: mix(mix(mix(seed) ^ step) ^ token),
        }
    }

    /// The next 64-bit word.
    fn next_word(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix(self.state)
    }

    /// A uniform number in (-1, 1) from the top 53 bits of a word.
    fn symmetric_uniform(&mut self) -> f64 {
        let unit = (self.next_word() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        2.0 * unit - 1.0
    }

    /// Two independent standard normals (Marsaglia's polar method).
    pub fn normal_pair(&mut self) -> (f64, f64) {
        loop {
            let (u, v) = (self.symmetric_uniform(), self.symmetric_uniform());
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                let factor = (-2.0 * s.ln() / s).sqrt();
                return (u * factor, v * factor);
            }
        }
    }

    /// Fills `out` with independent normals of standard deviation `scale`.
    pub fn fill_normals(&mut self, scale: f64, out: &mut [f64]) {
        let mut pairs = out.chunks_exact_mut(2);
        for pair in &mut pairs {
            let (a, b) = self.normal_pair();
            pair[0] = scale * a;
            pair[1] = scale * b;
        }
        if let [last] = pairs.into_remainder() {
            *last = scale * self.normal_pair().0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normals_have_the_moments_of_a_standard_normal() {
        // 2e5 normals over many streams: mean 0, variance 1, fourth moment 3, within ~5 sigma.
        let (mut m1, mut m2, mut m4) = (0.0, 0.0, 0.0);
        let mut count = 0.0;
        for token in 0..20_000u64 {
            let mut out = [0.0; 10];
            TokenStream::new(7, token % 13, token).fill_normals(1.0, &mut out);
            for x in out {
                m1 += x;
                m2 += x * x;
                m4 += x * x * x * x;
                count += 1.0;
            }
        }
        let (m1, m2, m4) = (m1 / count, m2 / count, m4 / count);
        let sigma = (1.0 / count).sqrt();
        assert!(m1.abs() < 5.0 * sigma, "mean {m1}");
        assert!(
            (m2 - 1.0).abs() < 5.0 * 2f64.sqrt() * sigma,
            "variance {m2}"
        );
        assert!((m4 - 3.0).abs() < 5.0 * 96f64.sqrt() * sigma, "fourth {m4}");
    }

    #[test]
    fn streams_are_pure_functions_of_seed_step_and_token() {
        let draw = |s, j, k| {
            let mut out = [0.0; 3];
            TokenStream::new(s, j, k).fill_normals(1.0, &mut out);
            out
        };
        assert_eq!(draw(1, 2, 3), draw(1, 2, 3));
        assert_ne!(draw(1, 2, 3), draw(1, 2, 4));
        assert_ne!(draw(1, 2, 3), draw(1, 3, 3));
        assert_ne!(draw(1, 2, 3), draw(2, 2, 3));
        // Neighbouring streams are uncorrelated: the correlation of the first normal of
        // token k and token k + 1 over 1e4 tokens is within ~5 sigma of zero.
        let first: Vec<f64> = (0..10_001).map(|k| draw(5, 0, k)[0]).collect();
        let c: f64 = first.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / 10_000.0;
        assert!(c.abs() < 0.05, "lag-1 correlation {c}");
    }
}
