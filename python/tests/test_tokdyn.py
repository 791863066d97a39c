"""The Python module against the tokdyn binary of the same tree and against numpy."""

import json
import math
import signal
import subprocess
import sys
import threading
import time
import tomllib

import numpy as np
import pytest

import tokdyn
from conftest import CASE4, cli, read_csv


def cli_run(tmp_path, sets, *extra):
    out = tmp_path / "cli"
    cli("run", CASE4, "--out", out, *extra, sets=sets)
    return out


# --- run ---------------------------------------------------------------------------------


def test_run_has_the_cli_order_parameters_bit_for_bit(tmp_path, small):
    out = cli_run(tmp_path, small)
    order = read_csv(out / "order.csv")
    r = tokdyn.run(CASE4, set=small)
    assert r.r2.dtype == np.complex128 and r.t.dtype == np.float64
    assert r.r2.shape == (401,)
    assert np.array_equal(r.t, order["t"])
    assert np.array_equal(r.r2.real, order["r2_re"])
    assert np.array_equal(r.r2.imag, order["r2_im"])
    assert np.array_equal(r.r1, order["r1_abs"])
    assert np.array_equal(r.nematic, order["nematic"])
    assert np.allclose(np.abs(r.r2), order["r2_abs"], rtol=0, atol=1e-15)
    summary = json.loads((out / "summary.json").read_text())
    assert r.label == summary["label"] == "oscillation"
    assert r.reason == summary["label_reason"]
    assert r.features == summary["features"]
    assert r.summary["scenario"] == summary["scenario"]
    tokens = np.loadtxt(out / "tokens_final.csv", delimiter=",", skiprows=1, ndmin=2)
    assert r.tokens.shape == (128, 2)
    assert np.array_equal(r.tokens, tokens)
    assert r.trajectory is None


def test_run_with_out_writes_the_cli_files(tmp_path, small):
    cli_out = cli_run(tmp_path, small)
    r = tokdyn.run(str(CASE4), set=small, out=tmp_path / "py")
    py_out = tmp_path / "py"
    assert (py_out / "order.csv").read_bytes() == (cli_out / "order.csv").read_bytes()
    assert (py_out / "tokens_final.csv").read_bytes() == (cli_out / "tokens_final.csv").read_bytes()
    assert (py_out / "order.png").exists()
    assert json.loads((py_out / "summary.json").read_text())["label"] == r.label


