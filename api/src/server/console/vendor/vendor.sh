#!/usr/bin/env bash
# Fetches the pinned uPlot package from npm, checks its registry integrity, and copies the files
# the console embeds into this folder (see README.md here).
set -euo pipefail
version=1.6.32
integrity="sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack "uplot@$version" --silent >/dev/null
got="sha512-$(openssl dgst -sha512 -binary "uplot-$version.tgz" | base64 -w0)"
[ "$got" = "$integrity" ] || { echo "uplot-$version.tgz: integrity $got, expected $integrity"; exit 1; }
tar xzf "uplot-$version.tgz"
cp package/dist/uPlot.iife.min.js package/dist/uPlot.min.css "$here/"
cp package/LICENSE "$here/LICENSE-uPlot"
sha256sum "$here/uPlot.iife.min.js" "$here/uPlot.min.css" "$here/LICENSE-uPlot"
