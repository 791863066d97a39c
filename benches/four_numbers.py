#!/usr/bin/env python3
"""Issue #38's four numbers against the peers, in one run, as one table.

    python3 benches/four_numbers.py [--tokdyn PATH] [--python PY] [--jax-python PY]
        [--repeats N] [--blas-threads N] [--no-field-bench] [--quick]

1. LSA, `--model group`, n = 10^7, d = 2, t_end = 50 (benches/baseline's `lsa-n1e7-d2`):
   tokdyn's CPU seconds against the target "well under 10 s".
2. LSA, `--model group`, n = 10^5 (`lsa-n1e5-d2`) against the numpy/scipy program
   benches/baseline/baseline.py on the same scenario (target: >= 20x).
3. USA, n = 2000, d = 100, random A, t_end = 10 (`usa-n2000-d100-random-a`) against
   benches/baseline/baseline_jax.py (JAX + diffrax), when a Python with both is found; otherwise
   the row says "skipped" (target: >= 2x).
4. The A = I saving per field evaluation of usa, n = 2000, d = 100: the rows `Usa | random` and
   `Usa | I` of `cargo bench --features bench-internals --bench gemm -- field` run with
   RAYON_NUM_THREADS=1 (target: >= 1.5x).

Every time is the user + system CPU time of the whole child process (os.wait4's rusage, what
/usr/bin/time reports), the minimum over --repeats runs (default 3; 1 with --quick), so other
processes on a shared machine inflate it little. The scenarios are written by
benches/baseline/compare.py's `write_case` (same seeds, x0.npy, A.npy/V.npy) into
output/perf/four/<case>/. --quick divides every n by 10 (to try the script).

Needs numpy (for the scenarios and the numpy peer): the script re-runs itself with --python
(default output/baseline-venv/bin/python, made by benches/baseline/run.sh) when the Python it was
started with has no numpy. Nothing is installed. --jax-python defaults to
output/jax-venv/bin/python (made by `bash benches/baseline/run.sh --jax`).
"""

import argparse
import datetime
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BASE = os.path.join(HERE, "baseline")
sys.path.insert(0, BASE)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def cpu_run(cmd, logfile, env=None):
    """Runs cmd; returns (exit code, user + system CPU seconds, wall seconds, peak RSS MB).

    The peak RSS is only logged: the child's rusage counts this Python's pages it started
    with (the scenarios' arrays), so it is no measure of tokdyn's memory."""
    with open(logfile, "w") as lf:
        start = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - start
    return (os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime, wall,
            ru.ru_maxrss / 1024)


def best(cmd, logfile, repeats, env=None, label=""):
    """The run with the least CPU time of `repeats` (None when one failed)."""
    runs = []
    for r in range(repeats):
        code, cpu, wall, rss = cpu_run(cmd, logfile, env)
        log(f"  {label} {r + 1}/{repeats}: exit {code}, {cpu:.2f} CPU s, {wall:.2f} s wall, "
            f"{rss:.0f} MB")
        if code != 0:
            with open(logfile) as f:
                log("    " + "".join(f.readlines()[-3:]).strip())
            return None
        runs.append((cpu, wall, rss))
    return min(runs)


def evals(folder):
    import json
    try:
        with open(os.path.join(folder, "summary.json")) as f:
            return json.load(f).get("rhs_evals")
    except OSError:
        return None


def case(name, quick):
    import compare
    c = next(c for c in compare.CASES if c["name"] == name)
    return dict(c, n=c["n"] // 10) if quick else c


def run_pair(name, args, peer_py, peer_script, peer_env, tokdyn_extra=()):
    """tokdyn and (when peer_py) a peer on one case: (tokdyn best, peer best, evals, evals)."""
    import compare
    c = case(name, args.quick)
    folder = os.path.join(ROOT, "output", "perf", "four", c["name"])
    scenario = compare.write_case(c, folder, 1)
    log(f"{c['name']}: n = {c['n']}, d = {c['d']}, {c['kernel']}, t_end = {c['t_end']}")
    out = os.path.join(folder, "tokdyn")
    tok = best([args.tokdyn, "run", scenario, "--out", out, *tokdyn_extra],
               os.path.join(folder, "tokdyn.log"), args.repeats, label="tokdyn")
    peer, peer_out = None, os.path.join(folder, "peer")
    if peer_py:
        peer = best([peer_py, os.path.join(BASE, peer_script), scenario, "--out", peer_out],
                    os.path.join(folder, "peer.log"), args.repeats, peer_env, label=peer_script)
    return tok, peer, evals(out), evals(peer_out) if peer else None


def field_bench(args):
    """CPU ms per usa evaluation, random A and A = I, from the gemm bench's field table."""
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    cmd = ["cargo", "bench", "--features", "bench-internals", "--bench", "gemm", "--", "field"]
    log("cargo bench --features bench-internals --bench gemm -- field (RAYON_NUM_THREADS=1)")
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    ms = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] == "Usa" and cells[1] in ("random", "I"):
            # Column 3 is CPU ms per evaluation per core (both cores' CPU / 2): times 2 is the
            # evaluation's CPU time, whatever the thread count.
            ms[cells[1]] = 2.0 * float(cells[2])
    if r.returncode != 0 or len(ms) != 2:
        log(r.stderr[-2000:])
        return None
    return ms


