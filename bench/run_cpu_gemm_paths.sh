#!/usr/bin/env bash
# The CPU training step's GEMMs (bench/cpu_gemm_bench) on each float32 GEMM
# path the CPU backend can take, alternated for ROUNDS rounds on CORES with
# one thread per core: oneDNN (AVX-512 only: it refuses float32 below that), OpenBLAS (its own
# pick and Haswell's AVX2 kernels) and Eigen. Prints, per path, the median of
# the step's GEMM time over the rounds and its ratio to the fastest path.
#   bash bench/run_cpu_gemm_paths.sh CORES ROUNDS CPU_GEMM_BENCH
# E.g. on core 1, five rounds:
#   bash bench/run_cpu_gemm_paths.sh 1 5 bazel-out/k8-opt/bin/bench/cpu_gemm_bench
set -u
if [ $# -ne 3 ]; then echo "usage: run_cpu_gemm_paths.sh CORES ROUNDS CPU_GEMM_BENCH" >&2; exit 2; fi
cores=$1 rounds=$2 bin=$3
threads=$(taskset -c "$cores" nproc)
# name=environment (the path's TANDEM_CPU_GEMM and instruction-set caps).
paths=(
  "onednn=TANDEM_CPU_GEMM=onednn"
  "openblas=TANDEM_CPU_GEMM=openblas"
  "openblas_haswell=TANDEM_CPU_GEMM=openblas OPENBLAS_CORETYPE=Haswell"
  "eigen=TANDEM_CPU_GEMM=eigen"
)
log=$(mktemp)
echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), cores $cores, $threads thread(s)"
for r in $(seq 1 "$rounds"); do
  for p in "${paths[@]}"; do
    name=${p%%=*}; env_vars=${p#*=}
    line=$(env $env_vars taskset -c "$cores" "$bin" --cpu_threads="$threads" 2>&1 |
           grep -E '^(machine|result)' | tr '\n' ' ')
    echo "round=$r path=$name $line" | tee -a "$log"
  done
done
python3 - "$log" <<'PY'
import re, statistics, sys
times = {}
for line in open(sys.argv[1]):
    m = re.search(r"path=(\S+) .*gemm_ms=([\d.]+)", line)
    if m:
        times.setdefault(m[1], []).append(float(m[2]))
best = min(statistics.median(v) for v in times.values())
for name, v in times.items():
    med = statistics.median(v)
    print(f"summary path={name} rounds={len(v)} median_gemm_ms={med:.3f} "
          f"range={min(v):.3f}-{max(v):.3f} x_fastest={med / best:.2f}")
PY
rm -f "$log"
