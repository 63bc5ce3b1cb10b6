#!/usr/bin/env bash
# Runs on the GPU machine: every carried test binary, then the tests that
# are only meaningful without a GPU again with the GPUs hidden, then
# compute-sanitizer (memcheck, racecheck) over the CUDA-using ones. Prints
# one line per binary and a closing summary; full logs go to $OUT. With the
# data carried (bundle.sh --data) it installs Fashion-MNIST where Debian's
# dataset-fashion-mnist package puts it, so the data tests run too.
#   bash .device/run_tests.sh [sanitize]
set -u
cd "$(dirname "$0")"
bash ./unpack.sh
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
export GTEST_COLOR=no
# Bazel gives every test a private scratch folder; some tests write there.
export TEST_TMPDIR=$(mktemp -d /tmp/tandem_test_tmp.XXXXXX)
logs=/tmp/tandem_logs; rm -rf "$logs"; mkdir -p "$logs"
if [ -d data ] && [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  mkdir -p /usr/share/datasets/fashion-mnist && cp data/*.gz /usr/share/datasets/fashion-mnist/
fi
# Only 8 files come back from $OUT: pack the logs into one.
trap 'tar czf "${OUT:-/tmp}/test_logs.tgz" -C /tmp tandem_logs' EXIT
passed=0; failed=0; skipped=0; bad=()
# The stand-in profiler that profile_range_nvtx_test loads.
export FAKE_NVTX_TOOL=$PWD/bin/tests_core__libfake_nvtx_tool.so
for b in bin/tests_*; do
  # Fuzz targets replay a corpus on any machine; CI runs them. Shared
  # libraries are a test's data, not tests.
  case "$b" in *fuzz*|*.so|*npy_dump) continue;; esac
  name=$(basename "$b")
  case "$name" in *_bin|*mpi*) continue;; esac
  # The instruction-set variants, with the environment their BUILD targets
  # set (tests/core/BUILD, tests/layers/BUILD).
  case "$name" in
    *_widen_test) isa=(DNNL_MAX_CPU_ISA=AVX512_CORE);;
    *cpu_gemm_avx2_test) isa=(DNNL_MAX_CPU_ISA=AVX2);;
    *) isa=();;
  esac
  env "${isa[@]}" timeout 300 "$b" > "$logs/$name.log" 2>&1; rc=$?
  p=$(grep -c '^\[       OK \]' "$logs/$name.log"); s=$(grep -c '^\[  SKIPPED \] .* ([0-9]* ms)$' "$logs/$name.log")
  f=$(grep -c '^\[  FAILED  \].*(' "$logs/$name.log")
  passed=$((passed+p)); skipped=$((skipped+s)); failed=$((failed+f))
  [ $rc -ne 0 ] && bad+=("$name(rc=$rc)")
  echo "$name rc=$rc ok=$p skipped=$s failed=$f"
  [ $rc -ne 0 ] && grep -E '^\[  FAILED|Failure|error' "$logs/$name.log" | head -8
done
# MPI binaries: 2 ranks, one GPU each.
for b in bin/tests_parallel__*mpi*_bin; do
  name=$(basename "$b")
  timeout 180 mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GTEST_COLOR "$b" > "$logs/$name.log" 2>&1; rc=$?
  p=$(grep -c '^\[       OK \]' "$logs/$name.log"); s=$(grep -c '^\[  SKIPPED \] .* ([0-9]* ms)$' "$logs/$name.log")
  f=$(grep -c '^\[  FAILED  \].*(' "$logs/$name.log")
  passed=$((passed+p)); skipped=$((skipped+s)); failed=$((failed+f))
  [ $rc -ne 0 ] && bad+=("$name(rc=$rc)")
  echo "$name (mpirun -np 2) rc=$rc ok=$p skipped=$s failed=$f"
done
# The "no GPU" behaviour (clear errors, device counts of 0) skips where a GPU
# is visible: run those binaries again with every GPU hidden.
nogpu_passed=0
for b in bin/tests_core__device_test bin/tests_core_cuda__stream_event_test; do
  [ -x "$b" ] || continue
  name=$(basename "$b").nogpu
  CUDA_VISIBLE_DEVICES= timeout 120 "$b" > "$logs/$name.log" 2>&1; rc=$?
  p=$(grep -c '^\[       OK \]' "$logs/$name.log"); f=$(grep -c '^\[  FAILED  \].*(' "$logs/$name.log")
  nogpu_passed=$((nogpu_passed+p)); failed=$((failed+f))
  [ $rc -ne 0 ] && bad+=("$name(rc=$rc)")
  echo "$name (CUDA_VISIBLE_DEVICES=) rc=$rc ok=$p failed=$f"
done
# A skip in the GPU pass that passed in the no-GPU pass was run after all.
ran_without_gpu=$(cat "$logs"/*.nogpu.log 2>/dev/null | grep '^\[       OK \]' | sed 's/ (.*//; s/^\[ *OK \] //' | sort -u)
still_skipped=$(grep -h '^\[  SKIPPED \] .* ([0-9]* ms)$' $(ls "$logs"/*.log | grep -v nogpu) | sed 's/ (.*//; s/^\[  SKIPPED \] //' | sort -u |
  grep -vxF -f <(echo "$ran_without_gpu") || true)
echo "SUMMARY tests: $passed passed, $failed failed, $skipped skipped; then $nogpu_passed passed with the GPUs hidden; bad binaries: ${bad[*]:-none}"
echo "SKIPPED in both passes: $(echo "$still_skipped" | grep -c . || true)"
echo "$still_skipped" | head -20
if [ "${1:-}" = "sanitize" ]; then
  logs=$logs bash ./run_sanitizers.sh
fi
