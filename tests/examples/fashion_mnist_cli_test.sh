#!/bin/bash
# Runs the example binary as a user would: a short run must end with
# `test_accuracy=0.xxxx`, and bad flags must fail naming the flag.
set -u
bin=$1
fail() { echo "FAIL: $*"; exit 1; }

out=$("$bin" --epochs=1 --max_train=2000 --max_test=500 --hidden=32 --workers=2 2>&1) \
  || fail "short run exited non-zero: $out"
echo "$out"
last=$(echo "$out" | tail -n 1)
[[ $last =~ ^test_accuracy=0\.[0-9]{4}$ ]] || fail "last line is '$last'"

# --metrics, --plot and --trace write their files.
dir=${TEST_TMPDIR:-$(mktemp -d)}
"$bin" --epochs=2 --max_train=1000 --max_test=200 --hidden=16 --workers=2 --quiet \
  --metrics="$dir/m.jsonl" --plot="$dir/p.svg" --trace="$dir/t.json" --trace_steps=2 \
  >/dev/null 2>&1 || fail "run with --metrics/--plot/--trace failed"
[ "$(grep -c '"split":"train"' "$dir/m.jsonl")" = 2 ] || fail "metrics: $(cat "$dir/m.jsonl")"
[ "$(grep -c '"split":"test"' "$dir/m.jsonl")" = 2 ] || fail "metrics lack test lines"
grep -q '^<svg' "$dir/p.svg" && grep -q '</svg>' "$dir/p.svg" || fail "plot is not an SVG"
for row in '"forward fc1"' '"backward fc2"' '"all-reduce bucket 0"' '"communication"'; do
  grep -q "$row" "$dir/t.json" || fail "trace lacks $row"
done
echo "ok: --metrics, --plot and --trace files written"

expect_error() {  # text args...
  local text=$1; shift
  local err
  err=$("$bin" "$@" 2>&1) && fail "'$*' succeeded"
  echo "$err" | grep -qF -- "$text" || fail "'$*' printed '$err', not '$text'"
  echo "ok: $* -> $(echo "$err" | head -n 1)"
}
expect_error "--mode=bogus" --mode=bogus
expect_error "--workers=0" --workers=0
expect_error "--lr" --lr=-1 --epochs=1 --max_train=100 --max_test=100
expect_error "unknown optimizer 'adagrad' (--optimizer)" --optimizer=adagrad --max_train=100 --max_test=100
expect_error "--workers cannot be used with --mode=mpi" --mode=mpi --workers=2
expect_error "--no_such_flag" --no_such_flag
expect_error "--hidden" --hidden=12,x
expect_error "--metrics" --metrics=/nonexistent/dir/m.jsonl --max_train=100 --max_test=100
# A diverging run stops and names the step; --skip_nonfinite skips instead.
expect_error "the loss is not finite (NaN or Inf) at step" \
  --optimizer=sgd --lr=1e30 --epochs=1 --max_train=500 --max_test=100 --hidden=16
out=$("$bin" --optimizer=sgd --lr=1e30 --epochs=1 --max_train=500 --max_test=100 \
  --hidden=16 --skip_nonfinite 2>&1) || fail "--skip_nonfinite run failed: $out"
echo "$out" | grep -q "skipped [0-9]* non-finite step" || fail "no skipped steps reported: $out"
echo "ok: --skip_nonfinite -> $(echo "$out" | grep skipped)"
echo "PASS"
