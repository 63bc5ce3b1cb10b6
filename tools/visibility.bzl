"""Who may depend on whom: Tandem's packages stacked one way.

    core  <-  layers  <-  io  <-  parallel  <-  trainer  <-  programs (examples, bench, tests)
    core  <-  data, report                               <-  programs

Each package's BUILD sets `package(default_visibility = X_USERS)`, so an
arrow pointing the wrong way (core including a layer, a layer including a
communicator) fails the build.
"""

# Everything that trains or measures: the top of the stack.
PROGRAMS = [
    "//bench:__subpackages__",
    "//examples:__subpackages__",
    "//tests:__subpackages__",
]

# The training loop's pieces, above every library it composes.
TRAINER_USERS = ["//trainer:__subpackages__"] + PROGRAMS

PARALLEL_USERS = ["//parallel:__subpackages__"] + TRAINER_USERS

IO_USERS = ["//io:__subpackages__"] + PARALLEL_USERS

LAYERS_USERS = ["//layers:__subpackages__"] + IO_USERS

CORE_USERS = [
    "//core:__subpackages__",
    "//data:__subpackages__",
    "//report:__subpackages__",
] + LAYERS_USERS

# Datasets and run reports serve the programs only.
DATA_USERS = ["//data:__subpackages__"] + PROGRAMS

REPORT_USERS = ["//report:__subpackages__"] + PROGRAMS

# core/cpu and core/cuda: the backends behind core's interface, for core
# itself and for tests and benchmarks that reach a backend directly.
BACKEND_USERS = [
    "//core:__subpackages__",
    "//bench:__subpackages__",
    "//tests:__subpackages__",
]

# The CUDA pieces the NCCL communicator (parallel/) also needs: error checks,
# device guards, streams and events.
CUDA_PUBLIC = BACKEND_USERS + ["//parallel:__subpackages__"]
