#!/usr/bin/env bash
# The library packages depend on each other one way (check_layering.py,
# the stack in tools/visibility.bzl); then the checker itself must flag a
# planted wrong arrow, so the test cannot pass by checking nothing.
set -euo pipefail
checker=tests/tools/check_layering.py
build_files=(core/BUILD core/cpu/BUILD core/cuda/BUILD layers/BUILD io/BUILD
             parallel/BUILD data/BUILD report/BUILD trainer/BUILD)
python3 "$checker" "${build_files[@]}"

# A copy of core/BUILD with a target that uses a layer, and of layers/BUILD
# with one that uses an example through a select() branch.
root="$TEST_TMPDIR/planted"
mkdir -p "$root/core" "$root/layers"
cp core/BUILD "$root/core/BUILD"
cp layers/BUILD "$root/layers/BUILD"
echo 'cc_library(name = "planted", deps = [":check", "//layers:linear"])' >> "$root/core/BUILD"
echo 'cc_library(name = "planted", deps = select({"//conditions:default": ["//examples:char_lm_data"]}))' \
  >> "$root/layers/BUILD"
if python3 "$checker" --root="$root" "$root/core/BUILD" "$root/layers/BUILD" > "$TEST_TMPDIR/out.txt"; then
  echo "check_layering.py accepted core depending on layers"; exit 1
fi
cat "$TEST_TMPDIR/out.txt"
grep -q "//core:planted depends on //layers:linear, but core may use only core" "$TEST_TMPDIR/out.txt"
grep -q "//layers:planted depends on //examples:char_lm_data" "$TEST_TMPDIR/out.txt"
[ "$(wc -l < "$TEST_TMPDIR/out.txt")" -eq 2 ] || { echo "expected exactly the two planted arrows"; exit 1; }
echo "layering_test: ${#build_files[@]} library BUILD files one way; the checker flags planted arrows"
