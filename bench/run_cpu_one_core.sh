#!/usr/bin/env bash
# Tandem's 1-thread CPU step beside PyTorch's on one core, alternated many
# times: on a host whose speed drifts between runs (a shared machine), pairs
# run minutes apart compare poorly, so each round runs every binary given
# (dp_cpu_bench builds, 1 worker x 1 thread) and then PyTorch 1 thread
# (bench/torch_cpu_reference.py), all pinned to CORE. Prints a line per run
# and, per binary, the median over rounds of PyTorch's step / its step (the
# round's own pair) and how many rounds reached 1.0.
#   bash bench/run_cpu_one_core.sh CORE ROUNDS DP_CPU_BENCH [DP_CPU_BENCH...]
set -u
if [ $# -lt 3 ]; then
  echo "usage: run_cpu_one_core.sh CORE ROUNDS DP_CPU_BENCH [DP_CPU_BENCH...]" >&2
  exit 2
fi
core=$1 rounds=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/torch_python.sh"
flags=(--mode=threads --overlap=on --steps=20 --repeats=5 --warmup=5 --workers=1
       --cpu_threads=1 --comm_iters=1)
step_ms() { grep '^result' | grep -o 'step_ms=[0-9.]*' | head -1 | cut -d= -f2; }
log=$(mktemp)
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    echo "round=$r core=$core bin=$bin step_ms=$(taskset -c "$core" "$bin" "${flags[@]}" | step_ms)"
  done
  echo "round=$r core=$core bin=torch step_ms=$(taskset -c "$core" "$python" \
    "$here/torch_cpu_reference.py" --threads=1 | step_ms)"
done | tee "$log"
"$python" - "$log" "$@" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"round=(\d+) core=\d+ bin=(\S+) step_ms=([\d.]+)", line)
    if m:
        runs.setdefault(int(m[1]), {})[m[2]] = float(m[3])
for binary in sys.argv[2:]:
    ratios = [r["torch"] / r[binary] for r in runs.values() if binary in r and "torch" in r]
    steps = [r[binary] for r in runs.values() if binary in r]
    print(f"summary bin={binary} rounds={len(ratios)} step_ms_median={statistics.median(steps):.2f} "
          f"x_torch_median={statistics.median(ratios):.2f} "
          f"x_torch_range={min(ratios):.2f}-{max(ratios):.2f} "
          f"rounds_at_least_1={sum(x >= 1 for x in ratios)}")
torch = [r["torch"] for r in runs.values() if "torch" in r]
print(f"summary bin=torch step_ms_median={statistics.median(torch):.2f}")
PY
rm -f "$log"
