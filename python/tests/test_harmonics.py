"""The spherical-harmonics kernel (kernel_method = "harmonics", d = 3) against an independent
reference: the softmax field written pair by pair in numpy and integrated by scipy's DOP853."""

import numpy as np
import pytest

import tokdyn

solve_ivp = pytest.importorskip("scipy.integrate").solve_ivp


def _scenario(method):
    return {
        "name": "harmonics-vs-scipy",
        "model": {
            "kernel": "sa",
            "beta": 3.5,
            "d": 3,
            "A": [[0.0, -0.8, 0.0], [0.8, 0.0, 0.0], [0.0, 0.0, 0.8]],
            "V": [[1.0, 0.2, 0.0], [-0.2, 0.9, 0.1], [0.0, 0.0, 1.1]],
            "kernel_method": method,
        },
        "tokens": {"n": 600, "init": "uniform", "seed": 11},
        "time": {"t_end": 2.0, "samples": 5},
        "solver": {"rtol": 1e-11, "atol": 1e-13},
    }


def _field(x, beta, a, v):
    """x' = P_x (sum_j softmax_j(beta <x, A x_j>) V x_j), the formula of the model."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    scores = beta * x @ a @ x.T
    scores -= scores.max(axis=1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=1, keepdims=True)
    f = w @ (x @ v.T)
    return f - np.sum(f * x, axis=1, keepdims=True) * x


def test_a_harmonics_run_follows_scipy():
    run = tokdyn.run(_scenario("harmonics"), trajectory=True)
    assert run.summary["kernel_method"] == "harmonics"
    assert run.summary["spectral_terms"] >= 10
    s = _scenario("harmonics")["model"]
    a, v = np.array(s["A"]), np.array(s["V"])
    x0 = np.asarray(run.trajectory[0])
    n = x0.shape[0]

    def rhs(_t, y):
        return _field(y.reshape(n, 3), s["beta"], a, v).ravel()

    ref = solve_ivp(rhs, (0.0, 2.0), x0.ravel(), method="DOP853", rtol=1e-11, atol=1e-13)
    assert ref.success
    xs = ref.y[:, -1].reshape(n, 3)
    xs /= np.linalg.norm(xs, axis=1, keepdims=True)
    error = np.abs(np.asarray(run.tokens) - xs).max()
    assert error < 1e-7, error
    # The tokens moved (the comparison could fail).
    assert np.abs(xs - x0).max() > 1e-2
