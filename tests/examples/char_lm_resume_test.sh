#!/bin/bash
# examples/char_lm with a Dropout inside every residual block, stopped and
# resumed: the resumed run ends bitwise where an uninterrupted one does, on
# 2 worker threads or 2 MPI ranks. Every Dropout's position is in the
# checkpoint, found through the model's layer tree (Layer::State), however
# deep it sits.
#   char_lm_resume_test.sh threads|mpi BINARY
set -u
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE
export TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}  # Open MPI's session directory
source "$PWD/tests/parallel/sanitizer_env.sh"  # Open MPI suppressions under TSan
mode=$1
bin=$(realpath "$2")
dir=$TMPDIR/resume
mkdir -p "$dir"
log=$dir/log
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }

words="$dir/words.txt"
source "$PWD/tests/examples/tiny_words.sh"
write_tiny_words "$words"
flags=(--words="$words" --steps=24 --eval_every=24 --batch_size=32 --context=3 --embed=4
  --hidden=16 --blocks=2 --dropout=0.3 --samples=0 --optimizer=adamw)
launch=("$bin" --workers=2)
[ "$mode" = mpi ] && launch=(mpirun --allow-run-as-root --oversubscribe -np 2 "$bin")

"${launch[@]}" "${flags[@]}" --checkpoint_dir="$dir/stopped" --max_steps=10 >"$log" 2>&1 \
  || fail "the run to step 10 failed"
"${launch[@]}" "${flags[@]}" --checkpoint_dir="$dir/stopped" --resume --max_steps=24 \
  >"$log" 2>&1 || fail "the resumed run failed"
grep -q "resumed from $dir/stopped/checkpoint.tnd at step 10 " "$log" \
  || fail "did not resume at step 10"
"${launch[@]}" "${flags[@]}" --checkpoint_dir="$dir/straight" --max_steps=24 >"$log" 2>&1 \
  || fail "the uninterrupted run failed"
cmp "$dir/stopped/checkpoint.tnd" "$dir/straight/checkpoint.tnd" \
  || fail "stopped at 10 and resumed to 24 differs from a run straight to 24"
echo "ok: $mode, Dropout in every residual block: resumed at step 10, bitwise equal at step 24"
echo PASS
