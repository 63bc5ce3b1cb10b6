#!/usr/bin/env bash
# The Fashion-MNIST example on one GPU with the next batch prepared on a
# background thread (the default) and on the training thread
# (--no_prefetch): each configuration's epoch time and samples/s, median of
# the epochs of ROUNDS runs in turn (the first epoch of each run left out: it
# holds the start-up), then a --trace of prefetching for bench/trace_overlap.py.
# Run where bundle.sh --data put the binaries and data (.device/), on the GPU
# machine; writes under $OUT.
#   bash .device/run_prefetch_bench.sh [ROUNDS]      # default 3
set -u
cd "$(dirname "$0")"
bash ./unpack.sh
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp} rounds=${1:-3}
bin=bin/examples__fashion_mnist
flags=(--data_dir=data --device=cuda --epochs=4 --quiet)
for round in $(seq "$rounds"); do
  for mode in prefetch no_prefetch; do
    extra=(); [ $mode = no_prefetch ] && extra=(--no_prefetch)
    "$bin" "${flags[@]}" "${extra[@]}" --metrics="$out/prefetch_${mode}_$round.jsonl" \
      > "$out/prefetch_${mode}_$round.log" 2>&1 || echo "$mode round $round failed"
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for mode in ("prefetch", "no_prefetch"):
    rates, accuracy = [], []
    for r in range(1, rounds + 1):
        rows = [json.loads(l) for l in open(f"{out}/prefetch_{mode}_{r}.jsonl")]
        train = [row for row in rows if row.get("split") == "train"]
        rates += [row["samples_per_second"] for row in train[1:]]
        accuracy.append([row for row in rows if row.get("split") == "test"][-1]["accuracy"])
    rate = statistics.median(rates)
    print(f"result mode={mode} samples_per_second={rate:.0f} epoch_seconds={60000 / rate:.3f}"
          f" epochs={len(rates)} test_accuracy={min(accuracy):.4f}..{max(accuracy):.4f}")
PY
"$bin" "${flags[@]}" --epochs=1 --trace="$out/trace_prefetch.json" --trace_steps=8 \
  > "$out/prefetch_trace.log" 2>&1 || echo "traced run failed"
python3 trace_overlap.py "$out/trace_prefetch.json"
