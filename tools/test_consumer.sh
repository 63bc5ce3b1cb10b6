#!/usr/bin/env bash
# Builds and runs tests/consumer: a workspace of its own that uses Tandem as
# an external repository (local_repository + tandem_dependencies(), as
# README.md's "Use Tandem in your project" shows), so Tandem's public
# targets, include paths and CUDA build are checked from outside: it runs
# the consumer's tests (a training run, which builds the trainer and every
# library under it, CUDA backend included; a custom layer of the consumer's
# own, under Tandem's gradient check), then its training program.
#   tools/test_consumer.sh [extra bazel test arguments]
# It uses an output base of its own, beside this checkout's (never one shared
# with another checkout: see tools/test.sh), and shuts its Bazel server down
# on the way out.
set -euo pipefail
cd "$(dirname "$0")/.."
base="$(bazel info output_base)_consumer"
cd tests/consumer
trap 'bazel --output_base="$base" shutdown 2>/dev/null || true' EXIT
# No bazel-* links in the source tree: --symlink_prefix=/ makes none. One
# GPU architecture (Hopper) rather than the default two halves nvcc's time:
# the point is that the CUDA backend builds from outside, not for which GPU.
flags=(--symlink_prefix=/ --repo_env=TANDEM_CUDA_ARCHS=90)
bazel --output_base="$base" test "${flags[@]}" "$@" //...
bazel --output_base="$base" run "${flags[@]}" //:train_tiny
