#!/bin/bash
# --deterministic from the command line, as a user compares runs: a few
# steps of examples/fashion_mnist and examples/char_lm export byte-identical
# safetensors on 1, 2 and 4 worker threads, with and without
# --shard_optimizer (threads), or on 2 MPI ranks, sharded or not, against
# one worker thread (mpi). Without --deterministic the files differ, so
# `cmp` can fail.
#   deterministic_cli_test.sh threads|mpi FASHION_MNIST CHAR_LM
set -u
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE
export TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}  # Open MPI's session directory
source "$PWD/tests/parallel/sanitizer_env.sh"  # Open MPI suppressions under TSan
mode=$1
fashion=$(realpath "$2")
char_lm=$(realpath "$3")
dir=$TMPDIR/deterministic
mkdir -p "$dir"
log=$dir/log
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }

words="$dir/words.txt"
source "$PWD/tests/examples/tiny_words.sh"
write_tiny_words "$words"
# Layers large enough for the GEMM library to split its work over threads,
# which it does differently for 1 worker of 2 threads and 2 of 1 (hence
# --deterministic's one thread per worker).
fashion_flags=(--max_train=2000 --max_test=100 --batch_size=512 --steps=6 --optimizer=adamw
  --quiet)
char_lm_flags=(--words="$words" --steps=6 --batch_size=32 --context=3 --embed=4 --hidden=16
  --blocks=2 --samples=0 --optimizer=adamw --quiet)

# run NAME EXAMPLE LAUNCH... : trains, exporting $dir/NAME.safetensors.
run() {
  local name=$1 example=$2; shift 2
  local bin=$fashion flags=("${fashion_flags[@]}")
  [ "$example" = char_lm ] && bin=$char_lm flags=("${char_lm_flags[@]}")
  "$@" "$bin" "${flags[@]}" --export_safetensors="$dir/$name.safetensors" "${extra[@]}" \
    >"$log" 2>&1 || fail "$name exited non-zero"
}
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)

for example in fashion_mnist char_lm; do
  extra=(--deterministic)
  run "$example.1" "$example" env
  if [ "$mode" = threads ]; then
    for workers in 2 4; do
      for shard in "" --shard_optimizer; do
        extra=(--deterministic --workers=$workers $shard)
        name=$example.$workers$shard
        run "$name" "$example" env
        cmp "$dir/$example.1.safetensors" "$dir/$name.safetensors" \
          || fail "$example: $workers workers ${shard:-unsharded} differ from 1 worker"
      done
    done
    extra=(--workers=4)
    run "$example.plain4" "$example" env
    extra=()
    run "$example.plain1" "$example" env
    cmp -s "$dir/$example.plain1.safetensors" "$dir/$example.plain4.safetensors" \
      && fail "$example: without --deterministic 1 and 4 workers agree bitwise: the check is void"
    echo "ok: $example --deterministic: 1, 2 and 4 workers, sharded or not, byte-identical"
  else
    for shard in "" --shard_optimizer; do
      extra=(--deterministic $shard)
      name=$example.mpi2$shard
      run "$name" "$example" "${mpi[@]}"
      cmp "$dir/$example.1.safetensors" "$dir/$name.safetensors" \
        || fail "$example: 2 MPI ranks ${shard:-unsharded} differ from 1 worker"
    done
    echo "ok: $example --deterministic: 2 MPI ranks, sharded or not, byte-identical to 1 worker"
  fi
done

if [ "$mode" = threads ]; then
  "$fashion" "${fashion_flags[@]}" --deterministic --workers=3 >"$log" 2>&1 \
    && fail "--workers=3 with --deterministic succeeded"
  grep -q "error: --deterministic needs a power-of-two number of workers" "$log" \
    || fail "no usage error naming --workers=3"
  "$char_lm" "${char_lm_flags[@]}" --deterministic --dropout=0.1 >"$log" 2>&1 \
    && fail "--dropout with --deterministic succeeded"
  grep -q "error: --dropout cannot be combined with --deterministic" "$log" \
    || fail "no usage error for --dropout"
  echo "ok: refuses 3 workers and --dropout"
fi
echo PASS
