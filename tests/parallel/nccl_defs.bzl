"""An MPI test of NCCL code: a GoogleTest binary run under mpirun.

    load("//tests/parallel:nccl_defs.bzl", "nccl_mpi_test")

Like //core/cuda:defs.bzl's macros, it defines nothing where Bazel found no
CUDA toolkit, so a CPU-only `bazel test //tests/parallel/...` never sees it.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED")
load("//tests/parallel:mpi_defs.bzl", "mpi_gtest_test")
load("//tools:build_defs.bzl", "tandem_cc_binary")

def nccl_mpi_test(name, srcs, deps, ranks, size = "small", tags = []):
    """`name`_bin (srcs + deps, its own main()) run by mpi_test.sh at each
    world size in `ranks`; tagged "gpu" and "mpi"."""
    if not CUDA_ENABLED:
        return
    tandem_cc_binary(
        name = name + "_bin",
        testonly = True,
        srcs = srcs,
        deps = deps + ["//third_party:gtest"],
    )
    mpi_gtest_test(
        name = name,
        binary = ":%s_bin" % name,
        ranks = ranks,
        size = size,
        tags = tags + ["gpu"],
    )
