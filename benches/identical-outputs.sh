#!/usr/bin/env bash
# Shows that two tokdyn binaries write the same outputs for a fixed set of small scenarios.
#
#   bash benches/identical-outputs.sh REF_BIN NEW_BIN [SCRATCH_DIR]
#
# Every case runs with both binaries, with RAYON_NUM_THREADS = 1 and 2, into separate folders.
# Every non-picture file must be byte-identical, except the wall-time fields (`wall_seconds`, `timings`,
# the `seconds` of compare) and a sweep summary's `threads`, which are masked before comparing
# (the report counts them), and a sweep's `sweep.progress`, a journal in completion order,
# compared sorted. Pictures
# (.png, .svg, .gif) are compared byte for byte and reported separately. The thread counts are
# also compared with each other (same binary, 1 vs 2 threads). Then benches/identical-sweeps.sh
# compares refinements, shards and resumes. Exit 0 when every non-picture file matches.
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 REF_BIN NEW_BIN [SCRATCH_DIR]" >&2
    exit 2
fi
ref=$(realpath "$1")
new=$(realpath "$2")
repo=$(cd "$(dirname "$0")/.." && pwd)
scratch=${3:-$(mktemp -d /tmp/identical-outputs.XXXXXX)}
mkdir -p "$scratch"
sc="$repo/scenarios"

# A small sweep over the case-4 OA map (3 x 3 points), written beside the scenarios it uses.
mkdir -p "$scratch/input"
cp "$sc"/case4-oscillation.toml "$sc"/sweep-case1.toml "$scratch/input/"
cat > "$scratch/input/sweep-small.toml" <<'TOML'
name = "sweep-small"
scenario = "case4-oscillation.toml"
model = "oa"
[axes]
v11 = { from = 0.0, to = 1.0, steps = 3 }
v12 = { from = 0.1, to = 0.7, steps = 3 }
TOML

# This round's rooms: softmax clusters and the cluster model, noise and ensembles, a sweep over
# the temperature, the codim-2 curves and the cycles of the random family.
cat > "$scratch/input/sa-metastable.toml" <<'TOML'
name = "sa-metastable"
[model]
kernel = "sa"
beta = 4.0
d = 2
A = "identity"
V = "identity"
[tokens]
n = 120
seed = 2
[time]
t_end = 30.0
samples = 121
TOML
cat > "$scratch/input/noisy-ensemble.toml" <<'TOML'
name = "noisy-ensemble"
[model]
kernel = "usa"
beta = 0
d = 2
A = "identity"
V = "identity"
[tokens]
n = 60
seed = 5
[time]
t_end = 6.0
samples = 31
[noise]
temperature = 0.3
seed = 20
dt = 0.05
[ensemble]
runs = 4
TOML
cat > "$scratch/input/sweep-temperature.toml" <<'TOML'
name = "sweep-temperature"
scenario = "noisy-ensemble.toml"
[axes]
"noise.temperature" = { from = 0.05, to = 2.05, steps = 3 }
TOML
cp "$sc"/random-family.toml "$scratch/input/"
cat > "$scratch/input/sweep-codim2.toml" <<'TOML'
name = "sweep-codim2"
scenario = "random-family.toml"
model = "oa"
[axes]
v11 = { from = -0.2, to = 0.7, steps = 4 }
v12 = { from = -0.6, to = 0.4, steps = 4 }
[codim2]
parameters = ["v11", "v12"]
from = [-0.2, -0.6]
to = [0.7, 0.4]
step = 0.02
curves = ["fold", "hopf"]
TOML
cat > "$scratch/input/sweep-cycles.toml" <<'TOML'
name = "sweep-cycles"
scenario = "random-family.toml"
model = "oa"
[axes]
v12 = { from = -0.6, to = 0.4, steps = 2 }
[continuation]
parameter = "v12"
from = -0.6
to = 0.4
step = 0.01
cycles = true
TOML

