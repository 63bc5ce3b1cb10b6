#!/usr/bin/env bash
# On the GPU machine: compute-sanitizer memcheck and racecheck over the
# carried CUDA test binaries, all at once (the tools are slow; the machine has
# cores to spare, and the tool serialises kernels per process only), each cut
# off at SANITIZE_TIMEOUT seconds (default 400).
# Prints one line per binary and tool: rc (0 passed, 3 the tool found errors,
# 124 cut off, 255 with a note: the binary made no CUDA call) and the tool's
# summary line. Logs go to $logs (default
# /tmp/tandem_logs). Called by run_tests.sh sanitize; runs alone too:
#   bash .device/run_sanitizers.sh
#   SANITIZE_ONLY='mpi|nccl' SANITIZE_TIMEOUT=500 bash .device/run_sanitizers.sh
set -u
cd "$(dirname "$0")"
bash ./unpack.sh
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
# Tests that size work by wall time shrink it under the tool (pipeline_gpu_test).
export TANDEM_UNDER_SANITIZER=1
# The stand-in profiler that profile_range_nvtx_test loads.
export FAKE_NVTX_TOOL=$PWD/bin/tests_core__libfake_nvtx_tool.so
logs=${logs:-/tmp/tandem_logs}; mkdir -p "$logs"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
limit=${SANITIZE_TIMEOUT:-400}
# Cases that provoke CUDA errors on purpose are left out, since the tool
# reports those API errors too: out of memory, a missing device, and
# StreamEventTest's TimingEvents (times non-timing events).
filter='-*OutOfMemory*:*MissingDevice*:*ThrowsForMissingDevice*:*TimingEvents*:*DeviceGuardRestoresPreviousDevice*'
# NCCL itself makes CUDA calls that fail and that it expects to fail
# (cudaFuncGetAttributes on kernels not built for this GPU:
# cudaErrorNoKernelImageForDevice; enabling peer access twice:
# cudaErrorPeerAccessAlreadyEnabled), so binaries that use NCCL run with API
# errors unreported; memory and race checks are unchanged.
nccl_flags="--report-api-errors no"
# The tool runs one kernel at a time per process. One process driving two
# GPUs whose NCCL kernels wait for each other deadlocks under it (inside
# cuLaunchKernel), so threads-mode NCCL cases that keep several steps in
# flight are left out here; their MPI-mode copies, one process per GPU, run.
threads_nccl_filter="$filter:*StepNeverWaitsOnTheHost*"
# SANITIZE_ONLY=ERE: only the binaries whose names match (e.g. 'mpi|nccl').
only=${SANITIZE_ONLY:-.}
jobs=()
run() {  # tool name command...
  local tool=$1 name=$2; shift 2
  echo "$name" | grep -Eq "$only" || return 0
  local log="$logs/$name.$tool.log"
  # Its own scratch folder: both tools run a binary at once, and tests that
  # write files (checkpoint_test) would otherwise share them.
  ( export TEST_TMPDIR=$(mktemp -d /tmp/tandem_san_tmp.XXXXXX)
    timeout "$limit" "$@" > "$log" 2>&1; echo "rc=$?" >> "$log" ) &
  jobs+=("$name $tool")
}
for tool in memcheck racecheck; do
  # Every binary whose tests run on a GPU: the op and layer tests run one
  # body on the CPU and on CUDA (tests/support/device_test.h).
  for b in bin/tests_core__* bin/tests_data__* bin/tests_io__* bin/tests_core_cuda__* bin/tests_layers__* \
           bin/tests_examples__custom_layer_test bin/tests_examples__row_norm_test; do
    [ -x "$b" ] || continue
    case "$b" in *.so) continue;; esac  # a test's data, not a test
    run $tool "$(basename $b)" "$cs" --tool $tool --error-exitcode 3 "$b" --gtest_filter="$filter"
  done
  for b in bin/tests_parallel__gpu_reducer_test bin/tests_parallel__nccl_communicator_test \
           bin/tests_parallel__nccl_work_test bin/tests_parallel__nccl_watchdog_test \
           bin/tests_parallel__pipeline_gpu_test bin/tests_parallel__launcher_test \
           bin/tests_trainer__trainer_test; do
    [ -x "$b" ] || continue
    run $tool "$(basename $b)" "$cs" --tool $tool $nccl_flags --error-exitcode 3 "$b" \
      --gtest_filter="$threads_nccl_filter"
  done
done
# MPI mode: each rank under its own tool (one process per GPU).
for b in bin/tests_parallel__gpu_mpi_reducer_test_bin bin/tests_parallel__nccl_mpi_test_bin; do
  [ -x "$b" ] || continue
  for tool in memcheck racecheck; do
    run $tool "$(basename $b)" mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH \
      -x NCCL_NVLS_ENABLE -x GTEST_COLOR -x TANDEM_UNDER_SANITIZER "$cs" --tool $tool $nccl_flags --error-exitcode 3 "$b"
  done
done
wait
for j in "${jobs[@]}"; do
  set -- $j
  log="$logs/$1.$2.log"
  note=""
  # The tool exits 255 with this for a binary that never calls CUDA.
  grep -q "terminated before first instrumented API call" "$log" &&
    note="(no CUDA call: not a CUDA test binary)"
  echo "$1 $2 $(tail -1 "$log") $note$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -2 | tr '\n' ' ')"
done
