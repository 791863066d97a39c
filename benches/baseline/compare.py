#!/usr/bin/env python3
"""tokdyn against the plain numpy/scipy baseline (issue #7).

    python3 benches/baseline/compare.py [--cases a,b] [--repeats 3] [--quick] [--big]
        [--reference] [--reduced] [--skip-baseline CASE] [--check] [--no-build]

Creates its own virtual environment (output/baseline-venv, numpy + scipy from the package index)
and re-runs itself inside it, builds tokdyn once (cargo build --release), writes each benchmark
case into output/perf/<case>/ (scenario.toml, x0.npy, A.npy/V.npy for d = 100), runs tokdyn and
the baseline alternately, each as a child process measured with os.wait4 (wall time and the
child's own peak RSS), and prints markdown tables. See benches/baseline/README.md.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.join(ROOT, "output", "baseline-venv")
VENV_PY = os.path.join(VENV, "bin", "python")
JAX_VENV = os.path.join(ROOT, "output", "jax-venv")
JAX_PY = os.path.join(JAX_VENV, "bin", "python")
BASELINE_JAX = os.path.join(HERE, "baseline_jax.py")
PERF = os.path.join(ROOT, "output", "perf")
TOKDYN = os.path.join(ROOT, "target", "release", "tokdyn")
BASELINE = os.path.join(HERE, "baseline.py")

V2 = [[0.2, 1.0], [-1.0, -0.2]]  # paper case 4, v11 = 0.2 < v12 = 1: oscillation, not stiff

CASES = [
    dict(name="lsa-n1e5-d2", kernel="lsa", n=100_000, d=2, t_end=50.0, target=">= 10"),
    dict(name="usa-n4000-d2", kernel="usa", n=4000, d=2, t_end=10.0, target=">= 10"),
    dict(name="usa-n2000-d100", kernel="usa", n=2000, d=100, t_end=10.0, target=">= 2"),
    dict(name="usa-n2000-d100-random-a", kernel="usa", n=2000, d=100, t_end=10.0, a="random",
         target=">= 2 vs JAX"),
    dict(name="sa-n2000-d100-random-a", kernel="sa", n=2000, d=100, t_end=10.0, a="random",
         target=">= 2 vs JAX"),
    dict(name="mem-lsa-n1e6-d2", kernel="lsa", n=1_000_000, d=2, t_end=5.0, target="memory"),
    dict(name="mem-usa-n20000-d2", kernel="usa", n=20000, d=2, t_end=0.5, target="memory"),
    dict(name="lsa-n1e7-d2", kernel="lsa", n=10_000_000, d=2, t_end=50.0, target="tokdyn only",
         big=True, tokdyn_only=True),
]
# Names --cases accepts for several cases at once.
CASE_GROUPS = {
    "d100": ["usa-n2000-d100-random-a", "sa-n2000-d100-random-a", "usa-n2000-d100"],
}
SAMPLES = 101
RTOL, ATOL = 1e-9, 1e-11
REF_RTOL, REF_ATOL = 1e-13, 1e-15


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- environment


def venv_ready():
    if not os.path.exists(VENV_PY):
        return False
    return subprocess.run([VENV_PY, "-c", "import numpy, scipy"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def ensure_venv_and_reexec():
    """Outside the venv: create it if needed, then replace this process by itself inside it."""
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not venv_ready():
        log(f"creating {VENV} (numpy, scipy from the package index)")
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([VENV_PY, "-m", "pip", "install", "--quiet", "numpy", "scipy"], check=True)
    os.environ.setdefault("BASELINE_CMDLINE",
                          shlex.join(["python3", os.path.relpath(__file__, ROOT)] + sys.argv[1:]))
    os.execv(VENV_PY, [VENV_PY, os.path.abspath(__file__)] + sys.argv[1:])


def ensure_jax_venv():
    """output/jax-venv with jax and diffrax from the package index (for --jax); their versions."""
    probe = [JAX_PY, "-c", "import jax, diffrax; print(jax.__version__, diffrax.__version__)"]
    if not os.path.exists(JAX_PY) or subprocess.run(probe, capture_output=True).returncode != 0:
        log(f"creating {JAX_VENV} (jax, diffrax from the package index)")
        subprocess.run([sys.executable, "-m", "venv", JAX_VENV], check=True)
        subprocess.run([JAX_PY, "-m", "pip", "install", "--quiet", "jax", "diffrax"], check=True)
    return subprocess.run(probe, capture_output=True, text=True, check=True).stdout.split()


def build_tokdyn(skip):
    """cargo build --release once; returns a note for the header."""
    if skip:
        if not os.path.exists(TOKDYN):
            sys.exit(f"error: --no-build but {TOKDYN} does not exist")
        return "not rebuilt (--no-build)"
    log("cargo build --release")
    r = subprocess.run(["cargo", "build", "--release"], cwd=ROOT)
    if r.returncode == 0:
        return "cargo build --release"
    if os.path.exists(TOKDYN):
        stamp = datetime.datetime.fromtimestamp(os.path.getmtime(TOKDYN)).isoformat(timespec="seconds")
        log("WARNING: cargo build --release failed; using the existing binary")
        return f"BUILD FAILED, existing target/release/tokdyn from {stamp} used"
    sys.exit("error: cargo build --release failed and there is no target/release/tokdyn")


def machine_lines():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gb = float("nan")
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_gb = int(line.split()[1]) * 1024 / 1e9
    import numpy
    import scipy

    def git(*a):
        r = subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else "?"

    dirty = git("status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock")
    commit = git("rev-parse", "--short", "HEAD") + (" + uncommitted changes in src/" if dirty else "")
    threads = ", ".join(f"{k}={os.environ[k]}" for k in
                        ("RAYON_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
                        if k in os.environ) or "none set"
    return [
        f"- machine: {cpu}, {os.cpu_count()} cores, {mem_gb:.1f} GB memory, "
        f"{platform.system()} {platform.release()}",
        f"- tokdyn: {commit}; Python {platform.python_version()}, numpy {numpy.__version__}, "
        f"scipy {scipy.__version__}; thread variables in the environment: {threads}",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
    ]


# ----------------------------------------------------------------------------- cases and files


def fmt_matrix(m):
    return "[" + ", ".join("[" + ", ".join(repr(float(v)) for v in row) + "]" for row in m) + "]"


def write_case(case, folder, seed):
    """scenario.toml, x0.npy (uniform on the sphere from default_rng(seed)), A.npy/V.npy if d > 2."""
    import numpy as np

    os.makedirs(folder, exist_ok=True)
    n, d = case["n"], case["d"]
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal((n, d))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    np.save(os.path.join(folder, "x0.npy"), x0)
    if d == 2:
        a_text, v_text = fmt_matrix([[1.0, 0.0], [0.0, 1.0]]), fmt_matrix(V2)
    else:
        assert d % 2 == 0
        V = np.zeros((d, d))
        for i in range(0, d, 2):
            V[i:i + 2, i:i + 2] = V2
        if case.get("a") == "random":
            # Gaussian entries / sqrt(d) from their own generator (seed + 1000).
            A = np.random.default_rng(seed + 1000).standard_normal((d, d)) / np.sqrt(d)
        else:
            A = np.eye(d)
        np.save(os.path.join(folder, "A.npy"), A)
        np.save(os.path.join(folder, "V.npy"), V)
        a_text, v_text = '{ file = "A.npy" }', '{ file = "V.npy" }'
    text = f"""name = "{case['name']}"
