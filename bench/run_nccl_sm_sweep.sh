#!/usr/bin/env bash
# On the 2-GPU machine: how the step of mlp-large on 2 GPUs (threads mode)
# depends on how many multiprocessors NCCL's kernels take (NCCL_MIN_CTAS =
# NCCL_MAX_CTAS = c) and how many backward's GEMMs leave to them
# (--gemm_reserve=r, ReducerOptions::gemm_reserve). 1-GPU rows first, as the
# reference. Binaries from .device (tools/device/bundle.sh).
#   bash .device/run_nccl_sm_sweep.sh [batch]
set -u
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/bin" ] || bash "$here/unpack.sh"
bin=$here/bin/bench__gpu_dp_bench
b=${1:-512}
steps=30; [ "$b" = 4096 ] && steps=8
common="--model=large --batch=$b --steps=$steps --repeats=5 --update=step"
timeout 60 "$bin" $common --workers=1 | sed 's/^/ctas=- lanes=- /'
timeout 60 "$bin" $common --workers=1 --grads=fused_sgd | sed 's/^/ctas=- lanes=- /'
run() {  # ctas lanes reserve
  local env=()
  [ "$1" != default ] && env=(NCCL_MIN_CTAS=$1 NCCL_MAX_CTAS=$1)
  env "${env[@]}" timeout 60 "$bin" $common --workers=2 --gradient_lanes=$2 \
    --gemm_reserve=$3 | sed "s/^/ctas=$1 lanes=$2 /"
}
for lanes in 2 1; do
  run default $lanes 0
  for c in 32 16 8 4 2; do
    run $c $lanes 0
    run $c $lanes $((c * lanes))
  done
done
run default 2 16
run default 2 32
