"""Noise through dict scenarios and ``run(..., ensemble=N)``: every row is the single run with
its seeds, the statistics follow from the rows (Wilson intervals computed here)."""

import math

import numpy as np
import pytest

import tokdyn


def noisy(n=40, seed=5, noise_seed=20):
    return {
        "name": "py-ensemble",
        "model": {
            "kernel": "usa",
            "beta": 0.0,
            "d": 2,
            "A": "identity",
            "V": "identity",
        },
        "tokens": {"n": n, "seed": seed},
        "time": {"t_end": 3.0, "samples": 31},
        "noise": {"temperature": 0.3, "seed": noise_seed, "dt": 0.05},
    }


def wilson(k, n, z=1.959963984540054):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def test_noise_works_through_a_dict_and_depends_on_its_seed():
    a = tokdyn.run(noisy())
    b = tokdyn.run(noisy())
    c = tokdyn.run(noisy(noise_seed=21))
    assert np.array_equal(a.tokens, b.tokens)
    assert not np.array_equal(a.tokens, c.tokens)
    assert np.allclose(np.linalg.norm(a.tokens, axis=1), 1.0, atol=1e-12)
    assert "r1_abs_mean" in a.features and "nematic_sd" in a.features
    with pytest.raises(ValueError, match="noise.temperature"):
        tokdyn.run({**noisy(), "noise": {"temperature": -1.0}})


def test_ensemble_rows_are_the_single_runs_and_the_statistics_follow():
    e = tokdyn.run(noisy(), ensemble=4)
    assert isinstance(e, tokdyn.Ensemble)
    assert e.runs["run"].tolist() == [0, 1, 2, 3]
    assert e.runs["seed"].tolist() == [5, 6, 7, 8]
    for i in range(4):
        single = tokdyn.run(noisy(seed=5 + i, noise_seed=20 + i))
        assert e.runs["label"][i] == single.label
        assert e.runs["r1_abs_final"][i] == single.r1[-1]
        assert e.runs["nematic_final"][i] == single.nematic[-1]
    assert e.count.sum() == 4
    for word, k, share, low, high in zip(e.labels, e.count, e.share, e.low, e.high):
        assert k == np.sum(e.runs["label"] == word)
        assert share == k / 4
        lo, hi = wilson(k, 4)
        assert abs(low - lo) < 1e-12 and abs(high - hi) < 1e-12
    r1 = np.array([tokdyn.run(noisy(seed=5 + i, noise_seed=20 + i)).r1 for i in range(4)])
    assert np.allclose(e.order["r1_mean"], r1.mean(axis=0), rtol=0, atol=1e-12)
    assert np.allclose(e.order["r1_sd"], r1.std(axis=0, ddof=1), rtol=0, atol=1e-12)
    with pytest.raises(TypeError):
        tokdyn.run(noisy(), ensemble="4")
    with pytest.raises(ValueError, match="ensemble.runs"):
        tokdyn.run(noisy(), ensemble=0)
