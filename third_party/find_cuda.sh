#!/bin/sh
# Finds the CUDA toolkit and NCCL that Tandem builds against, and turns
# TANDEM_CUDA_ARCHS into nvcc's -gencode flags. third_party/cuda_configure.bzl
# runs it when Bazel configures @local_cuda; tests/tools/find_cuda_test.sh
# runs it over fake installs, so the test checks the code the build uses.
#
#   third_party/find_cuda.sh [--prefix=DIR] [--machine=NAME]
#
# Reads CUDA_PATH, CUDA_HOME, NCCL_HOME, NCCL_ROOT, TANDEM_DISABLE_CUDA and
# TANDEM_CUDA_ARCHS; an empty variable counts as unset. --prefix puts the
# fixed locations (/usr/local/cuda, /usr, the system include and library
# directories) under DIR and --machine replaces `uname -m`: both are for tests.
#
# Prints KEY=VALUE lines: STATUS (found, missing or disabled), WHY (the
# reason, unless found), MULTIARCH, CUDA_ARCHS and CUDA_GENCODE (both
# space-separated), and where found CUDA_ROOT, CUDA_INCLUDE, CUDA_LIB,
# NCCL_INCLUDE and NCCL_LIB (absolute; the CUDA and NCCL_HOME ones with
# symbolic links resolved). Exits 2 with a message on stderr when
# TANDEM_CUDA_ARCHS is malformed.
#
# See Note [Finding CUDA] in third_party/cuda_configure.bzl for the order.
set -u -f  # -f: no filename expansion of unquoted words (TANDEM_CUDA_ARCHS="*")

prefix=""
machine=""
for arg in "$@"; do
  case "$arg" in
    --prefix=*) prefix="${arg#--prefix=}" ;;
    --machine=*) machine="${arg#--machine=}" ;;
    *) echo "find_cuda.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
[ -n "$machine" ] || machine=$(uname -m)

# Debian's multiarch triplet (/usr/lib/<triplet>) and the directories under
# targets/ where NVIDIA's toolkit keeps its libraries on this machine.
case "$machine" in
  x86_64 | amd64) multiarch=x86_64-linux-gnu; targets="x86_64-linux" ;;
  aarch64 | arm64) multiarch=aarch64-linux-gnu; targets="sbsa-linux aarch64-linux" ;;
  ppc64le) multiarch=powerpc64le-linux-gnu; targets="ppc64le-linux" ;;
  *) multiarch="$machine-linux-gnu"; targets="$machine-linux" ;;
esac

# Sets `archs` and `gencode` from TANDEM_CUDA_ARCHS (default 80 and 90):
# machine code for each architecture and PTX of the highest, so that GPUs
# newer than the list still run (their driver compiles the PTX).
parse_archs() {
  spec="${TANDEM_CUDA_ARCHS:-}"
  [ -n "$spec" ] || spec="80;90"
  archs=""
  for arch in $(printf '%s' "$spec" | tr ';,' '  '); do
    case "$arch" in
      [1-9][0-9] | [1-9][0-9][0-9]) ;;
      *)
        echo "TANDEM_CUDA_ARCHS=\"${TANDEM_CUDA_ARCHS}\": '$arch' is not a compute capability;" \
          "give its digits, separated by ';' or ',' (e.g. TANDEM_CUDA_ARCHS=\"80;90\" for" \
          "sm_80 and sm_90), or leave it unset for the default, \"80;90\"" >&2
        exit 2
        ;;
    esac
    archs="$archs $arch"
  done
  if [ -z "$archs" ]; then
    echo "TANDEM_CUDA_ARCHS=\"${TANDEM_CUDA_ARCHS}\" names no architecture;" \
      "give e.g. \"80;90\", or leave it unset" >&2
    exit 2
  fi
  # shellcheck disable=SC2086  # one architecture per line
  archs=$(printf '%s\n' $archs | sort -n -u | tr '\n' ' ')
  archs="${archs% }"
  gencode=""
  for arch in $archs; do
    gencode="$gencode -gencode=arch=compute_$arch,code=sm_$arch"
  done
  highest="${archs##* }"
  gencode="${gencode# } -gencode=arch=compute_$highest,code=compute_$highest"
}

# Prints the first of the directories $2... under $1 that holds file $3.
first_dir_with() {
  base="$1" file="$2"
  shift 2
  for dir in "$@"; do
    if [ -e "$base/$dir/$file" ]; then
      printf '%s\n' "$dir"
      return 0
    fi
  done
  return 1
}

canonical() { (cd -P "$1" && pwd -P); }

# Chooses the toolkit root: CUDA_PATH, else CUDA_HOME, else the first of
# /usr/local/cuda and /usr (Debian's nvidia-cuda-toolkit) that has bin/nvcc.
# Sets `root` and `root_name` (how messages name it), or `why`.
choose_root() {
  if [ -n "${CUDA_PATH:-}" ]; then
    root="$CUDA_PATH" root_name="CUDA_PATH=$CUDA_PATH"
  elif [ -n "${CUDA_HOME:-}" ]; then
    root="$CUDA_HOME" root_name="CUDA_HOME=$CUDA_HOME"
  elif [ -x "$prefix/usr/local/cuda/bin/nvcc" ]; then
    root="$prefix/usr/local/cuda" root_name="/usr/local/cuda"
  elif [ -x "$prefix/usr/bin/nvcc" ]; then
    root="$prefix/usr" root_name="/usr"
  else
    why="no CUDA toolkit: CUDA_PATH and CUDA_HOME are unset, and neither"
    why="$why /usr/local/cuda/bin/nvcc nor /usr/bin/nvcc exists"
    return 1
  fi
}

