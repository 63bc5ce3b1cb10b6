#!/usr/bin/env bash
# Tandem's CPU training step (dp_cpu_bench: MLP 784-1024-1024-10, batch 256,
# softmax cross-entropy, SGD) beside PyTorch's (bench/torch_cpu_reference.py,
# the same model), on the same cores: for each core count N, both pinned with
# taskset to cores 0..N-1. Tandem runs as 1 worker x 1 thread (on one core),
# 1 worker x N threads and N workers x 1 thread (threads mode); PyTorch with 1
# thread (on one core) and N threads; from 4 cores on, Tandem also as 2
# workers x N/2 threads. Prints dp_cpu_bench's and the script's
# `result` lines (step_ms: the median run; step_ms_min: the fastest).
#   bash bench/run_cpu_vs_torch.sh DP_CPU_BENCH_BINARY [CORES...]   # default: 2
set -u
bin=$1; shift
cores=("$@"); [ ${#cores[@]} -eq 0 ] && cores=(2)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/torch_python.sh"
flags=(--mode=threads --overlap=on --steps=20 --repeats=5 --warmup=5)
"$bin" --workers=1 --cpu_threads=1 --steps=1 --repeats=1 --warmup=1 2>&1 | grep '^machine' | head -1
for n in "${cores[@]}"; do
  pin=(taskset -c "0-$((n - 1))")
  echo "== $n core(s)"
  taskset -c 0 "$python" "$here/torch_cpu_reference.py" --threads=1 | grep '^result'
  "${pin[@]}" "$python" "$here/torch_cpu_reference.py" --threads="$n" | grep '^result'
  taskset -c 0 "$bin" "${flags[@]}" --workers=1 --cpu_threads=1 | grep '^result'
  "${pin[@]}" "$bin" "${flags[@]}" --workers=1 --cpu_threads="$n" | grep '^result'
  "${pin[@]}" "$bin" "${flags[@]}" --workers="$n" --cpu_threads=1 | grep '^result'
  if [ "$n" -ge 4 ]; then
    "${pin[@]}" "$bin" "${flags[@]}" --workers=2 --cpu_threads=$((n / 2)) | grep '^result'
  fi
done