def test_run_without_out_writes_nothing(tmp_path, small, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tokdyn.run(CASE4, set=small)
    assert list(tmp_path.iterdir()) == []


def test_model_override_and_reduced_models(tmp_path, small):
    out = tmp_path / "cli"
    cli("run", CASE4, "--out", out, "--model", "oa", sets=small)
    order = read_csv(out / "order.csv")
    r = tokdyn.run(CASE4, model="oa", set=small)
    assert r.summary["model"] == "oa"
    assert np.array_equal(r.r2.real, order["r2_re"])
    assert np.array_equal(r.r2.imag, order["r2_im"])
    assert np.isnan(r.r1).all() and r.tokens is None
    ws = tokdyn.run(CASE4, model="ws", set=small)
    assert ws.tokens.shape == (128, 2)
    # Watanabe-Strogatz is exact for the full d = 2 LSA model.
    assert np.max(np.abs(ws.r2 - tokdyn.run(CASE4, set=small).r2)) < 1e-6


def test_trajectory_is_the_motion_under_the_field(small):
    sets = dict(small, **{"tokens.n": 32})
    r = tokdyn.run(CASE4, set=sets, trajectory=True)
    tr = r.trajectory
    assert tr.shape == (401, 32, 2)
    assert np.array_equal(tr[-1], r.tokens)
    for i in (0, 200, 400):
        assert tokdyn.order_parameters(tr[i])["r2"] == r.r2[i]
    # Central differences of the samples against the field at the middle sample (second method).
    scenario = tomllib.loads(CASE4.read_text())
    v11, v12 = scenario["params"]["v11"], scenario["params"]["v12"]
    V = np.array([[v11, v12], [-v12, -v11]])
    dt = r.t[1] - r.t[0]
    i = 200
    derivative = (tr[i + 1] - tr[i - 1]) / (2 * dt)
    assert np.max(np.abs(derivative - tokdyn.field(tr[i], np.eye(2), V))) < 1e-3


# --- scenarios as dicts, set, errors -------------------------------------------------------


def test_a_dict_scenario_runs_like_its_file(small):
    scenario = tomllib.loads(CASE4.read_text())
    a = tokdyn.run(scenario, set=small)
    b = tokdyn.run(CASE4, set=small)
    assert np.array_equal(a.r2, b.r2) and a.label == b.label
    scenario["model"]["V"] = np.array([[0.2, 1.0], [-1.0, -0.2]])  # numpy values are fine
    scenario["tokens"]["n"] = np.int64(128)
    c = tokdyn.run(scenario, set={"time.t_end": 40.0, "time.samples": 401})
    assert np.array_equal(c.r2, b.r2)


def test_relative_paths_in_a_dict_resolve_against_the_current_directory(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    x0 = rng.normal(size=(16, 2))
    np.savetxt(tmp_path / "x0.csv", x0, delimiter=",")
    scenario = tomllib.loads(CASE4.read_text())
    scenario["tokens"] = {"n": 16, "init": "file", "path": "x0.csv"}
    scenario["time"] = {"t_end": 5.0, "samples": 11}
    monkeypatch.chdir(tmp_path)
    r = tokdyn.run(scenario)
    unit = x0 / np.linalg.norm(x0, axis=1, keepdims=True)
    assert tokdyn.order_parameters(unit)["r2"] == pytest.approx(r.r2[0], abs=1e-15)


def test_set_reads_values_like_the_command_line(small):
    base = tokdyn.run(CASE4, set=dict(small, **{"params.v11": 0.9, "params.v12": 0.9}))
    text = tokdyn.run(CASE4, set=dict(small, **{"params.v11": "0.9", "params.v12": "0.9"}))
    assert np.array_equal(base.r2, text.r2)
    assert base.label != "oscillation"
    kernel = tokdyn.run(CASE4, set=dict(small, **{"model.kernel": "usa", "tokens.n": 16}))
    assert kernel.summary["kernel"] == "usa"


def cli_error(tmp_path, text):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    done = cli("run", path, "--out", tmp_path / "o", code=2)
    line = done.stderr.strip()
    assert line.startswith("error: ")
    return path, line[len("error: "):]


def test_bad_input_is_a_value_error_with_the_cli_message(tmp_path):
    text = CASE4.read_text().replace("beta = 1.0", "beta = 1.0\ngamma = 2.0")
    path, message = cli_error(tmp_path, text)
    with pytest.raises(ValueError) as e:
        tokdyn.run(path)
    assert str(e.value) == message
    assert "gamma" in message
    scenario = tomllib.loads(text)
    with pytest.raises(ValueError, match=r"^<dict>: .*gamma"):
        tokdyn.run(scenario)
    with pytest.raises(ValueError, match=r"model\.V\[0\]\[0\].*v13"):
        tokdyn.run(CASE4, set={"model.V": [["v13", 0], [0, 1]]})
    with pytest.raises(ValueError, match="tokens.n"):
        tokdyn.run(CASE4, set={"tokens.n": 0})
    with pytest.raises(ValueError, match="cannot read"):
        tokdyn.run(tmp_path / "missing.toml")
    with pytest.raises(ValueError, match="no TOML form"):
        tokdyn.run({"name": object()})
    with pytest.raises(TypeError):
        tokdyn.run(42)


def test_an_overflowing_scale_is_refused_up_front_like_the_cli(tmp_path):
    # usa at beta = 800 used to start and fail with a non-finite field; it is refused before
    # the run now (exit 2 from the command line, ValueError from Python), naming model.beta.
    overflow = {"model.kernel": "usa", "model.beta": 800.0, "model.A": [[1.0, 0.0], [0.0, 1.0]]}
    cli_line = cli("run", CASE4, "--out", tmp_path / "o", sets=overflow, code=2).stderr
    with pytest.raises(ValueError, match=r"model\.beta") as e:
        tokdyn.run(CASE4, set=overflow)
    assert "overflows" in str(e.value)
    assert "overflows" in cli_line and "model.beta" in cli_line
    assert not (tmp_path / "o").exists()


# --- compare, predict, sweep --------------------------------------------------------------


def test_compare_has_the_cli_columns(tmp_path, small):
    out = tmp_path / "cli"
    cli("compare", CASE4, "--out", out, sets=small)
    table = read_csv(out / "compare.csv")
    c = tokdyn.compare(CASE4, set=small)
    assert np.array_equal(c["t"], table["t"])
    for model in ("full", "phase", "ws", "oa"):
        assert c[model].dtype == np.complex128
        assert np.array_equal(c[model].real, table[f"{model}_re"])
        assert np.array_equal(c[model].imag, table[f"{model}_im"])
    summary = json.loads((out / "summary.json").read_text())
    assert c["compare"].keys() == summary["compare"].keys()
    assert c["compare"]["oa_vs_full"] == summary["compare"]["oa_vs_full"]
    assert c["summary"]["label"] == summary["label"]


def test_predict_is_the_cli_predict_json(tmp_path):
    cli("predict", CASE4, cwd=tmp_path)
    expected = json.loads((tmp_path / "output" / "case4-oscillation" / "predict.json").read_text())
    assert tokdyn.predict(CASE4) == expected
    assert expected["label"] == "oscillation"
    moved = tokdyn.predict(CASE4, set={"params.v11": 1.2})
    assert moved["label"] != "oscillation"


def test_clusters_series_is_the_cli_clusters_csv(tmp_path):
    path = tmp_path / "sa.toml"
    path.write_text(
        'name = "py-clusters"\n[model]\nkernel = "sa"\nbeta = 6.0\nd = 2\nA = "identity"\n'
        'V = "identity"\n[tokens]\nn = 80\nseed = 2\n[time]\nt_end = 60.0\nsamples = 121\n'
    )
    for model in ("full", "clusters"):
        out = tmp_path / model
        cli("run", path, "--out", out, "--model", model)
        expected = read_csv(out / "clusters.csv")
        r = tokdyn.run(path, model=model)
        series = r.clusters_series
        assert series["count"].dtype == np.int64
        assert np.array_equal(series["count"], expected["count"].astype(np.int64))
        for name in ("t", "largest", "diameter", "separation", "energy"):
            assert np.array_equal(series[name], expected[name], equal_nan=True), name
        assert r.clusters["count"] == int(series["count"][-1])
        assert r.summary["model"] == model
    assert tokdyn.run(CASE4, model="oa", set={"time.t_end": 1.0}).clusters_series is None
    cli("predict", path, "--out", tmp_path / "p")
    expected = json.loads((tmp_path / "p" / "predict.json").read_text())
    assert tokdyn.predict(path) == expected
    assert expected["clusters"]["merges"][-1]["to_count"] == 1


def test_sweep_columns_are_the_cli_sweep_csv(tmp_path):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        f'name = "py-sweep"\nscenario = "{CASE4.as_posix()}"\nmodel = "oa"\n'
        "[axes]\nv11 = { from = 0.0, to = 1.2, steps = 3 }\n"
        "v12 = { from = 0.5, to = 1.0, steps = 2 }\n"
    )
    out = tmp_path / "cli"
    cli("sweep", sweep, "--out", out)
    table = read_csv(out / "sweep.csv")
    columns = tokdyn.sweep(sweep)
    assert list(columns) == list(table)
    for name, values in table.items():
        if columns[name].dtype.kind == "U":
            cells = ["" if v != v else v for v in values.tolist()]  # an all-empty column read as NaN
            assert list(columns[name]) == cells, name
        elif values.dtype.kind == "f":
            assert np.array_equal(columns[name], values, equal_nan=True), name
        else:
            assert list(columns[name]) == list(values), name
    assert columns["label"].dtype.kind == "U" and columns["error"].dtype.kind == "U"
    assert len(columns["v11"]) == 6 and columns["v11"][0] == 0.0 and columns["v12"][1] == 1.0
    kept = tokdyn.sweep(sweep, out=tmp_path / "py")
    assert (tmp_path / "py" / "sweep.csv").read_bytes() == (out / "sweep.csv").read_bytes()
    assert list(kept["label"]) == list(table["label"])


def test_sweep_set_is_the_cli_set(tmp_path):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        f'name = "py-sweep-set"\nscenario = "{CASE4.as_posix()}"\nmodel = "oa"\n'
        "[axes]\nv11 = { from = 0.0, to = 1.2, steps = 3 }\n"
    )
    out = tmp_path / "cli"
    cli("sweep", sweep, "--out", out, "--set", "params.v12=0.3")
    tokdyn.sweep(sweep, set={"params.v12": 0.3}, out=tmp_path / "py")
    assert (tmp_path / "py" / "sweep.csv").read_bytes() == (out / "sweep.csv").read_bytes()
    plain = tokdyn.sweep(sweep)
    assert list(plain["label"]) != list(read_csv(out / "sweep.csv")["label"])


