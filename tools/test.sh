#!/usr/bin/env bash
# The README's second quick-start command (and what CI runs): set up, then
# run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
exec bazel test //... "$@"
