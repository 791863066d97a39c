//! `model.position` and `model.ngpt_alpha` (docs/MATH.md §16): the tokens' positions in the
//! scores and nGPT's update rate.
//!
//! ```text
//! { rope = { base = 10000.0 } }                 omega_i = base^(-2i/d_h), d_h even
//! { alibi = { slopes = [m_1, ..., m_H] } }      one slope per head
//! { alibi = { slopes = "standard" } }           m_h = 2^(-8h/H)
//! { alibi = { slope_per_n = lambda } }          m = lambda / n for every head
//! ```

use std::path::Path;

use toml::Value;

use super::error::ScenarioError;
use super::matrix::describe;
use super::{LayerSpec, ModelSpec};

/// How positions enter the scores, as written (ALiBi's slopes resolved per layer and n).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum PositionSpec {
    /// No positions (the default).
    #[default]
    None,
    /// Rotary embeddings with this frequency base.
    Rope {
        /// base > 0 (10000 by default).
        base: f64,
    },
    /// Linear biases.
    Alibi(AlibiSlopes),
}

/// ALiBi's slopes as written.
#[derive(Debug, Clone, PartialEq)]
pub enum AlibiSlopes {
    /// One slope per head, in head order (heads given by A first, then by factors).
    Given(Vec<f64>),
    /// 2^(-8h/H) for head h = 1..H.
    Standard,
    /// lambda / n for every head.
    PerN(f64),
}

impl PositionSpec {
    /// The slopes of a layer of `heads` heads for `n` tokens (`None` without ALiBi).
    pub fn slopes(&self, heads: usize, n: usize) -> Option<Vec<f64>> {
        match self {
            PositionSpec::Alibi(AlibiSlopes::Given(m)) => Some(m.clone()),
            PositionSpec::Alibi(AlibiSlopes::Standard) => Some(
                (1..=heads)
                    .map(|h| (-8.0 * h as f64 / heads as f64).exp2())
                    .collect(),
            ),
            PositionSpec::Alibi(AlibiSlopes::PerN(lambda)) => {
                Some(vec![lambda / n.max(1) as f64; heads])
            }
            _ => None,
        }
    }

