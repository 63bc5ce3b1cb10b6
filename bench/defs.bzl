"""Benchmark targets that exist only where Bazel found a CUDA toolkit.

    load("//bench:defs.bzl", "cuda_cc_binary")

Where CUDA is absent (no toolkit or NCCL found, or TANDEM_DISABLE_CUDA=1;
third_party/cuda_configure.bzl prints why) the macro defines nothing, as
//core/cuda:defs.bzl does for libraries and tests, so `bazel build //bench/...`
of a CPU-only build still succeeds.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED")
load("//tools:build_defs.bzl", "tandem_cc_binary")

def cuda_cc_binary(**kwargs):
    """A tandem_cc_binary of host code that calls CUDA."""
    if CUDA_ENABLED:
        tandem_cc_binary(**kwargs)
