# Sourced by the bench scripts that alternate runs round by round on a list
# of cores. Checks $cores, a taskset list of this machine's cores, and sets
# $n to the number of cores in it; checks $rounds, a positive whole number,
# and that every path in the array $bins is an executable file. Exits with
# status 2, saying what is wrong, at the first that is not.
#   cores=$1 rounds=$2 bins=("$3"); . "$here/round_args.sh"
#   taskset -c "$cores" ... --threads="$n"
script=$(basename "$0")
n=0
IFS=, read -r -a core_parts <<< "$cores"
for part in "${core_parts[@]}"; do
  if [[ $part =~ ^[0-9]+$ ]]; then n=$((n + 1))
  elif [[ $part =~ ^([0-9]+)-([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ]; then
    n=$((n + BASH_REMATCH[2] - BASH_REMATCH[1] + 1))
  else n=0; break; fi
done
if [ "$n" -eq 0 ] || [ "$(taskset -c "$cores" nproc 2>/dev/null)" != "$n" ]; then
  echo "$script: CORES '$cores' is not a list of this machine's cores" \
    "(0-$(($(nproc --all) - 1)); e.g. 3 or 0-7)" >&2
  exit 2
fi
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "$script: ROUNDS '$rounds' is not a positive whole number" >&2; exit 2
fi
for bin in "${bins[@]}"; do
  if [ ! -x "$bin" ]; then echo "$script: $bin is not an executable file" >&2; exit 2; fi
done
