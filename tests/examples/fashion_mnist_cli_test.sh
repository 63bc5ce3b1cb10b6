#!/bin/bash
# Runs the example binary as a user would: a short run must end with
# `test_accuracy=0.xxxx`; repeated flags take the last value; the progress
# output suits where it goes; --resume continues the metrics and the plot;
# --log_every adds step rows to them; --help, --version and usage errors
# (exit 2, no source location) read right.
# The MPI side is tests/examples/fashion_mnist_mpi_cli_test.sh.
set -u
bin=$1
dir=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*"; exit 1; }
small=(--max_train=2000 --max_test=500 --hidden=32)

out=$("$bin" --epochs=1 "${small[@]}" --workers=2 2>&1) || fail "short run exited non-zero: $out"
echo "$out"
last=$(echo "$out" | tail -n 1)
[[ $last =~ ^test_accuracy=0\.[0-9]{4}$ ]] || fail "last line is '$last'"

# Into a pipe: plain lines, one per epoch; no carriage returns or escapes.
[[ $out != *$'\r'* && $out != *$'\e'* ]] || fail "live-line characters in piped output"
[ "$(grep -c '^epoch ' <<<"$out")" = 1 ] || fail "not one line per epoch: $out"

# The last copy of a flag wins: tools/train.sh passes --mode=threads
# --workers=2, then the user's flags.
out=$("$bin" --mode=threads --workers=2 --epochs=1 --max_train=500 --max_test=100 --hidden=8 \
  --workers=3 --mode=mpi --mode=threads 2>&1) || fail "repeated flags: $out"
grep -q "3 worker(s), mode threads" <<<"$out" || fail "repeated flags: $out"
echo "ok: the last copy of a repeated flag wins"

# On a terminal the live line shows a loss from the first step on, never
# "nan". `script` gives the run a pseudo-terminal.
if script -qec true /dev/null >/dev/null 2>&1; then
  out=$(TERM=xterm script -qec "'$bin' --epochs=2 ${small[*]} --batch_size=50" /dev/null 2>&1) \
    || fail "run on a terminal failed: $out"
  [[ $out == *$'\r'* ]] || fail "no live line on a terminal: $out"
  [[ $out != *nan* ]] || fail "the live line shows nan: $(tr '\r' '\n' <<<"$out" | grep nan | head -3)"
  echo "ok: live progress line without nan"
else
  echo "SKIP (terminal part only): util-linux 'script' cannot open a pseudo-terminal here"
fi

# bf16 on a CPU that does not multiply bfloat16 (DNNL_MAX_CPU_ISA caps
# oneDNN below AVX-512 BF16) computes as fp32 (Note [bf16 where the device
# does not multiply bfloat16] in layers/precision.h): the setup line says
# so, and every epoch's losses and accuracies are fp32's.
epochs() { grep '^epoch ' | grep -o 'loss [0-9.]* .*test_acc [0-9.]*'; }
fp32=$("$bin" --epochs=2 "${small[@]}" --workers=2 2>&1) || fail "fp32 run: $fp32"
bf16=$(DNNL_MAX_CPU_ISA=AVX512_CORE "$bin" --epochs=2 "${small[@]}" --workers=2 \
  --precision=bf16 2>&1) || fail "capped bf16 run: $bf16"
grep -q "precision bf16 (computed in float32: the device does not multiply bfloat16)$" \
  <<<"$bf16" || fail "capped bf16 setup line: $bf16"
[ -n "$(epochs <<<"$fp32")" ] && [ "$(epochs <<<"$bf16")" = "$(epochs <<<"$fp32")" ] ||
  fail "capped bf16 is not fp32: $(epochs <<<"$bf16") against $(epochs <<<"$fp32")"
echo "ok: bf16 on a CPU without bfloat16 products trains as fp32"

# --metrics, --plot and --trace write their files; the plot has test loss
# too and a title that fits.
"$bin" --epochs=2 --max_train=500 --max_test=100 --workers=2 --quiet \
  --metrics="$dir/m.jsonl" --plot="$dir/p.svg" --trace="$dir/t.json" --trace_steps=2 \
  >/dev/null 2>&1 || fail "run with --metrics/--plot/--trace failed"
[ "$(grep -c '"split":"train"' "$dir/m.jsonl")" = 2 ] || fail "metrics: $(cat "$dir/m.jsonl")"
[ "$(grep -c '"split":"test","precision"' "$dir/m.jsonl")" = 2 ] || fail "metrics lack test lines"
grep '"split":"test"' "$dir/m.jsonl" | grep -q '"loss":[0-9]' || fail "metrics lack the test loss"
grep -q '^<svg' "$dir/p.svg" && grep -q '</svg>' "$dir/p.svg" || fail "plot is not an SVG"
[ "$(grep -c '<g><title>test</title>' "$dir/p.svg")" = 2 ] || fail "plot lacks test loss"
grep -q 'font-size="18" font-weight="bold"[^>]*>Fashion-MNIST, MLP 784-512-256-10, 2 workers<' \
  "$dir/p.svg" || fail "plot title: $(grep -o 'font-weight="bold"[^<]*' "$dir/p.svg")"
