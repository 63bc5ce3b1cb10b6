#!/bin/bash
# Open MPI's rsh agent (--mca plm_rsh_agent) for two_hosts_test.sh: it
# stands in for ssh. mpirun calls it as `two_hosts_agent.sh HOST WORDS...`,
# the words forming one shell command (the daemon, orted), as ssh would
# pass them on. HOST must be the second host's address; the command then
# runs in that host's network namespace, under its host name (a UTS
# namespace of its own), with the environment a fresh login has rather
# than mpirun's: ranks there get only what mpirun's -x passes on.
#
# The test sets TWO_HOSTS_B_ADDR, TWO_HOSTS_B_NETNS and TWO_HOSTS_B_NAME.
set -u
host=$1
shift
if [[ $host != "${TWO_HOSTS_B_ADDR:-}" ]]; then
  echo "two_hosts_agent.sh: no simulated host '$host' (the second host is" \
       "'${TWO_HOSTS_B_ADDR:-unset}')" >&2
  exit 1
fi
exec env -i PATH="$PATH" HOME="${HOME:-/root}" TMPDIR="${TMPDIR:-/tmp}" \
  ip netns exec "$TWO_HOSTS_B_NETNS" unshare --uts \
  sh -c 'hostname "$1" && exec sh -c "$2"' sh "$TWO_HOSTS_B_NAME" "$*"
