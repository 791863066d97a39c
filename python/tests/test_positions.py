"""Positions (RoPE, ALiBi) and normalisations (peri-LN, nGPT) through Python: dict scenarios
against an integration written here with numpy and scipy (DOP853 at tight tolerances), and
`tokdyn.field` against the formulas. RoPE is written as Hugging Face's Llama applies it
(q * cos + rotate_half(q) * sin on queries and keys at their positions), ALiBi as the bias
-m |p_k - p_j| added to the scores."""

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


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rope(x, base):
    """Hugging Face's apply_rotary_pos_emb for positions 0..n-1 (rows of x)."""
    n, e = x.shape
    inv_freq = base ** (-np.arange(0, e, 2) / e)
    angles = np.outer(np.arange(n), inv_freq)
    emb = np.concatenate([angles, angles], axis=-1)
    return x * np.cos(emb) + rotate_half(x) * np.sin(emb)


def attention(z, heads, kernel, beta, causal, position):
    n = z.shape[0]
    y = np.zeros_like(z)
    for h, head in enumerate(heads):
        q, k = z @ head["Q"], z @ head["K"]
        if position and "rope" in position:
            q, k = rope(q, position["rope"]["base"]), rope(k, position["rope"]["base"])
        s = beta * q @ k.T / np.sqrt(head["Q"].shape[1])
        if position and "alibi" in position:
            p = np.arange(n)
            s = s - position["alibi"]["slopes"][h] * np.abs(p[:, None] - p[None, :])
        out = z @ head["V"] @ head["O"]
        for i in range(n):
            last = i + 1 if causal else n
            si = s[i, :last]
            if kernel == "lsa":
                w = si / last
            elif kernel == "usa":
                w = np.exp(si) / last
            else:
                e = np.exp(si - si.max())
                w = e / e.sum()
            y[i] += w @ out[:last]
    return y


def rate(x, heads, kernel, beta, causal, position, normalization, alpha=1.0):
    z = x / np.linalg.norm(x, axis=1, keepdims=True)
    a = attention(z, heads, kernel, beta, causal, position)
    projected = a - np.sum(a * z, axis=1, keepdims=True) * z
    size = np.linalg.norm(a, axis=1, keepdims=True)
    return {
        "post": projected,
        "pre": a,
        "peri": a / size,
        "ngpt": alpha * projected / size,
    }[normalization]


def order(x):
    z = x / np.linalg.norm(x, axis=1, keepdims=True)
    r2 = np.mean(np.exp(2j * np.arctan2(z[:, 1], z[:, 0])))
    return r2, np.linalg.norm(z.mean(axis=0))


def scenario(kernel, heads, mask, position, normalization="post", alpha=1.0):
    model = {
        "kernel": kernel,
        "beta": 1.0,
        "d": D,
        "mask": mask,
        "normalization": normalization,
        "heads": [{k: v.tolist() for k, v in h.items()} for h in heads],
    }
    if position is not None:
        model["position"] = position
    if normalization == "ngpt":
        model["ngpt_alpha"] = alpha
    return {
        "name": "py-positions",
        "model": model,
        "tokens": {"n": N, "init": "uniform", "seed": 3},
        "time": {"t_end": 2.0, "samples": 5},
        "solver": {"rtol": 1e-12, "atol": 1e-14},
    }


def largest_difference(s, heads, kernel, causal, position, normalization, alpha=1.0):
    r = tokdyn.run(s, trajectory=True)
    x0 = np.asarray(r.trajectory[0])
    f = lambda t, y: rate(
        y.reshape(N, D), heads, kernel, 1.0, causal, position, normalization, alpha
    ).ravel()
    sol = solve_ivp(f, (0.0, 2.0), x0.ravel(), method="DOP853", t_eval=r.t, rtol=1e-12, atol=1e-14)
    assert sol.success
    worst = 0.0
    for i in range(len(r.t)):
        r2, r1 = order(sol.y[:, i].reshape(N, D))
        worst = max(worst, abs(r.r2[i] - r2), abs(r.r1[i] - r1))
    # The run moved (the comparison could fail).
    assert abs(order(sol.y[:, 0].reshape(N, D))[0] - order(sol.y[:, -1].reshape(N, D))[0]) > 1e-3
    return worst


POSITIONS = [
    {"rope": {"base": 10.0}},
    {"alibi": {"slopes": [0.4, 0.1]}},
]


@pytest.mark.parametrize("kernel", ["lsa", "usa", "sa"])
@pytest.mark.parametrize("mask", ["none", "causal"])
@pytest.mark.parametrize("position", POSITIONS, ids=["rope", "alibi"])
def test_positions_on_factored_heads_match_scipy(kernel, mask, position):
    heads = [factors(1), factors(2)]
    s = scenario(kernel, heads, mask, position)
    assert largest_difference(s, heads, kernel, mask == "causal", position, "post") < 1e-8


@pytest.mark.parametrize("normalization,alpha", [("peri", 1.0), ("ngpt", 1.0), ("ngpt", 0.5)])
def test_peri_ln_and_ngpt_match_scipy(normalization, alpha):
    heads = [factors(3), factors(4)]
    s = scenario("sa", heads, "causal", POSITIONS[0], normalization, alpha)
    worst = largest_difference(s, heads, "sa", True, POSITIONS[0], normalization, alpha)
    assert worst < 1e-8


def test_field_with_positions_and_normalisations():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(N, D))
    heads = [factors(6), factors(7)]
    for mask in ["none", "causal"]:
        for position in POSITIONS:
            for normalization in ["post", "pre", "peri", "ngpt"]:
                got = tokdyn.field(
                    x, heads, kernel="sa", beta=1.3, mask=mask, position=position,
                    normalization=normalization, ngpt_alpha=0.7,
                )
                expected = rate(
                    x, heads, "sa", 1.3, mask == "causal", position, normalization, 0.7
                )
                assert np.max(np.abs(got - expected)) < 1e-12
    # ALiBi with zero slopes is no position.
    zero = tokdyn.field(x, heads, kernel="usa", position={"alibi": {"slopes": [0.0, 0.0]}})
    assert np.max(np.abs(zero - tokdyn.field(x, heads, kernel="usa"))) < 1e-12
    with pytest.raises(ValueError, match="slopes"):
        tokdyn.field(x, heads, position={"alibi": {"slopes": [0.1]}})
    with pytest.raises(ValueError, match="even"):
        odd = dict(heads[0], Q=np.ones((D, 1)), K=np.ones((D, 1)), V=np.ones((D, 1)),
                   O=np.ones((1, D)))
        tokdyn.field(x, [odd], position={"rope": {"base": 10.0}})
    with pytest.raises(ValueError, match="ngpt_alpha"):
        tokdyn.field(x, heads, normalization="ngpt", ngpt_alpha=0.0)


@pytest.mark.parametrize(
    "model,key",
    [
        ({"position": {"rope": {"base": 10.0}}, "d": 3}, "model.position.rope"),
        ({"position": {"alibi": {"slopes": [0.1, 0.2]}}}, "model.position.alibi.slopes"),
        ({"normalization": "ngpt", "ngpt_alpha": -1.0}, "model.ngpt_alpha"),
        ({"normalization": "mid"}, "normalization"),
    ],
)
def test_bad_positions_and_normalisations_are_refused(model, key):
    s = {
        "name": "bad",
        "model": dict({"kernel": "sa", "beta": 1.0, "d": 4, "A": "identity", "V": "identity"}, **model),
        "tokens": {"n": 8},
        "time": {"t_end": 1.0, "samples": 3},
    }
    with pytest.raises(ValueError, match=key):
        tokdyn.run(s)