# Checks the toolkit at $root: nvcc, the runtime and cuBLAS, with headers in
# include/ and libraries in one of lib64, lib/<multiarch>, targets/*/lib, lib.
# Sets `cuda_lib_rel`, or `why`.
check_toolkit() {
  case "$root" in
    /*) ;;
    *) why="$root_name is not an absolute path"; return 1 ;;
  esac
  if [ ! -d "$root" ]; then
    why="$root_name is not a directory"
    return 1
  fi
  lib_dirs="lib64 lib/$multiarch"
  for target in $targets; do lib_dirs="$lib_dirs targets/$target/lib"; done
  lib_dirs="$lib_dirs lib"
  missing=""
  [ -x "$root/bin/nvcc" ] || missing="$missing, bin/nvcc"
  for header in cuda_runtime.h cublas_v2.h; do
    [ -e "$root/include/$header" ] || missing="$missing, include/$header"
  done
  # shellcheck disable=SC2086  # lib_dirs is a list of words
  if cuda_lib_rel=$(first_dir_with "$root" libcudart.so $lib_dirs); then
    for lib in libcublas.so libcublasLt.so; do
      [ -e "$root/$cuda_lib_rel/$lib" ] || missing="$missing, $cuda_lib_rel/$lib"
    done
  else
    missing="$missing, libcudart.so (looked in $(echo "$lib_dirs" | sed 's/ /, /g'))"
  fi
  if [ -n "$missing" ]; then
    why="$root_name lacks ${missing#, }"
    return 1
  fi
}

# Finds NCCL: NCCL_HOME, else NCCL_ROOT (only there); else in the toolkit
# (include/nccl.h beside the CUDA libraries); else the system's
# /usr/include/nccl.h with libnccl.so in /usr/lib/<multiarch>, /usr/lib64 or
# /usr/lib. Sets `nccl_include` and `nccl_lib`, or `why`.
find_nccl() {
  home="${NCCL_HOME:-}" home_name="NCCL_HOME"
  [ -n "$home" ] || home="${NCCL_ROOT:-}" home_name="NCCL_ROOT"
  if [ -n "$home" ]; then
    case "$home" in
      /*) ;;
      *) why="$home_name=$home is not an absolute path"; return 1 ;;
    esac
    missing=""
    [ -e "$home/include/nccl.h" ] || missing="include/nccl.h"
    if lib_rel=$(first_dir_with "$home" libnccl.so lib lib64 "lib/$multiarch"); then
      [ -z "$missing" ] || { why="$home_name=$home lacks $missing"; return 1; }
      nccl_include="$(canonical "$home")/include" nccl_lib="$(canonical "$home")/$lib_rel"
      return 0
    fi
    why="$home_name=$home lacks ${missing:+$missing and }libnccl.so (looked in lib, lib64, lib/$multiarch)"
    return 1
  fi
  if [ -e "$root/include/nccl.h" ] && [ -e "$root/$cuda_lib_rel/libnccl.so" ]; then
    nccl_include="$cuda_root/include" nccl_lib="$cuda_root/$cuda_lib_rel"
    return 0
  fi
  sys_lib=$(first_dir_with "$prefix/usr" libnccl.so "lib/$multiarch" lib64 lib) || sys_lib=""
  if [ -e "$prefix/usr/include/nccl.h" ] && [ -n "$sys_lib" ]; then
    nccl_include="$prefix/usr/include" nccl_lib="$prefix/usr/$sys_lib"
    return 0
  fi
  in_cuda=""
  [ -e "$root/include/nccl.h" ] || in_cuda="include/nccl.h"
  [ -e "$root/$cuda_lib_rel/libnccl.so" ] || in_cuda="${in_cuda:+$in_cuda and }$cuda_lib_rel/libnccl.so"
  in_sys=""
  [ -e "$prefix/usr/include/nccl.h" ] || in_sys="/usr/include/nccl.h"
  [ -n "$sys_lib" ] || in_sys="${in_sys:+$in_sys and }/usr/lib/$multiarch/libnccl.so"
  why="no NCCL: $root_name lacks $in_cuda, and the system lacks $in_sys"
  why="$why (install NCCL's development files, e.g. libnccl-dev, or set NCCL_HOME)"
  return 1
}

report() {  # status
  echo "STATUS=$1"
  [ "$1" = found ] || echo "WHY=$why"
  echo "MULTIARCH=$multiarch"
  echo "CUDA_ARCHS=$archs"
  echo "CUDA_GENCODE=$gencode"
  if [ "$1" = found ]; then
    echo "CUDA_ROOT=$cuda_root"
    echo "CUDA_INCLUDE=$cuda_root/include"
    echo "CUDA_LIB=$cuda_root/$cuda_lib_rel"
    echo "NCCL_INCLUDE=$nccl_include"
    echo "NCCL_LIB=$nccl_lib"
  fi
}

parse_archs
why=""
if [ "${TANDEM_DISABLE_CUDA:-0}" = 1 ]; then
  why="TANDEM_DISABLE_CUDA=1 was set"
  report disabled
  exit 0
fi
if ! choose_root || ! check_toolkit; then
  report missing
  exit 0
fi
cuda_root=$(canonical "$root")
if ! find_nccl; then
  report missing
  exit 0
fi
report found
