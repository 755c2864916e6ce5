#!/usr/bin/env bash
# The WebSocket client of docs/websocket.md (python/book_client.py) against a busy simulated
# hour: the market maker re-quoting under the random walk, with a fault plan striking the
# book stream at random (skipped sequences, corrupted checksums, upstream errors). The client
# must end holding exactly the top of book REST shows, and the recovery report must show every
# strike recovered. Run by run.sh; on its own: bash tests/sdk/ws_client.sh [ADVANCES].
set -euo pipefail
source "$(dirname "$0")/common.sh"  # sets $here and $root, and works in $here
ensure_venv
advances="${1:-360}"
# The client docs/websocket.md shows is the one run here.
readme_client="$(sed -n '/^<!-- book_client.py -->$/,/^<!-- \/book_client.py -->$/p' "$root/docs/websocket.md" | sed '1,2d;$d' | sed '$d')"
if [ "$readme_client" != "$(cat python/book_client.py)" ]; then
  echo "docs/websocket.md's WebSocket client differs from tests/sdk/python/book_client.py: 0 passed, 1 failed"
  exit 1
fi
work="$(mktemp -d)"
trap '[ -n "${server:-}" ] && kill "$server" 2>/dev/null; [ -n "${client:-}" ] && kill "$client" 2>/dev/null; rm -rf "$work"' EXIT
start_server --market-maker on --price-feed random-walk
bin="${CARGO_TARGET_DIR:-$root/target}/debug/perpsim"
url="http://$address"
key="$work/data/demo-broker.key"
admin() {
  "$bin" admin --url "$url" --token-file "$work/data/admin.token" "$@" >"$work/admin.out" \
    2>"$work/admin.err" || { cat "$work/admin.err" "$work/admin.out"; exit 1; }
}
topic="orderbook-stream:BTC-USDC-PERP"
admin faults set "{\"seed\": 42, \"channel\": [
  {\"kind\": \"skip_sequence\", \"topic\": \"$topic\", \"rate\": \"0.04\", \"count\": 1000},
  {\"kind\": \"corrupt_checksum\", \"topic\": \"$topic\", \"rate\": \"0.04\", \"count\": 1000},
  {\"kind\": \"upstream_error\", \"topic\": \"$topic\", \"rate\": \"0.02\", \"count\": 1000}]}"
.venv/bin/python python/book_client.py "ws://$address/v1/ws" --key "$key" --seconds 600 \
  --until-file "$work/done" >"$work/client.json" 2>"$work/client.log" &
client=$!
sleep 1
for _ in $(seq 1 "$advances"); do admin advance --seconds 10; done
# The faults stop; a last minute lets the client see a final gap and resync.
admin faults clear
for _ in $(seq 1 6); do admin advance --seconds 10; done
touch "$work/done"
wait "$client" || { cat "$work/client.log"; echo "websocket client: 0 passed, 1 failed"; exit 1; }
client=""
"$bin" curl GET /v1/tickers/BTC-USDC-PERP --url "$url" --key "$key" >"$work/ticker.json" 2>/dev/null
admin faults report
cp "$work/admin.out" "$work/report.json"
.venv/bin/python - "$work/client.json" "$work/ticker.json" "$work/report.json" <<'PY'
import json, sys
held, ticker, report = (json.load(open(p)) for p in sys.argv[1:4])
problems = []
if (held["best_bid"], held["best_ask"]) != (ticker["best_bid"], ticker["best_ask"]):
    problems.append(f"top of book {held['best_bid']}/{held['best_ask']} but REST shows {ticker['best_bid']}/{ticker['best_ask']}")
if report["injected"] == 0 or report["unrecovered"] != 0:
    problems.append(f"report: {report['injected']} injected, {report['unrecovered']} unrecovered")
if len(held["resyncs"]) < report["injected"] // 2:
    problems.append(f"only {len(held['resyncs'])} resyncs for {report['injected']} strikes")
summary = (f"{held['frames']} frames, {held['verified']} checksums verified, "
           f"{len(held['resyncs'])} resyncs after {report['injected']} strikes, "
           f"{report['recovered']} recovered")
if problems:
    print("websocket client:", "; ".join(problems), f"({summary})")
    print("websocket client: 0 passed, 1 failed")
    sys.exit(1)
print(f"websocket client: {summary}; top of book {held['best_bid']}/{held['best_ask']} as REST")
print("websocket client: 1 passed, 0 failed")
PY
