//! The matrix forms of a scenario (`model.A`, `model.V`, and the same inside `heads`).
//!
//! A matrix is one of (the scenario format of the README):
//! - rows: `d` arrays of `d` entries, each a number or an expression string over `[params]`;
//! - `"identity"` or `"zero"`;
//! - `{ random = "gaussian", seed = 3, scale = 1.0 }`: entries N(0, scale^2 / d), drawn row-major
//!   from `ChaCha8Rng::seed_from_u64(seed)` as `StandardNormal * (scale / sqrt(d))`;
//! - `{ block = [[a, b], [c, d]], rest = "identity" | "zero" | "repeat" }`: a 2x2 block in the
//!   top-left corner with the rest of the diagonal 1 (identity, the default) or the rest 0 (zero),
//!   or the block repeated down the diagonal (repeat; needs an even d);
//! - `{ file = "A.npy" }`: a d x d float64 `.npy` or a `.csv` of d rows, relative to the scenario.
//!
//! The value is kept as a raw `toml::Value` by the schema and interpreted here, so that every
//! error names the exact key (`model.V[1][0]`, `model.A.rest`, `model.heads[1].A.seed`).

use std::path::Path;

use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use toml::Value;

use super::error::ScenarioError;
use super::expression;

/// What a matrix needs from the rest of the scenario.
pub struct MatrixContext<'a> {
    /// The scenario file (for error messages).
    pub file: &'a Path,
    /// The folder relative `file = ...` paths are resolved against.
    pub base_dir: &'a Path,
    /// The scenario's params, in file order.
    pub params: &'a [(String, f64)],
    /// The dimension; every matrix is d x d.
    pub d: usize,
}

impl MatrixContext<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::at(self.file, key, message)
    }

    /// A d x d buffer of `fill`, row-major, without aborting when d is absurdly large.
    fn square(&self, key: &str, fill: f64) -> Result<Vec<f64>, ScenarioError> {
        let d = self.d;
        let len = d.checked_mul(d).filter(|len| len.checked_mul(8).is_some());
        let mut data = Vec::new();
        match len {
            Some(len) if data.try_reserve_exact(len).is_ok() => {
                data.resize(len, fill);
                Ok(data)
            }
            _ => Err(self.err(
                key,
                format!("cannot allocate a {d} x {d} matrix (d = {d} is too large)"),
            )),
        }
    }

    fn to_matrix(&self, rows: Vec<f64>) -> DMatrix<f64> {
        DMatrix::from_row_slice(self.d, self.d, &rows)
    }
}

/// Interpret one matrix value found at `key`.
pub fn build_matrix(
    value: &Value,
    key: &str,
    ctx: &MatrixContext,
) -> Result<DMatrix<f64>, ScenarioError> {
    match value {
        Value::String(word) => match word.as_str() {
            "identity" => {
                let mut m = ctx.square(key, 0.0)?;
                for i in 0..ctx.d {
                    m[i * ctx.d + i] = 1.0;
                }
                Ok(ctx.to_matrix(m))
            }
            "zero" => Ok(ctx.to_matrix(ctx.square(key, 0.0)?)),
            other => Err(ctx.err(
                key,
                format!(
                    "unknown matrix `{}` (a matrix is rows of entries, \"identity\", \"zero\", \
                     {{ random = ... }}, {{ block = ... }} or {{ file = ... }})",
                    other.escape_debug()
                ),
            )),
        },
        Value::Array(rows) => rows_matrix(rows, key, ctx),
        Value::Table(table) => match (table.get("random"), table.get("block"), table.get("file")) {
            (Some(random), None, None) => random_matrix(table, random, key, ctx),
            (None, Some(block), None) => block_matrix(table, block, key, ctx),
            (None, None, Some(file)) => file_matrix(table, file, key, ctx),
            (None, None, None) => Err(ctx.err(
                key,
                "a matrix table needs one of `random`, `block` or `file`",
            )),
            _ => Err(ctx.err(
                key,
                "a matrix table has exactly one of `random`, `block` or `file`",
            )),
        },
        other => Err(ctx.err(
            key,
            format!(
                "expected a matrix (rows, \"identity\", \"zero\" or a table), found {}",
                describe(other)
            ),
        )),
    }
}