description = "benches/baseline: tokdyn against the numpy/scipy baseline (written by compare.py)"

[model]
kernel = "{case['kernel']}"
beta = {float(case.get('beta', 1.0))!r}
d = {d}
A = {a_text}
V = {v_text}

[tokens]
n = {n}
init = "file"
path = "x0.npy"
seed = {seed}

[time]
t_end = {float(case['t_end'])!r}
samples = {case.get('samples', SAMPLES)}

[solver]
method = "dop853"
rtol = {case.get('rtol', RTOL)!r}
atol = {case.get('atol', ATOL)!r}
"""
    path = os.path.join(folder, "scenario.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


# ----------------------------------------------------------------------------- running


def run_measured(cmd, logfile, env=None):
    """Runs cmd as a child; returns (exit code, wall seconds, peak RSS in MB of that child)."""
    with open(logfile, "w") as lf:
        start = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    p.returncode = code
    return code, wall, ru.ru_maxrss * 1024 / 1e6  # ru_maxrss is in KiB on Linux


def tail(path, lines=5):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-lines:]).strip()
    except OSError:
        return ""


def run_tokdyn(scenario, out, logfile, extra=()):
    cmd = [TOKDYN, "run", scenario, "--out", out, *extra]
    return run_measured(cmd, logfile)


BASELINE_ENV = None  # environment of the baseline's children (None: inherited)


def run_baseline(scenario, out, logfile):
    cmd = [sys.executable, BASELINE, scenario, "--out", out]
    return run_measured(cmd, logfile, BASELINE_ENV)


def run_jax(scenario, out, logfile):
    cmd = [JAX_PY, BASELINE_JAX, scenario, "--out", out]
    return run_measured(cmd, logfile)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_tokens(path):
    """An n x d array from a tokens CSV, with or without tokdyn's `x1,...,xd` header."""
    import numpy as np
    with open(path) as f:
        first = f.readline()
    header = 1 if first[:1].isalpha() else 0
    return np.loadtxt(path, delimiter=",", ndmin=2, skiprows=header)


