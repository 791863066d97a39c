"""tokdyn from Python: transformer tokens as particles on the unit sphere.

The tokens x_1..x_n on S^{d-1} move by

    x_k' = P_k( sum_heads (1/n) sum_j h(beta <x_k, A x_j>) V x_j ),   P_k y = y - <x_k, y> x_k,

with h(y) = y (lsa), exp(y) (usa) or the softmax weights (sa). The order parameters are
R2 = (1/n) sum_k e^{2 i t_k}, R1 = |(1/n) sum_k x_k| and the nematic order
s = (d lambda_max(S) - 1) / (d - 1), S = (1/n) sum_k x_k x_k^T (docs/MATH.md).

Functions (the work is done by the Rust library, with the GIL released; Ctrl-C stops a run):

- run(scenario, *, model=None, set=None, out=None, trajectory=False, ensemble=None) -> Run
  (with ``ensemble=N``: an Ensemble of N runs over consecutive seeds)
- compare(scenario, *, set=None, out=None) -> dict
- predict(scenario, *, set=None) -> dict (like predict.json)
- sweep(sweep, *, set=None, out=None) -> dict of numpy columns (like sweep.csv)
- portrait(scenario, *, set=None, out=None) -> dict (the OA phase portrait's numbers)
- inspect(checkpoint, *, heads=None, format=None, out=None) -> dict (heads, spectra)
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
    "Ensemble",
    "run",
    "compare",
    "predict",
    "sweep",
    "portrait",
    "inspect",
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
    ``trajectory`` (samples x n x d, only with ``trajectory=True``; else None), ``clusters``
    (summary.json ``clusters``: count, sizes, diameter, separation, threshold, history, merges,
    metastable; None for the oa model) and ``clusters_series`` (clusters.csv as numpy arrays:
    ``t``, ``count`` (int64), ``largest``, ``diameter``, ``separation``, ``energy``, NaN where
    the file's cell is empty; None for the oa model), ``lyapunov`` (summary.json ``lyapunov``:
    exponents, spread, transient, t; present with a ``[lyapunov]`` section or a ``chaotic``
    label, else None); for ``model="mean-field"``: ``density`` (samples x grid float64, the
    density rho at each sample on the grid, as density.npy) and ``density_grid`` (the grid
    angles theta), else None.
    """

    __slots__ = (
        "summary",
        "lyapunov",
        "clusters",
        "clusters_series",
        "label",
        "reason",
        "features",
        "t",
        "r2",
        "r1",
        "nematic",
        "tokens",
        "trajectory",
        "density",
        "density_grid",
    )

    def __init__(self, native):
        self.summary = _json.loads(native["summary"])
        self.label = self.summary["label"]
        self.reason = self.summary["label_reason"]
        self.features = self.summary["features"]
        self.clusters = self.summary.get("clusters")
        self.lyapunov = self.summary.get("lyapunov")
        self.clusters_series = native.get("clusters_series")
        self.t = native["t"]
        self.r2 = native["r2"]
        self.r1 = native["r1"]
        self.nematic = native["nematic"]
        self.tokens = native["tokens"]
        self.trajectory = native["trajectory"]
        self.density = native.get("density")
        self.density_grid = native.get("density_grid")

    def __repr__(self):
        s = self.summary
        return (
            f"<tokdyn.Run {s['name']} ({s['model']}, {s['kernel']}, n = {s['n']}, "
            f"d = {s['d']}): {self.label}, {len(self.t)} samples>"
        )


