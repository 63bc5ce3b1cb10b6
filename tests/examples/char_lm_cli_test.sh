#!/bin/bash
# Runs examples/char_lm as a user would, on a small word list this test
# writes: a short run prints its data and model, validation lines, the
# bigram baseline, sampled words and a last line `val_loss=x.xxxx`; two
# worker threads reach the same loss; a missing word list says how to
# install one; a bad flag is a usage error (exit 2).
# The MPI side is tests/examples/char_lm_mpi_cli_test.sh.
set -u
bin=$1
dir=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*"; exit 1; }

words="$dir/words.txt"
source "$PWD/tests/examples/tiny_words.sh"
write_tiny_words "$words"
echo "café" >>"$words"
tiny=(--words="$words" --steps=60 --eval_every=30 --batch_size=32 --context=3 --embed=4
  --hidden=16 --blocks=1 --samples=3 --lr=0.01 --warmup=5)

out=$("$bin" "${tiny[@]}" 2>&1) || fail "tiny run exited non-zero: $out"
echo "$out"
last=$(tail -n 1 <<<"$out")
[[ $last =~ ^val_loss=[0-9]+\.[0-9]{4}$ ]] || fail "last line is '$last'"
grep -q "vocabulary 20 (19 characters + end)" <<<"$out" || fail "vocabulary line"
grep -q "1 worker(s), mode threads, device cpu, precision fp32" <<<"$out" || fail "model line"
[ "$(grep -cE '^step +(30|60)/60  train_loss [0-9.]+  train_acc [0-9.]+  val_loss [0-9.]+' <<<"$out")" = 2 ] \
  || fail "not one line per evaluation"
grep -qE '^bigram baseline \(add-one smoothing\): val_loss [0-9]\.[0-9]{4}; model: val_loss' \
  <<<"$out" || fail "no bigram baseline line"
[[ $(grep '^samples:' <<<"$out" | wc -w) == 4 ]] || fail "not 3 sampled words"
one=${last#val_loss=}
# It learns: below the uniform guess over 20 tokens, ln 20 = 2.996.
awk -v a="$one" 'BEGIN { exit !(a < 2.99) }' || fail "val_loss $one: no better than uniform"

out=$("$bin" "${tiny[@]}" --workers=2 2>&1) || fail "2 workers exited non-zero: $out"
grep -q "2 worker(s), mode threads" <<<"$out" || fail "not 2 workers: $out"
two=$(tail -n 1 <<<"$out"); two=${two#val_loss=}
awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01) }' \
  || fail "1 worker: $one, 2 workers: $two"
echo "ok: 1 and 2 workers reach $one and $two"

out=$("$bin" "${tiny[@]}" --words="$dir/none.txt" 2>&1); rc=$?
[ $rc = 2 ] || fail "a missing word list exited $rc, not 2 (a usage error): $out"
grep -q "$dir/none.txt does not exist: install Debian's wamerican (tools/install_deps.sh does)" \
  <<<"$out" || fail "missing word list: $out"
echo "ok: missing word list -> $out"

"$bin" --steps=-1 >/dev/null 2>&1; [ $? = 2 ] || fail "--steps=-1 is not a usage error"
# The model's sizes have ranges: out of one, exit 2 naming the flag, before
# anything is allocated.
for bad in --context=0 --context=5000 --hidden=100000000 --embed=0 --blocks=-1 --samples=-1; do
  err=$("$bin" "$bad" 2>&1); rc=$?
  [ $rc = 2 ] || fail "$bad exited $rc, not 2: $err"
  grep -q -- "${bad%%=*}: Value .* not in range" <<<"$err" || fail "$bad: $err"
done
echo "ok: model sizes out of range are usage errors"
"$bin" --help | grep -q -- "--words" || fail "--help lacks --words"
echo PASS
