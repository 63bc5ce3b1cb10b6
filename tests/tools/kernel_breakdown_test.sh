#!/usr/bin/env bash
# bench/kernel_breakdown.py over a recorded ncu log (the last steps of
# gpu_step_bench, mlp-large batch 4096 in bf16, on an H200): the step it
# finds and its sums by kernel, and errors for a log with one step and for
# steps that launched different kernels.
set -u
breakdown=bench/kernel_breakdown.py
log=tests/tools/testdata/ncu_step_bf16.csv
fail=0
check() {  # description, pattern, text
  if ! grep -qF -- "$2" <<<"$3"; then
    echo "FAIL: $1: no line with '$2' in:"; echo "$3"; fail=1
  fi
}
out=$(python3 "$breakdown" "$log"); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exit $rc on a complete log"; fail=1; }
check "step found" "kernels in a step: 41, their times summed: 2133.8 us" "$out"
check "GEMMs summed" "654.8  30.7%     5  nvjet_sm90_tss_128x256_64x4_2x1_v_badd_coopA_NTN" "$out"
check "copies summed" "105.3   4.9%    11  void tandem::MapVecKernel<2, 1, 2, 2, tandem::<unnamed>::CopyOp>" "$out"

short=$(mktemp); odd=$(mktemp); trap 'rm -f "$short" "$odd"' EXIT
# Only the last step: one MSE kernel.
head -4 "$log" > "$short"; tail -41 "$log" >> "$short"
out=$(python3 "$breakdown" "$short" 2>&1); rc=$?
[ $rc -ne 0 ] || { echo "FAIL: exit 0 on a log with one step"; fail=1; }
check "one step named" "fewer than two kernels named like 'MseKernel'" "$out"
# The last step launches a kernel the one before did not (its last line).
sed '$ s/CopyOp/OtherOp/' "$log" > "$odd"
out=$(python3 "$breakdown" "$odd" 2>&1); rc=$?
[ $rc -ne 0 ] || { echo "FAIL: exit 0 when the steps differ"; fail=1; }
check "steps differ" "the last two steps launched different kernels" "$out"
[ $fail -eq 0 ] && echo "kernel_breakdown_test: all checks passed"
exit $fail