class Ensemble:
    """A finished ensemble (``run(..., ensemble=N)``).

    Attributes: ``summary`` (summary.json: run 0's summary with the most frequent label, and
    ``ensemble``), ``label`` and ``reason``; ``runs``: ensemble.csv as a dict of numpy columns
    (``run``, ``seed``, ``label`` (str), ``cluster_count`` (NaN where not counted),
    ``r2_abs_final``, ``nematic_final``, ``r1_abs_final``, ``t_final``); ``order``:
    ensemble_order.csv's columns (``t``, ``r1_mean``, ``r1_sd``, ``nematic_mean``,
    ``nematic_sd``); the label statistics as aligned arrays ``labels`` (str), ``count``,
    ``share``, ``low``, ``high`` (Wilson 95%); ``cluster_count`` (dict min, median, max, or None).
    """

    __slots__ = (
        "summary",
        "label",
        "reason",
        "runs",
        "order",
        "labels",
        "count",
        "share",
        "low",
        "high",
        "cluster_count",
    )

    def __init__(self, summary, runs, order):
        self.summary = _json.loads(summary)
        self.label = self.summary["label"]
        self.reason = self.summary["label_reason"]
        self.runs = _columns(runs, text_columns=("label",))
        self.order = _columns(order)
        stats = self.summary["ensemble"]
        words = list(stats["labels"])
        self.labels = _np.array(words, dtype=str)
        for name in ("count", "share", "low", "high"):
            values = [stats["labels"][w][name] for w in words]
            dtype = _np.int64 if name == "count" else _np.float64
            setattr(self, name, _np.array(values, dtype=dtype))
        self.cluster_count = stats.get("cluster_count")

    def __repr__(self):
        return (
            f"<tokdyn.Ensemble {self.summary['name']}: {len(self.runs.get('run', ()))} runs, "
            f"most frequent {self.label}>"
        )


def run(scenario, *, model=None, set=None, out=None, trajectory=False, ensemble=None):
    """Runs a scenario (path or dict) and returns a Run.

    ``model`` overrides run.model (full, phase, ws, oa, group, clusters, mean-field). ``out=None`` writes nothing; a
    folder writes the run's files there as ``tokdyn run --out`` does. ``trajectory=True`` keeps
    every sample's tokens (samples x n x d floats in memory). ``ensemble=N`` sets
    ``ensemble.runs = N`` and returns an Ensemble (the per-run table and the statistics).
    """
    if ensemble is not None:
        if isinstance(ensemble, bool) or not isinstance(ensemble, int):
            raise TypeError("ensemble: expected an int (the number of runs)")
        if trajectory:
            raise ValueError("ensemble: trajectory=True keeps one run's tokens; not for ensembles")
        sets = dict(_sets(set) or {})
        sets["ensemble.runs"] = ensemble
        texts = _native.ensemble(_source(scenario), sets, model, _out(out))
        return Ensemble(*texts)
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
    """What ``tokdyn predict`` reports, as a dict like predict.json: the Ott-Antonsen analysis
    (d = 2, lsa) or, for usa / sa, ``clusters`` (``from_uniform``, ``merges``, the rates)."""
    return _json.loads(_native.predict(_source(scenario), _sets(set)))


class SweepResult(dict):
    """sweep.csv as a dict of numpy columns, with the continuations' results as attributes:
    ``branches`` (branches.csv's columns, or None), ``curves`` (curves.csv's columns, or
    None), ``cycles`` (cycles.csv's columns, or None) and ``special_points``
    (special_points.json's records as a list of dicts)."""

    branches = None
    curves = None
    cycles = None
    special_points = ()


