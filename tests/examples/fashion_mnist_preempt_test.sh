#!/bin/bash
# Preemption and saving at every end, as a user meets them:
#   fashion_mnist_preempt_test.sh threads BINARY   signals to the process
#   fashion_mnist_preempt_test.sh mpi BINARY       signals to mpirun, 2 ranks
# A signal mid-training stops every worker after the same step, saves in
# --checkpoint_dir and exits 75 within 10 s (30 s under mpirun, which
# passes SIGTERM on when it sees fit); --resume then ends bitwise where
# an uninterrupted run ends (the checkpoints both write at --max_steps are
# byte for byte equal). --max_steps saves where it stops, and a run resumed
# there trains nothing.
set -u
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE
export TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}  # Open MPI's session directory
source "$PWD/tests/parallel/sanitizer_env.sh"  # Open MPI suppressions under TSan
mode=$1
bin=$(realpath "$2")
dir=$TMPDIR/preempt
mkdir -p "$dir"
log=$dir/log
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }
# Epochs of 24000 examples, so that the run prints few lines: mpirun stops
# reading its ranks' output from the signal until it has killed them, and a
# rank that fills the pipe in those seconds blocks in write() until SIGKILL.
flags=(--max_train=24000 --max_test=200 --hidden=16 --batch_size=32 --epochs=400)
launch=("$bin" --workers=2)
# mpirun answers SIGTERM by waiting odls_base_sigkill_timeout seconds
# (default 1), passing SIGTERM on to the ranks, and SIGKILLing them as long
# after that: each rank has that long to finish its step and save.
[ "$mode" = mpi ] && launch=(env OMPI_MCA_odls_base_sigkill_timeout=3
  mpirun --allow-run-as-root --oversubscribe -np 2 "$bin")

# run_and_signal SIGNAL CKPT_DIR: starts a long run, signals it once it is
# training; sets rc, seconds (signal to exit) and step (the last one trained).
run_and_signal() {
  local signal=$1 ckpt=$2
  timeout 300 "${launch[@]}" "${flags[@]}" --checkpoint_dir="$ckpt" >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do grep -q '^data:' "$log" && break; sleep 0.1; done
  grep -q '^data:' "$log" || fail "the run did not start training within 60 s"
  sleep 1
  local start=$(date +%s%N)
  # timeout's child is the launcher (the binary, or mpirun).
  pkill "-$signal" -P "$pid" || fail "nothing to signal: the run ended too early"
  wait "$pid"
  rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  seconds=$((ms / 1000))
  took="$ms ms"
  step=$(sed -n 's/^stopping after step \([0-9]*\): .*/\1/p' "$log")
  cat "$log"
}

run_and_signal TERM "$dir/stopped"
[ -n "$step" ] || fail "no 'stopping after step N' line after SIGTERM"
grep -q "stopping after step $step: SIGTERM received; saving a checkpoint in $dir/stopped" \
  "$log" || fail "the stop line does not name the signal and the directory"
if [ "$mode" = threads ]; then
  [ "$rc" = 75 ] || fail "exit status $rc after SIGTERM, expected 75"
  grep -q "^stopped by SIGTERM; continue with the same flags and --resume$" "$log" \
    || fail "no final 'stopped by SIGTERM' line"
else
  # mpirun itself exits 1 when signalled; its ranks exit 75.
  [ "$rc" != 0 ] || fail "mpirun exited 0 after SIGTERM"
fi
# Under mpirun the time is mostly Open MPI's: it waits 3 s before passing
# SIGTERM on, and now and then passes it on seconds later still (the ranks
# train on until it comes, then stop and save as always); hence the wider
# limit there. docs/reliability.md has the times measured.
limit=10
[ "$mode" = mpi ] && limit=30
[ "$seconds" -le "$limit" ] || fail "took $seconds s from SIGTERM to exit (limit $limit s)"
[ -f "$dir/stopped/checkpoint.tnd" ] || fail "no checkpoint written on SIGTERM"
echo "ok: SIGTERM stopped the run after step $step, saved, and it exited in $took (status $rc)"

# Resumed to step+40, it must end where an uninterrupted run to step+40 does.
target=$((step + 40))
"${launch[@]}" "${flags[@]}" --checkpoint_dir="$dir/stopped" --resume --max_steps=$target \
  >"$log" 2>&1 || fail "resume after SIGTERM failed"
grep -q "resumed from $dir/stopped/checkpoint.tnd at step $step " "$log" \
  || fail "did not resume at step $step"
"${launch[@]}" "${flags[@]}" --checkpoint_dir="$dir/straight" --max_steps=$target \
  >"$log" 2>&1 || fail "the uninterrupted run to step $target failed"
cmp "$dir/stopped/checkpoint.tnd" "$dir/straight/checkpoint.tnd" \
  || fail "stopped at $step and resumed to $target differs from a run straight to $target"
echo "ok: resumed after SIGTERM, bitwise equal to an uninterrupted run at step $target"

# A run resumed at its --max_steps trains nothing and leaves the file alone.
cp "$dir/straight/checkpoint.tnd" "$dir/before.tnd"
"${launch[@]}" "${flags[@]}" --checkpoint_dir="$dir/straight" --resume --max_steps=$target \
  >"$log" 2>&1 || fail "resume at --max_steps failed"
grep -q '^test_accuracy=0\.[0-9]*$' "$log" || fail "resume at --max_steps printed no accuracy"
cmp "$dir/before.tnd" "$dir/straight/checkpoint.tnd" || fail "resume at --max_steps changed it"
echo "ok: resumed at --max_steps: nothing trained, checkpoint unchanged"

if [ "$mode" = threads ]; then
  run_and_signal INT "$dir/interrupted"
  [ "$rc" = 75 ] && grep -q "^stopped by SIGINT;" "$log" || fail "SIGINT: status $rc"
  [ -f "$dir/interrupted/checkpoint.tnd" ] || fail "no checkpoint written on SIGINT"
  echo "ok: SIGINT stops and saves the same way"
else
  # SIGUSR1 is the signal mpirun forwards without killing: status 75.
  run_and_signal USR1 "$dir/warned"
  [ "$rc" = 75 ] || fail "mpirun's status $rc after SIGUSR1, expected 75"
  [ -f "$dir/warned/checkpoint.tnd" ] || fail "no checkpoint written on SIGUSR1"
  echo "ok: SIGUSR1 to mpirun stops and saves, status 75"
fi
echo PASS
