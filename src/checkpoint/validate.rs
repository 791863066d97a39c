//! Checks on what a checkpoint gives before anything is computed from it (docs/MATH.md,
//! "Checkpoint heads").
//!
//! A tensor that is read must hold at least one value (no dimension of size 0). The heads are
//! checked after they are formed in f64,
//!
//! ```text
//! A_h = W_Q^h (W_K^h)^T / sqrt(d_h),    V_h = (W_V^h W_O^h)^T,
//! ```
//!
//! every entry finite and at most [`MAX_HEAD_ENTRY`] in size: with |a|, |v| <= M the products
//! that the dynamics and `inspect` form from A_h and V_h (A x, <x, A y> V y, A V - V A and
//! the squared norms of these, d <= 2^20) stay below d^3 M^4 < 1e300, so none of them overflows.
//! The same bound holds for the embedding rows and their mean. Each refusal names the tensor.

use super::{CheckpointError, HeadWeights};

/// Largest |entry| accepted in a head's A_h or V_h and in the embedding (see the module doc).
pub const MAX_HEAD_ENTRY: f64 = 1e64;

/// Refuses a tensor with a dimension of size 0 (or no dimension holding data).
pub fn non_empty(name: &str, shape: &[usize]) -> Result<(), CheckpointError> {
    if shape.contains(&0) {
        return Err(CheckpointError(format!(
            "tensor `{name}`: shape {shape:?} is empty (zero-sized); a checkpoint tensor needs at least one value"
        )));
    }
    Ok(())
}

/// The first entry of `values` that is not finite or exceeds [`MAX_HEAD_ENTRY`] in size.
fn first_out_of_range(values: &[f64]) -> Option<(usize, f64)> {
    values
        .iter()
        .position(|v| v.is_nan() || v.abs() > MAX_HEAD_ENTRY)
        .map(|i| (i, values[i]))
}

fn out_of_range(what: &str, names: &str, value: f64) -> CheckpointError {
    let kind = if value.is_finite() {
        format!("{:e}, beyond {MAX_HEAD_ENTRY:e} in size", value)
    } else {
        format!("{value} (the product overflows f64)")
    };
    CheckpointError(format!(
        "tensor {names}: {what} has an entry {kind}; the weights are too large for the dynamics"
    ))
}

/// Checks every head formed from the tensors `a_names` (those A_h comes from) and `v_names`
/// (those V_h comes from).
pub fn heads(
    heads: &[HeadWeights],
    a_names: &[String],
    v_names: &[String],
) -> Result<(), CheckpointError> {
    let quoted = |names: &[String]| {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(" and ")
    };
    for (h, w) in heads.iter().enumerate() {
        if let Some((_, x)) = first_out_of_range(w.a.as_slice()) {
            let what = format!("head {h}'s A = W_Q W_K^T / sqrt(d_h)");
            return Err(out_of_range(&what, &quoted(a_names), x));
        }
        if let Some((_, x)) = first_out_of_range(w.v.as_slice()) {
            let what = format!("head {h}'s V = (W_V W_O)^T");
            return Err(out_of_range(&what, &quoted(v_names), x));
        }
    }
    Ok(())
}

/// Checks the embedding rows picked and the mean row.
pub fn embedding(name: &str, rows: &[f64], mean: &[f64]) -> Result<(), CheckpointError> {
    if let Some((_, x)) = first_out_of_range(rows) {
        return Err(out_of_range("a token's row", &format!("`{name}`"), x));
    }
    if let Some((_, x)) = first_out_of_range(mean) {
        return Err(out_of_range("the mean row", &format!("`{name}`"), x));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use nalgebra::DMatrix;

    use super::*;

    fn head(a: f64, v: f64) -> HeadWeights {
        HeadWeights {
            a: DMatrix::from_element(2, 2, a),
            v: DMatrix::from_element(2, 2, v),
        }
    }

    #[test]
    fn the_bound_keeps_every_product_finite() {
        // d^3 M^4 for d = 2^20 stays below the largest f64.
        let d = (1u64 << 20) as f64;
        assert!(d.powi(3) * MAX_HEAD_ENTRY.powi(4) < 1e300);
    }

    #[test]
    fn heads_out_of_range_name_their_tensors() {
        let names = |s: &str| vec![s.to_string()];
        assert!(heads(&[head(1.0, -1.0)], &names("q"), &names("o")).is_ok());
        let e = heads(&[head(f64::INFINITY, 1.0)], &names("q"), &names("o")).unwrap_err();
        assert!(e.0.contains("`q`") && e.0.contains("overflows"), "{e}");
        let e = heads(
            &[head(1.0, 1.0), head(1.0, -1e70)],
            &names("q"),
            &names("o"),
        )
        .unwrap_err();
        assert!(e.0.contains("`o`") && e.0.contains("head 1"), "{e}");
        let e = heads(&[head(f64::NAN, 1.0)], &names("q"), &names("o")).unwrap_err();
        assert!(e.0.contains("NaN"), "{e}");
    }

    #[test]
    fn empty_shapes_are_refused() {
        assert!(non_empty("t", &[2, 3]).is_ok());
        assert!(non_empty("t", &[0, 0]).unwrap_err().0.contains("`t`"));
        assert!(non_empty("t", &[4, 0]).is_err());
    }
}