small2="--set tokens.n=64 --set time.t_end=30 --set time.samples=301"
# name | command line (after the binary; OUT is replaced by the output folder)
cases=(
  "lsa-full|run $sc/case4-oscillation.toml --out OUT $small2 --set output.trajectory=true"
  "lsa-uniform|run $sc/case1-clustering.toml --out OUT $small2"
  "usa-full|run $sc/case2-clustering.toml --out OUT $small2 --set model.kernel=usa"
  "usa-spectral|run $sc/case2-clustering.toml --out OUT --set tokens.n=200 --set time.t_end=20 --set time.samples=201 --set model.kernel=usa --set model.kernel_method=spectral"
  "sa-full|run $sc/case3-rotating-clusters.toml --out OUT $small2 --set model.kernel=sa"
  "usa-d100|run $sc/d100-usa-clustering.toml --out OUT --set tokens.n=40 --set time.t_end=5 --set time.samples=101"
  "lsa-d100-case3|run $sc/d100-lsa-case3.toml --out OUT --set tokens.n=40 --set time.t_end=10 --set time.samples=201"
  "group|run $sc/case4-oscillation.toml --out OUT $small2 --model group"
  "group-d100|run $sc/d100-lsa-oscillation.toml --out OUT --set tokens.n=60 --set time.t_end=20 --set time.samples=201 --model group"
  "phase|run $sc/case4-oscillation.toml --out OUT $small2 --model phase"
  "ws|run $sc/case4-oscillation.toml --out OUT $small2 --model ws"
  "oa|run $sc/case4-oscillation.toml --out OUT --model oa"
  "oa-tmax|run $sc/case1-interior.toml --out OUT --model oa --set time.t_end=20 --set time.samples=201 --set time.t_max=400"
  "rk4|run $sc/case2-no-clustering.toml --out OUT $small2 --set solver.method=rk4 --set solver.dt=0.05"
  "dopri5|run $sc/case4-convergence.toml --out OUT $small2 --set solver.method=dopri5"
  "compare|compare $sc/case4-oscillation.toml --out OUT $small2"
  "compare-d3|compare $sc/d100-lsa-clustering.toml --out OUT --set model.d=4 --set tokens.n=50 --set time.t_end=10 --set time.samples=101"
  "predict|predict $sc/case4-oscillation.toml --out OUT"
  "predict-case1|predict $sc/case1-interior.toml --out OUT"
  "portrait|portrait $sc/case4-oscillation.toml --out OUT"
  "layers-gpt2|run $sc/real-tiny-gpt2.toml --out OUT --set time.t_end=12 --set time.samples=121"
  "sweep|sweep $scratch/input/sweep-small.toml --out OUT --set time.t_end=40 --set time.samples=401"
  "inspect|inspect $sc/tiny-gpt2.safetensors --heads 4 --out OUT"
  "sa-clusters|run $scratch/input/sa-metastable.toml --out OUT"
  "clusters-model|run $scratch/input/sa-metastable.toml --out OUT --model clusters"
  "compare-sa|compare $scratch/input/sa-metastable.toml --out OUT"
  "predict-sa|predict $scratch/input/sa-metastable.toml --out OUT"
  "noise-ensemble|run $scratch/input/noisy-ensemble.toml --out OUT"
  "noise-one|run $scratch/input/noisy-ensemble.toml --out OUT --set ensemble.runs=1"
  "sweep-temperature|sweep $scratch/input/sweep-temperature.toml --out OUT"
  "sweep-codim2|sweep $scratch/input/sweep-codim2.toml --out OUT"
  "sweep-cycles|sweep $scratch/input/sweep-cycles.toml --out OUT --set params.v11=0.25"
  "gpt2-causal|run $sc/real-gpt2-causal.toml --out OUT --set time.t_end=6 --set time.samples=61"
)

