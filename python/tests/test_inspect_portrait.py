"""tokdyn.inspect against numpy on the checkpoint's raw weights (written here), and
tokdyn.portrait against the OA equation written here with numpy and scipy (docs/MATH.md §3.2,
§3.5): its fixed points are zeros of the field with the eigenvalues of its finite-difference
Jacobian, its path is the OA orbit from R2(0), and a cycle returns to itself after one period."""

import json
import struct

import numpy as np
import pytest

import tokdyn
from conftest import CASE4, SCENARIOS, cli

solve_ivp = pytest.importorskip("scipy.integrate").solve_ivp

D, HEADS, LAYERS, VOCAB = 8, 2, 2, 16


def write_safetensors(path, tensors):
    """A .safetensors file: an 8-byte little-endian header length, a JSON header, the data."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


@pytest.fixture
def gpt2(tmp_path):
    """A gpt2-layout checkpoint with seeded weights; returns its path and the F32 weights."""
    rng = np.random.default_rng(4)
    tensors = {"wte.weight": rng.normal(size=(VOCAB, D))}
    for l in range(LAYERS):
        tensors[f"h.{l}.attn.c_attn.weight"] = rng.normal(size=(D, 3 * D)) / np.sqrt(D)
        tensors[f"h.{l}.attn.c_proj.weight"] = rng.normal(size=(D, D)) / np.sqrt(D)
    path = tmp_path / "tiny.safetensors"
    write_safetensors(path, tensors)
    return path, {k: v.astype(np.float32).astype(np.float64) for k, v in tensors.items()}


def heads_from_weights(weights):
    """A_h = W_Q^h (W_K^h)^T / sqrt(d_h), V_h = (W_V^h W_O^h)^T from the raw tensors."""
    dh = D // HEADS
    out = []
    for l in range(LAYERS):
        qkv = weights[f"h.{l}.attn.c_attn.weight"]
        o = weights[f"h.{l}.attn.c_proj.weight"]
        q, k, v = qkv[:, :D], qkv[:, D : 2 * D], qkv[:, 2 * D :]
        for h in range(HEADS):
            cols = slice(h * dh, (h + 1) * dh)
            a = q[:, cols] @ k[:, cols].T / np.sqrt(dh)
            vv = (v[:, cols] @ o[cols, :]).T
            out.append((l, h, a, vv))
    return out


def test_inspect_heads_match_numpy(gpt2):
    path, weights = gpt2
    r = tokdyn.inspect(path, heads=HEADS)
    assert r["format"] == "gpt2" and r["d"] == D and r["layers"] == [0, 1]
    assert "format gpt2, d = 8" in r["table"] and r["dir"] is None
    expected = heads_from_weights(weights)
    assert r["A"].shape == (LAYERS * HEADS, D, D) and r["v_eig"].dtype == np.complex128
    rows = r["rows"]
    for i, (l, h, a, v) in enumerate(expected):
        assert (r["layer"][i], r["head"][i]) == (l, h) == (rows["layer"][i], rows["head"][i])
        assert np.max(np.abs(r["A"][i] - a)) < 1e-12
        assert np.max(np.abs(r["V"][i] - v)) < 1e-12
        sym = np.linalg.eigvalsh((a + a.T) / 2)
        assert np.max(np.abs(r["a_sym"][i] - sym)) < 1e-12
        eig = np.linalg.eigvals(v)
        got = r["v_eig"][i]
        # The same multiset: each numpy eigenvalue has a partner, and back.
        assert max(np.min(np.abs(got - e)) for e in eig) < 1e-10
        assert max(np.min(np.abs(eig - g)) for g in got) < 1e-10
        assert abs(rows["a_sym_min"][i] - sym[0]) < 1e-12
        assert abs(rows["a_sym_max"][i] - sym[-1]) < 1e-12
        assert rows["a_sym_positive"][i] == np.sum(sym > 1e-12 * np.abs(sym).max())
        assert abs(rows["v_re_max"][i] - eig.real.max()) < 1e-10
        assert abs(rows["v_radius"][i] - np.abs(eig).max()) < 1e-10
        c = np.linalg.norm(a @ v - v @ a) / (np.linalg.norm(a) * np.linalg.norm(v))
        assert abs(rows["commutator"][i] - c) < 1e-12
        assert rows["nearly_commute"][i] == (c < 1e-3)


def test_inspect_writes_the_cli_heads_csv(gpt2, tmp_path):
    path, _ = gpt2
    r = tokdyn.inspect(path, heads=HEADS, out=tmp_path / "py")
    assert r["dir"] == str(tmp_path / "py")
    cli("inspect", path, "--heads", HEADS, "--out", tmp_path / "cli")
    assert (tmp_path / "py" / "heads.csv").read_bytes() == (tmp_path / "cli" / "heads.csv").read_bytes()


def test_inspect_without_heads_and_bad_input(gpt2, tmp_path, monkeypatch):
    path, _ = gpt2
    monkeypatch.chdir(tmp_path)
    r = tokdyn.inspect(path)
    assert r["layers"] == [0, 1] and "A" not in r and "rows" not in r
    tokdyn.inspect(path, heads=HEADS)
    assert not (tmp_path / "output").exists()  # out=None writes nothing
    with pytest.raises(ValueError, match="does not divide d = 8"):
        tokdyn.inspect(path, heads=3)
    with pytest.raises(ValueError, match="at least 1"):
        tokdyn.inspect(path, heads=0)
    with pytest.raises(ValueError, match="unknown format"):
        tokdyn.inspect(path, heads=2, format="t5")
    with pytest.raises(ValueError, match="cannot read"):
        tokdyn.inspect(tmp_path / "missing.safetensors")


# --- portrait ----------------------------------------------------------------------------


def plus_minus(m):
    m = np.asarray(m, dtype=float)
    return (
        ((m[0, 0] + m[1, 1]) + 1j * (m[1, 0] - m[0, 1])) / 2,
        ((m[0, 0] - m[1, 1]) + 1j * (m[1, 0] + m[0, 1])) / 2,
    )


def oa_field(a, v, beta=1.0):
    """R' = i omega(R) R + (H(R) - conj(H(R)) R^2) / 2 (docs/MATH.md §3.2, §3.5)."""
    ap, am = plus_minus(a)
    vp, vm = plus_minus(v)

    def f(r):
        g = ap * vp * r + ap * vm + am * vp + am * vm * np.conj(r)
        c = np.conj(ap) * vp + np.conj(am) * vm + np.conj(ap) * vm * np.conj(r) + np.conj(am) * vp * r
        omega, h = beta * c.imag, beta * g
        return 1j * omega * r + (h - np.conj(h) * r * r) / 2

    return f