/// The matrix as rows of floats, for the resolved scenario.
pub fn matrix_to_toml(m: &DMatrix<f64>) -> Value {
    Value::Array(
        m.row_iter()
            .map(|row| Value::Array(row.iter().map(|&x| Value::Float(x)).collect()))
            .collect(),
    )
}

/// A short description of a TOML value for "found ..." messages.
pub fn describe(value: &Value) -> String {
    match value {
        Value::String(s) => format!("string \"{}\"", s.escape_debug()),
        Value::Integer(i) => format!("integer {i}"),
        Value::Float(f) => format!("float {f}"),
        Value::Boolean(b) => format!("boolean {b}"),
        other => other.type_str().to_string(),
    }
}

/// One entry: a number or an expression string over the params.
pub fn entry(value: &Value, key: &str, ctx: &MatrixContext) -> Result<f64, ScenarioError> {
    match value {
        Value::Integer(i) => Ok(*i as f64),
        Value::Float(f) if f.is_finite() => Ok(*f),
        Value::Float(f) => Err(ctx.err(key, format!("{f} is not a finite number"))),
        Value::String(text) => {
            expression::evaluate(text, ctx.params).map_err(|message| ctx.err(key, message))
        }
        other => Err(ctx.err(
            key,
            format!(
                "expected a number or an expression string, found {}",
                describe(other)
            ),
        )),
    }
}

/// Rows of `cols` entries each; `what` names the dimension in messages.
fn entry_rows(
    rows: &[Value],
    key: &str,
    n: usize,
    what: &str,
    ctx: &MatrixContext,
) -> Result<Vec<f64>, ScenarioError> {
    if rows.len() != n {
        return Err(ctx.err(
            key,
            format!("expected {n} rows ({what}), found {}", rows.len()),
        ));
    }
    let mut out = Vec::with_capacity(n * n);
    for (i, row) in rows.iter().enumerate() {
        let row_key = format!("{key}[{i}]");
        let Value::Array(entries) = row else {
            return Err(ctx.err(
                &row_key,
                format!(
                    "expected a row (an array of {n} entries), found {}",
                    describe(row)
                ),
            ));
        };
        if entries.len() != n {
            return Err(ctx.err(
                &row_key,
                format!("expected {n} entries ({what}), found {}", entries.len()),
            ));
        }
        for (j, value) in entries.iter().enumerate() {
            out.push(entry(value, &format!("{row_key}[{j}]"), ctx)?);
        }
    }
    Ok(out)
}

fn rows_matrix(
    rows: &[Value],
    key: &str,
    ctx: &MatrixContext,
) -> Result<DMatrix<f64>, ScenarioError> {
    let what = format!("d = {}", ctx.d);
    let data = entry_rows(rows, key, ctx.d, &what, ctx)?;
    Ok(ctx.to_matrix(data))
}

