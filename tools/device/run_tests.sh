#!/usr/bin/env bash
# Runs on the GPU machine: every carried test binary, then compute-sanitizer
# (memcheck, racecheck) over the CUDA-using ones. Prints one line per binary
# and a closing summary; full logs go to $OUT.
#   bash .device/run_tests.sh [sanitize]
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
export GTEST_COLOR=no
logs=/tmp/tandem_logs; rm -rf "$logs"; mkdir -p "$logs"
# Only 8 files come back from $OUT: pack the logs into one.
trap 'tar czf "${OUT:-/tmp}/test_logs.tgz" -C /tmp tandem_logs' EXIT
passed=0; failed=0; skipped=0; bad=()
for b in bin/tests_*; do
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
echo "SUMMARY tests: $passed passed, $failed failed, $skipped skipped; bad binaries: ${bad[*]:-none}"
if [ "${1:-}" = "sanitize" ]; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for b in bin/tests_core__ops_test bin/tests_core_cuda__*; do
    for tool in memcheck racecheck; do
      timeout 240 "$cs" --tool $tool --error-exitcode 3 "$b" > "$logs/$(basename $b).$tool.log" 2>&1
      echo "$(basename $b) $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$(basename $b).$tool.log" | tail -1)"
    done
  done
fi
