#!/usr/bin/env bash
# third_party/find_cuda.sh, the search that third_party/cuda_configure.bzl
# runs, over fake installs in $TEST_TMPDIR: the order of CUDA_PATH, CUDA_HOME
# and the fixed locations; library directories as real installs have them;
# NCCL in the toolkit, in the system's directories or in NCCL_HOME; the
# reasons it gives when something is missing; TANDEM_CUDA_ARCHS.
set -u
finder=third_party/find_cuda.sh
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail=0
cases=0

# Runs the finder with only the given variables (NAME=VALUE...) and the
# options in $opts; sets `out`, `err` and `rc`.
run() {
  # shellcheck disable=SC2086  # $opts is a list of words
  out=$(env -i PATH="$PATH" "$@" sh "$finder" $opts 2>"$tmp/stderr"); rc=$?
  err=$(cat "$tmp/stderr")
}
expect() {  # description, exact KEY=VALUE line
  cases=$((cases + 1))
  if ! grep -qxF -- "$2" <<<"$out"; then
    echo "FAIL: $1: no line '$2' in:"; echo "$out"; fail=1
  fi
}
expect_why() {  # description, text the WHY line must contain
  cases=$((cases + 1))
  if ! grep '^WHY=' <<<"$out" | grep -qF -- "$2"; then
    echo "FAIL: $1: no WHY line containing '$2' in:"; echo "$out"; fail=1
  fi
}
touch_all() {  # root, relative paths: empty files, bin/nvcc executable
  local root=$1; shift
  for f in "$@"; do mkdir -p "$(dirname "$root/$f")"; : > "$root/$f"; done
  [ ! -e "$root/bin/nvcc" ] || chmod +x "$root/bin/nvcc"
}
toolkit() {  # root, library directory, [nccl]
  touch_all "$1" bin/nvcc include/cuda_runtime.h include/cublas_v2.h \
    "$2/libcudart.so" "$2/libcublas.so" "$2/libcublasLt.so"
  [ "${3:-}" != nccl ] || touch_all "$1" include/nccl.h "$2/libnccl.so"
}
real() { (cd -P "$1" && pwd -P); }

# A toolkit with NCCL inside (/usr/local/cuda's layout here), found through
# each variable; CUDA_PATH wins over CUDA_HOME.
opts=""
toolkit "$tmp/a" lib64 nccl
toolkit "$tmp/b" lib64 nccl
a=$(real "$tmp/a") b=$(real "$tmp/b")
run CUDA_PATH="$tmp/a"
expect "CUDA_PATH" "STATUS=found"
expect "CUDA_PATH root" "CUDA_ROOT=$a"
expect "CUDA_PATH lib" "CUDA_LIB=$a/lib64"
expect "NCCL in the toolkit" "NCCL_INCLUDE=$a/include"
expect "NCCL lib in the toolkit" "NCCL_LIB=$a/lib64"
run CUDA_HOME="$tmp/b"
expect "CUDA_HOME" "CUDA_ROOT=$b"
run CUDA_PATH="$tmp/a" CUDA_HOME="$tmp/b"
expect "CUDA_PATH before CUDA_HOME" "CUDA_ROOT=$a"
run CUDA_PATH="" CUDA_HOME="$tmp/b"
expect "an empty variable is unset" "CUDA_ROOT=$b"

# A variable that is set is the only candidate, even where it is wrong.
mkdir -p "$tmp/empty"
run CUDA_PATH="$tmp/empty" CUDA_HOME="$tmp/b"
expect "wrong CUDA_PATH" "STATUS=missing"
expect_why "wrong CUDA_PATH named" "CUDA_PATH=$tmp/empty lacks bin/nvcc, include/cuda_runtime.h"
run CUDA_PATH=relative/cuda
expect_why "relative CUDA_PATH" "CUDA_PATH=relative/cuda is not an absolute path"
touch_all "$tmp/c" bin/nvcc include/cuda_runtime.h include/cublas_v2.h lib64/libcudart.so
run CUDA_HOME="$tmp/c"
expect_why "missing cuBLAS" "CUDA_HOME=$tmp/c lacks lib64/libcublas.so, lib64/libcublasLt.so"