for row in '"forward fc1"' '"backward fc2"' '"all-reduce bucket 0"' '"communication"'; do
  grep -q "$row" "$dir/t.json" || fail "trace lacks $row"
done
echo "ok: --metrics, --plot and --trace files written"

# --export_safetensors: the final parameters, named and shaped as PyTorch's.
"$bin" --epochs=1 --max_train=300 --max_test=100 --hidden=8 --quiet \
  --export_safetensors="$dir/m.safetensors" >/dev/null 2>&1 || fail "run with --export_safetensors"
python3 - "$dir/m.safetensors" <<'PY' || fail "--export_safetensors wrote no valid file"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
shapes = {k: v["shape"] for k, v in header.items() if k != "__metadata__"}
assert shapes == {"fc1.weight": [8, 784], "fc1.bias": [8], "fc2.weight": [10, 8], "fc2.bias": [10]}, shapes
assert all(v["dtype"] == "F32" for k, v in header.items() if k != "__metadata__")
assert len(raw) == 8 + n + 4 * (8 * 784 + 8 + 80 + 10)
PY
echo "ok: --export_safetensors writes the parameters as PyTorch names them"

# --log_every=1: a step row per step in --metrics, beside the epoch rows.
"$bin" --epochs=1 --max_train=500 --max_test=100 --hidden=8 --batch_size=50 --workers=2 \
  --quiet --max_steps=4 --log_every=1 --metrics="$dir/s.jsonl" >/dev/null 2>&1 \
  || fail "run with --log_every failed"
[ "$(grep -c '"kind":"step"' "$dir/s.jsonl")" = 4 ] || fail "step rows: $(cat "$dir/s.jsonl")"
num='-?[0-9][-+.e0-9]*'
for n in 1 2 3 4; do
  grep -Eq "^\{\"epoch\":1,\"step\":$n,\"loss\":$num,\"lr\":$num,\"samples_per_second\":$num,\"grad_norm\":$num,\"kind\":\"step\"\}$" \
    "$dir/s.jsonl" || fail "no well-formed row for step $n: $(cat "$dir/s.jsonl")"
done
[ "$(grep -c '"split":"train"' "$dir/s.jsonl")" = 1 ] || fail "epoch row: $(cat "$dir/s.jsonl")"
echo "ok: --log_every=1 writes a step row per step"

# --resume keeps the metrics and plots the whole run: a run stopped in
# epoch 2 (checkpoint at step 18, 12 steps an epoch), then resumed to 3.
run=(--epochs=3 --max_train=600 --max_test=100 --hidden=8 --batch_size=50 --quiet
  --checkpoint_dir="$dir/ck" --metrics="$dir/r.jsonl" --plot="$dir/r.svg")
"$bin" "${run[@]}" --checkpoint_every=6 --max_steps=18 >/dev/null 2>&1 || fail "run to resume"
before=$(cat "$dir/r.jsonl")
[ "$(wc -l <"$dir/r.jsonl")" = 4 ] || fail "metrics before resuming: $before"
"$bin" "${run[@]}" --resume >/dev/null 2>&1 || fail "resumed run failed"
[[ $(cat "$dir/r.jsonl") == "$before"* ]] || fail "--resume rewrote the metrics: $(cat "$dir/r.jsonl")"
[ "$(wc -l <"$dir/r.jsonl")" = 8 ] || fail "metrics after resuming: $(cat "$dir/r.jsonl")"
markers=$(grep -o '<circle' "$dir/r.svg" | wc -l)
[ "$markers" = 14 ] || fail "the plot has $markers markers, not 3 epochs x 4 series + 2"
echo "ok: --resume appends to --metrics and plots epochs 1-3"

# --help: groups, true defaults, every choice; --version.
help=$("$bin" --help) || fail "--help exited non-zero"
for group in Data Model Optimisation Parallelism Output Reliability; do
  grep -qx "$group:" <<<"$help" || fail "--help has no $group group"
done
sed -n '/^Output:$/,/^Reliability:$/p' <<<"$help" | grep -q -- "--log_every INT=0 " \
  || fail "--help: --log_every is not in the Output group"
grep -q -- "--workers INT=1 " <<<"$help" || fail "--help: --workers default"
grep -q -- "--device TEXT:{cpu,cuda,cuda:N,auto}=cpu" <<<"$help" || fail "--help: --device"
grep -q "default 1" <<<"$help" && fail "--help contradicts itself"
[ "$("$bin" --version)" = "tandem 0.1.0" ] || fail "--version: $("$bin" --version)"
echo "ok: --help lists groups; --version"

