#!/usr/bin/env bash
# Each public header of the library is one target named after it
# (check_public_headers.py; README.md, "Use Tandem in your project"); then
# the checker must flag a planted header without a target, and one whose
# same-named target does not provide it, so the test cannot pass by
# checking nothing.
set -euo pipefail
checker=tests/tools/check_public_headers.py
packages=(core layers io parallel data report trainer)
python3 "$checker" "${packages[@]}"

root="$TEST_TMPDIR/planted"
mkdir -p "$root/core"
cp core/BUILD core/*.h "$root/core/"
echo '// A public header that no target is named after.' > "$root/core/orphan.h"
echo '// Internal to //core:tensor: exempt.' > "$root/core/tensor_detail.h"
printf '// Provided by another target than its namesake.\n' > "$root/core/misnamed.h"
echo 'cc_library(name = "misnamed", hdrs = ["check.h"])' >> "$root/core/BUILD"
if python3 "$checker" --root="$root" core > "$TEST_TMPDIR/out.txt"; then
  echo "check_public_headers.py accepted a header without a target"; exit 1
fi
cat "$TEST_TMPDIR/out.txt"
grep -q "core/BUILD: no target \`orphan\` for core/orphan.h (no target lists it)" "$TEST_TMPDIR/out.txt"
grep -q "core/BUILD: target \`misnamed\` does not provide core/misnamed.h" "$TEST_TMPDIR/out.txt"
[ "$(wc -l < "$TEST_TMPDIR/out.txt")" -eq 2 ] || { echo "expected exactly the two planted headers"; exit 1; }
echo "public_headers_test: every public header of ${#packages[@]} packages is a target named after it; the checker flags planted ones"