    /// The resolved table of `model.position` (None without positions).
    pub fn to_toml(&self) -> Option<Value> {
        let mut inner = toml::Table::new();
        let outer = match self {
            PositionSpec::None => return None,
            PositionSpec::Rope { base } => {
                inner.insert("base".into(), Value::Float(*base));
                "rope"
            }
            PositionSpec::Alibi(AlibiSlopes::Given(m)) => {
                let list = m.iter().map(|v| Value::Float(*v)).collect();
                inner.insert("slopes".into(), Value::Array(list));
                "alibi"
            }
            PositionSpec::Alibi(AlibiSlopes::Standard) => {
                inner.insert("slopes".into(), Value::String("standard".into()));
                "alibi"
            }
            PositionSpec::Alibi(AlibiSlopes::PerN(lambda)) => {
                inner.insert("slope_per_n".into(), Value::Float(*lambda));
                "alibi"
            }
        };
        let mut table = toml::Table::new();
        table.insert(outer.into(), Value::Table(inner));
        Some(Value::Table(table))
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// Reads `model.position` (absent: no positions); `default_rope` is the checkpoint's RoPE base
/// when it has one.
pub fn position(
    value: Option<&Value>,
    default_rope: Option<f64>,
    file: &Path,
) -> Result<PositionSpec, ScenarioError> {
    let err = |key: &str, message: String| ScenarioError::at(file, key, message);
    let Some(value) = value else {
        return Ok(default_rope.map_or(PositionSpec::None, |base| PositionSpec::Rope { base }));
    };
    if value.as_str() == Some("none") {
        return Ok(PositionSpec::None);
    }
    let table = match value {
        Value::Table(t) if t.len() == 1 => t,
        other => {
            return Err(err(
                "model.position",
                format!(
                    "expected \"none\", {{ rope = {{ base = ... }} }} or {{ alibi = {{ ... }} }}, found {}",
                    describe(other)
                ),
            ))
        }
    };
    let (kind, inner) = table.iter().next().expect("one entry");
    let key = format!("model.position.{kind}");
    let Value::Table(inner) = inner else {
        return Err(err(
            &key,
            format!("expected a table, found {}", describe(inner)),
        ));
    };
    match kind.as_str() {
        "rope" => rope(inner, &key, file),
        "alibi" => alibi(inner, &key, file),
        other => Err(err(
            "model.position",
            format!("unknown position `{other}` (valid: rope, alibi)"),
        )),
    }
}

fn rope(inner: &toml::Table, key: &str, file: &Path) -> Result<PositionSpec, ScenarioError> {
    if let Some(other) = inner.keys().find(|k| k.as_str() != "base") {
        return Err(ScenarioError::at(
            file,
            format!("{key}.{other}"),
            "unknown key (rope takes base)",
        ));
    }
    let base = match inner.get("base") {
        None => 10000.0,
        Some(v) => number(v).ok_or_else(|| {
            ScenarioError::at(
                file,
                format!("{key}.base"),
                format!("expected a number, found {}", describe(v)),
            )
        })?,
    };
    if !(base.is_finite() && base > 1.0) {
        return Err(ScenarioError::at(
            file,
            format!("{key}.base"),
            format!("must be a finite number > 1, found {base}"),
        ));
    }
    Ok(PositionSpec::Rope { base })
}

fn alibi(inner: &toml::Table, key: &str, file: &Path) -> Result<PositionSpec, ScenarioError> {
    let err = |k: &str, message: String| ScenarioError::at(file, format!("{key}.{k}"), message);
    if let Some(other) = inner
        .keys()
        .find(|k| !matches!(k.as_str(), "slopes" | "slope_per_n"))
    {
        return Err(err(
            other,
            "unknown key (alibi takes slopes or slope_per_n)".into(),
        ));
    }
    let finite = |k: &str, v: &Value| match number(v) {
        Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(err(
            k,
            format!("expected a finite number >= 0, found {}", describe(v)),
        )),
    };
    match (inner.get("slopes"), inner.get("slope_per_n")) {
        (Some(_), Some(_)) => Err(err(
            "slope_per_n",
            "give either slopes or slope_per_n, not both".into(),
        )),
        (None, None) => Err(err(
            "slopes",
            "missing: alibi takes slopes = [...] | \"standard\" or slope_per_n = lambda".into(),
        )),
        (None, Some(v)) => Ok(PositionSpec::Alibi(AlibiSlopes::PerN(finite(
            "slope_per_n",
            v,
        )?))),
        (Some(Value::String(s)), None) if s == "standard" => {
            Ok(PositionSpec::Alibi(AlibiSlopes::Standard))
        }
        (Some(Value::Array(list)), None) if !list.is_empty() => {
            let slopes = list
                .iter()
                .map(|v| finite("slopes", v))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(PositionSpec::Alibi(AlibiSlopes::Given(slopes)))
        }
        (Some(v), None) => Err(err(
            "slopes",
            format!(
                "expected a list of numbers (one per head) or \"standard\", found {}",
                describe(v)
            ),
        )),
    }
}

/// `model.ngpt_alpha`: finite and > 0 (default 1).
pub fn ngpt_alpha(value: Option<f64>, file: &Path) -> Result<f64, ScenarioError> {
    match value {
        None => Ok(1.0),
        Some(a) if a.is_finite() && a > 0.0 => Ok(a),
        Some(a) => Err(ScenarioError::at(
            file,
            "model.ngpt_alpha",
            format!("nGPT's update rate must be a finite number > 0, found {a}"),
        )),
    }
}

/// Positions against the heads: RoPE needs every head's d_h even (a head given by A has
/// d_h = d), given ALiBi slopes one per head of every layer.
pub fn check_heads(model: &ModelSpec, file: &Path) -> Result<(), ScenarioError> {
    let single = LayerSpec {
        heads: std::sync::Arc::new(model.heads.clone()),
        factored: std::sync::Arc::new(model.factored.clone()),
        duration: 1.0,
    };
    let layers = if model.layers.is_empty() {
        std::slice::from_ref(&single)
    } else {
        &model.layers[..]
    };
    for (l, layer) in layers.iter().enumerate() {
        let at = if model.layers.is_empty() {
            String::new()
        } else {
            format!(" (layer {})", l + 1)
        };
        let widths = layer
            .heads
            .iter()
            .map(|_| model.d)
            .chain(layer.factored.iter().map(|f| f.q.ncols()));
        match &model.position {
            PositionSpec::Rope { .. } => {
                if let Some(odd) = widths.clone().find(|w| w % 2 == 1) {
                    return Err(ScenarioError::at(
                        file,
                        "model.position.rope",
                        format!("RoPE rotates pairs (i, i + d_h/2) and needs an even head width d_h; a head{at} has d_h = {odd} (a head given by A has d_h = d)"),
                    ));
                }
            }
            PositionSpec::Alibi(AlibiSlopes::Given(m)) => {
                let count = widths.count();
                if m.len() != count {
                    return Err(ScenarioError::at(
                        file,
                        "model.position.alibi.slopes",
                        format!(
                            "{} slopes for {count} heads{at}: give one slope per head",
                            m.len()
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}
