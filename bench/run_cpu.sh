#!/usr/bin/env bash
# The CPU benchmarks of docs/benchmarks.md, one command per table, on the
# binaries given (`bazel build -c opt //bench/...`, or .device/bin/ on the GPU
# machine; `ab` builds its own) and, where they compare, PyTorch
# (torch_cpu_reference.py) on the same cores. Run nothing else meanwhile:
# the cores are the instrument.
#
#   bench/run_cpu.sh ab BASE_REV NEW_REV [ROUNDS]              A/B of two commits
#   bench/run_cpu.sh vs-torch DP_CPU_BENCH [CORES...]          beside PyTorch
#   bench/run_cpu.sh vs-torch-rounds CORES ROUNDS LAYOUTS DP_CPU_BENCH...
#                                                              the same, round by round
#   bench/run_cpu.sh gemms CORES ROUNDS CPU_GEMM_BENCH         the GEMMs, beside PyTorch's
#   bench/run_cpu.sh gemm-paths CORES ROUNDS CPU_GEMM_BENCH    the GEMMs on each float32 path
#   bench/run_cpu.sh widened CORES ROUNDS DP_CPU_BENCH         bf16 computed in float32
#   bench/run_cpu.sh gpt CORES GPT [STEPS [FLAGS...]]          examples/gpt beside PyTorch
#   bench/run_cpu.sh variants CORES ROUNDS DP_CPU_BENCH [FLAGS...]
#                                                              plain, sharded, deterministic
#
# CORES is a taskset list of this machine's cores ("3", "0-7", "2,3"); LAYOUTS
# a comma-separated list of WORKERSxTHREADS ("1x1", "1x8,2x4").
set -u
here=$(cd "$(dirname "$0")" && pwd)
what=${1:-}
me="run_cpu.sh $what"

usage() {  # the commands of the header above
  { echo "usage:"; sed -n '/^#   bench/,/^# a comma/{s/^# \{0,1\}//;p}' "$here/run_cpu.sh"; } >&2
  exit 2
}

