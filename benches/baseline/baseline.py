#!/usr/bin/env python3
"""Plain numpy + scipy baseline for tokdyn's full particle model (issue #7).

    python baseline.py SCENARIO.toml --out DIR

Integrates

    x_k' = P_k f_k,   f_k = (1/n) sum_j h(beta <x_k, A x_j>) V x_j,   P_k y = y - <x_k, y> x_k

(h = identity for `lsa`, exp for `usa`; `sa`: softmax weights over j, no 1/n) with
scipy.integrate.solve_ivp(method="DOP853", t_eval=linspace(0, t_end, samples)), the way a careful
researcher would write it:

- the state is stored coordinate-major (y.reshape(d, n) = X^T), so per-token reductions run over
  contiguous rows;
- the field is evaluated at the normalised tokens x_k / |x_k| and projected there (docs/MATH.md §1),
  so it is tangent to the sphere through x_k and the sphere is neutral instead of repelling;
- LSA goes through the d x d moment matrix S = X^T X / n: F = X (beta V S A^T)^T, O(n d^2)
  (written with X^T as stored: S = X^T (X^T)^T / n, F^T = (beta V S A^T) X^T);
- USA/SA form the n x n Gram matrix G = beta X A X^T with one BLAS product into a buffer
  allocated once, exponentiate it in place and multiply by U = X V^T (rows V x_j; F^T = U^T G^T
  as stored); SA subtracts each row's maximum first and divides by the row sums.

Reads the subset of the tokdyn scenario format that the benchmark scenarios use: [model] kernel,
beta, d, A, V ("identity", rows of numbers, or { file = "X.npy" } relative to the scenario file);
[tokens] n, init = "file", path (.npy float64 n x d, rows normalised); [time] t_end, samples;
[solver] rtol, atol (defaults 1e-9, 1e-11). Anything else is rejected (no silent ignoring).

Writes into DIR: order.csv (t,r2_re,r2_im,r2_abs at each sample; R2 = (1/n) sum_k
(x_k1 + i x_k2)^2 of the normalised tokens, for d > 2 with the angle of each token's projection
on coordinates (1, 2), as tokdyn's order.csv, docs/MATH.md §5), tokens_final.csv (n rows of d
numbers, normalised), and summary.json (wall_seconds = the solve_ivp call only, rhs_evals =
sol.nfev, status, ...).
"""

import argparse
import json
import os
import sys
import time
import tomllib

import numpy as np
import scipy
from scipy.integrate import solve_ivp

KNOWN = {
    "": {"name", "description", "expect", "model", "tokens", "time", "solver"},
    "model": {"kernel", "beta", "d", "A", "V"},
    "tokens": {"n", "init", "path", "seed"},
    "time": {"t_end", "samples"},
    "solver": {"method", "rtol", "atol"},
}


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def check_keys(table, section, scenario):
    unknown = set(table) - KNOWN[section]
    if unknown:
        where = f"[{section}]" if section else "top level"
        fail(f"{scenario}: {where}: key(s) {sorted(unknown)} not supported by the baseline")


def load_matrix(value, d, base, key, scenario):
    if value == "identity":
        m = np.eye(d)
    elif isinstance(value, list):
        m = np.array(value, dtype=np.float64)
    elif isinstance(value, dict) and set(value) == {"file"}:
        path = os.path.join(base, value["file"])
        if not path.endswith(".npy"):
            fail(f"{scenario}: {key}: only .npy files are supported, got {value['file']!r}")
        m = np.load(path).astype(np.float64, copy=False)
    else:
        fail(f"{scenario}: {key}: expected \"identity\", rows of numbers or {{ file = ... }}")
    if m.shape != (d, d):
        fail(f"{scenario}: {key}: shape {m.shape}, expected ({d}, {d})")
    return np.ascontiguousarray(m)


def load_scenario(path):
    with open(path, "rb") as f:
        sc = tomllib.load(f)
    base = os.path.dirname(os.path.abspath(path))
    check_keys(sc, "", path)
    for section in ("model", "tokens", "time"):
        if section not in sc:
            fail(f"{path}: missing [{section}]")
    for section in ("model", "tokens", "time", "solver"):
        check_keys(sc.get(section, {}), section, path)
    model, tokens, tm = sc["model"], sc["tokens"], sc["time"]
    solver = sc.get("solver", {})
    if solver.get("method", "dop853") != "dop853":
        fail(f"{path}: solver.method: the baseline is DOP853 only")
    kernel = model["kernel"]
    if kernel not in ("lsa", "usa", "sa"):
        fail(f"{path}: model.kernel: {kernel!r} is not lsa | usa | sa")
    d = int(model["d"])
    n = int(tokens["n"])
    if tokens.get("init") != "file":
        fail(f"{path}: tokens.init: the baseline reads its tokens from a file (init = \"file\")")
    x0_path = os.path.join(base, tokens["path"])
    if not x0_path.endswith(".npy"):
        fail(f"{path}: tokens.path: only .npy is supported")
    x0 = np.load(x0_path).astype(np.float64, copy=False)
    if x0.shape != (n, d):
        fail(f"{path}: tokens.path: shape {x0.shape}, expected ({n}, {d})")
    x0 = x0 / np.linalg.norm(x0, axis=1, keepdims=True)  # rows normalised, as tokdyn does
    return {
        "name": sc.get("name", os.path.splitext(os.path.basename(path))[0]),
        "kernel": kernel,
        "beta": float(model["beta"]),
        "d": d,
        "n": n,
        "A": load_matrix(model["A"], d, base, "model.A", path),
        "V": load_matrix(model["V"], d, base, "model.V", path),
        "x0": np.ascontiguousarray(x0),
        "t_end": float(tm["t_end"]),
        "samples": int(tm["samples"]),
        "rtol": float(solver.get("rtol", 1e-9)),
        "atol": float(solver.get("atol", 1e-11)),
    }


