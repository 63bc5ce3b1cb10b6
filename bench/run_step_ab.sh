#!/usr/bin/env bash
# On the GPU machine: the single-GPU training step of two builds side by
# side, in one call. A is a gpu_step_bench built from another checkout and
# carried as .device/base/gpu_step_bench; B is the current one
# (bin/bench__gpu_step_bench). Runs alternate A B B A, so slow drift of the
# machine cancels, and the summary gives each configuration's median step
# time per build and B/A (below 1.00: B is faster).
#   bash .device/run_step_ab.sh [gpu_step_bench flags]   # default: --model=all --graph
set -u
cd "$(dirname "$0")"
bash ./unpack.sh
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
a=base/gpu_step_bench
b=bin/bench__gpu_step_bench
[ -x "$a" ] && [ -x "$b" ] || { echo "run_step_ab: needs $a and $b" >&2; exit 2; }
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--model=all --graph)
log=${OUT:-/tmp}/step_ab.log
: > "$log"
for build in A B B A; do
  bin=$a; [ $build = B ] && bin=$b
  echo "== build $build: $bin ${flags[*]}" | tee -a "$log"
  "$bin" "${flags[@]}" 2>&1 | sed "s/^/$build /" | tee -a "$log" | grep -E "^[AB] (result |check|graph)"
done
python3 - "$log" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    if " bench=gpu_step " not in line or " mode=" not in line or "step_ms=" not in line:
        continue
    build = line[0]
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    key = (kv["model"], int(kv["batch"]), kv["mode"], kv.get("grads", ""))
    runs.setdefault(key, {}).setdefault(build, []).append(float(kv["step_ms"]))
print("%-6s %6s %-6s %-10s %12s %12s %8s" % ("model", "batch", "mode", "grads", "A step_ms", "B step_ms", "B/A"))
for key in sorted(runs):
    a, b = runs[key].get("A", []), runs[key].get("B", [])
    if not a or not b:
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    print("%-6s %6d %-6s %-10s %12.4f %12.4f %8.3f" % (key + (ma, mb, mb / ma)))
PY
