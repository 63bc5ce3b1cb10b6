#!/usr/bin/env bash
# Runs GPU test cases in many processes at once on one GPU, each repeated,
# and counts the runs that failed: faults that show only when other
# processes load the GPU and the host runs far ahead of it (blocks another
# lane still used, handed out again: SGD folded into backward showed it).
# On the GPU machine, from the repository root (the bundle
# unpacks itself):
#   bash .device/run_stress.sh BINARY FILTER [PROCESSES [REPEATS]]
#   bash .device/run_stress.sh .device/bin/tests_layers__optimizer_test '*DrainedRun/cuda0'
set -u
here=$(cd "$(dirname "$0")" && pwd)
# In the bundle: its binaries unpacked, its libraries found.
if [ -f "$here/bin.tar.xz" ]; then
  bash "$here/unpack.sh"
  export LD_LIBRARY_PATH=$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
fi
bin=${1:?usage: run_stress.sh BINARY FILTER [PROCESSES [REPEATS]]}
filter=${2:?usage: run_stress.sh BINARY FILTER [PROCESSES [REPEATS]]}
processes=${3:-16}
repeats=${4:-20}
[ -x "$bin" ] || { echo "run_stress.sh: $bin is not an executable file" >&2; exit 2; }
logs=$(mktemp -d)
for i in $(seq "$processes"); do
  "$bin" --gtest_filter="$filter" --gtest_repeat="$repeats" > "$logs/$i.log" 2>&1 &
done
wait
# A failed case prints "[  FAILED  ] name (N ms)" once per repeat.
ran=0
for name in $(cat "$logs"/*.log | sed -n 's/^\[       OK \] \([^ ]*\).*/\1/p; s/^\[  FAILED  \] \([^ ,]*\).* ([0-9]* ms)$/\1/p' | sort -u); do
  ok=$(cat "$logs"/*.log | grep -c "^\[       OK \] $name ")
  failed=$(cat "$logs"/*.log | grep -E -c "^\[  FAILED  \] $name[ ,].*\([0-9]+ ms\)$")
  echo "$name: failed $failed of $((ok + failed)) runs ($processes processes x $repeats repeats)"
  ran=1
done
if [ $ran = 0 ]; then
  echo "run_stress.sh: no case matching '$filter' ran ($(cat "$logs"/*.log | grep -c '^\[  SKIPPED \] .*ms)$') skipped runs; a GPU case skips without a GPU)" >&2
  rm -rf "$logs"
  exit 1
fi
rm -rf "$logs"