def sweep(sweep, *, set=None, out=None):
    """Runs a sweep file; returns its sweep.csv as a dict of numpy columns (empty for a
    continuation of the mean field's stationary densities, which has no grid).

    Numbers are float64 (empty cells, e.g. ``period`` or ``cluster_count`` of an oa sweep, are
    NaN); ``label``, ``error`` and
    ``reason`` are str arrays. ``pandas.DataFrame(tokdyn.sweep(...))`` gives the table.
    ``out=None`` keeps no files; a folder keeps them there (summary.json, pictures).
    With ``[continuation]`` or ``[codim2]`` the result also has ``.branches``, ``.curves``
    (``curve``, ``kind``, the two parameters, ``r2_re``, ``r2_im``, ``point``),
    ``.cycles`` (with ``cycles = true``: ``branch``, the parameter, ``period``, ``r2_abs_min``,
    ``r2_abs_max``, ``multiplier``, ``stable``, ``point``) and ``.special_points`` (``type``,
    ``parameters``, ``r2``, ``eigenvalues``, ``l1``).
    """
    path = _source(sweep)
    if isinstance(path, dict):
        raise TypeError("sweep: expected the path of a sweep file")
    _summary, table, branches, curves, special, cycles = _native.sweep(
        path, _sets(set), _out(out)
    )
    result = SweepResult(_columns(table, text_columns=_TEXT_COLUMNS) if table else {})
    if branches:
        result.branches = _columns(branches, text_columns=("stable", "point"))
    if curves:
        result.curves = _columns(curves, text_columns=("kind", "point"))
    if cycles:
        result.cycles = _columns(cycles, text_columns=("stable", "point"))
    result.special_points = _json.loads(special) if special else []
    return result


def portrait(scenario, *, set=None, out=None):
    """What ``tokdyn portrait`` draws (d = 2, lsa; docs/MATH.md §3.5, §6.1), as numbers.

    Returns a dict: ``fixed_points`` (``r`` complex, ``eigenvalues`` k x 2 complex,
    ``stability`` str, ``on_boundary`` bool), ``boundary_zeros`` (``phi``, ``slope``,
    ``transverse``, ``attracting``), ``boundary_circle`` (dict or None), ``cycles`` (a list of
    dicts: ``kind``, ``label``, ``period``, ``multiplier``, ``r_abs_min``, ``r_abs_max``,
    ``orbit`` complex), ``t`` and ``path`` (complex R2) with ``path_source`` ("run": the
    ``order.csv`` in ``out``; "oa": the OA equation from R2(0), as the command does without a
    run), the predicted ``label`` and ``reason``, and ``picture`` (portrait.png in ``out``, or
    None: ``out=None`` keeps no files). Fixed points and cycles are ``predict``'s analysis.
    """
    source, sets = _source(scenario), _sets(set)
    picture, order = _native.portrait(source, sets, _out(out))
    p = predict(scenario, set=set)

    def table(records, names):
        return {k: _np.array([r[k] for r in records]) for k in names}

    fixed = p["fixed_points"]
    result = {
        "fixed_points": {
            "r": _np.array([complex(*f["r"]) for f in fixed], dtype=complex),
            "eigenvalues": _np.array(
                [[complex(*e) for e in f["eigenvalues"]] for f in fixed], dtype=complex
            ).reshape(len(fixed), 2),
            "stability": _np.array([f["stability"] for f in fixed], dtype=str),
            "on_boundary": _np.array([f["on_boundary"] for f in fixed], dtype=bool),
        },
        "boundary_zeros": table(
            p["boundary_zeros"], ("phi", "slope", "transverse", "attracting")
        ),
        "boundary_circle": p.get("boundary_circle"),
        "cycles": [
            dict(c, orbit=_np.array([complex(*z) for z in c["orbit"]], dtype=complex),
                 start=complex(*c["start"]))
            for c in p["limit_cycles"]
        ],
        "label": p["label"],
        "reason": p["reason"],
        "picture": None if picture is None else _os.fsdecode(picture),
    }
    if order is not None:
        with open(order, newline="") as f:
            columns = _columns(f.read())
        result["t"] = columns["t"]
        result["path"] = columns["r2_re"] + 1j * columns["r2_im"]
        result["path_source"] = "run"
    else:
        oa = run(scenario, model="oa", set=set)
        result["t"], result["path"], result["path_source"] = oa.t, oa.r2, "oa"
    return result