def jacobian(f, r, eps=1e-6):
    cols = []
    for dz in (eps, 1j * eps):
        df = (f(r + dz) - f(r - dz)) / (2 * eps)
        cols.append([df.real, df.imag])
    return np.array(cols).T


RANDOM = SCENARIOS / "random-family.toml"
A_RANDOM = [[-0.6585, 0.1559], [0.9054, 1.0743]]


@pytest.mark.parametrize(
    "scenario,a,v,sets",
    [
        (CASE4, np.eye(2), [[0.2, 1.0], [-1.0, -0.2]], {}),
        (RANDOM, A_RANDOM, [[0.2, -0.1], [0.2307, -0.1714]], {}),
        (RANDOM, A_RANDOM, [[0.45, -0.3], [0.2307, -0.1714]], {"params.v11": 0.45, "params.v12": -0.3}),
    ],
)
def test_portrait_fixed_points_and_path_are_the_oa_equations(scenario, a, v, sets):
    f = oa_field(a, v)
    p = tokdyn.portrait(scenario, set=sets)
    assert p["picture"] is None and p["path_source"] == "oa"
    fixed = p["fixed_points"]
    assert len(fixed["r"]) >= 1
    for r, eig, stability in zip(fixed["r"], fixed["eigenvalues"], fixed["stability"]):
        assert abs(f(r)) < 1e-10 and abs(r) <= 1 + 1e-12
        want = np.sort_complex(np.linalg.eigvals(jacobian(f, r)))
        assert np.max(np.abs(np.sort_complex(eig) - want)) < 1e-6
        re = want.real
        if stability == "stable":
            assert np.all(re < 0)
        elif stability == "unstable":
            assert np.all(re > 0)
        elif stability == "saddle":
            assert re.min() < 0 < re.max()
    # The path: the OA orbit from R2(0), integrated here.
    t, path = p["t"], p["path"]
    rhs = lambda _t, y: (lambda d: [d.real, d.imag])(f(y[0] + 1j * y[1]))
    sol = solve_ivp(rhs, (t[0], t[-1]), [path[0].real, path[0].imag], method="DOP853",
                    t_eval=t, rtol=1e-11, atol=1e-13)
    assert sol.success
    assert np.max(np.abs(sol.y[0] + 1j * sol.y[1] - path)) < 1e-6
    assert p["label"] == tokdyn.predict(scenario, set=sets)["label"]


