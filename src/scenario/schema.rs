//! The raw shape of a scenario file, as serde structs with `deny_unknown_fields`.
//!
//! This layer only checks structure and types (and fills the simple defaults); matrices stay raw
//! `toml::Value`s and params a raw table, to be interpreted by `validate` with precise keys.
//! Numbers that must be counts are read as `i64` so that a negative or zero value gets a
//! message of ours ("must be an integer >= 2") rather than serde's.
//!
//! The key lists here ([`TOP_KEYS`], [`section_keys`]) are what `--set` accepts; a test checks
//! they agree with the structs.

use std::path::Path;

use serde::Deserialize;
use toml::Value;

use super::error::ScenarioError;
use super::kinds::{
    InitKind, KernelKind, KernelMethodKind, MaskKind, MethodKind, ModelKind, NormalizationKind,
};

/// Top-level keys of a scenario.
pub const TOP_KEYS: [&str; 16] = [
    "name",
    "description",
    "expect",
    "params",
    "model",
    "tokens",
    "time",
    "solver",
    "run",
    "output",
    "layers",
    "noise",
    "ensemble",
    "clusters",
    "lyapunov",
    "density",
];

/// Tables that may be absent from a file (and that `--set` may therefore create).
pub const OPTIONAL_TABLES: [&str; 9] = [
    "params", "solver", "run", "output", "noise", "ensemble", "clusters", "lyapunov", "density",
];

/// The keys of a table section, or `None` for `params` (any identifier) and non-tables.
pub fn section_keys(section: &str) -> Option<&'static [&'static str]> {
    match section {
        "model" => Some(&[
            "kernel",
            "beta",
            "d",
            "A",
            "V",
            "heads",
            "layers",
            "loop",
            "checkpoint",
            "kernel_method",
            "mask",
            "normalization",
            "ngpt_alpha",
            "position",
        ]),
        "tokens" => Some(&[
            "n",
            "init",
            "seed",
            "r0",
            "phi0",
            "eps",
            "path",
            "ids",
            "center",
            "positions",
        ]),
        "time" => Some(&["t_end", "samples", "t_max"]),
        "solver" => Some(&["method", "rtol", "atol", "dt"]),
        "run" => Some(&["model"]),
        "output" => Some(&["trajectory", "animation", "window", "snapshots", "figure"]),
        "noise" => Some(&["temperature", "seed", "dt"]),
        "ensemble" => Some(&["runs"]),
        "clusters" => Some(&["threshold"]),
        "lyapunov" => Some(&["exponents", "transient", "interval"]),
        "density" => Some(&[
            "init", "r0", "phi0", "kappa", "mean", "modes", "grid", "max_grid",
        ]),
        _ => None,
    }
}

