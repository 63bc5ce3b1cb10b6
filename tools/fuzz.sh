#!/usr/bin/env bash
# Fuzzes Tandem's readers of untrusted files with libFuzzer (clang),
# AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   tools/fuzz.sh [SECONDS] [TARGET...]     fuzz each TARGET for SECONDS
#                                           (default 60; targets default to
#                                           all: idx_reader checkpoint
#                                           safetensors)
#   tools/fuzz.sh 300 checkpoint            five minutes on the checkpoint reader
#   $FUZZ_DIR/checkpoint_fuzzer CRASH_FILE  replay a finding (prints the stack)
#
# Environment:
#   FUZZ_DIR       work directory (default /tmp/tandem_fuzz): binaries,
#                  seeds/<target>, corpus/<target> (kept and grown across
#                  runs), artifacts/ (crash-*, oom-*, timeout-* inputs),
#                  <target>.log
#   FUZZ_PARALLEL  1: fuzz the targets at the same time (default: one after
#                  the other)
#   FUZZ_NICE      niceness of the fuzzers (default 10: shared machine)
#   FUZZ_SANITIZERS  -fsanitize= list (default address,undefined). ASan's
#                  allocator maps and unmaps zlib's large buffers on every
#                  input, which held idx_reader to ~230 runs/s here;
#                  FUZZ_SANITIZERS=undefined ran it at ~14,000/s (use
#                  another FUZZ_DIR for each setting; -malloc_limit_mb
#                  needs ASan, -rss_limit_mb still applies)
#   CXX            clang++ with libFuzzer (default clang++-14; Debian's
#                  libclang-rt-14-dev provides the runtime)
#
# Bazel's toolchain is gcc, which has no libFuzzer, so this script compiles
# the targets and the sources they need (asked of `bazel query`) directly. The same targets also
# build under Bazel as plain tests (tests/fuzz/BUILD) that replay a fixed
# corpus in CI. Exit status: 0 if no fuzzer found anything, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH="${1:-60}"
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(idx_reader checkpoint safetensors)
FUZZ_DIR="${FUZZ_DIR:-/tmp/tandem_fuzz}"
FUZZ_NICE="${FUZZ_NICE:-10}"
CXX="${CXX:-clang++-14}"

if ! command -v "$CXX" >/dev/null; then
  echo "fuzz.sh: $CXX not found; install clang-14 (apt-get install clang-14)" >&2
  exit 2
