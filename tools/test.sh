#!/usr/bin/env bash
# The README's test command: installs what the build needs, then runs the
# whole test suite (`bazel test //...`).
#   tools/test.sh [--full] [extra bazel test arguments]
# --full (what CI runs, .ci/run) then also runs the parallel tests under
# ThreadSanitizer (the threads-mode communicator and the reducer's
# communication thread are where races would hide), the CPU suite under
# UBSan and ASan, and every command the docs show (tools/check_docs.sh,
# short fuzz runs included). Either way no Bazel server is left running:
# each output base used is shut down on the way out.
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
if [ "${1:-}" = "--full" ]; then full=1; shift; fi
# A separate output base per sanitizer keeps its build from evicting the
# normal one. Each lies beside this checkout's own output base (Bazel names
# that one after the checkout's path), never at a fixed path: an output base
# used from two checkouts keeps the first one's runfiles links, so the
# second's tests would run the first's scripts, or none if it is gone.
tsan_base="" ubsan_base="" asan_base=""
stop_servers() {
  bazel shutdown 2>/dev/null || true
  for base in "$tsan_base" "$ubsan_base" "$asan_base"; do
    [ -n "$base" ] && [ -d "$base" ] && bazel --output_base="$base" shutdown 2>/dev/null || true
  done
}
trap stop_servers EXIT

if [ $full = 0 ]; then
  tools/install_deps.sh
  bazel test //... "$@"
  exit 0
fi
tools/install_deps.sh --fuzz
bazel test //... "$@"
own_base=$(bazel info output_base)
tsan_base=${own_base}_tsan ubsan_base=${own_base}_ubsan asan_base=${own_base}_asan
# MPI is left out of TSan: Open MPI's own lock-order inversions trip it (see
# docs/reliability.md); GPU tests need a GPU and skip anyway.
bazel --output_base="$(bazel info output_base)_tsan" test --config=tsan \
  --build_tests_only --test_tag_filters=-gpu,-mpi //tests/parallel/... \
  //tests/core:cpu_thread_pool_test
# Undefined behaviour and memory errors over the CPU suite (docs/reliability.md,
# "Sanitizers"). ASan's leak check is off for the MPI tests: its only reports
# are Open MPI's own allocations.
bazel --output_base="$(bazel info output_base)_ubsan" test --config=ubsan --build_tests_only --test_tag_filters=-gpu //tests/...
bazel --output_base="$(bazel info output_base)_asan" test --config=asan --build_tests_only --test_tag_filters=-gpu,-mpi //tests/...
bazel --output_base="$(bazel info output_base)_asan" test --config=asan --build_tests_only --test_tag_filters=mpi,-gpu --test_env=ASAN_OPTIONS=detect_leaks=0 //tests/...
# Tandem used from another workspace (tests/consumer), built afresh in its
# own output base.
tools/test_consumer.sh
# Every command in README.md and docs/*.md is accounted for in
# docs/commands.txt, and the CPU ones run (docs/architecture.md, "Docs stay
# true").
tools/check_docs.sh