# Checks $cores and sets $n to the number of cores in it; checks $rounds, a
# positive whole number, and that every path in the array $bins is an
# executable file. Exits with status 2, saying what is wrong, at the first
# that is not.
round_args() {
  local parts part bin
  n=0
  IFS=, read -r -a parts <<< "$cores"
  for part in "${parts[@]}"; do
    if [[ $part =~ ^[0-9]+$ ]]; then n=$((n + 1))
    elif [[ $part =~ ^([0-9]+)-([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ]; then
      n=$((n + BASH_REMATCH[2] - BASH_REMATCH[1] + 1))
    else n=0; break; fi
  done
  if [ "$n" -eq 0 ] || [ "$(taskset -c "$cores" nproc 2>/dev/null)" != "$n" ]; then
    echo "$me: CORES '$cores' is not a list of this machine's cores" \
      "(0-$(($(nproc --all) - 1)); e.g. 3 or 0-7)" >&2
    exit 2
  fi
  if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
    echo "$me: ROUNDS '$rounds' is not a positive whole number" >&2; exit 2
  fi
  for bin in "${bins[@]}"; do
    if [ ! -x "$bin" ]; then echo "$me: $bin is not an executable file" >&2; exit 2; fi
  done
}

# Sets $python to the first python3 on PATH that has PyTorch (a pyenv one may
# shadow Debian's /usr/bin/python3 with python3-torch), or exits saying how to
# get one.
torch_python() {
  local candidate
  python=
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c 'import torch' 2>/dev/null; then python=$candidate; break; fi
  done
  if [ -z "$python" ]; then
    echo "$me: no python3 with PyTorch (on Debian: apt-get install python3-torch)" >&2
    exit 1
  fi
}

# A/B of the CPU training step between two commits, on the same cores:
# dp_cpu_bench (fp32 and bf16, 1 and 2 thread workers, overlap on) and the
# char_lm example, alternating base and new round by round, then the median
# of each figure over the rounds and new/base. Each revision is checked out
# in a worktree under $AB_DIR (default /tmp/tandem_ab) and built there with
# -c opt (a fresh output base: minutes each).
ab() {
  set -euo pipefail
  [[ $# -ge 2 ]] || usage
  local base_rev=$1 new_rev=$2 rounds=${3:-8}
  local ab_dir=${AB_DIR:-/tmp/tandem_ab} repo
  repo=$(git rev-parse --show-toplevel)
  mkdir -p "$ab_dir"
  build() {  # build REV LABEL: binaries in $ab_dir/LABEL
    local rev=$1 label=$2 tree="$ab_dir/tree_$2"
    rm -rf "$tree" && git -C "$repo" worktree prune
    git -C "$repo" worktree add -f --detach "$tree" "$rev" >/dev/null
    (cd "$tree" && bazel build -c opt //bench:dp_cpu_bench //examples:char_lm >&2)
    rm -rf "${ab_dir:?}/$label" && mkdir -p "$ab_dir/$label"
    cp "$tree/bazel-bin/bench/dp_cpu_bench" "$tree/bazel-bin/examples/char_lm" "$ab_dir/$label/"
    (cd "$tree" && bazel shutdown >&2)
    echo "$label: $(git -C "$repo" rev-parse --short "$rev")"
  }
  build "$base_rev" base
  build "$new_rev" new

  local log="$ab_dir/ab.log" round v p
  : >"$log"
  for round in $(seq 1 "$rounds"); do
    for v in base new; do
      for p in fp32 bf16; do
        "$ab_dir/$v/dp_cpu_bench" --workers=1,2 --overlap=on --precision="$p" --steps=40 \
            --repeats=3 2>&1 | grep '^result' | sed "s/^/$v round=$round /" >>"$log"
      done
      (cd "$repo" && "$ab_dir/$v/char_lm" --steps=300 --eval_every=300 --samples=0 2>&1) |
          grep '^step' | sed "s/^/$v round=$round char_lm /" >>"$log"
    done
  done

  python3 - "$log" <<'EOF'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    variant = line.split()[0]
    if " char_lm " in line:
        key, value = "char_lm samples/s", float(re.search(r"samples/s (\d+)", line).group(1))
    else:
        workers = re.search(r"workers=(\d+)", line).group(1)
        precision = re.search(r"precision=(\w+)", line).group(1)
        key = f"dp_cpu {precision} {workers} worker(s) step ms"
        value = float(re.search(r" step_ms=([\d.]+)", line).group(1))
    runs.setdefault((variant, key), []).append(value)
for key in sorted({k for _, k in runs}):
    base, new = runs[("base", key)], runs[("new", key)]
    b, n = statistics.median(base), statistics.median(new)
    print(f"{key:32s} base {b:9.2f} [{min(base):.2f}, {max(base):.2f}]  "
          f"new {n:9.2f} [{min(new):.2f}, {max(new):.2f}]  new/base {n / b:.3f}  rounds {len(base)}")
EOF
}

# Tandem's CPU training step (dp_cpu_bench: MLP 784-1024-1024-10, batch 256,
# softmax cross-entropy, SGD) beside PyTorch's, on the same cores: for each
# core count N, both pinned with taskset to cores 0..N-1. Tandem runs as 1
# worker x 1 thread (on one core), 1 worker x N threads and N workers x 1
# thread (threads mode); PyTorch with 1 thread (on one core) and N threads;
# from 4 cores on, Tandem also as 2 workers x N/2 threads. Prints
# dp_cpu_bench's and PyTorch's `result` lines (step_ms: the median run;
# step_ms_min: the fastest).
vs_torch() {
  [ $# -ge 1 ] || usage
  local bin=$1; shift
  local counts=("$@"); [ ${#counts[@]} -eq 0 ] && counts=(2)
  torch_python
  local flags=(--mode=threads --overlap=on --steps=20 --repeats=5 --warmup=5) n pin
  "$bin" --workers=1 --cpu_threads=1 --steps=1 --repeats=1 --warmup=1 2>&1 | grep '^machine' | head -1
  for n in "${counts[@]}"; do
    pin=(taskset -c "0-$((n - 1))")
    echo "== $n core(s)"
    taskset -c 0 "$python" "$here/torch_cpu_reference.py" --threads=1 | grep '^result'
    "${pin[@]}" "$python" "$here/torch_cpu_reference.py" --threads="$n" | grep '^result'
    taskset -c 0 "$bin" "${flags[@]}" --workers=1 --cpu_threads=1 | grep '^result'
    "${pin[@]}" "$bin" "${flags[@]}" --workers=1 --cpu_threads="$n" | grep '^result'
    "${pin[@]}" "$bin" "${flags[@]}" --workers="$n" --cpu_threads=1 | grep '^result'
    if [ "$n" -ge 4 ]; then
      "${pin[@]}" "$bin" "${flags[@]}" --workers=2 --cpu_threads=$((n / 2)) | grep '^result'
    fi
  done
}

# The same comparison alternated round after round: on a host whose speed
# drifts between runs (a shared machine), runs minutes apart compare poorly,
# so each round runs every binary given in every layout given, then PyTorch
# with one thread per core, all pinned to CORES. Prints a line per run and,
# per binary and layout, the median step over the rounds, and PyTorch's step
# over its step in each round (the round's own pair): the median, the range
# and how many rounds reached 1.0.
vs_torch_rounds() {
  [ $# -ge 4 ] || usage
  cores=$1 rounds=$2
  local layouts layout bin r log
  IFS=, read -r -a layouts <<< "$3"; shift 3; bins=("$@")
  round_args
  for layout in "${layouts[@]}"; do
    if ! [[ $layout =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]]; then
      echo "$me: layout '$layout' is not WORKERSxTHREADS (e.g. 2x4)" >&2; exit 2
    fi
  done
  torch_python
  local flags=(--mode=threads --overlap=on --steps=20 --repeats=5 --warmup=5 --comm_iters=1)
  step_ms() { grep '^result' | grep -o 'step_ms=[0-9.]*' | head -1 | cut -d= -f2; }
  log=$(mktemp)
  for r in $(seq 1 "$rounds"); do
    for bin in "$@"; do
      for layout in "${layouts[@]}"; do
        echo "round=$r cores=$cores bin=$bin layout=$layout step_ms=$(taskset -c "$cores" "$bin" \
          "${flags[@]}" --workers="${layout%x*}" --cpu_threads="${layout#*x}" | step_ms)"
      done
    done
    echo "round=$r cores=$cores bin=torch layout=${n}_threads step_ms=$(taskset -c "$cores" \
      "$python" "$here/torch_cpu_reference.py" --threads="$n" | step_ms)"
  done | tee "$log"
  "$python" - "$log" <<'PY'
import re, statistics, sys
runs, keys = {}, []
for line in open(sys.argv[1]):
    m = re.match(r"round=(\d+) cores=\S+ bin=(\S+) layout=(\S+) step_ms=([\d.]+)$", line)
    if not m:
        continue
    key = "torch" if m[2] == "torch" else (m[2], m[3])
    if key not in keys:
        keys.append(key)
    runs.setdefault(int(m[1]), {})[key] = float(m[4])
for key in keys:
    if key == "torch":
        continue
    pairs = [r["torch"] / r[key] for r in runs.values() if key in r and "torch" in r]
    steps = [r[key] for r in runs.values() if key in r]
    if not pairs:
        print(f"summary bin={key[0]} layout={key[1]}: no round with both steps")
        continue
    print(f"summary bin={key[0]} layout={key[1]} rounds={len(pairs)} "
          f"step_ms_median={statistics.median(steps):.2f} "
          f"x_torch_median={statistics.median(pairs):.2f} "
          f"x_torch_range={min(pairs):.2f}-{max(pairs):.2f} "
          f"rounds_at_least_1={sum(x >= 1 for x in pairs)}")
torch = [r["torch"] for r in runs.values() if "torch" in r]
if torch:
    print(f"summary bin=torch step_ms_median={statistics.median(torch):.2f}")
PY
  rm -f "$log"
}

# The GEMMs of the CPU training step alone, Tandem's (cpu_gemm_bench) beside
# PyTorch's (torch_cpu_reference.py --gemms), both pinned to CORES with one
# thread per core, alternated for ROUNDS rounds. Prints each run's lines and,
# per product and for the sum, the median time over the rounds on each side
# and PyTorch's over Tandem's.
gemms() {
  [ $# -eq 3 ] || usage
  cores=$1 rounds=$2 bins=("$3")
  local bin=$3 r log
  round_args
  torch_python
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
}

# The CPU training step's GEMMs (cpu_gemm_bench) on each float32 GEMM path
# the CPU backend can take, alternated for ROUNDS rounds on CORES with one
# thread per core: oneDNN (AVX-512 only: it refuses float32 below that, and
# its rounds print no result) and Eigen. Prints, per path, the median of the
# step's GEMM time over the rounds and its ratio to the fastest path.
gemm_paths() {
  [ $# -eq 3 ] || usage
  cores=$1 rounds=$2 bins=("$3")
  local bin=$3 r p name env_vars line log
  round_args
  # name=environment (the path's TANDEM_CPU_GEMM).
  local paths=(
    "onednn=TANDEM_CPU_GEMM=onednn"
    "eigen=TANDEM_CPU_GEMM=eigen"
  )
  log=$(mktemp)
  echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), cores $cores, $n thread(s)"
  for r in $(seq 1 "$rounds"); do
    for p in "${paths[@]}"; do
      name=${p%%=*}; env_vars=${p#*=}
      line=$(env $env_vars taskset -c "$cores" "$bin" --cpu_threads="$n" 2>&1 |
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
}

# The bf16 CPU step where the CPU does not multiply bfloat16 (CPUs without
# AVX-512 BF16; DNNL_MAX_CPU_ISA=AVX512_CORE caps any CPU so), which then
# computes in float32 (Note [bf16 where the device does not multiply
# bfloat16] in layers/precision.h), beside the fp32 step, alternated round
# after round on CORES: one worker per core, one thread each, 64 samples per
# worker, the Fashion-MNIST example's MLP (784-512-256-10). Prints a line per
# run and the medians over the rounds, with each round's bf16 step over its
# fp32 step (the median and the range).
widened() {
  [ $# -eq 3 ] || usage
  cores=$1 rounds=$2 bins=("$3")
  local bin=$3 overlap=on r fp32 bf16
  round_args
  [ "$n" -eq 1 ] && overlap=off
  local flags=(--mode=threads --workers="$n" --cpu_threads=1 --hidden=512,256
               --batch_size=$((64 * n)) --overlap="$overlap" --steps=200 --repeats=5)
  # The step_ms of one run in PRECISION (fp32, or bf16 on a CPU whose
  # bfloat16 GEMMs widen to float32, as its machine line must say); exits
  # when the run fails or does not.
  step_ms() {
    local precision=$1 out isa=()
    [ "$precision" = bf16 ] && isa=(DNNL_MAX_CPU_ISA=AVX512_CORE)
    out=$(env "${isa[@]}" taskset -c "$cores" "$bin" "${flags[@]}" --precision="$precision") ||
      { echo "$me: the $precision run failed" >&2; exit 1; }
    if [ "$precision" = bf16 ] &&
       ! grep -q '^machine .*bfloat16 GEMM: float32 GEMM on widened operands' <<< "$out"; then
      echo "$me: the bf16 run's machine line does not say its CPU widens bfloat16" >&2
      exit 1
    fi
    grep '^result' <<< "$out" | grep -o 'step_ms=[0-9.]*' | head -1 | cut -d= -f2
  }
  log=$(mktemp)  # global: the trap runs after this function returns
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
}

# examples/gpt beside bench/torch_gpt_reference.py (the same model,
# initialisation, optimizer, schedule and data), one after the other on
# CORES: Tandem with one intra-op thread per core, PyTorch with 1, 2, 4, ...
# threads up to one per core (its best count is not always the most: a BLAS
# whose threads fight PyTorch's own can run slower on more). STEPS steps
# (default 2000, the example's), FLAGS (model and data flags both take:
# --corpus, --context, --layers, --heads, --width, --batch_size, --lr,
# --warmup, --eval_every, --val_windows, --sample_length) to all runs.
# Prints each run's evaluation lines and a summary line with Tandem's
# step_ms and val_loss and those of PyTorch's fastest run, with its thread
# count.
gpt() {
  [ $# -ge 2 ] || usage
  cores=$1 rounds=1
  bins=("$2")
  local steps=${3:-2000}
  [ $# -ge 3 ] && shift 3 || shift 2
  round_args
  torch_python
  local flags=(--steps="$steps" --eval_every=$(( steps < 500 ? steps : 500 )) "$@")
  local tandem torch
  tandem=$(taskset -c "$cores" "${bins[0]}" --workers=1 --cpu_threads="$n" "${flags[@]}" 2>&1) \
    || { echo "$me: ${bins[0]} failed:"; echo "$tandem"; exit 1; } >&2
  grep -E '^(data|step |bigram)' <<< "$tandem" | sed 's/^/tandem /'
  value() { grep "^$1=" | tail -1 | cut -d= -f2; }
  local threads=1 best="" best_ms="" best_threads="" ms all=""
  while :; do
    torch=$(taskset -c "$cores" "$python" "$here/torch_gpt_reference.py" --threads="$threads" \
      "${flags[@]}" 2>&1) || { echo "$me: torch_gpt_reference.py failed:"; echo "$torch"; exit 1; } >&2
    grep -E '^(data|model|step |bigram)' <<< "$torch" | sed "s/^/torch($threads) /"
    ms=$(value step_ms <<< "$torch")
    all="$all${all:+,}$threads:$ms"
    if [ -z "$best_ms" ] || awk -v a="$ms" -v b="$best_ms" 'BEGIN { exit !(a < b) }'; then
      best=$torch best_ms=$ms best_threads=$threads
    fi
    [ "$threads" -ge "$n" ] && break
    threads=$(( threads * 2 > n ? n : threads * 2 ))
  done
  echo "summary cores=$cores steps=$steps tandem_step_ms=$(value step_ms <<< "$tandem")" \
    "tandem_val_loss=$(value val_loss <<< "$tandem") torch_step_ms=$best_ms" \
    "torch_val_loss=$(value val_loss <<< "$best") torch_threads=$best_threads" \
    "torch_step_ms_by_threads=$all"
}

# The step with and without --shard_optimizer and --deterministic
# (dp_cpu_bench --variants): one worker per core of CORES, one thread each,
# 128 samples per worker, FLAGS to every run (--precision=bf16, say). Each
# round runs all four variants in one process, one after the other; the
# summary gives each variant's median step over the rounds and its ratio to
# the plain step's.
variants() {
  [ $# -ge 3 ] || usage
  cores=$1 rounds=$2 bins=("$3")
  local bin=$3 r
  shift 3
  round_args
  log=$(mktemp)  # global: the trap runs after this function returns
  trap 'rm -f "$log"' EXIT
  for r in $(seq 1 "$rounds"); do
    taskset -c "$cores" "$bin" --mode=threads --workers="$n" --cpu_threads=1 \
      --batch_size=$((128 * n)) --overlap=on --steps=20 --repeats=5 \
      --variants=plain,sharded,deterministic,deterministic+sharded "$@" |
      grep '^result' | sed "s/^result/round=$r/" || { echo "$me: round $r failed" >&2; exit 1; }
  done | tee "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
  median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
  local v plain m
  plain=$(grep ' variant=plain ' "$log" | grep -o 'step_ms=[0-9.]*' | cut -d= -f2 | median)
  for v in plain sharded deterministic deterministic+sharded; do
    m=$(grep " variant=$v " "$log" | grep -o 'step_ms=[0-9.]*' | cut -d= -f2 | median)
    echo "summary cores=$cores workers=$n rounds=$rounds variant=$v step_ms_median=$m" \
      "vs_plain=$(awk -v a="$m" -v b="$plain" 'BEGIN { printf "%.3f", a / b }')"
  done
}

[ $# -ge 1 ] && shift
case "$what" in
  ab) ab "$@" ;;
  vs-torch) vs_torch "$@" ;;
  vs-torch-rounds) vs_torch_rounds "$@" ;;
  gemms) gemms "$@" ;;
  gemm-paths) gemm_paths "$@" ;;
  widened) widened "$@" ;;
  gpt) gpt "$@" ;;
  variants) variants "$@" ;;
  *) usage ;;
esac
