"""The external repositories Tandem needs, declared by one macro.

A workspace that uses Tandem (and Tandem's own WORKSPACE) writes:

    load("@tandem//tools:deps.bzl", "tandem_dependencies")

    tandem_dependencies()

It declares, each unless the workspace already has a repository of that
name (declare your own first to replace one):
  @rules_cc, @rules_java, @remote_coverage_tools
      offline stand-ins from third_party/ for what Bazel 4 would otherwise
      download (third_party/rules_cc/cc/defs.bzl says why);
  @eigen      Eigen 3 headers in /usr/include/eigen3 (libeigen3-dev);
  @openmpi    Open MPI in /usr/lib/x86_64-linux-gnu/openmpi (libopenmpi-dev);
  @local_cuda the CUDA toolkit and NCCL found on this machine, or none
      (third_party/cuda_configure.bzl: CUDA_PATH, NCCL_HOME,
      TANDEM_CUDA_ARCHS, TANDEM_DISABLE_CUDA=1).

Every label here is resolved against Tandem's repository, whatever its
name in the calling workspace, so the macro works in Tandem's own
WORKSPACE and from a workspace that has Tandem as an external repository.
"""

load("//third_party:cuda_configure.bzl", "cuda_configure")

# Note [Stand-ins by label]
# A WORKSPACE macro cannot turn a label into a path, and local_repository's
# path is relative to the calling workspace, not to Tandem. The stand-ins
# are therefore made by a repository rule that finds third_party/ through a
# label of Tandem's own (repository_ctx.path of //third_party:BUILD) and
# links the stand-in's files into the new repository.
def _tandem_stand_in_impl(ctx):
    source = ctx.path(ctx.attr._third_party).dirname.get_child(ctx.attr.directory)
    if not source.exists:
        fail("Tandem: no stand-in directory %s for @%s" % (source, ctx.name))
    for entry in source.readdir():
        ctx.symlink(entry, entry.basename)

_tandem_stand_in = repository_rule(
    implementation = _tandem_stand_in_impl,
    local = True,
    attrs = {
        "directory": attr.string(mandatory = True),
        "_third_party": attr.label(default = Label("//third_party:BUILD")),
    },
)

def _declare(rule, name, **kwargs):
    if name not in native.existing_rules():
        rule(name = name, **kwargs)

def tandem_dependencies():
    """Declares the repositories Tandem's BUILD files refer to."""
    for name in ["rules_cc", "rules_java", "remote_coverage_tools"]:
        _declare(_tandem_stand_in, name, directory = name)
    _declare(
        native.new_local_repository,
        "eigen",
        build_file = str(Label("//third_party:eigen.BUILD")),
        path = "/usr/include/eigen3",
    )
    _declare(
        native.new_local_repository,
        "openmpi",
        build_file = str(Label("//third_party:openmpi.BUILD")),
        path = "/usr/lib/x86_64-linux-gnu/openmpi",
    )
    _declare(cuda_configure, "local_cuda")