fi
runtime="$("$CXX" -print-file-name=libclang_rt.fuzzer-x86_64.a)"
if [[ "$runtime" != /* ]]; then
  echo "fuzz.sh: $CXX has no libFuzzer runtime (libclang_rt.fuzzer-x86_64.a);" \
       "apt-get install libclang-rt-14-dev" >&2
  exit 2
fi

mkdir -p "$FUZZ_DIR/obj" "$FUZZ_DIR/artifacts" "$FUZZ_DIR/include/local_cuda"
# What Bazel's @local_cuda repository generates, for this CPU-only build;
# rewritten only when it differs, so its time does not force recompiles.
cat > "$FUZZ_DIR/include/local_cuda/config.h.new" <<'HEADER'
#ifndef TANDEM_LOCAL_CUDA_CONFIG_H_
#define TANDEM_LOCAL_CUDA_CONFIG_H_
#define TANDEM_CUDA_WHY_NOT "tools/fuzz.sh builds the CPU backend only"
#endif  // TANDEM_LOCAL_CUDA_CONFIG_H_
HEADER
if cmp -s "$FUZZ_DIR/include/local_cuda/config.h.new" "$FUZZ_DIR/include/local_cuda/config.h"; then
  rm "$FUZZ_DIR/include/local_cuda/config.h.new"
else
  mv "$FUZZ_DIR/include/local_cuda/config.h.new" "$FUZZ_DIR/include/local_cuda/config.h"
fi
SAN=(-fsanitize="${FUZZ_SANITIZERS:-address,undefined}"
     -fno-sanitize-recover=undefined)
# The project's flags (tools/build_defs.bzl), -O1 -g for useful stacks.
CXXFLAGS=(-std=c++17 -O1 -g -fno-omit-frame-pointer
          -ffp-contract=off -I. -I"$FUZZ_DIR/include" -isystem /usr/include/eigen3 "${SAN[@]}")

# The sources come from the fuzz tests' dependencies in Bazel's graph, so the
# list follows the BUILD files; the CUDA backend is left out (CPU build).
# What the readers link against is compiled with the sanitizers but without
# coverage, so libFuzzer steers by the readers' branches, not Eigen's; the
# code under test (FUZZED_SOURCES) gets coverage instrumentation.
FUZZED_SOURCES=(data/idx_reader.cc io/checkpoint.cc io/checkpoint_format.cc
                io/safetensors.cc io/safetensors_header.cc
                tests/fuzz/idx_reader_fuzzer.cc tests/fuzz/checkpoint_fuzzer.cc
                tests/fuzz/safetensors_fuzzer.cc)
query='kind("source file", deps(//tests/fuzz:idx_reader_fuzzer_test)
       union deps(//tests/fuzz:checkpoint_fuzzer_test)
       union deps(//tests/fuzz:safetensors_fuzzer_test))'
if ! labels="$(bazel query "$query" 2>"$FUZZ_DIR/query.log")"; then
  echo "fuzz.sh: bazel query for the fuzz targets' sources failed:" >&2
  cat "$FUZZ_DIR/query.log" >&2
  exit 2
fi
LIB_SOURCES=()
while read -r src; do
  [[ " ${FUZZED_SOURCES[*]} " == *" $src "* ]] || LIB_SOURCES+=("$src")
done < <(sed -n 's|^//\([^:]*\):\(.*\.cc\)$|\1/\2|p' <<<"$labels" |
         grep -v -e '^core/cuda/' -e '^tests/fuzz/')
# The libraries' link options (oneDNN and its OpenMP runtime:
# third_party/BUILD :dnnl).
LIBS=(-ldnnl -lgomp -lz -pthread)

# An object is compiled again only when it is missing, was compiled with
# other flags (a FUZZ_DIR reused with other FUZZ_SANITIZERS or CXX), or a
# file it was compiled from (its -MMD dependency list) is newer: a second
# run over the same FUZZ_DIR fuzzes within seconds.
up_to_date() {  # up_to_date OBJ FLAGS
  local obj="$1" dep
  [[ -f "$obj" && -f "$obj.d" && -f "$obj.flags" ]] || return 1
  [[ "$(cat "$obj.flags")" == "$2" ]] || return 1
  for dep in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$obj.d"); do
    [[ -e "$dep" && ! "$dep" -nt "$obj" ]] || return 1
  done
}
compile() {  # compile SOURCE EXTRA_FLAGS...
  local src="$1"; shift
  local obj="$FUZZ_DIR/obj/${src//\//_}.o"
  local flags="$CXX ${CXXFLAGS[*]} $*"
  up_to_date "$obj" "$flags" && return 0
  rm -f "$obj.flags"
  "$CXX" "${CXXFLAGS[@]}" "$@" -MMD -MF "$obj.d" -c "$src" -o "$obj"
  echo "$flags" > "$obj.flags"
}

echo "== compiling with $CXX ($(nproc) jobs)"
start=$(date +%s)
pids=()
for src in "${LIB_SOURCES[@]}" tests/fuzz/fuzz_main.cc; do
  compile "$src" & pids+=($!)
  if (( ${#pids[@]} >= $(nproc) )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for src in "${FUZZED_SOURCES[@]}"; do
  compile "$src" -fsanitize=fuzzer-no-link & pids+=($!)
  if (( ${#pids[@]} >= $(nproc) )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
echo "   compiled in $(( $(date +%s) - start )) s"

lib_objs=()
for src in "${LIB_SOURCES[@]}" data/idx_reader.cc io/checkpoint.cc \
           io/checkpoint_format.cc io/safetensors.cc io/safetensors_header.cc; do
  lib_objs+=("$FUZZ_DIR/obj/${src//\//_}.o")
done

found=0
fuzz_one() {  # fuzz_one TARGET
  local t="$1"
  local target_obj="$FUZZ_DIR/obj/tests_fuzz_${t}_fuzzer.cc.o"
  local bin="$FUZZ_DIR/${t}_fuzzer"
  "$CXX" "${SAN[@]}" -fsanitize=fuzzer "$target_obj" "${lib_objs[@]}" \
    "${LIBS[@]}" -o "$bin"
  # The seed corpus, written by the target's own TandemFuzzSeeds().
  "$CXX" "${SAN[@]}" -fsanitize=fuzzer-no-link "$target_obj" \
    "$FUZZ_DIR/obj/tests_fuzz_fuzz_main.cc.o" "${lib_objs[@]}" \
    "${LIBS[@]}" -o "$FUZZ_DIR/${t}_seeds"
  rm -rf "$FUZZ_DIR/seeds/$t"
  mkdir -p "$FUZZ_DIR/seeds/$t" "$FUZZ_DIR/corpus/$t"
  "$FUZZ_DIR/${t}_seeds" "--write_seeds=$FUZZ_DIR/seeds/$t"

  echo "== fuzzing $t for ${SECONDS_EACH} s (log: $FUZZ_DIR/$t.log)"
  # -malloc_limit_mb: inputs are a few KiB, so any allocation of hundreds
  # of MiB is a reader trusting a size field: report it as a finding.
  local rc=0
  UBSAN_OPTIONS=print_stacktrace=1 nice -n "$FUZZ_NICE" "$bin" \
    -max_total_time="$SECONDS_EACH" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=256 \
    -artifact_prefix="$FUZZ_DIR/artifacts/$t-" \
    "$FUZZ_DIR/corpus/$t" "$FUZZ_DIR/seeds/$t" >"$FUZZ_DIR/$t.log" 2>&1 || rc=$?
  local execs
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$FUZZ_DIR/$t.log" |
           grep -o '[0-9]*$' || echo '?')"
  echo "   $t: exit $rc, $execs executions, $(ls "$FUZZ_DIR/corpus/$t" | wc -l)" \
       "corpus files; last status: $(grep -E '^#[0-9]+' "$FUZZ_DIR/$t.log" | tail -1)"
  if [[ $rc -ne 0 ]]; then
    echo "   FINDING in $t:"
    grep -E 'ERROR|SUMMARY|Test unit written|out-of-memory|malloc\(' \
      "$FUZZ_DIR/$t.log" | head -10 | sed 's/^/     /'
    return 1
  fi
}

if [[ "${FUZZ_PARALLEL:-0}" == 1 ]]; then
  pids=()
  for t in "${TARGETS[@]}"; do fuzz_one "$t" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || found=1; done
else
  for t in "${TARGETS[@]}"; do fuzz_one "$t" || found=1; done
fi
exit "$found"
