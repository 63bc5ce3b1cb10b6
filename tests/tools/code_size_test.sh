#!/usr/bin/env bash
# Every library source (core, data, io, layers, parallel, report) within the
# size rules of tools/check_code_size.py; then the checker itself must flag a
# long function and a long file, so the test cannot pass by checking nothing.
set -euo pipefail
checker=tools/check_code_size.py
sources=$(find core data io layers parallel report -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' | sort)
count=$(echo "$sources" | wc -l)
[ "$count" -ge 50 ] || { echo "only $count library sources found"; exit 1; }
python3 "$checker" $sources

long="$TEST_TMPDIR/long.cc"
{ echo "int Long() {"; for i in $(seq 85); do echo "  int x$i = $i;"; done; echo "  return 0;"; echo "}"; } > "$long"
if python3 "$checker" "$long" > "$TEST_TMPDIR/out.txt"; then
  echo "check_code_size.py accepted an 88-line function"; exit 1
fi
grep -q "function 'Long' has 88 lines" "$TEST_TMPDIR/out.txt"
if python3 "$checker" --max_file=10 "$long" > /dev/null; then
  echo "check_code_size.py accepted a file over --max_file"; exit 1
fi
echo "code_size_test: $count library sources within the limits; the checker flags both limits"
