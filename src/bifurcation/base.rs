//! The base scenario of a bifurcation analysis: its raw table, in which a parameter (a dotted
//! key) is set before the scenario is checked again, and the checked scenario itself. The
//! family of vector fields F(x; p) of docs/MATH.md §10 is this table with the key set to p.

use std::path::PathBuf;

use crate::scenario::Scenario;

/// The base scenario of a `[continuation]` or `[codim2]` analysis.
#[derive(Debug, Clone)]
pub struct BaseScenario {
    /// The file that asked for the analysis (named in error lines).
    pub file: PathBuf,
    /// The analysis' name (progress lines).
    pub name: String,
    /// The base scenario file.
    pub scenario_file: PathBuf,
    /// The folder that the scenario's relative paths are resolved against.
    pub scenario_dir: PathBuf,
    /// The base scenario's raw table.
    pub template: toml::Table,
    /// The checked base scenario.
    pub base: Scenario,
}

impl BaseScenario {
    /// The base scenario's value of a dotted key, when it is a number.
    pub fn base_number(&self, key: &str) -> Option<f64> {
        number_at(&self.template, key)
    }
}

/// The value of a dotted key in a table, when it is a number.
pub fn number_at(template: &toml::Table, key: &str) -> Option<f64> {
    let mut parts = key.split('.').peekable();
    let mut table = template;
    while let Some(part) = parts.next() {
        let value = table.get(part)?;
        if parts.peek().is_none() {
            return match value {
                toml::Value::Float(x) => Some(*x),
                toml::Value::Integer(i) => Some(*i as f64),
                _ => None,
            };
        }
        table = value.as_table()?;
    }
    None
}
