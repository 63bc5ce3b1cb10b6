#!/usr/bin/env bash
# The README's first quick-start command: set up, then train the Fashion-MNIST
# example with data parallelism over two worker threads. Extra arguments go to
# the trainer after these, so they win (the last copy of a flag counts):
# `tools/train.sh --workers=4 --epochs=3`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
# No Bazel server is left running afterwards.
trap 'bazel shutdown 2> /dev/null || true' EXIT
bazel run -c opt //examples:fashion_mnist -- --mode=threads --workers=2 "$@"
