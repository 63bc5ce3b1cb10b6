#!/usr/bin/env bash
# On the 2-GPU machine: what registered memory and gradients first are
# worth, with the switches as built. Registered NCCL memory alone and beside
# a GEMM chain (nccl_register_bench), whether deregistering a window is a
# local call, then mlp-large's step at batch 512 on 2 GPUs by memory
# (TANDEM_NCCL_SYMMETRIC), by how many layers compute their gradients first
# (--gradients_first_layers) and by NCCL's fewest CTAs (NCCL_MIN_CTAS; 16 is
# the communicators' own setting).
# Binaries from .device (tools/device/bundle.sh).
#   bash .device/run_nccl_memory_experiments.sh
set -u
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/bin" ] || bash "$here/unpack.sh"
bin=$here/bin/bench__gpu_dp_bench
reg=$here/bin/bench__nccl_register_bench
echo "== registered memory, raw NCCL: mlp-large's buckets, then 16 MiB alone"
timeout 120 "$reg" --buckets_mb=80,64,64,16 --memory=plain,local,window
timeout 120 "$reg" --buckets_mb=80,64,64,16 --memory=plain,local,window --cta_policy=1
timeout 120 "$reg" --buckets_mb=16 --memory=plain,local,window
timeout 60 "$reg" --probe_deregister
echo "== large batch 512, 2 GPUs: memory x gradients first"
common="--model=large --batch=512 --steps=30 --repeats=5 --workers=2"
timeout 60 "$bin" --model=large --batch=512 --steps=30 --repeats=5 --workers=1 --grads=fused_sgd
for symmetric in 0 1; do
  for first in 0 2 3; do
    TANDEM_NCCL_SYMMETRIC=$symmetric timeout 60 "$bin" $common --gradients_first_layers=$first
  done
done
echo "== large batch 512, 2 GPUs: NCCL's fewest CTAs (max 32)"
for c in 8 12 16 24; do
  NCCL_MIN_CTAS=$c NCCL_MAX_CTAS=32 timeout 60 "$bin" $common | sed "s/^/min_ctas=$c /"
done