# Fixed locations under a fake root: /usr/local/cuda before /usr; nothing.
sys="$tmp/sys"
opts="--prefix=$sys --machine=x86_64"
run
expect "nothing installed" "STATUS=missing"
expect_why "nothing installed" "no CUDA toolkit: CUDA_PATH and CUDA_HOME are unset"
# Debian's nvidia-cuda-toolkit: nvcc in /usr/bin, libraries and NCCL in the
# system's directories.
toolkit "$sys/usr" lib/x86_64-linux-gnu
touch_all "$sys/usr" include/nccl.h lib/x86_64-linux-gnu/libnccl.so
run
expect "/usr layout" "CUDA_ROOT=$(real "$sys/usr")"
expect "/usr layout lib" "CUDA_LIB=$(real "$sys/usr")/lib/x86_64-linux-gnu"
expect "/usr layout NCCL" "NCCL_LIB=$(real "$sys/usr")/lib/x86_64-linux-gnu"
# NVIDIA's packages: the toolkit in /usr/local/cuda (libraries only under
# targets/), NCCL from libnccl-dev in /usr/include and /usr/lib/<multiarch>.
toolkit "$sys/usr/local/cuda" targets/x86_64-linux/lib
run
expect "/usr/local/cuda before /usr" "CUDA_ROOT=$(real "$sys/usr/local/cuda")"
expect "targets/ lib" "CUDA_LIB=$(real "$sys/usr/local/cuda")/targets/x86_64-linux/lib"
expect "system NCCL include" "NCCL_INCLUDE=$sys/usr/include"
expect "system NCCL lib" "NCCL_LIB=$sys/usr/lib/x86_64-linux-gnu"
expect "multiarch" "MULTIARCH=x86_64-linux-gnu"

# aarch64 server: targets/sbsa-linux, NCCL in /usr/lib/aarch64-linux-gnu.
arm="$tmp/arm"
opts="--prefix=$arm --machine=aarch64"
toolkit "$arm/usr/local/cuda" targets/sbsa-linux/lib
touch_all "$arm/usr" include/nccl.h
run
expect "aarch64 without NCCL" "STATUS=missing"
expect_why "aarch64 without NCCL" "/usr/local/cuda lacks include/nccl.h and targets/sbsa-linux/lib/libnccl.so, and the system lacks /usr/lib/aarch64-linux-gnu/libnccl.so"
expect_why "hint" "set NCCL_HOME"
touch_all "$arm/usr" lib/aarch64-linux-gnu/libnccl.so
run
expect "aarch64" "STATUS=found"
expect "aarch64 lib" "CUDA_LIB=$(real "$arm/usr/local/cuda")/targets/sbsa-linux/lib"
expect "aarch64 NCCL" "NCCL_LIB=$arm/usr/lib/aarch64-linux-gnu"

# NCCL_HOME (else NCCL_ROOT) wins over the system's NCCL, and only it counts.
touch_all "$tmp/nccl" include/nccl.h lib/libnccl.so
run NCCL_ROOT="$tmp/nccl"
expect "NCCL_ROOT" "NCCL_LIB=$(real "$tmp/nccl")/lib"
expect "NCCL_ROOT include" "NCCL_INCLUDE=$(real "$tmp/nccl")/include"
run NCCL_ROOT="$tmp/empty"
expect_why "wrong NCCL_ROOT named" "NCCL_ROOT=$tmp/empty lacks include/nccl.h"
run NCCL_HOME="$tmp/empty" NCCL_ROOT="$tmp/nccl"
expect "NCCL_HOME before NCCL_ROOT" "STATUS=missing"
expect_why "wrong NCCL_HOME" "NCCL_HOME=$tmp/empty lacks include/nccl.h and libnccl.so (looked in lib, lib64, lib/aarch64-linux-gnu)"

# TANDEM_DISABLE_CUDA=1 wins over everything.
run TANDEM_DISABLE_CUDA=1 CUDA_PATH="$tmp/a"
expect "disabled" "STATUS=disabled"
expect "disabled why" "WHY=TANDEM_DISABLE_CUDA=1 was set"

# Architectures: default, lists in any order and separator, PTX of the highest.
opts=""
run CUDA_PATH="$tmp/a"
expect "default archs" "CUDA_ARCHS=80 90"
expect "default gencode" "CUDA_GENCODE=-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"
run TANDEM_CUDA_ARCHS="100,80;90;80"
expect "archs sorted, unique" "CUDA_ARCHS=80 90 100"
expect "PTX of the highest" "CUDA_GENCODE=-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_100,code=sm_100 -gencode=arch=compute_100,code=compute_100"
run TANDEM_CUDA_ARCHS="120"
expect "one arch" "CUDA_GENCODE=-gencode=arch=compute_120,code=sm_120 -gencode=arch=compute_120,code=compute_120"
for bad in "sm_90" "8.0" "90a" "*" ";" "080"; do
  run TANDEM_CUDA_ARCHS="$bad"
  cases=$((cases + 1))
  if [ "$rc" -ne 2 ] || [ -n "$out" ] || ! grep -qF "TANDEM_CUDA_ARCHS=\"$bad\"" <<<"$err"; then
    echo "FAIL: TANDEM_CUDA_ARCHS=\"$bad\": exit $rc, stdout '$out', stderr '$err'"; fail=1
  fi
done

[ "$fail" -eq 0 ] || exit 1
echo "find_cuda_test: $cases checks passed"
