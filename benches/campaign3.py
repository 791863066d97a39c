#!/usr/bin/env python3
"""The third reliability campaign repeated in a bounded way (issue 26).

    python3 benches/campaign3.py [--bin target/release/tokdyn] [--python VENV/bin/python]

Runs, each case in its own process with a time limit:
- mutated copies of scenarios/tiny-gpt2.safetensors through `inspect`, `inspect --heads 4`
  and `run` (byte flips, truncation, header words, extreme data, lying lengths);
- random stacks of layers (1 to 10^5 entries, extreme durations and matrices) through `run`;
- degenerate one-layer scenarios through `run`, `predict`, `portrait` and `compare`;
- bad arrays and values through the Python functions (when --python is given).

Counts each exit code, the panics (exit outside 0..2, "internal error" or "panicked"), the
hangs (time limit reached), failures that did not print exactly one `error:` line, and the
peak memory of the children. Deterministic (seeded).
"""

import argparse
import json
import os
import random
import resource
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = float(os.environ.get("CAMPAIGN_LIMIT", "60"))  # seconds a case may take before it counts as a hang


class Tally:
    def __init__(self):
        self.cases = 0
        self.codes = Counter()
        self.panics = []
        self.hangs = []
        self.bad_lines = []

    def run(self, argv, what, cwd=None):
        self.cases += 1
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=LIMIT, cwd=cwd,
                               env={**os.environ, "RAYON_NUM_THREADS": "1"})
        except subprocess.TimeoutExpired:
            self.hangs.append(what)
            self.codes["hang"] += 1
            return
        self.codes[p.returncode] += 1
        err = p.stderr
        if p.returncode not in (0, 1, 2) or "internal error" in err or "panicked" in err:
            self.panics.append((what, p.returncode, err[:300]))
        elif p.returncode != 0:
            errors = [l for l in err.splitlines() if l.startswith("error:")]
            if len(errors) != 1:
                self.bad_lines.append((what, err[:300]))


def split(b):
    n = struct.unpack("<Q", b[:8])[0]
    return b[8:8 + n].decode("latin-1"), b[8 + n:]


def join(header, data):
    h = header.encode("latin-1")
    return struct.pack("<Q", len(h)) + h + data


