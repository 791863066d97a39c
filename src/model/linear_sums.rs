//! The linear-attention sums with queries, keys and values of any width, with or without the
//! causal mask (docs/MATH.md §9).
//!
//! ```text
//! no mask:  f_k = C q_k,     C   = (1/n) sum_{j=1..n} u_j kappa_j^T
//! causal:   f_k = C_k q_k,   C_k = (1/k) sum_{j<=k}   u_j kappa_j^T   (k counted from 1)
//! ```
//!
//! since (1/k) sum_{j<=k} <q_k, kappa_j> u_j = C_k q_k. C_k is kept as a running sum, so the
//! causal field costs O(n e e_v) like the unmasked one (e the width of keys and queries, e_v of
//! the values), never an n x n matrix. The running sum goes through the tokens in order on one
//! thread: the bytes do not depend on the threads.

/// Writes f_k (n x value_d) from the queries and keys (n x key_d) and the values (n x value_d),
/// all row-major; `c` is scratch of value_d x key_d numbers.
pub fn linear_sums(
    query: &[f64],
    keys: &[f64],
    value: &[f64],
    dims: (usize, usize),
    causal: bool,
    c: &mut [f64],
    f: &mut [f64],
) {
    let (e, ev) = dims;
    let n = keys.len() / e;
    let c = &mut c[..e * ev];
    c.fill(0.0);
    let add_pair = |c: &mut [f64], kappa: &[f64], u: &[f64]| {
        for (row, &ua) in c.chunks_exact_mut(e).zip(u) {
            row.iter_mut().zip(kappa).for_each(|(r, kb)| *r += ua * kb);
        }
    };
    let apply = |c: &[f64], q: &[f64], scale: f64, out: &mut [f64]| {
        for (o, row) in out.iter_mut().zip(c.chunks_exact(e)) {
            *o = scale * row.iter().zip(q).map(|(r, qb)| r * qb).sum::<f64>();
        }
    };
    let tokens = keys.chunks_exact(e).zip(value.chunks_exact(ev));
    if causal {
        let rows = tokens
            .zip(query.chunks_exact(e))
            .zip(f.chunks_exact_mut(ev));
        for (k, (((kappa, u), q), out)) in rows.enumerate() {
            add_pair(c, kappa, u);
            apply(c, q, 1.0 / (k + 1) as f64, out);
        }
        return;
    }
    for (kappa, u) in tokens {
        add_pair(c, kappa, u);
    }
    let inv_n = 1.0 / n as f64;
    for (q, out) in query.chunks_exact(e).zip(f.chunks_exact_mut(ev)) {
        apply(c, q, inv_n, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_the_pairs_written_out() {
        let (n, e, ev) = (9, 3, 2);
        let num = |i: usize, s: f64| ((i as f64) * s).sin();
        let q: Vec<f64> = (0..n * e).map(|i| num(i, 0.7)).collect();
        let kappa: Vec<f64> = (0..n * e).map(|i| num(i, 1.3)).collect();
        let u: Vec<f64> = (0..n * ev).map(|i| num(i, 0.4)).collect();
        for causal in [false, true] {
            let mut f = vec![0.0; n * ev];
            let mut c = vec![0.0; e * ev];
            linear_sums(&q, &kappa, &u, (e, ev), causal, &mut c, &mut f);
            for k in 0..n {
                let last = if causal { k + 1 } else { n };
                for a in 0..ev {
                    let sum: f64 = (0..last)
                        .map(|j| {
                            let z: f64 = (0..e).map(|b| q[k * e + b] * kappa[j * e + b]).sum();
                            z * u[j * ev + a]
                        })
                        .sum();
                    let expected = sum / last as f64;
                    assert!((f[k * ev + a] - expected).abs() < 1e-14, "causal {causal}");
                }
            }
        }
    }
}