# Runs every case with binary $1 and $2 threads into $scratch/$3.
run_all() {
    local bin=$1 threads=$2 side=$3
    local bindir="$scratch/bin-$side"
    mkdir -p "$bindir" "$scratch/$side"
    ln -sf "$bin" "$bindir/tokdyn"
    for c in "${cases[@]}"; do
        local name=${c%%|*} args=${c#*|}
        local out="$scratch/$side/$name"
        rm -rf "$out"
        # The same argv[0] and paths for both binaries, so the provenance matches.
        (cd "$scratch" && RAYON_NUM_THREADS=$threads PATH="$bindir:$PATH" \
            tokdyn ${args//OUT/out-$name} >"$scratch/$side.$name.out" 2>"$scratch/$side.$name.err"
         echo $? > "$scratch/$side.$name.rc")
        rm -rf "$out"
        if [ -d "$scratch/out-$name" ]; then mv "$scratch/out-$name" "$out"; else mkdir -p "$out"; fi
        cp "$scratch/$side.$name.rc" "$out/exit-code"
        # What predict, portrait and inspect print (run and compare print wall times).
        case $name in predict*|portrait|inspect) cp "$scratch/$side.$name.out" "$out/stdout.txt" ;; esac
    done
}

# A file on stdout with its wall times masked (JSON "wall_seconds"/"seconds"/"threads" values,
# the seconds column of compare.csv); a sweep's journal of finished points sorted.
masked() {
    case "$1" in
        *.json) python3 -c '
import json, sys
def mask(v):
    if isinstance(v, dict):
        return {k: "<time>" if k in ("wall_seconds", "seconds", "threads") else mask(x) for k, x in v.items() if k != "timings"}
    return [mask(x) for x in v] if isinstance(v, list) else v
print(json.dumps(mask(json.load(open(sys.argv[1]))), indent=1))' "$1" ;;
        # The journal of finished points, in the order they finished (any order).
        */sweep.progress) sort "$1" ;;
        */compare.csv) awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="seconds") c=i} {if(c) $c="<time>"; print}' OFS=, "$1" ;;
        *) cat "$1" ;;
    esac
}

# Compares folders $1 and $2; prints a line per difference; sets the global counters.
compare_sides() {
    local a=$1 b=$2 what=$3
    local f rel
    while IFS= read -r rel; do
        local fa="$a/$rel" fb="$b/$rel"
        case "$rel" in
            *.png|*.svg|*.gif) kind=picture ;;
            *) kind=data ;;
        esac
        if [ ! -e "$fa" ] || [ ! -e "$fb" ]; then
            echo "  MISSING  $what: $rel (only in $([ -e "$fa" ] && echo first || echo second))"
            [ $kind = data ] && data_bad=$((data_bad + 1)) || pic_bad=$((pic_bad + 1))
            continue
        fi
        if cmp -s "$fa" "$fb"; then
            [ $kind = data ] && data_same=$((data_same + 1)) || pic_same=$((pic_same + 1))
        elif [ $kind = data ] && cmp -s <(masked "$fa") <(masked "$fb"); then
            data_masked=$((data_masked + 1))
        elif [ $kind = data ]; then
            echo "  DIFFERS  $what: $rel"
            data_bad=$((data_bad + 1))
        else
            echo "  picture differs  $what: $rel"
            pic_bad=$((pic_bad + 1))
        fi
    done < <( (cd "$a" && find . -type f; cd "$b" && find . -type f) | sort -u)
}

for t in 1 2; do
    echo "running ${#cases[@]} cases with the reference binary, $t thread(s)..."
    run_all "$ref" $t ref-t$t
    echo "running ${#cases[@]} cases with the new binary, $t thread(s)..."
    run_all "$new" $t new-t$t
done

data_same=0 data_masked=0 data_bad=0 pic_same=0 pic_bad=0
echo "differences (none listed: all identical):"
for t in 1 2; do compare_sides "$scratch/ref-t$t" "$scratch/new-t$t" "ref vs new, $t thread(s)"; done
for side in ref new; do compare_sides "$scratch/$side-t1" "$scratch/$side-t2" "$side, 1 vs 2 threads"; done
echo "data files: $data_same byte-identical, $data_masked identical once wall times are masked, $data_bad different"
echo "pictures:   $pic_same byte-identical, $pic_bad different"
echo "cases that did not exit 0 (same code on both sides is checked above):"
grep -L '^0$' "$scratch"/*/*/exit-code 2>/dev/null | sed 's|^|  |'
echo "folders: $scratch"
# The sweep engineer's checks: a refinement, shards merged, a resume.
sweeps_ok=0
sh "$repo/benches/identical-sweeps.sh" "$ref" "$new" || sweeps_ok=1
[ $data_bad -eq 0 ] && [ $sweeps_ok -eq 0 ]