# Usage errors: exit 2, a message naming the flag, no source location.
expect_usage_error() {  # text args...
  local text=$1; shift
  local err rc
  err=$("$bin" "$@" 2>&1)
  rc=$?
  [ "$rc" = 2 ] || fail "'$*' exited $rc, not 2: $err"
  grep -qF -- "$text" <<<"$err" || fail "'$*' printed '$err', not '$text'"
  grep -qE ' at [a-z_/]+\.(cc|h):[0-9]+\]' <<<"$err" && fail "'$*' printed a source location: $err"
  echo "ok: $* -> $(head -n 1 <<<"$err")"
}
expect_usage_error "--mode: bogus not in {threads,mpi}" --mode=bogus
expect_usage_error "--workers must be in [1, 1024], got 0" --workers=0
expect_usage_error "--epochs must be in [1, 1000000000], got 0" --epochs=0
expect_usage_error "--lr must be a non-negative number" --lr=-1 --epochs=1 --max_train=100 --max_test=100
expect_usage_error "--optimizer: adagrad not in {sgd,adamw}" --optimizer=adagrad
expect_usage_error "--activation: swish not in" --activation=swish
expect_usage_error "--device: gpu is not a device" --device=gpu
expect_usage_error "--mode=mpi needs the program started by mpirun" --mode=mpi --workers=2
# As under mpirun -np 2 (the mode is mpi there; the error comes before MPI starts).
OMPI_COMM_WORLD_SIZE=2 expect_usage_error "--workers cannot be used with --mode=mpi" --workers=2
expect_usage_error "not expected: --no_such_flag" --no_such_flag
expect_usage_error "--log_every writes its rows to the --metrics file" --log_every=5
expect_usage_error "--log_every must be in [0, 1000000000], got -1" --log_every=-1 --metrics="$dir/n.jsonl"
expect_usage_error "--hidden" --hidden=12,x
# Every numeric flag has a range; out of it, a one-line usage error (exit
# 2) before anything large is allocated or started.
expect_usage_error "--cpu_threads must be in [0, 1024], got 100000" --cpu_threads=100000
expect_usage_error "--bucket_mb must be a positive number up to 4096, got 1e+30" --bucket_mb=1e30
expect_usage_error "--collective_timeout must be a positive number of seconds up to 604800, got 1e+30" \
  --collective_timeout=1e30
expect_usage_error "--batch_size must be in [1, 16777216], got 9223372036854775807" \
  --batch_size=9223372036854775807
expect_usage_error "--hidden must be sizes from 1 to 65536" --hidden=100000000
expect_usage_error "--hidden must be sizes from 1 to 65536" --hidden=512,,256
expect_usage_error "--hidden must be sizes from 1 to 65536" --hidden=,
expect_usage_error "--max_train must be -1 (all) or at least 1, got -5" --max_train=-5
expect_usage_error "--weight_decay must be a non-negative number, got -1" --weight_decay=-1
expect_usage_error "--seed: -1 is not a whole number from 0 up" --seed=-1
expect_usage_error "--metrics=/nonexistent/dir/m.jsonl: directory /nonexistent/dir does not exist" \
  --metrics=/nonexistent/dir/m.jsonl
expect_usage_error "--data_dir=/nonexistent is not a directory" --data_dir=/nonexistent
# A checkpoint directory that cannot be written fails before training, also
# as root (nothing can be created under /proc).
expect_usage_error "--checkpoint_dir=/proc/tandem_ckpt: cannot create checkpoint directory" \
  --checkpoint_dir=/proc/tandem_ckpt --epochs=1 --max_train=100 --max_test=100
"$bin" --checkpoint_dir=/proc/tandem_ckpt --epochs=1 --max_train=100 --max_test=100 2>&1 |
  grep -q "^epoch " && fail "trained before finding the checkpoint directory unwritable"
# A FIFO where a data file should be: a usage error at once, not a blocked open.
mkdir -p "$dir/fifo_data"
touch "$dir"/fifo_data/{train-images-idx3,train-labels-idx1,t10k-images-idx3}-ubyte.gz
mkfifo "$dir/fifo_data/t10k-labels-idx1-ubyte.gz"
err=$(timeout 20 "$bin" --data_dir="$dir/fifo_data" --epochs=1 2>&1); rc=$?
[ $rc = 2 ] || fail "a FIFO data file: exit $rc, not 2: $err"
grep -qF "t10k-labels-idx1-ubyte.gz is not a regular file" <<<"$err" || fail "a FIFO data file: $err"
echo "ok: a FIFO data file is a usage error"
# A FIFO, or a link to nothing, in the checkpoint's place on --resume: a
# usage error at once, and nothing replaced.
mkdir -p "$dir/ck_fifo" "$dir/ck_link"
mkfifo "$dir/ck_fifo/checkpoint.tnd"
ln -s "$dir/ck_link/gone.tnd" "$dir/ck_link/checkpoint.tnd"
expect_usage_error "$dir/ck_fifo/checkpoint.tnd is not a regular file (a FIFO, socket or device): remove it" \
  --checkpoint_dir="$dir/ck_fifo" --resume --epochs=1 --max_train=100 --max_test=100
