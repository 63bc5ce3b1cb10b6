#!/usr/bin/env bash
# Every cell of docs/benchmarks.md's "which model when" table for one device:
# data-parallel threads, data-parallel MPI ranks and a 2-stage pipeline on 2
# workers (bench/model_table_bench.cc), each run RUNS times (medians), then
# one worker failing in each model, recorded from the outside: exit code,
# time from the failure to the job's end, the message, leftover processes.
#
#   bench/run_model_table.sh cpu [results file]      # after: bazel build -c opt //bench:model_table_bench
#   bash .device/run_model_table.sh cuda             # GPU machine, binaries from tools/device/bundle.sh
#
# Results (raw result lines, a median summary, the failure lines) go to the
# results file, default ${OUT:-/tmp}/model_table_<device>.txt; every run's
# log to ${OUT:-/tmp}/model_table_<device>_logs.tgz. RUNS=N overrides the
# number of runs per cell (3 on cpu, 2 on cuda), MAX_OTHERS the most CPU
# (%) other processes may take in a run counted in the medians (10),
# MODEL_TABLE_BIN the binary, MPIRUN_ARGS adds mpirun options, and HANG=1
# adds the hang cells on GPUs.
set -u
device=${1:?usage: run_model_table.sh cpu|cuda [results file]}
case "$device" in cpu|cuda) ;; *) echo "device must be cpu or cuda" >&2; exit 2;; esac
out=${OUT:-/tmp}
results=${2:-$out/model_table_$device.txt}
runs=${RUNS:-$([ "$device" = cuda ] && echo 2 || echo 3)}
here=$(cd "$(dirname "$0")" && pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
logs=$work/logs
mkdir -p "$logs"
if [ -n "${MODEL_TABLE_BIN:-}" ]; then
  bin=$MODEL_TABLE_BIN
elif [ -f "$here/bin.tar.xz" ] || [ -d "$here/bin" ]; then
  # .device/ on the GPU machine (tools/device/bundle.sh, unpack.sh).
  [ -d "$here/bin" ] || bash "$here/unpack.sh"
  bin=$here/bin/bench__model_table_bench
else
  # A private copy: the shared Bazel server may relink bazel-out mid-run.
  # bazel-out follows whichever output base built last; the default output
  # base's own path does not.
  src=$here/../bazel-out/k8-opt/bin/bench/model_table_bench
  [ -f "$src" ] || src=$(cd "$here/.." && bazel info output_base 2>/dev/null)/execroot/tandem/bazel-out/k8-opt/bin/bench/model_table_bench
  cp "$src" "$work/" || exit 1
  bin=$work/model_table_bench
fi
[ -x "$bin" ] || { echo "no binary at $bin" >&2; exit 1; }

# Open MPI keeps its session directory under TMPDIR: a private one keeps this
# job apart from other MPI jobs on the machine (tests/parallel/mpi_test.sh).
export TMPDIR=$work
# MPIRUN_ARGS: extra mpirun options (e.g. --mca settings to compare).
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2 ${MPIRUN_ARGS:-})
if [ "$device" = cuda ]; then
  export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
  mpirun+=(-x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
fi
common=(--device="$device")

now() { date +%s.%N; }
# CPU seconds used by the whole machine, and by this shell's finished children.
machine_cpu() { awk '/^cpu / { print ($2 + $3 + $4 + $7 + $8 + $9) / 100 }' /proc/stat; }
# `times` must run in this shell, not a subshell: its 2nd line, "0m1.5s
# 0m0.2s", is the user and system time of the children this shell reaped.
children_cpu() {
  times >"$work/times"
  tail -n 1 "$work/times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] } print t }'
}
sub_ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (a - b) * 1000 }'; }
# The value of key $1 in the line $2 ("-" if absent).
value() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1 | grep . || echo -; }

{
  echo "# model_table_bench, device=$device, runs=$runs, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# host: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -n 1); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  [ "$device" = cuda ] && nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv,noheader | sed 's/^/# gpu: /'
  echo "# binary: $bin; MPI: ${mpirun[*]}"
} > "$results"

# --- the measured cells -------------------------------------------------------
# One run of a mode: the binary's result line, plus launch_to_ready_ms (from
# just before the command to the binary's ready_epoch: exec, loading, mpirun,
# MPI_Init, communicators), wall_s (the whole command) and others_cpu_pct:
# the share of the machine's CPU time that other processes used meanwhile
# (0 on an idle machine; a disturbed run shows here).
cell() {  # mode run command...
  local mode=$1 run=$2
  shift 2
  local log=$logs/${mode}_$run.log t0 t1 rc line m0 m1
  m0=$(machine_cpu)
  children_cpu >"$work/c0"
  t0=$(now)
  timeout -k 5 300 "$@" >"$log" 2>&1
  rc=$?
  t1=$(now)
  m1=$(machine_cpu)
  children_cpu >"$work/c1"
  line=$(grep '^result ' "$log" | head -n 1)
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    echo "# $mode run $run FAILED (rc=$rc): $(tail -n 3 "$log" | tr '\n' ' ')" | tee -a "$results"
    return
  fi
  echo "$line launch_to_ready_ms=$(sub_ms "$(value ready_epoch "$line")" "$t0") wall_s=$(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.2f", a - b }') others_cpu_pct=$(awk -v m0="$m0" -v m1="$m1" -v c0="$(cat "$work/c0")" -v c1="$(cat "$work/c1")" -v w0="$t0" -v w1="$t1" -v n="$(nproc)" 'BEGIN { v = 100 * ((m1 - m0) - (c1 - c0)) / ((w1 - w0) * n); printf "%.0f", v < 0 ? 0 : v }') run=$run" \
    | tee -a "$results"
}

