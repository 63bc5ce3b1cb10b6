#!/usr/bin/env bash
# Renders an SVG in headless Chromium and saves a screenshot, to check by eye
# that a plot draws as intended (axes, labels, legend, curves in the frame).
#
#   tools/check_svg.sh                          # sample plot -> training_curves.png
#   tools/check_svg.sh plot.svg out.png         # any SVG
#   tools/check_svg.sh plot.svg out.png 960x420   # window size (default 1000x700)
#   tools/check_svg.sh "" out.png 960x420         # the sample plot, cropped to it
#
# With no SVG given (or ""), builds //report:svg_demo and renders its
# sample plot; docs/images/training_curves.png is made by the last line.
# Needs the Debian package `chromium` (installed here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

svg="${1:-}"
png="${2:-training_curves.png}"
size="${3:-1000x700}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ -z "$svg" ]; then
  timeout 900 bazel build //report:svg_demo
  svg="$work/training_curves.svg"
  bazel-bin/report/svg_demo "$svg"
fi
if [ ! -f "$svg" ]; then
  echo "check_svg: no such SVG file: $svg" >&2
  exit 1
fi

if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "check_svg: installing chromium (Debian package)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    chromium fonts-dejavu-core
fi

if command -v xmllint >/dev/null 2>&1; then
  xmllint --noout "$svg"  # a browser draws some broken XML anyway; xmllint won't
fi

svg_abs="$(cd "$(dirname "$svg")" && pwd)/$(basename "$svg")"
case "$png" in /*) png_abs="$png" ;; *) png_abs="$PWD/$png" ;; esac
profile="$work/profile"
# No network, no first-run or background services: the render is offline
# and leaves nothing behind but the PNG.
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" --window-size="${size/x/,}" \
  --screenshot="$png_abs" "file://$svg_abs" 2>"$work/chromium.log" || {
  cat "$work/chromium.log" >&2
  exit 1
}
if [ ! -s "$png_abs" ]; then
  echo "check_svg: chromium wrote no screenshot; its log:" >&2
  cat "$work/chromium.log" >&2
  exit 1
fi
echo "check_svg: rendered $svg -> $png_abs ($size)"