def mutate(rng, original):
    header, data = split(original)
    kind = rng.randrange(8)
    if kind == 0:
        b = bytearray(original)
        for _ in range(rng.randint(1, 16)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 1:
        return original[:rng.randrange(len(original))]
    if kind == 2:
        words = [("\"F32\"", ["\"F64\"", "\"F16\"", "\"I8\"", "\"X\"", "\"BF16\"", "\"U8\""]),
                 ("[64,192]", ["[0,0]", "[192,64]", "[64]", "[64,192,1]", "[]", "[64,190]"]),
                 ("[64,64]", ["[0,64]", "[64,0]", "[32,32]", "[4096]"]),
                 ("[128,64]", ["[0,64]", "[128,0]", "[1,64]", "[128,63]"]),
                 ("49920", ["0", "999999999", "49921", "18446744073709551615"]),
                 ("h.1.", ["h.9.", "h.-1.", "h.1x.", "h.00."])]
        a, choices = rng.choice(words)
        return join(header.replace(a, rng.choice(choices), 1), data)
    if kind == 3:
        d = bytearray(data)
        pattern = struct.pack("<f", rng.choice([float("nan"), float("inf"), 3.4e38, 1e-45, -3.4e38, 0.0]))
        start = rng.randrange(len(d) // 4) * 4
        for k in range(rng.randint(1, 8192)):
            i = start + 4 * k
            if i + 4 <= len(d):
                d[i:i + 4] = pattern
        return join(header, bytes(d))
    if kind == 4:
        n = rng.choice([0, 1, 7, 2**64 - 1, len(original) * 2, len(header) - 1])
        return struct.pack("<Q", n) + original[8:]
    if kind == 5:
        return join(header[:rng.randrange(len(header))], data)
    if kind == 6:
        return join(header.replace("[64,192]", "[0,0]").replace("[64,64]", "[0,0]"), data)
    scale = rng.choice([1e19, 1e30, 1e37, 1e-30])
    vals = struct.unpack(f"<{len(data)//4}f", data)
    scaled = [max(min(v * scale, 3.4e38), -3.4e38) for v in vals]
    return join(header, struct.pack(f"<{len(scaled)}f", *scaled))


CHECKPOINT_SCENARIO = """name = "fz"
[model]
kernel = "sa"
beta = 1.0
loop = true
[model.checkpoint]
path = "m.safetensors"
format = "gpt2"
layers = [0, 1]
heads = 4
layer_time = 0.5
[tokens]
init = "embedding"
ids = [5, 17, 42, 3]
center = true
[time]
t_end = 2.0
samples = 5
"""


def checkpoints(t, exe, tmp, rng, count):
    original = (ROOT / "scenarios" / "tiny-gpt2.safetensors").read_bytes()
    (tmp / "s.toml").write_text(CHECKPOINT_SCENARIO)
    for i in range(count):
        (tmp / "m.safetensors").write_bytes(mutate(rng, original))
        for args in (["inspect", "m.safetensors"],
                     ["inspect", "m.safetensors", "--heads", "4", "--out", "ins"],
                     ["run", "s.toml", "--out", "run"]):
            t.run([exe, *args], f"checkpoint {i} {args[0]}", cwd=tmp)


def matrix(rng, d):
    k = rng.randrange(8)
    if k == 0:
        return '"identity"'
    if k == 1:
        return '"zero"'
    if k == 2:
        big = rng.choice(["1e300", "-1e300", "1e-300", "0.5", "3", "1e20"])
        return "[" + ", ".join("[" + ", ".join(big if i == j else "0.1" for j in range(d)) + "]"
                              for i in range(d)) + "]"
    if k == 3:
        return "[[" + ", ".join(["1.0"] * (d + 1)) + "]]"
    if k == 4:
        return "[]"
    if k == 5:
        return '{ random = "gaussian", seed = %d, scale = %s }' % (rng.randrange(9), rng.choice(["1", "1e200", "0"]))
    if k == 6:
        return '{ block = [["v11", 0.5], [-0.5, "-v11"]], rest = "identity" }'
    return '"bogus"'


def stacks(t, exe, tmp, rng, count):
    for i in range(count):
        d = rng.randint(2, 6)
        layers = rng.choice([1, 2, 5, 40, 3000, 100000])
        text = (f'name = "st"\n[params]\nv11 = 0.2\n[model]\nkernel = "{rng.choice(["lsa", "usa", "sa"])}"\n'
                f'beta = {rng.choice(["1.0", "0.0", "50.0", "1e300"])}\nd = {d}\nloop = {rng.choice(["true", "false"])}\n')
        a, v = matrix(rng, d), matrix(rng, d)
        varied = rng.random() < 0.3 and layers <= 3000
        for _ in range(layers):
            if varied:
                a, v = matrix(rng, d), matrix(rng, d)
            dur = rng.choice(["1.0", "0.25", "1e-7", "0", "-1", "1e300", "2", "1e-300"])
            text += f"[[model.layers]]\nA = {a}\nV = {v}\nduration = {dur}\n"
        text += (f'[tokens]\nn = {rng.choice([1, 2, 16, 64])}\ninit = "uniform"\nseed = 2\n'
                 f'[time]\nt_end = {rng.choice(["1.0", "3.0", "1e6", "0.5", "100.0"])}\nsamples = 5\n')
        (tmp / "stack.toml").write_text(text)
        model = rng.choice(["full", "group", "oa", "phase", "ws"])
        t.run([exe, "run", "stack.toml", "--model", model, "--out", "o"], f"stack {i} ({layers} layers)", cwd=tmp)


def degenerate(t, exe, tmp, rng, count):
    for i in range(count):
        n = rng.choice([1, 2, 3, 64, 0, -1])
        r0 = rng.choice(["0.0", "1.0", "0.3", "1e-300", "2.0"])
        v11 = rng.choice(["0.2", "0.0", "1e300", "-1e300", "1e-300", "0.5"])
        text = (f'name = "dg"\n[params]\nv11 = {v11}\nv12 = {rng.choice(["0.5", "0.0", "1e200"])}\n'
                f'[model]\nkernel = "{rng.choice(["lsa", "usa", "sa"])}"\nbeta = {rng.choice(["1.0", "0.0", "800.0", "-1e308"])}\n'
                f'd = {rng.choice([2, 2, 3, 1])}\nA = "identity"\n'
                f'V = [["v11", "v12"], ["-v12", "-v11"]]\n'
                f'[tokens]\nn = {n}\ninit = "{rng.choice(["poisson", "uniform", "splay"])}"\nseed = 1\nr0 = {r0}\n'
                f'[time]\nt_end = {rng.choice(["1.0", "1e-12", "1e9", "50.0", "1e300"])}\nsamples = {rng.choice([2, 11, 1, 1000000])}\n')
        if rng.random() < 0.3:
            text += f'[solver]\nmethod = "{rng.choice(["rk4", "dopri5", "dop853"])}"\ndt = {rng.choice(["0.1", "1e-300", "1e-9"])}\nrtol = {rng.choice(["1e-9", "1e-300", "0.5"])}\n'
        (tmp / "deg.toml").write_text(text)
        command = rng.choice(["run", "predict", "portrait", "compare"])
        args = [exe, command, "deg.toml"] + ([] if command == "predict" else ["--out", f"o-{command}"])
        t.run(args, f"degenerate {i} {command}", cwd=tmp)


PYTHON_CASES = r"""
import json, sys
import numpy as np
import tokdyn
rng = np.random.default_rng(1)
X = rng.normal(size=(20, 3)); X /= np.linalg.norm(X, axis=1, keepdims=True)
I = np.eye(3)
cases = []
def case(name, f):
    try:
        f()
        cases.append((name, "ok"))
    except ValueError as e:
        cases.append((name, "ValueError"))
    except TypeError as e:
        cases.append((name, "TypeError"))
    except Exception as e:
        cases.append((name, type(e).__name__ + ": " + str(e)[:100]))
bad_x = {"complex": X + 1j, "nan": np.where(X > 0.5, np.nan, X), "inf": X * np.inf,
         "zero row": np.vstack([X, np.zeros(3)]), "1e200": X * 1e200, "1e-320": X * 1e-320,
         "object": X.astype(object), "strings": np.array([["a", "b", "c"]]), "3d": X[None],
         "empty": np.zeros((0, 3)), "d1": X[:, :1], "huge scale rows": X * 1e308}
for name, x in bad_x.items():
    case("field X " + name, lambda: tokdyn.field(x, I, I))
    case("order X " + name, lambda: tokdyn.order_parameters(x))
for name, m in {"complex": I + 1j, "nan": I * np.nan, "1e200": I * 1e200, "wrong": np.eye(2),
                "list": [I, I]}.items():
    case("field A " + name, lambda: tokdyn.field(X, m, I))
    case("field V " + name, lambda: tokdyn.field(X, I, m))
for beta in (800.0, 1e308, float("nan"), -1e308):
    for k in ("usa", "sa", "lsa"):
        case(f"field beta {beta} {k}", lambda: tokdyn.field(X, I, I, kernel=k, beta=beta))
for d in ({"name": "x"}, {"name": "x", "model": {"d": 2}}, 3, None):
    case(f"run {d}", lambda: tokdyn.run(d))
case("run set bad", lambda: tokdyn.run("scenarios/case4-oscillation.toml", set={"tokens.n": -1}))
case("sweep missing", lambda: tokdyn.sweep("/nonexistent.toml"))
json.dump(cases, sys.stdout)
"""


def python_inputs(t, python):
    t.cases += 1
    p = subprocess.run([python, "-c", PYTHON_CASES], capture_output=True, text=True, timeout=600, cwd=ROOT)
    if p.returncode != 0:
        t.panics.append(("python", p.returncode, p.stderr[:500]))
        return Counter(), []
    results = json.loads(p.stdout)
    kinds = Counter(r for _, r in results)
    for name, r in results:
        if r not in ("ok", "ValueError", "TypeError"):
            t.panics.append(("python " + name, r, ""))
    t.cases += len(results) - 1
    return kinds, results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "tokdyn"))
    ap.add_argument("--python", default=None)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the case counts")
    args = ap.parse_args()
    rng = random.Random(26)
    started = time.time()
    report = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, fn, count in (("checkpoints", checkpoints, 150), ("stacks", stacks, 100),
                                ("degenerate", degenerate, 320)):
            t = Tally()
            t0 = time.time()
            fn(t, args.bin, tmp, rng, int(count * args.scale))
            report[name] = {"cases": t.cases, "codes": {str(k): v for k, v in sorted(t.codes.items(), key=str)},
                            "panics": len(t.panics), "hangs": len(t.hangs),
                            "not one error line": len(t.bad_lines), "seconds": round(time.time() - t0, 1)}
            for p in t.panics[:5] + t.bad_lines[:5]:
                print("  problem:", p, file=sys.stderr)
            for h in t.hangs[:5]:
                print("  hang:", h, file=sys.stderr)
    if args.python:
        t = Tally()
        kinds, results = python_inputs(t, args.python)
        report["python"] = {"cases": len(results), "outcomes": dict(kinds), "panics": len(t.panics)}
        for p in t.panics[:10]:
            print("  problem:", p, file=sys.stderr)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    report["peak child memory MB"] = round(peak / 1024, 1)
    report["wall seconds"] = round(time.time() - started, 1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
