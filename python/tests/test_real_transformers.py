"""Real transformers through Python: dict scenarios with mask, factored heads, pre-LN and
beta = gamma ln n against an integration written here with numpy and scipy (DOP853 at tight
tolerances), and `tokdyn.field` with factored heads against the formula."""

import numpy as np
import pytest
import tokdyn

solve_ivp = pytest.importorskip("scipy.integrate").solve_ivp

D, DH, N = 4, 2, 9


def factors(seed):
    rng = np.random.default_rng(seed)
    return {
        "Q": rng.normal(size=(D, DH)),
        "K": rng.normal(size=(D, DH)),
        "V": rng.normal(size=(D, DH)) * 0.7,
        "O": rng.normal(size=(DH, D)) * 0.7,
    }


def attention(z, heads, kernel, beta, causal):
    """y_k = sum_h sum_{j in J(k)} w_kj z_j V O in the row-vector convention."""
    n = z.shape[0]
    y = np.zeros_like(z)
    for h in heads:
        s = beta * (z @ h["Q"]) @ (z @ h["K"]).T / np.sqrt(h["Q"].shape[1])
        out = z @ h["V"] @ h["O"]
        for k in range(n):
            last = k + 1 if causal else n
            sk = s[k, :last]
            if kernel == "lsa":
                w = sk / last
            elif kernel == "usa":
                w = np.exp(sk) / last
            else:
                e = np.exp(sk - sk.max())
                w = e / e.sum()
            y[k] += w @ out[:last]
    return y


def rate(x, heads, kernel, beta, causal, pre):
    z = x / np.linalg.norm(x, axis=1, keepdims=True)
    y = attention(z, heads, kernel, beta, causal)
    if pre:
        return y
    return y - np.sum(y * z, axis=1, keepdims=True) * z


def order(x):
    z = x / np.linalg.norm(x, axis=1, keepdims=True)
    r2 = np.mean(np.exp(2j * np.arctan2(z[:, 1], z[:, 0])))
    return r2, np.linalg.norm(z.mean(axis=0))


def scenario(kernel, heads, mask="none", normalization="post", beta=1.0):
    return {
        "name": "py-real",
        "model": {
            "kernel": kernel,
            "beta": beta,
            "d": D,
            "mask": mask,
            "normalization": normalization,
            "heads": [{k: v.tolist() for k, v in h.items()} for h in heads],
        },
        "tokens": {"n": N, "init": "uniform", "seed": 3},
        "time": {"t_end": 2.0, "samples": 5},
        "solver": {"rtol": 1e-12, "atol": 1e-14},
    }


def largest_difference(s, heads, kernel, beta, causal, pre):
    r = tokdyn.run(s, trajectory=True)
    x0 = np.asarray(r.trajectory[0])
    f = lambda t, y: rate(y.reshape(N, D), heads, kernel, beta, causal, pre).ravel()
    sol = solve_ivp(f, (0.0, 2.0), x0.ravel(), method="DOP853", t_eval=r.t, rtol=1e-12, atol=1e-14)
    assert sol.success
    worst = 0.0
    for i in range(len(r.t)):
        r2, r1 = order(sol.y[:, i].reshape(N, D))
        worst = max(worst, abs(r.r2[i] - r2), abs(r.r1[i] - r1))
    assert abs(order(sol.y[:, 0].reshape(N, D))[0] - order(sol.y[:, -1].reshape(N, D))[0]) > 1e-3
    return worst


@pytest.mark.parametrize("kernel", ["lsa", "usa", "sa"])
def test_causal_factored_heads_match_scipy(kernel):
    heads = [factors(1), factors(2)]
    s = scenario(kernel, heads, mask="causal")
    assert largest_difference(s, heads, kernel, 1.0, True, False) < 1e-8


def test_causal_pre_ln_matches_scipy():
    heads = [factors(3), factors(4)]
    s = scenario("sa", heads, mask="causal", normalization="pre")
    assert largest_difference(s, heads, "sa", 1.0, True, True) < 1e-8


def test_long_context_beta_matches_scipy():
    heads = [factors(5)]
    s = scenario("sa", heads, beta={"log_n": 0.7})
    assert largest_difference(s, heads, "sa", 0.7 * np.log(N), False, False) < 1e-8


def test_field_with_factored_heads_and_a_mask():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(N, D))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    heads = [factors(6), factors(7)]
    for mask in ["none", "causal"]:
        got = tokdyn.field(x, heads, kernel="sa", beta=1.3, mask=mask)
        expected = rate(x, heads, "sa", 1.3, mask == "causal", False)
        assert np.max(np.abs(got - expected)) < 1e-12
        # The same heads formed as A and V.
        formed = [
            {"A": h["Q"] @ h["K"].T / np.sqrt(DH), "V": (h["V"] @ h["O"]).T} for h in heads
        ]
        again = tokdyn.field(x, formed, kernel="sa", beta=1.3, mask=mask)
        assert np.max(np.abs(got - again)) < 1e-12
    with pytest.raises(ValueError, match="mask"):
        tokdyn.field(x, heads, mask="future")
    with pytest.raises(ValueError, match=r"heads\[0\].K"):
        tokdyn.field(x, [dict(heads[0], K=np.zeros((D, 3)))])
