#!/bin/bash
# MPI jobs over two hosts that this test makes: two network namespaces
# joined by a veth pair (10.213.0.1 and 10.213.0.2, reachable from nowhere
# else), each with a host name of its own (a UTS namespace). mpirun runs on
# host A and starts host B's daemon through Open MPI's rsh launcher, with
# two_hosts_agent.sh in place of ssh; between the hosts everything goes
# over TCP on the veth pair. Two ranks on each host. It checks:
#   1. each host's ranks have local ranks 0 and 1 (their GPUs under
#      --device=cuda), the communicator knows it spans nodes, and an
#      all-reduce crosses the hosts (mpi_node_place);
#   2. the Fashion-MNIST example trains as 4 ranks on one host (host A
#      alone) do, step for step, and rank 0 alone writes the checkpoint: the
#      other ranks see the checkpoint directory read-only
#      (two_hosts_rank.sh);
#   3. a rank on host B killed with SIGKILL ends the whole job, non-zero,
#      within 60 s (Open MPI notices the death; failing that, the trainer's
#      collective timeout would), leaving no process;
#   4. the link between the hosts cut mid-run ends the whole job on both
#      hosts within 30 s, with the out-of-band keepalive docs/mpi.md shows.
# Every mpirun is bounded by `timeout`; on any exit the namespaces' processes
# are killed and the namespaces deleted.
#
# Making namespaces needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN
# (CI and the development machines run tests as root). Without them the
# test cannot run at all: it prints "SKIPPED: <reason>" and exits 0, since an
# sh_test has no skipped state. Any other failure to set up fails the test.
#
#   two_hosts_test.sh MPI_NODE_PLACE FASHION_MNIST
set -u
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE
export TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}  # Open MPI's session directories
source "$PWD/tests/parallel/sanitizer_env.sh"  # Open MPI suppressions under TSan