/// Whether a dotted key holds a plain string (so `--set KEY=VALUE` always reads VALUE as text).
pub fn is_string_key(key: &str) -> bool {
    matches!(
        key,
        "name"
            | "description"
            | "expect"
            | "model.kernel"
            | "model.kernel_method"
            | "model.mask"
            | "model.normalization"
            | "tokens.init"
            | "tokens.path"
            | "solver.method"
            | "run.model"
            | "output.figure"
            | "density.init"
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub name: String,
    pub description: Option<String>,
    pub expect: Option<String>,
    #[serde(default)]
    pub params: toml::Table,
    pub model: RawModel,
    pub tokens: RawTokens,
    pub time: RawTime,
    #[serde(default)]
    pub solver: RawSolver,
    #[serde(default)]
    pub run: RawRun,
    #[serde(default)]
    pub output: RawOutput,
    /// The stack of layers spelled `[[layers]]` (same as `[[model.layers]]`).
    pub layers: Option<Vec<RawLayer>>,
    /// `[noise]`: noisy tokens.
    pub noise: Option<super::stochastic::RawNoise>,
    /// `[ensemble]`: runs over consecutive seeds.
    pub ensemble: Option<super::stochastic::RawEnsemble>,
    #[serde(default)]
    pub clusters: RawClusters,
    /// `[lyapunov]`: the first exponents of the run.
    pub lyapunov: Option<super::lyapunov::RawLyapunov>,
    /// `[density]`: the start of the mean field.
    pub density: Option<super::density::RawDensity>,
}

/// `[clusters]`: the angle that makes a cluster tight.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawClusters {
    pub threshold: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub kernel: KernelKind,
    /// A number, or `{ log_n = gamma }` (beta = gamma ln n).
    pub beta: Value,
    /// Required unless a checkpoint gives it.
    pub d: Option<i64>,
    #[serde(rename = "A")]
    pub a: Option<Value>,
    #[serde(rename = "V")]
    pub v: Option<Value>,
    pub heads: Option<Vec<RawHead>>,
    pub layers: Option<Vec<RawLayer>>,
    #[serde(rename = "loop")]
    pub looped: Option<bool>,
    pub checkpoint: Option<RawCheckpoint>,
    #[serde(default)]
    pub kernel_method: KernelMethodKind,
    /// Default: causal for a gpt2 checkpoint, else none.
    pub mask: Option<MaskKind>,
    /// Default: pre for a llama checkpoint, else post.
    pub normalization: Option<NormalizationKind>,
    /// nGPT's update rate (default 1).
    pub ngpt_alpha: Option<f64>,
    /// `"none"`, `{ rope = { base } }` or `{ alibi = { ... } }`.
    pub position: Option<Value>,
}

/// One layer of a stack: its own A and V or heads, and how long it acts.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLayer {
    #[serde(rename = "A")]
    pub a: Option<Value>,
    #[serde(rename = "V")]
    pub v: Option<Value>,
    pub heads: Option<Vec<RawHead>>,
    pub duration: Option<f64>,
}

