#!/usr/bin/env python3
"""Each public header of Tandem's library is one target named after it.

    tests/tools/check_public_headers.py [--root=DIR] PKG...

For every header PKG/NAME.h (PKG one of the library packages: core, layers,
io, parallel, data, report, trainer), PKG/BUILD must have a target or an
alias named NAME whose headers include NAME.h (for an alias: the headers of
the target it names), as README.md ("Use Tandem in your project") promises
users. Two kinds of header are exempt: trainer/trainer.h, which is
//trainer:trainer (the package's default target), and a header whose
opening comment says it is "Internal to" or "Private to" another target,
which users do not include. Prints one line per broken promise:

    core/BUILD: no target `dtype` for core/dtype.h (it is in //core:backend)

and exits 1 if there is any.
"""
import argparse
import ast
import os
import sys

EXEMPT_MARKS = ("Internal to", "Private to")
OPENING_LINES = 3


def build_targets(build_path):
    """{name: (rule, hdrs, actual)} for each rule call in a BUILD file."""
    with open(build_path) as f:
        tree = ast.parse(f.read(), build_path)
    targets = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        name = kw.get("name")
        if not isinstance(name, ast.Constant) or not isinstance(name.value, str):
            continue
        hdrs = []
        if isinstance(kw.get("hdrs"), ast.List):
            hdrs = [e.value for e in kw["hdrs"].elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        actual = kw.get("actual")
        actual = actual.value if isinstance(actual, ast.Constant) else None
        targets[name.value] = (node.func.id, hdrs, actual)
    return targets


def is_exempt(header_path, pkg, stem):
    if (pkg, stem) == ("trainer", "trainer"):
        return True
    with open(header_path) as f:
        opening = " ".join(f.readline() for _ in range(OPENING_LINES))
    return any(mark in opening for mark in EXEMPT_MARKS)


def headers_of(targets, name):
    """The headers target `name` declares, following a local alias."""
    rule, hdrs, actual = targets[name]
    if rule == "alias" and actual and actual.startswith(":"):
        return headers_of(targets, actual[1:]) if actual[1:] in targets else []
    return hdrs


def check_package(root, pkg):
    problems = []
    targets = build_targets(os.path.join(root, pkg, "BUILD"))
    for entry in sorted(os.listdir(os.path.join(root, pkg))):
        if not entry.endswith(".h"):
            continue
        stem = entry[:-2]
        if is_exempt(os.path.join(root, pkg, entry), pkg, stem):
            continue
        if stem in targets and entry in headers_of(targets, stem):
            continue
        owners = [n for n in targets if entry in targets[n][1]]
        where = ("it is in " + ", ".join("//%s:%s" % (pkg, o) for o in owners)
                 if owners else "no target lists it")
        if stem in targets:
            problems.append("%s/BUILD: target `%s` does not provide %s/%s (%s)"
                            % (pkg, stem, pkg, entry, where))
        else:
            problems.append("%s/BUILD: no target `%s` for %s/%s (%s)"
                            % (pkg, stem, pkg, entry, where))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=".")
    parser.add_argument("packages", nargs="+")
    args = parser.parse_args()
    problems = []
    for pkg in args.packages:
        problems += check_package(args.root, pkg)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
