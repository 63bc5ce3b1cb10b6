#!/bin/bash
# Runs an MPI test binary under mpirun, the way a user would start a job.
#
#   mpi_test.sh gtest BINARY NP...           a GoogleTest binary at each world
#                                            size; every rank must pass at
#                                            least one test
#   mpi_test.sh abort BINARY NP TEXT ARGS... the job must fail, promptly, with
#                                            TEXT on its output
#
# Each mpirun is bounded by `timeout`, so a hang fails the test with a
# message instead of sitting until Bazel's own limit.
set -u

# Bazel's per-test files are this script's. GoogleTest would have every rank
# create and delete the premature-exit marker and write the same XML report,
# racing each other; Bazel builds the report from the log instead.
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE
# Open MPI gives each rank a pseudo-terminal; colour codes would hide the
# "[  PASSED  ]" lines from grep.
export GTEST_COLOR=no
# Open MPI keeps its session directory (PMIx locks, shared-memory segments)
# under TMPDIR: a private one per test keeps concurrent jobs apart. Seen
# without it: "PMIX ERROR ... unable to reach each other" when two MPI tests
# ran at once.
export TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}
# Sanitizer suppressions for Open MPI (sanitizer_env.sh).
source "$PWD/tests/parallel/sanitizer_env.sh"

mode=$1 binary=$2
shift 2
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run_mpi() {  # np args...
  local np=$1
  shift
  timeout 60 mpirun --allow-run-as-root --oversubscribe --tag-output \
    -np "$np" "$binary" "$@" >"$log" 2>&1
  local rc=$?
  cat "$log"
  return $rc
}

case "$mode" in
  gtest)
    for np in "$@"; do
      echo "=== mpirun -np $np $binary"
      run_mpi "$np"
      rc=$?
      if [[ $rc -eq 124 ]]; then
        echo "FAIL: -np $np did not finish within 60 s (a collective hung?)"
        exit 1
      elif [[ $rc -ne 0 ]]; then
        echo "FAIL: -np $np exited with status $rc"
        exit 1
      fi
      # "[1,3]<stdout>:[  PASSED  ] 9 tests." from each rank; skipped tests
      # are not counted there, so an all-skipped run fails here.
      passed=$(grep -cE '\[  PASSED  \] [1-9][0-9]* tests?\.' "$log")
      if [[ $passed -ne $np ]]; then
        echo "FAIL: -np $np: $passed of $np ranks reported passing tests" \
             "(zero tests run, or a rank did not finish)"
        exit 1
      fi
      echo "=== -np $np: all $np ranks passed"
    done
    ;;
  abort)
    np=$1 text=$2
    shift 2
    echo "=== mpirun -np $np $binary $*  (expected to fail with '$text')"
    start=$SECONDS
    run_mpi "$np" "$@"
    rc=$?
    if [[ $rc -eq 124 ]]; then
      echo "FAIL: the job hung instead of aborting"
      exit 1
    elif [[ $rc -eq 0 ]]; then
      echo "FAIL: the job succeeded but a rank threw"
      exit 1
    elif ! grep -qF -- "$text" "$log"; then
      echo "FAIL: the output lacks '$text'"
      exit 1
    fi
    echo "=== aborted as expected (status $rc, $((SECONDS - start)) s)"
    ;;
  *)
    echo "usage: mpi_test.sh gtest|abort BINARY ..." >&2
    exit 2
    ;;
esac
