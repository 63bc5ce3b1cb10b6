#!/bin/bash
# examples/char_lm under `mpirun -np 2`: one training over both ranks (mode
# mpi), whose lines come from rank 0 only, reaching the loss two worker
# threads reach.
set -u
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE
export TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}  # Open MPI's session directory
source "$PWD/tests/parallel/sanitizer_env.sh"  # Open MPI suppressions under TSan
bin=$(realpath "$1")
log="$TMPDIR/mpi.log"
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }

words="$TMPDIR/words.txt"
source "$PWD/tests/examples/tiny_words.sh"
write_tiny_words "$words"
tiny=(--words="$words" --steps=20 --eval_every=10 --batch_size=32 --context=3 --embed=4
  --hidden=16 --blocks=1 --samples=3)

mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" "${tiny[@]}" >"$log" 2>&1 \
  || fail "mpirun -np 2 exited non-zero"
cat "$log"
grep -q "2 worker(s), mode mpi" "$log" || fail "not one job of 2 workers in mode mpi"
[ "$(grep -c '^val_loss=' "$log")" = 1 ] || fail "not one final line (rank 0's)"
[ "$(grep -c '^bigram baseline' "$log")" = 1 ] || fail "not one bigram line"
[ "$(grep -c '^step ' "$log")" = 2 ] || fail "not one line per evaluation"
mpi=$(grep '^val_loss=' "$log"); mpi=${mpi#val_loss=}
threads=$("$bin" "${tiny[@]}" --workers=2 2>&1 | tail -n 1) || fail "threads run failed"
threads=${threads#val_loss=}
awk -v a="$mpi" -v b="$threads" 'BEGIN { d = a - b; exit !(d < 0.001 && d > -0.001) }' \
  || fail "mpi: $mpi, threads: $threads"
echo "ok: mpirun -np 2 reaches $mpi, 2 threads $threads"
echo PASS
