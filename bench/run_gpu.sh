#!/usr/bin/env bash
# The GPU benchmarks of docs/benchmarks.md, one command per table, on the GPU
# machine: tools/device/bundle.sh (--data for prefetch) puts the binaries,
# this script and bench/*.py in .device/; carry it there and run from the
# repository root. Logs go to $OUT (default /tmp).
#
#   bash .device/run_gpu.sh step               single-GPU step beside PyTorch
#   bash .device/run_gpu.sh precision          the step in fp32, TF32, bf16
#   bash .device/run_gpu.sh dp                 data parallelism, 2 GPUs, beside DDP
#   bash .device/run_gpu.sh dp-precision       the same in fp32, tf32 and bf16, beside (AMP) DDP
#   bash .device/run_gpu.sh pipeline           pipeline bubble, 2 GPUs
#   bash .device/run_gpu.sh prefetch [ROUNDS]  Fashion-MNIST with and without prefetch
#
set -u
here=$(cd "$(dirname "$0")" && pwd)
what=${1:-}
[ $# -ge 1 ] && shift

usage() {  # the commands of the header above
  { echo "usage:"; sed -n '/^#   bash/,/^#$/{/^#$/d;s/^# \{0,1\}//;p}' "$here/run_gpu.sh"; } >&2
  exit 2
}
case "$what" in step | precision | dp | dp-precision | pipeline | prefetch) ;; *) usage ;; esac

# The bundle: this script's own folder when it is .device/, else the
# repository's .device/ (bash bench/run_gpu.sh from the repository root).
dev=$here
[ -d "$dev/bin" ] || [ -f "$dev/bin.tar.xz" ] || dev=$here/../.device
[ -d "$dev/bin" ] || { [ -f "$dev/unpack.sh" ] && bash "$dev/unpack.sh"; }
export LD_LIBRARY_PATH=$dev/lib:$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp}

