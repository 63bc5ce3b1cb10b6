#!/usr/bin/env bash
# bench/precision_summary.py over the result lines of a recorded
# run_gpu.sh precision call (one H200): its table, its verdicts, the
# sustained rate's share of the rate at once beside a goal above it, a FAIL
# when a step is slower, and an error when a configuration is missing.
set -u
summary=bench/precision_summary.py
log=tests/tools/testdata/precision_bench_h200.txt
fail=0
check() {  # description, text expected in a line, output
  if ! grep -qF -- "$2" <<<"$3"; then
    echo "FAIL: $1: no line with '$2' in:"; echo "$3"; fail=1
  fi
}
reject() {  # description, text no line may have, output
  if grep -qF -- "$2" <<<"$3"; then
    echo "FAIL: $1: a line has '$2' in:"; echo "$3"; fail=1
  fi
}
out=$(python3 "$summary" "$log"); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exit $rc on a complete log"; fail=1; }
row="| large | 4096 | tf32 | 4.489 | 5.113 | 1.14x | 78.7 | 70.0 | 94.6 | 83.5 | 960.1 | 977.1 |"
check "tf32 large/4096 row" "$row" "$out"
check "bf16 rate goal" "goal bf16 large/4096: >= 80% of the bf16 GEMM rate: 81.5% PASS" "$out"
reject "bf16 goal below its ceiling" "80% of the bf16 GEMM rate: 81.5% PASS (the goal" "$out"
check "tf32 rate goal above its ceiling" \
  "goal tf32 large/4096: >= 90% of the TF32 GEMM rate: 78.7% FAIL (the goal is above 83.2%" "$out"
check "speed-up" "goal bf16 small/256: >= 6x PyTorch autocast: 7.17x PASS" "$out"
check "sustained share" \
  "tf32 GEMM rate (340.09 TFLOP/s, 83.2% of the 408.72 at once)" "$out"
check "burst row" "tandem tf32 large/4096 timed in bursts after 1000 ms idle: 4.1413 ms" "$out"
check "verdict" "precision_summary: 9 configurations, 1 goal(s) missed" "$out"

# A bf16 large/4096 step at 2.60 ms (71.8% of the rate) in place of 2.2904.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
sed '/impl=tandem model=large batch=4096 .*precision=bf16 steps=[0-9]* repeats=5 cool_ms=0 /{
  s/step_ms=2.2904/step_ms=2.6000/; s/pct_gemm=81.5/pct_gemm=71.8/; }' "$log" > "$tmp/slow.txt"
out=$(python3 "$summary" "$tmp/slow.txt")
check "slower bf16 step fails its rate" "80% of the bf16 GEMM rate: 71.8% FAIL" "$out"
check "slower bf16 step fails 1.15x" "goal bf16 large/4096: >= 1.15x PyTorch autocast: 1.06x FAIL" \
  "$out"
check "three goals missed" "precision_summary: 9 configurations, 3 goal(s) missed" "$out"

grep -v "impl=torch model=small batch=256 .*precision=bf16" "$log" > "$tmp/partial.txt"
out=$(python3 "$summary" "$tmp/partial.txt"); rc=$?
[ $rc -eq 2 ] || { echo "FAIL: exit $rc without a configuration, expected 2"; fail=1; }
check "missing configuration named" "missing results: torch small/256 bf16" "$out"
[ $fail -eq 0 ] && echo "precision_summary_test: all checks passed"
exit $fail
