#!/usr/bin/env bash
# Tandem's CPU step beside PyTorch's on the same cores, alternated round
# after round: on a host whose speed drifts between runs (a shared machine),
# runs minutes apart compare poorly, so each round runs every binary given
# (dp_cpu_bench builds) in every layout given, then PyTorch
# (bench/torch_cpu_reference.py) with one thread per core, all pinned to
# CORES with taskset. Prints a line per run and, per binary and layout, the
# median step over the rounds, and PyTorch's step / its step in each round
# (the round's own pair): the median, the range and how many rounds reached
# 1.0.
#   bash bench/run_cpu_rounds.sh CORES ROUNDS LAYOUTS DP_CPU_BENCH [DP_CPU_BENCH...]
# CORES is a taskset list ("3", "0-7"); LAYOUTS is a comma-separated list of
# WORKERSxTHREADS ("1x1", "1x8,2x4"). E.g. one core, ten rounds:
#   bash bench/run_cpu_rounds.sh 3 10 1x1 bazel-out/k8-opt/bin/bench/dp_cpu_bench
set -u
usage="usage: run_cpu_rounds.sh CORES ROUNDS LAYOUTS DP_CPU_BENCH [DP_CPU_BENCH...]"
if [ $# -lt 4 ]; then echo "$usage" >&2; exit 2; fi
cores=$1 rounds=$2; IFS=, read -r -a layouts <<< "$3"; shift 3; bins=("$@")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/round_args.sh"
for layout in "${layouts[@]}"; do
  if ! [[ $layout =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]]; then
    echo "run_cpu_rounds.sh: layout '$layout' is not WORKERSxTHREADS (e.g. 2x4)" >&2; exit 2
  fi
done
. "$here/torch_python.sh"
flags=(--mode=threads --overlap=on --steps=20 --repeats=5 --warmup=5 --comm_iters=1)
step_ms() { grep '^result' | grep -o 'step_ms=[0-9.]*' | head -1 | cut -d= -f2; }
log=$(mktemp)
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    for layout in "${layouts[@]}"; do
      echo "round=$r cores=$cores bin=$bin layout=$layout step_ms=$(taskset -c "$cores" "$bin" \
        "${flags[@]}" --workers="${layout%x*}" --cpu_threads="${layout#*x}" | step_ms)"
    done
  done
  echo "round=$r cores=$cores bin=torch layout=${n}_threads step_ms=$(taskset -c "$cores" \
    "$python" "$here/torch_cpu_reference.py" --threads="$n" | step_ms)"
done | tee "$log"
"$python" - "$log" <<'PY'
import re, statistics, sys
runs, keys = {}, []
for line in open(sys.argv[1]):
    m = re.match(r"round=(\d+) cores=\S+ bin=(\S+) layout=(\S+) step_ms=([\d.]+)$", line)
    if not m:
        continue
    key = "torch" if m[2] == "torch" else (m[2], m[3])
    if key not in keys:
        keys.append(key)
    runs.setdefault(int(m[1]), {})[key] = float(m[4])
for key in keys:
    if key == "torch":
        continue
    pairs = [r["torch"] / r[key] for r in runs.values() if key in r and "torch" in r]
    steps = [r[key] for r in runs.values() if key in r]
    if not pairs:
        print(f"summary bin={key[0]} layout={key[1]}: no round with both steps")
        continue
    print(f"summary bin={key[0]} layout={key[1]} rounds={len(pairs)} "
          f"step_ms_median={statistics.median(steps):.2f} "
          f"x_torch_median={statistics.median(pairs):.2f} "
          f"x_torch_range={min(pairs):.2f}-{max(pairs):.2f} "
          f"rounds_at_least_1={sum(x >= 1 for x in pairs)}")
torch = [r["torch"] for r in runs.values() if "torch" in r]
if torch:
    print(f"summary bin=torch step_ms_median={statistics.median(torch):.2f}")
PY
rm -f "$log"
