"""Tandem's build macros: every C++ and CUDA flag of the project lives here.

    load("//tools:build_defs.bzl", "tandem_cc_library", "tandem_cc_test")

tandem_cc_library / tandem_cc_binary / tandem_cc_test add TANDEM_COPTS (and
tests TANDEM_TEST_COPTS);
tandem_cc_test also links GoogleTest's main; tandem_cc_test_runs compiles
one test source once and runs it as several tests, each in its own
environment. cuda_library compiles .cu files
with nvcc (see Note [nvcc under Bazel]) and is empty where CUDA is absent.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "CUDA_GENCODE", "CUDA_INCLUDE", "CUDA_PATH")

TANDEM_COPTS = [
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-sign-compare",
    "-Werror=return-type",
    # A collective's Work ([[nodiscard]]) must be waited for or kept.
    "-Werror=unused-result",
    # No silent a*b+c -> fma contraction: results must not depend on the
    # optimisation level (fastbuild tests and -c opt runs agree bitwise).
    # Eigen's GEMM uses FMA explicitly and is unaffected.
    "-ffp-contract=off",
] + select({
    # AVX2 and FMA rather than -march=native: binaries are carried to other
    # x86-64 machines, whose CPUs may lack this one's AVX-512.
    "//tools:x86_64": ["-mavx2", "-mfma"],
    "//conditions:default": [],
})

# For CPU element-wise loops (core/cpu/, the thread communicator's sums), in
# every build mode: -O3 vectorises them (GCC's -O2 vectorises only loops of
# a known trip count); -fno-trapping-math lets it compute both arms of a
# select, as in ReLU's gradient; -fno-math-errno lets sqrtf be one vector
# instruction, as in AdamW (no code here reads floating-point exception
# flags or errno). None of them reorders arithmetic, and vector square roots
# and divisions round as the scalar ones do, so results stay the same bits.
TANDEM_CPU_KERNEL_COPTS = [
    "-O3",
    "-fno-trapping-math",
    "-fno-math-errno",
]

# A test's own source (its cases, GoogleTest's macros) at -O1 where the mode
# optimises: -O2 took twice as long to compile it (tests/parallel/
# reducer_test.cc: 10.1 s against 4.6 s) and buys a test nothing. The code
# under test keeps the mode's flags, and -ffp-contract=off above keeps
# results the same at any level.
TANDEM_TEST_COPTS = select({
    "//tools:opt": ["-O1"],
    "//conditions:default": [],
})

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-Wall",
    "-DTANDEM_WITH_CUDA=1",
]

def tandem_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = TANDEM_COPTS + copts, **kwargs)

def tandem_cc_binary(name, copts = [], **kwargs):
    native.cc_binary(name = name, copts = TANDEM_COPTS + copts, **kwargs)

def tandem_cc_test(name, copts = [], deps = [], **kwargs):
    native.cc_test(
        name = name,
        copts = TANDEM_COPTS + TANDEM_TEST_COPTS + copts,
        deps = deps + ["//third_party:gtest_main"],
        **kwargs
    )

def tandem_cc_test_runs(name, runs, srcs, deps = [], copts = [], **kwargs):
    """One test source run as several tests, each in its own environment, as
    the CPU backend's tests run once per instruction set a library may pick
    (the environment caps it). runs: [(test name, env dict)]. The source is
    compiled once, into `name` (a test-only library that keeps every test
    case, alwayslink), and each test only links it: a build compiles it
    once, not once per run."""
    native.cc_library(
        name = name,
        testonly = True,
        srcs = srcs,
        copts = TANDEM_COPTS + TANDEM_TEST_COPTS + copts,
        deps = deps + ["//third_party:gtest"],
        alwayslink = True,
    )
    for test_name, env in runs:
        native.cc_test(
            name = test_name,
            env = env,
            deps = [":" + name, "//third_party:gtest_main"],
            **kwargs
        )

def _include_flags():
    """-I flags for the source and generated roots of Tandem's repository and
    of the calling one (see Note [nvcc under Bazel])."""
    roots = []
    for root in [Label("//tools:build_defs.bzl").workspace_root, _calling_repository_root()]:
        if root not in roots:
            roots.append(root)
    return (["-I" + (root or ".") for root in roots] +
            ["-I$(GENDIR)" + ("/" + root if root else "") for root in roots])

def _calling_repository_root():
    repository = native.repository_name()
    return "" if repository == "@" else "external/" + repository[1:]

# Note [nvcc under Bazel]
# Bazel 4 has no CUDA rules and we may download none, so each .cu file is
# compiled to an object by a genrule calling the toolkit's nvcc, and the
# objects become the srcs of a cc_library. nvcc sees the CUDA include
# directory and, for includes like "core/cuda/kernels.h", the roots (source
# and generated) of Tandem's repository and of the repository calling the
# macro: "." in the main workspace, external/<name> in an external one (see
# _include_flags); headers a .cu includes must be listed in
# `hdrs` or `deps_hdrs` so the sandbox holds them. The -gencode flags are
# @local_cuda's CUDA_GENCODE unless `gencode` is given: machine code for each
# architecture of TANDEM_CUDA_ARCHS (default "80;90": Ampere, Hopper) and PTX
# of the highest, which newer GPUs compile when they load it (see
# third_party/cuda_configure.bzl). nvcc gets a private TMPDIR: it names its
# temporary files after its process id and the source, and in Bazel's
# sandboxes (each its own PID namespace, all sharing /tmp) two concurrent
# compilations of one file, e.g. from two output bases, would collide.
def cuda_library(name, srcs, hdrs = [], deps = [], deps_hdrs = [], gencode = None, **kwargs):
    """A cc_library of .cu files compiled by nvcc; an empty library without CUDA."""
    if not CUDA_ENABLED:
        native.cc_library(name = name, hdrs = hdrs, deps = deps, **kwargs)
        return
    include_flags = _include_flags()
    objs = []
    for src in srcs:
        obj = "_objs_%s/%s.o" % (name, src.replace("/", "_"))
        native.genrule(
            name = "%s_%s_nvcc" % (name, src.replace("/", "_").replace(".", "_")),
            srcs = [src] + hdrs + deps_hdrs,
            outs = [obj],
            cmd = " ".join(
                [
                    "tmp=$$(mktemp -d) && TMPDIR=$$tmp",
                    CUDA_PATH + "/bin/nvcc",
                    "-c",
                    "$(location %s)" % src,
                    "-o $@",
                ] + include_flags +
                (["-isystem " + CUDA_INCLUDE] if CUDA_INCLUDE else []) + NVCC_FLAGS +
                (gencode if gencode != None else CUDA_GENCODE) +
                ["; rc=$$?; rm -rf $$tmp; exit $$rc"],
            ),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cuda_runtime"],
        **kwargs
    )
