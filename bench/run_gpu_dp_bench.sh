#!/usr/bin/env bash
# On the 2-GPU machine: Tandem's data-parallel step (threads and MPI modes,
# overlap on and off) next to PyTorch DDP, 1 and 2 GPUs, in one run; then
# bucketed vs raw all-reduce, over one and two NCCL lanes; last, a summary
# with scaling efficiency, the ratio to DDP and the targets' verdicts
# (bench/dp_summary.py). Binaries from .device (tools/device/bundle.sh).
#   bash .device/run_gpu_dp_bench.sh
set -u
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
here=$(cd "$(dirname "$0")" && pwd)
# Everything below runs once more inside this: its output, then dp_summary.py's
# table (scaling, the DDP ratio) and the targets' verdicts over it.
if [ -z "${DP_BENCH_INNER:-}" ]; then
  log=${OUT:-/tmp}/dp_bench.log
  DP_BENCH_INNER=1 bash "$0" "$@" 2>&1 | tee "$log"
  echo "== summary (bench/dp_summary.py)"
  python3 "$here/dp_summary.py" "$log"
  exit
fi
[ -d "$here/bin" ] || bash "$here/unpack.sh"
bin=$here/bin/bench__gpu_dp_bench
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
# DP_BENCH_QUICK=1: the step rows only.
[ "${DP_BENCH_QUICK:-0}" = 1 ] && exit 0
echo "== all-reduce of the whole gradient: bucketed vs one raw call"
for mb in 4 25 50 100; do
  for lanes in 1 2; do
    timeout 60 "$bin" --model=large --workers=2 --allreduce_only --steps=10 --bucket_mb=$mb --gradient_comms=$lanes
  done
  TANDEM_NCCL_SYMMETRIC=0 timeout 60 "$bin" --model=large --workers=2 --allreduce_only --steps=10 --bucket_mb=$mb | sed 's/^/plain_memory /'
done
echo "== raw NCCL: mlp-large's buckets (closed before the crossing parameter, DDP's rule, 100 MiB) over 1-3 communicators"
for sizes in 16.02,64,0.016,64,0.016,64,16.02 80.02,64.02,64.02,16.02 80.04,64.02,80.02; do
  timeout 60 "$here/bin/bench__nccl_comms_bench" --buckets_mb=$sizes --lanes=1,2,3
done
echo "== large batch 512, bucket sweep"
for mb in 4 50 100; do
  timeout 60 "$bin" --model=large --batch=512 --steps=30 --workers=2 --bucket_mb=$mb | sed 's/^/tandem threads /'
done