# --- field and order parameters against numpy ---------------------------------------------


def numpy_field(X, heads, kernel, beta):
    """The sphere field, written from its formula."""
    n = len(X)
    total = np.zeros_like(X)
    for A, V in heads:
        G = beta * (X @ A @ X.T)  # G[k, j] = beta <x_k, A x_j>
        VX = X @ V.T  # rows V x_j
        if kernel == "lsa":
            total += G @ VX / n
        elif kernel == "usa":
            total += np.exp(G) @ VX / n
        else:
            W = np.exp(G - G.max(axis=1, keepdims=True))
            total += (W / W.sum(axis=1, keepdims=True)) @ VX
    return total - np.sum(X * total, axis=1, keepdims=True) * X


def unit_rows(rng, n, d):
    X = rng.normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.mark.parametrize("kernel", ["lsa", "usa", "sa"])
@pytest.mark.parametrize("d", [2, 3, 9])
def test_field_against_numpy(kernel, d):
    rng = np.random.default_rng(d)
    X = unit_rows(rng, 70, d)
    heads = [(rng.normal(size=(d, d)) / d, rng.normal(size=(d, d))) for _ in range(2)]
    expected = numpy_field(X, heads, kernel, 1.7)
    got = tokdyn.field(X, [h[0] for h in heads], [h[1] for h in heads], kernel=kernel, beta=1.7)
    assert got.shape == (70, d) and got.dtype == np.float64
    assert np.max(np.abs(got - expected)) < 1e-12 * max(1.0, np.max(np.abs(expected)))
    one = tokdyn.field(X, heads[0][0], heads[0][1], kernel=kernel, beta=1.7)
    assert np.allclose(one, numpy_field(X, heads[:1], kernel, 1.7), rtol=0, atol=1e-12)


