#!/bin/sh
# Byte-compares the outputs of two tokdyn binaries on the same scenarios.
#
#   benches/identical-sweeps.sh OLD_TOKDYN NEW_TOKDYN   (benches/identical-outputs.sh runs it too)
#
# Build the old one from the reference commit (e.g. `git worktree add /tmp/old main`, then
# `cargo build --release` there). Exit 0 when every compared file is identical.
#
# Sweeps: a small grid with a continuation (sweep-case1-map), a refinement with a continuation
# (case4-map-boundary at t_end = 600), the same grid as three shards merged, and a resume from a
# cut progress file. Compared: sweep.csv, sweep.json, boundaries.csv, branches.csv, the shard
# CSVs and summary.json without its wall time and paths (and, after the resume, without the
# counts of computed and reused points, which depend on the order points finished in).
# Pictures are not compared.
set -u
OLD=$1; NEW=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
S=$ROOT/scenarios
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

sweeps() { # BINARY OUT
    B=$1; O=$2; mkdir -p "$O"
    "$B" sweep "$S/sweep-case1-map.toml" --out "$O/grid" >/dev/null 2>&1 || echo "$O/grid failed"
    "$B" sweep "$S/case4-map-boundary.toml" --out "$O/refine" --set time.t_end=600 >/dev/null 2>&1 || echo "$O/refine failed"
    for k in 1 2 3; do
        "$B" sweep "$S/sweep-case1-map.toml" --out "$O/shards" --shard $k/3 >/dev/null 2>&1 || echo "$O/shard $k failed"
    done
    "$B" merge "$O/shards" >/dev/null 2>&1 || echo "$O/merge failed"
    "$B" sweep "$S/sweep-case1-map.toml" --out "$O/resume" >/dev/null 2>&1
    head -c 30000 "$O/resume/sweep.progress" > "$O/cut" && mv "$O/cut" "$O/resume/sweep.progress"
    rm "$O/resume/sweep.csv"
    "$B" sweep "$S/sweep-case1-map.toml" --out "$O/resume" --resume >/dev/null 2>&1 || echo "$O/resume failed"
}

sweeps "$OLD" "$WORK/old"
sweeps "$NEW" "$WORK/new"
bad=0
for d in grid refine shards resume; do
    for f in sweep.csv sweep.json boundaries.csv branches.csv \
        shard-1-of-3.csv shard-2-of-3.csv shard-3-of-3.csv; do
        [ -e "$WORK/old/$d/$f" ] || [ -e "$WORK/new/$d/$f" ] || continue
        cmp -s "$WORK/old/$d/$f" "$WORK/new/$d/$f" || { echo "differs: $d/$f"; bad=1; }
    done
    # The points a cut progress file keeps depend on the order they finished in.
    skip='"wall_seconds"\|/'
    [ $d = resume ] && skip='"wall_seconds"\|/\|"computed"\|"reused"'
    grep -v "$skip" "$WORK/old/$d/summary.json" > "$WORK/a"
    grep -v "$skip" "$WORK/new/$d/summary.json" > "$WORK/b"
    cmp -s "$WORK/a" "$WORK/b" || { echo "differs: $d/summary.json"; bad=1; }
done
[ $bad = 0 ] && echo "sweeps: all outputs identical"
exit $bad
