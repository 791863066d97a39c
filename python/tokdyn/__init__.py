"""tokdyn from Python: transformer tokens as particles on the unit sphere.

The tokens x_1..x_n on S^{d-1} move by

    x_k' = P_k( sum_heads (1/n) sum_j h(beta <x_k, A x_j>) V x_j ),   P_k y = y - <x_k, y> x_k,

with h(y) = y (lsa), exp(y) (usa) or the softmax weights (sa). The order parameters are
R2 = (1/n) sum_k e^{2 i t_k}, R1 = |(1/n) sum_k x_k| and the nematic order
s = (d lambda_max(S) - 1) / (d - 1), S = (1/n) sum_k x_k x_k^T (docs/MATH.md).

Functions (the work is done by the Rust library, with the GIL released; Ctrl-C stops a run):

- run(scenario, *, model=None, set=None, out=None, trajectory=False) -> Run
- compare(scenario, *, set=None, out=None) -> dict
- predict(scenario, *, set=None) -> dict (like predict.json)
- sweep(sweep, *, set=None, out=None) -> dict of numpy columns (like sweep.csv)
- field(X, A, V, *, kernel="lsa", beta=1.0) -> ndarray n x d
- order_parameters(X) -> dict

A scenario is a path to a TOML file or a dict with the file's structure; relative paths inside a
dict are relative to the current directory. ``set`` is a dict of dotted keys to values, read like
``--set KEY=VALUE`` (a str value is the text after ``=``). Bad input raises ValueError with the
command line's message; a run that fails raises RuntimeError saying when.
"""

import csv as _csv
import io as _io
import json as _json
import os as _os

import numpy as _np

from . import _native

__all__ = [
    "Run",
    "run",
    "compare",
    "predict",
    "sweep",
    "field",
    "order_parameters",
    "__version__",
]

__version__ = _native.version()


def _source(scenario):
    """A path-like as str, a dict as is."""
    if isinstance(scenario, dict):
        return scenario
    if isinstance(scenario, (str, bytes, _os.PathLike)):
        return _os.fsdecode(_os.fspath(scenario))
    raise TypeError(
        "scenario: expected a path or a dict, got " + type(scenario).__name__
    )


def _sets(set):
    if set is None:
        return None
    if not isinstance(set, dict):
        raise TypeError("set: expected a dict of dotted keys to values")
    return set


def _out(out):
    return None if out is None else _os.fsdecode(_os.fspath(out))


class Run:
    """A finished run.

    Attributes: ``label`` and ``reason`` (the classifier's), ``features`` (dict), ``summary``
    (the content of summary.json), ``t`` (sample times), ``r2`` (complex128), ``r1`` (NaN for the
    oa model), ``nematic``, ``tokens`` (final tokens, n x d, None for the oa model) and
    ``trajectory`` (samples x n x d, only with ``trajectory=True``; else None).
    """

    __slots__ = (
        "summary",
        "label",
        "reason",
        "features",
        "t",
        "r2",
        "r1",
        "nematic",
        "tokens",
        "trajectory",
    )

    def __init__(self, native):
        self.summary = _json.loads(native["summary"])
        self.label = self.summary["label"]
        self.reason = self.summary["label_reason"]
        self.features = self.summary["features"]
        self.t = native["t"]
        self.r2 = native["r2"]
        self.r1 = native["r1"]
        self.nematic = native["nematic"]
        self.tokens = native["tokens"]
        self.trajectory = native["trajectory"]

    def __repr__(self):
        s = self.summary
        return (
            f"<tokdyn.Run {s['name']} ({s['model']}, {s['kernel']}, n = {s['n']}, "
            f"d = {s['d']}): {self.label}, {len(self.t)} samples>"
        )


def run(scenario, *, model=None, set=None, out=None, trajectory=False):
    """Runs a scenario (path or dict) and returns a Run.

    ``model`` overrides run.model (full, phase, ws, oa, ...). ``out=None`` writes nothing; a
    folder writes the run's files there as ``tokdyn run --out`` does. ``trajectory=True`` keeps
    every sample's tokens (samples x n x d floats in memory).
    """
    native = _native.run(
        _source(scenario), _sets(set), model, _out(out), bool(trajectory)
    )
    return Run(native)


