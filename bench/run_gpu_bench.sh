#!/usr/bin/env bash
# Runs on the GPU machine: Tandem's single-GPU step benchmark and the PyTorch
# reference side by side (Tandem, PyTorch, Tandem again: A/B/A, so drift in
# the card's state shows as spread), one configuration alone (the command
# docs/benchmarks.md shows), then the comparison table with the targets
# marked PASS/FAIL (bench/compare_gpu_bench.py). Expected to take about a minute; each run
# is cut off at 75 s, so at most about 5 minutes. Full logs go to
# $OUT/gpu_bench_logs.tgz.
#
# Build and bundle on the development machine first (tools/device/bundle.sh
# puts the stripped binary in .device/bin/bench__gpu_step_bench, possibly
# packed in .device/bin.tar.xz, which this script unpacks, and the bench/*.py
# files in .device/), then, on the GPU machine, from the repository root with
# .device carried:
#   bash bench/run_gpu_bench.sh
# SANITIZE=1 adds a compute-sanitizer memcheck of a short small-model run
# (with graph capture), up to 2 more minutes.
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
set -u
here=$(cd "$(dirname "$0")" && pwd)
# Logs collect in a temporary folder and travel back as one archive (few
# files come back from $OUT), plus the comparison table.
out=$(mktemp -d /tmp/gpu_bench.XXXXXX)
trap 'tar czf "${OUT:-/tmp}/gpu_bench_logs.tgz" -C "$out" . && cp "$out/comparison.txt" "${OUT:-/tmp}/" 2>/dev/null' EXIT

# tools/device/bundle.sh may carry the binaries packed (bin.tar.xz + unpack.sh).
for dir in "$here" "$here/../.device"; do
  if [ -f "$dir/unpack.sh" ] && [ ! -d "$dir/bin" ]; then bash "$dir/unpack.sh"; fi
done
bin=""
for candidate in "$here/bin/bench__gpu_step_bench" \
                 "$here/../.device/bin/bench__gpu_step_bench" \
                 "$here/../bazel-bin/bench/gpu_step_bench"; do
  if [ -x "$candidate" ]; then bin=$candidate; break; fi
done
py=""
for candidate in "$here" "$here/../.device" "$here/../bench"; do
  if [ -f "$candidate/torch_reference.py" ] && [ -f "$candidate/compare_gpu_bench.py" ]; then
    py=$candidate; break
  fi
done
if [ -z "$bin" ] || [ -z "$py" ]; then
  echo "error: need .device/bin/bench__gpu_step_bench and bench/{torch_reference,compare_gpu_bench}.py;" \
       "run tools/device/bundle.sh on the development machine and carry .device" >&2
  exit 1
fi

gpu_state() {
  nvidia-smi --query-gpu=index,name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,utilization.gpu,memory.used \
    --format=csv 2>&1
  nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv 2>/dev/null ||
    nvidia-smi --query-gpu=clocks_throttle_reasons.active --format=csv 2>/dev/null || true
}

echo "== GPU state before"
gpu_state | tee "$out/gpu_state_before.csv"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1

rc=0
run() {  # name, timeout, command...
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local status=$?
  echo "   rc=$status in $((SECONDS - start)) s (log: $name.log)"
  grep -E '^error|FAIL' "$out/$name.log" | head -5
  if [ $status -ne 0 ]; then rc=1; tail -5 "$out/$name.log"; fi
  return 0
}

run tandem_1 75 "$bin" --model=all --graph
run torch    75 python3 "$py/torch_reference.py" --model=all
run tandem_2 75 "$bin" --model=all --graph
# One configuration alone (a few seconds).
run tandem_large_4096 75 "$bin" --model=large --batch=4096 --steps=20
# The other ways of handling gradients (gpu_step_bench --grads), at the
# batch where they matter: what fusing SGD into Backward is worth.
run tandem_accumulate 75 "$bin" --model=large --batch=512 --grads=accumulate --no_gemm
run tandem_overwrite 75 "$bin" --model=large --batch=512 --grads=overwrite --no_gemm
# Where GEMM time could still come from: the step's GEMMs under other issue
# strategies (gemm_strategy_bench); about 10 s each.
gemm=$(dirname "$bin")/bench__gemm_strategy_bench
[ -x "$gemm" ] || gemm=$(dirname "$bin")/gemm_strategy_bench
run gemm_large_512 75 "$gemm" --model=large --batch=512 --candidates=16
run gemm_small_256 75 "$gemm" --model=small --batch=256 --candidates=16 --reps=100

if [ "${SANITIZE:-0}" = 1 ]; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  run memcheck 120 "$cs" --tool memcheck --error-exitcode 3 "$bin" --model=small \
      --steps=10 --repeats=1 --warmup=3 --no_gemm --graph
  grep -E 'ERROR SUMMARY' "$out/memcheck.log"
fi

echo "== GPU state after"
gpu_state | tee "$out/gpu_state_after.csv"

echo "== Tandem run 1 (full table)"
sed -n '/^ *model  *batch/,$p' "$out/tandem_1.log"
echo "== PyTorch"
sed -n '/^ *model  *batch/,$p' "$out/torch.log"
echo "== large/512 by --grads (fused_sgd is tandem_1's)"
grep -h '^result' "$out/tandem_accumulate.log" "$out/tandem_overwrite.log"
echo "== GEMM strategies"
grep -h '^result' "$out/gemm_large_512.log" "$out/gemm_small_256.log"
echo "== Comparison (slowest of the Tandem runs, against the targets)"
python3 "$py/compare_gpu_bench.py" --tandem "$out/tandem_1.log" "$out/tandem_2.log" \
    --torch "$out/torch.log" | tee "$out/comparison.txt"
exit $rc
