#!/usr/bin/env bash
# The GEMMs of the CPU training step alone, Tandem's (bench/cpu_gemm_bench)
# beside PyTorch's (bench/torch_cpu_reference.py --gemms), both pinned to
# CORES with one thread per core, alternated for ROUNDS rounds. Prints each
# run's lines and, per product and for the sum, the median time over the
# rounds on each side and PyTorch's over Tandem's.
#   bash bench/run_cpu_gemms.sh CORES ROUNDS CPU_GEMM_BENCH
# E.g. on core 3, three rounds:
#   bash bench/run_cpu_gemms.sh 3 3 bazel-out/k8-opt/bin/bench/cpu_gemm_bench
set -u
if [ $# -ne 3 ]; then echo "usage: run_cpu_gemms.sh CORES ROUNDS CPU_GEMM_BENCH" >&2; exit 2; fi
cores=$1 rounds=$2 bin=$3 bins=("$3")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/round_args.sh"
. "$here/torch_python.sh"
log=$(mktemp)
for r in $(seq 1 "$rounds"); do
  taskset -c "$cores" "$bin" --cpu_threads="$n" | grep -E '^(gemm|result)'
  taskset -c "$cores" "$python" "$here/torch_cpu_reference.py" --gemms --threads="$n"
done | tee "$log"
"$python" - "$log" <<'PY'
import re, statistics, sys
times = {}
for line in open(sys.argv[1]):
    m = re.match(r"(gemm|result) bench=(cpu_gemms|torch_cpu_gemms) "
                 r".*?(?:name=(\S+) .*us=([\d.]+)|gemm_ms=([\d.]+))", line)
    if not m:
        continue
    side = "torch" if m[2].startswith("torch") else "tandem"
    name, value = (m[3], float(m[4])) if m[1] == "gemm" else ("sum", 1e3 * float(m[5]))
    times.setdefault(name, {}).setdefault(side, []).append(value)
for name, sides in times.items():
    if "tandem" not in sides or "torch" not in sides:
        continue
    tandem, torch = statistics.median(sides["tandem"]), statistics.median(sides["torch"])
    print(f"summary name={name} tandem_us={tandem:.1f} torch_us={torch:.1f} "
          f"x_torch={torch / tandem:.2f}")
PY
rm -f "$log"
