#!/bin/bash
# A rank of an MPI job killed with SIGKILL mid-training: the job must exit
# non-zero, with a message, within 60 s, and leave no process behind.
set -u
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE
export TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}  # Open MPI's session directory
source "$PWD/tests/parallel/sanitizer_env.sh"  # Open MPI suppressions under TSan
bin=$(realpath "$1")
log=$(mktemp)
fail() { echo "FAIL: $*"; cat "$log"; pkill -9 -f -- "$bin" 2>/dev/null; exit 1; }

# Epochs enough to outlast the kill on any machine (a fast CPU trains 200 of
# them in under a second); the kill ends the job long before.
mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" --mode=mpi --epochs=100000 \
  --max_train=2000 --max_test=200 --hidden=32 --collective_timeout=20 >"$log" 2>&1 &
mpirun_pid=$!
# Wait for training to start (rank 0 prints the model line), at most 30 s.
for _ in $(seq 300); do
  grep -q "^model:" "$log" && break
  sleep 0.1
done
grep -q "^model:" "$log" || fail "training did not start"
sleep 1
victim=$(pgrep -f -- "$bin" | while read -r p; do
  [ "$(ps -o ppid= -p "$p" | tr -d ' ')" = "$mpirun_pid" ] && echo "$p"; done | tail -n 1)
[ -n "$victim" ] || fail "no rank process found"
echo "killing rank process $victim with SIGKILL"
start=$SECONDS
kill -9 "$victim"
for _ in $(seq 600); do
  kill -0 "$mpirun_pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$mpirun_pid" 2>/dev/null && fail "the job still runs 60 s after a rank was killed"
wait "$mpirun_pid"
rc=$?
elapsed=$((SECONDS - start))
[ "$rc" -ne 0 ] || fail "mpirun exited 0 after a rank was killed"
grep -qiE "signal 9|killed|abort|collective timeout" "$log" || fail "no message about the killed rank"
sleep 1
left=$(pgrep -f -- "$bin")
[ -z "$left" ] || fail "processes left behind: $left"
echo "job ended with status $rc ${elapsed}s after the kill; no process left"
grep -iE "signal 9|killed|collective timeout" "$log" | head -3
echo PASS
