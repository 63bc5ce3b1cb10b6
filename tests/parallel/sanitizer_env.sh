# Sourced by the scripts that start MPI tests (mpi_test.sh,
# tests/examples/mpi_kill_rank_test.sh). Under --config=tsan: Open MPI is
# not instrumented, and its transports take locks in orders TSan reports as
# potential deadlocks in every MPI test, so point TSan at a suppression file
# that names only Open MPI's libraries (docs/reliability.md, "Sanitizers").
# Every rank inherits the environment from mpirun; the file is in the
# test's runfiles (data of the sh_test).
if [[ -n "${TSAN_OPTIONS:-}" ]]; then
  export TSAN_OPTIONS="$TSAN_OPTIONS:suppressions=$PWD/tests/parallel/openmpi_tsan.supp"
fi
