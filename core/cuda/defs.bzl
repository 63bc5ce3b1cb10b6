"""Targets that exist only where Bazel found a CUDA toolkit.

    load("//core/cuda:defs.bzl", "cuda_cc_library", "cuda_cc_test")

Where CUDA is absent (no toolkit or NCCL found, or TANDEM_DISABLE_CUDA=1;
third_party/cuda_configure.bzl prints why) these define nothing, so
`bazel build //...` of a CPU-only build never sees a target that needs
@local_cuda. Nothing outside if_cuda() may depend on them.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED")
load("//tools:build_defs.bzl", "cuda_library", "tandem_cc_library", "tandem_cc_test")

def cuda_cc_library(**kwargs):
    """A tandem_cc_library of host code that calls CUDA."""
    if CUDA_ENABLED:
        tandem_cc_library(**kwargs)

def cuda_kernel_library(**kwargs):
    """A cuda_library of .cu files (nvcc)."""
    if CUDA_ENABLED:
        cuda_library(**kwargs)

def cuda_cc_test(name, tags = [], **kwargs):
    """A GPU test, tagged "gpu"; it must GTEST_SKIP where no GPU is visible."""
    if CUDA_ENABLED:
        tandem_cc_test(name = name, tags = tags + ["gpu"], **kwargs)