def test_field_takes_float32_and_fortran_order():
    rng = np.random.default_rng(5)
    X = unit_rows(rng, 40, 3)
    A, V = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    base = tokdyn.field(X, A, V, kernel="usa")
    assert np.array_equal(tokdyn.field(np.asfortranarray(X), np.asfortranarray(A), V, kernel="usa"), base)
    assert np.array_equal(tokdyn.field(X[::1, :], A.T.copy().T, V, kernel="usa"), base)
    X32 = X.astype(np.float32)
    got = tokdyn.field(X32, A.astype(np.float32), V, kernel="usa")
    assert got.dtype == np.float64
    X64 = X32.astype(np.float64)
    assert np.array_equal(got, tokdyn.field(X64, A.astype(np.float32).astype(np.float64), V, kernel="usa"))
    assert np.max(np.abs(got - base)) < 1e-6


def test_field_rejects_bad_shapes_and_values():
    X = np.eye(3)
    with pytest.raises(ValueError, match=r"A\[0\]: expected a 3 x 3"):
        tokdyn.field(X, np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match="kernel"):
        tokdyn.field(X, np.eye(3), np.eye(3), kernel="relu")
    with pytest.raises(ValueError, match="one A and one V per head"):
        tokdyn.field(X, [np.eye(3)] * 2, [np.eye(3)])
    with pytest.raises(ValueError, match="not a finite number"):
        tokdyn.field(np.full((2, 3), np.nan), np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match="d >= 2"):
        tokdyn.order_parameters(np.ones((4, 1)))


