#!/usr/bin/env bash
# Judges of the OpenAPI documents in openapi/, each pinned here and installed by this script
# into tests/sdk/.venv and tests/sdk/node_modules (kept between runs, reinstalled when the
# pins change):
#  1. the OpenAPI specification's own validator (openapi-spec-validator, PyPI) and a linter
#     with a recommended ruleset (@redocly/cli, npm): zero errors and zero warnings; the
#     AsyncAPI document through @asyncapi/cli validate (npm): no finding at all;
#  2. SDKs generated from openapi/broker.json, with no generator warning, each running its
#     smoke test against the real perpsim binary on loopback (manual clock);
#  3. schemathesis with every check over the broker API and over the admin API, a few
#     examples per operation (fuzz.sh, fuzz_admin.sh; the full budget is a separate command);
#  4. docs/websocket.md's WebSocket client (python/book_client.py, websockets from PyPI)
#     through an hour of the living market with random faults on the book stream (ws_client.sh);
#  5. the /docs page opened in a real headless Chromium (Debian's package, installed here when
#     missing): it renders and lists every tag; the screenshot stays in .generated/docs.png;
#     and a person's use of it: a key pasted into its signing panel, an order placed with
#     "Try it out" (docs_sign.py, through the DevTools protocol);
#  6. the worked flash crash's report.html in the same Chromium: what happened told before its
#     tables, its charts labelled; the screenshot stays in .generated/report.png;
#  7. the venue console (/console) in the same Chromium, used as a person uses it against a
#     living market, and left open through a simulated day (console.sh, console.py); its
#     screenshots stay in .generated/console/.
# The binary is the one `cargo test --workspace` built (built here if it is missing).
set -euo pipefail
source "$(dirname "$0")/common.sh"  # sets $here and $root, and works in $here

