#!/bin/bash
# One rank of a two_hosts_test.sh job: mpirun starts this in place of the
# program.
#
#   two_hosts_rank.sh STATE_DIR READONLY_DIR PROGRAM ARGS...
#
# Writes "PID HOSTNAME" to STATE_DIR/rank<R> (R: the rank's world rank),
# then execs PROGRAM in this same process, so PID is the rank's. Ranks
# other than 0 see READONLY_DIR read-only (a bind mount in a mount namespace
# of their own): a write there from any rank but 0 fails, and with it the
# job. READONLY_DIR "-" leaves every rank's view alone.
set -eu
state=$1 readonly_dir=$2
shift 2
rank=${OMPI_COMM_WORLD_RANK:?two_hosts_rank.sh must be started by Open MPI\'s mpirun}
echo "$$ $(hostname)" >"$state/rank$rank"
if [[ $readonly_dir != - && $rank != 0 ]]; then
  # unshare and sh exec in turn: PROGRAM keeps this process's PID.
  exec unshare --mount sh -c \
    'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"' \
    sh "$readonly_dir" "$@"
fi
exec "$@"
