#!/bin/bash
# Runs examples/gpt as a user would, on a small corpus folder this test
# writes: a short run prints its data (skipping the .dat index, the .u8 link
# and the subfolder) and model, validation lines, the bigram baseline (which
# it beats), a sample, `step_ms=` and a last line `val_loss=x.xxxx`; two
# worker threads reach the loss of one within 0.02; stopped and resumed, it
# ends bitwise where an uninterrupted run does; a missing corpus says how to
# install one; bad flags are usage errors (exit 2) naming the flag.
# The MPI side is tests/examples/gpt_mpi_cli_test.sh.
set -u
bin=$1
dir=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*"; exit 1; }

source "$PWD/tests/examples/tiny_fortunes.sh"
write_tiny_fortunes "$dir/corpus"
tiny=(--corpus="$dir/corpus" --steps=60 --eval_every=30 --batch_size=16 --context=16
  --layers=1 --heads=2 --width=32 --lr=0.01 --warmup=5 --val_windows=64 --sample_length=60)

out=$("$bin" "${tiny[@]}" 2>&1) || fail "tiny run exited non-zero: $out"
echo "$out"
last=$(tail -n 1 <<<"$out")
[[ $last =~ ^val_loss=[0-9]+\.[0-9]{4}$ ]] || fail "last line is '$last'"
grep -qE '^step_ms=[0-9]+\.[0-9]{2}$' <<<"$out" || fail "no step_ms= line"
grep -q "$dir/corpus: 3 file(s), " <<<"$out" || fail "not 3 files read (.dat, .u8, sub skipped)"
grep -q "1 worker(s), mode threads, device cpu, precision fp32" <<<"$out" || fail "model line"
[ "$(grep -cE '^step +(30|60)/60  train_loss [0-9.]+  train_acc [0-9.]+  val_loss [0-9.]+' <<<"$out")" = 2 ] \
  || fail "not one line per evaluation"
bigram=$(grep -oE '^bigram baseline \(add-one smoothing\): val_loss [0-9]\.[0-9]{4}' <<<"$out")
[ -n "$bigram" ] || fail "no bigram baseline line"
bigram=${bigram##* }
grep -q '^sample (temperature 0.8):$' <<<"$out" || fail "no sample"
one=${last#val_loss=}
awk -v a="$one" -v b="$bigram" 'BEGIN { exit !(a < b) }' \
  || fail "val_loss $one does not beat the bigram's $bigram"
echo "ok: val_loss $one below the bigram's $bigram"

out=$("$bin" "${tiny[@]}" --workers=2 2>&1) || fail "2 workers exited non-zero: $out"
grep -q "2 worker(s), mode threads" <<<"$out" || fail "not 2 workers: $out"
two=$(tail -n 1 <<<"$out"); two=${two#val_loss=}
awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; exit !(d < 0.02 && d > -0.02) }' \
  || fail "1 worker: $one, 2 workers: $two"
echo "ok: 1 and 2 workers reach $one and $two"

flags=("${tiny[@]}" --steps=24 --eval_every=24 --sample_length=0 --workers=2)
"$bin" "${flags[@]}" --checkpoint_dir="$dir/stopped" --max_steps=10 >"$dir/log" 2>&1 \
  || fail "the run to step 10 failed: $(cat "$dir/log")"
"$bin" "${flags[@]}" --checkpoint_dir="$dir/stopped" --resume >"$dir/log" 2>&1 \
  || fail "the resumed run failed: $(cat "$dir/log")"
grep -q "resumed from $dir/stopped/checkpoint.tnd at step 10 " "$dir/log" \
  || fail "did not resume at step 10: $(cat "$dir/log")"
"$bin" "${flags[@]}" --checkpoint_dir="$dir/straight" >"$dir/log" 2>&1 \
  || fail "the uninterrupted run failed: $(cat "$dir/log")"
cmp "$dir/stopped/checkpoint.tnd" "$dir/straight/checkpoint.tnd" \
  || fail "stopped at 10 and resumed to 24 differs from a run straight to 24"
echo "ok: resumed at step 10, bitwise equal at step 24"

out=$("$bin" "${tiny[@]}" --corpus="$dir/none" 2>&1); rc=$?
[ $rc = 2 ] || fail "a missing corpus exited $rc, not 2 (a usage error): $out"
grep -q "$dir/none does not exist: install Debian's fortunes (tools/install_deps.sh does)" \
  <<<"$out" || fail "missing corpus: $out"
echo "ok: missing corpus -> $out"

err=$("$bin" "${tiny[@]}" --heads=3 2>&1); rc=$?
[ $rc = 2 ] || fail "--heads=3 with --width=32 exited $rc, not 2: $err"
grep -q -- "--width=32 is not a multiple of --heads=3" <<<"$err" || fail "--heads=3: $err"
err=$("$bin" "${tiny[@]}" --prompt=$'\x01' 2>&1); rc=$?
[ $rc = 2 ] || fail "a prompt byte outside the corpus exited $rc, not 2: $err"
grep -q -- "--prompt holds the byte 0x1" <<<"$err" || fail "--prompt: $err"
for bad in --context=0 --context=9000 --layers=-1 --heads=0 --width=0 --temperature=-1 \
    --val_windows=-1 --sample_length=-1; do
  err=$("$bin" "$bad" 2>&1); rc=$?
  [ $rc = 2 ] || fail "$bad exited $rc, not 2: $err"
  grep -q -- "${bad%%=*}: Value .* not in range" <<<"$err" || fail "$bad: $err"
done
echo "ok: bad flags are usage errors naming the flag"
"$bin" --help | grep -q -- "--corpus" || fail "--help lacks --corpus"
echo PASS
