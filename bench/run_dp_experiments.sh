#!/usr/bin/env bash
# On the 2-GPU machine: where the 2-GPU step of mlp-large loses time against
# 1 GPU. Device timelines of one step (--trace: backward's end, the join of
# the all-reduces, each bucket's all-reduce) on 1 and 2 GPUs, then NCCL
# settings that change how its kernels share the GPU with backward's GEMMs;
# threads against MPI on the small model, in alternating runs; and a sweep of
# the GEMM reserve.
# Binaries from .device (tools/device/bundle.sh).
#   bash .device/run_dp_experiments.sh
set -u
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/bin" ] || bash "$here/unpack.sh"
bin=$here/bin/bench__gpu_dp_bench
for b in 512 4096; do
  steps=30; [ "$b" = 4096 ] && steps=8
  common="--model=large --batch=$b --steps=$steps --repeats=5 --trace"
  echo "== large batch $b per GPU"
  timeout 60 "$bin" $common --workers=1
  timeout 60 "$bin" $common --workers=1 --grads=fused_sgd
  timeout 60 "$bin" $common --workers=2
  timeout 60 "$bin" $common --workers=2 --gradient_lanes=1
  timeout 60 "$bin" $common --workers=2 --gemm_reserve=16
  timeout 60 "$bin" $common --workers=2 --gradient_lanes=1 --gemm_reserve=16
  timeout 60 "$bin" $common --workers=2 --no_overlap
done
echo "== NCCL settings, large batch 512, 2 GPUs"
common="--model=large --batch=512 --steps=30 --repeats=5 --workers=2"
for setting in NCCL_P2P_USE_CUDA_MEMCPY=1 NCCL_PROTO=Simple NCCL_PROTO=LL128 NCCL_ALGO=Tree \
               NCCL_ALGO=Ring NCCL_NTHREADS=256 NCCL_BUFFSIZE=16777216; do
  env $setting timeout 60 "$bin" $common | sed "s/^/$setting /"
done
echo "== small batch 256, threads vs MPI, five alternating runs"
mpi="mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
for i in 1 2 3 4 5; do
  timeout 40 "$bin" --model=small --batch=256 --steps=300 --repeats=5 --workers=2 | sed 's/^/threads /'
  timeout 40 $mpi "$bin" --model=small --batch=256 --steps=300 --repeats=5 --mode=mpi | sed 's/^/mpi /'
done
echo "== GEMM reserve sweep, 2 GPUs"
for r in 8 16 24 32 40; do
  for l in 1 2; do
    timeout 40 "$bin" --model=large --batch=512 --steps=30 --repeats=5 --workers=2 \
      --gemm_reserve=$r --gradient_lanes=$l
  done
done
for r in 16 24 32; do
  timeout 60 "$bin" --model=large --batch=4096 --steps=8 --repeats=5 --workers=2 --gemm_reserve=$r
done
