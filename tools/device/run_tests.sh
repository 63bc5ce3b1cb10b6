#!/usr/bin/env bash
# Runs on the GPU machine: every carried test binary, then compute-sanitizer
# (memcheck, racecheck) over the CUDA-using ones. Prints one line per binary
# and a closing summary; full logs go to $OUT.
#   bash .device/run_tests.sh [sanitize]
set -u
cd "$(dirname "$0")"
bash ./unpack.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
export GTEST_COLOR=no
logs=/tmp/tandem_logs; rm -rf "$logs"; mkdir -p "$logs"
# Only 8 files come back from $OUT: pack the logs into one.
trap 'tar czf "${OUT:-/tmp}/test_logs.tgz" -C /tmp tandem_logs' EXIT
passed=0; failed=0; skipped=0; bad=()
for b in bin/tests_*; do
  # Fuzz targets replay a corpus on any machine; CI runs them.
  case "$b" in *fuzz*) continue;; esac
  name=$(basename "$b")
  case "$name" in *_bin|*mpi*) continue;; esac
  timeout 300 "$b" > "$logs/$name.log" 2>&1; rc=$?
  p=$(grep -c '^\[       OK \]' "$logs/$name.log"); s=$(grep -c '^\[  SKIPPED \]' "$logs/$name.log")
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
  p=$(grep -c '^\[       OK \]' "$logs/$name.log"); s=$(grep -c '^\[  SKIPPED \]' "$logs/$name.log")
  f=$(grep -c '^\[  FAILED  \].*(' "$logs/$name.log")
  passed=$((passed+p)); skipped=$((skipped+s)); failed=$((failed+f))
  [ $rc -ne 0 ] && bad+=("$name(rc=$rc)")
  echo "$name (mpirun -np 2) rc=$rc ok=$p skipped=$s failed=$f"
done
echo "SUMMARY tests: $passed passed, $failed failed, $skipped skipped; bad binaries: ${bad[*]:-none}"
grep -h '^\[  SKIPPED \]' "$logs"/*.log | sort | uniq | head -20
if [ "${1:-}" = "sanitize" ]; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # Tests that provoke CUDA errors on purpose (out of memory, missing
  # device) are left out: the sanitizer reports those API errors too.
  filter='-*OutOfMemory*:*MissingDevice*:*ThrowsForMissingDevice*'
  for b in bin/tests_core__ops_test bin/tests_core_cuda__* bin/tests_layers__linear_test \
           bin/tests_parallel__gpu_reducer_test bin/tests_parallel__pipeline_gpu_test; do
    [ -x "$b" ] || continue
    for tool in memcheck racecheck; do
      timeout 240 "$cs" --tool $tool --error-exitcode 3 "$b" --gtest_filter="$filter" > "$logs/$(basename $b).$tool.log" 2>&1
      echo "$(basename $b) $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$(basename $b).$tool.log" | tail -1)"
    done
  done
fi