def inspect(checkpoint, *, heads=None, format=None, out=None):
    """What ``tokdyn inspect CHECKPOINT --heads H`` computes (docs/MATH.md §8), as numbers.

    Returns a dict: ``table`` (the printed text), ``format`` ("gpt2" or "bert"), ``d``,
    ``layers`` (list), ``dir`` (the folder of heads.csv when ``out`` is given, else None); with
    ``heads=H`` also, one entry per head in layer-major order: ``layer``, ``head`` (int64),
    ``A`` and ``V`` (heads x d x d: A_h = W_Q^h (W_K^h)^T / sqrt(d_h), V_h = (W_V^h W_O^h)^T),
    ``a_sym`` (heads x d: the eigenvalues of (A_h + A_h^T) / 2, ascending), ``v_eig`` (heads
    x d complex: the eigenvalues of V_h) and ``rows``: heads.csv as numpy columns (``layer``,
    ``head``, ``a_sym_min``, ``a_sym_max``, ``a_sym_positive``, ``v_re_min``, ``v_re_max``,
    ``v_im_max``, ``v_radius``, ``commutator`` = |A V - V A|_F / (|A|_F |V|_F), and
    ``nearly_commute`` (bool)). Bad input (no such file, heads not dividing d) is ValueError.
    """
    if heads is not None and (isinstance(heads, bool) or not isinstance(heads, int)):
        raise TypeError("heads: expected an int (heads per layer)")
    if heads is not None and heads < 0:
        raise ValueError(f"--heads: must be at least 1, found {heads}")
    path = _os.fsdecode(_os.fspath(checkpoint))
    native = _native.inspect(path, heads, None if format is None else str(format), _out(out))
    result = dict(native)
    text = result.pop("heads_csv")
    if heads is not None:
        rows = _columns(text, text_columns=("nearly_commute",))
        for name in ("layer", "head", "a_sym_positive"):
            rows[name] = rows[name].astype(_np.int64)
        rows["nearly_commute"] = rows["nearly_commute"] == "true"
        result["rows"] = rows
    if result["dir"] is not None:
        result["dir"] = _os.fsdecode(result["dir"])
    return result


def _real(value, name):
    """``value`` as a real numpy array; complex or non-numeric input is a ValueError naming
    ``name`` (numpy would drop an imaginary part silently)."""
    a = _np.asarray(value)
    if _np.iscomplexobj(a):
        raise ValueError(
            f"{name}: complex values are not accepted (the imaginary part would be dropped)"
        )
    if a.dtype.kind not in "fiub":
        raise ValueError(f"{name}: expected real numbers, got an array of dtype {a.dtype}")
    return a


def _directions(X, name="X"):
    """Tokens X (n x d) checked and scaled row by row by a power of two (exact), so that no
    row's norm overflows or underflows; a non-finite entry or a zero row is a ValueError."""
    a = _real(X, name)
    if a.ndim != 2:
        return a  # the library reports the shape
    a = a.astype(_np.float64, copy=False)
    bad = _np.argwhere(~_np.isfinite(a))
    if len(bad):
        i, j = bad[0]
        raise ValueError(f"{name}[{i}][{j}]: not a finite number")
    if a.size == 0:
        return a
    size = _np.max(_np.abs(a), axis=1)
    zero = _np.flatnonzero(size == 0)
    if len(zero):
        raise ValueError(
            f"{name}[{zero[0]}]: a zero row has no direction (rows are normalised to unit length)"
        )
    return _np.ldexp(a, -_np.frexp(size)[1][:, None])


