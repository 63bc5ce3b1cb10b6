#!/usr/bin/env bash
# Builds optimised test and example binaries here and copies them, stripped,
# into .device/ (git-ignored) so the `device` tool can carry them to the GPU
# machine, which has no Bazel. See ../shared/docs/gpu-machine.md.
#   tools/device/bundle.sh [--data] [extra bazel targets...]
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."
with_data=0
if [ "${1:-}" = "--data" ]; then with_data=1; shift; fi
targets=$(bazel query 'kind("cc_test|cc_binary", //tests/... + //examples/... + //bench/...)' 2>/dev/null)
# Static linking of our own libraries: tests otherwise link them as .so
# files from bazel-bin/_solib, which do not travel.
bazel build -c opt --dynamic_mode=off $targets "$@" >/dev/null
rm -rf .device && mkdir -p .device/bin
for t in $targets; do
  pkg=${t%%:*}; pkg=${pkg#//}; name=${t##*:}
  src=bazel-out/k8-opt/bin/$pkg/$name
  [ -f "$src" ] || continue
  out=.device/bin/$(echo "$pkg" | tr / _)__$name
  cp "$src" "$out" && chmod u+w "$out" && strip -s "$out"
done
[ -n "$(ls .device/bin)" ] || { echo "bundle: no binaries were built" >&2; exit 1; }
cp tools/device/*.sh .device/
# The commit the binaries were built from, named in run_proof.sh's report.
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!.device' || echo ' with uncommitted changes')" > .device/COMMIT
cp bench/*.sh .device/ 2>/dev/null || true
cp -r bench/*.py .device/ 2>/dev/null || true
if [ $with_data = 1 ]; then
  mkdir -p .device/data && cp /usr/share/datasets/fashion-mnist/*.gz .device/data/
  # The text corpora, packed (unpack.sh opens them): examples/char_lm's word
  # list and examples/gpt's corpus, the regular files it reads (docs/gpt.md).
  text=$(mktemp -d)
  cp /usr/share/dict/american-english "$text/"
  mkdir -p "$text/fortunes"
  find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' \
    -exec cp {} "$text/fortunes/" \;
  XZ_OPT=-9 tar -C "$text" -cJf .device/data/text.tar.xz american-english fortunes
  rm -rf "$text"
fi
# The CPU backend's GEMM library (third_party/BUILD :dnnl) and what it
# links, which the GPU machine's image may lack: the run scripts put lib/ on
# LD_LIBRARY_PATH.
mkdir -p .device/lib
cp -L /usr/lib/x86_64-linux-gnu/libdnnl.so.2 /usr/lib/x86_64-linux-gnu/libOpenCL.so.1 \
  /usr/lib/x86_64-linux-gnu/libgomp.so.1 .device/lib/
# The binaries share most of their bytes (the CUDA kernels' fat binary):
# compressed together they travel well under the 64 MiB limit, with a
# dictionary (xz -9: 64 MiB) larger than one binary.
XZ_OPT=-9 tar -C .device -cJf .device/bin.tar.xz bin lib && rm -rf .device/bin .device/lib
cp tools/device/unpack.sh .device/
du -sh .device