def normalise_rows(X):
    """X / |x_k| row by row, and the row norms (X: n x d, one token a row)."""
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    return X / norms[:, None], norms


def order_r2(Xn):
    """R2 = (1/n) sum_k e^{2 i t_k}, t_k the angle of token k's projection on coordinates (1, 2)
    (docs/MATH.md §5; tokens on the axis count as angle 0). For d = 2 and unit tokens this is
    (1/n) sum_k (x_k1 + i x_k2)^2."""
    z = Xn[:, 0] + 1j * Xn[:, 1]
    if Xn.shape[1] > 2:
        r = np.abs(z)
        z = np.where(r > 0, z / np.where(r > 0, r, 1.0), 1.0)
    return np.mean(z * z)


def make_field(kernel, beta, A, V, n, d):
    """The right-hand side for solve_ivp.

    The state is stored coordinate-major: y.reshape(d, n) is X^T, column k the token x_k, so that
    the per-token reductions and broadcasts (norms, <x_k, f_k>) run over contiguous length-n
    rows. (With one token a row and d = 2 they are several times slower in numpy: on the 2-core
    development machine, while it was busy, 15 ms against 9 ms per LSA evaluation at n = 1e5 and
    375 ms against 84 ms at n = 1e6.)
    """

    def normalised(y):
        X = y.reshape(d, n)
        return X / np.sqrt(np.einsum("ij,ij->j", X, X))

    def project(Xn, F):
        # f_k -= <x_k, f_k> x_k for every column k, in place
        F -= np.einsum("ij,ij->j", Xn, F) * Xn
        return F.ravel()

    if kernel == "lsa":
        AT = np.ascontiguousarray(A.T)

        def rhs(t, y):
            Xn = normalised(y)
            S = Xn @ Xn.T  # d x d
            S /= n
            M = beta * (V @ S @ AT)  # f_k = beta V S A^T x_k
            return project(Xn, M @ Xn)

        return rhs

    # USA / SA: one n x n Gram matrix, allocated once and reused in every evaluation.
    G = np.empty((n, n))
    betaAT = beta * np.ascontiguousarray(A.T)

    def rhs(t, y):
        Xn = normalised(y)
        Q = betaAT @ Xn  # column k: beta A^T x_k
        np.matmul(Q.T, Xn, out=G)  # G[k, j] = beta <x_k, A x_j>
        U = V @ Xn  # column j: V x_j
        if kernel == "usa":
            np.exp(G, out=G)
            F = U @ G.T  # column k: sum_j exp(G[k, j]) V x_j
            F /= n
        else:
            np.subtract(G, G.max(axis=1, keepdims=True), out=G)
            np.exp(G, out=G)
            F = U @ G.T
            F /= G.sum(axis=1)
        return project(Xn, F)

    return rhs


def fmt(x):
    return repr(float(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--out", required=True, help="output folder (created)")
    args = ap.parse_args()

    sc = load_scenario(args.scenario)
    n, d = sc["n"], sc["d"]
    rhs = make_field(sc["kernel"], sc["beta"], sc["A"], sc["V"], n, d)
    t_eval = np.linspace(0.0, sc["t_end"], sc["samples"])
    y0 = sc["x0"].T.ravel()  # coordinate-major, see make_field
    del sc["x0"]

    start = time.perf_counter()
    sol = solve_ivp(
        rhs,
        (0.0, sc["t_end"]),
        y0,
        method="DOP853",
        rtol=sc["rtol"],
        atol=sc["atol"],
        t_eval=t_eval,
    )
    wall = time.perf_counter() - start

    os.makedirs(args.out, exist_ok=True)
    norm_drift = 0.0
    with open(os.path.join(args.out, "order.csv"), "w") as f:
        f.write("t,r2_re,r2_im,r2_abs\n")
        for i, t in enumerate(sol.t):
            Xn, norms = normalise_rows(sol.y[:, i].reshape(d, n).T)
            norm_drift = max(norm_drift, float(np.max(np.abs(norms - 1.0))))
            r2 = order_r2(Xn)
            f.write(f"{fmt(t)},{fmt(r2.real)},{fmt(r2.imag)},{fmt(abs(r2))}\n")
    Xf, _ = normalise_rows(sol.y[:, -1].reshape(d, n).T)
    np.savetxt(os.path.join(args.out, "tokens_final.csv"), Xf, fmt="%.17g", delimiter=",")
    summary = {
        "name": sc["name"],
        "kernel": sc["kernel"],
        "n": n,
        "d": d,
        "t_end": sc["t_end"],
        "samples": sc["samples"],
        "rtol": sc["rtol"],
        "atol": sc["atol"],
        "wall_seconds": wall,
        "rhs_evals": int(sol.nfev),
        "status": int(sol.status),
        "message": sol.message,
        "t_reached": float(sol.t[-1]) if len(sol.t) else None,
        "norm_drift_max": norm_drift,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "python": sys.version.split()[0],
        "command_line": sys.argv,
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f"{sc['name']}: status {sol.status} ({sol.message}), {sol.nfev} rhs evals, {wall:.3f} s")
    return 0 if sol.status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