def python_with(modules, py):
    return py and os.path.exists(py) and subprocess.run(
        [py, "-c", f"import {modules}"], capture_output=True).returncode == 0


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokdyn", default=os.path.join(ROOT, "target", "release", "tokdyn"))
    ap.add_argument("--python", default=os.path.join(ROOT, "output", "baseline-venv", "bin",
                                                     "python"))
    ap.add_argument("--jax-python", default=os.path.join(ROOT, "output", "jax-venv", "bin",
                                                         "python"))
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="OPENBLAS_NUM_THREADS of the numpy peer (default 1)")
    ap.add_argument("--no-field-bench", action="store_true", help="skip number 4")
    ap.add_argument("--quick", action="store_true", help="n / 10, 1 repeat")
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
    except ImportError:
        if not python_with("numpy, scipy", args.python):
            sys.exit(f"error: --python {args.python}: no Python with numpy and scipy there "
                     "(bash benches/baseline/run.sh --cases none makes it)")
        os.execv(args.python, [args.python, os.path.abspath(__file__)] + sys.argv[1:])
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if not os.path.exists(args.tokdyn):
        sys.exit(f"error: --tokdyn {args.tokdyn}: no such file (cargo build --release)")
    args.tokdyn = os.path.abspath(args.tokdyn)
    start = datetime.datetime.now(datetime.timezone.utc)
    load0 = os.getloadavg()
    jax_py = args.jax_python if python_with("jax, diffrax", args.jax_python) else None
    numpy_env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.blas_threads))
    group = ("--model", "group")

    big, _, _, _ = run_pair("lsa-n1e7-d2", args, None, None, None, group)
    small, numpy_run, _, numpy_evals = run_pair("lsa-n1e5-d2", args, sys.executable,
                                                "baseline.py", numpy_env, group)
    d100, jax_run, tok_evals, jax_evals = run_pair("usa-n2000-d100-random-a", args, jax_py,
                                                   "baseline_jax.py", None)
    field = None if args.no_field_bench else field_bench(args)

    def cpu(r):
        return f"{r[0]:.2f}" if r else "failed"

    scale = " (n / 10)" if args.quick else ""
    rows = [
        "| the issue's number | tokdyn CPU s | peer CPU s | ratio | target |",
        "|---|---:|---:|---:|---|",
        f"| 1. LSA group n = 10^7{scale}, t = 50 | {cpu(big)} | | | "
        "well under 10 s |" if big else f"| 1. LSA group n = 10^7{scale} | failed | | | |",
        f"| 2. LSA group n = 10^5{scale}, t = 50, against numpy/scipy "
        f"(OPENBLAS_NUM_THREADS={args.blas_threads}, {numpy_evals} evaluations) | {cpu(small)} | "
        f"{cpu(numpy_run)} | {ratio(numpy_run and numpy_run[0], small and small[0])} | >= 20x |",
    ]
    if jax_py:
        rows.append(f"| 3. USA n = 2000{scale}, d = 100, random A, t = 10, against JAX + diffrax "
                    f"({tok_evals} / {jax_evals} evaluations) | {cpu(d100)} | {cpu(jax_run)} | "
                    f"{ratio(jax_run and jax_run[0], d100 and d100[0])} | >= 2x |")
    else:
        rows.append(f"| 3. USA n = 2000{scale}, d = 100, random A, t = 10 ({tok_evals} "
                    f"evaluations) | {cpu(d100)} | skipped: no jax + diffrax at "
                    f"{args.jax_python} | | >= 2x |")
    if field:
        rows.append(f"| 4. A = I saving per usa evaluation, n = 2000, d = 100 (CPU ms, one "
                    f"thread) | {field['I']:.1f} (A = I) | {field['random']:.1f} (random A) | "
                    f"{field['random'] / field['I']:.2f}x | >= 1.5x |")
    else:
        rows.append("| 4. A = I saving per usa evaluation | "
                    + ("skipped (--no-field-bench)" if args.no_field_bench else "failed")
                    + " | | | >= 1.5x |")
    cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                      if l.startswith("model name")), "?")
    head = [f"four numbers of #38, {start:%Y-%m-%d %H:%M} UTC, {cpu_model}, "
            f"{os.cpu_count()} cores; load average {load0[0]:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end; min of {args.repeats} run(s), user + "
            f"system CPU seconds of the whole process; tokdyn {args.tokdyn}", ""]
    print("\n".join(head + rows))


if __name__ == "__main__":
    main()