def field(
    X,
    A,
    V=None,
    *,
    kernel="lsa",
    beta=1.0,
    mask="none",
    normalization="post",
    ngpt_alpha=1.0,
    position=None,
):
    """One evaluation of the sphere field at the tokens X (n x d).

    ``A`` and ``V`` are d x d matrices (one head) or equal-length lists of them (heads whose
    fields add). Or ``A`` is a list of heads (``V`` omitted), each a dict ``{"A": .., "V": ..}``
    or, factored in the checkpoints' row-vector convention, ``{"Q": .., "K": .., "V": .., "O":
    ..}`` with Q, K, V d x d_h and O d_h x d (A = Q K^T / sqrt(d_h), value matrix (V O)^T).
    ``mask`` is "none" or "causal" (token k attends to j <= k); ``normalization="pre"`` returns
    the unprojected field of the directions X / |X| (pre-LN). Arrays may be float32 or float64,
    C or Fortran order; the result is a new float64 array n x d. Each row of X is normalised to
    unit length first (the field is that of the points x_k / |x_k| on the sphere); the head
    matrices are used as given. Complex arrays, non-finite entries, zero rows of X and a field
    that overflows (e.g. ``usa`` with a large beta) raise ValueError naming the argument.
    ``normalization="peri"`` returns the normalised update a_k / |a_k| (unprojected),
    ``"ngpt"`` ``ngpt_alpha`` P_k a_k / |a_k|. ``position`` is None, ``{"rope": {"base": b}}``
    (token k at position k; a head given by A is rotated as Q = A, K = I) or
    ``{"alibi": {"slopes": [m, ...]}}`` (one slope per head, heads given by A first).
    """
    rope_base, alibi_slopes = _position(position)
    heads_a, heads_v, factors = [], [], []
    if V is None:
        heads = [A] if isinstance(A, dict) else list(A)
        for i, head in enumerate(heads):
            if not isinstance(head, dict):
                raise ValueError(f"heads[{i}]: expected a dict with A, V or Q, K, V, O")
            if set(head) == {"A", "V"}:
                heads_a.append(_real(head["A"], f"heads[{i}].A"))
                heads_v.append(_real(head["V"], f"heads[{i}].V"))
            elif set(head) == {"Q", "K", "V", "O"}:
                factors.append([_real(head[k], f"heads[{i}].{k}") for k in ("Q", "K", "V", "O")])
            else:
                raise ValueError(
                    f"heads[{i}]: keys {sorted(head)}: expected A, V or Q, K, V, O"
                )
    else:
        heads_a = [A] if _np.ndim(A) == 2 else list(A)
        heads_v = [V] if _np.ndim(V) == 2 else list(V)
        heads_a = [_real(a, f"A[{h}]") for h, a in enumerate(heads_a)]
        heads_v = [_real(v, f"V[{h}]") for h, v in enumerate(heads_v)]
    result = _native.field(
        _directions(X),
        heads_a,
        heads_v,
        factors,
        str(kernel),
        float(beta),
        str(mask),
        str(normalization),
        float(ngpt_alpha),
        rope_base,
        alibi_slopes,
    )
    if not _np.all(_np.isfinite(result)):
        raise ValueError(
            f"beta, A, V: the {kernel} field overflows at these tokens (a weight or a product "
            "is beyond the largest float); lower beta or the scale of A and V"
        )
    return result


def _position(position):
    """(rope_base, alibi_slopes) of ``field``'s ``position`` argument."""
    if position is None:
        return None, None
    if isinstance(position, dict) and len(position) == 1:
        ((kind, inner),) = position.items()
        if kind == "rope" and isinstance(inner, dict) and set(inner) <= {"base"}:
            return float(inner.get("base", 10000.0)), None
        if kind == "alibi" and isinstance(inner, dict) and set(inner) == {"slopes"}:
            return None, [float(m) for m in inner["slopes"]]
    raise ValueError(
        'position: expected None, {"rope": {"base": b}} or {"alibi": {"slopes": [...]}}'
    )


def order_parameters(X):
    """Order parameters of tokens X (n x d): a dict with ``r2`` (complex), ``r1``, ``nematic``
    and ``axis`` (the leading eigenvector of S when d > 2, else None).

    Each row of X is normalised to unit length first, so any non-zero scale of a row gives the
    same result; complex arrays, non-finite entries and zero rows raise ValueError naming X.
    """
    a = _directions(X)
    if a.ndim == 2 and a.size:
        a = a / _np.linalg.norm(a, axis=1, keepdims=True)
    return _native.order_parameters(a)