def read_order(path):
    """t and complex R2 from an order.csv (tokdyn's or the baseline's: both start t,r2_re,r2_im)."""
    import numpy as np
    a = np.loadtxt(path, delimiter=",", skiprows=1, usecols=(0, 1, 2), ndmin=2)
    return a[:, 0], a[:, 1] + 1j * a[:, 2]


def token_error(a, b):
    import numpy as np
    return float(np.max(np.linalg.norm(a - b, axis=1)))


def run_side(label, runner, scenario, out, logfile, results):
    code, wall, rss = runner(scenario, out, logfile)
    entry = {"code": code, "wall": wall, "rss": rss}
    summary = os.path.join(out, "summary.json")
    if code == 0 and os.path.exists(summary):
        s = read_json(summary)
        entry["integ"] = s["wall_seconds"]
        entry["rhs"] = s["rhs_evals"]
        if "compile_seconds" in s:
            entry["compile"] = s["compile_seconds"]
            entry["import"] = s["import_seconds"]
        log(f"  {label}: {wall:.3f} s process, {s['wall_seconds']:.3f} s integration, "
            f"{s['rhs_evals']} rhs evals, {rss:.1f} MB peak RSS")
    else:
        log(f"  {label}: FAILED (exit {code}) after {wall:.1f} s, {rss:.1f} MB peak RSS:\n"
            f"    {tail(logfile)}")
    results.append(entry)


