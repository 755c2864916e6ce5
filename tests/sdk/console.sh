#!/usr/bin/env bash
# The venue console (/console, issue 40) in Debian's headless Chromium, used as a person uses
# it against a living market on the manual clock (console.py says each stage and what it
# asserts). Each stage's screenshot stays in tests/sdk/.generated/console/ for review by eye.
# Run by run.sh; on its own: bash tests/sdk/console.sh (Chromium installed as run.sh does).
set -euo pipefail
source "$(dirname "$0")/common.sh"  # sets $here and $root, and works in $here
ensure_venv
command -v chromium >/dev/null || { echo "chromium is missing: run tests/sdk/run.sh"; exit 1; }
work="$(mktemp -d)"
trap '[ -n "${server:-}" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
start_server --market-maker on --price-feed random-walk
bin="${CARGO_TARGET_DIR:-$root/target}/debug/perpsim"
out="$here/.generated/console"
rm -rf "$out" && mkdir -p "$out"
if result="$(.venv/bin/python console.py "http://$address" "$bin" "$work/data" "$out")"; then
  echo "$result" >"$out/result.json"
  heap="$(.venv/bin/python -c 'import json, sys; d = json.load(sys.stdin)["day"]; print(
    "JS heap %.2f MB after the first hour, %.2f MB when its bounds filled, %.2f MB after the day"
    % (d["heap_after_first_hour"] / 1e6, d["heap_when_full"] / 1e6, d["heap_after_day"] / 1e6))' \
    <<<"$result")"
  echo "console: 1 passed, 0 failed ($heap; screenshots: tests/sdk/.generated/console/)"
else
  echo "$result"
  echo "console: 0 passed, 1 failed (server log: $(tail -5 "$work/server.log"))"
  exit 1
fi
