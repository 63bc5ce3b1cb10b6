#!/usr/bin/env bash
# bench/dp_summary.py over a recorded run_gpu.sh dp log (2 x H200,
# its dp_step and allreduce rows): the scaling and DDP ratios it
# computes, its verdicts, a FAIL when the 2-GPU step is slower, and an error
# when a row a target needs is missing.
set -u
summary=bench/dp_summary.py
log=tests/tools/testdata/dp_bench_2gpu.txt
fail=0
check() {  # description, pattern, text
  if ! grep -qF -- "$2" <<<"$3"; then
    echo "FAIL: $1: no line with '$2' in:"; echo "$3"; fail=1
  fi
}
out=$(python3 "$summary" "$log"); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exit $rc on a complete log"; fail=1; }
check "large/512 row" "| large | 512 | 3.825 / 3.749 | 3.929 | 95.4% |" "$out"
check "DDP ratio" "target large/512: >= 1.2x DDP: 1.255x PASS" "$out"
check "scaling" "target large/4096: >= 98% scaling: 99.5% PASS" "$out"
check "threads vs MPI" "target small/256: threads and MPI within 5%: 0.0% PASS" "$out"
check "bucketed" "0.956 of raw from the same memory, 1.088 of raw from ordinary memory PASS" "$out"

# A slower large/512 step (4.178 ms) in place of the recorded one.
slow=$(mktemp); trap 'rm -f "$slow" "$partial"' EXIT
sed 's/gpus=2 overlap=on grads=overwrite update=per_bucket bucket_mb=25.0 gemm_reserve=16 gradients_first=2 symmetric=on buckets=4 lanes=1 step_ms=3.929/&X/; s/step_ms=3.929X/step_ms=4.178/' "$log" > "$slow"
out=$(python3 "$summary" "$slow")
check "slower step fails 1.2x" "target large/512: >= 1.2x DDP: 1.180x FAIL" "$out"
check "slower step fails 95%" "target large/512: >= 95% scaling: 89.7% FAIL" "$out"

partial=$(mktemp)
grep -v "^tandem mpi" "$log" > "$partial"
out=$(python3 "$summary" "$partial"); rc=$?
[ $rc -eq 1 ] || { echo "FAIL: exit $rc without the MPI rows, expected 1"; fail=1; }
check "missing rows named" "missing: large/512: no MPI step" "$out"
[ $fail -eq 0 ] && echo "dp_summary_test: all checks passed"
exit $fail
