"""sh_tests that run a binary under mpirun through tests/parallel/mpi_test.sh.

    load("//tests/parallel:mpi_defs.bzl", "mpi_abort_test", "mpi_gtest_test")

    mpi_gtest_test(name = "x_test", binary = ":x_test_bin", ranks = [2, 4])
    mpi_abort_test(name = "y_test", binary = ":y_bin", ranks = 2,
                   text = "rank 1 failed", args = ["--fail_rank=1"])

Every MPI test is tagged "mpi" and "exclusive": MPI jobs share the machine's
cores and /dev/shm, and two at once were seen to clash.
"""

_TAGS = ["exclusive", "mpi"]

# Sanitizer suppressions for Open MPI's own code (mpi_test.sh uses them).
_SUPPRESSIONS = [
    "//tests/parallel:openmpi_tsan.supp",
    "//tests/parallel:sanitizer_env.sh",
]

def _label(binary):
    return binary if binary.startswith(":") or binary.startswith("//") else ":" + binary

def mpi_gtest_test(name, binary, ranks, size = "small", tags = []):
    """A GoogleTest binary at each world size in `ranks`; every rank must pass."""
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests/parallel:mpi_test.sh"],
        args = ["gtest", "$(rootpath %s)" % _label(binary)] + [str(n) for n in ranks],
        data = [_label(binary)] + _SUPPRESSIONS,
        tags = tags + _TAGS,
    )

def mpi_abort_test(name, binary, ranks, text, args = [], size = "small"):
    """The job must fail promptly with `text` in its output."""
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests/parallel:mpi_test.sh"],
        args = ["abort", "$(rootpath %s)" % _label(binary), str(ranks), "'%s'" % text] + args,
        data = [_label(binary)] + _SUPPRESSIONS,
        tags = _TAGS,
    )
