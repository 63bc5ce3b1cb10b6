#!/usr/bin/env bash
# The CPU data-parallel step of two builds side by side on this machine:
# A and B are dp_cpu_bench binaries (e.g. one built from another checkout).
# Each round runs A B B A, in threads mode (2 workers) and under mpirun
# (2 ranks); the summary gives each configuration's median step time per
# build, B/A (below 1.00: B is faster) and whether every run's replicas
# stayed identical and its loss matched the other build's.
#   bench/run_dp_cpu_ab.sh A_BINARY B_BINARY [ROUNDS]      # default 2 rounds
set -u
a=$1 b=$2 rounds=${3:-2}
flags=(--overlap=both --steps=30 --repeats=5 --warmup=5)
log=$(mktemp)
for round in $(seq "$rounds"); do
  for build in A B B A; do
    bin=$a; [ $build = B ] && bin=$b
    "$bin" --mode=threads --workers=2 "${flags[@]}" 2>&1 | grep '^result' | sed "s/^/$build /" >> "$log"
    mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" --mode=mpi "${flags[@]}" 2>&1 |
      grep '^result' | sed "s/^/$build /" >> "$log"
  done
done
python3 - "$log" <<'PY'
import re, statistics, sys
runs, losses, replicas = {}, {}, set()
for line in open(sys.argv[1]):
    build = line[0]
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    key = (kv["mode"], int(kv["workers"]), kv["overlap"])
    runs.setdefault(key, {}).setdefault(build, []).append(float(kv["step_ms"]))
    losses.setdefault(key, set()).add(kv["loss_last"])
    replicas.add(kv["replicas"])
print("%-8s %7s %7s %10s %10s %6s %s" % ("mode", "workers", "overlap", "A step_ms", "B step_ms", "B/A", "runs"))
for key in sorted(runs):
    a, b = runs[key].get("A", []), runs[key].get("B", [])
    if a and b:
        print("%-8s %7d %7s %10.2f %10.2f %6.3f %d+%d" % (key + (statistics.median(a), statistics.median(b),
              statistics.median(b) / statistics.median(a), len(a), len(b))))
print("replicas:", ", ".join(sorted(replicas)),
      "| same final loss in both builds:", all(len(v) == 1 for v in losses.values()))
PY
rm -f "$log"