def bench_case(case, args, root):
    folder = os.path.join(root, case["name"])
    scenario = write_case(case, folder, args.seed)
    log(f"{case['name']}: n = {case['n']}, d = {case['d']}, {case['kernel']}, t_end = {case['t_end']}"
        f" ({scenario})")
    skip_base = case.get("tokdyn_only") or case["name"] in args.skip_baseline
    tok, base, jx = [], [], []
    for r in range(args.repeats):
        log(f" repeat {r + 1}/{args.repeats}")
        run_side("tokdyn", run_tokdyn, scenario, os.path.join(folder, "tokdyn"),
                 os.path.join(folder, "tokdyn.log"), tok)
        if not skip_base:
            run_side("baseline", run_baseline, scenario, os.path.join(folder, "baseline"),
                     os.path.join(folder, "baseline.log"), base)
        if args.jax and not case.get("tokdyn_only"):
            run_side("jax", run_jax, scenario, os.path.join(folder, "jax"),
                     os.path.join(folder, "jax.log"), jx)
    res = {"case": case, "tokdyn": tok, "baseline": base, "skip_base": skip_base, "jax": jx}
    if jx and all(e["code"] == 0 for e in jx) and all(e["code"] == 0 for e in tok):
        res["dx_jax"] = token_error(
            read_tokens(os.path.join(folder, "tokdyn", "tokens_final.csv")),
            read_tokens(os.path.join(folder, "jax", "tokens_final.csv")))

    tok_ok = all(e["code"] == 0 for e in tok)
    base_ok = bool(base) and all(e["code"] == 0 for e in base)
    if tok_ok and base_ok:
        xt = read_tokens(os.path.join(folder, "tokdyn", "tokens_final.csv"))
        xb = read_tokens(os.path.join(folder, "baseline", "tokens_final.csv"))
        res["dx"] = token_error(xt, xb)
        tt, rt = read_order(os.path.join(folder, "tokdyn", "order.csv"))
        tb, rb = read_order(os.path.join(folder, "baseline", "order.csv"))
        if len(tt) == len(tb) and max(abs(tt - tb)) < 1e-9 * max(1.0, case["t_end"]):
            res["dr2"] = float(max(abs(rt - rb)))
        else:
            log(f"  sample times differ: {len(tt)} tokdyn rows, {len(tb)} baseline rows")
    if args.reference:
        ref = os.path.join(folder, "reference")
        extra = ["--set", f"solver.rtol={REF_RTOL}", "--set", f"solver.atol={REF_ATOL}"]
        code, wall, rss = run_tokdyn(scenario, ref, os.path.join(folder, "reference.log"), extra)
        if code == 0:
            log(f"  reference (tokdyn, rtol {REF_RTOL}, atol {REF_ATOL}): {wall:.1f} s")
            xr = read_tokens(os.path.join(ref, "tokens_final.csv"))
            if tok_ok:
                res["ref_tok"] = token_error(
                    read_tokens(os.path.join(folder, "tokdyn", "tokens_final.csv")), xr)
            if base_ok:
                res["ref_base"] = token_error(
                    read_tokens(os.path.join(folder, "baseline", "tokens_final.csv")), xr)
        else:
            log(f"  reference FAILED (exit {code}): {tail(os.path.join(folder, 'reference.log'))}")
    return res


# ----------------------------------------------------------------------------- tables


def med(entries, key):
    vals = [e[key] for e in entries if e["code"] == 0 and key in e]
    if not vals or len(vals) < len(entries):
        return None
    return statistics.median(vals)


def peak(entries):
    return max((e["rss"] for e in entries), default=None)