expect_usage_error "$dir/ck_link/checkpoint.tnd is a symbolic link to a file that does not exist" \
  --checkpoint_dir="$dir/ck_link" --resume --epochs=1 --max_train=100 --max_test=100
[ -p "$dir/ck_fifo/checkpoint.tnd" ] && [ -L "$dir/ck_link/checkpoint.tnd" ] \
  || fail "the FIFO or the link was replaced"

# Two runs on one checkpoint directory: the second stops at once (exit 2),
# naming the first, which is held still meanwhile (SIGSTOP), then stopped
# by SIGTERM as a preemption would (it saves and exits 75).
"$bin" --checkpoint_dir="$dir/shared" --epochs=100000 --max_train=500 --max_test=100 \
  --hidden=8 --quiet >"$dir/first.txt" 2>&1 &
first=$!
for _ in $(seq 300); do
  grep -q "^pid $first on host " "$dir/shared/.tandem.lock" 2>/dev/null && break
  sleep 0.1
done
kill -STOP $first || fail "the first run ended early: $(cat "$dir/first.txt")"
expect_usage_error "$dir/shared is in use by another run (pid $first on host " \
  --checkpoint_dir="$dir/shared" --epochs=1 --max_train=100 --max_test=100
kill -CONT $first && kill -TERM $first
wait $first; rc=$?
[ $rc = 75 ] || fail "the first run exited $rc, not 75, on SIGTERM: $(cat "$dir/first.txt")"
echo "ok: a second run on a checkpoint directory in use is refused"
# A fresh run (no --resume) into that folder, which now holds the first
# run's checkpoint, says it will replace it.
out=$("$bin" --checkpoint_dir="$dir/shared" --epochs=1 --max_train=100 --max_test=100 2>&1) \
  || fail "a fresh run over a checkpoint: $out"
grep -qF "note: $dir/shared/checkpoint.tnd holds an earlier run's checkpoint; this run starts afresh" \
  <<<"$out" || fail "no note of the checkpoint it replaces: $out"
out=$("$bin" --checkpoint_dir="$dir/ck_link" --epochs=1 --max_train=100 --max_test=100 2>&1) \
  || fail "a fresh run over a link to nothing: $out"
grep -qF "note: $dir/ck_link/checkpoint.tnd is a symbolic link to a file that does not exist" \
  <<<"$out" || fail "no note of the link it replaces: $out"
echo "ok: a fresh run says it replaces the folder's checkpoint, or a link to nothing"
# A checkpoint of another run, resumed by one worker: no "worker 0 failed:".
expect_usage_error "$dir/ck/checkpoint.tnd was saved by another run (--batch_size: 50 there, 60 here)" \
  "${run[@]}" --resume --batch_size=60
"$bin" "${run[@]}" --resume --batch_size=60 2>&1 | grep -q "failed:" && fail "prefixed resume error"
# Without a GPU, --device=cuda says so once.
if err=$("$bin" --device=cuda --epochs=1 --max_train=100 --max_test=100 2>&1); then
  echo "SKIP (--device=cuda part only): this machine has a usable GPU"
else
  [ "$(grep -o 'CUDA devices' <<<"$err" | wc -l)" -le 1 ] || fail "said twice: $err"
  expect_usage_error "--device=cuda cannot be used: " --device=cuda
fi

# A diverging run stops and names the step (a runtime error: exit 1);
# --skip_nonfinite skips instead.
err=$("$bin" --optimizer=sgd --lr=1e30 --epochs=1 --max_train=500 --max_test=100 --hidden=16 2>&1)
rc=$?
[ "$rc" = 1 ] || fail "diverging run exited $rc: $err"
grep -qF "the loss is not finite (NaN or Inf) at step" <<<"$err" || fail "diverging run: $err"
out=$("$bin" --optimizer=sgd --lr=1e30 --epochs=1 --max_train=500 --max_test=100 \
  --hidden=16 --skip_nonfinite 2>&1) || fail "--skip_nonfinite run failed: $out"
echo "$out" | grep -q "skipped [0-9]* non-finite step" || fail "no skipped steps reported: $out"
echo "ok: --skip_nonfinite -> $(echo "$out" | grep skipped)"
echo "PASS"
