#!/bin/bash
# Signed reads while a long advance runs (D3): a manual-clock server with the living market,
# `perpsim admin advance --seconds 43200` (twelve one-hour steps), and `perpsim curl GET
# /v1/instruments` in a loop meanwhile (the CLI's start included in each read's time; ten
# idle reads first say what that costs). Prints one line: the advance's wall time, the idle
# read's median, and the reads answered meanwhile with their median and slowest.
#
#   cargo build --release -p perpsim-api
#   benches/advance-reads.sh [target/release/perpsim] [PORT]
set -eu
bin=${1:-target/release/perpsim}
port=${2:-18190}
dir=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$dir"' EXIT
export PERPSIM_URL=http://127.0.0.1:$port PERPSIM_DATA_DIR=$dir
"$bin" serve --listen "127.0.0.1:$port" --data-dir "$dir" --clock manual \
  --start 2026-01-01T00:00:00Z --market-maker on --price-feed random-walk \
  > "$dir/server.log" 2>&1 &
server=$!
for _ in $(seq 1 300); do
  "$bin" curl GET /v1/instruments > /dev/null 2>&1 && break
  sleep 0.1
done
micros() { echo $(( ($(date +%s%N) - $1) / 1000 )); }
read_once() {
  local began
  began=$(date +%s%N)
  "$bin" curl GET /v1/instruments > /dev/null 2>&1 || { echo "a read failed" >&2; exit 1; }
  micros "$began"
}
idle=()
for _ in $(seq 1 10); do idle+=("$(read_once)"); done
began=$(date +%s%N)
"$bin" admin advance --seconds 43200 > "$dir/advance.out" 2>&1 &
advance=$!
during=()
while kill -0 $advance 2> /dev/null; do
  during+=("$(read_once)")
  sleep 0.02
done
wait $advance
whole=$(micros "$began")
python3 - "$whole" "${idle[*]}" "${during[*]}" <<'PY'
import statistics, sys
whole = int(sys.argv[1]) / 1e6
idle = [int(x) / 1e3 for x in sys.argv[2].split()]
during = [int(x) / 1e3 for x in sys.argv[3].split()]
print(f"advance {whole:.2f} s; idle read median {statistics.median(idle):.1f} ms; "
      f"meanwhile {len(during)} reads, median {statistics.median(during):.1f} ms, "
      f"slowest {max(during):.1f} ms")
PY
