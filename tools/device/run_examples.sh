#!/usr/bin/env bash
# On the GPU machine: the Fashion-MNIST example on 1 GPU, on 2 GPUs as
# threads and as MPI ranks, and on the CPU for reference, with default flags;
# the character-level language model on 1 GPU, fp32 and bf16.
# Needs the data carried (bundle.sh --data). Logs go to $OUT.
set -u
cd "$(dirname "$0")"
bash ./unpack.sh
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp}
run() {  # name command...
  local name=$1; shift
  local start=$SECONDS
  "$@" > "$out/example_$name.log" 2>&1
  echo "$name rc=$? wall=$((SECONDS - start))s $(tail -n 1 "$out/example_$name.log")"
}
run gpu1 bin/examples__fashion_mnist --data_dir=data --device=cuda --quiet
run gpu1_bf16 bin/examples__fashion_mnist --data_dir=data --device=cuda --precision=bf16 --quiet
# The word list where Debian's wamerican puts it, as the docs' commands read it.
[ -e /usr/share/dict/american-english ] ||
  { mkdir -p /usr/share/dict && cp data/american-english /usr/share/dict/; }
run char_lm_gpu1 bin/examples__char_lm --device=cuda
run char_lm_gpu1_bf16 bin/examples__char_lm --device=cuda --precision=bf16
if [ -x bin/examples__gpt ]; then
  # The fortunes corpus as bundle.sh --data carries it.
  run gpt_gpu1 bin/examples__gpt --device=cuda --corpus=data/fortunes
  run gpt_gpu1_bf16 bin/examples__gpt --device=cuda --precision=bf16 --corpus=data/fortunes
else
  echo "gpt: no examples/gpt binary at this commit"
fi
# EXAMPLES_ONLY=one_gpu (run_proof.sh): the rows above only.
[ "${EXAMPLES_ONLY:-}" = one_gpu ] && exit 0
run gpu2_threads bin/examples__fashion_mnist --data_dir=data --device=cuda --workers=2 --quiet
run gpu2_mpi mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
  bin/examples__fashion_mnist --data_dir=data --device=cuda --mode=mpi --quiet
# Nsight Systems, where the machine has it (docs/gpus.md): the NVTX ranges.
if command -v nsys > /dev/null; then
  [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
    { mkdir -p /usr/share/datasets/fashion-mnist && cp data/*.gz /usr/share/datasets/fashion-mnist/; }
  run nsys nsys profile -t cuda,nvtx -o fashion_mnist bin/examples__fashion_mnist --device=cuda --workers=2 --max_steps=50
  run nsys_stats nsys stats --report nvtx_sum fashion_mnist.nsys-rep
fi
run gpu2_trace bin/examples__fashion_mnist --data_dir=data --device=cuda --workers=2 \
  --epochs=1 --trace="$out/trace_gpu2.json" --trace_steps=3 --quiet