/// `[model.checkpoint]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCheckpoint {
    pub path: String,
    pub format: String,
    pub layers: Vec<i64>,
    /// Required for gpt2 and bert; llama reads it from config.json.
    pub heads: Option<i64>,
    pub layer_time: Option<f64>,
    /// llama: config.json's path (default: config.json beside the weights).
    pub config: Option<String>,
    /// Fold the pre-attention norm's gain and sqrt(d) into the heads (llama; default true).
    pub fold_norm: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHead {
    #[serde(rename = "A")]
    pub a: Option<Value>,
    /// The value matrix (d x d) of a formed head, or the factor V (d x d_h) of a factored one.
    #[serde(rename = "V")]
    pub v: Option<Value>,
    #[serde(rename = "Q")]
    pub q: Option<Value>,
    #[serde(rename = "K")]
    pub k: Option<Value>,
    #[serde(rename = "O")]
    pub o: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTokens {
    /// Required unless `ids` gives it.
    pub n: Option<i64>,
    #[serde(default = "default_init")]
    pub init: InitKind,
    #[serde(default)]
    pub seed: i64,
    #[serde(default)]
    pub r0: f64,
    #[serde(default)]
    pub phi0: f64,
    #[serde(default)]
    pub eps: f64,
    pub path: Option<String>,
    pub ids: Option<Vec<i64>>,
    pub center: Option<bool>,
    /// Embedding starts: add the position embeddings (default: where the checkpoint has them).
    pub positions: Option<bool>,
}

fn default_init() -> InitKind {
    InitKind::Uniform
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTime {
    pub t_end: f64,
    pub samples: i64,
    #[serde(default)]
    pub t_max: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSolver {
    pub method: MethodKind,
    pub rtol: f64,
    pub atol: f64,
    pub dt: f64,
}

impl Default for RawSolver {
    fn default() -> Self {
        RawSolver {
            method: MethodKind::Dop853,
            rtol: 1e-9,
            atol: 1e-11,
            dt: 0.01,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawRun {
    pub model: ModelKind,
}

impl Default for RawRun {
    fn default() -> Self {
        RawRun {
            model: ModelKind::Full,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawOutput {
    pub trajectory: bool,
    pub animation: bool,
    pub window: Option<Vec<f64>>,
    pub snapshots: Option<Vec<f64>>,
    pub figure: crate::figure::Figure,
}

/// Deserialize a scenario table into the raw structs; errors name the key.
pub fn parse_raw(table: toml::Table, file: &Path) -> Result<RawScenario, ScenarioError> {
    deserialize_at(Value::Table(table), file, "")
}

/// Deserialize `value`, found at the dotted key `prefix` of `file` (empty: the whole file),
/// into `T`; an error is one [`ScenarioError`] naming the full key, in our words. The sweep
/// file is read through this too.
pub fn deserialize_at<T: serde::de::DeserializeOwned>(
    value: Value,
    file: &Path,
    prefix: &str,
) -> Result<T, ScenarioError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = if prefix.is_empty() {
            inner
        } else if inner == "." {
            prefix.to_string()
        } else {
            format!("{prefix}.{inner}")
        };
        let message = e.inner().message().to_string();
        let (key, message) = rephrase(&path, &message);
        ScenarioError::at(file, key, message)
    })
}

/// Turn serde's wording into ours: missing fields get their full key, type names are spelled out.
fn rephrase(path: &str, message: &str) -> (String, String) {
    let parent = if path == "." { "" } else { path };
    let join = |name: &str| {
        if parent.is_empty() {
            name.to_string()
        } else {
            format!("{parent}.{name}")
        }
    };
    if let Some(field) = backticked(message, "missing field `") {
        return (join(field), "missing (required key)".to_string());
    }
    if let Some(field) = backticked(message, "unknown field `") {
        // serde_path_to_error may or may not have pushed the unknown key itself.
        let key = if parent.rsplit('.').next() == Some(field) {
            parent.to_string()
        } else {
            join(field)
        };
        let expected = message
            .split_once(", expected ")
            .map(|(_, rest)| format!(" (expected {})", rest))
            .unwrap_or_default();
        return (key, format!("unknown key{expected}"));
    }
    let message = message
        .replace("expected i64", "expected an integer")
        .replace("expected f64", "expected a number")
        .replace("expected a boolean", "expected true or false")
        .replace("expected a map", "expected a table")
        .replace("expected a sequence", "expected an array");
    // "expected struct RawTime" names our type, not the file's.
    let message = match message.split_once("expected struct ") {
        Some((head, _)) => format!("{head}expected a table"),
        None => message,
    };
    (
        if parent.is_empty() {
            "(top level)".to_string()
        } else {
            parent.to_string()
        },
        message,
    )
}

fn backticked<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?;
    rest.split_once('`').map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        name = "x"
        [model]
        kernel = "lsa"
        beta = 1
        d = 2
        A = "identity"
        V = "identity"
        [tokens]
        n = 4
        [time]
        t_end = 1.0
        samples = 2
    "#;

    fn raw(extra: &str) -> Result<RawScenario, ScenarioError> {
        let text = format!("{extra}\n{MINIMAL}");
        let table: toml::Table = text.parse().unwrap();
        parse_raw(table, Path::new("s.toml"))
    }

    #[test]
    fn defaults_are_filled() {
        let r = raw("").unwrap();
        assert_eq!(r.tokens.init, InitKind::Uniform);
        assert_eq!(r.tokens.seed, 0);
        assert_eq!((r.tokens.r0, r.tokens.phi0, r.tokens.eps), (0.0, 0.0, 0.0));
        assert_eq!(r.solver.method, MethodKind::Dop853);
        assert_eq!(
            (r.solver.rtol, r.solver.atol, r.solver.dt),
            (1e-9, 1e-11, 0.01)
        );
        assert_eq!(r.run.model, ModelKind::Full);
        assert!(!r.output.trajectory && !r.output.animation);
        assert_eq!(r.model.beta.as_integer(), Some(1));
        assert_eq!(r.model.mask, None);
        assert_eq!(r.model.normalization, None);
        assert!(r.model.layers.is_none() && r.layers.is_none() && r.model.checkpoint.is_none());
    }

    #[test]
    fn missing_and_unknown_keys_are_named() {
        let table: toml::Table = MINIMAL.replace("beta = 1", "").parse().unwrap();
        let e = parse_raw(table, Path::new("s.toml")).unwrap_err();
        assert_eq!(e.to_string(), "s.toml: model.beta: missing (required key)");

        let table: toml::Table = MINIMAL.replace("kernel", "kernal").parse().unwrap();
        let e = parse_raw(table, Path::new("s.toml")).unwrap_err();
        assert_eq!(e.key(), Some("model.kernal"), "{e}");
        assert!(e.to_string().contains("unknown key"), "{e}");

        let e = raw("nmae = \"y\"").unwrap_err();
        assert_eq!(e.key(), Some("nmae"), "{e}");

        let e = raw("[solver]\nmethd = \"rk4\"").unwrap_err();
        assert_eq!(e.key(), Some("solver.methd"), "{e}");

        let table: toml::Table = MINIMAL.replace("name = \"x\"", "").parse().unwrap();
        let e = parse_raw(table, Path::new("s.toml")).unwrap_err();
        assert_eq!(e.key(), Some("name"), "{e}");
    }

    #[test]
    fn type_errors_are_named() {
        let table: toml::Table = MINIMAL.replace("d = 2", "d = 2.5").parse().unwrap();
        let e = parse_raw(table, Path::new("s.toml")).unwrap_err();
        assert_eq!(e.key(), Some("model.d"), "{e}");
        assert!(e.message().contains("expected an integer"), "{e}");

        let table: toml::Table = MINIMAL
            .replace("kernel = \"lsa\"", "kernel = \"lsx\"")
            .parse()
            .unwrap();
        let e = parse_raw(table, Path::new("s.toml")).unwrap_err();
        assert_eq!(e.key(), Some("model.kernel"), "{e}");
        assert!(e.message().contains("lsa, usa, sa"), "{e}");

        let e = raw("[run]\nmodel = \"kuramoto\"").unwrap_err();
        assert_eq!(e.key(), Some("run.model"), "{e}");
        let e = raw("[output]\ntrajectory = 1").unwrap_err();
        assert_eq!(e.key(), Some("output.trajectory"), "{e}");
    }

    #[test]
    fn heads_paths_are_indexed() {
        let text = MINIMAL.replace("A = \"identity\"\n", "").replace(
            "V = \"identity\"",
            "heads = [{ A = \"identity\", V = \"zero\" }, { A = \"zero\", W = 1 }]",
        );
        let table: toml::Table = text.parse().unwrap();
        let e = parse_raw(table, Path::new("s.toml")).unwrap_err();
        assert_eq!(e.key(), Some("model.heads[1].W"), "{e}");
    }

    #[test]
    fn key_lists_match_the_structs() {
        // Every listed key is accepted by the structs (an unknown one would be an "unknown key").
        for section in TOP_KEYS {
            if let Some(keys) = section_keys(section) {
                for key in keys {
                    let text = format!("{MINIMAL}\n[{section}]\n{key} = 1\n");
                    // Sections already in MINIMAL would be duplicated; put the key in directly.
                    let text = if MINIMAL.contains(&format!("[{section}]")) {
                        MINIMAL.replace(&format!("[{section}]"), &format!("[{section}]\n{key} = 1"))
                    } else {
                        text
                    };
                    let Ok(table) = text.parse::<toml::Table>() else {
                        continue; // duplicate key with MINIMAL: accepted by definition
                    };
                    if let Err(e) = parse_raw(table, Path::new("s.toml")) {
                        assert!(
                            !e.message().starts_with("unknown key"),
                            "{section}.{key}: {e}"
                        );
                    }
                }
            }
        }
    }
}