for run in $(seq "$runs"); do
  cell threads "$run" "$bin" --mode=threads --workers=2 "${common[@]}"
  cell mpi "$run" "${mpirun[@]}" "$bin" --mode=mpi "${common[@]}"
  cell pipeline "$run" "$bin" --mode=pipeline "${common[@]}"
done

# Medians over the runs that other processes left alone (others_cpu_pct at
# most $MAX_OTHERS, default 10), one line per mode; runs= says how many.
max_others=${MAX_OTHERS:-10}
keys="others_cpu_pct launch_to_ready_ms startup_ms first_step_ms step_ms samples_per_s barrier_us ar4_us ar4k_us ar_large_ms ar_large_GBps handoff4_us handoff4k_us handoff_large_ms handoff_large_GBps handoff_large_1stage_ms wall_s"
echo "# medians over runs with others_cpu_pct <= $max_others" >>"$results"
for mode in threads mpi pipeline; do
  grep "^result .* mode=$mode " "$results" |
    awk -v m="$max_others" '{ for (i = 1; i <= NF; i++) if ($i ~ /^others_cpu_pct=/) { split($i, kv, "="); if (kv[2] + 0 <= m) print } }' >"$work/clean"
  summary="median mode=$mode device=$device runs=$(wc -l <"$work/clean")"
  for key in $keys; do
    vals=$(while read -r l; do value "$key" "$l"; done <"$work/clean" | grep -vx -e '-' -e 'na' | sort -g)
    [ -n "$vals" ] || continue
    summary+=" $key=$(echo "$vals" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
  done
  echo "$summary" | tee -a "$results"
done

# --- failures -------------------------------------------------------------------
# Worker (stage) 1 or 0 fails at its 3rd step. --collective_timeout=10 bounds
# a wait for a dead peer (the default is 60 s); `timeout` (the first
# argument, seconds) bounds a hang, reported as HUNG.
fail_cell() {  # timeout label command...
  local limit=$1 label=$2
  shift 2
  local log=$logs/fail_$label.log t_start t_end rc inject left msg hung=
  t_start=$(now)
  # The braces' 2>/dev/null keeps bash's "Killed" notice off the terminal.
  { timeout -k 5 "$limit" "$@" --fail_step=3 --collective_timeout=10 "${common[@]}" >"$log" 2>&1; } 2>/dev/null
  rc=$?
  t_end=$(now)
  # timeout's TERM gives 124; its KILL, 5 s later, 137.
  awk -v a="$t_end" -v b="$t_start" -v l="$limit" 'BEGIN { exit !(a - b >= l) }' &&
    hung=" HUNG(ended by timeout after ${limit}s)"
  inject=$(sed -n 's/^.*fail_inject .*epoch=\([0-9.]*\).*$/\1/p' "$log" | head -n 1)
  sleep 1
  left=$(pgrep -f -- "$bin" | tr '\n' ' ')
  # Ours alone (the binary's private path): end them by id.
  [ -n "$left" ] && kill -9 $left 2>/dev/null
  # The first lines that say what happened (mpirun's banners come later).
  msg=$(grep -v 'fail_inject' "$log" | grep -iE 'error|failed|noticed|timeout|MPI_ABORT' | head -n 2 | tr '\n' ' ' | tr -s ' ')
  echo "failure $label device=$device rc=$rc$hung fail_to_end_ms=$([ -n "$inject" ] && sub_ms "$t_end" "$inject" || echo 'no-fail_inject-line') left_behind=${left:-none} message=\"$msg\"" \
    | tee -a "$results"
}

fail_cell 30 threads_throw "$bin" --mode=threads --workers=2 --fail_rank=1
fail_cell 30 threads_kill "$bin" --mode=threads --workers=2 --fail_rank=1 --fail=kill
fail_cell 30 mpi_throw "${mpirun[@]}" "$bin" --mode=mpi --fail_rank=1
fail_cell 30 mpi_kill "${mpirun[@]}" "$bin" --mode=mpi --fail_rank=1 --fail=kill
fail_cell 30 pipeline_stage0_throw "$bin" --mode=pipeline --fail_rank=0
fail_cell 30 pipeline_stage1_throw "$bin" --mode=pipeline --fail_rank=1
fail_cell 30 pipeline_kill "$bin" --mode=pipeline --fail_rank=1 --fail=kill
# A worker that stops without failing (deadlock, stuck I/O): up to 30 s
# each, so by default only on the CPU; HANG=1 adds them on GPUs.
if [ "$device" = cpu ] || [ "${HANG:-0}" = 1 ]; then
  fail_cell 30 threads_hang "$bin" --mode=threads --workers=2 --fail_rank=1 --fail=hang
  fail_cell 30 mpi_hang "${mpirun[@]}" "$bin" --mode=mpi --fail_rank=1 --fail=hang
  fail_cell 30 pipeline_hang "$bin" --mode=pipeline --fail_rank=1 --fail=hang
fi

echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$results"
tar czf "$out/model_table_${device}_logs.tgz" -C "$work" logs
echo "results: $results; logs: $out/model_table_${device}_logs.tgz"