capability() {  # BIT: whether this process has capability BIT in effect
  local effective
  effective=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
  (((16#$effective >> $1) & 1))
}
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: making network namespaces needs root (running as uid $(id -u))"
  exit 0
fi
if ! capability 12 || ! capability 21; then
  echo "SKIPPED: making network and UTS namespaces needs CAP_NET_ADMIN and CAP_SYS_ADMIN"
  exit 0
fi
for tool in ip unshare mount hostname mpirun; do
  command -v "$tool" >/dev/null \
    || { echo "FAIL: no '$tool' command (ip: Debian package iproute2)"; exit 1; }
done

place=$(realpath "$1")
train=$(realpath "$2")
agent=$(realpath tests/parallel/two_hosts_agent.sh)
rank=$(realpath tests/parallel/two_hosts_rank.sh)

# Unique names: concurrent runs (and Bazel's sandboxes, which may give every
# test the same PID) must not meet.
tag="tandem-2h-$$-$RANDOM"
ns_a="$tag-a" ns_b="$tag-b"
addr_a=10.213.0.1 addr_b=10.213.0.2 subnet=10.213.0.0/24
work="$TMPDIR/two_hosts" log="$TMPDIR/two_hosts/job.log"
mkdir -p "$work"
job=""

namespace_pids() { ip netns pids "$ns_a" 2>/dev/null; ip netns pids "$ns_b" 2>/dev/null; }
teardown() {
  [[ -n $job ]] && kill -9 "$job" 2>/dev/null
  for _ in 1 2 3; do
    namespace_pids | xargs -r kill -9 2>/dev/null
    sleep 0.2
  done
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
}
trap teardown EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*"; [[ -f $log ]] && cat "$log"; exit 1; }

# --- the two hosts ---
# Bazel's sandbox mounts /run read-only: the target's tags keep the test
# out of it.
for ns in "$ns_a" "$ns_b"; do
  ip netns add "$ns" || fail "cannot make network namespace $ns (is /run/netns writable?)"
done
wire() {  # the veth pair, made inside the namespaces: it never appears on the machine
  ip link add veth-a netns "$ns_a" type veth peer name veth-b netns "$ns_b" &&
    ip -n "$ns_a" addr add "$addr_a/24" dev veth-a &&
    ip -n "$ns_b" addr add "$addr_b/24" dev veth-b &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
    ip -n "$ns_a" link set veth-a up && ip -n "$ns_b" link set veth-b up
}
wire || fail "cannot join $ns_a and $ns_b with a veth pair"
export TWO_HOSTS_B_ADDR=$addr_b TWO_HOSTS_B_NETNS=$ns_b TWO_HOSTS_B_NAME=tandem-host-b
printf '%s slots=2\n%s slots=2\n' "$addr_a" "$addr_b" >"$work/hostfile"

# COMMAND... in host A's namespaces: "${host_a[@]}" COMMAND...
host_a=(ip netns exec "$ns_a" unshare --uts sh -c 'hostname tandem-host-a && exec "$@"' sh)
# The remote ranks get only what -x passes on (two_hosts_agent.sh).
forward=()
for var in TSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS; do
  [[ -n ${!var:-} ]] && forward+=(-x "$var")
done
two_hosts=(mpirun --allow-run-as-root --hostfile "$work/hostfile" -np 4 "${forward[@]}"
  --mca plm_rsh_agent "$agent" --mca btl tcp,self,vader
  --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet")

run() {  # LIMIT_S COMMAND...: bounded, on host A, output to $log
  local limit=$1 start=$SECONDS rc
  shift
  timeout -k 5 "$limit" "${host_a[@]}" "$@" >"$log" 2>&1
  rc=$?
  echo "  (exit status $rc after $((SECONDS - start)) s)"
  # 124: timeout's TERM; 137: its KILL 5 s later (or a rank's SIGKILL).
  [[ $rc -eq 124 || ($rc -eq 137 && $((SECONDS - start)) -ge $limit) ]] \
    && fail "the job did not end within $limit s"
  return $rc
}
# The processes still running in the test's namespaces, and of the ranks
# recorded in $work/state (two_hosts_rank.sh). A zombie has ended: it waits
# only for its parent to collect its status.
running() {
  local pid
  for pid in $(namespace_pids; cat "$work"/state/rank* 2>/dev/null | cut -d' ' -f1); do
    [[ $(ps -o stat= -p "$pid") == [^Z]* ]] && echo "$pid"
  done | sort -u
}
no_process_left() {  # WHAT: every process of job WHAT has ended, within 5 s
  local left=""
  for _ in $(seq 50); do
    left=$(running)
    [[ -z $left ]] && return 0
    sleep 0.1
  done
  fail "processes left after $1: $(ps -o pid=,stat=,args= -p "${left//$'\n'/,}")"
}
ranks_ran_where_expected() {  # each rank's STATE file names its host
  local r want
  for r in 0 1 2 3; do
    want=tandem-host-a
    ((r >= 2)) && want=tandem-host-b
    [[ $(cut -d' ' -f2 "$work/state/rank$r" 2>/dev/null) == "$want" ]] \
      || fail "rank $r did not run on $want: $(cat "$work/state/rank$r" 2>&1)"
  done
}

echo "=== 1. where the ranks sit: mpirun -np 4, two slots on each host"
run 60 "${two_hosts[@]}" "$place" || fail "mpi_node_place over two hosts exited non-zero"
cat "$log"
for r in 0 1 2 3; do
  host=tandem-host-a
  ((r >= 2)) && host=tandem-host-b
  line="place: rank $r of 4, local rank $((r % 2)) of 2, host $host, single_node 0, rank sum 6"
  [[ $(grep -cxF "$line" "$log") == 1 ]] || fail "no line '$line'"
done
no_process_left mpi_node_place
echo "ok: each host's ranks have local ranks 0 and 1; the all-reduce crossed the hosts"

echo "=== 2. training: two hosts against one, and the checkpoint"
flags=(--epochs=1 --max_train=1200 --max_test=200 --hidden=32 --batch_size=100
  --bucket_mb=0.001 --log_every=1 --collective_timeout=30)  # 2 buckets
mkdir -p "$work/state" "$work/two" "$work/one"
run 120 "${two_hosts[@]}" "$rank" "$work/state" "$work/two" "$train" "${flags[@]}" \
  --metrics="$work/two.jsonl" --checkpoint_dir="$work/two" \
  || fail "training over two hosts exited non-zero"
cat "$log"
grep -q "4 worker(s), mode mpi" "$log" || fail "not one job of 4 workers in mode mpi"
ranks_ran_where_expected
no_process_left "the training over two hosts"
rm -f "$work"/state/rank*
# Ranks 1-3 saw the directory read-only: had any of them (host B's first
# rank, say) written there, the job would have failed.
# Beside the checkpoint, only rank 0's lock on the directory (one run per
# checkpoint directory, io/directory_lock.h).
listing=$(ls -A "$work/two" | LC_ALL=C sort | tr '\n' ' ')
[[ $listing == ".tandem.lock checkpoint.tnd " ]] \
  || fail "the checkpoint directory holds '$listing', not checkpoint.tnd and .tandem.lock"
echo "ok: rank 0 alone wrote the checkpoint, once"

run 120 mpirun --allow-run-as-root --oversubscribe -np 4 "$train" "${flags[@]}" \
  --metrics="$work/one.jsonl" --checkpoint_dir="$work/one" \
  || fail "training on one host exited non-zero"
# The tolerances of the example's worker-count tests: float32 sums whose order
# could change with Open MPI's all-reduce algorithm. Open MPI picks it by
# rank count and message size, not by where the ranks are, so in practice
# the two runs agree bitwise, and the line below says whether they did.
python3 - "$work/one.jsonl" "$work/two.jsonl" <<'PY' || fail "two hosts trained differently"
import json, sys

def rows(path):
    rows = [json.loads(line) for line in open(path)]
    return ([r for r in rows if r.get("kind") == "step"],
            [r for r in rows if r.get("split") == "test"])

(one_steps, one_test), (two_steps, two_test) = rows(sys.argv[1]), rows(sys.argv[2])
if len(one_steps) != 12 or len(two_steps) != 12 or len(one_test) != 1 or len(two_test) != 1:
    sys.exit(f"expected 12 step rows and 1 test row each: one host {len(one_steps)} and "
             f"{len(one_test)}, two hosts {len(two_steps)} and {len(two_test)}")
loss = max(abs(a["loss"] - b["loss"]) for a, b in zip(one_steps + one_test, two_steps + two_test))
norm = max(abs(a["grad_norm"] - b["grad_norm"]) / a["grad_norm"]
           for a, b in zip(one_steps, two_steps))
print(f"max |one host - two hosts|: loss {loss:.3g} over 12 steps and the test set, "
      f"gradient norm {norm:.3g} (relative)")
if loss > 1e-5 or norm > 1e-4:
    sys.exit("beyond 1e-5 (loss) or 1e-4 (relative gradient norm)")
PY
if cmp -s "$work/one/checkpoint.tnd" "$work/two/checkpoint.tnd"; then
  echo "checkpoints: bitwise identical"
else
  echo "checkpoints: differ in bits (within the tolerances above)"
fi
no_process_left "the training on one host"
echo "ok: two hosts train as one host does"

# A long training over both hosts in the background ($job), started once
# rank 0 prints the model (at most 60 s) and every rank sits where it
# should: start_training TRAINER_FLAGS... [-- MPIRUN_FLAGS...]
start_training() {
  local flags=() mpi=()
  while [[ $# -gt 0 && $1 != -- ]]; do flags+=("$1"); shift; done
  [[ ${1:-} == -- ]] && shift && mpi=("$@")
  timeout -k 5 150 "${host_a[@]}" "${two_hosts[@]}" "${mpi[@]}" "$rank" "$work/state" - \
    "$train" --epochs=200 --max_train=2000 --max_test=200 --hidden=32 "${flags[@]}" \
    >"$log" 2>&1 &
  job=$!
  for _ in $(seq 600); do
    grep -q "^model:" "$log" && break
    sleep 0.1
  done
  grep -q "^model:" "$log" || fail "training did not start"
  sleep 1
  ranks_ran_where_expected
}

echo "=== 3. SIGKILL to a rank on host B"
start_training --collective_timeout=20
victim=$(cut -d' ' -f1 "$work/state/rank3")
[[ $(ip netns identify "$victim") == "$ns_b" ]] \
  || fail "rank 3 (pid $victim) is not in host B's namespace"
echo "killing rank 3 (pid $victim, on host B) with SIGKILL"
start=$(date +%s%N)
kill -9 "$victim"
for _ in $(seq 600); do
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$job" 2>/dev/null && fail "the job still runs 60 s after a rank was killed"
wait "$job"
rc=$?
job=""
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
[[ $rc -ne 0 ]] || fail "mpirun exited 0 after a rank was killed"
grep -qiE "signal 9|killed|abort|collective timeout" "$log" \
  || fail "no message about the killed rank"
no_process_left "the killed job"
grep -iE -m 2 "signal 9|killed|collective timeout" "$log"
seconds="$((elapsed_ms / 1000)).$((elapsed_ms % 1000 / 100))"
echo "ok: the job ended with status $rc, $seconds s after the kill; no process left"

echo "=== 4. the link between the hosts cut mid-run"
# With Open MPI's out-of-band TCP keepalive set as docs/mpi.md shows, each
# side's daemon notices the dead link within about 5 s and the whole job
# ends; Open MPI's defaults (300 s idle, then 9 probes 20 s apart) would
# keep mpirun and host B's daemon for minutes. The collective timeout is
# longer than that, so the daemons, not the ranks' watchdogs, end the job.
keepalive=(--mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1
  --mca oob_tcp_keepalive_probes 3)
rm -f "$work"/state/rank*
start_training --collective_timeout=30 -- "${keepalive[@]}"
start=$(date +%s%N)
ip -n "$ns_b" link set veth-b down || fail "cannot cut the link"
echo "cut the link between the hosts"
job_ms="" b_ms=""
for _ in $(seq 300); do  # at most 30 s
  now=$((($(date +%s%N) - start) / 1000000))
  [[ -z $job_ms ]] && ! kill -0 "$job" 2>/dev/null && job_ms=$now
  [[ -z $b_ms && -z $(ip netns pids "$ns_b" 2>/dev/null) ]] && b_ms=$now
  [[ -n $job_ms && -n $b_ms ]] && break
  sleep 0.1
done
[[ -n $job_ms ]] || fail "mpirun still runs 30 s after the link was cut"
[[ -n $b_ms ]] || fail "host B still runs $(ip netns pids "$ns_b" | xargs -r ps -o args= -p) 30 s after the cut"
wait "$job"
rc=$?
job=""
[[ $rc -ne 0 ]] || fail "mpirun exited 0 after the link was cut"
grep -q "ORTE has lost communication with a remote daemon" "$log" \
  || fail "no message about the lost host"
no_process_left "the job whose link was cut"
echo "ok: the job ended with status $rc, mpirun $job_ms ms and host B $b_ms ms after the cut; no process left"

teardown
trap - EXIT
for ns in "$ns_a" "$ns_b"; do
  ip netns list | grep -qF "$ns" && { echo "FAIL: namespace $ns remains after teardown"; exit 1; }
done
echo PASS
