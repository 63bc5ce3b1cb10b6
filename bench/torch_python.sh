# Sourced by the bench scripts that run PyTorch on the CPU: sets $python to
# the first python3 on PATH that has PyTorch (a pyenv one may shadow
# Debian's /usr/bin/python3 with python3-torch), or exits saying how to get
# one.
#   . "$here/torch_python.sh"; "$python" "$here/torch_cpu_reference.py" ...
python=
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import torch' 2>/dev/null; then python=$candidate; break; fi
done
if [ -z "$python" ]; then
  echo "$(basename "$0"): no python3 with PyTorch (on Debian: apt-get install python3-torch)" >&2
  exit 1
fi
