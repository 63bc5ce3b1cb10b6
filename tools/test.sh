#!/usr/bin/env bash
# The README's second quick-start command (and what CI runs): set up, run the
# whole test suite, then the parallel tests again under ThreadSanitizer (the
# threads-mode communicator and the reducer's communication thread are where
# races would hide), the CPU suite under UBSan and ASan, then every command
# the docs show (tools/check_docs.sh).
# Extra arguments go to the first `bazel test`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh --fuzz
bazel test //... "$@"
# A separate output base keeps the sanitizer build from evicting the normal
# one. MPI is left out: Open MPI's own lock-order inversions trip TSan (see
# docs/reliability.md); GPU tests need a GPU and skip anyway.
bazel --output_base="${TMPDIR:-/tmp}/tandem_bazel_tsan" test --config=tsan \
  --build_tests_only --test_tag_filters=-gpu,-mpi //tests/parallel/...
# Undefined behaviour and memory errors over the CPU suite (docs/reliability.md,
# "Sanitizers"; about 10 minutes from empty output bases). ASan's leak check
# is off for the MPI tests: its only reports are Open MPI's own allocations.
bazel --output_base=/tmp/bazel_san_ubsan test --config=ubsan --build_tests_only --test_tag_filters=-gpu //tests/...
bazel --output_base=/tmp/bazel_san_asan test --config=asan --build_tests_only --test_tag_filters=-gpu,-mpi //tests/...
bazel --output_base=/tmp/bazel_san_asan test --config=asan --build_tests_only --test_tag_filters=mpi,-gpu --test_env=ASAN_OPTIONS=detect_leaks=0 //tests/...
# Every command in README.md and docs/*.md is accounted for in
# docs/commands.txt, and the CPU ones run (docs/architecture.md, "Docs stay
# true"): the trainings the docs show, the CPU "which model when" table and
# short fuzz runs (clang, installed by --fuzz above) take most of its time.
tools/check_docs.sh
