#!/usr/bin/env bash
# The README's test command: installs what the build needs, then runs the
# whole test suite (`bazel test //...`).
#   tools/test.sh [--full] [extra bazel test arguments]
# --full is what CI runs (.ci/run). Its phases, in order, each timed (the
# table at the end, and docs/architecture.md, "What CI runs", says what each
# checks and costs):
#   deps       tools/install_deps.sh --fuzz
#   suite      bazel test //...
#   tsan       the parallel tests and the thread pool's under ThreadSanitizer
#   asan+ubsan the C++ tests under AddressSanitizer and UBSan, one build
#   consumer   Tandem built and used from another workspace
#   docs       every command the docs show (tools/check_docs.sh)
# Either way no Bazel server is left running: each output base used is shut
# down on the way out.
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
if [ "${1:-}" = "--full" ]; then full=1; shift; fi

# --- Phases, timed ---------------------------------------------------------------
# `phase NAME COMMAND...` runs COMMAND and records its wall time; the table
# is printed on the way out, also when a phase fails (its row says so), so a
# slow or broken phase is visible in every CI log.
phase_rows=()
phase() {
  local name=$1 start rc=0
  shift
  echo "=== phase $name: $*"
  start=$(date +%s)
  "$@" || rc=$?
  phase_rows+=("$(printf '%-11s %5d s  %s' "$name" $(( $(date +%s) - start )) \
    "$([ $rc = 0 ] && echo ok || echo "FAILED (exit $rc)")")")
  return $rc
}
print_phases() {
  [ ${#phase_rows[@]} -gt 0 ] || return 0
  echo "=== tools/test.sh phases (wall time)"
  printf 'phase %s\n' "${phase_rows[@]}"
  echo "phase total       $(( $(date +%s) - run_start )) s"
}

# A separate output base per sanitizer build keeps it from evicting the
# normal one. Each lies beside this checkout's own output base (Bazel names
# that one after the checkout's path), never at a fixed path: an output base
# used from two checkouts keeps the first one's runfiles links, so the
# second's tests would run the first's scripts, or none if it is gone.
tsan_base="" asan_base=""
finish() {
  rc=$?
  print_phases
  bazel shutdown 2>/dev/null || true
  for base in "$tsan_base" "$asan_base"; do
    [ -n "$base" ] && [ -d "$base" ] && bazel --output_base="$base" shutdown 2>/dev/null || true
  done
  exit $rc
}
run_start=$(date +%s)
trap finish EXIT

if [ $full = 0 ]; then
  tools/install_deps.sh
  bazel test //... "$@"
  exit 0
fi

# The sanitizer builds are CPU-only (--repo_env=TANDEM_DISABLE_CUDA=1): on a
# machine without a GPU the CUDA backend's code never runs, so a sanitizer
# cannot judge it, and leaving nvcc out saves its share of each build.
# tools/device/run_sanitizers.sh runs compute-sanitizer on the GPU machine.
# The commands are written out as docs/reliability.md shows them.
phase deps tools/install_deps.sh --fuzz
phase suite bazel test //... "$@"
own_base=$(bazel info output_base)
tsan_base=${own_base}_tsan asan_base=${own_base}_asan
# Threads are Tandem's own only in the communicators, the reducer, the
# launcher, the checkpointer and the CPU thread pool: TSan runs their tests.
# MPI is left out: Open MPI's own lock-order inversions trip it (see
# docs/reliability.md); GPU tests need a GPU and skip anyway.
phase tsan bazel --output_base="$(bazel info output_base)_tsan" test --config=tsan \
  --repo_env=TANDEM_DISABLE_CUDA=1 --build_tests_only --test_tag_filters=-gpu,-mpi \
  //tests/parallel/... //tests/core:cpu_thread_pool_test
# Memory errors and undefined behaviour over every C++ test, from one build
# instrumented for both (docs/reliability.md, "Sanitizers"). //tests/tools
# is left out: its tests check shell and Python scripts, with no C++ of
# Tandem's to instrument. The second command only runs tests: ASan's leak
# check is off for the MPI tests, whose only leak reports are Open MPI's own
# allocations. (`&&`: `set -e` does not reach into a function that `phase`
# calls as a condition.)
asan_ubsan() {
  bazel --output_base="$(bazel info output_base)_asan" test --config=asan --config=ubsan \
    --repo_env=TANDEM_DISABLE_CUDA=1 --build_tests_only --test_tag_filters=-gpu,-mpi \
    -- //tests/... -//tests/tools/... &&
  bazel --output_base="$(bazel info output_base)_asan" test --config=asan --config=ubsan \
    --repo_env=TANDEM_DISABLE_CUDA=1 --build_tests_only --test_tag_filters=mpi,-gpu \
    --test_env=ASAN_OPTIONS=detect_leaks=0 -- //tests/... -//tests/tools/...
}
phase asan+ubsan asan_ubsan
# Tandem used from another workspace (tests/consumer), built afresh in its
# own output base.
phase consumer tools/test_consumer.sh
# Every command in README.md and docs/*.md is accounted for in
# docs/commands.txt, and the CPU ones run (docs/architecture.md, "Docs stay
# true").
phase docs tools/check_docs.sh
