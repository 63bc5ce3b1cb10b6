"""Who may depend on Tandem's libraries.

The libraries are public, so that another Bazel workspace can use them
(README.md, "Use Tandem in your project"): each library package's BUILD
sets `package(default_visibility = PUBLIC)`. The backends' private parts
stay restricted.

Visibility therefore no longer keeps the packages stacked one way:

    core  <-  layers  <-  io  <-  parallel  <-  trainer  <-  programs (examples, bench, tests)
    core  <-  data, report                  <-  trainer  <-  programs

//tests/tools:layering_test (tests/tools/check_layering.py) does: it reads every
library BUILD file and fails on an arrow pointing the wrong way (core
depending on a layer, a layer on a communicator), naming the target and
the dependency.
"""

PUBLIC = ["//visibility:public"]

# core/cpu and core/cuda: the backends behind core's interface, for core
# itself and for tests and benchmarks that reach a backend directly. A
# program gets the backends through //core:backend_registry, which links
# the CUDA backend wherever CUDA is built.
BACKEND_USERS = [
    "//core:__subpackages__",
    "//bench:__subpackages__",
    "//tests:__subpackages__",
]

# The CUDA pieces the NCCL communicator (parallel/) also needs: error checks,
# device guards, streams and events.
CUDA_PUBLIC = BACKEND_USERS + ["//parallel:__subpackages__"]
