#!/usr/bin/env bash
# Runs tests/io/safetensors_numpy_check.py (numpy only, no torch) against
# the safetensors_logits binary: Tandem's exported files read by numpy give
# Tandem's logits, and files numpy writes import into Tandem.
# Usage: safetensors_numpy_test.sh SAFETENSORS_LOGITS CHECK_SCRIPT [FLAG...]
# (FLAGs go to the binary, e.g. --device=cuda).
set -u
tool=$1
script=$2
shift 2
# Debian's python3-numpy is for /usr/bin/python3; another python3 first on
# PATH may have numpy of its own.
for python in python3 /usr/bin/python3; do
  if "$python" -c 'import numpy' >/dev/null 2>&1; then
    exec "$python" "$script" "$tool" "$@"
  fi
done
echo "FAIL: no python3 with numpy here; install Debian's python3-numpy" \
  "(tools/install_deps.sh installs it)"
exit 1
