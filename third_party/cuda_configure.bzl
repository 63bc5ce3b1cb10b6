"""Finds a CUDA toolkit on the build machine, or records that there is none.

The repository it makes (@local_cuda) always exists, so BUILD files can load
its defs.bzl unconditionally:

    load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "if_cuda")

Where CUDA is present (CUDA_PATH, else /usr/local/cuda, holding bin/nvcc,
libcudart, libcublas and NCCL), it also provides cc_library targets
:cuda_runtime, :cublas and :nccl, and the nvcc path for cuda_library().
Where it is absent, CUDA_ENABLED is False and the project builds CPU-only.
Set TANDEM_DISABLE_CUDA=1 to force the CPU-only build on a CUDA machine.
"""

_REQUIRED = [
    "bin/nvcc",
    "include/cuda_runtime.h",
    "include/cublas_v2.h",
    "include/nccl.h",
    "lib64/libcudart.so",
    "lib64/libcublas.so",
    "lib64/libnccl.so",
]

def _find_cuda(ctx):
    if ctx.os.environ.get("TANDEM_DISABLE_CUDA", "0") == "1":
        return None, "TANDEM_DISABLE_CUDA=1"
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    missing = [f for f in _REQUIRED if not ctx.path(root + "/" + f).exists]
    if missing:
        return None, "%s lacks %s" % (root, ", ".join(missing))
    return str(ctx.path(root).realpath), None

def _cuda_configure_impl(ctx):
    root, why_not = _find_cuda(ctx)
    if root == None:
        ctx.file("BUILD", "# CUDA not found: %s\n" % why_not)
        ctx.file("defs.bzl", "\n".join([
            "CUDA_ENABLED = False",
            "CUDA_PATH = \"\"",
            "CUDA_WHY_NOT = %r" % why_not,
            "def if_cuda(if_true, if_false = []):",
            "    return if_false",
            "",
        ]))
        return

    ctx.symlink(root + "/include", "include")
    lib = root + "/lib64"
    ctx.template("BUILD", ctx.attr._build_tpl, {
        "%{lib}": lib,
    })
    ctx.file("defs.bzl", "\n".join([
        "CUDA_ENABLED = True",
        "CUDA_PATH = %r" % root,
        "CUDA_WHY_NOT = \"\"",
        "def if_cuda(if_true, if_false = []):",
        "    return if_true",
        "",
    ]))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "TANDEM_DISABLE_CUDA"],
    local = True,
    attrs = {
        "_build_tpl": attr.label(default = "//third_party:cuda.BUILD.tpl"),
    },
)
