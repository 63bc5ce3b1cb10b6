#!/usr/bin/env bash
# Runs tests/data/npy_numpy_check.py: files numpy writes (np.save, format
# versions 1.0, 2.0 and 3.0, every supported dtype) load into Tandem with
# numpy's values, and the ones Tandem refuses are refused with their reason.
# Usage: npy_numpy_test.sh NPY_DUMP CHECK_SCRIPT
set -u
tool=$1
script=$2
# Debian's python3-numpy is for /usr/bin/python3; another python3 first on
# PATH may have numpy of its own.
for python in python3 /usr/bin/python3; do
  if "$python" -c 'import numpy' >/dev/null 2>&1; then
    exec "$python" "$script" "$tool"
  fi
done
echo "FAIL: no python3 with numpy here; install Debian's python3-numpy" \
  "(tools/install_deps.sh installs it)"
exit 1
