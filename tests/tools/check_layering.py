#!/usr/bin/env python3
"""Tandem's library packages depend on each other one way only.

    tests/tools/check_layering.py core/BUILD core/cuda/BUILD layers/BUILD ...
    tests/tools/check_layering.py --root=DIR DIR/core/BUILD ...

The stack (tools/visibility.bzl):

    core  <-  layers  <-  io  <-  parallel  <-  trainer  <-  programs
    core  <-  data, report                  <-  trainer  <-  programs

A package may use the packages below it on its line and itself; every
library may use //third_party and other repositories. No library may use a
program (examples, bench, tests). A BUILD file's package is its directory
relative to --root (default: the current directory); core/cpu and
core/cuda are part of core.

Every label string in a BUILD file is checked (deps, srcs, hdrs, data,
select() branches, if_cuda() lists, named lists) except visibility's.
Prints one line per wrong arrow, naming the target and the dependency:

    core/BUILD: //core:tensor depends on //layers:linear, but core may use only core

and exits 1 if there is any.
"""
import argparse
import ast
import os
import sys

ALLOWED = {
    "core": {"core"},
    "layers": {"core", "layers"},
    "io": {"core", "layers", "io"},
    "parallel": {"core", "layers", "io", "parallel"},
    "trainer": {"core", "layers", "io", "parallel", "data", "report", "trainer"},
    "data": {"core", "data"},
    "report": {"core", "report"},
}

# Not a layer: anything may use them (//conditions:default is select()'s).
SHARED = {"third_party", "conditions"}

SKIPPED_KEYWORDS = {"visibility", "default_visibility"}


def layer_of(package):
    """The top directory of a package: core/cuda -> core."""
    return package.split("/")[0]


def label_package(label):
    """The package of a label of this repository, or None for another one."""
    if label.startswith("@tandem//"):
        label = label[len("@tandem"):]
    if not label.startswith("//"):
        return None
    return label[2:].split(":")[0]


def strings_in(node):
    """Every string constant under `node`, except visibility arguments."""
    found = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.keyword) and current.arg in SKIPPED_KEYWORDS:
            continue
        if isinstance(current, ast.Constant) and isinstance(current.value, str):
            found.append(current.value)
        stack.extend(ast.iter_child_nodes(current))
    return found


def target_name(statement, package):
    """//package:name of a rule call; the package itself for other statements."""
    value = statement.value if isinstance(statement, ast.Expr) else None
    if isinstance(value, ast.Call):
        for keyword in value.keywords:
            if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                return "//%s:%s" % (package, keyword.value.value)
    return "//" + package


def is_load(statement):
    value = statement.value if isinstance(statement, ast.Expr) else None
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and
            value.func.id == "load")


def check_file(path, root):
    """The wrong arrows of one BUILD file, as messages."""
    package = os.path.relpath(os.path.dirname(os.path.abspath(path)), os.path.abspath(root))
    package = package.replace(os.sep, "/")
    layer = layer_of(package)
    if layer not in ALLOWED:
        return ["%s: package %s is not a library layer (known: %s)" %
                (path, package, ", ".join(sorted(ALLOWED)))]
    with open(path) as f:
        tree = ast.parse(f.read(), filename=path)
    problems = []
    for statement in tree.body:
        if is_load(statement):
            continue
        for text in strings_in(statement):
            dep_package = label_package(text)
            if dep_package is None:
                continue
            dep_layer = layer_of(dep_package)
            if dep_layer in ALLOWED[layer] or dep_layer in SHARED:
                continue
            problems.append("%s: %s depends on %s, but %s may use only %s" % (
                path, target_name(statement, package), text, layer,
                ", ".join(sorted(ALLOWED[layer]))))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=".", help="the repository root")
    parser.add_argument("build_files", nargs="+")
    args = parser.parse_args()
    problems = []
    for path in args.build_files:
        problems.extend(check_file(path, args.root))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
