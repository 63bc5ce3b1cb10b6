#!/usr/bin/env bash
# On the GPU machine: where the single-GPU step's time goes, for mlp-large
# at batch 4096 in tf32 and bf16 (or the precisions given):
#   - gemm_strategy_bench: the step's GEMMs alone, per shape (cuBLAS, the
#     cuBLASLt heuristic's choice, the fastest of 16 of its candidates) and
#     back to back, beside the square GEMM rate of the same precision; in
#     tf32 also with the weight gradients from dz as it is (not transposed);
#   - ncu (times only, clocks left alone): every kernel of a few steps of
#     gpu_step_bench, summed by kernel name for the last step
#     (bench/kernel_breakdown.py).
# Logs and tables go to $OUT.
#   bash .device/run_precision_breakdown.sh [tf32 bf16]
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
[ -d bin ] || bash ./unpack.sh
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp}
precisions=${*:-tf32 bf16}
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo "")
for p in $precisions; do
  bin/bench__gemm_strategy_bench --model=large --batch=4096 --precision="$p" \
    --candidates=16 --reps=5 > "$out/gemm_strategy_$p.log" 2>&1
  echo "gemm_strategy $p rc=$?"
  grep -E '^(square|gemm|result)' "$out/gemm_strategy_$p.log"
  if [ "$p" = tf32 ]; then
    # The weight gradients from dz as it is, the layout the step avoids in TF32.
    bin/bench__gemm_strategy_bench --model=large --batch=4096 --precision=tf32 \
      --dz_transposed=off --candidates=16 --reps=5 > "$out/gemm_strategy_tf32_dz.log" 2>&1
    echo "gemm_strategy tf32 dz_transposed=off rc=$?"
    grep -E '^(square|gemm)' "$out/gemm_strategy_tf32_dz.log"
  fi
  if [ -n "$ncu" ]; then
    # 3 warm-up steps and 2 timed ones: the last step's kernels are summed.
    "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
      --log-file "$out/ncu_$p.csv" bin/bench__gpu_step_bench --model=large --batch=4096 \
      --precision="$p" --no_gemm --steps=2 --warmup=3 --repeats=1 --sets=1 \
      > "$out/ncu_step_$p.log" 2>&1
    echo "ncu $p rc=$?"
    python3 kernel_breakdown.py "$out/ncu_$p.csv" | tee "$out/breakdown_$p.txt"
  fi
done