# The Rust SDK (step 2) is generated and compiled from a clean target in CI: progenitor and
# reqwest, 85 s alone. It builds beside the other steps, which leave a core idle most of the
# time, and its smoke runs near the end: before the /docs page's signing, which leaves an order
# resting on the smokes' quiet venue, where the smokes assert their own fills' prices.
rust_target="${CARGO_TARGET_DIR:-$root/target}/sdk-rust"
rust_log="$(mktemp)"
cargo build --manifest-path rust/Cargo.toml --target-dir "$rust_target" >"$rust_log" 2>&1 &
rust_build=$!
# One cleanup for every exit: what is still running is stopped, what was made is removed.
cleanup() {
  [ -n "$rust_build" ] && kill "$rust_build" 2>/dev/null
  [ -n "${server:-}" ] && kill "$server" 2>/dev/null
  rm -f "$rust_log" "${lint:-}"
  [ -z "${work:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# Node tools, exactly as package-lock.json pins them, installed beside the Python tools (on a
# fresh clone 51 s and 41 s one after the other, 62 s together).
lockstamp="node_modules/.pins-$(sha256sum package-lock.json | cut -c1-16)"
if [ ! -f "$lockstamp" ]; then
  (with_retries npm ci --no-audit --no-fund --silent && touch "$lockstamp") &
  npm_install=$!
  ensure_venv
  wait "$npm_install" || { echo "npm ci failed"; exit 1; }
else
  ensure_venv
fi

failed=0
lint="$(mktemp)"
for doc in broker admin; do
  file="$root/openapi/$doc.json"
  if .venv/bin/openapi-spec-validator "$file"; then :; else failed=1; fi
  # --max-problems keeps the report whole; warnings fail too (the config waives with reasons).
  if ./node_modules/.bin/redocly lint "$file" --config redocly.yaml --max-problems 1000 \
      --format stylish 2>&1 | grep -v '║\|╔\|╚' | tee "$lint" \
      && ! grep -qE '^\s+[0-9]+:[0-9]+\s+(error|warning)' "$lint"; then
    :
  else
    failed=1
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "OpenAPI documents: 0 passed, 1 failed"
  exit 1
fi
echo "OpenAPI documents: 1 passed, 0 failed"

# The AsyncAPI document of the channels: @asyncapi/cli's validator, failing on any finding
# down to information (the black-box tests check every frame they read against it).
if SUPPRESS_NO_CONFIG_WARNING=1 ./node_modules/.bin/asyncapi validate \
    "$root/openapi/asyncapi.yaml" --fail-severity=info; then
  echo "AsyncAPI document: 1 passed, 0 failed"
else
  echo "AsyncAPI document: 0 passed, 1 failed"
  exit 1
fi

# The real binary, on a manual clock in a fresh data dir. The smokes assert exact fill prices
# between their own two customers, so the venue is quiet: fixed prices, no market maker (the
# fuzz run below judges the contract with the living market of the defaults).
work="$(mktemp -d)"
start_server --market-maker off --price-feed fixed
url="http://$address"

# Python: openapi-python-client.
generated="$here/.generated"
rm -rf "$generated/python" && mkdir -p "$generated/python"
.venv/bin/openapi-python-client generate --path "$root/openapi/broker.json" --meta none \
  --config python/config.yml --output-path "$generated/python/perpsim_client" \
  >"$work/python-gen.log" 2>&1 || { cat "$work/python-gen.log"; exit 1; }
if grep -qi 'warning' "$work/python-gen.log"; then
  cat "$work/python-gen.log"
  echo "python sdk: the generator warned: 0 passed, 1 failed"
  exit 1
fi
PYTHONPATH="$generated/python:$here/python" .venv/bin/python python/smoke.py "$url" "$work/data"

# TypeScript: openapi-typescript types and the openapi-fetch client, compiled by tsc --strict
# so the document's null types are what the smoke test must handle.
ts="$generated/typescript"
rm -rf "$ts" && mkdir -p "$ts"
./node_modules/.bin/openapi-typescript "$root/openapi/broker.json" -o "$ts/schema.d.ts" \
  >"$work/ts-gen.log" 2>&1 || { cat "$work/ts-gen.log"; exit 1; }
if grep -qi 'warn' "$work/ts-gen.log"; then
  cat "$work/ts-gen.log"
  echo "typescript sdk: the generator warned: 0 passed, 1 failed"
  exit 1
fi
cp typescript/signing.ts typescript/smoke.ts typescript/tsconfig.json "$ts/"
echo '{"type": "module"}' >"$ts/package.json"
./node_modules/.bin/tsc -p "$ts/tsconfig.json"
node "$ts/out/smoke.js" "$url" "$work/data"

# Property-based fuzzing with a small budget (the full run is `bash fuzz.sh`; docs/sdk.md).
bash "$here/fuzz.sh" "${PERPSIM_FUZZ_EXAMPLES:-5}" 1 >"$work/fuzz.log" 2>&1 \
  || { cat "$work/fuzz.log"; echo "schemathesis: 0 passed, 1 failed"; exit 1; }
grep -E '^  [0-9]+ generated' "$work/fuzz.log" | sed 's/^ */schemathesis: /'
bash "$here/fuzz_admin.sh" "${PERPSIM_FUZZ_EXAMPLES:-5}" 1 >"$work/fuzz-admin.log" 2>&1 \
  || { cat "$work/fuzz-admin.log"; echo "schemathesis (admin): 0 passed, 1 failed"; exit 1; }
grep -E '^  [0-9]+ generated' "$work/fuzz-admin.log" | sed 's/^ */schemathesis (admin): /'

# docs/websocket.md's WebSocket client through a busy simulated hour with random channel faults: it
# ends holding REST's top of book and the recovery report shows every strike recovered.
bash "$here/ws_client.sh"

# The docs page in Debian's Chromium: rendered, every tag of the document listed.
if ! command -v chromium >/dev/null; then
  [ "$(id -u)" -eq 0 ] || { echo "chromium is missing: apt-get install chromium (as root)"; exit 1; }
  with_retries apt-get update -qq
  DEBIAN_FRONTEND=noninteractive with_retries apt-get install -y -qq chromium >/dev/null
fi
browser=(chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync
  --user-data-dir="$work/chromium" --virtual-time-budget=20000 --window-size=1280,2400)
"${browser[@]}" --dump-dom "$url/docs" >"$work/docs.html" 2>/dev/null
"${browser[@]}" --screenshot="$generated/docs.png" "$url/docs" >/dev/null 2>&1
missing=0
for tag in $(.venv/bin/python -c 'import json,sys; print(" ".join(t["name"] for t in json.load(open(sys.argv[1]))["tags"]))' "$root/openapi/broker.json"); do
  grep -q "data-tag=\"$tag\"" "$work/docs.html" || { echo "docs page: tag $tag is not listed"; missing=1; }
done
grep -q 'perpsim broker API' "$work/docs.html" || { echo "docs page: no title"; missing=1; }
[ -s "$generated/docs.png" ] || { echo "docs page: no screenshot"; missing=1; }
if [ "$missing" -ne 0 ]; then
  echo "docs page: 0 passed, 1 failed"
  exit 1
fi
echo "docs page: 1 passed, 0 failed (screenshot: tests/sdk/.generated/docs.png, $(chromium --version 2>/dev/null))"

bin="${CARGO_TARGET_DIR:-$root/target}/debug/perpsim"

# A risk analyst's report (issue 39 item 5): the worked flash crash's report.html opened in
# the same Chromium: it tells what happened before its tables and labels its charts; the
# screenshot stays in .generated/report.png for review by eye.
"$bin" scenario examples --out "$work/scenarios" >/dev/null
"$bin" replay "$work/scenarios/flash-crash.yaml" --out "$work/flash-crash" --quiet >/dev/null 2>&1
page="file://$work/flash-crash/report.html"
"${browser[@]}" --dump-dom "$page" >"$work/report.html" 2>/dev/null
"${browser[@]}" --screenshot="$generated/report.png" "$page" >/dev/null 2>&1
missing=0
for text in "What happened" "was liquidated at leverage ratio" "auto-deleveraging on BTC-USDC-PERP" \
    "Insurance paid" "price, USDC" "higher is safer" "margin call below" "liquidation below"; do
  grep -q "$text" "$work/report.html" || { echo "report page: no \"$text\""; missing=1; }
done
[ -s "$generated/report.png" ] || { echo "report page: no screenshot"; missing=1; }
if [ "$missing" -ne 0 ]; then
  echo "report page: 0 passed, 1 failed"
  exit 1
fi
echo "report page: 1 passed, 0 failed (screenshot: tests/sdk/.generated/report.png)"

# The venue console (issue 40), in the same Chromium: a person's use of it, stage by stage.
bash "$here/console.sh"

# Rust (step 2): progenitor generates the client at build time (build.rs) from
# openapi/broker.json (the build started at the top); a generator error or a compiler warning
# fails.
built=0
wait "$rust_build" || built=$?
rust_build=""
if [ "$built" -ne 0 ] || grep -q '^warning' "$rust_log"; then
  cat "$rust_log"
  echo "rust sdk: build failed or warned: 0 passed, 1 failed"
  exit 1
fi
"$rust_target/debug/perpsim-sdk-smoke" "$url" "$work/data"

# Step 5's second half: a person in /docs pastes the demo broker's key into the signing panel
# and places an order with "Try it out" (docs_sign.py drives the page through the DevTools
# protocol); the page shows 201 and the order is there over REST.
cli=(--url "$url" --data-dir "$work/data")
customer="$("$bin" curl POST v1/customers '{}' --field customer_code "${cli[@]}" 2>/dev/null)"
"$bin" curl POST "v1/customers/$customer/deposits" '{"asset":"USDC","amount":"1000"}' \
  "${cli[@]}" >/dev/null 2>&1
"$bin" admin "${cli[@]}" advance --seconds 1 >/dev/null 2>&1
answer="$(.venv/bin/python docs_sign.py "$url" "$work/data/demo-broker.key" "$customer" docs-1)"
shown="$(echo "$answer" | .venv/bin/python -c 'import json,sys; a=json.load(sys.stdin); print(a["status"], a["key_left_in_page"] == "")')"
order="$("$bin" curl GET "v1/customers/$customer/orders/docs-1" --field status "${cli[@]}" 2>/dev/null || true)"
if [ "$shown" = "201 True" ] && [ "$order" = open ]; then
  echo "docs page signing: 1 passed, 0 failed (an order placed from /docs, signed in the page)"
else
  echo "$answer"
  echo "docs page signing: 0 passed, 1 failed (page: $shown, order over REST: $order)"
  exit 1
fi