def _columns(text, text_columns=(), complex_pairs=()):
    """CSV text to a dict of numpy columns: numbers as float64 (empty cells NaN), text as str;
    ``text_columns`` are always str; each name in ``complex_pairs`` joins NAME_re, NAME_im."""
    rows = list(_csv.reader(_io.StringIO(text)))
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    columns = {}
    for i, name in enumerate(header):
        cells = [r[i] if i < len(r) else "" for r in body]
        if name in text_columns:
            columns[name] = _np.array(cells, dtype=str)
            continue
        try:
            columns[name] = _np.array(
                [float(c) if c != "" else _np.nan for c in cells], dtype=_np.float64
            )
        except ValueError:
            columns[name] = _np.array(cells, dtype=str)
    for name in list(columns):
        if name.endswith("_re") and name[:-3] + "_im" in columns:
            base = name[:-3]
            if base in complex_pairs:
                columns[base] = columns.pop(name) + 1j * columns.pop(base + "_im")
    return columns


_TEXT_COLUMNS = ("label", "error", "reason")


def compare(scenario, *, set=None, out=None):
    """The full model and its reductions from the same tokens.

    Returns a dict: ``t``, one complex128 array of R2 per model (``full``, ``phase``, ``ws``,
    ``oa``, and any other the library compares), ``compare`` (max |dR2| against the full model
    and the wall time of each) and ``summary`` (the full run's summary.json). ``out=None``
    keeps no files.
    """
    summary, table = _native.compare(_source(scenario), _sets(set), _out(out))
    summary = _json.loads(summary)
    names = [h[:-3] for h in table.split("\n", 1)[0].strip().split(",") if h.endswith("_re")]
    result = _columns(table, complex_pairs=names)
    result["compare"] = summary.get("compare")
    result["summary"] = summary
    return result


def predict(scenario, *, set=None):
    """The Ott-Antonsen analysis of a scenario (d = 2, lsa): a dict like predict.json."""
    return _json.loads(_native.predict(_source(scenario), _sets(set)))


def sweep(sweep, *, set=None, out=None):
    """Runs a sweep file; returns its sweep.csv as a dict of numpy columns.

    Numbers are float64 (empty cells, e.g. ``period``, are NaN); ``label``, ``error`` and
    ``reason`` are str arrays. ``pandas.DataFrame(tokdyn.sweep(...))`` gives the table.
    ``out=None`` keeps no files; a folder keeps them there (summary.json, pictures).
    """
    path = _source(sweep)
    if isinstance(path, dict):
        raise TypeError("sweep: expected the path of a sweep file")
    _summary, table = _native.sweep(path, _sets(set), _out(out))
    return _columns(table, text_columns=_TEXT_COLUMNS)


def field(X, A, V=None, *, kernel="lsa", beta=1.0, mask="none", normalization="post"):
    """One evaluation of the sphere field at the tokens X (n x d).

    ``A`` and ``V`` are d x d matrices (one head) or equal-length lists of them (heads whose
    fields add). Or ``A`` is a list of heads (``V`` omitted), each a dict ``{"A": .., "V": ..}``
    or, factored in the checkpoints' row-vector convention, ``{"Q": .., "K": .., "V": .., "O":
    ..}`` with Q, K, V d x d_h and O d_h x d (A = Q K^T / sqrt(d_h), value matrix (V O)^T).
    ``mask`` is "none" or "causal" (token k attends to j <= k); ``normalization="pre"`` returns
    the unprojected field of the directions X / |X| (pre-LN). Arrays may be float32 or float64,
    C or Fortran order; the result is a new float64 array n x d. Rows of X are used as given.
    """
    heads_a, heads_v, factors = [], [], []
    if V is None:
        heads = [A] if isinstance(A, dict) else list(A)
        for i, head in enumerate(heads):
            if not isinstance(head, dict):
                raise ValueError(f"heads[{i}]: expected a dict with A, V or Q, K, V, O")
            if set(head) == {"A", "V"}:
                heads_a.append(head["A"])
                heads_v.append(head["V"])
            elif set(head) == {"Q", "K", "V", "O"}:
                factors.append([head["Q"], head["K"], head["V"], head["O"]])
            else:
                raise ValueError(
                    f"heads[{i}]: keys {sorted(head)}: expected A, V or Q, K, V, O"
                )
    else:
        heads_a = [A] if _np.ndim(A) == 2 else list(A)
        heads_v = [V] if _np.ndim(V) == 2 else list(V)
    return _native.field(
        X, heads_a, heads_v, factors, str(kernel), float(beta), str(mask), str(normalization)
    )


def order_parameters(X):
    """Order parameters of tokens X (n x d): a dict with ``r2`` (complex), ``r1``, ``nematic``
    and ``axis`` (the leading eigenvector of S when d > 2, else None)."""
    return _native.order_parameters(X)