@pytest.mark.parametrize("d", [2, 5])
def test_order_parameters_against_numpy(d):
    rng = np.random.default_rng(11 + d)
    X = unit_rows(rng, 300, d)
    o = tokdyn.order_parameters(X)
    X32 = X.astype(np.float32)
    assert tokdyn.order_parameters(X32)["r2"] == tokdyn.order_parameters(X32.astype(np.float64))["r2"]
    angle = np.arctan2(X[:, 1], X[:, 0])
    assert abs(o["r2"] - np.mean(np.exp(2j * angle))) < 1e-14
    assert o["r1"] == pytest.approx(np.linalg.norm(X.mean(axis=0)), abs=1e-14)
    S = X.T @ X / len(X)
    s = (d * np.linalg.eigvalsh(S)[-1] - 1) / (d - 1)
    assert o["nematic"] == pytest.approx(s, abs=1e-12)
    if d == 2:
        assert o["axis"] is None and o["nematic"] == pytest.approx(abs(o["r2"]), abs=1e-14)
    else:
        axis = np.linalg.eigh(S)[1][:, -1]
        assert abs(abs(axis @ o["axis"]) - 1) < 1e-10


# --- a notebook, threads and Ctrl-C --------------------------------------------------------


def test_a_notebook_session(small):
    # A researcher's cell: run case 4, look at |R2|, check the period, probe the final state.
    r = tokdyn.run(CASE4, set=small)
    amplitude = np.abs(r.r2)
    tail = amplitude[r.t >= 20]
    assert tail.max() - tail.min() > 0.01  # it oscillates
    spectrum = np.abs(np.fft.rfft(tail - tail.mean()))
    frequency = np.fft.rfftfreq(len(tail), r.t[1] - r.t[0])[np.argmax(spectrum)]
    assert 1 / frequency == pytest.approx(r.features["period"], rel=0.15)
    assert tokdyn.order_parameters(r.tokens)["r2"] == r.r2[-1]
    V = np.array([[0.2, 1.0], [-1.0, -0.2]])
    f = tokdyn.field(r.tokens, np.eye(2), V)
    assert np.max(np.abs(np.sum(f * r.tokens, axis=1))) < 1e-14  # tangent to the circle
    assert tokdyn.__version__


def test_runs_release_the_gil():
    counter = [0]
    done = threading.Event()

    def work():
        tokdyn.run(CASE4, set={"tokens.n": 20000, "time.t_end": 40.0, "time.samples": 41})
        done.set()

    thread = threading.Thread(target=work)
    thread.start()
    started = time.monotonic()
    while not done.is_set() and time.monotonic() - started < 0.5:
        counter[0] += 1
    thread.join()
    assert counter[0] > 10000


