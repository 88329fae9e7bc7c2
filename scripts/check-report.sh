#!/usr/bin/env bash
# Opens a `ulnet bench` report in headless Chromium, with no network, and saves a
# full-page screenshot beside it (report.png): the check that report.html stands alone
# and every plot in it renders. Installs Debian's chromium when missing (root).
#
# Usage: scripts/check-report.sh bench-results/<run>/   (default: the newest run)
set -euo pipefail

cd "$(dirname "$0")/.."
dir=${1:-$(ls -d bench-results/*/ 2>/dev/null | sort | tail -n 1)}
[[ -n $dir && -f $dir/report.html ]] || { echo "check-report: no report.html in '${dir}'" >&2; exit 1; }
if ! command -v chromium >/dev/null 2>&1; then
    [[ $(id -u) -eq 0 ]] || { echo "check-report: chromium missing; install it or run as root" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null; }
fi
page=$(realpath "$dir/report.html")
shot=$(realpath "$dir")/report.png
profile=$(mktemp -d -t ulnet-chromium.XXXXXX)
trap 'rm -rf "$profile"' EXIT
# The flags keep Chromium off the network entirely (the page must need none).
timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --window-size=1280,16000 --hide-scrollbars \
    --screenshot="$shot" "file://$page" 2>/dev/null
# Every inline plot must be an <svg> element in the page as Chromium parsed it.
svgs=$(timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --dump-dom "file://$page" 2>/dev/null | grep -o '<svg' | wc -l)
plots=$(find "$dir/plots" -name '*.svg' | wc -l)
echo "check-report: $svgs inline plots rendered of $plots plot files; screenshot: $shot"
[[ $svgs -eq $plots ]]
