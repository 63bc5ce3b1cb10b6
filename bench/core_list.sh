# Sourced by the bench scripts that pin runs to a list of cores: sets $n to
# the number of cores in the taskset list $cores, or exits with status 2
# saying what is wrong when the list is malformed or names cores this
# machine does not have.
#   cores=$1; . "$here/core_list.sh"; taskset -c "$cores" ... --threads="$n"
n=0
IFS=, read -r -a core_parts <<< "$cores"
for part in "${core_parts[@]}"; do
  if [[ $part =~ ^[0-9]+$ ]]; then n=$((n + 1))
  elif [[ $part =~ ^([0-9]+)-([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ]; then
    n=$((n + BASH_REMATCH[2] - BASH_REMATCH[1] + 1))
  else n=0; break; fi
done
if [ "$n" -eq 0 ] || [ "$(taskset -c "$cores" nproc 2>/dev/null)" != "$n" ]; then
  echo "$(basename "$0"): CORES '$cores' is not a list of this machine's cores" \
    "(0-$(($(nproc --all) - 1)); e.g. 3 or 0-7)" >&2
  exit 2
fi
