#!/usr/bin/env bash
# On the GPU machine: the single-GPU training step in every precision, side
# by side with PyTorch, in one call: gpu_step_bench --precision=fp32, tf32
# and bf16 (each also measures the 8192^3 GEMM rate of every precision in its
# process), with the weight updates beside the input-gradient GEMMs
# (--param_lane=side) and on one lane (--param_lane=main); mlp-large/4096 in
# tf32 and bf16 again, timed in bursts after idling (--cool_ms); then
# bench/torch_reference.py likewise (autocast bf16 for bf16); then
# bench/precision_summary.py's table of ratios and goals, once per lane
# choice. Logs go to $OUT.
#   bash .device/run_precision_bench.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
[ -d bin ] || bash ./unpack.sh
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp}
bin=bin/bench__gpu_step_bench
for lane in side main; do
  for p in fp32 tf32 bf16; do
    # SGD inside backward (the default, --grads=fused_sgd), in every precision.
    "$bin" --model=all --precision=$p --param_lane=$lane > "$out/tandem_${lane}_$p.log" 2>&1
    echo "tandem $lane $p rc=$?"
  done
done
# mlp-large/4096 in tf32 and bf16 timed as the burst GEMM rates are: runs of
# about 20 ms (5 steps of TF32, 10 of bf16), each rate and the steps after a
# second of idling.
for p_steps in tf32:5 bf16:10; do
  p=${p_steps%:*}; steps=${p_steps#*:}
  "$bin" --model=large --batch=4096 --precision=$p --steps=$steps --cool_ms=1000 \
    --gemm_sustain_ms=0 > "$out/tandem_burst_$p.log" 2>&1
  echo "tandem burst $p rc=$?"
done
for p in fp32 tf32 bf16; do
  python3 torch_reference.py --model=all --precision=$p > "$out/torch_$p.log" 2>&1
  echo "torch $p rc=$?"
done
for lane in side main; do
  echo "--param_lane=$lane"
  python3 precision_summary.py "$out"/tandem_${lane}_*.log "$out"/tandem_burst_*.log \
    "$out"/torch_*.log |
    tee "$out/precision_summary_$lane.txt"
done
