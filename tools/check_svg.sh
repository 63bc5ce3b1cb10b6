#!/usr/bin/env bash
# Renders a training plot in headless Chromium, saves a screenshot and checks
# it: the picture is not empty, and the title (the one line that spans the
# plot) is drawn and stays clear of both edges, not cut off.
#
#   tools/check_svg.sh                          # a real run's plot -> training_curves.png
#   tools/check_svg.sh plot.svg out.png         # any SVG (window 1000x700)
#   tools/check_svg.sh plot.svg out.png 960x420   # window size
#
# With no SVG given (or ""), trains the Fashion-MNIST example briefly with
# --plot (the default model and title on a 3,000-example subset, 3 epochs, 2
# workers: `bazel run -c opt`, as tools/train.sh builds it) and renders that
# plot at its own size, 960x420; docs/images/training_curves.png is made so.
# Needs the Debian package `chromium` (installed here if missing); the
# screenshot check needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."

svg="${1:-}"
png="${2:-training_curves.png}"
size="${3:-1000x700}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ -z "$svg" ]; then
  svg="$work/training_curves.svg"
  size="${3:-960x420}"
  echo "check_svg: training briefly for a real plot"
  timeout 900 bazel run -c opt //examples:fashion_mnist -- --epochs=3 --max_train=3000 \
    --max_test=1000 --workers=2 --quiet --plot="$svg"
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

# The plot's own width, from the SVG's width attribute: the title is
# centred in it, so a title too wide for the plot reaches both of its edges.
plot_width=$(grep -o '<svg [^>]*width="[0-9]*"' "$svg" | grep -o 'width="[0-9]*"' | head -n 1 |
  tr -dc '0-9')
if ! command -v python3 >/dev/null 2>&1; then
  echo "check_svg: python3 not found: screenshot not checked beyond its size" >&2
else
  python3 - "$png_abs" "${plot_width:-0}" <<'EOF'
# Decodes the screenshot (8-bit RGB or RGBA PNG, as Chromium writes) with
# the standard library and checks the title band: ink in the middle, none
# within 6 px of the plot's left and right edges.
import struct, sys, zlib

path, plot_width = sys.argv[1], int(sys.argv[2])
data = open(path, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat = 8, b""
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + length
assert depth == 8 and color in (2, 6) and interlace == 0, "unexpected PNG format"
bpp = 3 if color == 2 else 4
raw = zlib.decompress(idat)
stride = width * bpp
rows, prev = [], bytearray(stride)
for y in range(height):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line

def ink(x, y):  # darker than the white background
    return min(rows[y][x * bpp:x * bpp + 3]) < 200

assert any(ink(x, y) for y in range(height) for x in range(width)), "the screenshot is blank"
w = min(plot_width or width, width)
band = range(10, min(45, height))  # the title's line (baseline at y=30)
assert any(ink(x, y) for y in band for x in range(w // 3, 2 * w // 3)), "no title drawn"
for name, xs in (("left", range(0, 6)), ("right", range(w - 6, w))):
    assert not any(ink(x, y) for y in band for x in xs), f"the title reaches the {name} edge"
print(f"check_svg: screenshot {width}x{height}: title drawn, clear of the plot's edges")
EOF
fi
echo "check_svg: rendered $svg -> $png_abs ($size)"
