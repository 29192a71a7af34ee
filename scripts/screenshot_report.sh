#!/usr/bin/env bash
# Render a prbj report.html to a PNG with headless Chromium, to check by eye that the charts draw.
#
#   scripts/screenshot_report.sh reports/<run-id>/report.html [out.png] [WIDTHxHEIGHT]
#
# Needs Debian's `chromium` package (apt-get install -y chromium). Every network feature Chromium has is
# switched off: the report must render from the file alone.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 3 ]]; then
    echo "usage: $0 REPORT_HTML [OUT_PNG] [WIDTHxHEIGHT]" >&2
    exit 2
fi
html="$1"
out="${2:-${html%.html}.png}"
size="${3:-1280x2400}"
if [[ ! -f "$html" ]]; then
    echo "error: $html: file not found" >&2
    exit 2
fi
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
if [[ -z "$browser" ]]; then
    echo "error: no chromium on PATH; install it with: apt-get install -y chromium" >&2
    exit 2
fi

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --hide-scrollbars \
    --screenshot="$(realpath -m "$out")" --window-size="${size/x/,}" \
    "file://$(realpath "$html")" >/dev/null 2>&1
if [[ ! -s "$out" ]]; then
    echo "error: chromium wrote no screenshot to $out" >&2
    exit 1
fi
echo "$out"