# The path of benchmark binary NAME: the bundle's, else a local build's.
binary() {
  local candidate
  for candidate in "$dev/bin/bench__$1" "$here/../bazel-bin/bench/$1"; do
    [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
  echo "run_gpu.sh $what: no binary $1 in $dev/bin; run tools/device/bundle.sh on the" \
    "development machine and carry .device" >&2
  exit 1
}

# Tandem's single-GPU step benchmark and the PyTorch reference side by side
# (Tandem, PyTorch, Tandem again: A/B/A, so drift in the card's state shows
# as spread), one configuration alone, the other ways of handling gradients,
# the step's GEMMs under other issue strategies, then the comparison table
# with the targets marked PASS/FAIL (compare_gpu_bench.py). Each run is cut
# off at 75 s: about a minute, at most about 5. SANITIZE=1 adds a
# compute-sanitizer memcheck of a short small-model run (with graph capture),
# up to 2 more minutes. Full logs go to $OUT/gpu_bench_logs.tgz, the table to
# $OUT/comparison.txt.
step() {
  local bin gemm rc=0
  bin=$(binary gpu_step_bench) || exit 1
  # Without it, its two runs fail and say so; the step's table still comes.
  gemm=$(binary gemm_strategy_bench 2>/dev/null) || gemm=$dev/bin/bench__gemm_strategy_bench
  # Logs collect in a temporary folder and travel back as one archive (few
  # files come back from $OUT). Global: the trap runs after this returns.
  logs=$(mktemp -d /tmp/gpu_bench.XXXXXX)
  trap 'tar czf "$out/gpu_bench_logs.tgz" -C "$logs" . && cp "$logs/comparison.txt" "$out/" 2>/dev/null' EXIT
  gpu_state() {
    nvidia-smi --query-gpu=index,name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,utilization.gpu,memory.used \
      --format=csv 2>&1
    nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv 2>/dev/null ||
      nvidia-smi --query-gpu=clocks_throttle_reasons.active --format=csv 2>/dev/null || true
  }
  echo "== GPU state before"
  gpu_state | tee "$logs/gpu_state_before.csv"
  nvidia-smi > "$logs/nvidia-smi.txt" 2>&1
  echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  run() {  # name, timeout, command...
    local name=$1 limit=$2; shift 2
    echo "== $name: $*"
    local start=$SECONDS
    timeout "$limit" "$@" > "$logs/$name.log" 2>&1
    local status=$?
    echo "   rc=$status in $((SECONDS - start)) s (log: $name.log)"
    grep -E '^error|FAIL' "$logs/$name.log" | head -5
    if [ $status -ne 0 ]; then rc=1; tail -5 "$logs/$name.log"; fi
    return 0
  }
  run tandem_1 75 "$bin" --model=all --graph
  run torch    75 python3 "$here/torch_reference.py" --model=all
  run tandem_2 75 "$bin" --model=all --graph
  # One configuration alone (a few seconds).
  run tandem_large_4096 75 "$bin" --model=large --batch=4096 --steps=20
  # The other ways of handling gradients (gpu_step_bench --grads), at the
  # batch where they matter: what fusing SGD into Backward is worth.
  run tandem_accumulate 75 "$bin" --model=large --batch=512 --grads=accumulate --no_gemm
  run tandem_overwrite 75 "$bin" --model=large --batch=512 --grads=overwrite --no_gemm
  # Where GEMM time could still come from: the step's GEMMs under other
  # issue strategies (gemm_strategy_bench); about 10 s each.
  run gemm_large_512 75 "$gemm" --model=large --batch=512 --candidates=16
  run gemm_small_256 75 "$gemm" --model=small --batch=256 --candidates=16 --reps=100
  if [ "${SANITIZE:-0}" = 1 ]; then
    local cs
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    run memcheck 120 "$cs" --tool memcheck --error-exitcode 3 "$bin" --model=small \
        --steps=10 --repeats=1 --warmup=3 --no_gemm --graph
    grep -E 'ERROR SUMMARY' "$logs/memcheck.log"
  fi
  echo "== GPU state after"
  gpu_state | tee "$logs/gpu_state_after.csv"
  echo "== Tandem run 1 (full table)"
  sed -n '/^ *model  *batch/,$p' "$logs/tandem_1.log"
  echo "== PyTorch"
  sed -n '/^ *model  *batch/,$p' "$logs/torch.log"
  echo "== large/512 by --grads (fused_sgd is tandem_1's)"
  grep -h '^result' "$logs/tandem_accumulate.log" "$logs/tandem_overwrite.log"
  echo "== GEMM strategies"
  grep -h '^result' "$logs/gemm_large_512.log" "$logs/gemm_small_256.log"
  echo "== Comparison (slowest of the Tandem runs, against the targets)"
  python3 "$here/compare_gpu_bench.py" --tandem "$logs/tandem_1.log" "$logs/tandem_2.log" \
      --torch "$logs/torch.log" | tee "$logs/comparison.txt"
  exit $rc
}

# The single-GPU training step in every precision, side by side with
# PyTorch: gpu_step_bench --precision=fp32, tf32 and bf16 (each also measures
# the 8192^3 GEMM rate of every precision in its process), with the weight
# updates beside the input-gradient GEMMs (--param_lane=side) and on one
# lane (--param_lane=main); mlp-large/4096 in tf32 and bf16 again, timed in
# bursts after idling (--cool_ms); then torch_reference.py likewise
# (autocast bf16 for bf16); then precision_summary.py's table of ratios and
# goals, once per lane choice.
precision() {
  local bin lane p p_steps steps
  bin=$(binary gpu_step_bench) || exit 1
  for lane in side main; do
    for p in fp32 tf32 bf16; do
      # SGD inside backward (the default, --grads=fused_sgd), in every precision.
      "$bin" --model=all --precision=$p --param_lane=$lane > "$out/tandem_${lane}_$p.log" 2>&1
      echo "tandem $lane $p rc=$?"
    done
  done
  # mlp-large/4096 in tf32 and bf16 timed as the burst GEMM rates are: runs
  # of about 20 ms (5 steps of TF32, 10 of bf16), each rate and the steps
  # after a second of idling.
  for p_steps in tf32:5 bf16:10; do
    p=${p_steps%:*}; steps=${p_steps#*:}
    "$bin" --model=large --batch=4096 --precision=$p --steps=$steps --cool_ms=1000 \
      --gemm_sustain_ms=0 > "$out/tandem_burst_$p.log" 2>&1
    echo "tandem burst $p rc=$?"
  done
  for p in fp32 tf32 bf16; do
    python3 "$here/torch_reference.py" --model=all --precision=$p > "$out/torch_$p.log" 2>&1
    echo "torch $p rc=$?"
  done
  for lane in side main; do
    echo "--param_lane=$lane"
    python3 "$here/precision_summary.py" "$out"/tandem_${lane}_*.log "$out"/tandem_burst_*.log \
      "$out"/torch_*.log |
      tee "$out/precision_summary_$lane.txt"
  done
}

# Tandem's data-parallel step (threads and MPI modes, overlap on and off)
# next to PyTorch DDP, 1 and 2 GPUs; then bucketed vs raw all-reduce, over
# one and two NCCL comms. The rows go to $OUT/dp_bench.log too, and
# dp_summary.py's table (scaling, the DDP ratio) and the targets' verdicts
# follow. DP_BENCH_QUICK=1: the step rows only.
dp_rows() {
  local bin py mpi torchrun cfg m b steps common mb lanes sizes
  bin=$(binary gpu_dp_bench) || exit 1
  py=$here/torch_ddp.py
  mpi="mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
  torchrun="python3 -m torch.distributed.run --nproc_per_node=2"
  for cfg in "large 512" "large 4096" "small 256"; do
    set -- $cfg
    m=$1 b=$2
    # About 100 ms of work per timed run.
    steps=30; [ "$b" = 4096 ] && steps=8; [ "$m" = small ] && steps=300
    common="--model=$m --batch=$b --steps=$steps --repeats=5"
    echo "== $m batch $b per GPU"
    timeout 60 "$bin" $common --workers=1 | sed 's/^/tandem threads /'
    timeout 60 "$bin" $common --workers=1 --grads=fused_sgd | sed 's/^/tandem threads /'
    timeout 60 "$bin" $common --workers=2 | sed 's/^/tandem threads /'
    timeout 60 "$bin" $common --workers=2 --no_overlap | sed 's/^/tandem threads /'
    timeout 60 "$bin" $common --workers=2 --gradient_comms=2 | sed 's/^/tandem threads /'
    timeout 60 "$bin" $common --workers=2 --update=step | sed 's/^/tandem threads /'
    timeout 60 "$bin" $common --workers=2 --gemm_reserve=0 | sed 's/^/tandem threads /'
    # What gradients first and symmetric memory are each worth, in the same
    # call: gradients beside the input gradient (--gradients_first_layers=0);
    # buckets in ordinary memory (TANDEM_NCCL_SYMMETRIC=0).
    timeout 60 "$bin" $common --workers=2 --gradients_first_layers=0 | sed 's/^/tandem threads /'
    TANDEM_NCCL_SYMMETRIC=0 timeout 60 "$bin" $common --workers=2 | sed 's/^/tandem threads plain_memory /'
    timeout 60 $mpi "$bin" $common --mode=mpi | sed 's/^/tandem mpi /'
    timeout 90 python3 "$py" $common
    timeout 90 $torchrun "$py" $common 2>&1 | grep dp_step
  done
  [ "${DP_BENCH_QUICK:-0}" = 1 ] && return 0
  echo "== all-reduce of the whole gradient: bucketed vs one raw call"
  for mb in 4 25 50 100; do
    for lanes in 1 2; do
      timeout 60 "$bin" --model=large --workers=2 --allreduce_only --steps=10 --bucket_mb=$mb --gradient_comms=$lanes
    done
    TANDEM_NCCL_SYMMETRIC=0 timeout 60 "$bin" --model=large --workers=2 --allreduce_only --steps=10 --bucket_mb=$mb | sed 's/^/plain_memory /'
  done
  echo "== raw NCCL: mlp-large's buckets (closed before the crossing parameter, DDP's rule, 100 MiB) over 1-3 communicators"
  for sizes in 16.02,64,0.016,64,0.016,64,16.02 80.02,64.02,64.02,16.02 80.04,64.02,80.02; do
    timeout 60 "$dev/bin/bench__nccl_comms_bench" --buckets_mb=$sizes --lanes=1,2,3
  done
  echo "== large batch 512, bucket sweep"
  for mb in 4 50 100; do
    timeout 60 "$bin" --model=large --batch=512 --steps=30 --workers=2 --bucket_mb=$mb | sed 's/^/tandem threads /'
  done
}
dp() {
  dp_rows 2>&1 | tee "$out/dp_bench.log"
  echo "== summary (bench/dp_summary.py)"
  python3 "$here/dp_summary.py" "$out/dp_bench.log"
}

# Data parallelism in each precision: per precision and model, Tandem on 1
# and 2 GPUs (threads; bf16 also with its gradients all-reduced in bf16)
# and PyTorch alone and under DDP (bf16: autocast, also with DDP's
# bf16_compress_hook), one line each; then each configuration's 2-GPU
# scaling (samples/s on 2 over twice those on 1).
dp-precision() {
  local bin py torchrun cfg m b steps common p
  bin=$(binary gpu_dp_bench) || exit 1
  py=$here/torch_ddp.py
  torchrun="python3 -m torch.distributed.run --nproc_per_node=2"
  for p in fp32 tf32 bf16; do
    for cfg in "large 512" "large 4096" "small 256"; do
      set -- $cfg
      m=$1 b=$2
      steps=30; [ "$b" = 4096 ] && steps=8; [ "$m" = small ] && steps=300
      common="--model=$m --batch=$b --steps=$steps --repeats=5 --precision=$p"
      timeout 60 "$bin" $common --workers=1 | grep '^dp_step' | sed 's/^/tandem /'
      timeout 60 "$bin" $common --workers=2 | grep '^dp_step' | sed 's/^/tandem /'
      [ $p = bf16 ] && timeout 60 "$bin" $common --workers=2 --bf16_allreduce | grep '^dp_step' | sed 's/^/tandem /'
      timeout 90 python3 "$py" $common | sed 's/^/torch /'
      timeout 90 $torchrun "$py" $common 2>&1 | grep '^dp_step' | sed 's/^/torch /'
      [ $p = bf16 ] && timeout 90 $torchrun "$py" $common --bf16_compress 2>&1 | grep '^dp_step' | sed 's/^/torch /'
    done
  done | tee "$out/dp_precision.log"
  echo "== scaling (2-GPU samples/s over twice the 1-GPU figure)"
  python3 - "$out/dp_precision.log" <<'PY'
import re, sys
rows = [dict(re.findall(r"(\w+)=(\S+)", line)) | {"impl": line.split()[0]}
        for line in open(sys.argv[1]) if "dp_step" in line]
one = {(r["impl"], r["model"], r["batch_per_gpu"], r["precision"]): float(r["samples_per_s"])
       for r in rows if r["gpus"] == "1"}
for r in rows:
    if r["gpus"] != "2":
        continue
    base = one.get((r["impl"], r["model"], r["batch_per_gpu"], r["precision"]))
    if base:
        print(f"scaling impl={r['impl']} model={r['model']} batch={r['batch_per_gpu']} "
              f"precision={r['precision']} bf16_allreduce={r.get('bf16_allreduce', 'off')} "
              f"step_ms={r['step_ms']} efficiency={float(r['samples_per_s']) / (2 * base):.3f}")
PY
}

# The Fashion-MNIST example on one GPU with the next batch prepared on a
# background thread (the default) and on the training thread (--no_prefetch):
# each configuration's epoch time and samples/s, median of the epochs of
# ROUNDS (default 3) runs in turn (the first epoch of each run left out: it holds the
# start-up), then a --trace of prefetching for trace_overlap.py. Needs the
# dataset in .device/data (bundle.sh --data).
prefetch() {
  local rounds=${1:-3} round mode extra
  local bin=$dev/bin/examples__fashion_mnist
  local flags=(--data_dir="$dev/data" --device=cuda --epochs=4 --quiet)
  for round in $(seq "$rounds"); do
    for mode in prefetch no_prefetch; do
      extra=(); [ $mode = no_prefetch ] && extra=(--no_prefetch)
      "$bin" "${flags[@]}" "${extra[@]}" --metrics="$out/prefetch_${mode}_$round.jsonl" \
        > "$out/prefetch_${mode}_$round.log" 2>&1 || echo "$mode round $round failed"
    done
  done
  python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for mode in ("prefetch", "no_prefetch"):
    rates, accuracy = [], []
    for r in range(1, rounds + 1):
        rows = [json.loads(l) for l in open(f"{out}/prefetch_{mode}_{r}.jsonl")]
        train = [row for row in rows if row.get("split") == "train"]
        rates += [row["samples_per_second"] for row in train[1:]]
        accuracy.append([row for row in rows if row.get("split") == "test"][-1]["accuracy"])
    rate = statistics.median(rates)
    print(f"result mode={mode} samples_per_second={rate:.0f} epoch_seconds={60000 / rate:.3f}"
          f" epochs={len(rates)} test_accuracy={min(accuracy):.4f}..{max(accuracy):.4f}")
PY
  "$bin" "${flags[@]}" --epochs=1 --trace="$out/trace_prefetch.json" --trace_steps=8 \
    > "$out/prefetch_trace.log" 2>&1 || echo "traced run failed"
  python3 "$here/trace_overlap.py" "$out/trace_prefetch.json"
}

# Pipeline-parallel step time and bubble against the number of micro-batches,
# on the balanced model (the table's) and on the default, unbalanced one;
# seconds each.
pipeline() {
  local rc=0
  echo "== balanced: 1024 -> 3 x 4096 -> 1024"
  timeout 120 "$dev/bin/bench__pipeline_bench" --device=cuda --sizes=1024,4096,4096,4096,1024 || rc=1
  echo "== default, unbalanced: 1024 -> 4 x 4096 -> 1024"
  timeout 120 "$dev/bin/bench__pipeline_bench" --device=cuda || rc=1
  exit $rc
}

"$what" "$@"
