//! Every scenario in `scenarios/` shows the label it promises (`expect`). The d = 100 runs are
//! shortened to n = 100 tokens (see `SHORTENED`); everything else runs exactly as written.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use tokdyn::classify::Label;
use tokdyn::command::run::run;
use tokdyn::output::RunOptions;
use tokdyn::scenario::Scenario;

/// Overrides that keep the expensive scenarios quick without changing their regime.
const SHORTENED: &[(&str, &[&str])] = &[("d100-", &["tokens.n=100", "time.samples=301"])];

fn scenario_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter(|p| std::fs::read_to_string(p).unwrap().contains("[model]"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_scenario_meets_its_expectation() {
    let out = tempfile::tempdir().unwrap();
    let results: Vec<(String, Option<Label>, Label, String)> = scenario_files()
        .par_iter()
        .map(|file| {
            let stem = file.file_stem().unwrap().to_string_lossy().to_string();
            let sets: Vec<String> = SHORTENED
                .iter()
                .filter(|(prefix, _)| stem.starts_with(prefix))
                .flat_map(|(_, s)| s.iter().map(|v| v.to_string()))
                .collect();
            let scenario = Scenario::load(file, &sets).unwrap();
            let options = RunOptions {
                out: Some(out.path().join(&stem)),
                ..RunOptions::default()
            };
            let report = run(&scenario, &options).unwrap_or_else(|e| panic!("{stem}: {e}"));
            let s = report.summary;
            (stem, s.expect, s.label, s.label_reason)
        })
        .collect();
    let mut failures = Vec::new();
    for (stem, expect, label, reason) in &results {
        eprintln!("{stem}: {label} ({reason})");
        match expect {
            Some(e) if e != label => {
                failures.push(format!("{stem}: expected {e}, got {label} ({reason})"))
            }
            None => failures.push(format!("{stem}: no expect")),
            _ => {}
        }
    }
    assert!(results.len() >= 20, "only {} scenarios", results.len());
    assert!(failures.is_empty(), "{failures:#?}");
}
