#!/usr/bin/env python3
"""Executes the notebooks of examples/ headless and reports each one's wall time.

Each notebook is copied into a temporary folder and executed there by nbclient in a fresh
kernel (the working directory is examples/, so the notebooks find the repository; they write
their results into temporary folders, here under the runner's own, removed when all pass), so
the stored notebooks stay without outputs. A notebook
fails when a cell raises (an assert included) or when it runs longer than --timeout seconds
(the kernel is then stopped). The executed copy of a failed notebook is kept and its path
printed. Exit status: 0 when every notebook passed, 1 otherwise.

    python examples/run-notebooks.py [--timeout SECONDS] [NOTEBOOK.ipynb ...]
"""

import argparse
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time

import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent


def execute(path, workdir, timeout):
    """Runs the copy of `path` in `workdir`; returns (error or None, wall seconds, copy)."""
    copy = workdir / path.name
    shutil.copyfile(path, copy)
    # The notebook's own temporary folders go under workdir too (removed with it).
    scratch = workdir / f"{path.stem}-tmp"
    scratch.mkdir()
    os.environ["TMPDIR"] = str(scratch)
    book = nbformat.read(copy, as_version=4)
    client = NotebookClient(
        book,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(HERE)}},
    )
    start = time.monotonic()
    error = None
    try:
        with client.setup_kernel():
            for index, cell in enumerate(book.cells):
                # Each cell gets what is left of the notebook's time (nbclient stops it then).
                left = timeout - (time.monotonic() - start)
                if left <= 0:
                    raise TimeoutError(f"still running after {timeout} s (at cell {index})")
                client.timeout = max(1, int(left))
                client.execute_cell(cell, index)
    except Exception as e:  # a failing cell, a timeout, a kernel that died
        detail = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()  # no terminal colours
        error = type(e).__name__
        if detail:
            error += "\n" + "\n".join("    " + line for line in detail.splitlines()[-25:])
    seconds = time.monotonic() - start
    nbformat.write(book, copy)
    return error, seconds, copy


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per notebook (default 300)")
    args = parser.parse_args()
    notebooks = args.notebooks or sorted(HERE.glob("*.ipynb"))
    if not notebooks:
        print("run-notebooks: no notebooks found", file=sys.stderr)
        return 1
    failed = []
    keep = pathlib.Path(tempfile.mkdtemp(prefix="tokdyn-notebooks-"))
    for path in notebooks:
        path = path.resolve()
        error, seconds, copy = execute(path, keep, args.timeout)
        if error:
            failed.append(path.name)
            print(f"FAILED  {path.name}  {seconds:7.1f} s  (executed copy: {copy})\n{error}", flush=True)
        else:
            copy.unlink()
            shutil.rmtree(keep / f"{path.stem}-tmp", ignore_errors=True)
            print(f"passed  {path.name}  {seconds:7.1f} s", flush=True)
    if not failed:
        shutil.rmtree(keep, ignore_errors=True)
    print(f"notebooks: {len(notebooks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
