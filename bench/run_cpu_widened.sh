#!/usr/bin/env bash
# The bf16 CPU step where the CPU does not multiply bfloat16 (CPUs without
# AVX-512 BF16; DNNL_MAX_CPU_ISA=AVX512_CORE caps any CPU so), which then
# computes in float32 (Note [bf16 where the device does not multiply
# bfloat16] in layers/precision.h), beside the fp32 step, alternated round
# after round on the cores given: one worker per core, one
# thread each, 64 samples per worker, the Fashion-MNIST example's MLP
# (784-512-256-10). Prints a line per run and the medians over the rounds,
# with each round's bf16 step over its fp32 step (the median and the range).
#   bash bench/run_cpu_widened.sh CORES ROUNDS DP_CPU_BENCH
# CORES is a taskset list ("1", "2,3"). E.g. one core, six rounds:
#   bash bench/run_cpu_widened.sh 1 6 bazel-out/k8-opt/bin/bench/dp_cpu_bench
set -u
if [ $# -ne 3 ]; then echo "usage: run_cpu_widened.sh CORES ROUNDS DP_CPU_BENCH" >&2; exit 2; fi
cores=$1 rounds=$2 bin=$3 bins=("$3")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/round_args.sh"
overlap=on
[ "$n" -eq 1 ] && overlap=off
flags=(--mode=threads --workers="$n" --cpu_threads=1 --hidden=512,256 --batch_size=$((64 * n))
       --overlap=$overlap --steps=200 --repeats=5)
# The step_ms of one run in PRECISION (fp32, or bf16 on a CPU whose
# bfloat16 GEMMs widen to float32, as its machine line must say); exits
# when the run fails or does not.
step_ms() {
  local precision=$1 out isa=()
  [ "$precision" = bf16 ] && isa=(DNNL_MAX_CPU_ISA=AVX512_CORE)
  out=$(env "${isa[@]}" taskset -c "$cores" "$bin" "${flags[@]}" --precision="$precision") ||
    { echo "run_cpu_widened.sh: the $precision run failed" >&2; exit 1; }
  if [ "$precision" = bf16 ] &&
     ! grep -q '^machine .*bfloat16 GEMM: float32 GEMM on widened operands' <<< "$out"; then
    echo "run_cpu_widened.sh: the bf16 run's machine line does not say its CPU widens" \
      "bfloat16" >&2
    exit 1
  fi
  grep '^result' <<< "$out" | grep -o 'step_ms=[0-9.]*' | head -1 | cut -d= -f2
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in $(seq 1 "$rounds"); do
  fp32=$(step_ms fp32) || exit 1
  bf16=$(step_ms bf16) || exit 1
  echo "round=$r cores=$cores workers=$n fp32_ms=$fp32 bf16_widened_ms=$bf16" \
    "ratio=$(awk -v a="$bf16" -v b="$fp32" 'BEGIN { printf "%.3f", a / b }')"
done | tee "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
column() { grep -o "$1=[0-9.]*" "$log" | cut -d= -f2; }
echo "summary cores=$cores workers=$n rounds=$rounds fp32_ms_median=$(column fp32_ms | median)" \
  "bf16_widened_ms_median=$(column bf16_widened_ms | median)" \
  "ratio_median=$(column ratio | median)" \
  "ratio_range=$(column ratio | sort -g | head -1)-$(column ratio | sort -g | tail -1)"