def test_portrait_cycles_close_after_one_period():
    f = oa_field(np.eye(2), [[0.2, 1.0], [-1.0, -0.2]])
    p = tokdyn.portrait(CASE4)
    assert p["label"] == "oscillation" and len(p["cycles"]) >= 1
    rhs = lambda _t, y: (lambda d: [d.real, d.imag])(f(y[0] + 1j * y[1]))
    for c in p["cycles"]:
        z0 = c["start"]
        sol = solve_ivp(rhs, (0, c["period"]), [z0.real, z0.imag], method="DOP853", rtol=1e-11, atol=1e-13)
        assert abs(sol.y[0, -1] + 1j * sol.y[1, -1] - z0) < 1e-6
        orbit = np.abs(c["orbit"])
        assert abs(orbit.min() - c["r_abs_min"]) < 1e-2 and abs(orbit.max() - c["r_abs_max"]) < 1e-2
    # Case 4 (A = I, v11 < v12): one centre (docs/MATH.md §7).
    assert list(p["fixed_points"]["stability"]) == ["center"]


def test_portrait_with_out_draws_and_reads_the_run(tmp_path, small):
    out = tmp_path / "p"
    first = tokdyn.portrait(CASE4, set=small, out=out)
    assert first["picture"] == str(out / "portrait.png") and (out / "portrait.png").exists()
    assert first["path_source"] == "oa"
    r = tokdyn.run(CASE4, set=small, out=out)
    again = tokdyn.portrait(CASE4, set=small, out=out)
    assert again["path_source"] == "run"
    assert np.array_equal(again["path"], r.r2) and np.array_equal(again["t"], r.t)


def test_portrait_bad_input(tmp_path):
    with pytest.raises(ValueError, match="d = 2|lsa|kernel"):
        tokdyn.portrait(CASE4, set={"model.kernel": "sa"})
    with pytest.raises(ValueError, match="noise"):
        tokdyn.portrait(CASE4, set={"noise.temperature": 0.1})
    assert not list(tmp_path.iterdir())


def test_inspect_a_bert_layout_matches_numpy(tmp_path):
    """bert: nn.Linear weights (y = x W^T), so W_Q = query.weight^T, ..., W_O = dense.weight^T."""
    rng = np.random.default_rng(11)
    tensors = {"embeddings.word_embeddings.weight": rng.normal(size=(VOCAB, D))}
    for part in ("self.query", "self.key", "self.value", "output.dense"):
        tensors[f"encoder.layer.0.attention.{part}.weight"] = rng.normal(size=(D, D)) / np.sqrt(D)
    path = tmp_path / "tiny-bert.safetensors"
    write_safetensors(path, tensors)
    w = {k.split(".attention.")[-1][: -len(".weight")]: v.astype(np.float32).astype(np.float64)
         for k, v in tensors.items() if ".attention." in k}
    heads = 4
    r = tokdyn.inspect(path, heads=heads, format="bert")
    assert r["format"] == "bert" and r["layers"] == [0] and len(r["head"]) == heads
    dh = D // heads
    q, k, v, o = (w[n].T for n in ("self.query", "self.key", "self.value", "output.dense"))
    for h in range(heads):
        cols = slice(h * dh, (h + 1) * dh)
        a = q[:, cols] @ k[:, cols].T / np.sqrt(dh)
        vv = (v[:, cols] @ o[cols, :]).T
        assert np.max(np.abs(r["A"][h] - a)) < 1e-12 and np.max(np.abs(r["V"][h] - vv)) < 1e-12
        assert np.max(np.abs(r["a_sym"][h] - np.linalg.eigvalsh((a + a.T) / 2))) < 1e-12
        # V_h has rank d_h: d - d_h of its eigenvalues are zero.
        assert np.sum(np.abs(r["v_eig"][h]) < 1e-9) == D - dh
    with pytest.raises(ValueError):
        tokdyn.inspect(path, heads=heads, format="gpt2")
