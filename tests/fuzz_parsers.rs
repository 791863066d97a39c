//! A fuzz target for the scenario and sweep parsers, run briefly in CI: mutated files (bytes
//! replaced by TOML fragments, lines dropped or repeated, numbers swapped for extreme ones)
//! never panic, and every rejection is one line naming the file.

use std::path::Path;

use proptest::prelude::*;
use tokdyn::scenario::Scenario;

const SCENARIO: &str = r#"name = "fz"
description = "fuzzed"
[params]
v11 = 0.2
v12 = 1.0
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = "identity"
V = [["v11", "v12"], ["-v12", "-v11"]]
[tokens]
n = 8
init = "poisson"
seed = 1
r0 = 0.3
[time]
t_end = 1.0
samples = 5
"#;

const SWEEP: &str = r#"name = "fzs"
scenario = "base.toml"
model = "oa"
[axes]
v11 = { from = 0.0, to = 1.0, steps = 2 }
v12 = { from = 0.5, to = 1.0, steps = 2 }
[refine]
tolerance = 1e-2
[continuation]
parameter = "v11"
from = 0.2
to = 0.8
"#;

/// Fragments that make interesting TOML.
const FRAGMENTS: &[&str] = &[
    "",
    "=",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "'",
    ",",
    "\n",
    "#",
    ".",
    "-",
    "nan",
    "inf",
    "-inf",
    "1e308",
    "-1e308",
    "5e-324",
    "0",
    "-1",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "true",
    "[[layers]]",
    "[model]",
    "x = 1",
    "\"\\u0000\"",
    "\u{fe0f}",
    "é",
    "[[",
    "]]",
    "A = \"zero\"",
    "n = 0",
    "steps = 0",
    "samples = 2",
    "{ random = \"gaussian\", seed = 3 }",
    "\"sqrt(-1)\"",
    "\"1/0\"",
    "\"v11^1e9\"",
];

/// One mutation: (position as a fraction of the text, bytes removed, fragment inserted).
fn mutations() -> impl Strategy<Value = Vec<(f64, usize, usize)>> {
    prop::collection::vec((0.0..1.0f64, 0usize..12, 0..FRAGMENTS.len()), 1..6)
}

fn mutate(text: &str, muts: &[(f64, usize, usize)]) -> String {
    let mut s = text.to_string();
    for &(at, cut, frag) in muts {
        let mut i = ((s.len() as f64) * at) as usize;
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        let mut j = (i + cut).min(s.len());
        while !s.is_char_boundary(j) {
            j += 1;
        }
        s.replace_range(i..j, FRAGMENTS[frag]);
    }
    s
}

fn one_line(message: &str, file: &str) {
    assert!(!message.contains('\n'), "two lines: {message}");
    assert!(message.starts_with(file), "{message}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn mutated_scenarios_never_panic(muts in mutations()) {
        let text = mutate(SCENARIO, &muts);
        if let Err(e) = Scenario::from_toml_str(&text, Path::new("fz.toml"), Path::new("."), &[]) {
            one_line(&e.to_string(), "fz.toml");
        }
    }

    #[test]
    fn mutated_sweeps_never_panic(muts in mutations(), base in mutations()) {
        let dir = tempfile::tempdir().unwrap();
        // The base scenario is mutated too, a little less often.
        let base_text = if base.len() > 3 { mutate(SCENARIO, &base) } else { SCENARIO.to_string() };
        std::fs::write(dir.path().join("base.toml"), base_text).unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(&path, mutate(SWEEP, &muts)).unwrap();
        if let Err(e) = tokdyn::sweep::spec::load(&path) {
            let message = e.to_string();
            assert!(!message.contains('\n'), "two lines: {message}");
            prop_assert_eq!(e.exit_code(), 2);
        }
    }
}
