#!/usr/bin/env bash
# On the 2-GPU machine: pipeline-parallel step time and bubble against the
# number of micro-batches (docs/benchmarks.md, "Pipeline parallelism"), on
# the balanced model and on the default, unbalanced one; seconds each.
# Binaries from .device (tools/device/bundle.sh).
#   bash .device/run_pipeline_bench.sh
set -u
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/bin" ] || bash "$here/unpack.sh"
rc=0
echo "== balanced: 1024 -> 3 x 4096 -> 1024"
timeout 120 "$here/bin/bench__pipeline_bench" --device=cuda --sizes=1024,4096,4096,4096,1024 || rc=1
echo "== default, unbalanced: 1024 -> 4 x 4096 -> 1024"
timeout 120 "$here/bin/bench__pipeline_bench" --device=cuda || rc=1
exit $rc
