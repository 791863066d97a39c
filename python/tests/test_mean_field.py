"""`model="mean-field"`: the density, against the CLI's density.npy and against its own mass."""

import json

import numpy as np

import tokdyn
from conftest import SCENARIOS, cli, read_csv

SCENARIO = SCENARIOS / "meanfield-usa-discontinuous.toml"
SHORT = {"time.t_end": 5.0, "time.samples": 51}


def test_mean_field_returns_the_density_of_the_cli(tmp_path):
    out = tmp_path / "cli"
    cli("run", SCENARIO, "--out", out, sets=SHORT)
    r = tokdyn.run(SCENARIO, set=SHORT)
    grid = read_csv(out / "density_grid.csv")["theta"]
    density = np.load(out / "density.npy")
    assert r.density.shape == density.shape == (51, grid.shape[0])
    assert np.array_equal(r.density, density)
    assert np.array_equal(r.density_grid, grid)
    # Mass 1 at every sample (the trapezoid rule is exact on the grid's modes).
    mass = r.density.sum(axis=1) * 2 * np.pi / grid.shape[0]
    assert np.allclose(mass, 1.0, rtol=0, atol=1e-12)
    # |R1| from the density itself, against the run's exact order parameter.
    r1 = np.abs((r.density * np.exp(1j * grid)).sum(axis=1) * 2 * np.pi / grid.shape[0])
    assert np.allclose(r1, r.r1, rtol=0, atol=1e-12)
    summary = json.loads((out / "summary.json").read_text())
    assert r.summary["mean_field"]["grid"] == summary["mean_field"]["grid"]
    assert r.tokens is None and r.clusters_series is None


def test_mean_field_model_override(tmp_path):
    r = tokdyn.run(SCENARIOS / "case4-oscillation.toml", model="mean-field",
                   set={"time.t_end": 10.0, "time.samples": 101})
    assert r.summary["model"] == "mean-field"
    assert r.density.shape[0] == 101
    assert np.isfinite(r.density).all()


def test_mean_field_in_three_dimensions_returns_the_axisymmetric_density():
    # d = 3, A = V = I: the density of u = <x, e> on its Gauss–Legendre nodes.
    scenario = {
        "name": "mf3",
        "model": {"kernel": "usa", "beta": 2.0, "d": 3, "A": "identity", "V": "identity"},
        "tokens": {"n": 1, "init": "uniform"},
        "density": {"init": "von-mises", "kappa": 1.0},
        "noise": {"temperature": 0.3},
        "time": {"t_end": 2.0, "samples": 21},
        "run": {"model": "mean-field"},
    }
    r = tokdyn.run(scenario)
    u = r.density_grid
    assert r.density.shape == (21, u.shape[0])
    # numpy's own Gauss–Legendre rule on as many nodes: the same nodes, and its weights give
    # the mass (2 pi int rho du = 1) and <u> = |R1|.
    x, w = np.polynomial.legendre.leggauss(u.shape[0])
    assert np.allclose(u, x, rtol=0, atol=1e-13)
    mass = 2 * np.pi * (r.density * w).sum(axis=1)
    assert np.allclose(mass, 1.0, rtol=0, atol=1e-12)
    mean = 2 * np.pi * (r.density * w * u).sum(axis=1)
    assert np.allclose(np.abs(mean), r.r1, rtol=0, atol=1e-12)
