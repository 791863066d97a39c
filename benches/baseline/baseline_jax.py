#!/usr/bin/env python3
"""JAX + diffrax peer for tokdyn's full particle model.

    python baseline_jax.py SCENARIO.toml --out DIR

The same model, scenario subset, initial tokens and outputs as baseline.py (which it imports for
reading the scenario and writing order.csv / tokens_final.csv), written the way a researcher
would in JAX today: float64 (jax_enable_x64), the field as one jitted function of the n x d
token array,

    Xn = X / |x_k|,   G = beta Xn A Xn^T,   U = Xn V^T,
    usa: F = exp(G) U / n,   sa: F = softmax_rows(G) U,   x_k' = f_k - <xn_k, f_k> xn_k,

integrated by diffrax.diffeqsolve with Dopri8 and a PIDController at the scenario's rtol/atol
(dt0 chosen by diffrax), SaveAt at the scenario's samples, the whole solve inside one jax.jit.
XLA fuses the elementwise work and calls its own matrix kernel; it uses every core.

The solve is compiled ahead of time (jit(...).lower(...).compile()), so the timings split into
import_seconds (jax + diffrax), compile_seconds and wall_seconds (the compiled solve alone,
warm), all written to summary.json with rhs_evals (= 13 per Dopri8 step attempt: 14 stages,
the first shared with the previous step; plus two for the initial step size and the first
evaluation; from diffrax's step statistics).
"""

import argparse
import json
import os
import sys
import time

start_import = time.perf_counter()
import numpy as np  # noqa: E402

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import diffrax  # noqa: E402

import_seconds = time.perf_counter() - start_import

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from baseline import fmt, load_scenario, normalise_rows, order_r2  # noqa: E402


def make_field(kernel, beta, A, V, n):
    """The diffrax vector field on the n x d token array."""
    bA = jnp.asarray(beta * A)
    VT = jnp.asarray(np.ascontiguousarray(V.T))
    inv_n = 1.0 / n

    def field(t, X, args):
        Xn = X / jnp.linalg.norm(X, axis=1, keepdims=True)
        if kernel == "lsa":
            S = Xn.T @ Xn * inv_n
            F = Xn @ (V @ S @ bA.T).T
        else:
            G = (Xn @ bA) @ Xn.T  # G[k, j] = beta <x_k, A x_j>
            U = Xn @ VT  # row j: V x_j
            if kernel == "usa":
                F = jnp.exp(G) @ U * inv_n
            else:
                F = jax.nn.softmax(G, axis=1) @ U
        return F - jnp.sum(Xn * F, axis=1, keepdims=True) * Xn

    return field


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--out", required=True, help="output folder (created)")
    args = ap.parse_args()

    sc = load_scenario(args.scenario)
    n, d = sc["n"], sc["d"]
    field = make_field(sc["kernel"], sc["beta"], sc["A"], sc["V"], n)
    ts = jnp.linspace(0.0, sc["t_end"], sc["samples"])
    y0 = jnp.asarray(sc["x0"])
    controller = diffrax.PIDController(rtol=sc["rtol"], atol=sc["atol"])

    def solve(y0):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            diffrax.Dopri8(),
            t0=0.0,
            t1=sc["t_end"],
            dt0=None,
            y0=y0,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=controller,
            max_steps=1_000_000,
        )

    start = time.perf_counter()
    compiled = jax.jit(solve).lower(y0).compile()
    compile_seconds = time.perf_counter() - start

    start = time.perf_counter()
    sol = compiled(y0)
    ys = np.asarray(jax.block_until_ready(sol.ys))
    wall = time.perf_counter() - start

    steps = int(sol.stats["num_steps"])
    accepted = int(sol.stats["num_accepted_steps"])
    rhs_evals = 13 * steps + 2
    ok = int(sol.result == diffrax.RESULTS.successful)

    os.makedirs(args.out, exist_ok=True)
    norm_drift = 0.0
    with open(os.path.join(args.out, "order.csv"), "w") as f:
        f.write("t,r2_re,r2_im,r2_abs\n")
        for t, y in zip(np.asarray(sol.ts), ys):
            Xn, norms = normalise_rows(y)
            norm_drift = max(norm_drift, float(np.max(np.abs(norms - 1.0))))
            r2 = order_r2(Xn)
            f.write(f"{fmt(t)},{fmt(r2.real)},{fmt(r2.imag)},{fmt(abs(r2))}\n")
    Xf, _ = normalise_rows(ys[-1])
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
        "import_seconds": import_seconds,
        "compile_seconds": compile_seconds,
        "wall_seconds": wall,
        "rhs_evals": rhs_evals,
        "steps": steps,
        "accepted_steps": accepted,
        "status": 0 if ok else 1,
        "norm_drift_max": norm_drift,
        "jax": jax.__version__,
        "diffrax": diffrax.__version__,
        "python": sys.version.split()[0],
        "command_line": sys.argv,
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f"{sc['name']}: {'ok' if ok else 'FAILED'}, {steps} steps ({accepted} accepted), "
          f"import {import_seconds:.2f} s, compile {compile_seconds:.2f} s, solve {wall:.3f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
