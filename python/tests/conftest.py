"""Shared fixtures: the repository, the `tokdyn` binary of the same tree, and a CLI runner."""

import csv
import os
import pathlib
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
CASE4 = SCENARIOS / "case4-oscillation.toml"

# A short case-4 run: fast, and still an oscillation.
SMALL = {"tokens.n": 128, "time.t_end": 40.0, "time.samples": 401}


def binary():
    path = pathlib.Path(os.environ.get("TOKDYN_BIN", ROOT / "target" / "release" / "tokdyn"))
    if not path.exists():
        pytest.fail(f"{path}: no tokdyn binary; run `cargo build --release` first (or set TOKDYN_BIN)")
    return path


def cli(*args, cwd=None, sets=None, code=0):
    """Runs the tokdyn binary; returns the completed process (checked against `code`)."""
    argv = [str(binary()), *map(str, args)]
    for key, value in (sets or {}).items():
        argv += ["--set", f"{key}={value}"]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == code, (argv, done.returncode, done.stderr)
    return done


def read_csv(path):
    """A CSV file with a header as a dict of float columns (empty cells NaN) or str columns."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    out = {}
    for i, name in enumerate(rows[0]):
        cells = [r[i] for r in rows[1:]]
        try:
            out[name] = np.array([float(c) if c else np.nan for c in cells])
        except ValueError:
            out[name] = np.array(cells, dtype=str)
    return out


@pytest.fixture
def small():
    return dict(SMALL)
