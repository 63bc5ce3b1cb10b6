#!/usr/bin/env bash
# On the GPU machine: the GPU proof of the commit that tools/device/bundle.sh
# built, in two calls of at most 10 minutes each, each written to one report
# ($OUT/proof_report_PART.txt) that names the commit and the GPU:
#   correctness:
#     1. every GPU test (run_tests.sh), while compute-sanitizer memcheck and
#        racecheck run on the op, layer, allocator and reducer tests
#        (run_sanitizers.sh, SANITIZE_ONLY below) beside it;
#     2. the examples on one GPU, fp32 and bf16 (run_examples.sh's 1-GPU rows);
#   speed, alone on the machine:
#     3. the 1-GPU step tables, Tandem and PyTorch in every precision
#        (bench/run_gpu.sh precision);
#     4. the GPT example's step at batch 256 beside PyTorch eager, each
#        precision (bundle.sh --data carries its corpus);
#     5. the CPU GEMM paths on the host's CPU, one core (bench/run_cpu.sh
#        gemm-paths);
#   cpu, on the host's CPU, the GPU idle:
#     6. the GPT example beside PyTorch on 2 cores, default flags (2000
#        steps), fp32 on cores 0-1 and bf16 (PyTorch: CPU autocast) on cores
#        2-3 at the same time (bench/run_cpu.sh gpt).
# Each phase has a deadline so that the call ends in time; a phase cut off
# says so in the report. Full logs travel back in $OUT/proof_logs_PART.tgz.
#   tools/device/bundle.sh --data                 (development machine)
#   bash .device/run_proof.sh correctness|speed|cpu   (device tool, carry .device)
set -u
part=${1:-}
case "$part" in
  correctness|speed|cpu) ;;
  *) echo "usage: run_proof.sh correctness|speed|cpu" >&2; exit 2 ;;
esac
cd "$(dirname "$0")"
bash ./unpack.sh
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
out=${OUT:-/tmp}
report=$out/proof_report_$part.txt
# run_tests.sh keeps its logs in /tmp/tandem_logs; what the phases write to
# their $OUT stays in $sub. Both travel back packed: only a few files come
# back from $OUT.
sub=/tmp/tandem_proof; rm -rf "$sub"; mkdir -p "$sub"
trap 'tar czf "$out/proof_logs_$part.tgz" -C /tmp tandem_logs tandem_proof 2>/dev/null' EXIT
start=$SECONDS
say() { echo "$*" | tee -a "$report"; }
phase() {  # name deadline_s command...: runs it, its output into the report
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  say ""
  say "## $name (deadline ${limit} s)"
  OUT=$sub timeout "$limit" "$@" > "$sub/phase_$name.log" 2>&1
  local rc=$?
  cat "$sub/phase_$name.log" >> "$report"
  [ $rc -eq 124 ] && say "CUT OFF at its ${limit} s deadline"
  say "phase $name rc=$rc in $((SECONDS - t0)) s"
}

: > "$report"
say "# Tandem GPU proof: $part"
say "commit: $(cat COMMIT 2>/dev/null || echo 'unknown (bundle.sh writes COMMIT)')"
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "gpu: $(nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1 | tr '\n' ';')"
say "host: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
say "torch: $(python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"

if [ "$part" = correctness ]; then
  # 1. Tests and sanitizers side by side: the sanitizers are slow and
  # single-threaded per process, the machine has cores to spare, and neither
  # is timed.
  logs=$sub/sanitizers SANITIZE_ONLY=${SANITIZE_ONLY:-'tests_core__|tests_core_cuda__|tests_layers__|reducer'} \
    SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-240} \
    bash ./run_sanitizers.sh > "$sub/sanitizers.out" 2>&1 &
  sanitizers=$!
  phase tests 300 bash ./run_tests.sh
  wait $sanitizers
  say ""
  say "## sanitizers (memcheck, racecheck; rc 0 passed, 3 errors found, 124 cut off)"
  cat "$sub/sanitizers.out" >> "$report"
  say "sanitizer runs: $(grep -cE ' rc=0 ' "$sub/sanitizers.out") passed," \
      "$(grep -cE ' rc=3 ' "$sub/sanitizers.out") found errors," \
      "$(grep -cE ' rc=124 ' "$sub/sanitizers.out") cut off," \
      "$(grep -c 'no CUDA call' "$sub/sanitizers.out") made no CUDA call"

  # 2. Examples on one GPU.
  EXAMPLES_ONLY=one_gpu phase examples 150 bash ./run_examples.sh
elif [ "$part" = speed ]; then
  # 3. Step tables, alone on the card.
  phase step_tables 200 bash ./run_gpu.sh precision

  # 4. The GPT example's step at a GPU-sized batch beside PyTorch eager
  # (scaled_dot_product_attention), in each precision, alone on the card.
  gpt_steps() {
    local p
    for p in fp32 tf32 bf16; do
      echo "tandem gpt batch=256 precision=$p $(bin/examples__gpt --device=cuda --corpus=data/fortunes \
        --precision=$p --batch_size=256 --steps=300 --sample_length=0 2>&1 |
        grep -E '^(step_ms|val_loss)=' | tr '\n' ' ')"
      python3 torch_gpt_reference.py --device=cuda --precision=$p --batch_size=256 --steps=300 \
        --eval_every=0 --sample_length=0 --corpus=data/fortunes 2>&1 | grep -E '^result|Error'
    done
  }
  if [ -x bin/examples__gpt ] && [ -d data/fortunes ]; then
    export -f gpt_steps  # timeout runs commands, not functions
    phase gpt_steps 150 bash -c gpt_steps
  fi

  # 5. The CPU GEMM paths on this host's CPU (docs/benchmarks.md, "The CPU
  # GEMM paths"), one core, five rounds.
  phase cpu_gemm_paths 120 bash ./run_cpu.sh gemm-paths 1 5 bin/bench__cpu_gemm_bench
else
  say "cores: $(lscpu -e=CPU,CORE,SOCKET 2>&1 | tr -s ' ' | tr '\n' ';')"
  OUT=$sub timeout 540 bash ./run_cpu.sh gpt 2-3 bin/examples__gpt 2000 --corpus=data/fortunes \
    --precision=bf16 > "$sub/phase_gpt_bf16.log" 2>&1 &
  bf16=$!
  phase gpt_fp32 540 bash ./run_cpu.sh gpt 0-1 bin/examples__gpt 2000 --corpus=data/fortunes
  wait $bf16
  say ""
  say "## gpt_bf16 (beside gpt_fp32, deadline 540 s)"
  cat "$sub/phase_gpt_bf16.log" >> "$report"
fi
say ""
say "total ${SECONDS} s (since start: $((SECONDS - start)) s)"