def f3(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def status_cell(entries, skipped):
    if skipped:
        return "skipped"
    bad = [e["code"] for e in entries if e["code"] != 0]
    return f"failed (exit {bad[0]})" if bad else None


def tables(results, reference):
    out = []
    out.append("| case | n | d | kernel | t_end | target | tokdyn wall s | tokdyn integ s | "
               "baseline wall s | baseline integ s | ratio wall | ratio integ | "
               "rhs evals tokdyn | rhs evals baseline |")
    out.append("|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        c, tok, base = r["case"], r["tokdyn"], r["baseline"]
        tw, ti, bw, bi = med(tok, "wall"), med(tok, "integ"), med(base, "wall"), med(base, "integ")
        tfail, bfail = status_cell(tok, False), status_cell(base, r["skip_base"])
        rw = bw / tw if tw and bw else None
        ri = bi / ti if ti and bi else None
        trhs = tok[-1].get("rhs") if tok else None
        brhs = base[-1].get("rhs") if base else None
        out.append(
            f"| {c['name']} | {c['n']} | {c['d']} | {c['kernel']} | {c['t_end']:g} | {c['target']} | "
            f"{tfail or f3(tw)} | {tfail or f3(ti)} | {bfail or f3(bw)} | {bfail or f3(bi)} | "
            f"{f3(rw, '.2f')} | {f3(ri, '.2f')} | {f3(trhs, 'd')} | {f3(brhs, 'd')} |")
    out.append("")
    head = ("| case | state MB | tokdyn peak RSS MB | baseline peak RSS MB | tokdyn RSS/state | "
            "baseline RSS/state | max token diff | max dR2 |")
    sep = "|---|---:|---:|---:|---:|---:|---:|---:|"
    if reference:
        head += " tokdyn err vs ref | baseline err vs ref |"
        sep += "---:|---:|"
    out.append(head)
    out.append(sep)
    for r in results:
        c = r["case"]
        state = c["n"] * c["d"] * 8 / 1e6
        tr, br = peak(r["tokdyn"]), peak(r["baseline"])
        line = (f"| {c['name']} | {state:.3g} | {f3(tr, '.1f')} | "
                f"{'skipped' if r['skip_base'] else f3(br, '.1f')} | "
                f"{f3(tr / state if tr else None, '.1f')} | {f3(br / state if br else None, '.1f')} | "
                f"{f3(r.get('dx'), '.2e')} | {f3(r.get('dr2'), '.2e')} |")
        if reference:
            line += f" {f3(r.get('ref_tok'), '.2e')} | {f3(r.get('ref_base'), '.2e')} |"
        out.append(line)
    return out


def peer_table(results):
    """Every case against both peers: ratios of whole-process and of integration times."""
    out = ["| case | tokdyn wall s | tokdyn integ s | numpy wall s | JAX wall s | JAX import s | "
           "JAX compile s | JAX integ s | vs numpy (wall) | vs JAX (wall) | vs JAX (integ) | "
           "rhs evals tokdyn / JAX | max token diff vs JAX |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in results:
        c, tok, base, jx = r["case"], r["tokdyn"], r["baseline"], r["jax"]
        tw, ti, bw = med(tok, "wall"), med(tok, "integ"), med(base, "wall")
        jw, ji, jc, jimp = med(jx, "wall"), med(jx, "integ"), med(jx, "compile"), med(jx, "import")
        ratio = lambda a, b: f3(a / b if a and b else None, ".2f")  # noqa: E731
        trhs = tok[-1].get("rhs") if tok else None
        jrhs = jx[-1].get("rhs") if jx else None
        out.append(f"| {c['name']} | {f3(tw)} | {f3(ti)} | "
                   f"{status_cell(base, r['skip_base']) or f3(bw)} | "
                   f"{status_cell(jx, not jx) or f3(jw)} | {f3(jimp, '.2f')} | {f3(jc, '.2f')} | "
                   f"{f3(ji)} | {ratio(bw, tw)} | {ratio(jw, tw)} | {ratio(ji, ti)} | "
                   f"{f3(trhs, 'd')} / {f3(jrhs, 'd')} | {f3(r.get('dx_jax'), '.2e')} |")
    return out


# ----------------------------------------------------------------------------- reduced models


def reduced(args, root):
    ns = [100, 1000, 10000, 100000]
    if args.quick:
        ns = [n // 10 for n in ns]
    rows = ["| n | full s | phase s | ws s | oa s | phase/full dR2 | ws/full dR2 | oa/full dR2 | "
            "process wall s |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    scenario = os.path.join(ROOT, "scenarios", "case4-oscillation.toml")
    for n in ns:
        out = os.path.join(root, f"reduced-{n}")
        logfile = os.path.join(root, f"reduced-{n}.log")
        log(f"reduced models: tokdyn compare case4-oscillation, n = {n}")
        code, wall, _ = run_measured(
            [TOKDYN, "compare", scenario, "--set", f"tokens.n={n}", "--out", out], logfile)
        if code != 0:
            log(f"  FAILED (exit {code}): {tail(logfile)}")
            rows.append(f"| {n} | failed (exit {code}) | | | | | | | {wall:.3f} |")
            continue
        cmp = read_json(os.path.join(out, "summary.json"))["compare"]
        s = cmp["seconds"]
        rows.append(f"| {n} | {s['full']:.4f} | {s['phase']:.4f} | {s['ws']:.4f} | {s['oa']:.4f} | "
                    f"{cmp['phase_vs_full']:.2e} | {cmp['ws_vs_full']:.2e} | {cmp['oa_vs_full']:.2e} | "
                    f"{wall:.3f} |")
    return rows


# ----------------------------------------------------------------------------- correctness check


def check(args, root):
    """Small cases, every kernel, d = 2 and 5, non-symmetric A and V: the baseline's field against
    the pair-by-pair formula, and its final tokens against tokdyn's."""
    import numpy as np
    sys.path.insert(0, HERE)
    sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
    import baseline

    rows = ["| kernel | d | field vs pair-by-pair | max token diff | max dR2 | tokdyn rhs | "
            "baseline rhs |", "|---|---:|---:|---:|---:|---:|---:|"]
    worst = 0.0
    for d in (2, 5):
        for kernel in ("lsa", "usa", "sa"):
            name = f"check-{kernel}-d{d}"
            folder = os.path.join(root, name)
            os.makedirs(folder, exist_ok=True)
            rng = np.random.default_rng(100 + d)
            A = rng.standard_normal((d, d)) / np.sqrt(d)
            V = rng.standard_normal((d, d)) / np.sqrt(d)
            x0 = rng.standard_normal((200, d))
            x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
            np.save(os.path.join(folder, "x0.npy"), x0)
            if d == 2:
                a_text, v_text = fmt_matrix(A), fmt_matrix(V)
            else:
                np.save(os.path.join(folder, "A.npy"), A)
                np.save(os.path.join(folder, "V.npy"), V)
                a_text, v_text = '{ file = "A.npy" }', '{ file = "V.npy" }'
            scen = os.path.join(folder, "scenario.toml")
            with open(scen, "w") as f:
                f.write(f'name = "{name}"\n\n[model]\nkernel = "{kernel}"\nbeta = 1.3\nd = {d}\n'
                        f'A = {a_text}\nV = {v_text}\n\n[tokens]\nn = 200\ninit = "file"\n'
                        f'path = "x0.npy"\n\n[time]\nt_end = 5.0\nsamples = 51\n')
            # the vectorised field against the formula written pair by pair
            xs = x0 * rng.uniform(0.5, 2.0, (200, 1))  # off the sphere: evaluated at x/|x|
            field = baseline.make_field(kernel, 1.3, A, V, 200, d)
            fv = field(0.0, xs.T.ravel()).reshape(d, 200).T  # the baseline's state is X^T
            xn = xs / np.linalg.norm(xs, axis=1, keepdims=True)
            fp = np.zeros_like(xn)
            for k in range(200):
                e = np.array([1.3 * xn[k] @ A @ xn[j] for j in range(200)])
                w = {"lsa": e / 200, "usa": np.exp(e) / 200,
                     "sa": np.exp(e - e.max()) / np.exp(e - e.max()).sum()}[kernel]
                y = sum(w[j] * (V @ xn[j]) for j in range(200))
                fp[k] = y - (xn[k] @ y) * xn[k]
            field_err = float(np.max(np.abs(fv - fp)) / np.max(np.abs(fp)))
            rt = run_tokdyn(scen, os.path.join(folder, "tokdyn"), os.path.join(folder, "tokdyn.log"))
            rb = run_baseline(scen, os.path.join(folder, "baseline"),
                              os.path.join(folder, "baseline.log"))
            if rt[0] or rb[0]:
                rows.append(f"| {kernel} | {d} | {field_err:.1e} | tokdyn exit {rt[0]}, "
                            f"baseline exit {rb[0]} | | | |")
                log(tail(os.path.join(folder, "tokdyn.log")) + "\n" +
                    tail(os.path.join(folder, "baseline.log")))
                worst = float("inf")
                continue
            dx = token_error(read_tokens(os.path.join(folder, "tokdyn", "tokens_final.csv")),
                             read_tokens(os.path.join(folder, "baseline", "tokens_final.csv")))
            _, r2t = read_order(os.path.join(folder, "tokdyn", "order.csv"))
            _, r2b = read_order(os.path.join(folder, "baseline", "order.csv"))
            dr2 = float(max(abs(r2t - r2b)))
            st = read_json(os.path.join(folder, "tokdyn", "summary.json"))
            sb = read_json(os.path.join(folder, "baseline", "summary.json"))
            worst = max(worst, dx, field_err)
            rows.append(f"| {kernel} | {d} | {field_err:.1e} | {dx:.2e} | {dr2:.2e} | "
                        f"{st['rhs_evals']} | {sb['rhs_evals']} |")
    rows.append("")
    rows.append(f"n = 200, t_end = 5, beta = 1.3, A and V Gaussian (non-symmetric), rtol 1e-9, "
                f"atol 1e-11. Worst: {worst:.2e} ({'OK' if worst < 1e-7 else 'ABOVE 1e-7'}).")
    return rows, worst < 1e-7


# ----------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(
        description="tokdyn against the numpy/scipy baseline (and, with --jax, JAX + diffrax)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="cases: " + ", ".join(c["name"] for c in CASES) + "\n"
        f"groups for --cases: {', '.join(CASE_GROUPS)}\n\n"
        "The d = 100 USA and SA cases (random A, and USA with A = I) against JAX and numpy,\n"
        "one run of each program:\n"
        "  python3 benches/baseline/compare.py --jax --cases d100 --repeats 1\n"
        "against JAX alone (the numpy program skipped):\n"
        "  python3 benches/baseline/compare.py --jax --cases d100 --skip-baseline d100 --repeats 1\n"
        "Nothing is installed for --help; the first real run makes output/baseline-venv\n"
        "(and output/jax-venv for --jax) from the package index.")
    ap.add_argument("--cases", help="comma-separated case names or groups (default: all but "
                    "lsa-n1e7-d2); 'none' for no case")
    ap.add_argument("--repeats", type=int, default=None, help="runs of each side (default 3)")
    ap.add_argument("--quick", action="store_true", help="n / 10 and 1 repeat, to try the script")
    ap.add_argument("--big", action="store_true", help="include lsa-n1e7-d2 (tokdyn only)")
    ap.add_argument("--reference", action="store_true",
                    help=f"errors against tokdyn at rtol {REF_RTOL}, atol {REF_ATOL}")
    ap.add_argument("--reduced", action="store_true",
                    help="tokdyn compare on case4-oscillation for n = 100 ... 100000")
    ap.add_argument("--skip-baseline", action="append", default=[], metavar="CASE",
                    help="run only tokdyn (and JAX with --jax) for CASE (a case or group; "
                    "repeatable or comma-separated)")
    ap.add_argument("--check", action="store_true",
                    help="first check the baseline against tokdyn on small cases (n = 200)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the initial tokens (default 1)")
    ap.add_argument("--no-build", action="store_true", help="use target/release/tokdyn as it is")
    ap.add_argument("--jax", action="store_true",
                    help="also run the JAX + diffrax peer (output/jax-venv, made on first use)")
    ap.add_argument("--blas-threads", type=int, metavar="N",
                    help="set OPENBLAS_NUM_THREADS=N for the baseline only (default: not set)")
    args = ap.parse_args()
    ensure_venv_and_reexec()
    args.skip_baseline = {w for s in args.skip_baseline for c in s.split(",") if c
                          for w in CASE_GROUPS.get(c, [c])}
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3

    names = [c["name"] for c in CASES]
    if args.cases == "none":
        selected = []
    elif args.cases:
        wanted = [w for s in args.cases.split(",") if s for w in CASE_GROUPS.get(s, [s])]
        unknown = [w for w in wanted if w not in names]
        if unknown:
            sys.exit(f"error: --cases: unknown case(s) {unknown}; known: {names}")
        selected = [c for c in CASES if c["name"] in wanted]
    else:
        selected = [c for c in CASES if not c.get("big") or args.big]
    if args.big and not any(c.get("big") for c in selected) and not args.cases:
        selected += [c for c in CASES if c.get("big")]
    unknown = args.skip_baseline - set(names)
    if unknown:
        sys.exit(f"error: --skip-baseline: unknown case(s) {sorted(unknown)}")
    if args.quick:
        selected = [dict(c, n=c["n"] // 10) for c in selected]

    global BASELINE_ENV
    if args.blas_threads:
        BASELINE_ENV = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.blas_threads))
    jax_versions = ensure_jax_venv() if args.jax else None
    build_note = build_tokdyn(args.no_build)
    root = os.path.join(PERF, "quick") if args.quick else PERF
    os.makedirs(root, exist_ok=True)
    # Run a private copy, so that a rebuild of target/ during the benchmark cannot change it.
    global TOKDYN
    stamp = datetime.datetime.fromtimestamp(os.path.getmtime(TOKDYN)).isoformat(timespec="seconds")
    private = os.path.join(root, "tokdyn-under-test")
    shutil.copy2(TOKDYN, private)
    TOKDYN = private
    with open(TOKDYN, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]

    report = ["# tokdyn against the numpy/scipy baseline", "",
              "- command: `" + os.environ.get(
                  "BASELINE_CMDLINE", shlex.join(["python3", os.path.relpath(__file__, ROOT)]
                                                 + sys.argv[1:])) + "`"]
    report += machine_lines()
    report.append(f"- build: {build_note}; target/release/tokdyn of {stamp} (sha256 {digest}), "
                  f"copied to {os.path.relpath(TOKDYN, ROOT)} and run from there")
    report.append("- load average (1, 5, 15 min) at the start: "
                  + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    code, _, rss = run_measured([sys.executable, "-c", "import numpy, scipy.integrate"], os.devnull,
                                BASELINE_ENV)
    report.append(f"- baseline: OPENBLAS_NUM_THREADS="
                  f"{args.blas_threads if args.blas_threads else 'not set (OpenBLAS default)'}; "
                  f"Python with numpy and scipy.integrate imported, nothing else: {rss:.1f} MB peak RSS")
    report.append(f"- settings: DOP853, rtol {RTOL}, atol {ATOL}, {SAMPLES} samples, beta 1, "
                  f"A = I (the -random-a cases: Gaussian / sqrt(d), seed + 1000), "
                  f"V = [[0.2, 1], [-1, -0.2]] (block-diagonal for d = 100), "
                  f"tokens uniform on the sphere (numpy default_rng({args.seed})); "
                  f"{args.repeats} repeat(s), tokdyn and baseline alternately; medians of wall "
                  f"times, largest peak RSS" + (" (--quick: n / 10)" if args.quick else ""))
    if jax_versions:
        report.append(f"- JAX peer: jax {jax_versions[0]}, diffrax {jax_versions[1]}, float64, "
                      "Dopri8 + PIDController at the same rtol/atol, SaveAt(ts) at the same "
                      "samples, one jax.jit compiled ahead of time (XLA's default threads)")
    print("\n".join(report), flush=True)
    ok = True

    if args.check:
        rows, ok = check(args, root)
        block = ["", "## Check: baseline against tokdyn on small cases", ""] + rows
        print("\n".join(block), flush=True)
        report += block

    results = [bench_case(c, args, root) for c in selected]
    if results:
        block = ["", "## Speed", ""] + tables(results, args.reference)
        # tables() returns the speed table, a blank line, then the memory/accuracy table
        i = block.index("", 3)
        block[i:i + 1] = ["", "## Memory and accuracy", ""]
        print("\n".join(block), flush=True)
        report += block
    if results and args.jax:
        block = ["", "## Against both peers (ratios: peer time / tokdyn time)", ""]
        block += peer_table(results)
        print("\n".join(block), flush=True)
        report += block
    if args.reduced:
        block = ["", "## Reduced models (tokdyn compare scenarios/case4-oscillation.toml, "
                 "t_end = 200, 2001 samples)", ""] + reduced(args, root)
        print("\n".join(block), flush=True)
        report += block
    block = ["", "- load average (1, 5, 15 min) at the end: "
             + ", ".join(f"{v:.2f}" for v in os.getloadavg())]
    print("\n".join(block), flush=True)
    report += block
    with open(os.path.join(root, "report.md"), "w") as f:
        f.write("\n".join(report) + "\n")
    log(f"report written to {os.path.relpath(os.path.join(root, 'report.md'), ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
