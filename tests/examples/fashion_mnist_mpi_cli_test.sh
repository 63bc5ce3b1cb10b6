#!/bin/bash
# The example under mpirun, as a user starts it: without --mode it is one
# training over all ranks (mode mpi), and its output, merged by mpirun into
# one stream, is plain lines from rank 0 only, one per epoch, though Open MPI
# gives every rank a pseudo-terminal. --mode=threads there is a usage error.
# --log_every's step rows come from rank 0 alone, one per step.
set -u
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE
export TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}  # Open MPI's session directory
source "$PWD/tests/parallel/sanitizer_env.sh"  # Open MPI suppressions under TSan
bin=$(realpath "$1")
log="$TMPDIR/mpi.log"
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)

"${mpi[@]}" "$bin" --epochs=2 --max_train=2000 --max_test=200 --hidden=32 >"$log" 2>&1 \
  || fail "mpirun -np 2 without --mode exited non-zero"
cat "$log"
grep -q "2 worker(s), mode mpi" "$log" || fail "not one job of 2 workers in mode mpi"
grep -q "1 worker(s), mode threads" "$log" && fail "ranks trained alone"
[ "$(grep -c '^test_accuracy=' "$log")" = 1 ] || fail "not one final line (rank 0's)"
grep -q $'\r' "$log" && fail "carriage returns (a live progress line) in mpirun's output"
grep -q $'\e' "$log" && fail "escape sequences in mpirun's output"
[ "$(grep -c '^epoch ' "$log")" = 2 ] || fail "not one line per epoch"
echo "ok: mpirun -np 2 trains one job in mode mpi, one plain line per epoch"

"${mpi[@]}" "$bin" --epochs=1 --max_train=500 --max_test=100 --hidden=8 --batch_size=50 \
  --max_steps=3 --log_every=1 --metrics="$TMPDIR/s.jsonl" >"$log" 2>&1 \
  || fail "mpirun -np 2 with --log_every exited non-zero"
for n in 1 2 3; do
  [ "$(grep -c "^{\"epoch\":1,\"step\":$n,.*\"grad_norm\":[0-9].*\"kind\":\"step\"}$" \
    "$TMPDIR/s.jsonl")" = 1 ] || fail "not one row for step $n: $(cat "$TMPDIR/s.jsonl")"
done
[ "$(grep -c '"kind":"step"' "$TMPDIR/s.jsonl")" = 3 ] || fail "step rows: $(cat "$TMPDIR/s.jsonl")"
echo "ok: --log_every under mpirun: one step row per step, from rank 0"

"${mpi[@]}" "$bin" --mode=threads --epochs=1 --max_train=200 --max_test=100 >"$log" 2>&1 \
  && fail "--mode=threads under mpirun succeeded"
grep -q "error: --mode=threads under mpirun would run 2 separate trainings" "$log" \
  || fail "no usage error for --mode=threads under mpirun"
echo "ok: --mode=threads under mpirun -> $(grep -m1 error: "$log")"
echo PASS