/// Reject keys of a matrix table other than `allowed`.
fn only_keys(
    table: &toml::Table,
    allowed: &[&str],
    key: &str,
    ctx: &MatrixContext,
) -> Result<(), ScenarioError> {
    match table.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(unknown) => Err(ctx.err(
            format!("{key}.{unknown}"),
            format!("unknown key (keys here are: {})", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

fn random_matrix(
    table: &toml::Table,
    random: &Value,
    key: &str,
    ctx: &MatrixContext,
) -> Result<DMatrix<f64>, ScenarioError> {
    only_keys(table, &["random", "seed", "scale"], key, ctx)?;
    if random.as_str() != Some("gaussian") {
        return Err(ctx.err(
            format!("{key}.random"),
            format!(
                "unknown distribution {} (valid: \"gaussian\")",
                describe(random)
            ),
        ));
    }
    let seed = match table.get("seed") {
        None => 0,
        Some(Value::Integer(i)) if *i >= 0 => *i as u64,
        Some(other) => {
            return Err(ctx.err(
                format!("{key}.seed"),
                format!("expected an integer >= 0, found {}", describe(other)),
            ))
        }
    };
    let scale = match table.get("scale") {
        None => 1.0,
        Some(Value::Integer(i)) => *i as f64,
        Some(Value::Float(f)) if f.is_finite() => *f,
        Some(other) => {
            return Err(ctx.err(
                format!("{key}.scale"),
                format!("expected a finite number, found {}", describe(other)),
            ))
        }
    };
    let mut data = ctx.square(key, 0.0)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let factor = scale / (ctx.d as f64).sqrt();
    for x in data.iter_mut() {
        let z: f64 = StandardNormal.sample(&mut rng);
        *x = z * factor;
    }
    Ok(ctx.to_matrix(data))
}

fn block_matrix(
    table: &toml::Table,
    block: &Value,
    key: &str,
    ctx: &MatrixContext,
) -> Result<DMatrix<f64>, ScenarioError> {
    only_keys(table, &["block", "rest"], key, ctx)?;
    let block_key = format!("{key}.block");
    let block = match block {
        Value::Array(rows) => entry_rows(rows, &block_key, 2, "a 2x2 block", ctx)?,
        other => {
            return Err(ctx.err(
                block_key,
                format!(
                    "expected a 2x2 block [[a, b], [c, d]], found {}",
                    describe(other)
                ),
            ))
        }
    };
    let rest_key = format!("{key}.rest");
    let rest = match table.get("rest") {
        None => "identity",
        Some(Value::String(s)) if ["identity", "zero", "repeat"].contains(&s.as_str()) => s,
        Some(other) => {
            return Err(ctx.err(
                rest_key,
                format!(
                    "expected \"identity\", \"zero\" or \"repeat\", found {}",
                    describe(other)
                ),
            ))
        }
    };
    let d = ctx.d;
    if rest == "repeat" && !d.is_multiple_of(2) {
        return Err(ctx.err(
            rest_key,
            format!("rest = \"repeat\" needs an even d, found d = {d}"),
        ));
    }
    let mut m = ctx.square(key, 0.0)?;
    if rest == "identity" {
        for i in 2..d {
            m[i * d + i] = 1.0;
        }
    }
    let copies = if rest == "repeat" { d / 2 } else { 1 };
    for b in 0..copies {
        let o = 2 * b;
        m[o * d + o] = block[0];
        m[o * d + o + 1] = block[1];
        m[(o + 1) * d + o] = block[2];
        m[(o + 1) * d + o + 1] = block[3];
    }
    Ok(ctx.to_matrix(m))
}

fn file_matrix(
    table: &toml::Table,
    file: &Value,
    key: &str,
    ctx: &MatrixContext,
) -> Result<DMatrix<f64>, ScenarioError> {
    only_keys(table, &["file"], key, ctx)?;
    let file_key = format!("{key}.file");
    let Value::String(name) = file else {
        return Err(ctx.err(
            file_key,
            format!("expected a file name, found {}", describe(file)),
        ));
    };
    let path = ctx.base_dir.join(name);
    // The same allocation guard as the other forms before reading d x d values.
    ctx.square(key, 0.0)?;
    let data = super::numfile::read_table(&path, ctx.d, ctx.d)
        .map_err(|message| ctx.err(file_key, message))?;
    Ok(ctx.to_matrix(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Vec<(String, f64)> {
        vec![("v11".into(), 0.2), ("v12".into(), 1.5)]
    }

    fn build(src: &str, d: usize) -> Result<DMatrix<f64>, ScenarioError> {
        build_in(src, d, Path::new("."))
    }

    fn build_in(src: &str, d: usize, dir: &Path) -> Result<DMatrix<f64>, ScenarioError> {
        let table: toml::Table = format!("m = {src}").parse().unwrap();
        let params = params();
        let ctx = MatrixContext {
            file: Path::new("s.toml"),
            base_dir: dir,
            params: &params,
            d,
        };
        build_matrix(&table["m"], "model.A", &ctx)
    }

    fn err(src: &str, d: usize) -> String {
        build(src, d).unwrap_err().to_string()
    }

    #[test]
    fn rows_with_numbers_and_expressions() {
        let m = build(r#"[["v11", "v12"], ["-v12", 2]]"#, 2).unwrap();
        assert_eq!(m, DMatrix::from_row_slice(2, 2, &[0.2, 1.5, -1.5, 2.0]));
        let m = build(r#"[["sqrt(2)/2", "-sqrt(2)/2"], ["2^3", "cos(pi/4)"]]"#, 2).unwrap();
        let h = 0.5f64.sqrt();
        assert!((m[(0, 0)] - h).abs() < 1e-15);
        assert!((m[(0, 1)] + h).abs() < 1e-15);
        assert_eq!(m[(1, 0)], 8.0);
        assert!((m[(1, 1)] - h).abs() < 1e-15);
    }

    #[test]
    fn identity_and_zero() {
        assert_eq!(build("\"identity\"", 3).unwrap(), DMatrix::identity(3, 3));
        assert_eq!(build("\"zero\"", 4).unwrap(), DMatrix::zeros(4, 4));
    }

    #[test]
    fn random_gaussian_matches_a_hand_draw() {
        let m = build(r#"{ random = "gaussian", seed = 3, scale = 2.0 }"#, 3).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for i in 0..3 {
            for j in 0..3 {
                let z: f64 = StandardNormal.sample(&mut rng);
                assert_eq!(m[(i, j)], z * (2.0 / 3f64.sqrt()), "({i}, {j})");
            }
        }
        // Defaults: seed 0, scale 1.
        let a = build(r#"{ random = "gaussian" }"#, 2).unwrap();
        let b = build(r#"{ random = "gaussian", seed = 0, scale = 1 }"#, 2).unwrap();
        assert_eq!(a, b);
        let c = build(r#"{ random = "gaussian", seed = 1 }"#, 2).unwrap();
        assert_ne!(a, c);
    }

    #[test]
    fn random_gaussian_has_variance_scale2_over_d() {
        let d = 60;
        let m = build(r#"{ random = "gaussian", seed = 7, scale = 3.0 }"#, d).unwrap();
        let mean = m.iter().sum::<f64>() / (d * d) as f64;
        let var = m.iter().map(|x| x * x).sum::<f64>() / (d * d) as f64;
        let expected = 9.0 / d as f64;
        // 3600 samples: relative standard error of the variance is sqrt(2/3600) ~ 2.4%.
        assert!(
            (var / expected - 1.0).abs() < 0.12,
            "var {var} vs {expected}"
        );
        assert!(
            mean.abs() < 5.0 * (expected / (d * d) as f64).sqrt(),
            "mean {mean}"
        );
    }

    #[test]
    fn block_forms() {
        let m = build(r#"{ block = [["v11", 1], [-1, "v11"]] }"#, 3).unwrap();
        let want = DMatrix::from_row_slice(3, 3, &[0.2, 1., 0., -1., 0.2, 0., 0., 0., 1.]);
        assert_eq!(m, want);
        let m = build(r#"{ block = [[1, 2], [3, 4]], rest = "zero" }"#, 3).unwrap();
        let want = DMatrix::from_row_slice(3, 3, &[1., 2., 0., 3., 4., 0., 0., 0., 0.]);
        assert_eq!(m, want);
        let m = build(r#"{ block = [[1, 2], [3, 4]], rest = "repeat" }"#, 4).unwrap();
        #[rustfmt::skip]
        let want = DMatrix::from_row_slice(4, 4, &[
            1., 2., 0., 0.,
            3., 4., 0., 0.,
            0., 0., 1., 2.,
            0., 0., 3., 4.,
        ]);
        assert_eq!(m, want);
        let m = build(r#"{ block = [[1, 2], [3, 4]], rest = "identity" }"#, 2).unwrap();
        assert_eq!(m, DMatrix::from_row_slice(2, 2, &[1., 2., 3., 4.]));
    }

    #[test]
    fn file_forms() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.csv"), "1,2\n3,4\n").unwrap();
        let m = build_in(r#"{ file = "a.csv" }"#, 2, dir.path()).unwrap();
        assert_eq!(m, DMatrix::from_row_slice(2, 2, &[1., 2., 3., 4.]));
        super::super::numfile::tests::write_npy(
            &dir.path().join("a.npy"),
            &[2, 2],
            &[5., 6., 7., 8.],
        );
        let m = build_in(r#"{ file = "a.npy" }"#, 2, dir.path()).unwrap();
        assert_eq!(m, DMatrix::from_row_slice(2, 2, &[5., 6., 7., 8.]));
        let e = build_in(r#"{ file = "a.npy" }"#, 3, dir.path()).unwrap_err();
        assert_eq!(e.key(), Some("model.A.file"));
        assert!(
            e.to_string()
                .contains("expected shape (3, 3), found (2, 2)"),
            "{e}"
        );
        let e = build_in(r#"{ file = "missing.csv" }"#, 2, dir.path()).unwrap_err();
        assert!(e.to_string().contains("missing.csv"), "{e}");
    }

    #[test]
    fn shape_errors_name_the_key() {
        assert_eq!(
            err("[[1, 0, 0], [0, 1, 0]]", 3),
            "s.toml: model.A: expected 3 rows (d = 3), found 2"
        );
        assert_eq!(
            err("[[1, 0, 0], [0, 1], [0, 0, 1]]", 3),
            "s.toml: model.A[1]: expected 3 entries (d = 3), found 2"
        );
        assert!(err("[1, 0, 0, 1]", 4).contains("model.A[0]: expected a row"));
        assert!(err("[1, 0, 0, 1]", 2).contains("model.A: expected 2 rows (d = 2), found 4"));
        assert!(err(r#"{ block = [[1, 2]] }"#, 2).contains("model.A.block: expected 2 rows"));
        assert!(err(r#"{ block = [[1, 2], [3]] }"#, 2).contains("model.A.block[1]: expected 2"));
    }

    #[test]
    fn value_errors_name_the_key() {
        assert_eq!(
            err(r#"[["v11", 0], ["v13", 1]]"#, 2),
            "s.toml: model.A[1][0]: unknown param `v13` (params are: v11, v12)"
        );
        assert!(err(r#"[["1/0", 0], [0, 1]]"#, 2).contains("model.A[0][0]: expression"));
        assert!(err(r#"[[nan, 0], [0, 1]]"#, 2).contains("model.A[0][0]: NaN is not a finite"));
        assert!(err(r#"[[true, 0], [0, 1]]"#, 2).contains("model.A[0][0]: expected a number"));
        assert!(err("\"identiy\"", 2).contains("model.A: unknown matrix `identiy`"));
        assert!(err("3", 2).contains("model.A: expected a matrix"));
        assert!(
            err(r#"{ random = "uniform" }"#, 2).contains("model.A.random: unknown distribution")
        );
        assert!(err(r#"{ random = "gaussian", seed = -1 }"#, 2).contains("model.A.seed"));
        assert!(err(r#"{ random = "gaussian", scale = inf }"#, 2).contains("model.A.scale"));
        assert!(err(r#"{ random = "gaussian", sed = 1 }"#, 2).contains("model.A.sed: unknown key"));
        assert!(err(r#"{ block = [[1, 0], [0, 1]], rest = "x" }"#, 2).contains("model.A.rest"));
        assert!(err(r#"{ block = [[1, 0], [0, 1]], rest = "repeat" }"#, 3)
            .contains("model.A.rest: rest = \"repeat\" needs an even d, found d = 3"));
        assert!(err(r#"{ block = [[1, 0], [0, 1]], file = "a.csv" }"#, 2).contains("exactly one"));
        assert!(err("{ }", 2).contains("needs one of"));
    }

    #[test]
    fn huge_d_is_an_error_not_an_abort() {
        let e = build("\"identity\"", usize::MAX / 2).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
    }

    #[test]
    fn to_toml_rows() {
        let m = DMatrix::from_row_slice(2, 2, &[1., 2., 3., 4.]);
        let v = matrix_to_toml(&m);
        assert_eq!(v.to_string(), "[[1.0, 2.0], [3.0, 4.0]]");
    }
}
