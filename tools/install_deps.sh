#!/usr/bin/env bash
# Installs every system package Tandem needs on Debian 12 (idempotent).
# Runs apt-get as root, or through sudo otherwise. CUDA is optional: where
# Bazel finds a toolkit ($CUDA_PATH, $CUDA_HOME, /usr/local/cuda or /usr) and
# NCCL (there, in the system paths, or $NCCL_HOME), it builds the GPU backend
# too (third_party/find_cuda.sh); elsewhere everything builds and tests
# CPU-only, and the build says why.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap        # Bazel 4.2.3 (offline build; see third_party/)
  g++
  libeigen3-dev          # CPU backend
  libdnnl-dev            # CPU backend's bfloat16 GEMMs (third_party/BUILD :dnnl)
  zlib1g-dev             # gzip-compressed IDX files
  libopenmpi-dev         # --mode=mpi
  openmpi-bin            # mpirun
  libgtest-dev           # GoogleTest
  libcli11-dev           # command-line flags
  nlohmann-json3-dev     # JSON: safetensors headers, metrics log, Chrome traces
  dataset-fashion-mnist  # /usr/share/datasets/fashion-mnist
  python3                # tests/tools:dp_summary_test runs bench/dp_summary.py
  python3-numpy          # tests/io:safetensors_numpy_test reads Tandem's files with numpy
  wamerican              # examples/char_lm's word list, /usr/share/dict/american-english
  fortunes               # examples/gpt's corpus, /usr/share/games/fortunes (with fortunes-min)
  iproute2               # tests/parallel:two_hosts_test makes its hosts with `ip netns`
)
# `install_deps.sh --fuzz` (tools/test.sh): also what tools/fuzz.sh needs,
# for the docs check's short fuzz runs.
if [ "${1:-}" = "--fuzz" ]; then
  PACKAGES+=(
    clang-14             # tools/fuzz.sh: libFuzzer targets
    libclang-rt-14-dev   # the libFuzzer runtime
  )
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