def test_ctrl_c_stops_a_long_run_within_a_second(tmp_path):
    # Python leaves SIGINT ignored when it started so (a job sent to the background by a
    # non-interactive shell, as some CI runners do): the child installs the usual handler.
    script = """
import signal, time, tokdyn
signal.signal(signal.SIGINT, signal.default_int_handler)
print("ready", flush=True)
try:
    tokdyn.run(CASE4, set={"tokens.n": 100000, "time.t_end": 1e6})
except KeyboardInterrupt:
    print("interrupted", flush=True)
    r = tokdyn.run(CASE4, set={"tokens.n": 16, "time.t_end": 1.0, "time.samples": 3})
    print(r.label != "", flush=True)
""".replace("CASE4", repr(str(CASE4)))
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    # A child that never stops fails the test instead of hanging it.
    watchdog = threading.Timer(120.0, child.kill)
    watchdog.start()
    assert child.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    line = child.stdout.readline().strip()
    elapsed = time.monotonic() - sent
    assert line == "interrupted"
    assert elapsed < 1.0, elapsed
    # A run after the interruption is not stopped by the old request.
    assert child.stdout.readline().strip() == "True"
    assert child.wait(timeout=60) == 0
    watchdog.cancel()


# --- bad arrays (issue 26) ----------------------------------------------------------------


def test_field_and_order_parameters_refuse_complex_non_finite_zero_and_overflowing_input():
    rng = np.random.default_rng(3)
    X = unit_rows(rng, 20, 3)
    A, V = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    with pytest.raises(ValueError, match=r"^X: complex"):
        tokdyn.field(X + 1e-3j, A, V)
    with pytest.raises(ValueError, match=r"^A\[0\]: complex"):
        tokdyn.field(X, A + 1j, V)
    with pytest.raises(ValueError, match=r"^X: complex"):
        tokdyn.order_parameters(X.astype(complex))
    Z = X.copy()
    Z[4] = 0.0
    with pytest.raises(ValueError, match=r"^X\[4\]: a zero row"):
        tokdyn.field(Z, A, V)
    with pytest.raises(ValueError, match=r"^X\[4\]: a zero row"):
        tokdyn.order_parameters(Z)
    W = X.copy()
    W[2, 1] = np.inf
    with pytest.raises(ValueError, match=r"^X\[2\]\[1\]: not a finite"):
        tokdyn.order_parameters(W)
    with pytest.raises(ValueError, match=r"^beta, A, V: the usa field overflows"):
        tokdyn.field(X, np.eye(3), np.eye(3), kernel="usa", beta=800.0)
    with pytest.raises(ValueError, match="overflows"):
        tokdyn.field(X, np.eye(3) * 1e200, np.eye(3) * 1e200)


def test_rows_are_normalised_so_any_scale_gives_the_same_result():
    rng = np.random.default_rng(4)
    X = unit_rows(rng, 50, 3)
    A, V = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    base = tokdyn.order_parameters(X)
    scales = np.array([1e200, 1e-200, 3.0])[np.arange(50) % 3][:, None]
    for Y in (X * 1e200, X * 1e-300, X * scales):
        o = tokdyn.order_parameters(Y)
        assert np.isfinite(o["r1"]) and abs(o["r2"] - base["r2"]) < 1e-14
        assert o["r1"] == pytest.approx(base["r1"], abs=1e-14)
        assert o["nematic"] == pytest.approx(base["nematic"], abs=1e-12)
    f = tokdyn.field(X, A, V, kernel="sa")
    g = tokdyn.field(X * scales, A, V, kernel="sa")
    assert np.max(np.abs(f - g)) < 1e-13
    # The field is that of the normalised rows (numpy_field of the unit rows).
    assert np.max(np.abs(f - numpy_field(X, [(A, V)], "sa", 1.0))) < 1e-12


def test_one_ctrl_c_stops_a_sweep_within_a_second(tmp_path):
    """A sweep interrupted once returns to Python within a second, its lock removed."""
    import signal
    import threading
    import time

    base = tmp_path / "base.toml"
    base.write_text(
        'name = "b"\n[model]\nkernel = "sa"\nbeta = 1.0\nd = 2\nA = "identity"\n'
        'V = [["v11", 0.5], [-0.5, "-v11"]]\n[params]\nv11 = 0.2\n'
        '[tokens]\nn = 400\ninit = "poisson"\nseed = 1\nr0 = 0.3\n[time]\nt_end = 30.0\nsamples = 11\n'
    )
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        'name = "sw"\nscenario = "base.toml"\n[axes]\nv11 = { from = 0.05, to = 0.45, steps = 40 }\n'
    )
    out = tmp_path / "out"
    # The usual handler even when this process started with SIGINT ignored (see above).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, lambda: signal.raise_signal(signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            tokdyn.sweep(sweep, out=out)
    finally:
        signal.signal(signal.SIGINT, previous)
    interrupted = time.monotonic()
    assert interrupted - started < 0.5 + 1.0
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".lock") or ".tmp-" in p.name]
    assert leftovers == []
