#!/usr/bin/env bash
# A/B of the CPU training step between two commits, on the same cores:
# dp_cpu_bench (fp32 and bf16, 1 and 2 thread workers, overlap on) and the
# char_lm example, alternating base and new round by round, then the median
# of each figure over the rounds and new/base.
#
#   bash bench/run_cpu_ab.sh BASE_REV NEW_REV [ROUNDS]   # e.g. 68f97a3 HEAD 8
#
# Each revision is checked out in a worktree under $AB_DIR (default
# /tmp/tandem_ab) and built there with -c opt (a fresh output base: minutes
# each). Run nothing else meanwhile: the two cores are the instrument.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 BASE_REV NEW_REV [ROUNDS]" >&2; exit 2; }
base_rev=$1 new_rev=$2 rounds=${3:-8}
ab_dir=${AB_DIR:-/tmp/tandem_ab}
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

log="$ab_dir/ab.log"
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
