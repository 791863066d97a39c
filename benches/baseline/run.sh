#!/usr/bin/env bash
# tokdyn against the numpy/scipy baseline, from a clean clone:
#   bash benches/baseline/run.sh [--cases a,b] [--repeats N] [--quick] [--big] [--reference]
#                                [--reduced] [--skip-baseline CASE] [--check] [--blas-threads N]
# compare.py makes output/baseline-venv (numpy, scipy), builds tokdyn (cargo build --release),
# writes output/perf/<case>/ and prints the tables (also saved as output/perf/report.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
export BASELINE_CMDLINE="bash benches/baseline/run.sh${*:+ $*}"
exec python3 benches/baseline/compare.py "$@"