def test_sweep_returns_curves_and_special_points(tmp_path):
    family = CASE4.parent / "random-family.toml"
    sweep = tmp_path / "codim2.toml"
    sweep.write_text(
        f'name = "py-codim2"\nscenario = "{family.as_posix()}"\nmodel = "oa"\n'
        "[axes]\nv11 = { from = 0.2, to = 0.2, steps = 1 }\n"
        '[codim2]\nparameters = ["v11", "v12"]\nfrom = [-0.2, -0.6]\nto = [0.7, 0.4]\nstep = 0.01\n'
    )
    out = tmp_path / "cli"
    cli("sweep", sweep, "--out", out)
    result = tokdyn.sweep(sweep)
    table = read_csv(out / "curves.csv")
    assert list(result.curves) == list(table)
    assert np.array_equal(result.curves["v11"], table["v11"])
    assert set(result.curves["kind"]) <= {"fold", "hopf", "neutral-saddle"}
    specials = json.loads((out / "special_points.json").read_text())
    assert result.special_points == specials
    assert any(s["type"] == "BT" for s in result.special_points)
    assert result.branches is None
    assert list(result["v11"]) == [0.2]


def test_sweep_returns_cycles(tmp_path):
    family = CASE4.parent / "random-family.toml"
    sweep = tmp_path / "cycles.toml"
    sweep.write_text(
        f'name = "py-cycles"\nscenario = "{family.as_posix()}"\nmodel = "oa"\n'
        "[axes]\nv12 = { from = -0.6, to = 0.4, steps = 2 }\n"
        '[continuation]\nparameter = "v12"\nfrom = -0.6\nto = 0.4\nstep = 0.01\ncycles = true\n'
    )
    out = tmp_path / "cli"
    # v11 = 0.25: a supercritical Hopf point on the way.
    cli("sweep", sweep, "--out", out, sets={"params.v11": 0.25})
    result = tokdyn.sweep(sweep, set={"params.v11": 0.25})
    table = read_csv(out / "cycles.csv")
    assert list(result.cycles) == ["branch", "v12", "period", "r2_abs_min", "r2_abs_max",
                                   "multiplier", "stable", "point"]
    assert np.array_equal(result.cycles["period"], table["period"])
    assert set(result.cycles["stable"]) <= {"true", "false"}
    assert result.cycles["stable"][0] == "true"
    assert result.branches is not None


def test_sweep_returns_the_stationary_branches_of_the_mean_field(tmp_path):
    # A continuation of stationary densities has no grid: no sweep.csv, only the branches.
    sweep = CASE4.parent / "sweep-meanfield-stationary.toml"
    out = tmp_path / "cli"
    cli("sweep", sweep, "--out", out)
    result = tokdyn.sweep(sweep)
    assert dict(result) == {}
    table = read_csv(out / "branches.csv")
    assert list(result.branches) == list(table)
    assert np.array_equal(result.branches["r1_abs"], table["r1_abs"], equal_nan=True)
    bp = [p for p in result.special_points if p["type"] == "BP"]
    # The uniform state loses stability at T_c = I_1(5) / 5 (power series of I_1).
    i1 = sum(2.5 ** (2 * k + 1) / (math.factorial(k) * math.factorial(k + 1)) for k in range(40))
    assert abs(bp[0]["parameters"]["noise.temperature"] - i1 / 5) < 1e-6
