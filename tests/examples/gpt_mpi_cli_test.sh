#!/bin/bash
# examples/gpt under `mpirun -np 2`: one training over both ranks (mode
# mpi), whose lines come from rank 0 only, reaching the loss two worker
# threads reach; stopped and resumed, it ends bitwise where an
# uninterrupted run does.
set -u
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE
export TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}  # Open MPI's session directory
source "$PWD/tests/parallel/sanitizer_env.sh"  # Open MPI suppressions under TSan
bin=$(realpath "$1")
log="$TMPDIR/mpi.log"
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }

source "$PWD/tests/examples/tiny_fortunes.sh"
write_tiny_fortunes "$TMPDIR/corpus"
tiny=(--corpus="$TMPDIR/corpus" --steps=20 --eval_every=10 --batch_size=16 --context=16
  --layers=1 --heads=2 --width=32 --lr=0.01 --warmup=5 --val_windows=64 --sample_length=40)
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2 "$bin")

"${mpirun[@]}" "${tiny[@]}" >"$log" 2>&1 || fail "mpirun -np 2 exited non-zero"
cat "$log"
grep -q "2 worker(s), mode mpi" "$log" || fail "not one job of 2 workers in mode mpi"
[ "$(grep -c '^val_loss=' "$log")" = 1 ] || fail "not one final line (rank 0's)"
[ "$(grep -c '^bigram baseline' "$log")" = 1 ] || fail "not one bigram line"
[ "$(grep -c '^sample ' "$log")" = 1 ] || fail "not one sample (rank 0's)"
[ "$(grep -c '^step ' "$log")" = 2 ] || fail "not one line per evaluation"
mpi=$(grep '^val_loss=' "$log"); mpi=${mpi#val_loss=}
threads=$("$bin" "${tiny[@]}" --workers=2 2>&1 | tail -n 1) || fail "threads run failed"
threads=${threads#val_loss=}
awk -v a="$mpi" -v b="$threads" 'BEGIN { d = a - b; exit !(d < 0.001 && d > -0.001) }' \
  || fail "mpi: $mpi, threads: $threads"
echo "ok: mpirun -np 2 reaches $mpi, 2 threads $threads"

flags=("${tiny[@]}" --sample_length=0)
"${mpirun[@]}" "${flags[@]}" --checkpoint_dir="$TMPDIR/stopped" --max_steps=8 >"$log" 2>&1 \
  || fail "the run to step 8 failed"
"${mpirun[@]}" "${flags[@]}" --checkpoint_dir="$TMPDIR/stopped" --resume >"$log" 2>&1 \
  || fail "the resumed run failed"
grep -q "resumed from $TMPDIR/stopped/checkpoint.tnd at step 8 " "$log" \
  || fail "did not resume at step 8"
"${mpirun[@]}" "${flags[@]}" --checkpoint_dir="$TMPDIR/straight" >"$log" 2>&1 \
  || fail "the uninterrupted run failed"
cmp "$TMPDIR/stopped/checkpoint.tnd" "$TMPDIR/straight/checkpoint.tnd" \
  || fail "stopped at 8 and resumed to 20 differs from a run straight to 20"
echo "ok: 2 MPI ranks resumed at step 8, bitwise equal at step 20"
echo PASS
